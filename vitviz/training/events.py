"""The events the training loop yields, one dict each: start, step, snapshot, and the result (done, stopped or
error). The command prints them and the app streams them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vitviz.data.datasets import Split
from vitviz.models import checkpoint
from vitviz.models.vit import ViT
from vitviz.runtime.device import Precision, describe_device
from vitviz.training.batches import Batches
from vitviz.training.config import TrainConfig
from vitviz.training.heldout import evaluate
from vitviz.training.parts import Parts, Progress


def start_event(p: Parts) -> dict:
    return {
        "event": "start",
        "config": p.cfg.settings(),
        "model": p.model.config.to_dict(),
        "params": p.model.num_params(),
        "device": str(p.device),
        "device_name": describe_device(p.device),
        "precision": p.precision.choice.reason,
        "train_images": p.batches.n,
        "steps": p.total_steps,
        "steps_per_epoch": p.batches.per_epoch,
        "resumed_step": p.run.step,
        "data": p.data.source,
    }


def snapshot_event(at: str, step: int, epoch: float, model: ViT) -> dict:
    return {"event": "snapshot", "at": at, "step": step, "epoch": epoch, "model": model}


def result_event(
    status: str,
    message: str,
    run: Progress,
    elapsed: float,
    model: ViT,
    out: str | Path | None,
    test: Split | None,
    precision: Precision,
) -> dict:
    """The run's last event (`done`, `stopped` or `error`), with the model in eval mode, and its test accuracy
    when a test split is given."""
    model.eval()
    path = str(checkpoint.paths(out)[0]) if out is not None and run.history else None
    result = {
        "event": status,
        "message": message,
        "step": run.step,
        "train_seconds": elapsed,
        "model": model,
        "history": run.history,
        "path": path,
    }
    if status != "error" and test is not None and run.step > 0:
        _, result["test_acc"] = evaluate(model, test, precision.device, precision=precision)
    return result


def step_event(
    step: int,
    batches: Batches,
    total_steps: int,
    cfg: TrainConfig,
    loss: float,
    lr: float,
    ips: float,
    elapsed: float,
    progress: Callable[[float], float],
) -> dict:
    eta = (total_steps - step) / max(1e-9, ips / batches.size)
    if cfg.budget.time_budget > 0:
        eta = min(eta, cfg.budget.time_budget - elapsed)
    return {
        "event": "step",
        "step": step,
        "epoch": step / batches.per_epoch,
        "loss": loss,
        "lr": lr,
        "images_per_s": ips,
        "progress": min(1.0, progress(elapsed)),
        "elapsed": elapsed,
        "eta": max(0.0, eta),
    }
