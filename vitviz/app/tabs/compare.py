"""The Compare tab: the Explore image and the same options through two models, side by side.

It opens on two models that fit the image: the chosen model against itself with a random head (the sanity
check), or a run of the Train tab against the shipped model it learns the task of; a run after its first
epoch against its end works too (a run keeps up to six epoch snapshots). One *Explain class* control serves
both sides; each side's pictures name their model. A side whose model cannot be had says so under its menu;
the other side is drawn as usual.
"""

from __future__ import annotations

import gradio as gr
import numpy as np

from vitviz.app.handlers import Outputs, follow_image, follower, warning
from vitviz.app.inputs import FUSIONS, PREDICTED, ImagePayload, choice, number
from vitviz.app.menu import SHARED, in_words, model_choices, resolve_model, title_of, typed_key
from vitviz.app.page import Shell, copies
from vitviz.app.selection import select
from vitviz.app.serving.activity import ACTIVITY
from vitviz.app.serving.limits import method_refusal
from vitviz.app.state import Visitor, visitor
from vitviz.app.widgets import pic
from vitviz.data.datasets import DATASETS
from vitviz.explain.methods import CLASS_MAPS, DEFAULT_CLASS_MAP
from vitviz.pictures import explanation
from vitviz.pictures import explore as explore_pictures
from vitviz.pictures.panels import panel

DATASET_CLASSES = DATASETS["cifar10"]["classes"]
SIDE = ("top5", "rollout", "class_map", "rollout_strip")  # the explore_pictures.ExploreView fields each side shows


def one_side(
    image: ImagePayload, key: str, o: explore_pictures.Options, target: str | None, words: tuple, state: Visitor | None
) -> tuple[list, str]:
    """(the side's outputs, "" or what it explains instead of `target`) or (Nones, why it could not be drawn).
    `words`: (labels, prompt) for a model scored in words."""
    try:
        model = in_words(resolve_model(key, state), *words)
        too_costly = method_refusal(o.method, model.card.config)
        if too_costly:
            raise gr.Error(too_costly)
        classes = model.card.classes
        known = target in classes
        s = select(visitor(state), image, key, model=model)  # a visitor's file is decoded once, kept for both sides
        ex = explanation.analyse(s.model, s.pixels, classes.index(target) if known else None)
    except gr.Error as e:
        return [None] * len(SIDE), f"⚠️ {e.message}"
    with visitor(state).drawing():
        view, _ = explore_pictures.render_explore(model, ex, o, compact=True)
        name = model.card.title
        drawn = [getattr(view, n) if n == "top5" else _named(getattr(view, n), name) for n in SIDE]
    if not classes:  # a model that learned without labels: no top 5, and its second map is not a class's
        return drawn, (
            f"The {name} has no classifier: it names nothing, so there is no top 5, and its second map shows how "
            "alike the patches' features are."
        )
    asked = target not in (None, "", PREDICTED) and not known
    return drawn, (f"The {name} has no class '{target}': it explains its predicted class." if asked else "")


def _named(picture: np.ndarray | None, name: str) -> np.ndarray | None:
    """The picture under a line naming its model (so that a saved picture still says whose it is)."""
    return None if picture is None else panel(picture, name)


def compare(
    image: ImagePayload,
    model_a: str = "cifar10",
    model_b: str = "cifar10/random-head",
    fusion: str = "mean",
    discard: float = 0.0,
    method: str = DEFAULT_CLASS_MAP,
    target: str | None = PREDICTED,
    labels: str | None = None,
    template: str | None = None,
    state: Visitor | None = None,
) -> tuple:
    """(left top 5, rollout, class map (`method`: gradient rollout, LeGrad or occlusion) for `target` (a class
    name, or a label; a side without it explains its predicted one), rollout by layer, then the same for the
    right, then the left and right notes: empty, or why that side could not be drawn or what it explains).
    `labels` and `template`: the words a CLIP or SigLIP side scores (a model with fixed classes ignores them)."""
    o = explore_pictures.Options(
        fusion=choice(fusion, "Head fusion", FUSIONS, default="mean"),
        discard=number(discard, "The discard ratio", 0.0, 0.99, default=0.0),
        method=choice(method, "The class map's method", list(CLASS_MAPS), default=DEFAULT_CLASS_MAP),
    )
    target = target if isinstance(target, str) else None
    with ACTIVITY:
        words = (labels, template)
        (a, note_a), (b, note_b) = (one_side(image, key, o, target, words, state) for key in (model_a, model_b))
    sides = {**{f"{n}_a": value for n, value in zip(SIDE, a)}, **{f"{n}_b": value for n, value in zip(SIDE, b)}}
    return API.reply(**sides, note_a=note_a, note_b=note_b)


def compare_page(*args) -> tuple:
    """The page's update: as /compare, each side's top 5 titled with its model's name; a bad option or image
    said at the top, the panels kept."""
    *inputs, state = args
    v = visitor(state)
    try:
        out = dict(zip(API.names, compare(*inputs, v)))
    except gr.Error as e:
        return PAGE.reply(note=warning(e), state=v)
    for side, key in (("a", inputs[1]), ("b", inputs[2])):
        out[f"top5_{side}"] = gr.update(value=out[f"top5_{side}"], label=f"{_title(key, v)}: top 5")
    return PAGE.reply(**out, note="", state=v)


def _title(key: str, v: Visitor) -> str:
    try:
        return resolve_model(key, v).card.title
    except gr.Error:
        return title_of(typed_key(key))


API = Outputs(*(f"{name}_{side}" for side in ("a", "b") for name in SIDE), "note_a", "note_b")
PAGE = Outputs(*API.names, "note", "state")  # the page's: a bad option or image said at the top
open_tab, follow = follower("compare", compare_page, PAGE)


def pair_for(model_key: str, state: Visitor | None) -> tuple[str, str]:
    """The two models Compare opens on for the chosen one: it against its own random-head copy; a run or an
    upload against the shipped model for its data; a model without a classifier against its fully random copy."""
    key = typed_key(model_key)
    try:
        model = resolve_model(key, state)
    except gr.Error:
        return "cifar10", "cifar10/random-head"
    if key in ("session", "upload") or key.startswith("session@") or "/random-" in key:
        return key, "mnist" if model.card.gallery == "mnist" else "cifar10"
    return key, f"{key}/{'random-head' if model.card.classes else 'random-all'}"


def pair_choices(model_key: str, state: Visitor | None) -> tuple:
    """The side menus set to `pair_for`'s two, a randomised copy named in the menu where it is not there yet."""
    a, b = pair_for(model_key, state)
    extra = [] if b in SHARED or not b.startswith(a) else [(_copy_name(a, b, state), b)]
    return tuple(gr.update(choices=model_choices() + extra, value=key) for key in (a, b))


def _copy_name(a: str, b: str, state: Visitor | None) -> str:
    how = "head randomised" if b.endswith("random-head") else "every weight randomised"
    return f"{_title(a, visitor(state))}, {how} (sanity check)"


# ---------------------------------------------------------------- layout and wiring


def build() -> dict:
    gr.Markdown(
        "The Explore image and the same options through two models, side by side. It opens on the chosen "
        "model against itself with a random head (the sanity check: a map that does not change does not read "
        "the classifier); after a run in the Train tab, that run against the shipped model, or after its first "
        "epoch against its end (a run keeps up to six epoch snapshots)."
    )
    c = {}
    with gr.Row(equal_height=False):
        for side, name, key in (("a", "Left", "cifar10"), ("b", "Right", "cifar10/random-head")):
            with gr.Column(min_width=300):
                c[side] = gr.Dropdown(
                    model_choices(),
                    value=key,
                    label=f"{name} model",
                    allow_custom_value=True,
                    elem_id=f"compare-{side}",
                )
                c[f"note_{side}"] = gr.Markdown(elem_classes=["vv-note"], elem_id=f"compare-note-{side}")
    with gr.Row(equal_height=False):
        c["target"] = gr.Dropdown(
            [PREDICTED] + list(DATASET_CLASSES),
            value=PREDICTED,
            label="Explain class (both sides)",
            allow_custom_value=True,
            elem_id="compare-target",
            min_width=200,
        )
        c["method"] = gr.Radio(
            list(CLASS_MAPS), value=DEFAULT_CLASS_MAP, label="Class map: method", elem_id="compare-method"
        )
        c["fusion"] = gr.Radio(FUSIONS, value="mean", label="Rollout: heads combined by", elem_id="compare-fusion")
        c["discard"] = gr.Slider(0.0, 0.99, value=0.0, step=0.05, label="Rollout: discard the weakest fraction")
    c["note"] = gr.Markdown(elem_classes=["vv-note"])
    c["go"] = gr.Button(visible=False)  # /compare for API callers; the page redraws on every change
    for kind in SIDE:
        with gr.Row(equal_height=False):  # a row each, left and right: on a phone they alternate
            for side, name in (("a", "Left"), ("b", "Right")):
                if kind == "top5":
                    c[f"top5_{side}"] = gr.Label(
                        num_top_classes=5, label=f"{name}: top 5", show_heading=False, min_width=300
                    )
                else:
                    c[f"{kind}_{side}"] = pic(
                        f"{name}: {kind.replace('_', ' ')}",
                        f"compare-{kind}-{side}".replace("_", "-"),
                        fmt="png",
                        min_width=300,
                        elem_classes_extra=["vv-wide"] if kind == "rollout_strip" else [],  # a phone scrolls it
                    )
    return c


def class_choices(
    model_a: str, model_b: str, state: Visitor | None, labels: str | None = None, template: str | None = None
) -> dict:
    """The class menu for both sides: the left model's classes (or labels), then the right's that the left lacks."""
    names: list[str] = []
    for key in (model_a, model_b):
        try:
            names += [n for n in in_words(resolve_model(key, state), labels, template).card.classes if n not in names]
        except gr.Error:
            continue
    return gr.update(choices=[PREDICTED] + names)


def wire(c: dict, shell: Shell, explore: dict, tab: gr.Tab) -> dict:
    """Compare's events: drawn from the Explore image and labels (`explore`: Explore's controls) while looked
    at; the two menus set to a pair that fits a new model; the class and options it shares with Explore set
    where they are made (the shell wires them: vitviz.app.handlers.shared). Returns the event settings that
    redraw it while it is looked at."""
    image, words = explore["image"], (explore["labels"], explore["template"])
    inputs = [image, c["a"], c["b"], c["fusion"], c["discard"], c["method"], c["target"], *words, shell.state]
    c["go"].click(
        compare,
        inputs,
        API.components(c),
        preprocess=False,
        api_name="compare",
        api_description="Two models on the same image and options.",
    )
    redraw = dict(fn=compare_page, inputs=inputs, outputs=PAGE.components({**c, "state": shell.state}))
    fit = dict(fn=pair_choices, inputs=[shell.model_dd, shell.state], outputs=[c["a"], c["b"]])
    page = follow_image(tab, image, shell, redraw, open_tab, follow, fit, copies("compare", c, explore))
    for k in ("a", "b"):
        c[k].change(class_choices, [c["a"], c["b"], shell.state, *words], c["target"], api_visibility="private")
        c[k].change(**{**page, "fn": follow})
    return {**page, "fn": follow}
