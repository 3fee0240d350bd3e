"""The Compare tab: the same image and options through two models, side by side.

For example the shipped model against the one trained in the Train tab, or that run
after its first epoch against its end (a run keeps up to six epoch snapshots). It
redraws whenever its image, a model or an option changes. A side whose model cannot
be had says so under its menu; the other side is drawn as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the shell imports the tabs
    from vitviz.app.shell import Shell

import gradio as gr

from vitviz.app.activity import ACTIVITY
from vitviz.app.handlers import Outputs, warning
from vitviz.app.inputs import FUSIONS, ImagePayload, choice, number, pixels_for
from vitviz.app.limits import method_refusal
from vitviz.app.menu import model_choices, resolve_model
from vitviz.app.visitor import Visitor
from vitviz.app.widgets import pic
from vitviz.data import gallery
from vitviz.explain.methods import CLASS_MAPS, DEFAULT_CLASS_MAP
from vitviz.pictures import explanation as views
from vitviz.pictures import explore as pictures

SIDE = ("top5", "rollout", "class_map", "rollout_strip")  # the pictures.ExploreView fields each side shows


def one_side(image: ImagePayload, key: str, o: pictures.Options, state: Visitor | None) -> tuple[list, str]:
    """(the side's outputs, "") or (Nones, the sentence saying why it could not be drawn)."""
    try:
        model = resolve_model(key, state)
        too_costly = method_refusal(o.method, model.card.config)
        if too_costly:
            raise gr.Error(too_costly)
        ex = views.analyse(model, pixels_for(model, image))
    except gr.Error as e:
        return [None] * len(SIDE), f"⚠️ {e.message}"
    view, _ = pictures.render_explore(model, ex, o, compact=True)
    return [getattr(view, name) for name in SIDE], ""


def compare(
    image: ImagePayload,
    model_a: str = "cifar10",
    model_b: str = "mnist",
    fusion: str = "mean",
    discard: float = 0.0,
    method: str = DEFAULT_CLASS_MAP,
    state: Visitor | None = None,
) -> tuple:
    """(left top 5, rollout, class map (`method`: gradient rollout, LeGrad or occlusion), rollout by layer, then
    the same for the right, then the left and right notes: empty, or why that side could not be drawn)."""
    o = pictures.Options(
        fusion=choice(fusion, "Head fusion", FUSIONS, default="mean"),
        discard=number(discard, "The discard ratio", 0.0, 0.99, default=0.0),
        method=choice(method, "The class map's method", list(CLASS_MAPS), default=DEFAULT_CLASS_MAP),
    )
    with ACTIVITY:
        (a, note_a), (b, note_b) = one_side(image, model_a, o, state), one_side(image, model_b, o, state)
    sides = {**{f"{n}_a": value for n, value in zip(SIDE, a)}, **{f"{n}_b": value for n, value in zip(SIDE, b)}}
    return API.reply(**sides, note_a=note_a, note_b=note_b)


def compare_page(*args) -> tuple:
    """The page's update: as /compare, and a bad option or image said under the image, the panels kept."""
    try:
        return (*compare(*args), "")
    except gr.Error as e:
        return PAGE.reply(note=warning(e))


API = Outputs(*(f"{name}_{side}" for side in ("a", "b") for name in SIDE), "note_a", "note_b")
PAGE = Outputs(*API.names, "note")  # the page's: a bad option or image said under the image


# ---------------------------------------------------------------- layout and wiring


def build() -> dict:
    gr.Markdown(
        "The same image and options through two models, side by side: for example the shipped "
        "model against the one you trained in the Train tab, or that run after its first epoch "
        "against its end (a run keeps up to six epoch snapshots). It redraws when anything here changes."
    )
    examples = gallery.items("cifar10")
    c = {}
    with gr.Row(equal_height=False):
        with gr.Column(scale=0, min_width=260):
            c["image"] = gr.Image(
                type="filepath",
                image_mode=None,
                sources=["upload", "clipboard"],
                label="Image",
                height=260,
                value=examples[3][0] if examples else None,
                elem_id="compare-image",
                elem_classes=["vv-input"],
            )
            c["note"] = gr.Markdown(elem_classes=["vv-note"])
        with gr.Column(scale=1, min_width=300):
            c["fusion"] = gr.Radio(FUSIONS, value="mean", label="Rollout: heads combined by")
            c["discard"] = gr.Slider(0.0, 0.99, value=0.0, step=0.05, label="Rollout: discard the weakest fraction")
            c["method"] = gr.Radio(
                list(CLASS_MAPS), value=DEFAULT_CLASS_MAP, label="Class map: method", elem_id="compare-method"
            )
            c["go"] = gr.Button(visible=False)  # /compare for API callers; the page redraws on every change
    with gr.Row(equal_height=False):
        for side, name, key in (("a", "Left", "cifar10"), ("b", "Right", "mnist")):
            with gr.Column(min_width=300):
                c[side] = gr.Dropdown(
                    model_choices(),
                    value=key,
                    label=f"{name} model",
                    allow_custom_value=True,
                    elem_id=f"compare-{side}",
                )
                c[f"note_{side}"] = gr.Markdown(elem_classes=["vv-note"], elem_id=f"compare-note-{side}")
    for kind, label in (("top5", "top 5"), ("rollout", None), ("class_map", None), ("rollout_strip", None)):
        with gr.Row(equal_height=False):  # a row each, left and right: on a phone they alternate
            for side, name in (("a", "Left"), ("b", "Right")):
                if kind == "top5":
                    c[f"top5_{side}"] = gr.Label(
                        num_top_classes=5, label=f"{name}: {label}", show_heading=False, min_width=300
                    )
                else:
                    c[f"{kind}_{side}"] = pic(
                        f"{name}: {kind.replace('_', ' ')}",
                        f"compare-{kind}-{side}".replace("_", "-"),
                        fmt="png",
                        min_width=300,
                    )
    return c


def wire(c: dict, shell: Shell) -> dict:
    inputs = [c["image"], c["a"], c["b"], c["fusion"], c["discard"], c["method"], shell.state]
    outputs = API.components(c)
    c["go"].click(
        compare,
        inputs,
        outputs,
        preprocess=False,
        api_name="compare",
        api_description="Two models on the same image and options.",
    )
    page = dict(
        fn=compare_page,
        inputs=inputs,
        outputs=PAGE.components(c),
        preprocess=False,
        api_visibility="private",
        trigger_mode="always_last",
    )
    for k in ("image", "a", "b", "fusion", "method"):
        c[k].change(**page)
    c["discard"].release(**page)
    return page
