"""The Train tab: a ViT learns live while the visitor watches.

One run per visitor (stop requests are keyed by their session), `VITVIZ_TRAIN_SLOTS`
runs at a time on the machine (default 1; others wait in line and see their place).
The settings are checked by vitviz.training.config before anything starts; the run
itself is vitviz.app.live's stream over the same loop the CLI uses.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator

import gradio as gr
import torch

from vitviz.app import live
from vitviz.app.handlers import Outputs, warning
from vitviz.app.menu import model_choices, remember
from vitviz.app.page import Shell
from vitviz.app.serving import limits
from vitviz.app.serving.activity import ACTIVITY
from vitviz.app.serving.places import PLACES, Refused
from vitviz.app.state import Visitor, visitor
from vitviz.app.widgets import help_line, pic, progress_html
from vitviz.data.datasets import DATASETS
from vitviz.models.hub import loaded
from vitviz.models.vit import PRESETS, make_config
from vitviz.pictures import run as run_pictures
from vitviz.runtime import memory, zerogpu
from vitviz.runtime.device import describe_device, pick_device
from vitviz.training import quick
from vitviz.training.config import ConfigError, TrainConfig
from vitviz.training.stops import STOPS

ZERO_GPU = zerogpu.enabled()  # Hugging Face ZeroGPU: a GPU is attached for each run


@functools.lru_cache(maxsize=1)
def device() -> torch.device:
    return pick_device("auto")


@functools.lru_cache(maxsize=1)
def default_run() -> dict:
    """The default quick run's settings on this machine."""
    return quick.quick_defaults(device())


def preset_sizes(preset: str) -> tuple[int, int, int, int]:
    cfg = make_config(preset if preset in PRESETS else default_run()["preset"])
    return cfg.depth, cfg.num_heads, cfg.embed_dim, cfg.patch_size


def _session_key(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "api"


def settings(
    dataset: object,
    preset: object,
    depth: object,
    heads: object,
    width: object,
    patch: object,
    epochs: object,
    time_budget: object,
    batch_size: object,
    lr: float,
    subset: object,
    augment: object,
    seed: object,
) -> dict:
    """The Train form's values under TrainConfig's names (None: the quick run's for this data set and budget)."""
    q = recipe(dataset, time_budget)
    tiny = make_config(q["preset"])
    pick = lambda v, d: d if v is None else v  # noqa: E731
    return dict(
        dataset=pick(dataset, "cifar10"),
        preset=pick(preset, q["preset"]),
        depth=pick(depth, tiny.depth),
        num_heads=pick(heads, tiny.num_heads),
        embed_dim=pick(width, tiny.embed_dim),
        patch_size=pick(patch, q["patch_size"]),
        epochs=pick(epochs, q["epochs"]),
        time_budget=pick(time_budget, q["time_budget"]) or 0,
        batch_size=pick(batch_size, q["batch_size"]),
        lr=pick(lr, q["lr"]),
        subset=pick(subset, q["subset"]) or 0,
        augment=pick(augment, q["augment"]),
        seed=pick(seed, 0) or 0,
    )


def recipe(dataset: object, budget: object) -> dict:
    """The quick run's settings on this machine for the form's data set and budget (the default ones where
    either is not a value the form offers)."""
    return quick.quick_defaults(device(), quick.budget_seconds(budget), dataset if dataset in DATASETS else "cifar10")


def follow_recipe(dataset: str, budget: object) -> tuple:
    """The patch size and augmentation of the quick run for this data set and budget: the form follows them when
    either changes (the visitor can still change both)."""
    q = recipe(dataset, budget)
    return gr.update(value=q["patch_size"]), gr.update(value=q["augment"])


def train_run(
    dataset: str = "cifar10",
    preset: str | None = None,
    depth: float | None = None,
    heads: float | None = None,
    width: float | None = None,
    patch: float | None = None,
    epochs: float | None = None,
    time_budget: float | None = None,
    batch_size: float | None = None,
    lr: float | None = None,
    subset: float | None = None,
    augment: bool | None = None,
    seed: float = 0,
    state: Visitor | None = None,
    request: gr.Request = None,
) -> Iterator[tuple]:
    """Train a ViT live; streams (status, progress, curves, probe rollouts, positional tiles, files, state,
    and at the end the Compare menus with the epoch snapshots). No argument: the default quick run. An API
    caller holds at most one place per address (see vitviz.app.serving.places)."""
    form = (dataset, preset, depth, heads, width, patch, epochs, time_budget, batch_size, lr, subset, augment, seed)
    yield from _train(form, state, request, page=False)


def _train(form: tuple, state: Visitor | None, request: gr.Request | None, page: bool):
    v = remember(visitor(state), request)
    try:
        cfg = quick.run_config(device(), **settings(*form))
    except ConfigError as e:
        raise gr.Error(str(e)) from None
    cfg, capped = limits.cap_time(cfg, zerogpu.gpu_seconds_cap() - GPU_MARGIN_S if ZERO_GPU else None)
    limits.check_memory(cfg)
    if not quick.data_available(cfg.budget.dataset):
        raise gr.Error(
            f"The {cfg.budget.dataset} data set is not available here: set VITVIZ_DATA to a folder or zip with "
            "train/<class>/ and test/<class>/, or run where torchvision can download it. "
            "The rest of the app works without it."
        )
    try:
        quick.check_fits(cfg)
    except ConfigError as e:
        raise gr.Error(str(e)) from None
    address = None if page else getattr(getattr(request, "client", None), "host", None)
    try:
        place = PLACES.enter(getattr(request, "session_hash", None), address)
    except Refused as e:
        raise gr.Error(str(e)) from None
    key = _session_key(request)
    stop = STOPS.new(key, across_processes=ZERO_GPU)  # on ZeroGPU the run lives in a forked worker
    try:
        while not place.wait(1.0):
            if stop.is_set():  # Stop while waiting: leave the line
                yield RUN.reply(status="Stopped before it started: you left the line.", state=v)
                return
            yield _waiting(place.ahead(), v)
        for up in stream(cfg, stop, note=capped, others=ACTIVITY.recent, style=v.crossing.style()):
            yield _outputs(up, v)
    finally:
        STOPS.clear(key, stop)
        place.leave()
        memory.give_back()  # what the run's activations and optimizer held


def _waiting(ahead: int, v) -> tuple:
    running, _ = PLACES.counts()
    return RUN.reply(
        status=f"Waiting for the training slot: {running} run(s) training, you are number {ahead} in line. Your "
        "run starts by itself.",
        state=v,
    )


@functools.wraps(train_run)
def train_page(*args, **kwargs) -> Iterator[tuple]:
    """The Train button: as /train, but settings that cannot be used are said in the status line (the API gets
    the same sentence as an error); the other outputs, the Compare menus among them, stay as they were."""
    bound = TRAIN_SIGNATURE.bind(*args, **kwargs)
    bound.apply_defaults()
    given = bound.arguments
    form = tuple(given[name] for name in list(given)[: len(FORM)])
    try:
        yield from _train(form, given["state"], given["request"], page=True)
    except gr.Error as e:
        yield RUN.reply(status=warning(e), state=visitor(given["state"]))


TRAIN_SIGNATURE = inspect.signature(train_run)


def _outputs(up: live.Update, v) -> tuple:
    """One streamed update as the tab's outputs; gr.skip() for what did not change."""
    menus = {}
    if up.done and up.model is not None:
        v.forget_session_models()
        v.models["session"] = loaded(up.model)  # its card names it as the visitor's run, with its record
        v.models.update({f"session@{e}": loaded(m) for e, m in up.snapshots.items()})
        choices = model_choices() + [
            (f"Trained in this session, after epoch {e}", f"session@{e}") for e in sorted(up.snapshots)
        ]
        menus = {"menu_a": gr.update(choices=choices), "menu_b": gr.update(choices=choices, value="session")}
    given = {"status": up.status, "curves": up.curves, "probes": up.probes, "pos": up.pos_tiles}
    return RUN.reply(
        **{k: value for k, value in given.items() if value is not None},
        **({"progress": progress_html(up.progress, up.stopped)} if up.progress is not None else {}),
        **({"files": up.files} if up.files else {}),
        state=v,
        **menus,
    )


RUN = Outputs("status", "progress", "curves", "probes", "pos", "files", "state", "menu_a", "menu_b")


def stop_run(request: gr.Request = None) -> str:
    if STOPS.stop(_session_key(request)):
        return "Stopping: the run keeps what it has learned so far."
    return "No run of yours is going."


def explore_trained(state: Visitor | None) -> tuple:
    if visitor(state).models.get("session") is None:
        raise gr.Error("Train a model first: press Train and wait for it to finish, or stop it.")
    return gr.update(value="session"), gr.Tabs(selected="explore")


def running_buttons() -> tuple[dict, dict, dict]:
    """While a run goes: Train off (one run a visitor), Stop on, Explore-this-model off until it ends."""
    return gr.update(interactive=False), gr.update(interactive=True), gr.update(interactive=False)


def idle_buttons(state: Visitor | None) -> tuple[dict, dict, dict]:
    """After a run (or a refused one): Train on, Stop off, Explore-this-model on if there is a model to explore."""
    has_model = visitor(state).models.get("session") is not None
    return gr.update(interactive=True), gr.update(interactive=False), gr.update(interactive=has_model)


GPU_MARGIN_S = 20  # GPU time for the final validation and pictures, past the run's training budget


def gpu_seconds(cfg: TrainConfig, *args, **kwargs) -> int:
    """How much GPU time a run asks ZeroGPU for: its training budget and the margin, at most the cap."""
    return int(min(zerogpu.gpu_seconds_cap(), cfg.budget.time_budget + GPU_MARGIN_S))


stream = live.stream_run
if ZERO_GPU:  # the run (only the run: its data is loaded before, in this process) asks for a GPU
    import spaces

    stream = spaces.GPU(duration=gpu_seconds)(live.stream_run)


# ---------------------------------------------------------------- layout and wiring


PRECISION_WORDS = (
    "**fp32, bf16**: the numbers the model computes with, 32 or 16 bits each. A processor built for bf16 (its "
    "*bf16 units*) runs it several times faster, at about the same accuracy; vitviz times both and uses the faster."
)


def build() -> dict:
    q = default_run()
    tiny = make_config(q["preset"])
    where = "a GPU (ZeroGPU, attached for each run)" if ZERO_GPU else describe_device(device())
    gr.Markdown(
        f"Train a small ViT from scratch and watch it learn. Runs on **{where}**; {PLACES.slots} run(s) at a "
        f"time on this machine, at most {limits.get('VITVIZ_MAX_TRAIN_SECONDS'):g} s each (others wait in "
        f"line, with their place shown). {quick.data_note()}"
    )
    c = {}
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            c["dataset"] = gr.Radio(list(DATASETS), value="cifar10", label="Data set")
            c["preset"] = gr.Dropdown(list(PRESETS), value=q["preset"], label="Model preset")
            with gr.Row():
                c["depth"] = gr.Slider(1, 12, value=tiny.depth, step=1, label="Depth")
                c["heads"] = gr.Dropdown(
                    [1, 2, 3, 4, 6, 8], value=tiny.num_heads, label="Heads", allow_custom_value=True
                )
            with gr.Row():
                c["width"] = gr.Dropdown(
                    [32, 64, 96, 128, 192, 256, 384], value=tiny.embed_dim, label="Width", allow_custom_value=True
                )
                c["patch"] = gr.Dropdown(
                    [2, 4, 7, 8], value=tiny.patch_size, label="Patch size", allow_custom_value=True
                )
            with gr.Row():
                c["epochs"] = gr.Number(value=q["epochs"], label="Epochs (at most)")
                c["budget"] = gr.Number(value=q["time_budget"], label="Time budget, s (0: none)")
            with gr.Row():
                c["batch"] = gr.Dropdown(
                    [32, 64, 128, 256, 512, 1024], value=q["batch_size"], label="Batch size", allow_custom_value=True
                )
                c["lr"] = gr.Number(value=q["lr"], label="Learning rate")
            with gr.Row():
                c["subset"] = gr.Number(value=q["subset"], precision=0, label="Training images (0: all)")
                c["seed"] = gr.Number(value=0, precision=0, label="Seed")
            c["augment"] = gr.Checkbox(value=q["augment"], label="Augmentation (random crop, flips for CIFAR-10)")
            with gr.Row():
                c["train"] = gr.Button("Train", variant="primary", elem_id="train-btn")
                c["stop"] = gr.Button("Stop", variant="stop", elem_id="stop-btn", interactive=False)
            c["use"] = gr.Button("Explore this model", elem_id="use-btn", interactive=False)
            c["api"] = gr.Button(visible=False)  # /train for API callers; the page's button is train_page
            c["files"] = gr.File(
                label="Download the checkpoint (.safetensors + .json)",
                file_count="multiple",
                interactive=False,
                height=110,
            )
        with gr.Column(scale=2):
            c["status"] = gr.Markdown("Press **Train** to start.", elem_id="train-status")
            c["progress"] = gr.HTML(progress_html(0.0))
            help_line(PRECISION_WORDS)
            c["curves"] = pic("Loss and accuracy", "curves", show_label=True, value=run_pictures.empty_curves())
            help_line(
                "Grey: the training loss of each step. Orange dots: a small held-out sample every "
                f"{quick.QUICK_VAL_EVERY_S} s. Circles, once an epoch has ended: blue, the mean of that epoch's "
                "steps (drawn at its middle); orange, every held-out image at its end; a star, the held-out "
                "images where a run was stopped. Chance is 10% for both data sets."
            )
            help_line(
                "**Why validation loss can sit below training loss:** training images are scored against "
                "smoothed labels (label smoothing 0.1 gives no image a full 1.0); in the quick run's first 80% "
                "each training image shows the model only half its patches (cheaper steps); with augmentation on "
                "they are also cropped and flipped. All of these raise the training loss; held-out images get "
                "none of them. The model is not doing better on images it has never seen."
            )
            c["probes"] = pic("Attention rollout on fixed probe images", "probes")
            help_line(
                "The same held-out images all run long, redrawn every few seconds while it learns: where the model "
                "looks (rollout from CLS), and what it predicts. Attention starts spread out and gathers on the "
                "object as the model learns."
            )
            c["pos"] = pic("Positional-embedding similarity", "train-pos")
            help_line(
                "Each tile is one patch position against all others. At first the tiles are noise; a bright "
                "spot at each tile's own place means the model has learned where its patches are."
            )
    return c


FORM = (
    "dataset",
    "preset",
    "depth",
    "heads",
    "width",
    "patch",
    "epochs",
    "budget",
    "batch",
    "lr",
    "subset",
    "augment",
    "seed",
)


def wire(c: dict, shell: Shell, compare_menus: list, demo: gr.Blocks) -> None:
    c["preset"].change(
        preset_sizes, c["preset"], [c["depth"], c["heads"], c["width"], c["patch"]], api_visibility="private"
    )
    for changed in (c["dataset"], c["budget"]):
        changed.change(follow_recipe, [c["dataset"], c["budget"]], [c["patch"], c["augment"]], api_visibility="private")
    buttons = [c["train"], c["stop"], c["use"]]
    run = dict(
        inputs=[c[k] for k in FORM] + [shell.state],
        outputs=RUN.components({**c, "state": shell.state, "menu_a": compare_menus[0], "menu_b": compare_menus[1]}),
        concurrency_limit=None,
        concurrency_id="train",  # vitviz.app.serving.places keeps the line
        preprocess=False,
    )  # TrainConfig.parse reads the raw values and answers each with a sentence
    c["api"].click(
        train_run,
        **run,
        api_name="train",
        api_description="Train a ViT live; streams status, progress, curves and pictures.",
    )
    c["train"].click(running_buttons, None, buttons, queue=False, api_visibility="private").then(
        train_page, **run, api_visibility="private"
    ).then(idle_buttons, shell.state, buttons, queue=False, api_visibility="private")
    c["stop"].click(stop_run, None, c["status"], api_name="stop", queue=False)
    c["use"].click(explore_trained, shell.state, [shell.model_dd, shell.tabs], api_visibility="private").then(
        None, None, None, js="() => window.scrollTo({top: 0})", queue=False, api_visibility="private"
    )  # the menu and the image in view, not the Train tab's scroll position
