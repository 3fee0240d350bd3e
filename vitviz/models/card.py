"""What a model is: one record for every kind of model vitviz shows.

A `ModelCard` holds everything about a model but its weights: its architecture
(a ViTConfig), the data set it was trained on, its class names, the input
normalisation and its training record. `describe` is the one factory: the
shipped and uploaded checkpoints, a model trained here, torchvision's ViT-B/16
and a bare ViT built in a test all get their card from it, attached as
`model.card`; `card_of` reads it back. Nothing else about a model is kept as
loose attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

import math
from dataclasses import dataclass, field, replace

from vitviz.models.vit import ViTConfig

DATASET_NAMES = {"cifar10": "CIFAR-10", "mnist": "MNIST", "imagenet": "ImageNet-1k"}
KINDS = ("shipped", "trained", "uploaded", "torchvision", "timm", "transformers", "built")


@dataclass(frozen=True)
class ModelCard:
    config: ViTConfig  # the architecture
    classes: tuple[str, ...]  # class names, in the head's order
    mean: tuple[float, ...]  # input normalisation, per channel
    std: tuple[float, ...]
    dataset: str | None = None  # cifar10, mnist, imagenet, or None when unknown
    kind: str = "built"  # one of KINDS: where the model came from
    name: str = ""  # what the page calls it
    train: dict = field(default_factory=dict)  # the training config it was trained with
    metrics: dict = field(default_factory=dict)  # val_acc, test_acc, epoch, train_seconds, ...
    history: tuple = ()  # one record per epoch
    needs_internet: bool = False  # its weights are downloaded on first use
    # how an image becomes its input: () the centre square resized (bicubic); a transformers model's processor:
    # ("shortest", edge, crop, resample) or ("exact", height, width, resample), resample a PIL filter number
    prepare: tuple = ()
    template: str = ""  # a model with a text tower: the prompt its labels are scored in ("a photo of a {}.")
    text: object = field(default=None, compare=False, repr=False)  # its tokenizer and label sets (models.words)

    def __post_init__(self):
        if len(self.classes) != self.config.num_classes:
            raise ValueError(f"{len(self.classes)} class names for num_classes={self.config.num_classes}")
        if len(self.mean) != self.config.in_chans or len(self.std) != self.config.in_chans:
            raise ValueError(f"mean and std need {self.config.in_chans} value(s) each")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")

    @property
    def title(self) -> str:
        return self.name or f"{DATASET_NAMES.get(self.dataset or '', 'Custom')} ViT"

    @property
    def gallery(self) -> str:
        """Which shipped example images suit this model: MNIST digits for an MNIST model, else CIFAR-10."""
        return "mnist" if self.dataset == "mnist" else "cifar10"

    @property
    def light_on_dark(self) -> bool:
        """Inputs are light strokes on a dark ground (MNIST): a dark-on-light upload is inverted."""
        return self.dataset == "mnist"

    def accuracy(self) -> dict[str, float]:
        """{'validation': 0.82, 'test': 0.81, ...}: the figures this card records, finite ones only."""
        names = (("val_acc", "validation"), ("test_acc", "test"), ("imagenet_top1", "ImageNet top-1"))
        return {
            name: float(self.metrics[k])
            for k, name in names
            if isinstance(self.metrics.get(k), (int, float)) and not math.isnan(self.metrics[k])
        }

    def meta(self) -> dict:
        """The JSON-ready part a checkpoint stores (vitviz.models.checkpoint adds format and version)."""
        return {
            "model": self.config.to_dict(),
            "classes": list(self.classes),
            "normalization": {"mean": list(self.mean), "std": list(self.std)},
            "dataset": self.dataset,
            "name": self.name or None,
            "train": dict(self.train),
            "metrics": dict(self.metrics),
            "history": list(self.history),
        }


def card_from_meta(meta: dict, kind: str = "shipped") -> ModelCard:
    """The card of a checkpoint from its validated JSON."""
    return ModelCard(
        config=ViTConfig.from_dict(meta["model"]),
        classes=tuple(meta["classes"]),
        mean=tuple(float(v) for v in meta["normalization"]["mean"]),
        std=tuple(float(v) for v in meta["normalization"]["std"]),
        dataset=_of(meta.get("dataset"), str, None),
        kind=kind,
        name=_of(meta.get("name"), str, ""),
        train=_of(meta.get("train"), dict, {}),
        metrics=_of(meta.get("metrics"), dict, {}),
        history=tuple(h for h in _of(meta.get("history"), list, []) if isinstance(h, dict)),
    )


def _of(value, kind: type, default):
    """`value` when it is of the expected JSON type, else `default` (an uploaded JSON may hold anything)."""
    return value if isinstance(value, kind) else default


def default_card(config: ViTConfig) -> ModelCard:
    """A bare model's card: numbered classes, inputs scaled to [-1, 1]."""
    return ModelCard(
        config=config,
        classes=tuple(str(i) for i in range(config.num_classes)),
        mean=(0.5,) * config.in_chans,
        std=(0.5,) * config.in_chans,
    )


def describe(model: torch.nn.Module, card: ModelCard | None = None, **changes) -> torch.nn.Module:
    """Attach a card to `model` (the given one, or its current one, with `changes`) and return the model."""
    base = card or card_of(model)
    model.card = replace(base, **changes) if changes else base
    return model


def card_of(model: torch.nn.Module) -> ModelCard:
    """The model's card; a bare ViT gets the default one."""
    card = model.__dict__.get("card")
    if card is None:
        card = default_card(model.config)
        model.card = card
    return card
