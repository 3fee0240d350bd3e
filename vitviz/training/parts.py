"""What a training run is made of: where it stands (`Progress`), its parts once set up (`Parts`), the meter of
its steps, and the average of its weights (torch's AveragedModel)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch.optim.swa_utils import AveragedModel

from vitviz.data.datasets import Dataset
from vitviz.models.vit import ViT
from vitviz.runtime.device import Precision
from vitviz.training.batches import Batches
from vitviz.training.config import TrainConfig


@dataclass
class Progress:
    """Where a run stands: restored by --resume, advanced by every step."""

    step: int = 0
    epoch: float = 0
    elapsed_before: float = 0.0  # seconds trained before this process (a resumed run)
    history: list = field(default_factory=list)
    optimizer: dict | None = None  # the resume state's tensors


class Meter:
    """Training loss and accuracy since the last epoch end, and images/s since the last report."""

    def __init__(self):
        self.loss, self.correct, self.n = 0.0, 0, 0
        self.seen, self.t = 0, time.perf_counter()

    def add(self, loss: float, logits: torch.Tensor, target: torch.Tensor, bs: int) -> None:
        self.loss += loss * bs
        self.correct += (logits.argmax(1) == target.argmax(1)).sum().item()  # the majority label when mixed
        self.n += bs

    def rate(self) -> float:
        now = time.perf_counter()
        ips = self.seen / max(1e-9, now - self.t)
        self.seen, self.t = 0, now
        return ips

    def take(self) -> tuple[float, float]:
        """The epoch's mean training loss and accuracy over its logged steps (NaN where none was logged)."""
        out = (self.loss / self.n, self.correct / self.n) if self.n else (float("nan"), float("nan"))
        self.loss, self.correct, self.n = 0.0, 0, 0
        return out


@dataclass
class Parts:
    """What a run is made of, once set up: where it runs, its data, model, optimizer and batches."""

    cfg: TrainConfig
    device: torch.device
    precision: Precision
    data: Dataset
    model: ViT
    run: Progress
    gen: torch.Generator
    batches: Batches
    opt: torch.optim.Optimizer
    total_steps: int
    warmup_steps: int
    average: AveragedModel | None = None

    @property
    def shown(self) -> ViT:
        """The model that validation, checkpoints and the result use: the weight average where there is one."""
        return self.average.module if self.average is not None else self.model


def weight_average(model: torch.nn.Module, decay: float) -> AveragedModel:
    """An exponential moving average of `model`'s weights (torch's AveragedModel, its copy in eval mode). The
    first update copies the weights; the n-th after it moves the average toward them with the decay warmed up as
    min(decay, (1 + n) / (10 + n)), so that the early steps are not held back by the random start."""

    @torch.no_grad()
    def ema(averaged: list[torch.Tensor], current: list[torch.Tensor], n: torch.Tensor) -> None:
        d = min(decay, (1 + int(n)) / (10 + int(n)))
        torch._foreach_lerp_(averaged, current, 1.0 - d)

    average = AveragedModel(model, multi_avg_fn=ema, use_buffers=True)
    average.module.eval()  # its weights keep requires_grad: gradient maps need it
    return average
