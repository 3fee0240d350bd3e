"""Where models come from: the shipped checkpoints, torchvision's ViT-B/16, timm's ViTs, or a checkpoint path;
`load_model` gives each as its record (vitviz.models.loaded)."""

from __future__ import annotations

from pathlib import Path

from vitviz.models import checkpoint
from vitviz.models.loaded import LoadedViT, loaded

CHECKPOINTS = Path(__file__).resolve().parent.parent.parent / "checkpoints"
SHIPPED = {"cifar10": CHECKPOINTS / "cifar10" / "model", "mnist": CHECKPOINTS / "mnist" / "model"}


def load_model(
    path: str | Path | None = None, device: str = "cpu", pretrained: bool = True, weights: str | Path | None = None
) -> LoadedViT:
    """The record (vitviz.models.loaded.LoadedViT) of a model loaded in eval mode: its module, its card (config,
    classes, normalisation, training record), its token layout and its family's adapter.

    path None or "cifar10": the shipped CIFAR-10 model; "mnist": the shipped MNIST model;
    "vit_b_16": torchvision's ImageNet ViT-B/16 (`pretrained=False` builds it randomly
    initialised, with no download); "timm/<name>": a timm ViT by its pretrained tag, e.g.
    "timm/deit_small_patch16_224.fb_in1k" (weights through timm's pretrained path, the Hugging Face
    cache when offline; `weights=` a local .safetensors file; `pretrained=False` random weights);
    anything else: the checkpoint at that path.
    """
    return loaded(_module(path, device, pretrained, weights))


def _module(path, device: str, pretrained: bool, weights):
    key = "cifar10" if path is None else str(path)
    if key.startswith("timm/"):
        from vitviz.models.timm_vit import load_timm

        return load_timm(key.removeprefix("timm/"), pretrained=pretrained, device=device, weights=weights)
    if key == "vit_b_16":
        from vitviz.models.tv_vit import load_vit_b_16

        return load_vit_b_16(pretrained=pretrained, device=device)
    return checkpoint.load(SHIPPED.get(key, path), device)
