"""What a training run is asked to do, and the checks that make it safe to start.

`TrainConfig` is the one description of a run for the CLI and the app alike.
`TrainConfig.parse(**values)` turns what a person or an API caller typed (strings,
floats from a number box, infinities, huge integers) into a config, and
`validate()` refuses anything the loop cannot honour with a sentence that says
what would work. Both raise `ConfigError`, whose message is that sentence.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass, fields

from vitviz.data.datasets import DATASETS
from vitviz.models.vit import PRESETS, ViTConfig, cost, make_config


class ConfigError(ValueError):
    """A training setting that cannot be used; the message is a sentence for a person."""


@dataclass
class TrainConfig:
    dataset: str = "cifar10"  # cifar10 or mnist
    preset: str = "tiny"  # a name from vitviz.models.vit.PRESETS
    embed_dim: int | None = None  # overrides of the preset's sizes
    depth: int | None = None
    num_heads: int | None = None
    patch_size: int | None = None
    mlp_ratio: float | None = None
    dropout: float | None = None
    epochs: float = 10  # passes over the training set (may be fractional)
    time_budget: float = 0.0  # seconds of training; 0 means none. The schedule follows whichever ends first
    batch_size: int = 128
    lr: float = 2e-3  # peak learning rate
    weight_decay: float = 0.05
    warmup: float = 1.0  # warmup length in epochs (at most a fifth of the run)
    label_smoothing: float = 0.1
    augment: bool = True  # random crop with padding, and flips where the data set allows them
    mix: float = 0.0  # probability that a batch is mixed by CutMix or Mixup (0: never)
    erase: float = 0.0  # probability of random erasing per image (0: never)
    token_drop: float = 0.0  # fraction of the patch tokens left out of each early step (cheaper steps; 0: none)
    token_drop_until: float = 0.5  # ... for this fraction of the run, then every token
    ema: float = 0.0  # decay of an average of the weights that validation and the result use (0: none)
    subset: int = 0  # train on this many images (0: the whole training split)
    val_size: int = 5000  # held out of the training set for validation
    seed: int = 0
    device: str = "auto"  # auto, cpu or cuda
    amp: bool = True  # bf16 autocast where the hardware has it
    log_every: int = 10  # steps between step events
    snapshot_every: int = 0  # steps between snapshot events (0: at epoch ends only)
    eval_images: int = 0  # validate on this many held-out images at epoch ends (0: all of them)
    quick_val_every_s: float = 0  # also validate on a small held-out sample this often, in seconds (0: never)
    quick_val_images: int = 256  # ... of this many images (the first of the validation split)
    keep_epochs: int = 0  # also keep the last N epochs' weights as OUT-epochNNN (for vitviz.training.average)

    def model_overrides(self) -> dict:
        keys = ("embed_dim", "depth", "num_heads", "patch_size", "mlp_ratio", "dropout")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}

    def model_config(self) -> ViTConfig:
        """The architecture this run trains (the preset with the overrides, sized for the data set)."""
        spec = DATASETS[self.dataset]
        return make_config(
            self.preset,
            image_size=spec["image_size"],
            in_chans=spec["in_chans"],
            num_classes=len(spec["classes"]),
            **self.model_overrides(),
        )

    def peak_memory_gb(self) -> float:
        """An upper estimate of the memory a training step of this run takes, in GB, over the idle process.

        Fitted to the peaks measured by benchmarks/train_memory.py on 2 CPU cores (widths 32-512, depths
        1-12, batches 38-2048, patches 2 and 4, with and without dropout; each architecture of the Train tab's
        extremes at the largest batch the bound allows): a fixed 0.4 GB, 12 bytes a parameter's float
        (weights, gradients, AdamW's two moments, bf16 copies and the allocator's slack), 16x each layer's
        token activations, 0.3x its attention matrices and, with dropout, 6 bytes for each dropped element
        (the kept mask and the scaled copy). It lies 1.1-2.2x above every measured peak of a step.

        A whole Train-tab run keeps more beside its step (benchmarks/run_memory.py measures one): its
        pictures and the heap's slack between steps and validations (RUN_EXTRA_GB), copies of the weights (the
        epoch snapshots the app keeps, the copy it explores, the average), counted as 4 more floats a
        parameter, and the probe pictures' pass, which holds every layer's attention of 6 images. Measured
        on 2 cores in fp32: the seed preset at batch 172 took 1.08-1.31 GB where its step alone was estimated
        at 0.84; width 128, depth 12, patch 2 took 1.28 GB where its step was estimated at 0.96."""
        cfg = self.model_config()
        n = cfg.num_patches + 1
        params = cost(cfg)[0]
        tokens = self.batch_size * cfg.depth * n * cfg.embed_dim * 4 * (1 + cfg.mlp_ratio) / 3
        attention = self.batch_size * cfg.depth * cfg.num_heads * n * n * 4
        hidden = int(cfg.embed_dim * cfg.mlp_ratio)
        dropped = self.batch_size * cfg.depth * n * (2 * cfg.embed_dim + hidden) if cfg.dropout > 0 else 0
        step = 0.4 * 2**30 + 12 * params * 4 + 16 * tokens + 0.3 * attention + 6 * dropped
        run = RUN_EXTRA_GB * 2**30 + 4 * params * 4 + PROBES * cfg.depth * (cfg.num_heads + 2) * n * n * 4
        return (step + run) / 2**30

    @classmethod
    def parse(cls, **values) -> TrainConfig:
        """A validated config from loosely typed values (None or '' keeps a field's default)."""
        hints = typing.get_type_hints(cls)
        known = {f.name: f for f in fields(cls)}
        kw = {}
        for name, value in values.items():
            if name not in known:
                raise ConfigError(f"There is no training setting called {str(name)[:30]!r}.")
            if value is None or (isinstance(value, str) and not value.strip()):
                continue
            kw[name] = _coerce(name, value, hints[name])
        return cls(**kw).validate()

    def validate(self) -> TrainConfig:
        """Return self when every setting can be honoured; else raise ConfigError with a sentence."""
        for problem in self._problems():
            raise ConfigError(problem)
        try:
            self.model_config()
        except ValueError as e:
            raise ConfigError(f"These sizes do not make a ViT: {e}.") from None
        return self

    def _problems(self):
        if self.dataset not in DATASETS:
            yield f"The data set must be one of {', '.join(DATASETS)}, not {self.dataset!r}."
            return
        if self.preset not in PRESETS:
            yield f"The model preset must be one of {', '.join(PRESETS)}, not {self.preset!r}."
            return
        yield from _model_problems(self)
        for name, lo, hi, what in LIMITS:
            v = getattr(self, name)
            if v is not None and not lo <= v <= hi:
                yield f"{LABELS[name]} must be {what}; {_show(v)} is out of range."
        if self.epochs <= 0:
            yield "Epochs must be more than 0."
        if self.lr <= 0:
            yield "The learning rate must be more than 0."
        if self.subset and self.subset < self.batch_size:
            yield (
                f"The training subset ({self.subset} images) must hold at least one batch of {self.batch_size}: "
                f"use at least {self.batch_size} images, a smaller batch, or 0 for all images."
            )
        if self.device not in ("auto", "cpu", "cuda"):
            yield "The device must be auto, cpu or cuda."


def _model_problems(cfg: TrainConfig):
    """What ViTConfig would refuse in this run's model (the bounds on each size are checked by LIMITS)."""
    size = DATASETS[cfg.dataset]["image_size"]
    values = {**PRESETS[cfg.preset], **cfg.model_overrides(), "image_size": size}
    yield from ViTConfig.problems_of(values, signs=False)


PROBES = 6  # the fixed images a live run draws its rollout on (vitviz.training.quick.probe_set)
RUN_EXTRA_GB = 0.4  # a run's pictures and the heap's slack beside its step (see TrainConfig.peak_memory_gb)


# (field, lowest, highest, how to say the range): the same bounds for the CLI and the app.
LIMITS = [
    ("depth", 1, 12, "1 to 12"),
    ("num_heads", 1, 16, "1 to 16"),
    ("embed_dim", 16, 512, "16 to 512"),
    ("mlp_ratio", 0.25, 8, "0.25 to 8"),
    ("dropout", 0, 0.9, "0 to 0.9"),
    ("epochs", 0, 200, "at most 200"),
    ("time_budget", 0, 86_400, "0 (none) to 86,400 seconds"),
    ("batch_size", 8, 2048, "8 to 2048"),
    ("lr", 0, 1, "at most 1"),
    ("weight_decay", 0, 1, "0 to 1"),
    ("warmup", 0, 200, "0 to 200 epochs"),
    ("label_smoothing", 0, 0.5, "0 to 0.5"),
    ("mix", 0, 1, "0 to 1"),
    ("erase", 0, 1, "0 to 1"),
    ("token_drop", 0, 0.9, "0 to 0.9"),
    ("token_drop_until", 0, 1, "0 to 1"),
    ("ema", 0, 0.9999, "0 (none) to 0.9999"),
    ("subset", 0, 10_000_000, "0 (all) or a number of images"),
    ("val_size", 0, 50_000, "0 to 50,000"),
    ("seed", 0, 2**32 - 1, "0 to 4,294,967,295"),
    ("log_every", 1, 100_000, "at least 1"),
    ("snapshot_every", 0, 10_000_000, "0 or more"),
    ("eval_images", 0, 10_000_000, "0 or more"),
    ("keep_epochs", 0, 1000, "0 to 1000"),
    ("quick_val_every_s", 0, 86_400, "0 (never) to 86,400 seconds"),
    ("quick_val_images", 1, 50_000, "1 to 50,000"),
]
LABELS = {
    "dataset": "The data set",
    "preset": "The model preset",
    "embed_dim": "The width",
    "depth": "The depth",
    "num_heads": "The number of heads",
    "patch_size": "The patch size",
    "mlp_ratio": "The MLP ratio",
    "dropout": "The dropout",
    "epochs": "Epochs",
    "time_budget": "The time budget",
    "batch_size": "The batch size",
    "lr": "The learning rate",
    "weight_decay": "The weight decay",
    "warmup": "The warmup",
    "label_smoothing": "The label smoothing",
    "augment": "Augmentation",
    "mix": "The CutMix/Mixup probability",
    "erase": "The random-erasing probability",
    "token_drop": "The early token drop",
    "token_drop_until": "How long tokens are dropped",
    "ema": "The weight average's decay",
    "subset": "The training subset",
    "val_size": "The validation size",
    "seed": "The seed",
    "device": "The device",
    "amp": "Mixed precision",
    "log_every": "log_every",
    "snapshot_every": "snapshot_every",
    "eval_images": "eval_images",
    "keep_epochs": "keep_epochs",
    "quick_val_every_s": "quick_val_every_s",
    "quick_val_images": "quick_val_images",
}


def _show(v) -> str:
    """A value someone sent, quoted: printable characters only (others as ?), at most 24 of them; a huge number
    in short."""
    if isinstance(v, float) or (isinstance(v, int) and abs(v) > 10**9):
        return f"{v:.4g}"
    s = repr(v)
    s = "".join(c if c.isprintable() else "?" for c in s)
    return s if len(s) <= 24 else s[:21] + "..."


def _coerce(name: str, value, hint):
    """`value` as the field's type, or a ConfigError naming the setting and what it needs."""
    kinds = set(typing.get_args(hint)) - {type(None)} or {hint}
    label = LABELS.get(name, name)
    if kinds == {str}:
        if not isinstance(value, str):
            raise ConfigError(f"{label} must be a name, not {_show(value)}.")
        return value.strip()
    if kinds == {bool}:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.strip().lower() in ("true", "1", "yes")
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        raise ConfigError(f"{label} must be true or false, not {_show(value)}.")
    span = next((f" ({what})" for n, _, _, what in LIMITS if n == name), "")
    if isinstance(value, bool) or (isinstance(value, str) and not value.isascii()):
        raise ConfigError(f"{label} must be a number written with the digits 0-9{span}, not {_show(value)}.")
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{label} must be a number{span}, not {_show(value)}.") from None
    if not math.isfinite(number):
        raise ConfigError(f"{label} must be a finite number{span}, not {_show(value)}.")
    if int in kinds:
        if isinstance(value, int):
            return value
        if number != int(number):
            raise ConfigError(f"{label} must be a whole number, not {_show(value)}.")
        return int(number)
    return number


def largest_batch(cfg: TrainConfig, limit_gb: float = 4.0, lo: int = 8, hi: int = 2048) -> int:
    """The largest batch size (lo..hi) whose estimated peak memory for `cfg`'s model is within `limit_gb`; `lo`
    when even that is over it."""
    from dataclasses import replace

    while lo < hi:
        mid = (lo + hi + 1) // 2
        if replace(cfg, batch_size=mid).peak_memory_gb() <= limit_gb:
            lo = mid
        else:
            hi = mid - 1
    return lo
