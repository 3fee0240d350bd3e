"""What a training run is asked to do, in four parts, and the checks that make it safe to start.

`TrainConfig` is the one description of a run for the CLI and the app alike, made of what it is by role:
- `Architecture`: the model trained (a preset and the sizes that override it);
- `Optimiser`: how it learns (AdamW's rate and decay, the warmup, label smoothing, what each batch goes
  through, the weight average);
- `Budget`: on what data and for how long (the data set and its split, the batch, epochs and seconds, the seed,
  the device and its precision);
- `Reporting`: what the run says while it runs (its events, snapshots, validations and kept epochs).

Every setting has one flat name (the Train form's, the command's `--flag`, a checkpoint's record), its part
found by `PART_OF`; `TrainConfig.of(**settings)` builds a config from flat names, `but(**settings)` changes
some, `settings()` gives them back flat. `TrainConfig.parse(**values)` reads what a person or an API caller
typed (strings, floats from a number box, infinities, huge integers) with vitviz.runtime.values, the reader
the page, the API and links use too, and `validate()` refuses anything the loop cannot honour with a sentence
that says what would work. Both raise `ConfigError`, whose message is that sentence.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, fields, replace
from typing import Any

from vitviz.data.datasets import DATASETS
from vitviz.models.vit import PRESETS, ViTConfig, cost, make_config
from vitviz.runtime import values


class ConfigError(ValueError):
    """A training setting that cannot be used; the message is a sentence for a person."""


def setting(default: object, label: str, lo: float | None = None, hi: float | None = None, span: str = "") -> Any:
    """A field of a run's setting: its default, how a sentence names it, and its range (said after "must be")."""
    return field(default=default, metadata={"label": label, "range": None if lo is None else (lo, hi, span)})


@dataclass
class Architecture:
    """The model trained: a preset of vitviz.models.vit.PRESETS and the sizes that override it (None: the
    preset's)."""

    preset: str = setting("tiny", "The model preset")
    embed_dim: int | None = setting(None, "The width", 16, 512, "from 16 to 512")
    depth: int | None = setting(None, "The depth", 1, 12, "from 1 to 12")
    num_heads: int | None = setting(None, "The number of heads", 1, 16, "from 1 to 16")
    patch_size: int | None = setting(None, "The patch size")
    mlp_ratio: float | None = setting(None, "The MLP ratio", 0.25, 8, "from 0.25 to 8")
    dropout: float | None = setting(None, "The dropout", 0, 0.9, "from 0 to 0.9")

    def overrides(self) -> dict:
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "preset" and getattr(self, f.name) is not None
        }


@dataclass
class Optimiser:
    """How the model learns."""

    lr: float = setting(2e-3, "The learning rate", 0, 1, "at most 1")  # peak learning rate
    weight_decay: float = setting(0.05, "The weight decay", 0, 1, "from 0 to 1")
    warmup: float = setting(1.0, "The warmup", 0, 200, "from 0 to 200 epochs")  # epochs (at most a fifth of the run)
    label_smoothing: float = setting(0.1, "The label smoothing", 0, 0.5, "from 0 to 0.5")
    augment: bool = setting(True, "Augmentation")  # random crop with padding, and flips where the data allows them
    mix: float = setting(0.0, "The CutMix/Mixup probability", 0, 1, "from 0 to 1")  # a batch mixed (0: never)
    erase: float = setting(0.0, "The random-erasing probability", 0, 1, "from 0 to 1")  # per image (0: never)
    # the fraction of the patch tokens left out of each early step (cheaper steps; 0: none), for this much of the run
    token_drop: float = setting(0.0, "The early token drop", 0, 0.9, "from 0 to 0.9")
    token_drop_until: float = setting(0.5, "How long tokens are dropped", 0, 1, "from 0 to 1")
    ema: float = setting(0.0, "The weight average's decay", 0, 0.9999, "from 0 (none) to 0.9999")  # 0: no average


@dataclass
class Budget:
    """On what data, for how long and where: the schedule follows whichever of epochs and seconds ends first."""

    dataset: str = setting("cifar10", "The data set")  # cifar10 or mnist
    subset: int = setting(0, "The training subset", 0, 10_000_000, "0 (all images) or a number of images")
    val_size: int = setting(5000, "The validation size", 0, 50_000, "from 0 to 50,000")  # held out of the training set
    batch_size: int = setting(128, "The batch size", 8, 2048, "from 8 to 2048")
    epochs: float = setting(10, "Epochs", 0, 200, "at most 200")  # passes over the training set (may be fractional)
    time_budget: float = setting(0.0, "The time budget", 0, 86_400, "from 0 (none) to 86,400 seconds")
    seed: int = setting(0, "The seed", 0, 2**32 - 1, "from 0 to 4,294,967,295")
    device: str = setting("auto", "The device")  # auto, cpu or cuda
    amp: bool = setting(True, "Mixed precision")  # bf16 autocast where the hardware has it


@dataclass
class Reporting:
    """What the run says while it runs."""

    log_every: int = setting(10, "log_every", 1, 100_000, "at least 1")  # steps between step events
    snapshot_every: int = setting(0, "snapshot_every", 0, 10_000_000, "0 or more")  # steps (0: at epoch ends only)
    eval_images: int = setting(0, "eval_images", 0, 10_000_000, "0 or more")  # validated at epoch ends (0: all)
    # also validate on a small held-out sample this often, in seconds (0: never), of this many images
    quick_val_every_s: float = setting(0, "quick_val_every_s", 0, 86_400, "from 0 (never) to 86,400 seconds")
    quick_val_images: int = setting(256, "quick_val_images", 1, 50_000, "from 1 to 50,000")
    keep_epochs: int = setting(0, "keep_epochs", 0, 1000, "from 0 to 1000")  # the last N epochs' weights, kept


PARTS = {"arch": Architecture, "optim": Optimiser, "budget": Budget, "report": Reporting}
PART_OF = {f.name: part for part, kind in PARTS.items() for f in fields(kind)}  # a setting's flat name -> its part
SETTINGS = {f.name: f for kind in PARTS.values() for f in fields(kind)}


@dataclass
class TrainConfig:
    arch: Architecture = field(default_factory=Architecture)
    optim: Optimiser = field(default_factory=Optimiser)
    budget: Budget = field(default_factory=Budget)
    report: Reporting = field(default_factory=Reporting)

    @classmethod
    def of(cls, **settings) -> TrainConfig:
        """A config from flat setting names (`lr=1e-3, depth=4`), each in its part; not checked (`parse` is)."""
        return cls().but(**settings)

    def but(self, **settings) -> TrainConfig:
        """A copy with these settings (flat names) changed."""
        unknown = set(settings) - set(PART_OF)
        if unknown:
            raise TypeError(f"no training setting called {sorted(unknown)}")
        parts = {p: {k: v for k, v in settings.items() if PART_OF[k] == p} for p in PARTS}
        return TrainConfig(**{p: replace(getattr(self, p), **kw) for p, kw in parts.items()})

    def settings(self) -> dict:
        """Every setting by its flat name (what a checkpoint and a run's events record)."""
        return {name: getattr(getattr(self, PART_OF[name]), name) for name in SETTINGS}

    def model_config(self) -> ViTConfig:
        """The architecture this run trains (the preset with the overrides, sized for the data set)."""
        spec = DATASETS[self.budget.dataset]
        return make_config(
            self.arch.preset,
            image_size=spec["image_size"],
            in_chans=spec["in_chans"],
            num_classes=len(spec["classes"]),
            **self.arch.overrides(),
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
        tokens = self.budget.batch_size * cfg.depth * n * cfg.embed_dim * 4 * (1 + cfg.mlp_ratio) / 3
        attention = self.budget.batch_size * cfg.depth * cfg.num_heads * n * n * 4
        hidden = int(cfg.embed_dim * cfg.mlp_ratio)
        dropped = self.budget.batch_size * cfg.depth * n * (2 * cfg.embed_dim + hidden) if cfg.dropout > 0 else 0
        step = 0.4 * 2**30 + 12 * params * 4 + 16 * tokens + 0.3 * attention + 6 * dropped
        run = RUN_EXTRA_GB * 2**30 + 4 * params * 4 + PROBES * cfg.depth * (cfg.num_heads + 2) * n * n * 4
        return (step + run) / 2**30

    @classmethod
    def parse(cls, **sent) -> TrainConfig:
        """A validated config from loosely typed values by flat name (None or '' keeps a setting's default)."""
        read = {}
        for name, value in sent.items():
            if name not in SETTINGS:
                raise ConfigError(f"There is no training setting called {values.shown(str(name), 30)}.")
            if not values.blank(value):
                read[name] = _read(name, value)
        return cls.of(**read).validate()

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
        b = self.budget
        if b.dataset not in DATASETS:
            yield f"The data set must be one of {', '.join(DATASETS)}, not {values.shown(b.dataset, 30)}."
            return
        if self.arch.preset not in PRESETS:
            yield f"The model preset must be one of {', '.join(PRESETS)}, not {values.shown(self.arch.preset, 30)}."
            return
        yield from _model_problems(self)
        for name, v in self.settings().items():
            bounds = SETTINGS[name].metadata["range"]
            if v is not None and bounds and not bounds[0] <= v <= bounds[1]:
                yield f"{SETTINGS[name].metadata['label']} must be {bounds[2]}; {v:.6g} is out of range."
        if b.epochs <= 0:
            yield "Epochs must be more than 0."
        if self.optim.lr <= 0:
            yield "The learning rate must be more than 0."
        if b.subset and b.subset < b.batch_size:
            yield (
                f"The training subset ({b.subset} images) must hold at least one batch of {b.batch_size}: "
                f"use at least {b.batch_size} images, a smaller batch, or 0 for all images."
            )
        if b.device not in ("auto", "cpu", "cuda"):
            yield "The device must be auto, cpu or cuda."


def _read(name: str, value: object) -> object:
    """A sent value as its setting's type (vitviz.runtime.values), or a ConfigError naming the setting."""
    f = SETTINGS[name]
    hint = typing.get_type_hints(PARTS[PART_OF[name]])[name]
    kinds = set(typing.get_args(hint)) - {type(None)} or {hint}
    label, bounds = f.metadata["label"], f.metadata["range"]
    try:
        if kinds == {str}:
            return values.name(value, label)
        if kinds == {bool}:
            return values.flag(value, label)
        # the range is checked by validate(), with the rest: read here as any finite number
        return values.number(value, label, whole=int in kinds, span=bounds[2] if bounds else "")
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _model_problems(cfg: TrainConfig):
    """What ViTConfig would refuse in this run's model (the bounds on each size are checked by their settings)."""
    size = DATASETS[cfg.budget.dataset]["image_size"]
    sizes = {**PRESETS[cfg.arch.preset], **cfg.arch.overrides(), "image_size": size}
    yield from ViTConfig.problems_of(sizes, signs=False)


PROBES = 6  # the fixed images a live run draws its rollout on (vitviz.training.quick.probe_set)
RUN_EXTRA_GB = 0.4  # a run's pictures and the heap's slack beside its step (see TrainConfig.peak_memory_gb)


def largest_batch(cfg: TrainConfig, limit_gb: float = 4.0, lo: int = 8, hi: int = 2048) -> int:
    """The largest batch size (lo..hi) whose estimated peak memory for `cfg`'s model is within `limit_gb`; `lo`
    when even that is over it."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cfg.but(batch_size=mid).peak_memory_gb() <= limit_gb:
            lo = mid
        else:
            hi = mid - 1
    return lo
