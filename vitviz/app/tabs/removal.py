"""The Take patches away tab: hide patches of the Explore image and watch the prediction change.

Click a patch to hide or show it, or hide the top k patches of any map with the slider;
beside it, every map's deletion curve for this image (vitviz.pictures.removal), the visitor's own
patches a point on them. The maps and curves are made once per image and model; a
model too large for the machine's budget (VITVIZ_MAX_MAP_GFLOP) gets the cheap maps and
a sentence instead of the curves.
"""

from __future__ import annotations

import gradio as gr

from vitviz.app.handlers import Outputs, endpoint, follow_image, follower, token_at, warning
from vitviz.app.inputs import ImagePayload, choice, whole
from vitviz.app.menu import in_words, resolve_model
from vitviz.app.page import Shell
from vitviz.app.selection import select
from vitviz.app.serving.activity import ACTIVITY
from vitviz.app.serving.limits import map_cost_note
from vitviz.app.state import Visitor, visitor
from vitviz.app.widgets import help_line, pic
from vitviz.explain.methods import METHODS, RANDOM
from vitviz.models.loaded import LoadedViT
from vitviz.pictures import removal

OUTPUTS = ("picture", "top5", "curves", "maps", "summary")
RANKINGS = list(METHODS) + [RANDOM]


def study_for(
    image: ImagePayload, model_key: str, v: Visitor, words: tuple = (None, None)
) -> tuple[LoadedViT, removal.Study, str]:
    """(model, Study, the sentence saying why there are no curves, or ""); `words`: a CLIP or SigLIP model's
    labels and prompt."""
    model = in_words(resolve_model(model_key, v), *words)
    if not model.card.classes:
        raise gr.Error(
            "Taking patches away measures how a class's probability falls, and this model has no "
            "classifier (it learned its features without labels): choose a model with classes."
        )
    cfg = model.card.config
    s = select(v, image, model_key, model=model)
    why = map_cost_note(
        "Every map's deletion curve and occlusion for this image", removal.study_passes(cfg), removal.study_gflop(cfg)
    )
    study = v.removal.keep(
        s.key(), lambda: s.shared("removal", lambda: removal.study(model, s.pixels, costly=not why), not why)
    )
    return model, study, why


def view(
    image: ImagePayload,
    model_key: str = "cifar10",
    method: str = "LeGrad",
    k: float = 0,
    labels: str | None = None,
    template: str | None = None,
    state: Visitor | None = None,
    toggle: int | None = None,
) -> tuple[removal.RemovalView, Visitor]:
    """(RemovalView, visitor): the top k patches of `method` hidden, and the visitor's clicks on top of them
    (a click hides a patch, or shows one of the top k again); `toggle`: a patch clicked now."""
    with ACTIVITY:
        v = visitor(state)
        model, s, why = study_for(image, model_key, v, (labels, template))
        P = model.card.config.num_patches
        method = choice(method, "The ranking", RANKINGS, default="LeGrad")
        if method not in s.maps:
            raise gr.Error(f"{method} is not computed for this model here: {why}")
        top = removal.top_patches(s, method, whole(k, "The number of patches", 0, P, default=0))
        clicks = v.crossing.toggled
        if toggle is not None and 0 <= toggle < P:
            clicks ^= {toggle}
        clicks &= set(range(P))  # another model's grid: only the patches this one has
        with v.drawing():
            rv = removal.render_removal(model, s, top ^ clicks, why)
        rv.summary = f"{rv.summary}\n\n{_how(method, len(top), top, clicks)}"
        return rv, v


def _how(method: str, k: int, top: set[int], clicks: set[int]) -> str:
    """Which patches are hidden, in words: the slider's and the clicks' share."""
    more, back = len(clicks - top), len(clicks & top)
    words = [f"{method}'s top {k}" if k else "none by the slider"]
    if more:
        words.append(f"{more} more you clicked")
    if back:
        words.append(f"{back} of the top {k} clicked back")
    return "Hidden: " + ", ".join(words) + ". The slider and your clicks add up; *Show every patch again* clears both."


def _page(v_or_error, state: Visitor | None, outputs: Outputs | None = None, **more):
    outputs = outputs or PAGE
    if isinstance(v_or_error, gr.Error):
        return outputs.reply(state=visitor(state), note=warning(v_or_error))
    rv, v = v_or_error
    return outputs.reply(**{name: getattr(rv, name) for name in OUTPUTS}, state=v, note="", **more)


def _try(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except gr.Error as e:
        return e


def ranked(
    image: ImagePayload, model_key: str, method: str, k: float, labels: str, template: str, state: Visitor | None
) -> tuple:
    """The slider or the ranking changed: the top k of that map hidden."""
    return _page(_try(view, image, model_key, method, k, labels, template, state), state)


def clicked(
    image: ImagePayload,
    model_key: str,
    method: str,
    k: float,
    labels: str,
    template: str,
    state: Visitor | None,
    evt: gr.SelectData,
) -> tuple:
    """A click on the picture: that patch hidden, or shown again."""
    p = token_at(model_key, state, evt)  # the same grid as Explore's input; no CLS tile here
    if not isinstance(p, int):
        return PAGE.reply()
    return _page(_try(view, image, model_key, method, k, labels, template, state, toggle=p), state)


def show_all(
    image: ImagePayload, model_key: str, method: str, labels: str, template: str, state: Visitor | None
) -> tuple:
    visitor(state).crossing.toggled = set()
    return _page(_try(view, image, model_key, method, 0, labels, template, state), state, RESET, k=0)


def removal_api(
    image: ImagePayload,
    model_key: str = "cifar10",
    method: str = "LeGrad",
    k: float = 0,
    labels: str | None = None,
    template: str | None = None,
    state: Visitor | None = None,
) -> tuple:
    """/take_away: the image with the top k patches of `method` hidden: (picture, top 5 without them, deletion
    curves, every map with its AUC, summary); `labels` and `template` for CLIP or SigLIP, as /explain's."""
    rv, _ = view(image, model_key, method, k, labels, template, state)
    return API.reply(**{name: getattr(rv, name) for name in OUTPUTS})


PAGE = Outputs(*OUTPUTS, "state", "note")  # the page's update
RESET = Outputs(*PAGE.names, "k")  # Show all's: the slider back at 0 too
API = Outputs(*OUTPUTS)
open_tab, follow = follower("take-away", ranked, PAGE)


# ---------------------------------------------------------------- layout and wiring

HELP = {
    "picture": "The Explore image as the model gets it. **Click a patch** to hide it (it becomes the data set's "
    "mean colour, which is what the model receives) and again to bring it back.",
    "curves": "Each map's patches hidden most relevant first: the faster the class's probability falls, the "
    "better the map found what the model uses (a lower area under the curve). The dashed line hides "
    "them in a random order; the circle is your own choice of patches.",
    "maps": "Every map vitviz draws, for the class predicted on the whole image, with the area under its deletion "
    "curve (the AUC: the lower, the faster the class fell as the map's patches went).",
}


def build() -> dict:
    gr.Markdown(
        "Does the model need what a map points at? Take those patches away and see. The image is the "
        "Explore tab's; the class is the one the model predicts on the whole image."
    )
    c = {}
    with gr.Row(equal_height=False):
        with gr.Column(scale=0, min_width=330):
            c["picture"] = pic("The image with patches hidden (click to hide or show)", "take-picture")
            help_line(HELP["picture"])
            c["method"] = gr.Dropdown(RANKINGS, value="LeGrad", label="Rank patches by", elem_id="take-method")
            c["k"] = gr.Slider(0, 64, value=0, step=1, label="Hide the top k patches of that map", elem_id="take-k")
            c["reset"] = gr.Button("Show every patch again", size="sm", elem_id="take-reset")
            c["note"] = gr.Markdown(elem_classes=["vv-note"])
        with gr.Column(scale=0, min_width=260):
            c["top5"] = gr.Label(
                num_top_classes=5, label="Prediction without those patches", show_heading=False, elem_id="take-top5"
            )
            c["summary"] = gr.Markdown(elem_id="take-summary")
        with gr.Column(scale=1, min_width=320):
            c["curves"] = pic("Deletion curves", "take-curves")
            help_line(HELP["curves"])
    c["maps"] = pic("Every map", "take-maps", elem_classes_extra=["vv-wide"])
    help_line(HELP["maps"])
    c["api"] = gr.Button(visible=False)
    return c


def k_range(model_key: str, k: float, state: Visitor | None) -> dict:
    """The slider's range for a new model, its value kept where the model has that many patches."""
    try:
        P = resolve_model(model_key, state).card.config.num_patches
    except gr.Error:
        return gr.skip()
    return gr.update(maximum=P, value=min(int(k or 0), P))


def wire(c: dict, shell: Shell, image: ImagePayload, tab: gr.Tab, words: tuple) -> dict:
    """The tab's events (`words`: Explore's labels and prompt boxes); returns the event settings that redraw it
    while it is looked at."""
    inputs = [image, shell.model_dd, c["method"], c["k"], *words, shell.state]
    outputs = PAGE.components({**c, "state": shell.state})
    redraw = dict(fn=ranked, inputs=inputs, outputs=outputs)
    fit = dict(fn=k_range, inputs=[shell.model_dd, c["k"], shell.state], outputs=c["k"])
    page = follow_image(tab, image, shell, redraw, open_tab, follow, fit)
    c["method"].change(**page)
    c["k"].change(**page)  # always_last: a drag redraws once it rests
    c["picture"].select(clicked, inputs, outputs, preprocess=False, api_visibility="private", concurrency_limit=4)
    c["reset"].click(
        show_all,
        [image, shell.model_dd, c["method"], *words, shell.state],
        RESET.components({**c, "state": shell.state}),
        preprocess=False,
        api_visibility="private",
    )
    about = (
        "The image with the top k patches of a map hidden, the prediction without them, and every map's deletion curve."
    )
    endpoint(c["api"], removal_api, inputs, API.components(c), "take_away", about)
    return {**page, "fn": follow}
