"""A number, a yes-or-no or a name sent from outside, read in one place for every door it comes in by: the page,
the API, a link, the Train form and the `vitviz train` command.

pydantic reads the value (a number box's float, an API caller's string, a link's text); what a person reads
when it cannot be used is written here, once: `number` and `flag` return the value or raise ValueError whose
message is that sentence. Callers turn it into their own kind of error (the page's note beside the control,
a ConfigError for a run) and never reword it.
"""

from __future__ import annotations

import functools
import math
from typing import Annotated

from pydantic import Field, TypeAdapter, ValidationError

_FLAG = TypeAdapter(bool)  # true/false, yes/no, on/off, 1/0


@functools.lru_cache(maxsize=256)
def _reader(lo: float, hi: float) -> TypeAdapter:
    """A finite number, in [lo, hi] where those are finite."""
    bounds = {"ge": lo} if math.isfinite(lo) else {}
    bounds |= {"le": hi} if math.isfinite(hi) else {}
    return TypeAdapter(Annotated[float, Field(allow_inf_nan=False, **bounds)])


def shown(value: object, most: int = 40) -> str:
    """Something sent from outside, as a sentence may quote it: as code, printable characters only (others as ?),
    at most `most` of them; a huge number in short."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**12:  # 10**400 has no float
        value = f"{'-' if value < 0 else ''}~1e{int(abs(value).bit_length() * math.log10(2))}"
    text = value if isinstance(value, str) else repr(value)
    clean = "".join(c if c.isprintable() and c != "`" else "?" for c in text[: most + 1])
    return f"`{clean[:most]}{'…' if len(clean) > most else ''}`"


def span_of(lo: float, hi: float) -> str:
    """How a range is said after "must be": "between 0 and 0.99", "at least 1", "" for any number."""
    if math.isfinite(lo) and math.isfinite(hi):
        return f"between {lo:g} and {hi:g}"
    if math.isfinite(lo):
        return f"at least {lo:g}"
    return f"at most {hi:g}" if math.isfinite(hi) else ""


def blank(value: object) -> bool:
    """Nothing sent: None, or an empty or all-space text."""
    return value is None or (isinstance(value, str) and not value.strip())


def number(
    value: object,
    what: str,
    lo: float = -math.inf,
    hi: float = math.inf,
    *,
    whole: bool = False,
    default: float | None = None,
    span: str | None = None,
) -> float | int:
    """`value` as a finite number in [lo, hi] (an int where `whole`); a blank gives `default`. ValueError with a
    sentence naming `what` ("The learning rate") and the range (`span`, said after "must be": "from 1 to 12";
    by default from lo and hi) otherwise."""
    if blank(value):
        if default is None:
            raise ValueError(f"{what} needs a value.")
        return default
    span = span_of(lo, hi) if span is None else span
    say = f" {span}" if span else ""
    if isinstance(value, bool) or (isinstance(value, str) and not value.isascii()):  # "٣" or True is no number here
        raise ValueError(f"{what} must be a number written with the digits 0-9{say}, not {shown(value, 30)}.")
    try:
        v = _reader(lo, hi).validate_python(value)
    except ValidationError as e:
        kind = e.errors()[0]["type"]
        if kind == "finite_number":
            raise ValueError(f"{what} must be a finite number{say}, not {shown(value, 30)}.") from None
        if kind in ("greater_than_equal", "less_than_equal"):
            sent = float(value.strip() if isinstance(value, str) else value)
            raise ValueError(f"{what} must be{say}; {sent:.6g} is out of range.") from None
        raise ValueError(f"{what} must be a number{say}, not {shown(value, 30)}.") from None
    if whole:
        if v != int(v):
            raise ValueError(f"{what} must be a whole number, not {v:g}.")
        return value if isinstance(value, int) else int(v)
    return v


def flag(value: object, what: str) -> bool:
    """`value` as true or false (true/false, yes/no, on/off, 1/0); ValueError with a sentence otherwise."""
    try:
        return _FLAG.validate_python(value.strip().lower() if isinstance(value, str) else value)
    except ValidationError:
        raise ValueError(f"{what} must be true or false, not {shown(value, 30)}.") from None


def name(value: object, what: str) -> str:
    """`value` as a name (stripped text); ValueError with a sentence for anything that is not text."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a name, not {shown(value, 30)}.")
    return value.strip()
