"""The training batch pipeline: uint8 images resident on the device, augmented as whole batches.

A reshuffle per epoch, then random crop and flip, normalisation, random erasing and
CutMix/Mixup, all as tensor ops on the device (airbench's loader), driven by one
torch.Generator so a resumed run draws the same batches.
"""

from __future__ import annotations

import torch

from vitviz.data.datasets import Dataset, augment, mix_batch, normalize, random_erase
from vitviz.models.card import ModelCard
from vitviz.training.config import ConfigError, TrainConfig


def check_batch(cfg: TrainConfig, images: int) -> None:
    """ConfigError with a sentence when a batch is larger than the run's training images."""
    n = min(images, cfg.budget.subset) if cfg.budget.subset else images
    if cfg.budget.batch_size > n:
        raise ConfigError(
            f"The batch size ({cfg.budget.batch_size}) is larger than the {n:,} training images here; "
            f"use a batch of at most {n}."
        )


class Batches:
    """Training batches from uint8 images resident on the device: a reshuffle per epoch, then crop and flip,
    normalisation, random erasing and CutMix/Mixup, all as whole-batch tensor ops."""

    def __init__(
        self, cfg: TrainConfig, data: Dataset, card: ModelCard, device: torch.device | str, generator: torch.Generator
    ):
        x, y = data.train.x, data.train.y
        if cfg.budget.subset and cfg.budget.subset < len(y):
            idx = torch.randperm(len(y), generator=torch.Generator().manual_seed(cfg.budget.seed + 1))[
                : cfg.budget.subset
            ]
            x, y = x[idx], y[idx]
        check_batch(cfg, len(y))
        self.x, self.y, self.cfg, self.card, self.gen = x.to(device), y.to(device), cfg, card, generator
        self.n, self.size = len(y), cfg.budget.batch_size
        self.per_epoch = max(1, self.n // self.size)
        self.flip, self.pad = data.flip, 4 if data.name == "cifar10" else 2
        self.device = device
        self.perm, self.pos = None, 0

    def start_at(self, step: int) -> None:
        self.perm = torch.randperm(self.n, generator=self.gen).to(self.device)
        self.pos = (step % self.per_epoch) * self.size

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(normalised images, soft targets (B, classes))."""
        if self.pos + self.size > self.n:
            self.perm, self.pos = torch.randperm(self.n, generator=self.gen).to(self.device), 0
        idx = self.perm[self.pos : self.pos + self.size]
        self.pos += self.size
        xb, yb = self.x[idx], self.y[idx]
        if self.cfg.optim.augment:
            xb = augment(xb, flip=self.flip, pad=self.pad, generator=self.gen)
        xb = normalize(xb, self.card.mean, self.card.std)
        if self.cfg.optim.erase > 0:
            xb = random_erase(xb, self.cfg.optim.erase, generator=self.gen)
        return mix_batch(xb, yb, self.card.config.num_classes, self.cfg.optim.mix, generator=self.gen)
