"""How well a model does on held-out images: during training (each epoch's end, and a quick look at a small
sample every few seconds, so that a live run draws its first validation point early) and after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vitviz.data.datasets import Dataset
    from vitviz.training.config import TrainConfig

import time

import torch
import torch.nn.functional as F

from vitviz.data.datasets import Split, normalize
from vitviz.explain.interpret import inference_precision
from vitviz.models.card import card_of
from vitviz.models.hub import loaded
from vitviz.models.vit import ViT
from vitviz.runtime.device import Precision


@torch.no_grad()
def evaluate(
    model: ViT,
    split: Split,
    device: torch.device | str = None,
    batch_size: int = 500,
    amp: bool = True,
    precision: Precision | None = None,
) -> tuple[float, float]:
    """(mean loss, accuracy) of `model` on a split, in eval mode; restores the model's mode."""
    device = device or next(model.parameters()).device
    card = card_of(model)
    if precision is None and amp and len(split):  # the precision measured fastest for forward passes here
        precision = inference_precision(loaded(model), normalize(split.x[:1].to(device), card.mean, card.std))
    precision = precision or Precision(torch.device(device), amp=False)
    was_training = model.training
    model.eval()
    loss_sum, correct = 0.0, 0
    try:
        for i in range(0, len(split), batch_size):
            x = normalize(split.x[i : i + batch_size].to(device), card.mean, card.std)
            y = split.y[i : i + batch_size].to(device)
            with precision():
                logits = model(x)
            loss_sum += F.cross_entropy(logits.float(), y, reduction="sum").item()
            correct += (logits.argmax(1) == y).sum().item()
    finally:
        model.train(was_training)
    n = max(1, len(split))
    return loss_sum / n, correct / n


def eval_batch(cfg: TrainConfig) -> int:
    """The batch a run validates with: twice its training batch, 16 to 500 images. A forward pass keeps one
    layer's activations where a training step keeps every layer's, so validation never needs more memory than
    the step the run's estimate covers (a fixed 500 took 3.8 GB at width 384, depth 12, patch 2, batch 38)."""
    return max(16, min(500, 2 * cfg.budget.batch_size))


def epoch_record(
    model: ViT,
    data: Dataset,
    precision: Precision,
    cfg: TrainConfig,
    epoch: float,
    step: int,
    elapsed: float,
    train_loss: float,
    train_acc: float,
    limit: int = 0,
) -> dict:
    """Validation figures at the end of an epoch (or of the run); `limit` caps the images used."""
    n = min(x for x in (len(data.val), cfg.report.eval_images or len(data.val), limit or len(data.val)))
    val = Split(data.val.x[:n], data.val.y[:n])
    val_loss, val_acc = (
        evaluate(model, val, precision.device, eval_batch(cfg), precision=precision)
        if n
        else (float("nan"), float("nan"))
    )
    model.train()
    return {
        "epoch": round(float(epoch), 4),
        "step": step,
        "train_loss": train_loss,
        "train_acc": train_acc,
        "val_loss": val_loss,
        "val_acc": val_acc,
        "elapsed": elapsed,
    }


class QuickVal:
    """When a run's next quick validation is due (the first after half of `quick_val_every_s`, then one each
    interval, counted from the end of the last), and the `val` event it gives: loss and accuracy on the first
    `quick_val_images` held-out images."""

    def __init__(self, cfg, data, precision: Precision, per_epoch: int):
        self.cfg, self.data, self.precision, self.per_epoch = cfg, data, precision, per_epoch
        self.every = float(cfg.report.quick_val_every_s or 0)
        self.next = time.perf_counter() + self.every / 2

    def due(self) -> bool:
        return self.every > 0 and time.perf_counter() >= self.next

    def event(self, model: ViT, step: int, elapsed: float, most: int = 0) -> dict:
        """The `val` event, on at most `most` images too (0: no such cap)."""
        n = min(len(self.data.val), self.cfg.report.quick_val_images, most or len(self.data.val))
        val = Split(self.data.val.x[:n], self.data.val.y[:n])
        loss, acc = (
            evaluate(model, val, self.precision.device, eval_batch(self.cfg), precision=self.precision)
            if n
            else (float("nan"), float("nan"))
        )
        model.train()
        self.next = time.perf_counter() + self.every
        return {
            "event": "val",
            "step": step,
            "epoch": round(step / self.per_epoch, 4),
            "val_loss": loss,
            "val_acc": acc,
            "images": n,
            "elapsed": elapsed,
        }
