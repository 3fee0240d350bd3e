"""Live training for the app: one run per visitor, streamed as pictures while it learns.

`stream_run` wraps vitviz.training.loop.train (the same loop the CLI uses) and turns its
events into updates every couple of seconds: a progress line, curves, attention
rollout on fixed probe images, the positional-embedding similarity tiles and
sample predictions. Stop requests are keyed by the visitor's session; the loop
checks for them every step, so a run ends within a step of the click and keeps
what it has learned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from vitviz.models.vit import ViT

import copy
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from vitviz.data.datasets import Dataset, load_dataset, normalize
from vitviz.explain import interpret as I
from vitviz.models import checkpoint
from vitviz.models.loaded import loaded
from vitviz.pictures import draw as R
from vitviz.pictures import figures as FG
from vitviz.pictures.panels import Scale, panel
from vitviz.pictures.style import Style, drawn_with
from vitviz.runtime import scratch
from vitviz.training.batches import check_batch
from vitviz.training.loop import TrainConfig, train
from vitviz.training.pace import Pace, fmt_time
from vitviz.training.record import keep_snapshot, run_record

_datasets: dict[str, Dataset] = {}
_data_lock = threading.Lock()


def get_data(name: str) -> Dataset:
    """The data set, loaded once per process and then only read (raises DataUnavailable)."""
    with _data_lock:
        if name not in _datasets:
            _datasets[name] = load_dataset(name)
        return _datasets[name]


def data_available(name: str) -> bool:
    try:
        get_data(name)
        return True
    except Exception:
        return False


def check_fits(cfg: TrainConfig) -> None:
    """ConfigError with a sentence, before the run starts, when its batch is larger than its training images."""
    check_batch(cfg, len(get_data(cfg.dataset).train))


def data_note() -> str:
    """Where training data will come from, without loading it."""
    from vitviz.data.datasets import DataUnavailable, find_source

    try:
        src = find_source("cifar10") or find_source("mnist")
    except DataUnavailable as e:
        return f"**Training data problem:** {e}. The rest of the app works."
    if src is not None:  # where on the server is nobody's business but the operator's
        return "Training data: a copy on this machine (the operator sets VITVIZ_DATA)."
    return (
        "Training data: downloaded by torchvision on the first run (needs internet); without it, set "
        "VITVIZ_DATA to a folder or zip of CIFAR-10 / MNIST. The rest of the app works either way."
    )


def quick_defaults(device: torch.device, budget: float | None = None, dataset: str = "cifar10") -> dict:
    """The quick run for a time budget in seconds (None: the Train tab's default budget), designed for the
    budget rather than an epoch recipe cut short by it (measured with benchmarks/time_to_accuracy.py, figures
    in docs/benchmarks.md): the learning rate warms up over a tenth of the budget and decays to zero at its
    end; the first 80% of the budget trains on half of each image's patch tokens (steps about half as dear);
    crop and flip only for budgets over 5 minutes (in fewer epochs the model has not seen the images often
    enough to overfit them); MNIST in such a budget with 7-pixel patches. A GPU keeps its epoch recipe."""
    common = dict(epochs=30, warmup=0.5, label_smoothing=0.1, subset=0, patch_size=4)
    if device.type == "cuda":
        return {**common, "preset": "tiny", "time_budget": budget or 60, "batch_size": 512, "lr": 3e-3, "augment": True}
    budget = budget or 180
    short = budget <= 300
    return {
        **common,
        "preset": "quick",
        "time_budget": budget,
        "batch_size": 256,
        "lr": 6e-3,
        "augment": not short,
        "token_drop": 0.5,
        "token_drop_until": 0.8,
        # MNIST in a short budget: 7-pixel patches (a 4x4 grid), steps 3x cheaper: 97.5% at 60 s against 94%
        "patch_size": 7 if dataset == "mnist" and short else 4,
    }


QUICK_VAL_EVERY_S = 10  # a point on the validation curve this often (the first after half of it) ...
QUICK_VAL_IMAGES = 256  # ... measured on this many held-out images; each epoch's end measures all of them


def budget_seconds(value: object) -> float | None:
    """A budget as a positive number of seconds, or None where it is not one, a string of non-ASCII digits
    included (TrainConfig.parse says what is wrong with it later)."""
    try:
        v = float(value) if not isinstance(value, (bool, str)) or str(value).isascii() else math.nan
    except (TypeError, ValueError, OverflowError):
        return None
    return v if 0 < v < math.inf else None


def run_config(device: torch.device, **settings) -> TrainConfig:
    """The config of a Train-tab run: the visitor's settings (validated: ConfigError with a sentence) over the
    quick defaults, with how often to report chosen for the hardware (a CPU reports more often: its steps are slow)."""
    quick = quick_defaults(device, budget_seconds(settings.get("time_budget")), settings.get("dataset") or "cifar10")
    cpu = device.type == "cpu"
    policy = dict(
        **{k: v for k, v in quick.items() if k not in settings},
        eval_images=0,
        quick_val_every_s=QUICK_VAL_EVERY_S,
        quick_val_images=QUICK_VAL_IMAGES,
        snapshot_every=1,  # the loop offers the model every step; the pictures are drawn every few seconds
        log_every=5 if cpu else 20,
    )
    return TrainConfig.parse(**{**policy, **settings})


@dataclass
class Update:
    """What the page shows at one moment of a run."""

    status: str  # markdown: device, progress, ETA, images/s
    progress: float  # 0..1
    curves: np.ndarray | None = None
    probes: np.ndarray | None = None
    pos_tiles: np.ndarray | None = None
    done: bool = False
    stopped: bool = False  # the run ended before its end (Stop, or an error): `progress` is where it got to
    model: object = None  # the trained model (CPU copy), once the run ends
    snapshots: dict = field(default_factory=dict)  # {epoch: model} kept along the way, once the run ends
    files: list[str] = field(default_factory=list)


def probe_set(data: Dataset, n: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """n validation images, one per class, fixed for the whole run."""
    split = data.val if len(data.val) else data.test
    idx = []
    for c in range(len(data.classes)):
        hits = (split.y == c).nonzero().flatten()
        if len(hits):
            idx.append(int(hits[0]))
        if len(idx) == n:
            break
    idx = torch.tensor(idx)
    return split.x[idx], split.y[idx]


@torch.no_grad()
def render_snapshot(
    model: ViT, probes_x: torch.Tensor, probes_y: torch.Tensor, classes: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """(rollout over the probe images with their predictions, positional-similarity tiles)."""
    r = loaded(model)
    card = r.card
    x = normalize(probes_x.to(r.device), card.mean, card.std)
    logits, attn = I.forward_with_attention(r, x)  # in eval mode, the run's mode restored (models.loaded)
    fused = torch.stack([a.float().mean(1, keepdim=True) for a in attn], 1)  # (B, L, 1, N, N): heads averaged
    del attn  # each layer's heads, freed before the rollout: a run's estimate counts them once
    roll = I.attention_rollout(fused.cpu())[:, 0, 1:]  # (B, P), the mean fusion's rollout
    g = card.config.grid_size
    pred = logits.argmax(-1).cpu()
    tiles, labels, colors = [], [], []
    for i in range(len(x)):
        px = probes_x[i].permute(1, 2, 0).numpy()
        m = roll[i]
        m = (m - m.min()) / (m.max() - m.min()).clamp_min(1e-12)
        tiles.append(R.overlay(px, m.view(g, g), 112, alpha=0.6))
        labels.append(classes[int(pred[i])])
        colors.append((20, 140, 40) if int(pred[i]) == int(probes_y[i]) else (200, 30, 30))
    probes = panel(
        R.tile([tiles], col_labels=labels, col_colors=colors),
        "Rollout from CLS on fixed images, with the prediction (green: right, red: wrong)",
        Scale("rolled-out attention", 0, 1, "each image its own range", relative=True),
    )
    sim = I.pos_embed_similarity(model)
    pos = R.pos_similarity_tiles(sim, tile_size=max(14, min(28, 240 // g)))
    return probes, panel(
        pos,
        "Positional-embedding similarity (each tile: one position against all)",
        Scale("cosine similarity", -1.0, 1.0, "one scale for all tiles", cmap="viridis"),
        min_width=300,
    )


def stream_run(
    cfg: TrainConfig,
    stop: threading.Event,
    every: float = 2.0,
    snapshot_every_s: float = 6.0,
    out_dir: str | None = None,
    note: str = "",
    others: Callable[[], int] | None = None,
    style: Style = Style(),
) -> Iterator[Update]:
    """Run training and yield `Update`s: at most one every `every` seconds, plus one per epoch and a final one;
    the probe pictures are redrawn every `snapshot_every_s` seconds while it learns. Pictures are drawn in the
    visitor's `style` (Large type, a phone's width)."""
    try:
        data = get_data(cfg.dataset)
    except Exception as e:
        yield Update(status=f"**The {cfg.dataset} data set is not available:** {e}", progress=0.0, done=True)
        return
    px, py = probe_set(data)
    steps: list[tuple[float, float]] = []
    history: list[dict] = []
    quick: list[dict] = []  # the quick validations
    reached = 0.0  # how far the run got (0..1)
    last_emit, last_snap = 0.0, 0.0
    kept: dict[int, torch.nn.Module] = {}
    head = ""
    pace = Pace((cfg.model_config(), cfg.batch_size, cfg.device), others=others)
    if out_dir is None:
        out_dir = scratch.new_folder("run")
    out = Path(out_dir) / f"vitviz-{cfg.dataset}-{cfg.preset}"
    for ev in train(cfg, data=data, stop=stop, out=out, snapshots=True):
        kind = ev["event"]
        now = time.perf_counter()
        if kind == "start":
            head = f"Training a {ev['params']:,}-parameter ViT on **{ev['device_name']}** ({ev['precision']}), " + (
                f"{ev['train_images']:,} {cfg.dataset} images {note}".strip()
            )
            yield Update(status=head + " ... starting", progress=0.0)
            continue
        if kind == "step":
            steps.append((ev["epoch"], ev["loss"]))
            pace.add(ev["images_per_s"])
            reached = ev["progress"]
            if now - last_emit >= every:
                last_emit = now
                yield Update(
                    status=step_status(head, ev, pace),
                    progress=ev["progress"],
                    curves=_curves(history, steps, quick, style),
                )
        elif kind == "val":
            quick.append(ev)
            yield Update(status=None, progress=None, curves=_curves(history, steps, quick, style))
        elif kind == "snapshot":
            if ev["at"] == "epoch":  # big models keep fewer copies: memory is shared by every visitor
                small = sum(p.numel() for p in ev["model"].parameters()) <= 5_000_000
                keep_snapshot(kept, int(ev["epoch"]), ev["model"], most=6 if small else 2)
            if ev["at"] == "epoch" or now - last_snap >= snapshot_every_s:
                last_snap = now
                with drawn_with(style):
                    probes, pos = render_snapshot(ev["model"], px, py, data.classes)
                yield Update(status=None, progress=None, probes=probes, pos_tiles=pos)
        elif kind == "epoch":
            history.append(ev)
            yield Update(
                status=f"{head}  \nepoch {round(ev['epoch'], 1):g}: validation accuracy **{100 * ev['val_acc']:.1f}%**",
                progress=None,
                curves=_curves(history, steps, quick, style),
            )
        elif kind == "error":
            curves = _curves(history, steps, quick, style)
            yield Update(f"**The run stopped:** {ev['message']}", reached, curves, done=True, stopped=True)
            return
        elif kind in ("done", "stopped"):
            with drawn_with(style):
                last = render_snapshot(ev["model"], px, py, data.classes), _curves(history, steps, quick, style)
            yield finished(kind, ev, last, history, reached, out, kept, cfg)
            return


def step_status(head: str, ev: dict, pace: Pace) -> str:
    return (
        f"{head}  \nstep {ev['step']:,}, epoch {ev['epoch']:.2f}, loss {ev['loss']:.3f}, "
        f"{ev['images_per_s']:.0f} images/s, elapsed {fmt_time(ev['elapsed'])}, "
        f"about {fmt_time(ev['eta'])} left" + pace.note()
    )


def finished(
    kind: str,
    ev: dict,
    pictures: tuple[tuple[np.ndarray, np.ndarray], np.ndarray],
    history: list[dict],
    reached: float,
    out: Path,
    kept: dict,
    cfg: TrainConfig,
) -> Update:
    """The last update of a run that finished or was stopped: its accuracy, its pictures ((probes, positions),
    curves), its model and files."""
    (probes, pos), curves = pictures
    acc = history[-1]["val_acc"] if history else float("nan")
    files = [str(p) for p in checkpoint.paths(out)] if ev.get("path") else []
    checkpoint.state_path(out).unlink(missing_ok=True)  # not offered
    what = "Finished" if kind == "done" else "Stopped"
    steps = f"{ev['step']:,} step{'' if ev['step'] == 1 else 's'}"
    status = (
        f"**{what}** after {steps} ({fmt_time(ev['train_seconds'])} of training): "
        f"validation accuracy **{100 * acc:.1f}%**. Press *Explore this model* to look inside it, "
        f"or download its checkpoint."
    )
    return Update(
        status=status,
        progress=1.0 if kind == "done" else reached,
        stopped=kind != "done",
        curves=curves,
        probes=probes,
        pos_tiles=pos,
        done=True,
        model=run_record(copy.deepcopy(ev["model"]).cpu().eval(), cfg, history, ev["step"], ev["train_seconds"]),
        files=files,
        snapshots={e: run_record(m, cfg, [h for h in history if h["epoch"] <= e], None, None) for e, m in kept.items()},
    )


def empty_curves(style: Style = Style()) -> np.ndarray:
    """The curves before a run: the axes, already in percent 0 to 100."""
    return _curves([], [], (), style)


def _curves(history, steps, quick=(), style: Style = Style()) -> np.ndarray:
    with drawn_with(style):
        return FG.figure_to_array(FG.curves_figure(history, steps[-2000:], list(quick)))
