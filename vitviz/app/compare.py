"""The Compare tab: the same image and options through two models, side by side.

For example the shipped model against the one trained in the Train tab, or that run
after its first epoch against its end (a run keeps up to six epoch snapshots).
"""
from __future__ import annotations

import gradio as gr

from .. import gallery, views
from .activity import ACTIVITY
from .inputs import FUSIONS, choice, number, pixels_for
from .models import MODEL_CHOICES, resolve_model
from .widgets import pic

SIDE = ("top5", "rollout", "grad_rollout", "rollout_strip")  # the views.ExploreView fields each side shows


def compare(image, model_a: str = "cifar10", model_b: str = "mnist", fusion: str = "mean", discard: float = 0.0,
            state=None):
    """(left top 5, rollout, gradient rollout, rollout by layer, then the same for the right)."""
    fusion = choice(fusion, "Head fusion", FUSIONS, default="mean")
    discard = number(discard, "The discard ratio", 0.0, 0.99, default=0.0)
    out = []
    with ACTIVITY:
        for key in (model_a, model_b):
            model = resolve_model(key, state)
            ex = views.analyse(model, pixels_for(model, image))
            view = views.render_explore(model, ex, fusion, discard, compact=True)
            out += [getattr(view, name) for name in SIDE]
    return tuple(out)


# ---------------------------------------------------------------- layout and wiring


def build() -> dict:
    gr.Markdown("The same image and options through two models, side by side: for example the shipped "
                "model against the one you trained in the Train tab, or that run after its first epoch "
                "against its end (a run keeps up to six epoch snapshots).")
    examples = gallery.items("cifar10")
    c = {}
    with gr.Row():
        c["image"] = gr.Image(type="filepath", image_mode=None, sources=["upload", "clipboard"], label="Image",
                              height=200, value=examples[3][0] if examples else None)
        with gr.Column():
            c["a"] = gr.Dropdown(MODEL_CHOICES, value="cifar10", label="Left model", allow_custom_value=True)
            c["b"] = gr.Dropdown(MODEL_CHOICES, value="mnist", label="Right model", allow_custom_value=True)
            c["fusion"] = gr.Radio(FUSIONS, value="mean", label="Rollout head fusion")
            c["discard"] = gr.Slider(0.0, 0.99, value=0.0, step=0.05, label="Rollout: discard fraction")
            c["go"] = gr.Button("Compare", variant="primary", elem_id="compare-btn")
    with gr.Row():
        for side, name in (("a", "Left"), ("b", "Right")):
            with gr.Column():
                c[f"top5_{side}"] = gr.Label(num_top_classes=5, label=f"{name}: top 5")
                with gr.Row():
                    c[f"rollout_{side}"] = pic(f"{name}: rollout", f"compare-rollout-{side}")
                    c[f"grad_rollout_{side}"] = pic(f"{name}: gradient rollout", fmt="png")
                c[f"rollout_strip_{side}"] = pic(f"{name}: rollout by layer", fmt="png")
    return c


def wire(c: dict, shell):
    outputs = [c[f"{name}_{side}"] for side in ("a", "b") for name in SIDE]
    c["go"].click(compare, [c["image"], c["a"], c["b"], c["fusion"], c["discard"], shell.state], outputs,
                  preprocess=False, api_name="compare", api_description="Two models on the same image and options.")
