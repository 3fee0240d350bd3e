"""The Explore tab: one image through the chosen model, every attention picture, a token to pick.

Layout first (`build`), then the handlers, then the wiring (`wire`). The pictures are
vitviz.pictures.explore' `ExploreView`; its field order is the order of the outputs, written
once. The page's events send only the pictures that changed (the rest are gr.skip())
and put an error beside the control it is about; the API endpoints (/explain,
/export, /predict) answer every picture, or a gr.Error with the same sentence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vitviz.app.visitor import Visitor

if TYPE_CHECKING:  # the shell imports the tabs
    from vitviz.app.shell import Shell

import gradio as gr
import numpy as np
import torch

from vitviz.app import switch
from vitviz.app.activity import ACTIVITY
from vitviz.app.choices import examples_default
from vitviz.app.handlers import Outputs, endpoint, pictures_reply, same_parameters_as, warning
from vitviz.app.inputs import (
    FUSIONS,
    PREDICTED,
    FieldError,
    ImagePayload,
    choice,
    image_and_pixels,
    layer_index,
    number,
    pixels_for,
    token_index,
)
from vitviz.app.limits import method_refusal
from vitviz.app.menu import in_words, resolve_model
from vitviz.app.switch import GALLERY_LABELS
from vitviz.app.visitor import DEFAULT_EXAMPLE, image_key, visitor
from vitviz.app.widgets import help_line, pic
from vitviz.data import gallery
from vitviz.data.datasets import DATASETS
from vitviz.data.images import pixels_to_tensor
from vitviz.explain import interpret as I
from vitviz.explain.methods import CLASS_MAPS, DEFAULT_CLASS_MAP, METHODS
from vitviz.models.loaded import LoadedViT
from vitviz.models.words import DEFAULT_LABELS, DEFAULT_TEMPLATE
from vitviz.pictures import explanation as views
from vitviz.pictures import explore as pictures
from vitviz.runtime import scratch

OPTIONS = tuple("fusion discard target layer head patch alpha smooth shared method labels template".split())
NOTES = ("image_note", "target_note", "patch_note")
METHOD = DEFAULT_CLASS_MAP


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
) -> tuple[pictures.ExploreView, set[str], views.Explanation, Visitor]:
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
        photo, pixels = image_and_pixels(model, image)
        try:
            t = views.parse_target(model, target)
        except ValueError as e:
            raise FieldError(f"Gradient rollout class: {e}.", "target") from None
        ex = v.explore.keep(image_key(model_key, model, pixels, t), lambda: analysed(model, pixels, t, photo))
        with v.drawing():
            view, fresh = pictures.render_explore(model, ex, o, v.explore.pictures)
        if clamped:
            view.summary = f"{clamped}\n\n{view.summary}"
        return view, fresh, ex, v


def analysed(model: LoadedViT, pixels: np.ndarray, target: str | None, photo: np.ndarray) -> views.Explanation:
    ex = views.analyse(model, pixels, target)
    ex.original = views.original_thumbnail(photo)
    return ex


def _options(
    model: LoadedViT, fusion, discard, layer, head, patch, alpha, smooth, shared, method
) -> tuple[pictures.Options, str]:
    """The options, and the sentences saying which layer or head was brought into this model's range."""
    cfg = model.card.config
    patch, prefix = token_index(patch, model.layout)
    layer, layer_note = layer_index(layer, "The layer", cfg.depth, default=cfg.depth)
    head, head_note = layer_index(head, "The head", cfg.num_heads, default=1)
    return pictures.Options(
        fusion=choice(fusion, "Head fusion", FUSIONS, default="mean"),
        discard=number(discard, "The discard ratio", 0.0, 0.99, default=0.0),
        layer=layer,
        head=head,
        patch=patch,
        prefix=prefix,
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
    """/explain: every Explore picture for one image and one set of options (pictures.ExploreView's fields)."""
    view, _, _, v = explore_view(*args, **kw)
    return API.reply(
        **pictures_reply(view, pictures.OUTPUT_NAMES, pictures.PICTURE_NAMES, set(pictures.PICTURE_NAMES), v.files)
    )


def explain_page(*args) -> tuple:
    """The page's update: the pictures that changed (gr.skip() for the rest), the summary, the state, and the
    three notes; an error goes into the note beside its control and leaves the pictures as they were."""
    state = args[-1]
    notes = {k: "" for k in NOTES}
    try:
        view, fresh, _, v = explore_view(*args)
    except gr.Error as e:
        v = visitor(state)
        v.explore.pictures.clear()  # the page keeps its pictures; the next answer sends all of them again
        field = getattr(e, "field", "image")
        notes[f"{field}_note" if f"{field}_note" in notes else "image_note"] = warning(e)
        return PAGE.reply(state=v, **notes)
    drawn = pictures_reply(view, pictures.OUTPUT_NAMES, pictures.PICTURE_NAMES, fresh, v.files)
    return PAGE.reply(**drawn, state=v, **notes)


API = Outputs(*pictures.OUTPUT_NAMES)
PAGE = Outputs(*pictures.OUTPUT_NAMES, "state", *NOTES)  # the page's update


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
        model = in_words(resolve_model(model_key, state), labels, template)
        card = model.card
        pixels = pixels_for(model, image)
        probs = model.probabilities(model(pixels_to_tensor(pixels, card.mean, card.std))[0].float())
    return views.top_k(model, probs)


@same_parameters_as(explore_view)
def export(*args, **kw) -> tuple[list[str], Visitor]:
    """Every picture of the current Explore view as PNGs in a zip, and the raw attention as .npy."""
    view, _, ex, v = explore_view(*args, **kw)
    zpath, npath = views.export_view(view, ex.attn, scratch.new_folder("export"))
    return [str(zpath), str(npath)], v


def export_page(*args) -> tuple:
    """The Export button: the files appear (the box was hidden until now), or the reason beside the button."""
    try:
        files, v = export(*args)
    except gr.Error as e:
        return gr.update(visible=False), args[-1], f"⚠️ {e.message}"
    return gr.update(value=files, visible=True), v, ""


# ---------------------------------------------------------------- layout and wiring

HELP = {
    "sees": "What the model sees, cut into its patches. **Click a patch** to see what it attends to; "
    "click **CLS** (the class token, whose output is classified) to go back.",
    "rollout": "Where the selected token's information comes from, attention multiplied through every layer "
    "(Abnar & Zuidema, 2020). Brighter: more.",
    "class_map": "Which patches matter for the named class, by the chosen method. "
    + " ".join(f"**{m}**: {METHODS[m].about}" for m in CLASS_MAPS)
    + " The *Take patches away* tab tests them.",
    "head_large": "One head of one layer: the selected token's softmax row, how much it takes from each patch "
    "(the row sums to 1 with CLS).",
    "rollout_strip": "Rollout stopped after layer 1, 2, ...: how the picture forms with depth.",
    "lens": "What the model would predict if it stopped after each block: the CLS token read by the final norm "
    "and head (the logit lens). The Step by step tab walks through every stage.",
    "norms": "How long each patch token is after each block (its L2 norm). Large ViTs grow a few tokens with "
    f"far larger norms that soak up attention (Darcet et al., 2024); any at {I.OUTLIER_RATIO:g}x its "
    "block's median or more is outlined and named in the title.",
    "heads": "Each tile is one head's attention from the selected token. Early layers often look near the token, "
    "later ones across the image.",
}


def build() -> dict:
    """The Explore tab's components, by name; the pictures under the names of pictures.ExploreView's fields."""
    first = examples_default()  # the page opens on it (a link to a view: on the view's image)
    c = {"image": gr.Image(first, type="filepath", image_mode=None, visible=False, elem_id="input-image")}
    with gr.Row(equal_height=False, elem_id="explore-top"):
        with gr.Column(scale=0, min_width=330, elem_id="input-col"):
            c["sees"] = pic("What the model sees (click a patch or CLS)", "sees")
            c["top5"] = gr.Label(num_top_classes=5, label="Prediction (top 5)", show_heading=False, elem_id="top5")
            with gr.Row(elem_id="image-buttons"):
                c["upload"] = gr.UploadButton(
                    "Upload image", file_types=["image"], size="sm", elem_id="upload-btn", min_width=80
                )
                c["random"] = gr.Button("Random test image", size="sm", elem_id="random-btn", min_width=80)
                c["numbers"] = gr.Checkbox(True, label="Patch numbers", elem_id="numbers", min_width=80)
            c["image_note"] = gr.Markdown(elem_classes=["vv-note"], elem_id="image-note")
            c["original"] = pic("Your image, as uploaded", "original")
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
            help_line(HELP["class_map"])
        with gr.Column(scale=4, min_width=240):
            c["head_large"] = pic("Selected layer and head", "head-large")
            c["layer"] = gr.Slider(1, 6, value=6, step=1, label="Layer", elem_id="layer")
            c["head"] = gr.Slider(1, 6, value=1, step=1, label="Head", elem_id="head")
            help_line(HELP["head_large"])
    _build_below(c)
    return c


def _build_below(c: dict):
    """Under the first screen: the token and the display options, the examples, export; the many-panel maps."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=300):
            c["summary"] = gr.Markdown(elem_id="summary")
            help_line(HELP["sees"])
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
            help_line(HELP["lens"])
        with gr.Column(scale=1, min_width=300):
            c["heads"] = pic("Attention in every layer and head", "heads", elem_classes_extra=["vv-wide"])
            c["shared"] = gr.Checkbox(value=False, label="One colour scale for all these tiles", elem_id="shared")
            help_line(HELP["heads"])
            c["norms"] = pic("Token norms", "norms", elem_classes_extra=["vv-wide"])
            help_line(HELP["norms"])
    c["api_explain"], c["api_export"] = gr.Button(visible=False), gr.Button(visible=False)


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
    for k in ("fusion", "target", "layer", "head", "patch", "smooth", "shared", "method"):
        c[k].change(**page, trigger_mode="always_last")
    for k in ("labels", "template"):  # new words: the class menu lists them, then every picture is drawn again
        c[k].submit(
            switch.words_changed,
            [shell.model_dd, c["labels"], c["template"], c["target"], shell.state],
            [c["target"], c["top5"], c["target_note"]],
            api_visibility="private",
        ).then(**page)
    for k in ("discard", "alpha"):
        c[k].release(**page)
    c["image"].change(**page)
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
