"""Where models come from: the shipped checkpoints, torchvision's ViT-B/16, timm's ViTs, or a checkpoint path;
`load_model` gives each as its record (vitviz.models.loaded)."""

from __future__ import annotations

from pathlib import Path

import torch

from vitviz.models import bound, checkpoint
from vitviz.models.card import card_of
from vitviz.models.hf_towers import HFAdapter
from vitviz.models.hf_vit import is_hf
from vitviz.models.loaded import LoadedViT, TokenLayout
from vitviz.models.timm_vit import TimmAdapter, is_timm_vit
from vitviz.models.tv_vit import TorchvisionAdapter, is_torchvision_vit
from vitviz.models.words import with_labels

CHECKPOINTS = Path(__file__).resolve().parent.parent.parent / "checkpoints"
SHIPPED = {"cifar10": CHECKPOINTS / "cifar10" / "model", "mnist": CHECKPOINTS / "mnist" / "model"}


def load_model(
    path: str | Path | None = None,
    device: str = "cpu",
    pretrained: bool = True,
    weights: str | Path | None = None,
    max_params: int | None | str = bound.FROM_ENV,
) -> LoadedViT:
    """The record (vitviz.models.loaded.LoadedViT) of a model loaded in eval mode: its module, its card (config,
    classes, normalisation, training record), its token layout and its family's adapter.

    path None or "cifar10": the shipped CIFAR-10 model; "mnist": the shipped MNIST model;
    "vit_b_16": torchvision's ImageNet ViT-B/16 (`pretrained=False` builds it randomly
    initialised, with no download); "timm/<name>": a timm ViT by its pretrained tag, e.g.
    "timm/deit_small_patch16_224.fb_in1k" (weights through timm's pretrained path, the Hugging Face
    cache when offline; `weights=` a local .safetensors file; `pretrained=False` random weights);
    "hf:<org>/<repo>" (or "hf:<folder>" that `save_pretrained` wrote): a `transformers` ViT, DeiT, DINOv2,
    DINOv3, CLIP or SigLIP model (vitviz.models.hf_vit; CLIP and SigLIP come with labels in words, which
    vitviz.models.words.with_labels changes); anything else: the checkpoint at that path.

    A model with more than `max_params` parameters is refused (vitviz.models.bound.TooLarge) before anything
    is downloaded or allocated: by default the bound is VITVIZ_MAX_MODEL_PARAMS (200 million unless set);
    `max_params=None` sets none. Every model that cannot be had raises a vitviz.models.bound.ModelError.
    """
    return loaded(_module(path, device, pretrained, weights, bound.resolve(max_params)))


def _module(path, device: str, pretrained: bool, weights, max_params: int | None):
    key = "cifar10" if path is None else str(path)
    if key.startswith("hf:"):
        from vitviz.models.hf_vit import load_hf

        return load_hf(key.removeprefix("hf:"), device=device, max_params=max_params, pretrained=pretrained)
    if key.startswith("timm/"):
        from vitviz.models.timm_vit import load_timm

        return load_timm(
            key.removeprefix("timm/"), pretrained=pretrained, device=device, weights=weights, max_params=max_params
        )
    if key == "vit_b_16":
        from vitviz.models.tv_vit import load_vit_b_16

        return load_vit_b_16(pretrained=pretrained, device=device, max_params=max_params)
    return checkpoint.load(SHIPPED.get(key, path), device, max_params=max_params)


def import_families() -> None:
    """Import, in this thread, every library a model family needs. A server calls this before it serves anyone:
    two first requests importing timm or torchvision at once in two threads can deadlock on Python's import
    locks, or see a half-imported module."""
    import huggingface_hub  # noqa: F401
    import timm  # noqa: F401
    import timm.data  # noqa: F401
    import timm.layers  # noqa: F401
    import timm.models.vision_transformer  # noqa: F401
    import torchvision.models  # noqa: F401
    import torchvision.models.vision_transformer  # noqa: F401
    import transformers  # noqa: F401
    from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer  # noqa: F401

    from vitviz.models import hf_towers, hf_vit, timm_vit, tv_vit, words  # noqa: F401

    hf_towers.register_attention()


def loaded(model: torch.nn.Module | LoadedViT) -> LoadedViT:
    """The record of `model` (a module of a supported family, or a record, handed back)."""
    if isinstance(model, LoadedViT):
        return model
    if is_hf(model):
        return _hf_record(model)
    card = card_of(model)
    if is_torchvision_vit(model):
        adapter = TorchvisionAdapter(model)
    elif is_timm_vit(model):
        adapter = TimmAdapter(model)
    else:
        adapter = model  # our ViT has the names itself
    cfg = card.config
    layout = TokenLayout(
        tuple(adapter.prefix_names()), (cfg.grid_size, cfg.grid_size), cfg.patch_size, getattr(adapter, "reader", "CLS")
    )
    return LoadedViT(model, card, adapter, layout)


def _hf_record(model: torch.nn.Module) -> LoadedViT:
    """The record of a `transformers` model vitviz loaded (vitviz.models.hf_vit), with the default labels when it
    reads words."""
    card = model.__dict__.get("card")
    if card is None:
        raise ValueError("this transformers model was not loaded by vitviz: use vitviz.load_model('hf:...')")
    adapter = HFAdapter(model)
    adapter.text = card.text
    cfg = card.config
    layout = TokenLayout(tuple(adapter.prefix_names()), (cfg.grid_size, cfg.grid_size), cfg.patch_size, adapter.reader)
    record = LoadedViT(model, card, adapter, layout)
    return with_labels(record) if adapter.text is not None else record
