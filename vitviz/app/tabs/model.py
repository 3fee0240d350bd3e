"""The Model tab: what the chosen model learned, independent of any one image.

The positional-embedding similarity, the mean attention distance of every head
(over the example images), the patch-embedding filters' principal components and
the model card. The expensive part is computed once per model and cached (at most
`VITVIZ_MODEL_CACHE` models, default 8, each entry gone with its model); a click
on a position only redraws the two similarity pictures.
"""

from __future__ import annotations

import gradio as gr
import torch
from PIL import Image

from vitviz.app.inputs import whole
from vitviz.app.menu import resolve_model
from vitviz.app.page import Shell
from vitviz.app.serving import limits
from vitviz.app.serving.cache import ModelCache
from vitviz.app.state import Visitor, visitor
from vitviz.app.widgets import help_line, pic
from vitviz.data import gallery
from vitviz.models.loaded import LoadedViT
from vitviz.pictures import explanation

SUMMARIES = ModelCache(lambda: limits.get("VITVIZ_MODEL_CACHE"))


def summary_of(model: LoadedViT) -> explanation.ModelSummary:
    def make() -> explanation.ModelSummary:
        card = model.card
        items = gallery.items(card.gallery)
        if card.config.image_size >= 224:
            items = items[::10]  # a 224-px ViT is slow on a CPU: 10 images
        images = [model.pixels(Image.open(p)) for p, _ in items]
        with torch.inference_mode():
            return explanation.summarise_model(model, images)

    return SUMMARIES.get(model, make)


def _position(model: LoadedViT, position) -> int:
    cfg = model.card.config
    p = whole(
        position,
        "The position",
        -1,
        cfg.num_patches - 1,
        default=-1,
        where=f" for this model (positions 0 to {cfg.num_patches - 1}; -1: the centre one)",
    )
    return explanation.default_position(cfg) if p < 0 else p


def model_view(model_key: str, position: float = -1, state: Visitor | None = None) -> tuple:
    """(positional tiles, the selected position large, distance figure, components, card, components note)."""
    v = visitor(state)
    model = resolve_model(model_key, v)
    s = summary_of(model)
    with v.drawing():
        tiles, large = explanation.position_pictures(s, model.card.config, _position(model, position))
        distance, components = explanation.distance_picture(s), explanation.components_picture(s)
    note = (
        f"Top {len(s.variance)} principal components of the patch-embedding filters "
        f"({100 * float(s.variance.sum()):.0f}% of their variance), each labelled with its share."
    )
    return tiles, large, distance, components, explanation.model_card(model), note


def pos_click(model_key: str, state: Visitor | None, evt: gr.SelectData) -> tuple:
    """A click on the tiles: the clicked position and its two redrawn pictures."""
    v = visitor(state)
    model = resolve_model(model_key, v)
    cfg = model.card.config
    pos = explanation.pos_click_to_position(evt.index[0], evt.index[1], cfg)
    with v.drawing():
        tiles, large = explanation.position_pictures(summary_of(model), cfg, pos)
    return pos, tiles, large


# ---------------------------------------------------------------- layout and wiring


HELP = {
    "pos": "Each small tile is one patch position; its colours: how similar that position's learned embedding is "
    "to every other position's. A bright spot at the tile's own place, fading with distance, means the "
    "model learned the 2-D layout on its own (the ViT paper's Figure 7). **Click a tile.**",
    "large": "The clicked position against every position, large.",
    "distance": "Each dot is one head: how far, in pixels, its attention reaches on average. Low: a head that "
    "looks near its patch; near the dashed line: attention spread over the whole image.",
    "components": "The main directions the first layer projects each patch onto; like a CNN's first filters, "
    "they pick up colours, edges and stripes.",
}


def build() -> dict:
    c = {"card": gr.Markdown(elem_id="model-card")}
    with gr.Row():
        with gr.Column():
            c["pos_tiles"] = pic("Positional-embedding similarity (click a position)", "pos-tiles", show_label=True)
            help_line(HELP["pos"])
        with gr.Column():
            c["pos_large"] = pic("Selected position", "pos-large")
            help_line(HELP["large"])
    c["position"] = gr.Number(value=-1, precision=0, visible=False)
    with gr.Row():
        with gr.Column():
            c["distance"] = pic("Mean attention distance per head", "distance")
            help_line(HELP["distance"])
        with gr.Column():
            c["components"] = pic("Patch-embedding filters: principal components", "components", show_label=True)
            c["components_note"] = gr.Markdown()
            help_line(HELP["components"])
    return c


def view_event(c: dict, shell: Shell) -> dict:
    return dict(
        fn=model_view,
        inputs=[shell.model_dd, c["position"], shell.state],
        outputs=[c["pos_tiles"], c["pos_large"], c["distance"], c["components"], c["card"], c["components_note"]],
        api_visibility="private",
    )


def wire(c: dict, shell: Shell) -> None:
    c["pos_tiles"].select(
        pos_click,
        [shell.model_dd, shell.state],
        [c["position"], c["pos_tiles"], c["pos_large"]],
        api_visibility="private",
    )
