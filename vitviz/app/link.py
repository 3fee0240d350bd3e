"""A link to this view: a URL that reopens the page on the same model, image and choices.

*Copy a link to this view* writes the visitor's view into the URL's query (`?model=cifar10&example=cifar10:7
&token=21&class=cat&method=LeGrad&layer=3&head=1&fusion=mean&discard=0`), copies it and shows it; a teacher
hands it to a class. Opening such a URL sets the controls from it before the page is first drawn. An uploaded
image travels as its name in Gradio's folder on this server (`image=<hash>/<name>`, never a server path), for
as long as the server keeps it; then the link says so and the page shows an example. Every value read from a
link is checked as a visitor's would be: a strange one is left at its default, and the sentence beside the
menu says which.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

import gradio as gr

from vitviz.app import menu, switch
from vitviz.app.inputs import FUSIONS
from vitviz.app.serving.gradio_internals import upload_folder
from vitviz.app.state import Visitor, visitor
from vitviz.data import gallery
from vitviz.explain.methods import CLASS_MAPS
from vitviz.runtime import values

FIELDS = ("model", "class", "method", "layer", "head", "token", "fusion", "discard", "labels", "template")


def view_query(
    model_key: str,
    target: str,
    method: str,
    layer: float,
    head: float,
    token: float,
    fusion: str,
    discard: float,
    image: str | dict | None,
    state: Visitor | None,
    labels: str | None = None,
    template: str | None = None,
) -> dict:
    """The query part of the link ("?model=...") for the view the visitor sees now, in the box that shows it; a
    model scored in words (CLIP, SigLIP) takes its labels and prompt along."""
    v = visitor(state)
    if not _in_words(model_key, v):
        labels = template = None
    values = dict(zip(FIELDS, (model_key, target, method, layer, head, token, fusion, discard, labels, template)))
    values = {k: _plain(x) for k, x in values.items() if x not in (None, "")}
    c = v.crossing
    if c.example is not None:
        values["example"] = f"{c.image_gallery}:{c.example}"
    else:
        path = image.get("path") if isinstance(image, dict) else image
        kept = _kept_name(path)
        if kept:
            values["image"] = kept  # its name in Gradio's folder: no server path in what a visitor reads
    return gr.update(value="?" + urlencode(values), visible=True)


def _in_words(model_key: str, v: Visitor) -> bool:
    try:
        return menu.resolve_model(model_key, v).zero_shot
    except gr.Error:
        return False


def _uploads() -> Path:
    return Path(upload_folder()).resolve()


def _kept_name(path: object) -> str | None:
    """An image file's name inside Gradio's folder ("<hash>/<name>"), or None for a file outside it."""
    if not path:
        return None
    p = Path(str(path)).resolve()
    return str(p.relative_to(_uploads())) if _uploads() in p.parents else None


def _plain(x: object) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


COPY_JS = (
    "(q) => { const u = location.origin + location.pathname + q; "
    "if (navigator.clipboard) navigator.clipboard.writeText(u).catch(() => {}); return u; }"
)  # the full URL, copied where the browser lets the page write the clipboard, and shown either way


def from_link(request: gr.Request | None, state: Visitor | None) -> tuple[dict, str, str | None]:
    """What a link asks for: ({control: value} for the controls it sets, the sentence about what it could not
    give, the image's path or None); nothing for a plain visit."""
    params = dict(getattr(request, "query_params", None) or {})
    wanted = {k: params[k] for k in FIELDS if k in params}
    refused = []
    for name, read in READ.items():
        if name in wanted:
            value = read(wanted.pop(name))
            if value is None:
                refused.append(name)
            else:
                wanted[name] = value
    image, note = _image(params)
    words = f"This link's {', '.join(refused)} could not be used; the defaults are shown instead." if refused else ""
    return wanted, " ".join(n for n in (words, note) if n), image


def _number(lo: float, hi: float, whole: bool = False) -> Callable[[str], float | None]:
    """A link's number in [lo, hi], read as the page and the API read one (vitviz.runtime.values), from the plain
    digits a link this app wrote has; None otherwise."""

    def read(value: str) -> float | None:
        if not (_plain_ascii(value, 24) and re.fullmatch(r"-?[0-9.]+", value)):
            return None
        try:
            return values.number(value, "a link's value", lo, hi, whole=whole)
        except ValueError:
            return None

    return read


def _plain_ascii(value: str, most: int = 200) -> bool:
    """Printable ASCII and not too long: what any value of a link this app wrote is."""
    return isinstance(value, str) and len(value) <= most and value.isascii() and value.isprintable()


READ: dict[str, Callable[[str], object]] = {  # each control's value from the link's text, or None
    "model": lambda m: m if _plain_ascii(m) else None,  # the menu checks the name itself (vitviz.app.menu)
    "class": lambda c: c if _printable(c, 200) else None,  # the model's class list checks it (vitviz.app.switch)
    "method": lambda m: m if m in CLASS_MAPS else None,
    "fusion": lambda f: f if f in FUSIONS else None,
    "layer": _number(1, 99_999, whole=True),
    "head": _number(1, 99_999, whole=True),
    "token": _number(-100_000, 99_999, whole=True),
    "discard": _number(0.0, 0.99),
    "labels": lambda t: t if _printable(t, 2000) else None,  # vitviz.models.words checks the list itself
    "template": lambda t: t if _printable(t, 120) else None,
}


def _printable(value: str, most: int) -> bool:
    """Printable text of at most `most` characters (labels may be in any language)."""
    return isinstance(value, str) and len(value) <= most and value.isprintable()


def _image(params: dict) -> tuple[str | None, str]:
    """(the image a link names, or None; the sentence when it is gone): an example, or a file this server keeps
    (only under Gradio's own folder: a link cannot name any other file)."""
    if "example" in params:
        ds, _, index = params["example"].partition(":")
        items = gallery.items(ds) if ds in ("cifar10", "mnist") else []
        if re.fullmatch(r"\d{1,5}", index) and int(index) < len(items):  # ASCII digits only ("²" is a digit too)
            return items[int(index)][0], ""
        return None, "This link's example is not one of the app's."
    if "image" in params:
        name = params["image"]
        if not (_plain_ascii(name, 1024) and all(0 < len(part) <= 255 for part in name.split("/"))):
            return None, "The image of this link is no longer kept on the server: an example is shown instead."
        root = _uploads()
        path = (root / name).resolve()
        if root in path.parents and path.is_file() and os.access(path, os.R_OK):
            return str(path), ""
        return None, "The image of this link is no longer kept on the server: an example is shown instead."
    return None, ""


def opened(model_key: str, state: Visitor | None, request: gr.Request) -> tuple:
    """The page opened: what the link asks of the model and its controls (for `fit`: the model, the class, the
    layer, head and token, which only the model's own ranges can check), the method, fusion and discard
    (gr.skip() where the link has none), the image, and the note for beside the menu."""
    wanted, note, image = from_link(request, state)
    if note and isinstance(state, Visitor):  # said beside the menu until the visitor acts, not wiped by the
        state.crossing.menu_note = note  # model change that follows the opening (switch.controls_for says it)
    fitted = {k: wanted[k] for k in ("model", "class", "layer", "head", "token", "labels", "template") if k in wanted}
    fitted.setdefault("model", model_key)
    rest = [gr.skip() if wanted.get(k) is None else wanted[k] for k in OPENED[1:6]]
    return (fitted, *rest, gr.skip() if image is None else image, note)


OPENED = ("wanted", "method", "fusion", "discard", "labels", "template", "image", "note")  # its outputs, by name


def model_of(wanted: dict | None) -> str:
    """The model a link asks for (`opened`'s first output), or the shipped CIFAR-10 one."""
    return str(wanted.get("model") or "cifar10") if isinstance(wanted, dict) else "cifar10"


def fit(
    wanted: dict | None,
    state: Visitor | None,
    target: str,
    layer: float,
    head: float,
    patch: float,
    labels: str | None = None,
    template: str | None = None,
) -> tuple:
    """The model change of the page's opening (vitviz.app.switch.controls_for) for the link's model, with the
    link's class, layer, head, token, labels and prompt where it gives them."""
    w = wanted if isinstance(wanted, dict) else {}
    return switch.controls_for(
        model_of(wanted),
        state,
        w.get("class", target),
        w.get("layer", layer),
        w.get("head", head),
        w.get("token", patch),
        w.get("labels", labels),
        w.get("template", template),
    )
