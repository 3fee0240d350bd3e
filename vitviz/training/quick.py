"""The Train tab's quick run: its settings for a time budget, its data (loaded once per process), its probe images.

The run itself streams to the page through vitviz.app.live; its pictures are vitviz.pictures.run.
"""

from __future__ import annotations

import math
import threading

import torch

from vitviz.data.datasets import Dataset, load_dataset
from vitviz.training.batches import check_batch
from vitviz.training.config import TrainConfig

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
    check_batch(cfg, len(get_data(cfg.budget.dataset).train))


def data_note() -> str:
    """Where training data will come from, without loading it."""
    from vitviz.data.datasets import DataUnavailable, find_source

    try:
        here = [name for name in ("cifar10", "mnist") if find_source(name)]
    except DataUnavailable as e:
        return f"**Training data problem:** {e}. The rest of the app works."
    if here:  # where on the server is nobody's business but the operator's
        shown = {"cifar10": "CIFAR-10", "mnist": "MNIST"}
        return f"Training data: {' and '.join(shown[n] for n in here)}, already on this machine (no download)."
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
    budget = budget or 60  # the first minute the README and the guide promise
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
