"""The `transformers` family: vision transformers from the Hugging Face Hub, or a folder `save_pretrained` wrote.

`load_hf("google/vit-base-patch16-224")` (load_model's "hf:<org>/<repo>") reads the model's config first (the
Hugging Face cache, or the Hub where there is internet; HF_HUB_OFFLINE is honoured), refuses any class vitviz
cannot read, builds the architecture on the meta device and counts it against the size bound
(vitviz.models.bound), and only then fetches the weights through transformers' own `from_pretrained`, in fp32,
with vitviz's attention implementation on this instance (vitviz.models.hf_towers). The image processor's config
gives the input's size, crop and normalisation; a CLIP or SigLIP model brings its tokenizer, and is given
labels in words (vitviz.models.words).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from vitviz.models import bound
from vitviz.models.bound import ModelError

if TYPE_CHECKING:
    from vitviz.models.card import ModelCard

READ = {  # the classes vitviz reads, and what the page calls their family
    "ViTForImageClassification": "ViT",
    "ViTModel": "ViT",
    "DeiTForImageClassification": "DeiT",
    "DeiTForImageClassificationWithTeacher": "DeiT distilled",
    "DeiTModel": "DeiT",
    "Dinov2Model": "DINOv2",
    "Dinov2WithRegistersModel": "DINOv2 with registers",
    "DINOv3ViTModel": "DINOv3",
    "CLIPModel": "CLIP",
    "SiglipModel": "SigLIP",
    "Siglip2Model": "SigLIP 2 NaFlex",
}
WITH_WORDS = ("CLIPModel", "SiglipModel", "Siglip2Model")
FAMILIES = (
    "ViTForImageClassification (and ViTModel), DeiT with or without its distillation token, Dinov2Model, "
    "Dinov2WithRegistersModel, DINOv3ViTModel, CLIPModel, SiglipModel and Siglip2Model (SigLIP 2, at a fixed size)"
)
REPO = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")


class HFError(ModelError):
    """A `transformers` model that cannot be had or cannot be shown: the sentence says why."""


def is_hf(model: torch.nn.Module) -> bool:
    try:
        from transformers import PreTrainedModel
    except ImportError:  # pragma: no cover - transformers is a requirement
        return False
    return isinstance(model, PreTrainedModel)


def _source(name: str) -> tuple[str, bool]:
    """(what from_pretrained takes, whether it is a local folder)."""
    name = str(name).strip()
    if Path(name).is_dir():
        if not (Path(name) / "config.json").is_file():
            raise HFError(f"The folder {Path(name).name!r} has no config.json: give one that `save_pretrained` wrote.")
        return name, True
    if not REPO.match(name):
        raise HFError(
            f"`{name[:80]}` is not a Hub id (organisation/name, e.g. google/vit-base-patch16-224) nor a folder here."
        )
    return name, False


def _why_not(name: str, e: Exception) -> str:
    text = type(e).__name__ + " " + str(e)
    if "Gated" in text or "401" in text or "403" in text:
        return f"`{name}` is gated on the Hub: accept its licence and log in where it is used."
    if "RepositoryNotFound" in text or "404" in text or "is not a local folder and is not a valid model" in text:
        return f"The Hub has no model `{name}`."
    missing = ("LocalEntryNotFound", "offline", "Offline", "Connection", "cached", "resolve", "does not appear to have")
    if any(w in text for w in missing):
        return (
            f"`{name}` is not on this machine and cannot be downloaded now: it needs internet once, after which it "
            "is kept in the Hugging Face cache."
        )
    first = str(e).splitlines()[0][:160].rstrip(".") if str(e) else type(e).__name__
    return f"`{name}` could not be loaded: {first}."


def architecture(name: str) -> tuple[object, str]:
    """(its config, its class's name) for a Hub id or folder; HFError for anything vitviz cannot read."""
    from transformers import AutoConfig

    src, _ = _source(name)
    try:
        config = AutoConfig.from_pretrained(src)
    except Exception as e:  # noqa: BLE001 - offline, missing, gated, not a transformers model
        raise HFError(_why_not(name, e)) from None
    arch = (getattr(config, "architectures", None) or [""])[0]
    if arch not in READ:
        what = arch or getattr(config, "model_type", "") or "model"
        raise HFError(f"`{name}` is a {what}, not one vitviz can read; the classes that work are {FAMILIES}.")
    return config, arch


HUB_FILES = (  # what vitviz reads of a repository: a Space preloads these (vitviz.space)
    "config.json",
    "model.safetensors",
    "preprocessor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def cached(name: str) -> bool:
    """Whether a Hub model's config and weights are in the Hugging Face cache (no network asked)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = [try_to_load_from_cache(name, f) for f in ("config.json", "model.safetensors")]
    except ValueError:  # not a name the Hub could hold
        return False
    return all(isinstance(f, str) for f in found)


def _weights_size(name: str, local: bool) -> int | None:
    return None if local else bound.hub_file_size(name, ("model.safetensors", "pytorch_model.bin"))


def _prepare(processor, size: int) -> tuple:
    """("shortest", edge, crop, resample) or ("exact", height, width, resample): the processor's geometry."""
    s = dict(getattr(processor, "size", None) or {})
    resample = int(getattr(processor, "resample", 3) or 3)
    crop = dict(getattr(processor, "crop_size", None) or {})
    if "shortest_edge" in s:
        side = crop.get("height", size) if getattr(processor, "do_center_crop", False) else s["shortest_edge"]
        return ("shortest", int(s["shortest_edge"]), int(side), resample)
    return ("exact", int(s.get("height", size)), int(s.get("width", size)), resample)


def card_for(model: torch.nn.Module, name: str, processor: object, local: bool) -> ModelCard:
    """The ModelCard of a loaded `transformers` model."""
    from vitviz.models.card import ModelCard
    from vitviz.models.vit import ViTConfig

    vision = getattr(model.config, "vision_config", model.config)
    arch = type(model).__name__
    patch = int(vision.patch_size if isinstance(vision.patch_size, int) else vision.patch_size[0])
    if hasattr(vision, "image_size"):
        size = int(vision.image_size if isinstance(vision.image_size, int) else vision.image_size[0])
    else:  # SigLIP 2 NaFlex: its position grid's side, run square (its processor keeps the aspect of any image)
        size = math.isqrt(int(getattr(processor, "max_num_patches", 0) or vision.num_patches)) * patch
    hidden = int(getattr(vision, "intermediate_size", 0) or vision.hidden_size * getattr(vision, "mlp_ratio", 4))
    labels = getattr(model.config, "id2label", None) or {}
    classes = (
        ()
        if arch in WITH_WORDS or not arch.endswith("Classification") and "Teacher" not in arch
        else tuple(str(labels.get(i, i)).split(",")[0] for i in range(len(labels)))
    )
    prepare = _prepare(processor, size)
    crop = prepare[2] if prepare[0] == "shortest" else prepare[1]
    config = ViTConfig(
        image_size=crop,
        in_chans=int(getattr(vision, "num_channels", 3)),
        patch_size=patch,
        embed_dim=int(vision.hidden_size),
        depth=int(vision.num_hidden_layers),
        num_heads=int(vision.num_attention_heads),
        mlp_ratio=hidden / vision.hidden_size,
        num_classes=len(classes),
    )
    return ModelCard(
        config=config,
        classes=classes,
        mean=tuple(float(m) for m in processor.image_mean),
        std=tuple(float(s) for s in processor.image_std),
        dataset="imagenet" if len(classes) == 1000 else None,
        kind="transformers",
        name=f"{Path(name).name if local else name} ({READ[arch]}, transformers)",
        prepare=prepare,
    )


def load_hf(
    name: str, device: str | torch.device = "cpu", max_params: int | None = None, pretrained: bool = True
) -> torch.nn.Module:
    """A `transformers` vision model by Hub id or folder, in eval mode and fp32, its attention readable per call,
    with its card (and, for CLIP and SigLIP, its text tower). HFError with a sentence when it cannot be had or
    shown; bound.TooLarge, before its weights are fetched, when it has more than `max_params` parameters."""
    import transformers
    from transformers import AutoImageProcessor

    from vitviz.models.card import describe
    from vitviz.models.hf_towers import ATTENTION, register_attention

    config, arch = architecture(name)
    src, local = _source(name)
    cls = getattr(transformers, arch)
    with torch.device("meta"):
        params = bound.count(cls._from_config(config))
    if max_params is not None and params > max_params:
        bound.check(f"`{name}`", params, max_params, _weights_size(name, local))
    register_attention()
    try:
        processor = AutoImageProcessor.from_pretrained(src)
    except Exception as e:  # noqa: BLE001 - a folder saved without its processor, or offline
        missing = "preprocessor_config" in str(e) or "image processor" in str(e).lower()
        raise HFError(
            f"`{name}` has no image processor config (preprocessor_config.json): vitviz prepares an image as the "
            "model's own processor does, so save it beside the model (`processor.save_pretrained(folder)`)."
            if missing and local
            else _why_not(name, e)
        ) from None
    try:
        if pretrained:
            model = cls.from_pretrained(src, dtype=torch.float32, attn_implementation=ATTENTION)
        else:
            config._attn_implementation = ATTENTION
            model = cls._from_config(config, dtype=torch.float32)
    except Exception as e:  # noqa: BLE001 - offline, missing files, a broken download
        raise HFError(_why_not(name, e)) from None
    text = None
    if arch in WITH_WORDS:
        from transformers import AutoTokenizer

        from vitviz.models.words import TextTower

        try:
            tokenizer = AutoTokenizer.from_pretrained(src)
        except Exception as e:  # noqa: BLE001
            raise HFError(_why_not(name, e)) from None
        text = TextTower(tokenizer, sigmoid=arch != "CLIPModel")
    model.eval()
    card = card_for(model, name, processor, local)
    return describe(model, card, text=text).to(device)
