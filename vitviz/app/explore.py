"""The Explore tab: one image through the chosen model, every attention picture, a patch to click.

Layout first (`build`), then the handlers, then the wiring (`wire`). The pictures are
drawn by vitviz.views as one `ExploreView`; its field order is the order of the
outputs, written once.
"""
from __future__ import annotations


import gradio as gr
import numpy as np
import torch
from PIL import Image

from .. import gallery, scratch, views
from ..card import card_of
from ..data import DATASETS, DataUnavailable, load_dataset, pixels_to_tensor
from .activity import ACTIVITY
from .inputs import FUSIONS, PREDICTED, choice, number, patch_index, pixels_for, whole
from . import models
from .models import resolve_model, visitor
from .widgets import pic


def explore_view(image, model_key: str = "cifar10", fusion: str = "mean", discard: float = 0.0,
                 target: str = PREDICTED, layer: float = 6, head: float = 1, patch: float = -1,
                 alpha: float = 0.6, smooth: bool = True, state=None):
    """(ExploreView, Explanation, visitor) for one image and one set of options."""
    with ACTIVITY:
        return _explore_view(image, model_key, fusion, discard, target, layer, head, patch, alpha, smooth, state)


def _explore_view(image, model_key, fusion, discard, target, layer, head, patch, alpha, smooth, state):
    v = visitor(state)
    model = resolve_model(model_key, v)
    cfg = card_of(model).config
    fusion = choice(fusion, "Head fusion", FUSIONS, default="mean")
    discard = number(discard, "The discard ratio", 0.0, 0.99, default=0.0)
    alpha = number(alpha, "The map opacity", 0.0, 1.0, default=0.6)
    layer = min(max(1, whole(layer, "The layer", -10**9, 10**9, default=cfg.depth)), cfg.depth)
    head = min(max(1, whole(head, "The head", -10**9, 10**9, default=1)), cfg.num_heads)
    p = patch_index(patch, cfg.num_patches)
    pixels = pixels_for(model, image)
    try:
        t = views.parse_target(model, target)
    except ValueError as e:
        raise gr.Error(f"Gradient rollout class: {e}.") from None
    key = (model_key, id(model), hash(pixels.tobytes()), t)
    if v.last is not None and v.last[0] == key:
        ex = v.last[1]
    else:
        ex = views.analyse(model, pixels, t)
        v.last = (key, ex)
    view = views.render_explore(model, ex, fusion, discard, layer, head, p, alpha, bool(smooth))
    return view, ex, v


def explain(image, model_key: str = "cifar10", fusion: str = "mean", discard: float = 0.0,
            target: str = PREDICTED, layer: float = 6, head: float = 1, patch: float = -1,
            alpha: float = 0.6, smooth: bool = True, state=None):
    """Every Explore picture for one image and one set of options (the outputs of views.ExploreView, then
    the visitor's state)."""
    view, _, v = explore_view(image, model_key, fusion, discard, target, layer, head, patch, alpha, smooth, state)
    return (*view.outputs(), v)


@torch.inference_mode()
def predict(image, model_key: str = "cifar10", state=None) -> dict[str, float]:
    """Top-5 class probabilities for an image, in gr.Label's format."""
    with ACTIVITY:
        model = resolve_model(model_key, state)
        card = card_of(model)
        pixels = pixels_for(model, image)
        probs = model(pixels_to_tensor(pixels, card.mean, card.std))[0].float().softmax(-1)
    return views.top_k(model, probs)


def export(image, model_key: str = "cifar10", fusion: str = "mean", discard: float = 0.0, target: str = PREDICTED,
           layer: float = 6, head: float = 1, patch: float = -1, alpha: float = 0.6, smooth: bool = True,
           state=None):
    """Every picture of the current Explore view as PNGs in a zip, and the raw attention as .npy."""
    view, ex, v = explore_view(image, model_key, fusion, discard, target, layer, head, patch, alpha, smooth, state)
    zpath, npath = views.export_view(view, ex.attn, scratch.new_folder("export"))
    return [str(zpath), str(npath)], v


def examples_default() -> str | None:
    """The example the page opens on: a CIFAR-10 test image of the shipped model's gallery."""
    items = gallery.items("cifar10")
    return items[3][0] if len(items) > 3 else None


def examples_for(model) -> list[tuple[str, str]]:
    return gallery.items(card_of(model).gallery)


def pick_example(model_key: str, state, evt: gr.SelectData):
    """The clicked example, from the gallery that suits the chosen model (MNIST digits for an MNIST model)."""
    items = examples_for(resolve_model(model_key, state))
    if not items:
        raise gr.Error("No examples are shipped for this model.")
    path, _ = items[evt.index % len(items)]
    return path, -1


_test_sets: dict[str, object] = {}


def random_test_image(model_key: str, state):
    model = resolve_model(model_key, state)
    ds = card_of(model).gallery
    try:
        if ds not in _test_sets:
            _test_sets[ds] = load_dataset(ds, val_size=0).test
    except DataUnavailable:
        raise gr.Error("The full test set is not on this machine (set VITVIZ_DATA to use it); "
                       "pick one of the examples instead.") from None
    split = _test_sets[ds]
    i = int(np.random.default_rng().integers(len(split)))
    arr = split.x[i].permute(1, 2, 0).numpy()
    im = Image.fromarray(arr[:, :, 0] if arr.shape[2] == 1 else arr)
    label = DATASETS[ds]["classes"][int(split.y[i])]
    path = scratch.new_folder("image") / f"test_{i}_{label}.png"
    im.save(path)
    return str(path), -1, f"Random test image #{i}; true label: **{label}**"


def click_patch(model_key: str, state, evt: gr.SelectData):
    cfg = card_of(resolve_model(model_key, state)).config
    x, y = evt.index[0], evt.index[1]
    return views.click_to_patch(x, y, views.display_size(cfg), cfg.grid_size)


def controls_for(model_key: str, state, progress=gr.Progress(track_tqdm=True)):
    """When the model changes: its class list, slider ranges and example gallery; the patch goes back to none.

    A model that cannot be had (ViT-B/16 without internet, no session model yet) gets a warning and the menu
    goes back to the shipped CIFAR-10 model. A first ViT-B/16 load shows the download's progress (torchvision's
    tqdm bar, tracked) and says where the weights are kept; it holds up no one else (a lock per model)."""
    if model_key == "vit_b_16" and not models.MODELS.loaded("vit_b_16"):
        from ..tv_vit import weights_cached, weights_folder

        progress(0, desc="Loading ViT-B/16" + ("" if weights_cached() else " (downloading 330 MB once)"))
        gr.Info(f"ViT-B/16's weights are kept in {weights_folder()}.")
    try:
        model = resolve_model(model_key, state)
    except gr.Error as e:
        gr.Warning(e.message)
        model_key = "cifar10"
        model = resolve_model(model_key, state)
    card = card_of(model)
    cfg = card.config
    return (model_key,
            gr.update(choices=[PREDICTED] + list(card.classes), value=PREDICTED),
            gr.update(maximum=cfg.depth, value=cfg.depth),
            gr.update(maximum=cfg.num_heads, value=1),
            gr.update(value=examples_for(model), label=GALLERY_LABELS[card.gallery]),
            -1)


GALLERY_LABELS = {"cifar10": "Examples: CIFAR-10 test images", "mnist": "Examples: MNIST test digits"}


# ---------------------------------------------------------------- layout and wiring


def build() -> dict:
    """The Explore tab's components, by name; the pictures under the names of views.ExploreView's fields."""
    c = {}
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            c["image"] = gr.Image(type="filepath", image_mode=None, sources=["upload", "clipboard"], label="Image",
                                  height=240, elem_id="input-image")
            c["examples"] = gr.Gallery(value=gallery.items("cifar10"), label=GALLERY_LABELS["cifar10"], columns=10,
                                       height=200, allow_preview=False, elem_id="examples")
            with gr.Row():
                c["random"] = gr.Button("Random test image", size="sm")
                c["explain"] = gr.Button("Explain", variant="primary", size="sm", elem_id="explain-btn")
                c["export"] = gr.Button("Export view", size="sm", elem_id="export-btn")
            c["export_files"] = gr.File(label="Exported: PNGs (zip) and raw attention (.npy)", file_count="multiple",
                                        interactive=False, elem_id="export-files")
            c["image_note"] = gr.Markdown()
            c["fusion"] = gr.Radio(FUSIONS, value="mean", label="Rollout head fusion", elem_id="fusion")
            c["discard"] = gr.Slider(0.0, 0.99, value=0.0, step=0.05, label="Rollout: discard the weakest fraction")
            c["target"] = gr.Dropdown([PREDICTED] + DATASETS["cifar10"]["classes"], value=PREDICTED,
                                      label="Gradient rollout: explain class")
            with gr.Row():
                c["layer"] = gr.Slider(1, 6, value=6, step=1, label="Layer (large view)")
                c["head"] = gr.Slider(1, 6, value=1, step=1, label="Head (large view)")
            c["patch"] = gr.Number(value=-1, precision=0, label="Selected patch (click the input; -1: none)",
                                   elem_id="patch")
            with gr.Row():
                c["alpha"] = gr.Slider(0.0, 1.0, value=0.6, step=0.05, label="Map opacity")
                c["smooth"] = gr.Checkbox(value=True, label="Smooth maps (bilinear)")
        with gr.Column(scale=2):
            c["summary"] = gr.Markdown()
            with gr.Row():
                c["sees"] = pic("What the model sees (click a patch)", "sees", fmt="png", height=320)
                c["top5"] = gr.Label(num_top_classes=5, label="Top 5")
            with gr.Row():
                c["rollout"] = pic("Attention rollout", "rollout")
                c["grad_rollout"] = pic("Gradient rollout")
                c["head_large"] = pic("Selected layer and head")
            c["rollout_strip"] = pic("Rollout up to each layer")
            c["heads"] = pic("CLS attention: every layer x head")
            with gr.Row():
                c["patch_heads"] = pic("From the selected patch: every layer x head", "patch-heads")
                c["patch_rollout"] = pic("From the selected patch: rolled out", fmt="png")
    return c


OPTIONS = ("fusion", "discard", "target", "layer", "head", "patch", "alpha", "smooth")


def wire(c: dict, shell):
    """Explore's events. `shell` gives the model menu and the visitor's state."""
    inputs = [c["image"], shell.model_dd] + [c[k] for k in OPTIONS] + [shell.state]
    outputs = [c[name] for name in views.OUTPUT_NAMES] + [shell.state]
    ev = dict(fn=explain, inputs=inputs, outputs=outputs, preprocess=False, concurrency_limit=4)
    c["explain"].click(**ev, api_name="explain",
                       api_description="Attention pictures for an image: rollout, gradient rollout, "
                                       "per layer x head, and from a chosen patch.")
    for k in ("fusion", "discard", "target", "layer", "head", "patch", "smooth"):
        c[k].change(**ev, api_visibility="private", trigger_mode="always_last")
    c["alpha"].release(**ev, api_visibility="private")
    c["image"].change(lambda: -1, None, c["patch"], api_visibility="private", queue=False).then(
        **ev, api_visibility="private")
    shell.hidden_predict.click(predict, [c["image"], shell.model_dd, shell.state], c["top5"], preprocess=False,
                               api_name="predict", api_description="Top-5 class probabilities for an image.")
    c["examples"].select(pick_example, [shell.model_dd, shell.state], [c["image"], c["patch"]],
                         api_visibility="private")
    c["random"].click(random_test_image, [shell.model_dd, shell.state], [c["image"], c["patch"], c["image_note"]],
                      api_visibility="private")
    c["sees"].select(click_patch, [shell.model_dd, shell.state], c["patch"], api_visibility="private")
    c["export"].click(export, inputs, [c["export_files"], shell.state], preprocess=False, api_name="export",
                      api_description="The Explore view's pictures as PNGs in a zip, and the raw attention as .npy.")
    return ev


def model_changed(c: dict, shell):
    """What the model menu's change does to this tab: (fn, inputs, outputs) for the shell's chain."""
    return dict(fn=controls_for, inputs=[shell.model_dd, shell.state],
                outputs=[shell.model_dd, c["target"], c["layer"], c["head"], c["examples"], c["patch"]])
