"""What every tab's handlers do the same way, written once.

- `Outputs`: a handler's outputs by name, in the order its event lists them, written once per tab;
  `reply(name=value, ...)` is what the handler returns, every name it does not give left as the page
  shows it (gr.skip()).
- `pictures_reply`: a view's fields as outputs, the pictures drawn now as their encoded files, the
  ones that did not change left as they are.
- `warning`: an error as the sentence the page shows beside its control.
- `token_at`: a click on a picture of the input as the token under it (a patch, or -1 for CLS).
- `token_shown`: the one token control (Explore's number and menu) set to a newly selected token.
- `follower`: the open and follow handlers of a tab drawn from the Explore image.
- `shared`: a tab's redraw for a choice that other tabs show too, setting their controls in the same reply.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection

import gradio as gr
import numpy as np

from vitviz.app.inputs import selected_token
from vitviz.app.menu import resolve_model
from vitviz.app.page import Shell
from vitviz.app.serving import gradio_internals as internals
from vitviz.app.serving.picfiles import REPLIES, PictureFiles, is_served
from vitviz.app.state import Visitor, visitor
from vitviz.pictures import spots
from vitviz.pictures.input_view import sees_spots
from vitviz.pictures.style import PHONE_PX


class Outputs:
    """A handler's outputs by name, in the order of its event's outputs."""

    def __init__(self, *names: str):
        self.names = names

    def reply(self, **values) -> tuple:
        unknown = set(values) - set(self.names)
        if unknown:
            raise KeyError(f"no output called {sorted(unknown)}")
        return tuple(values[n] if n in values else gr.skip() for n in self.names)

    def components(self, c: dict) -> list:
        """The event's outputs: the component of each name."""
        return [c[n] for n in self.names]


def pictures_reply(
    view: object, names: tuple[str, ...], pictures: Collection[str], fresh: set[str], files: PictureFiles
) -> dict:
    """`view`'s fields under `names`: each picture in `pictures` drawn now (in `fresh`) as its file from
    `files` (picfiles), one not drawn now left out (the page keeps it), every other field its value."""
    drawn = {n: getattr(view, n) for n in names if n in pictures and n in fresh}
    encoded = files.paths({n: p for n, p in drawn.items() if isinstance(p, np.ndarray)})
    return {n: encoded[n] if n in encoded else getattr(view, n) for n in names if n not in pictures or n in fresh}


def same_parameters_as(api: Callable) -> Callable[[Callable], Callable]:
    """Give the decorated `fn(*args, **kw)` the parameters of `api` (what Gradio shows for its endpoint), so that
    two endpoints of one form share one signature."""

    def give(fn: Callable) -> Callable:
        fn.__signature__ = inspect.signature(api)
        return fn

    return give


def endpoint(button: gr.Button, fn: Callable, inputs: list, outputs: list, name: str, about: str) -> None:
    """A public API endpoint `/name` on a hidden button: the raw payloads go to `fn` (vitviz.app.inputs reads
    them with its sentences), at most 4 at once. A reply of pictures and plain values is made on the event's own
    thread, in the form Gradio sends it (gradio_internals.replying_as_sent: the event loop every caller shares
    does not post-process it)."""
    as_sent = internals.answerable_as_sent(outputs)
    if as_sent:
        fn = internals.replying_as_sent(fn, outputs, is_served, REPLIES.paths)
    button.click(
        fn,
        inputs,
        outputs,
        preprocess=False,
        postprocess=not as_sent,
        concurrency_limit=4,
        api_name=name,
        api_description=about,
    )


def warning(e: gr.Error) -> str:
    return f"⚠️ {e.message}"


def token_at(model_key: str, state: Visitor | None, evt: gr.SelectData) -> int | dict:
    """A click on the input's picture: the number of the token under it (a patch, or -1 for the tile of the token
    the prediction reads); gr.skip() with no model or no token there."""
    try:
        model = resolve_model(model_key, state)
    except gr.Error:
        return gr.skip()
    token = spots.token_at(sees_spots(model.card.config, model.layout), evt.index[0], evt.index[1], model.layout)
    return gr.skip() if token is None else token.number


def token_shown(model_key: str, state: Visitor | None, number: object) -> dict:
    """The one token control's values for the token `number` (Explore's, which Step by step shares): its number,
    and the menu of the tokens before the patches naming it (empty for a patch); {} where the model or the number
    cannot be had (the page's note says why)."""
    try:
        layout = resolve_model(model_key, state).layout
        token = selected_token(number, layout)
    except gr.Error:
        return {}
    named = token.name if token.patch is None and layout.prefix else None
    return {"patch": token.number, "prefix_token": gr.update(value=named)}


def follower(tab: str, redraw: Callable, outputs: Outputs) -> tuple[Callable, Callable]:
    """(open_tab, follow) for a tab drawn from the Explore image by `redraw(image, model_key, ..., visitor)`.
    Opening the tab draws it (only what changed since it was last drawn is sent) and keeps it up to date;
    `follow`, on a new image or model, redraws it only while it is the tab looked at (otherwise nothing
    now: opening it draws it)."""

    def open_tab(*args) -> tuple:
        *inputs, state = args
        v = visitor(state)
        v.crossing.looking = tab
        return redraw(*inputs, v)

    def follow(*args) -> tuple:
        *inputs, state = args
        v = visitor(state)
        if v.crossing.looking != tab:
            return outputs.reply(state=v)
        return redraw(*inputs, v)

    return open_tab, follow


def style_switch(name: str) -> Callable:
    """The handler of a control that changes how this visitor's pictures are drawn (vitviz.pictures.style):
    Large type, patch numbers, a narrow screen."""

    def switch(on: object, state: Visitor | None) -> Visitor:
        v = visitor(state)
        v.restyle(**{name: on if name != "narrow" else (isinstance(on, (int, float)) and 0 < on <= PHONE_PX)})
        return v

    return switch


def reading(event: dict, copies: dict) -> dict:
    """`event` made to read, for each of its inputs in `copies`, the control it copies instead, and to show that
    value on the copy in the same reply."""
    inputs = [copies.get(c, c) for c in event["inputs"]]
    at, fn = [event["inputs"].index(c) for c in copies], event["fn"]

    def run(*args) -> tuple:
        return (*fn(*args), *[args[i] for i in at])

    return {**event, "fn": run, "inputs": inputs, "outputs": [*event["outputs"], *copies]}


def shared(event: dict, control: gr.components.Component, copies: list) -> dict:
    """`event` (a tab's redraw: fn, inputs, outputs) for the visitor's own change of `control` (its `.input`),
    made to show the new value on the same choice's controls on other tabs (`copies`) in the same reply: one
    choice per visitor, set where it is made, in one server event. Every tab listens to its visitor's changes
    only, so a copy set here starts nothing; the tab it is on draws it when opened."""
    at, fn = event["inputs"].index(control), event["fn"]

    def run(*args) -> tuple:
        return (*fn(*args), *[args[at]] * len(copies))

    return {**event, "fn": run, "outputs": [*event["outputs"], *copies], "trigger_mode": "always_last"}


def follow_image(
    tab: gr.Tab,
    image: gr.Image,
    shell: Shell,
    redraw: dict,
    open_tab: Callable,
    follow: Callable,
    fit: dict,
    copies: dict | None = None,
) -> dict:
    """Wire a tab drawn from the Explore image: drawn when opened, redrawn on a new image or model while looked
    at. `redraw`: fn, inputs and outputs of its update; `fit`: fn, inputs and outputs of what fits its controls
    to a new model before the redraw; `copies`: its controls that show a choice another tab shares (vitviz.app.
    page.SHARED_CHOICES), each with the control where that choice was last made, which opening the tab reads
    and shows. Returns the update's event settings, for the tab's own controls."""
    page = dict(**redraw, preprocess=False, api_visibility="private", trigger_mode="always_last", concurrency_limit=4)
    tab.select(**reading({**page, "fn": open_tab}, copies or {}))
    image.change(**{**page, "fn": follow})
    shell.model_dd.change(**fit, api_visibility="private").then(**{**page, "fn": follow})
    return page
