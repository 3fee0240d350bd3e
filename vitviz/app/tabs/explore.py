"""The Explore tab: one image through the chosen model, every attention picture, a token to pick.

Its layout is vitviz.app.tabs.explore_layout (`build`); here are its handlers, then the wiring (`wire`). The
pictures are vitviz.pictures.explore's `ExploreView`; its field order is the order of the outputs, written once.
The page's events send only the pictures that changed (the rest are gr.skip()) and put an error beside the
control it is about; the API endpoints (/explain, /export, /predict) answer every picture, or a gr.Error with
the same sentence. A newly selected token (a click, its number, its menu, Back to CLS) is one event.
"""

from __future__ import annotations

import gradio as gr
import torch

from vitviz.app import switch
from vitviz.app.handlers import Outputs, endpoint, pictures_reply, same_parameters_as, token_shown, warning
from vitviz.app.inputs import (
    FUSIONS,
    PREDICTED,
    FieldError,
    ImagePayload,
    choice,
    layer_index,
    number,
    selected_token,
)
from vitviz.app.menu import in_words, resolve_model
from vitviz.app.page import Shell
from vitviz.app.selection import Selection, select
from vitviz.app.serving.activity import ACTIVITY
from vitviz.app.serving.limits import method_refusal
from vitviz.app.state import Visitor, visitor
from vitviz.app.tabs.explore_layout import METHOD, OPTIONS
from vitviz.explain.methods import CLASS_MAPS
from vitviz.models.loaded import LoadedViT
from vitviz.pictures import explanation, spots
from vitviz.pictures import explore as explore_pictures
from vitviz.pictures.input_view import sees_spots
from vitviz.runtime import scratch

NOTES = ("image_note", "target_note", "patch_note")


def explore_view(
    image: ImagePayload,
    model_key: str = "cifar10",
    fusion: str = "mean",
    discard: float = 0.0,
    target: str | None = PREDICTED,
    layer: float = 6,
    head: float = 1,
    patch: float = -1,
    alpha: float = 0.6,
    smooth: bool = True,
    shared: bool = False,
    method: str = METHOD,
    labels: str | None = None,
    template: str | None = None,
    state: Visitor | None = None,
) -> tuple[explore_pictures.ExploreView, set[str], explanation.Explanation, Visitor]:
    """(ExploreView, the names of the pictures drawn now, Explanation, visitor) for one image and options.
    `labels` (comma-separated) and `template` ("a photo of a {}."): the classes in words of a model with a text
    tower (CLIP, SigLIP); a model with fixed classes ignores them."""
    with ACTIVITY:
        v = visitor(state)
        model = in_words(resolve_model(model_key, v), labels, template)
        o, clamped = _options(model, fusion, discard, layer, head, patch, alpha, smooth, shared, method)
        too_costly = method_refusal(o.method, model.card.config)
        if too_costly:
            raise FieldError(too_costly, "target")
        s = select(v, image, model_key, token=o.token.number, model=model)
        try:
            t = explanation.parse_target(model, target)
        except ValueError as e:
            raise FieldError(f"Gradient rollout class: {e}.", "target") from None
        ex = v.explore.keep(s.key(t), lambda: s.shared("explore", lambda: analysed(s, t), t))
        with v.drawing():
            view, fresh = explore_pictures.render_explore(model, ex, o, v.explore.pictures)
        if clamped:
            view.summary = f"{clamped}\n\n{view.summary}"
        return view, fresh, ex, v


def analysed(s: Selection, target: int | None) -> explanation.Explanation:
    """The selection's one pass (vitviz.pictures.explanation.analyse), with the image as uploaded beside it."""
    ex = explanation.analyse(s.model, s.pixels, target)
    ex.original = explanation.original_thumbnail(s.picture.photo)
    return ex


def _options(
    model: LoadedViT, fusion, discard, layer, head, patch, alpha, smooth, shared, method
) -> tuple[explore_pictures.Options, str]:
    """The options, and the sentences saying which layer or head was brought into this model's range."""
    cfg = model.card.config
    layer, layer_note = layer_index(layer, "The layer", cfg.depth, default=cfg.depth)
    head, head_note = layer_index(head, "The head", cfg.num_heads, default=1)
    return explore_pictures.Options(
        fusion=choice(fusion, "Head fusion", FUSIONS, default="mean"),
        discard=number(discard, "The discard ratio", 0.0, 0.99, default=0.0),
        layer=layer,
        head=head,
        token=selected_token(patch, model.layout),
        alpha=number(alpha, "The map opacity", 0.0, 1.0, default=0.6),
        smooth=bool(smooth),
        shared=bool(shared),
        method=_method(method),
    ), " ".join(n for n in (layer_note, head_note) if n)


def _method(method) -> str:
    try:
        return choice(method, "The class map's method", list(CLASS_MAPS), default=METHOD)
    except gr.Error as e:
        raise FieldError(e.message, "target") from None


@same_parameters_as(explore_view)
def explain(*args, **kw) -> tuple:
    """/explain: every Explore picture for one image and one set of options (explore_pictures.ExploreView's fields)."""
    view, _, _, v = explore_view(*args, **kw)
    return API.reply(
        **pictures_reply(
            view,
            explore_pictures.OUTPUT_NAMES,
            explore_pictures.PICTURE_NAMES,
            set(explore_pictures.PICTURE_NAMES),
            v.files,
        )
    )


def explain_page(*args) -> tuple:
    """The page's update: the pictures that changed (gr.skip() for the rest), the summary, the state, and the
    three notes; an error goes into the note beside its control and leaves the pictures as they were. The image's
    note is the image's own (a test image's label, what to use for a photo): a drawing leaves it as it is."""
    state = args[-1]
    notes = {k: "" if k != "image_note" else gr.skip() for k in NOTES}
    try:
        view, fresh, _, v = explore_view(*args)
    except gr.Error as e:
        v = visitor(state)
        v.explore.pictures.clear()  # the page keeps its pictures; the next answer sends all of them again
        field = getattr(e, "field", "image")
        notes[f"{field}_note" if f"{field}_note" in notes else "image_note"] = warning(e)
        return PAGE.reply(state=v, **notes)
    drawn = pictures_reply(view, explore_pictures.OUTPUT_NAMES, explore_pictures.PICTURE_NAMES, fresh, v.files)
    return PAGE.reply(**drawn, state=v, **notes)


API = Outputs(*explore_pictures.OUTPUT_NAMES)
PAGE = Outputs(*explore_pictures.OUTPUT_NAMES, "state", *NOTES)  # the page's update
TOKEN_PAGE = Outputs(*PAGE.names, "patch", "prefix_token")  # the page's update for a newly selected token
PATCH = 1 + OPTIONS.index("patch")  # where the selected token's number is among the page's values


def token_page(args: tuple, number: int | None) -> tuple:
    """The page's update for the selected token `number` (None: the one the page sent), with the token's own
    two controls set to it: its number, and the menu of the tokens before the patches. One event does it all:
    the controls' own .input events draw nothing of themselves."""
    args = list(args)
    if number is not None:
        args[PATCH + 1] = number
    update = dict(zip(PAGE.names, explain_page(*args)))
    return TOKEN_PAGE.reply(**update, **token_shown(args[1], args[-1], args[PATCH + 1]))


def open_tab(*args) -> tuple:
    """Explore opened: looked at from now on, and drawn again where another tab changed what it shows (the
    token, on Step by step); only the pictures that changed are sent."""
    visitor(args[-1]).crossing.looking = "explore"
    return explain_page(*args)


def clicked(
    image: ImagePayload,
    model_key: str,
    fusion: str,
    discard: float,
    target: str,
    layer: float,
    head: float,
    patch: float,
    alpha: float,
    smooth: bool,
    shared: bool,
    method: str,
    labels: str,
    template: str,
    state: Visitor | None,
    evt: gr.SelectData,
) -> tuple:
    """A click on the input's picture: the token under it (a patch, or the tile of the token the prediction reads)
    selected and every picture that follows it drawn, in one event; a click on no token changes nothing."""
    values = (image, model_key, fusion, discard, target, layer, head, patch, alpha, smooth, shared, method)
    try:
        model = resolve_model(model_key, visitor(state))
    except gr.Error:
        return TOKEN_PAGE.reply()
    token = spots.token_at(sees_spots(model.card.config, model.layout), *evt.index[:2], model.layout)
    return TOKEN_PAGE.reply() if token is None else token_page((*values, labels, template, state), token.number)


def prefix_picked(*args) -> tuple:
    """The menu of the tokens before the patches: the named one selected (its number set beside it)."""
    name, *values = args
    try:
        prefix = resolve_model(values[1], visitor(values[-1])).layout.prefix
    except gr.Error:
        return TOKEN_PAGE.reply()
    return token_page(tuple(values), -1 - prefix.index(name)) if name in prefix else TOKEN_PAGE.reply()


@torch.inference_mode()
def predict(
    image: ImagePayload,
    model_key: str = "cifar10",
    labels: str | None = None,
    template: str | None = None,
    state: Visitor | None = None,
) -> dict[str, float]:
    """Top-5 class probabilities for an image, in gr.Label's format (a CLIP or SigLIP model: its `labels`' scores,
    every label up to 10)."""
    with ACTIVITY:
        s = select(visitor(state), image, model_key, labels, template)
        probs = s.model.probabilities(s.model(s.model.tensor(s.pixels))[0].float())
    return explanation.top_k(s.model, probs)


@same_parameters_as(explore_view)
def export(*args, **kw) -> tuple[list[str], Visitor]:
    """Every picture of the current Explore view as PNGs in a zip, and the raw attention as .npy."""
    view, _, ex, v = explore_view(*args, **kw)
    zpath, npath = explanation.export_view(view, ex.attn, scratch.new_folder("export"))
    return [str(zpath), str(npath)], v


def export_page(*args) -> tuple:
    """The Export button: the files appear (the box was hidden until now), or the reason beside the button."""
    try:
        files, v = export(*args)
    except gr.Error as e:
        return gr.update(visible=False), args[-1], f"⚠️ {e.message}"
    return gr.update(value=files, visible=True), v, ""


# ---------------------------------------------------------------- wiring


def wire(c: dict, shell: Shell) -> dict:
    """Explore's events. `shell` gives the model menu and the visitor's state."""
    inputs = [c["image"], shell.model_dd] + [c[k] for k in OPTIONS] + [shell.state]
    page = dict(
        fn=explain_page,
        inputs=inputs,
        preprocess=False,
        concurrency_limit=4,
        api_visibility="private",
        outputs=PAGE.components({**c, "state": shell.state}),
    )
    about = (
        "Attention pictures for an image: rollout, a class map (gradient rollout, LeGrad or occlusion), one layer "
        "and head, every layer x head, the logit lens and token norms, from the CLS token or a chosen token."
    )
    endpoint(c["api_explain"], explain, inputs, API.components(c), "explain", about)
    for k in ("head", "smooth", "shared", "alpha"):  # its own choices (the shell wires those other tabs share)
        c[k].input(**page, trigger_mode="always_last")
    for k in ("labels", "template"):  # new words: the class menu lists them, then every picture is drawn again
        c[k].submit(
            switch.words_changed,
            [shell.model_dd, c["labels"], c["template"], c["target"], shell.state],
            [c["target"], c["top5"], c["target_note"]],
            api_visibility="private",
        ).then(**page)
    c["image"].change(**page)
    token = {**page, "outputs": TOKEN_PAGE.components({**c, "state": shell.state}), "trigger_mode": "always_last"}
    c["sees"].select(**{**token, "fn": clicked})
    c["patch"].input(**{**token, "fn": lambda *a: token_page(a, None)})
    c["to_cls"].click(**{**token, "fn": lambda *a: token_page(a, -1)})
    c["prefix_token"].input(**{**token, "fn": prefix_picked, "inputs": [c["prefix_token"], *inputs]})
    shell.hidden_predict.click(
        predict,
        [c["image"], shell.model_dd, c["labels"], c["template"], shell.state],
        c["top5"],
        preprocess=False,
        api_name="predict",
        api_description="Top-5 class probabilities for an image.",
    )
    about = "The Explore view's pictures as PNGs in a zip, and the raw attention as .npy."
    endpoint(c["api_export"], export, inputs, [c["export_files"], shell.state], "export", about)
    c["export"].click(
        export_page,
        inputs,
        [c["export_files"], shell.state, c["export_note"]],
        preprocess=False,
        api_visibility="private",
    )
    return page
