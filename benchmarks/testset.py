"""What the map benchmarks share: their common flags, the model, and a fixed random sample of its test set."""

from __future__ import annotations

import argparse
import os

import torch

import vitviz
from vitviz.data.datasets import load_dataset


def parser(images: int, batch: int) -> argparse.ArgumentParser:
    pa = argparse.ArgumentParser()
    pa.add_argument("--images", type=int, default=images)
    pa.add_argument("--batch", type=int, default=batch)
    pa.add_argument("--checkpoint", default=None)
    pa.add_argument("--data", default=os.environ.get("VITVIZ_DATA"))
    pa.add_argument("--seed", type=int, default=0)
    return pa


def model_and_sample(a: argparse.Namespace):
    """(model, its data set's test split, the indices of `a.images` of its images drawn with `a.seed`)."""
    model = vitviz.load_model(a.checkpoint)
    test = load_dataset(model.card.dataset or "cifar10", a.data, val_size=0).test
    idx = torch.randperm(len(test), generator=torch.Generator().manual_seed(a.seed))[: a.images]
    return model, test, idx
