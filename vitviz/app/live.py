"""Live training for the app: one run per visitor, streamed as pictures and words while it learns.

`stream_run` wraps vitviz.training.loop.train (the same loop the CLI uses) and turns its events into updates
every couple of seconds: a progress line, curves, attention rollout on fixed probe images, the
positional-embedding similarity tiles (vitviz.pictures.run). Stop requests are keyed by the visitor's session;
the loop checks for them every step, so a run ends within a step of the click and keeps what it has learned.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from vitviz.models import checkpoint
from vitviz.models.hub import loaded
from vitviz.pictures import run as run_pictures
from vitviz.pictures.style import Style, drawn_with
from vitviz.runtime import scratch
from vitviz.training.config import TrainConfig
from vitviz.training.loop import train
from vitviz.training.pace import Pace, fmt_time
from vitviz.training.quick import get_data, probe_set
from vitviz.training.record import keep_snapshot, run_record


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
        data = get_data(cfg.budget.dataset)
    except Exception as e:
        yield Update(status=f"**The {cfg.budget.dataset} data set is not available:** {e}", progress=0.0, done=True)
        return
    px, py = probe_set(data)
    steps: list[tuple[float, float]] = []
    history: list[dict] = []
    quick: list[dict] = []  # the quick validations
    reached = 0.0  # how far the run got (0..1)
    last_emit, last_snap = 0.0, 0.0
    kept: dict[int, torch.nn.Module] = {}
    head = ""
    pace = Pace((cfg.model_config(), cfg.budget.batch_size, cfg.budget.device), others=others)
    out = Path(out_dir or scratch.new_folder("run")) / f"vitviz-{cfg.budget.dataset}-{cfg.arch.preset}"
    for ev in train(cfg, data=data, stop=stop, out=out, snapshots=True):
        kind = ev["event"]
        now = time.perf_counter()
        if kind == "start":
            head = start_line(ev, cfg.budget.dataset, note)
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
                    curves=run_pictures.curves(history, steps, quick, style),
                )
        elif kind == "val":
            quick.append(ev)
            yield Update(status=None, progress=None, curves=run_pictures.curves(history, steps, quick, style))
        elif kind == "snapshot":
            if ev["at"] == "epoch":  # big models keep fewer copies: memory is shared by every visitor
                small = sum(p.numel() for p in ev["model"].parameters()) <= 5_000_000
                keep_snapshot(kept, int(ev["epoch"]), ev["model"], most=6 if small else 2)
            if ev["at"] == "epoch" or now - last_snap >= snapshot_every_s:
                last_snap = now
                with drawn_with(style):
                    probes, pos = run_pictures.render_snapshot(loaded(ev["model"]), px, py, data.classes)
                yield Update(status=None, progress=None, probes=probes, pos_tiles=pos)
        elif kind == "epoch":
            history.append(ev)
            yield Update(
                status=f"{head}  \nepoch {round(ev['epoch'], 1):g}: validation accuracy **{100 * ev['val_acc']:.1f}%**",
                progress=None,
                curves=run_pictures.curves(history, steps, quick, style),
            )
        elif kind == "error":
            curves = run_pictures.curves(history, steps, quick, style)
            yield Update(f"**The run stopped:** {ev['message']}", reached, curves, done=True, stopped=True)
            return
        elif kind in ("done", "stopped"):
            with drawn_with(style):
                last = (
                    run_pictures.render_snapshot(loaded(ev["model"]), px, py, data.classes),
                    run_pictures.curves(history, steps, quick, style, stopped=kind == "stopped"),
                )
            yield finished(kind, ev, last, history, reached, out, kept, cfg)
            return


def start_line(ev: dict, dataset: str, note: str) -> str:
    """The status line's head for the whole run: the model's size, where it trains, on how many images."""
    return f"Training a {ev['params']:,}-parameter ViT on **{ev['device_name']}** ({ev['precision']}), " + (
        f"{ev['train_images']:,} {dataset} images {note}".strip()
    )


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
