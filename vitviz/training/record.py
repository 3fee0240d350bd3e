"""What a run made in the app keeps: its model's card naming it as the visitor's, with its record, and the
epoch snapshots Compare offers."""

from __future__ import annotations

import copy
from dataclasses import replace

from vitviz.models.card import DATASET_NAMES, card_of, describe
from vitviz.models.vit import ViT
from vitviz.training.config import TrainConfig


def run_record(model: ViT, cfg: TrainConfig, history: list[dict], step: int | None, seconds: float | None) -> ViT:
    """The model of a run made in the app, its card naming it as the visitor's and keeping its record: data set,
    settings, steps, time and held-out accuracy (the Model tab and Compare read it)."""
    card = card_of(model)
    last = history[-1] if history else {}
    epoch = last.get("epoch")
    whole = epoch is not None and abs(epoch - round(epoch)) < 1e-3
    when = "" if step is not None else f", after epoch {epoch:g}" if whole else ""
    metrics = {
        "epoch": epoch,
        "step": step if step is not None else last.get("step"),
        "val_acc": last.get("val_acc"),
        "val_loss": last.get("val_loss"),
        "train_seconds": seconds if seconds is not None else last.get("elapsed"),
    }
    return describe(
        model,
        replace(
            card,
            name=f"Your {DATASET_NAMES.get(cfg.budget.dataset, cfg.budget.dataset)} ViT (trained here{when})",
            train=cfg.settings(),
            metrics={k: v for k, v in metrics.items() if v is not None},
            history=tuple(history),
        ),
    )


def keep_snapshot(kept: dict, epoch: int, model: ViT, most: int = 6) -> None:
    """Keep a CPU copy of the model at this epoch; past `most`, thin the middle out (first and last stay)."""
    kept[epoch] = copy.deepcopy(model).cpu().eval()
    while len(kept) > most:
        keys = sorted(kept)
        gaps = [(keys[i + 1] - keys[i - 1], keys[i]) for i in range(1, len(keys) - 1)]
        del kept[min(gaps)[1]]
