"""The Explore tab's layout: its components by name, each picture with the help line under it, its controls
beside the pictures they change (vitviz.app.tabs.explore wires them)."""

from __future__ import annotations

import gradio as gr

from vitviz.app.choices import examples_default
from vitviz.app.help import HELP
from vitviz.app.inputs import FUSIONS, PREDICTED
from vitviz.app.state import DEFAULT_EXAMPLE
from vitviz.app.switch import GALLERY_LABELS
from vitviz.app.widgets import help_line, pic
from vitviz.data import gallery
from vitviz.data.datasets import DATASETS
from vitviz.explain.methods import CLASS_MAPS, DEFAULT_CLASS_MAP
from vitviz.models.words import DEFAULT_LABELS, DEFAULT_TEMPLATE

OPTIONS = tuple("fusion discard target layer head patch alpha smooth shared method labels template".split())
METHOD = DEFAULT_CLASS_MAP


def build() -> dict:
    """The Explore tab's components, by name; the pictures under the names of explore_pictures.ExploreView's fields."""
    first = examples_default()  # the page opens on it (a link to a view: on the view's image)
    c = {"image": gr.Image(first, type="filepath", image_mode=None, visible=False, elem_id="input-image")}
    with gr.Row(equal_height=False, elem_id="explore-top"):
        with gr.Column(scale=0, min_width=330, elem_id="input-col"):
            c["sees"] = pic("What the model sees (click a patch or CLS)", "sees")
            c["top5"] = gr.Label(num_top_classes=5, label="Prediction (top 5)", show_heading=False, elem_id="top5")
            _token_controls(c)  # under the grid and its prediction, on the first screen of a projector
            c["help_sees"] = help_line(HELP["sees"])
            with gr.Row(elem_id="image-buttons"):
                c["upload"] = gr.UploadButton(
                    "Upload image", file_types=["image"], size="sm", elem_id="upload-btn", min_width=80
                )
                c["random"] = gr.Button("Random test image", size="sm", elem_id="random-btn", min_width=80)
                c["numbers"] = gr.Checkbox(True, label="Patch numbers", elem_id="numbers", min_width=80)
            c["image_note"] = gr.Markdown(elem_classes=["vv-note"], elem_id="image-note")
            c["photo_switch"] = gr.Button(
                "Switch to DeiT-S, keeping this photo", size="sm", visible=False, elem_id="photo-switch"
            )
            c["original"] = pic("The image, as uploaded", "original")
        with gr.Column(scale=4, min_width=240):
            c["rollout"] = pic("Attention rollout", "rollout")
            c["fusion"] = gr.Radio(FUSIONS, value="mean", label="Heads combined by", elem_id="fusion")
            c["discard"] = gr.Slider(0.0, 0.99, value=0.0, step=0.05, label="Discard weakest", elem_id="discard")
            help_line(HELP["rollout"])
        with gr.Column(scale=6, min_width=300):  # wider: its two menus side by side, names whole
            c["class_map"] = pic("Class map", "class-map")
            with gr.Row(elem_id="class-menus"):
                c["method"] = gr.Dropdown(
                    list(CLASS_MAPS), value=METHOD, label="Method", elem_id="method", min_width=140
                )
                c["target"] = gr.Dropdown(
                    [PREDICTED] + DATASETS["cifar10"]["classes"],
                    value=PREDICTED,
                    label="Explain class",
                    elem_id="target",
                    min_width=140,
                )
            with gr.Row(elem_id="label-words"):  # a model with a text tower: its classes are these words
                c["labels"] = gr.Textbox(
                    ", ".join(DEFAULT_LABELS),
                    label="Labels, comma-separated (press Enter)",
                    visible=False,
                    max_lines=2,
                    elem_id="labels",
                    min_width=200,
                    scale=3,
                )
                c["template"] = gr.Textbox(
                    DEFAULT_TEMPLATE,
                    label="Prompt ({} is the label)",
                    visible=False,
                    max_lines=1,
                    elem_id="template",
                    min_width=140,
                    scale=2,
                )
            c["target_note"] = gr.Markdown(elem_classes=["vv-note"], elem_id="target-note")
            with gr.Row(elem_id="display-options"):  # beside the maps they change
                c["alpha"] = gr.Slider(
                    0.0, 1.0, value=0.6, step=0.05, label="Every map: opacity", min_width=140, elem_id="alpha"
                )
                c["smooth"] = gr.Checkbox(value=True, label="Smooth maps (bilinear)", min_width=120, elem_id="smooth")
            c["help_class_map"] = help_line(HELP["class_map"])
        with gr.Column(scale=4, min_width=240):
            c["head_large"] = pic("Selected layer and head", "head-large")
            c["layer"] = gr.Slider(1, 6, value=6, step=1, label="Layer", elem_id="layer")
            c["head"] = gr.Slider(1, 6, value=1, step=1, label="Head", elem_id="head")
            help_line(HELP["head_large"])
    _build_below(c)
    return c


def _token_controls(c: dict) -> None:
    """The selected token's controls, right under the grid they choose on: its number, the menu of the tokens
    before the patches, Back to CLS, and the note beside them."""
    with gr.Row():
        c["patch"] = gr.Number(
            value=-1,
            precision=0,
            label="Selected token (patches 0 to 63, -1 CLS)",
            elem_id="patch",
            min_width=160,
        )
        c["prefix_token"] = gr.Dropdown(
            ["CLS"],
            value="CLS",
            label="Or a token before the patches",
            visible=False,
            elem_id="prefix-token",
            min_width=140,
        )
        c["to_cls"] = gr.Button("Back to CLS", size="sm", elem_id="cls-btn", min_width=100)
    c["patch_note"] = gr.Markdown(elem_classes=["vv-note"])


def _build_below(c: dict):
    """Under the first screen: the token and the display options, the examples, export; the many-panel maps."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300):
            c["summary"] = gr.Markdown(elem_id="summary")
        with gr.Column(scale=1, min_width=300):
            with gr.Row():
                c["export"] = gr.Button("Export this view (PNGs + raw attention)", size="sm", elem_id="export-btn")
            c["export_note"] = gr.Markdown(elem_classes=["vv-note"])
            c["export_files"] = gr.File(
                label="Exported: PNGs (zip) and raw attention (.npy)",
                file_count="multiple",
                interactive=False,
                visible=False,
                elem_id="export-files",
            )
        with gr.Column(scale=2, min_width=300):
            c["examples"] = gr.Gallery(
                value=gallery.items("cifar10"),
                label=GALLERY_LABELS["cifar10"],
                columns=10,
                height=170,
                allow_preview=False,
                selected_index=DEFAULT_EXAMPLE,
                elem_id="examples",
            )
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300):
            c["rollout_strip"] = pic("Rollout up to each layer", "rollout-strip", elem_classes_extra=["vv-wide"])
            help_line(HELP["rollout_strip"])
            c["lens"] = pic("Logit lens", "lens", elem_classes_extra=["vv-wide"])
            c["help_lens"] = help_line(HELP["lens"])
        with gr.Column(scale=1, min_width=300):
            c["heads"] = pic("Attention in every layer and head", "heads", elem_classes_extra=["vv-wide"])
            c["shared"] = gr.Checkbox(value=False, label="One colour scale for all these tiles", elem_id="shared")
            help_line(HELP["heads"])
            c["norms"] = pic("Token norms", "norms", elem_classes_extra=["vv-wide"])
            help_line(HELP["norms"])
    c["api_explain"], c["api_export"] = gr.Button(visible=False), gr.Button(visible=False)
