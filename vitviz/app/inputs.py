"""What a visitor or an API caller sends, made safe to use: images, numbers, choices.

Every function here either returns a clean value or raises gr.Error with a sentence
a person understands; none lets a raw Python message through.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import gradio as gr
from PIL import Image

from vitviz.app.serving import limits
from vitviz.data.images import open_image
from vitviz.models.loaded import Token, TokenLayout
from vitviz.pictures import explanation
from vitviz.runtime import values
from vitviz.runtime.values import shown

FUSIONS = ["mean", "max", "min"]
ImagePayload = dict | str | None  # what Gradio sends for an image: a file payload ({"path": ...}) or a path


class FieldError(gr.Error):
    """A gr.Error that knows which control it is about, so the page can say it beside that control."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def about(field: str, e: gr.Error) -> FieldError:
    """`e` as a FieldError about `field` (one already about a field keeps it)."""
    return e if isinstance(e, FieldError) else FieldError(e.message, field)


PREDICTED = "predicted class"


def image_file(payload: ImagePayload) -> str:
    """The path of the image file a Gradio file payload (dict or path) names, once it is there and within the
    upload bound (checked before anything is read, kept or shared); a FieldError about "image" otherwise."""
    try:
        return _image_file(payload)
    except gr.Error as e:
        raise about("image", e) from None


def read_image(payload: ImagePayload) -> Image.Image:
    """The uploaded image from a Gradio file payload (dict or path), opened with vitviz's guards; a FieldError
    about "image" otherwise."""
    path = image_file(payload)
    try:
        return open_image(path)
    except ValueError as e:
        raise about("image", gr.Error(f"That file could not be used: {e}.")) from None


def _image_file(payload: ImagePayload) -> str:
    if payload is None:
        raise gr.Error("Choose an image first: upload one or pick one from the examples.")
    path = payload.get("path") if isinstance(payload, dict) else payload
    if not path or not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise gr.Error("The image could not be found on the server; please upload it again.")
    most = limits.get("VITVIZ_MAX_UPLOAD_MB")
    if os.path.getsize(path) > most * 2**20:  # a file fetched from a URL or sent inline is not an upload's size
        raise gr.Error(f"That file is larger than the {most:g} MB an image may be on this machine.")
    return str(path)


def number(value: object, what: str, lo: float, hi: float, default: float | None = None, where: str = "") -> float:
    """A finite number in [lo, hi]; None or '' gives `default`. `where` ends the range's words (" for this
    model"). The sentences are vitviz.runtime.values', as for the link and the Train form."""
    return _read(value, what, lo, hi, default, where, whole=False)


def whole(value: object, what: str, lo: int, hi: int, default: int | None = None, where: str = "") -> int:
    """A whole number in [lo, hi]; None or '' gives `default`."""
    return int(_read(value, what, lo, hi, default, where, whole=True))


def _read(value: object, what: str, lo: float, hi: float, default: float | None, where: str, whole: bool) -> float:
    span = values.span_of(lo, hi)
    try:
        return values.number(value, what, lo, hi, whole=whole, default=default, span=span + where if span else "")
    except ValueError as e:
        raise gr.Error(str(e)) from None


def choice(value: object, what: str, options: list[str], default: str | None = None) -> str:
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or value not in options:
        raise gr.Error(f"{what} must be one of {', '.join(options)}, not {shown(value, 30)}.")
    return value


def _token_number(value: object, what: str, lo: int, hi: int, refusal: Callable[[str], str]) -> int:
    """A selected token's number in lo..hi-1 (empty: -1), or a FieldError about "patch" saying `refusal(number)`
    (the number as sent, in short)."""
    try:
        p = number(value, what, -math.inf, math.inf, default=-1)
        if not lo <= p < hi:  # a huge number is not echoed back
            raise FieldError(refusal(f"{p:.6g}" if abs(p) < 1e6 else ""), "patch")
        return whole(p, what, lo, hi - 1)
    except gr.Error as e:
        raise about("patch", e) from None


def selected_token(value: object, layout: TokenLayout) -> Token:
    """The selected token (vitviz.models.loaded.Token) from the page's or the API's number (empty: -1): 0 to P-1
    a patch, -1 CLS (SigLIP's pooling query for a model with no token before its patches), -2 to -K the other
    tokens before the patches; a FieldError about "patch", with this model's numbering, for any other value."""
    lo, hi = layout.lowest, layout.num_patches
    number = _token_number(
        value,
        "The selected token",
        lo,
        hi,
        lambda p: (
            f"{f'Token {p}' if p else 'That token'} is not in this model: the selected token must be between {lo} "
            f"and {hi - 1} ({layout.numbering()})."
        ),
    )
    return layout.token(number)


def layer_index(value: object, what: str, count: int, default: int) -> tuple[int, str]:
    """A 1-based layer, head or block of this model, and '' or the sentence saying it was brought into range:
    a value past this model's 1 to `count` (another model's layer, a stale slider) shows the nearest one, and
    the page and the API's reply say so."""
    raw = number(value, what, -math.inf, math.inf, default=default)
    if abs(raw) > 10_000:  # far from any model's range: refused, not brought in
        raise gr.Error(f"{what} must be between 1 and {count} for this model; the number sent is far outside that.")
    v = whole(raw, what, -10_000, 10_000)
    nearest = explanation.nearest_one_based(v, count, default=default)
    if nearest == v:
        return v, ""
    noun = what.removeprefix("The ").lower()
    return nearest, (
        f"⚠️ {noun.capitalize()} {v} is not in this model, which has {noun}s 1 to {count}: {noun} {nearest} is shown."
    )
