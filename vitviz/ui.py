"""The Gradio app: layout and wiring only. The pictures come from vitviz.views.

Module globals hold only read-only things (the shipped models, loaded once);
each visitor's own models (an upload, a model trained in the Train tab) and
their last explanation live in that visitor's gr.State.
"""
from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import gradio as gr
import numpy as np
import torch
from PIL import Image

from . import checkpoint, gallery, live, views
from .data import DATASETS, DataUnavailable, load_dataset, open_image, pixels_to_tensor
from .hub import load_model
from .model import PRESETS, make_config
from .train import TrainConfig, describe_device, pick_device

MODEL_CHOICES = [
    ("CIFAR-10 ViT (shipped)", "cifar10"),
    ("MNIST ViT (shipped)", "mnist"),
    ("ViT-B/16, ImageNet-1k (torchvision)", "vit_b_16"),
    ("Trained in this session (Train tab)", "session"),
    ("Uploaded checkpoint", "upload"),
]
FUSIONS = ["mean", "max", "min"]
PREDICTED = "predicted class"
ASSETS = Path(__file__).resolve().parent / "assets"
INTRO = """# vitviz: see how a Vision Transformer sees
Pick or upload an image. The ViT cuts it into patches (left), predicts, and shows where its attention goes:
**attention rollout** (attention through all layers, Abnar & Zuidema 2020), **gradient rollout**
(class-specific relevance, Chefer et al. 2021), and every layer and head.
**Click a patch** on the model's input to see what that patch attends to."""


class SharedModels:
    """The shipped models and ViT-B/16, each loaded once on first use and then only read."""

    def __init__(self):
        self._models: dict[str, torch.nn.Module] = {}
        self._lock = threading.Lock()

    def get(self, key: str):
        with self._lock, torch.inference_mode(False):  # weights must be usable by autograd later
            if key not in self._models:
                self._models[key] = load_model(key)
            return self._models[key]


MODELS = SharedModels()
_model_view_cache: dict[tuple, dict] = {}
_cache_lock = threading.Lock()


def new_state() -> dict:
    return {"models": {}, "cache": None}


def resolve_model(key: str, state: dict | None):
    """The model a visitor chose; a gr.Error with a plain sentence when it cannot be had."""
    state = state if isinstance(state, dict) else new_state()
    if key in ("session", "upload") or str(key).startswith("session@"):
        m = state.get("models", {}).get(key)
        if m is None:
            raise gr.Error("No model trained in this session yet: start a run in the Train tab, then press "
                           "'Explore this model'." if key.startswith("session") else
                           "No checkpoint uploaded yet: add its .safetensors and .json files above.")
        return m
    if key not in ("cifar10", "mnist", "vit_b_16"):
        raise gr.Error(f"Unknown model {key!r}; choose one of: cifar10, mnist, vit_b_16.")
    try:
        return MODELS.get(key)
    except checkpoint.CheckpointError as e:
        raise gr.Error(f"The shipped model could not be loaded: {e}") from None
    except RuntimeError as e:
        raise gr.Error(str(e)) from None


def read_image(payload) -> Image.Image:
    """The uploaded image from a Gradio file payload (dict or path), opened with vitviz's guards."""
    if payload is None:
        raise gr.Error("Choose an image first: upload one or pick one from the examples.")
    path = payload.get("path") if isinstance(payload, dict) else payload
    if not path or not os.path.isfile(str(path)):
        raise gr.Error("The image could not be found on the server; please upload it again.")
    try:
        return open_image(str(path))
    except ValueError as e:
        raise gr.Error(f"That file could not be used: {e}.") from None


def _pixels_for(model, payload) -> np.ndarray:
    image = read_image(payload)
    try:
        return views.image_to_pixels(model, image)
    except ValueError as e:
        raise gr.Error(f"That image could not be used: {e}.") from None


def _int_or_none(v):
    try:
        v = int(v)
    except (TypeError, ValueError):
        return None
    return v if v >= 0 else None


# ---------------------------------------------------------------- handlers


def explain(image, model_key: str = "cifar10", fusion: str = "mean", discard: float = 0.0,
            target: str = PREDICTED, layer: float = 6, head: float = 1, patch: float = -1,
            alpha: float = 0.6, smooth: bool = True, state: dict | None = None):
    """Every Explore picture for one image and one set of options."""
    state = state if isinstance(state, dict) else new_state()
    model = resolve_model(model_key or "cifar10", state)
    if fusion not in FUSIONS:
        raise gr.Error(f"Head fusion must be one of {', '.join(FUSIONS)}.")
    try:
        discard = float(discard)
        alpha = float(alpha)
    except (TypeError, ValueError):
        raise gr.Error("Discard ratio and opacity must be numbers.") from None
    if not 0.0 <= discard <= 0.99:
        raise gr.Error("The discard ratio must be between 0 and 0.99.")
    alpha = min(1.0, max(0.0, alpha))
    pixels = _pixels_for(model, image)
    try:
        t = views.parse_target(model, target)
    except ValueError as e:
        raise gr.Error(f"Gradient rollout class: {e}.") from None
    key = (model_key, id(model), hash(pixels.tobytes()), t)
    cached = state.get("cache")
    if cached is not None and cached[0] == key:
        ex = cached[1]
    else:
        ex = views.explain_image(model, pixels, t)
        state["cache"] = (key, ex)
    L, H = ex.attn.shape[:2]
    layer_i = min(max(1, int(layer or L)), L)
    head_i = min(max(1, int(head or 1)), H)
    p = _int_or_none(patch)
    if p is not None and p >= model.config.num_patches:
        p = None
    out = views.render_explore(model, ex, fusion, discard, layer_i, head_i, p, alpha, bool(smooth))
    summary = views.explore_summary(model, ex, layer_i, head_i, p)
    return (views.top_k(model, ex.probs), out["sees"], out["rollout"], out["grad_rollout"], out["rollout_strip"],
            out["heads"], out["head_large"], out["patch_heads"], out["patch_rollout"], summary, state)


@torch.inference_mode()
def predict(image, model_key: str = "cifar10", state: dict | None = None) -> dict[str, float]:
    """Top-5 class probabilities for an image, in gr.Label's format."""
    model = resolve_model(model_key or "cifar10", state)
    pixels = _pixels_for(model, image)
    probs = model(pixels_to_tensor(pixels, model.mean, model.std))[0].float().softmax(-1)
    return views.top_k(model, probs)


def model_controls(model_key: str, state: dict | None):
    """Class list and slider ranges for the chosen model, and the matching example gallery.

    A model that cannot be had (ViT-B/16 without internet, no session model yet) gets a
    warning and the menu goes back to the shipped CIFAR-10 model.
    """
    try:
        model = resolve_model(model_key, state)
    except gr.Error as e:
        gr.Warning(e.message)
        model_key = "cifar10"
        model = resolve_model(model_key, state)
    cfg = model.config
    ds = getattr(model, "dataset", None)
    examples = gallery.items("mnist" if ds == "mnist" else "cifar10")
    choices = [PREDICTED] + list(model.classes)
    return (model_key,
            gr.update(choices=choices, value=PREDICTED),
            gr.update(maximum=cfg.depth, value=cfg.depth),
            gr.update(maximum=cfg.num_heads, value=1),
            gr.update(value=examples, label="Examples: MNIST test digits" if ds == "mnist" else
                      "Examples: CIFAR-10 test images"),
            -1)


def pick_example(model_key: str, evt: gr.SelectData):
    ds = "mnist" if model_key == "mnist" else "cifar10"
    items = gallery.items(ds)
    if not items:
        raise gr.Error("No examples are shipped for this model.")
    path, _ = items[evt.index % len(items)]
    return path, -1


_test_sets: dict[str, object] = {}


def random_test_image(model_key: str, state: dict | None):
    model = resolve_model(model_key, state)
    ds = getattr(model, "dataset", None) or "cifar10"
    if ds not in ("cifar10", "mnist"):
        ds = "cifar10"
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
    classes = DATASETS[ds]["classes"]
    path = Path(tempfile.mkdtemp(prefix="vitviz-")) / f"test_{i}_{classes[int(split.y[i])]}.png"
    im.save(path)
    return str(path), -1, f"Random test image #{i}; true label: **{classes[int(split.y[i])]}**"


def click_patch(model_key: str, state: dict | None, evt: gr.SelectData):
    model = resolve_model(model_key, state)
    cfg = model.config
    x, y = evt.index[0], evt.index[1]
    return views.click_to_patch(x, y, views.display_size(cfg), cfg.grid_size)


def upload_checkpoint(files, state: dict | None):
    state = state if isinstance(state, dict) else new_state()
    paths = [f if isinstance(f, str) else getattr(f, "name", None) or f.get("path") for f in (files or [])]
    weights = [p for p in paths if str(p).endswith(".safetensors")]
    metas = [p for p in paths if str(p).endswith(".json")]
    if len(weights) != 1 or len(metas) != 1:
        raise gr.Error("Upload two files together: the weights (.safetensors) and the description (.json).")
    try:
        model = checkpoint.load_pair(weights[0], metas[0])
    except checkpoint.CheckpointError as e:
        raise gr.Error(f"That checkpoint could not be loaded: {e}.") from None
    state.setdefault("models", {})["upload"] = model
    state["cache"] = None
    cfg = model.config
    msg = (f"Loaded **{Path(weights[0]).name}**: {cfg.image_size}x{cfg.image_size}, patch {cfg.patch_size}, depth "
           f"{cfg.depth}, {cfg.num_heads} heads, {len(model.classes)} classes.")
    return msg, state, "upload"


def model_view(model_key: str, position, state: dict | None):
    model = resolve_model(model_key, state)
    pos = _int_or_none(position)
    key = (model_key, id(model), pos)
    with _cache_lock:
        hit = _model_view_cache.get(key)
    if hit is None:
        ds = getattr(model, "dataset", None)
        items = gallery.items("mnist" if ds == "mnist" else "cifar10")
        if ds == "imagenet":
            items = items[::10]  # ViT-B/16 is slow on a CPU: 10 images
        images = [views.image_to_pixels(model, Image.open(p)) for p, _ in items]
        with torch.inference_mode():
            hit = views.render_model(model, images, pos)
        hit.pop("sim")
        if model_key in ("cifar10", "mnist", "vit_b_16"):
            with _cache_lock:
                _model_view_cache[key] = hit
    var = hit["variance"]
    comp_note = f"Top {len(var)} principal components of the patch-embedding filters ({100 * float(var.sum()):.0f}% of their variance)."
    return hit["pos_tiles"], hit["pos_large"], hit["distance"], hit["components"], hit["card"], comp_note


def pos_click(model_key: str, state: dict | None, evt: gr.SelectData):
    model = resolve_model(model_key, state)
    g = model.config.grid_size
    step = views.pos_tile_size(g) + 2  # tiles and their 2-pixel gaps, as render.pos_similarity_tiles lays them
    x, y = evt.index[0], evt.index[1]
    c = min(g - 1, max(0, int((x - 2) // step)))
    r = min(g - 1, max(0, int((y - 2) // step)))
    return r * g + c


# ---------------------------------------------------------------- Train tab

TRAIN_SLOTS = max(1, int(os.environ.get("VITVIZ_TRAIN_SLOTS", "1")))
ZERO_GPU = "SPACES_ZERO_GPU" in os.environ  # Hugging Face ZeroGPU: a GPU is attached per call
DEVICE = pick_device("auto")
QUICK = live.quick_defaults(DEVICE)
TINY = make_config(QUICK["preset"])


def progress_html(p: float | None) -> str:
    pct = 0 if p is None else int(round(100 * max(0.0, min(1.0, p))))
    return (f'<div class="vv-progress"><div class="vv-bar" style="width:{pct}%"></div>'
            f'<span>{pct}%</span></div>')


def preset_sizes(preset: str):
    cfg = make_config(preset)
    return cfg.depth, cfg.num_heads, cfg.embed_dim, cfg.patch_size


def _session_key(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "api"


def train_run(dataset: str = "cifar10", preset: str = QUICK["preset"], depth: float = TINY.depth,
              heads: float = TINY.num_heads, width: float = TINY.embed_dim, patch: float = TINY.patch_size,
              epochs: float = QUICK["epochs"], time_budget: float = QUICK["time_budget"],
              batch_size: float = QUICK["batch_size"], lr: float = QUICK["lr"], subset: float = QUICK["subset"],
              augment: bool = QUICK["augment"], seed: float = 0, state: dict | None = None,
              request: gr.Request = None):
    """Train a ViT live; streams (status, progress, curves, probe rollouts, positional tiles, files, state,
    and at the end the Compare menus with the epoch snapshots)."""
    state = state if isinstance(state, dict) else new_state()
    if dataset not in DATASETS:
        raise gr.Error(f"Data set must be one of {', '.join(DATASETS)}.")
    if preset not in PRESETS:
        raise gr.Error(f"Preset must be one of {', '.join(PRESETS)}.")
    try:
        depth, heads, width, patch = int(depth), int(heads), int(width), int(patch)
        epochs, time_budget, lr = float(epochs), float(time_budget or 0), float(lr)
        batch_size, subset, seed = int(batch_size), int(subset or 0), int(seed or 0)
    except (TypeError, ValueError):
        raise gr.Error("Every training setting must be a number.") from None
    spec = DATASETS[dataset]
    if not (1 <= depth <= 12 and 1 <= heads <= 16 and 16 <= width <= 512):
        raise gr.Error("Depth must be 1-12, heads 1-16 and width 16-512.")
    if width % heads:
        raise gr.Error(f"The width ({width}) must be divisible by the number of heads ({heads}).")
    if spec["image_size"] % patch:
        raise gr.Error(f"Patch size {patch} does not divide the {spec['image_size']}-pixel {dataset} images; "
                       f"try {', '.join(str(p) for p in (2, 4, 7, 8) if spec['image_size'] % p == 0)}.")
    if not (0 < epochs <= 200) or not (0 <= time_budget <= 3600) or not (8 <= batch_size <= 2048):
        raise gr.Error("Epochs must be in (0, 200], the time budget 0-3600 s and the batch size 8-2048.")
    if not (0 < lr <= 1):
        raise gr.Error("The learning rate must be between 0 and 1.")
    if subset and subset < batch_size:
        raise gr.Error("The training subset must hold at least one batch (or be 0 for all images).")
    if not live.data_available(dataset):
        raise gr.Error(f"The {dataset} data set is not available here: set VITVIZ_DATA to a folder or zip with "
                       "train/<class>/ and test/<class>/, or run where torchvision can download it. "
                       "The rest of the app works without it.")
    cfg = TrainConfig(dataset=dataset, preset=preset, depth=depth, num_heads=heads, embed_dim=width,
                      patch_size=patch, epochs=epochs, time_budget=time_budget, batch_size=batch_size, lr=lr,
                      subset=subset, augment=bool(augment), seed=seed, warmup=QUICK["warmup"],
                      label_smoothing=QUICK["label_smoothing"],
                      snapshot_every=50 if DEVICE.type == "cpu" else 200, eval_images=1000,
                      log_every=5 if DEVICE.type == "cpu" else 20)
    key = _session_key(request)
    stop = live.STOPS.new(key)
    skip = gr.skip()
    try:
        for up in live.stream_run(cfg, stop):
            choices = skip
            if up.done and up.model is not None:
                models = state.setdefault("models", {})
                for k in [k for k in models if k.startswith("session@")]:
                    del models[k]
                models["session"] = up.model
                models.update({f"session@{e}": m for e, m in up.snapshots.items()})
                state["cache"] = None
                choices = MODEL_CHOICES + [(f"Trained in this session, after epoch {e}", f"session@{e}")
                                           for e in sorted(up.snapshots)]
            yield (up.status if up.status is not None else skip,
                   progress_html(up.progress) if up.progress is not None else skip,
                   up.curves if up.curves is not None else skip,
                   up.probes if up.probes is not None else skip,
                   up.pos_tiles if up.pos_tiles is not None else skip,
                   up.files if up.files else skip,
                   state,
                   gr.update(choices=choices) if choices is not skip else skip,
                   gr.update(choices=choices, value="session") if choices is not skip else skip)
    finally:
        live.STOPS.clear(key, stop)


def stop_run(request: gr.Request = None) -> str:
    if live.STOPS.stop(_session_key(request)):
        return "Stopping: the run keeps what it has learned so far."
    return "No run of yours is going."


def explore_trained(state: dict | None):
    if not (isinstance(state, dict) and state.get("models", {}).get("session") is not None):
        raise gr.Error("Train a model first: press Train and wait for it to finish, or stop it.")
    return gr.update(value="session"), gr.Tabs(selected="explore")


try:  # On Hugging Face ZeroGPU the run asks for a GPU; elsewhere nothing changes.
    if ZERO_GPU:
        import spaces

        train_run = spaces.GPU(duration=300)(train_run)
except ImportError:  # pragma: no cover
    pass


# ---------------------------------------------------------------- Compare and export


def compare(image, model_a: str = "cifar10", model_b: str = "mnist", fusion: str = "mean", discard: float = 0.0,
            state: dict | None = None):
    """The same image and options through two models, side by side."""
    if fusion not in FUSIONS:
        raise gr.Error(f"Head fusion must be one of {', '.join(FUSIONS)}.")
    try:
        discard = min(0.99, max(0.0, float(discard)))
    except (TypeError, ValueError):
        raise gr.Error("The discard ratio must be a number.") from None
    out = []
    for key in (model_a, model_b):
        model = resolve_model(key, state)
        ex = views.explain_image(model, _pixels_for(model, image))
        pics = views.render_explore(model, ex, fusion, discard, compact=True)
        out += [views.top_k(model, ex.probs), pics["rollout"], pics["grad_rollout"], pics["rollout_strip"]]
    return tuple(out)


def export(image, model_key: str = "cifar10", fusion: str = "mean", discard: float = 0.0, target: str = PREDICTED,
           layer: float = 6, head: float = 1, patch: float = -1, alpha: float = 0.6, smooth: bool = True,
           state: dict | None = None):
    """Every picture of the current Explore view as PNGs in a zip, and the raw attention as .npy."""
    out = explain(image, model_key, fusion, discard, target, layer, head, patch, alpha, smooth, state)
    names = ["input_with_patch_grid", "attention_rollout", "gradient_rollout", "rollout_by_layer",
             "cls_attention_layers_x_heads", "selected_layer_head", "patch_attention_layers_x_heads",
             "patch_rollout"]
    pictures = dict(zip(names, out[1:9]))
    ex = out[-1]["cache"][1]
    zpath, npath = views.export_view(pictures, ex.attn, tempfile.mkdtemp(prefix="vitviz-export-"))
    return [str(zpath), str(npath)], out[-1]


# ---------------------------------------------------------------- layout


def build_demo() -> gr.Blocks:
    cifar_examples = gallery.items("cifar10")
    with gr.Blocks(title="vitviz: see how a ViT sees") as demo:
        state = gr.State(new_state())
        gr.Markdown(INTRO)
        with gr.Row():
            model_dd = gr.Dropdown(MODEL_CHOICES, value="cifar10", label="Model", scale=3, elem_id="model-dd")
            with gr.Accordion("Upload a checkpoint (.safetensors + .json)", open=False):
                ckpt_files = gr.File(file_count="multiple", file_types=[".safetensors", ".json"],
                                     label="Checkpoint files")
                ckpt_status = gr.Markdown()
        with gr.Tabs() as tabs:
            with gr.Tab("Explore", id="explore"):
                with gr.Row():
                    with gr.Column(scale=1, min_width=300):
                        image = gr.Image(type="filepath", image_mode=None, sources=["upload", "clipboard"],
                                         label="Image", height=240, elem_id="input-image")
                        examples = gr.Gallery(value=cifar_examples, label="Examples: CIFAR-10 test images",
                                              columns=10, height=200, allow_preview=False, elem_id="examples")
                        with gr.Row():
                            random_btn = gr.Button("Random test image", size="sm")
                            explain_btn = gr.Button("Explain", variant="primary", size="sm", elem_id="explain-btn")
                            export_btn = gr.Button("Export view", size="sm", elem_id="export-btn")
                        export_files = gr.File(label="Exported: PNGs (zip) and raw attention (.npy)", file_count="multiple",
                                               interactive=False, visible=True, elem_id="export-files")
                        image_note = gr.Markdown()
                        fusion = gr.Radio(FUSIONS, value="mean", label="Rollout head fusion", elem_id="fusion")
                        discard = gr.Slider(0.0, 0.99, value=0.0, step=0.05, label="Rollout: discard the weakest fraction")
                        target = gr.Dropdown([PREDICTED] + DATASETS["cifar10"]["classes"], value=PREDICTED,
                                             label="Gradient rollout: explain class")
                        with gr.Row():
                            layer = gr.Slider(1, 6, value=6, step=1, label="Layer (large view)")
                            head = gr.Slider(1, 6, value=1, step=1, label="Head (large view)")
                        patch = gr.Number(value=-1, precision=0, label="Selected patch (click the input; -1: none)",
                                          elem_id="patch")
                        with gr.Row():
                            alpha = gr.Slider(0.0, 1.0, value=0.6, step=0.05, label="Map opacity")
                            smooth = gr.Checkbox(value=True, label="Smooth maps (bilinear)")
                    with gr.Column(scale=2):
                        summary = gr.Markdown()
                        with gr.Row():
                            sees = gr.Image(label="What the model sees (click a patch)", interactive=False,
                                            elem_id="sees", format="png", elem_classes=["vv-pic"], height=320)
                            label = gr.Label(num_top_classes=5, label="Top 5")
                        with gr.Row():
                            rollout_img = gr.Image(label="Attention rollout", interactive=False, format="jpeg", elem_classes=["vv-pic"],
                                                   elem_id="rollout")
                            grad_img = gr.Image(label="Gradient rollout", interactive=False, format="jpeg", elem_classes=["vv-pic"])
                            head_img = gr.Image(label="Selected layer and head", interactive=False, format="jpeg", elem_classes=["vv-pic"])
                        strip = gr.Image(label="Rollout up to each layer", interactive=False, format="jpeg", elem_classes=["vv-pic"])
                        heads_img = gr.Image(label="CLS attention: every layer x head", interactive=False, format="jpeg", elem_classes=["vv-pic"])
                        with gr.Row():
                            patch_heads = gr.Image(label="From the selected patch: every layer x head",
                                                   interactive=False, format="jpeg", elem_classes=["vv-pic"], elem_id="patch-heads")
                            patch_roll = gr.Image(label="From the selected patch: rolled out", interactive=False,
                                                  format="png")
            with gr.Tab("Model", id="model"):
                card = gr.Markdown()
                with gr.Row():
                    pos_tiles = gr.Image(label="Positional-embedding similarity (click a position)",
                                         interactive=False, format="jpeg", elem_classes=["vv-pic"], elem_id="pos-tiles")
                    pos_large = gr.Image(label="Selected position", interactive=False, format="jpeg", elem_classes=["vv-pic"])
                position = gr.Number(value=-1, precision=0, visible=False)
                with gr.Row():
                    dist_img = gr.Image(label="Mean attention distance per head", interactive=False, format="jpeg", elem_classes=["vv-pic"])
                    with gr.Column():
                        comps_img = gr.Image(label="Patch-embedding filters: principal components",
                                             interactive=False, format="jpeg", elem_classes=["vv-pic"])
                        comps_note = gr.Markdown()
            with gr.Tab("Train", id="train"):
                where = "a GPU (ZeroGPU, attached for each run)" if ZERO_GPU else describe_device(DEVICE)
                gr.Markdown(f"Train a small ViT from scratch and watch it learn. Runs on **{where}**; "
                            f"{TRAIN_SLOTS} run(s) at a time on this machine (others wait in line, with their "
                            f"place shown). {live.data_note()}")
                with gr.Row():
                    with gr.Column(scale=1, min_width=300):
                        t_dataset = gr.Radio(list(DATASETS), value="cifar10", label="Data set")
                        t_preset = gr.Dropdown(list(PRESETS), value=QUICK["preset"], label="Model preset")
                        with gr.Row():
                            t_depth = gr.Slider(1, 12, value=TINY.depth, step=1, label="Depth")
                            t_heads = gr.Dropdown([1, 2, 3, 4, 6, 8], value=TINY.num_heads, label="Heads", allow_custom_value=True)
                        with gr.Row():
                            t_width = gr.Dropdown([32, 64, 96, 128, 192, 256, 384], value=TINY.embed_dim, label="Width", allow_custom_value=True)
                            t_patch = gr.Dropdown([2, 4, 7, 8], value=TINY.patch_size, label="Patch size", allow_custom_value=True)
                        with gr.Row():
                            t_epochs = gr.Number(value=QUICK["epochs"], label="Epochs (at most)")
                            t_budget = gr.Number(value=QUICK["time_budget"], label="Time budget, s (0: none)")
                        with gr.Row():
                            t_bs = gr.Dropdown([32, 64, 128, 256, 512, 1024], value=QUICK["batch_size"], label="Batch size", allow_custom_value=True)
                            t_lr = gr.Number(value=QUICK["lr"], label="Learning rate")
                        with gr.Row():
                            t_subset = gr.Number(value=QUICK["subset"], precision=0, label="Training images (0: all)")
                            t_seed = gr.Number(value=0, precision=0, label="Seed")
                        t_aug = gr.Checkbox(value=QUICK["augment"], label="Augmentation (random crop, flips for CIFAR-10)")
                        with gr.Row():
                            train_btn = gr.Button("Train", variant="primary", elem_id="train-btn")
                            stop_btn = gr.Button("Stop", variant="stop", elem_id="stop-btn")
                        with gr.Row():
                            use_btn = gr.Button("Explore this model", elem_id="use-btn")
                        t_files = gr.File(label="Download the checkpoint (.safetensors + .json)", file_count="multiple",
                                          interactive=False)
                    with gr.Column(scale=2):
                        t_status = gr.Markdown("Press **Train** to start.", elem_id="train-status")
                        t_progress = gr.HTML(progress_html(0.0))
                        t_curves = gr.Image(label="Loss and accuracy", interactive=False, format="jpeg", elem_classes=["vv-pic"], elem_id="curves")
                        t_probes = gr.Image(label="Attention rollout on fixed probe images, labelled with the prediction "
                                                  "(green: right, red: wrong)",
                                            interactive=False, format="jpeg", elem_classes=["vv-pic"])
                        t_pos = gr.Image(label="Positional-embedding similarity", interactive=False, format="jpeg", elem_classes=["vv-pic"])
            with gr.Tab("Compare", id="compare"):
                gr.Markdown("The same image and options through two models, side by side: for example the shipped "
                            "model against the one you trained in the Train tab, or that run after its first epoch "
                            "against its end (a run keeps up to six epoch snapshots).")
                with gr.Row():
                    c_image = gr.Image(type="filepath", image_mode=None, sources=["upload", "clipboard"],
                                       label="Image", height=200, value=cifar_examples[3][0] if cifar_examples else None)
                    with gr.Column():
                        c_a = gr.Dropdown(MODEL_CHOICES, value="cifar10", label="Left model", allow_custom_value=True)
                        c_b = gr.Dropdown(MODEL_CHOICES, value="mnist", label="Right model", allow_custom_value=True)
                        c_fusion = gr.Radio(FUSIONS, value="mean", label="Rollout head fusion")
                        c_discard = gr.Slider(0.0, 0.99, value=0.0, step=0.05, label="Rollout: discard fraction")
                        c_btn = gr.Button("Compare", variant="primary")
                with gr.Row():
                    with gr.Column():
                        c_la = gr.Label(num_top_classes=5, label="Left: top 5")
                        with gr.Row():
                            c_ra = gr.Image(label="Left: rollout", interactive=False, format="jpeg", elem_classes=["vv-pic"])
                            c_ga = gr.Image(label="Left: gradient rollout", interactive=False, format="png",
                                            elem_classes=["vv-pic"])
                        c_sa = gr.Image(label="Left: rollout by layer", interactive=False, format="png",
                                        elem_classes=["vv-pic"])
                    with gr.Column():
                        c_lb = gr.Label(num_top_classes=5, label="Right: top 5")
                        with gr.Row():
                            c_rb = gr.Image(label="Right: rollout", interactive=False, format="png",
                                            elem_classes=["vv-pic"])
                            c_gb = gr.Image(label="Right: gradient rollout", interactive=False, format="png",
                                            elem_classes=["vv-pic"])
                        c_sb = gr.Image(label="Right: rollout by layer", interactive=False, format="png",
                                        elem_classes=["vv-pic"])
        hidden_predict = gr.Button(visible=False)

        # ------------------------------------------------------------ wiring
        explore_inputs = [image, model_dd, fusion, discard, target, layer, head, patch, alpha, smooth, state]
        explore_outputs = [label, sees, rollout_img, grad_img, strip, heads_img, head_img, patch_heads, patch_roll,
                           summary, state]
        ev = dict(fn=explain, inputs=explore_inputs, outputs=explore_outputs, preprocess=False,
                  concurrency_limit=4)
        explain_btn.click(**ev, api_name="explain",
                          api_description="Attention pictures for an image: rollout, gradient rollout, "
                                          "per layer x head, and from a chosen patch.")
        for comp in (fusion, discard, target, layer, head, patch, smooth):
            comp.change(**ev, api_visibility="private", trigger_mode="always_last")
        alpha.release(**ev, api_visibility="private")
        image.change(lambda: -1, None, patch, api_visibility="private", queue=False).then(
            **ev, api_visibility="private")
        hidden_predict.click(predict, [image, model_dd, state], label, preprocess=False, api_name="predict",
                             api_description="Top-5 class probabilities for an image.")
        examples.select(pick_example, [model_dd], [image, patch], api_visibility="private")
        random_btn.click(random_test_image, [model_dd, state], [image, patch, image_note], api_visibility="private")
        sees.select(click_patch, [model_dd, state], patch, api_visibility="private")

        mv_inputs = [model_dd, position, state]
        mv_outputs = [pos_tiles, pos_large, dist_img, comps_img, card, comps_note]
        model_dd.change(model_controls, [model_dd, state], [model_dd, target, layer, head, examples, patch],
                        api_visibility="private").then(
            model_view, mv_inputs, mv_outputs, api_visibility="private").then(
            **{**ev, "api_visibility": "private"})
        pos_tiles.select(pos_click, [model_dd, state], position, api_visibility="private").then(
            model_view, mv_inputs, mv_outputs, api_visibility="private")
        ckpt_files.upload(upload_checkpoint, [ckpt_files, state], [ckpt_status, state, model_dd],
                          api_visibility="private")

        t_preset.change(preset_sizes, t_preset, [t_depth, t_heads, t_width, t_patch], api_visibility="private")
        train_btn.click(train_run, [t_dataset, t_preset, t_depth, t_heads, t_width, t_patch, t_epochs, t_budget, t_bs,
                                    t_lr, t_subset, t_aug, t_seed, state],
                        [t_status, t_progress, t_curves, t_probes, t_pos, t_files, state, c_a, c_b],
                        api_name="train", concurrency_limit=TRAIN_SLOTS, concurrency_id="train",
                        api_description="Train a ViT live; streams status, progress, curves and pictures.")
        stop_btn.click(stop_run, None, t_status, api_name="stop", queue=False)
        use_btn.click(explore_trained, state, [model_dd, tabs], api_visibility="private")
        c_btn.click(compare, [c_image, c_a, c_b, c_fusion, c_discard, state],
                    [c_la, c_ra, c_ga, c_sa, c_lb, c_rb, c_gb, c_sb], preprocess=False, api_name="compare",
                    api_description="Two models on the same image and options.")
        export_btn.click(export, explore_inputs, [export_files, state], preprocess=False, api_name="export",
                         api_description="The Explore view's pictures as PNGs in a zip, and the raw attention as .npy.")
        demo.load(model_controls, [model_dd, state], [model_dd, target, layer, head, examples, patch],
                  api_visibility="private")
        if cifar_examples:
            demo.load(lambda: cifar_examples[3][0], None, image, api_visibility="private")
        demo.load(model_view, mv_inputs, mv_outputs, api_visibility="private")
    return demo


CSS = """
.vv-progress {position: relative; height: 22px; background: #eee; border-radius: 6px; overflow: hidden;}
.vv-bar {height: 100%; background: linear-gradient(90deg, #f97316, #fb923c); transition: width 0.4s;}
.vv-progress span {position: absolute; left: 8px; top: 2px; font-size: 13px; color: #222;}
.vv-pic [data-testid="block-label"] {position: static !important; margin-bottom: 4px;}
#input-image img {width: 100%; height: 100%; object-fit: contain; image-rendering: pixelated;}
"""


def launch(demo: gr.Blocks | None = None, **kw):
    demo = demo or build_demo()
    demo.queue(default_concurrency_limit=2)
    kw.setdefault("allowed_paths", [str(ASSETS)])
    kw.setdefault("show_error", True)
    kw.setdefault("css", CSS)
    return demo.launch(**kw)
