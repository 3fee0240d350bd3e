"""timm's Vision Transformers (DeiT, DINO, DINOv2 with or without registers, your own) through vitviz.

`load_timm("deit_small_patch16_224.fb_in1k")` builds the model with timm's own `create_model`, in
an order that spends nothing on a model that cannot be had: the architecture on the meta device
(checked, and counted against the size bound of vitviz.models.bound), then its weights file (the
Hugging Face cache, or the Hub where there is internet; HF_HUB_OFFLINE is honoured), and only then
the model, by timm's pretrained path from that file. `weights=` takes a local .safetensors file,
`pretrained=False` random weights with no download. Every model is built at 224x224; DINOv2's
positional embeddings (trained at 518) are interpolated to it by timm.

Attention is read from the instance vitviz loaded: each of its blocks is set, once, to timm's
non-fused attention (`attn.fused_attn = False` on that instance; timm's process-wide switch is
never touched, so other timm models keep their fused kernels), and `TimmAdapter` runs the blocks
itself, so that every call gets its own per-head attention and block outputs back: no hook, and
nothing kept on the shared model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vitviz.models.vit import ViTConfig

from pathlib import Path

import torch

from vitviz.models import bound
from vitviz.models.bound import ModelError
from vitviz.models.vit import intermediates

IMAGE_SIZE = 224
FAMILIES = (
    "DeiT (deit_*), DINO (vit_*.dino), DINOv2 with or without registers (vit_*_dinov2*), and other "
    "plain timm ViTs (vit_*) with a class token"
)


class TimmError(ModelError):
    """A timm model that cannot be had or cannot be shown: the sentence says why."""


def is_timm_vit(model: torch.nn.Module) -> bool:
    try:
        from timm.models.vision_transformer import VisionTransformer
    except ImportError:  # pragma: no cover - timm is a requirement
        return False
    return isinstance(model, VisionTransformer)


def check_supported(model: torch.nn.Module, name: str = "this model") -> None:
    """TimmError unless `model` is a plain timm ViT whose attention vitviz can read."""
    from timm.layers import Attention
    from timm.models.vision_transformer import Block, VisionTransformer

    if not isinstance(model, VisionTransformer):
        raise TimmError(
            f"{name} is a {type(model).__name__}, not a Vision Transformer vitviz can read; the families "
            f"that work are {FAMILIES}."
        )
    if not all(type(b) is Block and type(b.attn) is Attention for b in model.blocks):
        raise TimmError(
            f"{name} uses blocks or attention of its own ({type(model.blocks[0]).__name__}); the "
            f"families that work are {FAMILIES}."
        )
    if not getattr(model, "cls_token", None) is not None:
        raise TimmError(
            f"{name} has no class token, so its attention has no CLS row to roll out; the families "
            f"that work are {FAMILIES}."
        )
    if getattr(model, "attn_pool", None) is not None:
        raise TimmError(f"{name} pools its tokens with attention of its own; the families that work are {FAMILIES}.")


def read_attention_here(model: torch.nn.Module) -> None:
    """Set timm's non-fused attention on this instance's blocks (once, at load)."""
    for blk in model.blocks:
        blk.attn.fused_attn = False


def _attention(attn, x: torch.Tensor, keep: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """timm's Attention.forward on `x` (B, N, D), non-fused, returning its softmax weights (B, H, N, N) too."""
    B, N, _ = x.shape
    qkv = attn.qkv(x).reshape(B, N, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)  # each (B, H, N, hd)
    q, k = attn.q_norm(q), attn.k_norm(k)
    a = ((q * attn.scale) @ k.transpose(-2, -1)).softmax(dim=-1)  # (B, H, N, N)
    out = attn.attn_drop(a) @ v
    out = out.transpose(1, 2).reshape(B, N, -1)  # (B, H, N, hd) -> (B, N, D)
    out = attn.proj_drop(attn.proj(attn.norm(out)))
    return out, (a if keep else None)


class TimmAdapter:
    """Gives a timm VisionTransformer the names vitviz.explain.interpret uses, and a hook-free forward."""

    def __init__(self, model):
        self.model = model
        self.patch_size = model.patch_embed.patch_size[0]
        self.pos_embed = model.pos_embed  # (1, prefix + P, D), or (1, P, D) when the prefix tokens carry none
        self.patch_embed = model.patch_embed
        self.blocks = model.blocks
        self.norm = model.norm
        self.num_prefix_tokens = model.num_prefix_tokens  # CLS, then distillation or register tokens

        self.head = model.head  # nn.Identity when there is no classifier (DINO, DINOv2)

    def prefix_names(self) -> tuple[str, ...]:
        """CLS, then DeiT's distillation token or DINOv2's registers, in the order timm puts them."""
        m = self.model
        dist = ("distillation",) if getattr(m, "dist_token", None) is not None else ()
        regs = tuple(f"register {i + 1}" for i in range(getattr(m, "num_reg_tokens", 0) or 0))
        names = ("CLS",) + dist + regs
        if len(names) != self.num_prefix_tokens:
            raise TimmError(f"this model has {self.num_prefix_tokens} prefix tokens vitviz cannot name")
        return names

    @property
    def reader(self) -> str:
        """The token(s) the prediction reads: CLS, or CLS and the distillation token (a distilled DeiT predicts
        with the mean of its two heads)."""
        return "CLS and distillation" if getattr(self.model, "dist_token", None) is not None else "CLS"

    def embeddings(self) -> list:
        """The learned prefix tokens and the positional embedding."""
        m = self.model
        tokens = [getattr(m, n, None) for n in ("cls_token", "dist_token", "reg_token")]
        return [t for t in tokens if t is not None] + [m.pos_embed]

    def classify(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits from (B, N, D) block outputs: the final norm, then the model's own head (its pooling, a
        distilled model's two heads averaged)."""
        return self.model.forward_head(self.norm(tokens))

    def forward_intermediates(self, x: torch.Tensor, return_attention: bool = True) -> dict:
        """timm's forward_features and forward_head, block by block (see vitviz.models.vit.ViT.forward_intermediates
        for the keys); 'tokens' are each block's output, every prefix token included."""
        m = self.model
        patches = m.patch_embed(x)  # (B, P, D)
        x = m.norm_pre(m.patch_drop(m._pos_embed(patches)))  # prefix tokens prepended, positions added
        first, attns, tokens = x, [], []
        for blk in m.blocks:
            h, a = _attention(blk.attn, blk.norm1(x), return_attention)
            x = x + blk.drop_path1(blk.ls1(h))
            x = x + blk.drop_path2(blk.ls2(blk.mlp(blk.norm2(x))))
            attns.append(a)
            tokens.append(x)
        return intermediates(m.forward_head(m.norm(x)), attns, patches, first, tokens, return_attention)


def weights_cached(name: str) -> bool:
    """Whether timm/<name>'s weights are in the Hugging Face cache (no network asked)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return False
    for filename in ("model.safetensors", "pytorch_model.bin"):
        try:
            if isinstance(try_to_load_from_cache(f"timm/{name}", filename), str):
                return True
        except ValueError:  # not a name the Hub could hold
            return False
    return False


def create(
    name: str, pretrained: bool = True, checkpoint: str | Path | None = None, max_params: int | None = None
) -> torch.nn.Module:
    """timm.create_model at 224x224, with a sentence for every way it can fail. Nothing is spent on a model that
    cannot be had: the architecture is built on the meta device first (no memory, no download) and counted
    against `max_params`; the weights are fetched next (from the Hugging Face cache, or the Hub when online);
    only then is the model built, by timm's own path from that file."""
    import timm

    base = name.split(".")[0]
    if not timm.list_models(base) and not timm.is_model(base):
        raise TimmError(
            f"timm knows no model called `{name[:80]}`; names look like `deit_small_patch16_224.fb_in1k` "
            f"(`timm.list_models('*vit*')` lists them). The families that work are {FAMILIES}."
        )
    try:  # the architecture first, on the meta device (no memory, no download): refuse what vitviz cannot read
        with torch.device("meta"):
            skeleton = timm.create_model(name, pretrained=False)
            check_supported(skeleton, f"`{name}`")
            skeleton = timm.create_model(name, pretrained=False, img_size=IMAGE_SIZE)  # as it will be built
    except (TypeError, RuntimeError, ValueError, KeyError, AssertionError) as e:
        raise TimmError(
            f"`{name}` could not be built: {str(e).splitlines()[0][:200] if str(e) else 'timm gave no reason'}."
        ) from None
    source = hub_source(skeleton.pretrained_cfg or {}) if pretrained and checkpoint is None else None
    params = bound.count(skeleton)
    if max_params is not None and params > max_params:  # its download's size too, where the cache or Hub says it
        bound.check(f"`{name}`", params, max_params, source and bound.hub_file_size(*source))
    del skeleton
    if source is not None:
        checkpoint = fetch_weights(name, source)
    kw = {"pretrained": checkpoint is not None}
    if checkpoint is not None:
        kw["pretrained_cfg_overlay"] = {"file": str(checkpoint)}
    try:
        return timm.create_model(name, img_size=IMAGE_SIZE, **kw)
    except (OSError, RuntimeError, ValueError, KeyError) as e:
        raise TimmError(_why_not(name, e)) from None


def hub_source(cfg: dict) -> tuple[str, tuple[str, ...]]:
    """(repository, file names to try in order) where timm's pretrained path finds these weights on the Hub."""
    repo = cfg.get("hf_hub_id")
    if not repo:
        raise TimmError(
            f"`{cfg.get('architecture', 'this model')}` has no weights on the Hugging Face Hub that vitviz can fetch; "
            "give a local weights file instead."
        )
    named = cfg.get("hf_hub_filename")
    return repo, (named,) if named else ("model.safetensors", "pytorch_model.bin")


def fetch_weights(name: str, source: tuple[str, tuple[str, ...]]) -> str:
    """The local path of a model's weights file: the Hugging Face cache's copy, or a download when online."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import RemoteEntryNotFoundError

    repo, files = source
    for filename in files:  # what the cache holds first: no network asked
        cached = try_to_load_from_cache(repo, filename)
        if isinstance(cached, str):
            return cached
    for filename in files:
        try:
            return hf_hub_download(repo, filename)
        except RemoteEntryNotFoundError:
            continue
        except Exception as e:  # noqa: BLE001 - offline, a missing or gated repository, a broken connection
            raise TimmError(_why_not(name, e)) from None
    raise TimmError(f"The Hub has no weights file for `{name}` that timm can read.")


def _why_not(name: str, e: Exception) -> str:
    text = type(e).__name__ + str(e)
    if any(
        w in text
        for w in ("LocalEntryNotFound", "offline", "OfflineMode", "Connection", "resolve", "Hub", "local cache")
    ):
        return (
            f"The weights of `{name}` are not on this machine and cannot be downloaded now: they need internet "
            "once, after which they are kept in the Hugging Face cache."
        )
    if "Gated" in text or "401" in text or "403" in text:
        return f"The weights of `{name}` are gated on the Hub: accept their licence and log in where they are used."
    if "RepositoryNotFound" in text or "404" in text:
        return f"The Hub has no weights for `{name}`."
    if "size mismatch" in text or "Missing key" in text or "Unexpected key" in text:
        return f"That weights file does not fit `{name}`: its tensors have other names or shapes."
    return f"`{name}` could not be built: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}."


def config_of(model: torch.nn.Module) -> ViTConfig:
    """The ViTConfig that describes a timm ViT (num_classes 0: no classifier)."""
    from vitviz.models.vit import ViTConfig

    blk = model.blocks[0]
    return ViTConfig(
        image_size=model.patch_embed.img_size[0],
        in_chans=model.patch_embed.proj.in_channels,
        patch_size=model.patch_embed.patch_size[0],
        embed_dim=model.embed_dim,
        depth=len(model.blocks),
        num_heads=blk.attn.num_heads,
        mlp_ratio=blk.mlp.fc1.out_features / model.embed_dim,
        num_classes=model.num_classes,
        dropout=0.0,
    )


def class_names(model: torch.nn.Module) -> tuple[str, ...]:
    """ImageNet's class names for an ImageNet head (the first of each synonym list), else numbers."""
    from timm.data import ImageNetInfo, infer_imagenet_subset

    subset = infer_imagenet_subset(model) if model.num_classes else None
    if subset:
        return tuple(d.split(",")[0] for d in ImageNetInfo(subset).label_descriptions())
    return tuple(str(i) for i in range(model.num_classes))


def load_timm(
    name: str,
    pretrained: bool = True,
    device: str | torch.device = "cpu",
    weights: str | Path | None = None,
    max_params: int | None = None,
) -> torch.nn.Module:
    """A timm ViT by its name (with its pretrained tag, e.g. deit_small_patch16_224.fb_in1k), in eval mode, its
    attention readable per call, with its card. TimmError with a sentence when it cannot be had or shown;
    bound.TooLarge, before anything is downloaded or allocated, when it has more than `max_params` parameters."""
    from vitviz.models.card import ModelCard, describe

    if weights is not None and not Path(weights).is_file():
        raise TimmError(f"There is no weights file at {Path(weights).name!r}.")
    model = create(name, pretrained=pretrained, checkpoint=weights, max_params=max_params)
    read_attention_here(model)
    cfg = model.pretrained_cfg or {}
    classes = class_names(model)
    card = ModelCard(
        config=config_of(model),
        classes=classes,
        mean=tuple(cfg.get("mean", (0.485, 0.456, 0.406))),
        std=tuple(cfg.get("std", (0.229, 0.224, 0.225))),
        dataset="imagenet" if len(classes) == 1000 else None,
        kind="timm",
        name=f"{name} (timm)" + ("" if pretrained or weights else ", untrained"),
    )
    return describe(model, card).to(device).eval()
