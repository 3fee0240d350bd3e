"""torchvision's ViT-B/16 (ImageNet-1k) through the same interpret and render functions.

torchvision's encoder blocks call MultiheadAttention with need_weights=False, so the
adapter runs the encoder itself, block by block, with the model's own modules and
need_weights=True, average_attn_weights=False: the per-head weights come back from
each call's own forward. No hook is put on the model and nothing is kept on it, so
concurrent requests on one shared model never see each other's tensors. The weights
stay in the autograd graph, so gradient rollout works too.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from vitviz.models import bound
from vitviz.models.bound import ModelError
from vitviz.models.card import ModelCard, describe
from vitviz.models.vit import ViTConfig, intermediates


def is_torchvision_vit(model: nn.Module) -> bool:
    try:
        from torchvision.models.vision_transformer import VisionTransformer
    except ImportError:  # pragma: no cover
        return False
    return isinstance(model, VisionTransformer)


class _PatchEmbed:
    def __init__(self, conv: nn.Conv2d):
        self.proj = conv


class TorchvisionAdapter:
    """Gives a torchvision VisionTransformer the few names vitviz.explain.interpret uses."""

    def __init__(self, model):
        self.model = model
        self.patch_size = model.patch_size
        self.pos_embed = model.encoder.pos_embedding  # (1, N, D)
        self.patch_embed = _PatchEmbed(model.conv_proj)
        self.blocks = model.encoder.layers  # each returns the (B, N, D) tokens
        self.norm, self.head = model.encoder.ln, model.heads  # the final norm, and the classifier on CLS
        self.num_prefix_tokens = 1  # CLS

    def classify(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(tokens[:, 0]))

    def prefix_names(self) -> tuple[str, ...]:
        return ("CLS",)

    def embeddings(self) -> list[nn.Parameter]:
        """torchvision's class token and positional embedding."""
        return [self.model.class_token, self.pos_embed]

    def forward_intermediates(self, x: torch.Tensor, return_attention: bool = True) -> dict:
        """The same pass as VisionTransformer.forward, written out so that every block's tokens and
        attention come back from this call (see vitviz.models.vit.ViT.forward_intermediates for the keys)."""
        m = self.model
        patches = m._process_input(x)  # (B, P, D)
        x = torch.cat([m.class_token.expand(x.shape[0], -1, -1), patches], dim=1) + m.encoder.pos_embedding
        x = m.encoder.dropout(x)  # (B, N, D)
        first, attns, tokens = x, [], []
        for blk in m.encoder.layers:
            h = blk.ln_1(x)
            h, a = blk.self_attention(h, h, h, need_weights=return_attention, average_attn_weights=False)
            x = x + blk.dropout(h)
            x = x + blk.mlp(blk.ln_2(x))
            attns.append(a)  # (B, H, N, N)
            tokens.append(x)
        return intermediates(m.heads(m.encoder.ln(x)[:, 0]), attns, patches, first, tokens, return_attention)


def config_of(model: nn.Module) -> ViTConfig:
    layers = model.encoder.layers
    blk = layers[0]
    return ViTConfig(
        image_size=model.image_size,
        in_chans=3,
        patch_size=model.patch_size,
        embed_dim=model.hidden_dim,
        depth=len(layers),
        num_heads=blk.num_heads,
        mlp_ratio=model.mlp_dim / model.hidden_dim,
        num_classes=model.num_classes,
        dropout=0.0,
    )


def weights_folder() -> str:
    """Where torchvision keeps downloaded weights (TORCH_HOME/hub/checkpoints; on a Space with persistent
    storage app.py points TORCH_HOME at /data, so they survive restarts)."""
    import os

    return os.path.join(torch.hub.get_dir(), "checkpoints")


def weights_cached() -> bool:
    import os

    return os.path.isfile(os.path.join(weights_folder(), "vit_b_16-c867db91.pth"))


def load_vit_b_16(
    pretrained: bool = True, device: torch.device | str = "cpu", max_params: int | None = None
) -> nn.Module:
    """torchvision's vit_b_16, ImageNet-1k weights (downloaded once into `weights_folder()`) or random.

    Counted on the meta device first (bound.TooLarge over `max_params`); with `pretrained`, the weights are
    read before the model is built, and the model takes them as they are (built on the meta device, then
    `load_state_dict(assign=True)`): a missing file costs no memory. The returned model carries its card
    (vitviz.models.card) like ours.
    """

    from torchvision.models import ViT_B_16_Weights, vit_b_16

    with torch.device("meta"):
        skeleton = vit_b_16(weights=None)
    bound.check("torchvision's ViT-B/16", bound.count(skeleton), max_params)
    weights = ViT_B_16_Weights.IMAGENET1K_V1
    if pretrained:
        try:
            state = weights.get_state_dict(progress=False, check_hash=True)
        except Exception:  # noqa: BLE001 - no internet, a broken cache
            raise ModelError(
                "The pretrained ViT-B/16 weights (330 MB) are not on this machine and cannot be downloaded now: "
                "they need internet once, after which they are kept in torchvision's cache."
            ) from None
        skeleton.load_state_dict(state, assign=True)
        model = skeleton
    else:
        torch.manual_seed(0)
        model = vit_b_16(weights=None)
    top1 = weights.meta["_metrics"]["ImageNet-1K"]["acc@1"] / 100
    card = ModelCard(
        config=config_of(model),
        classes=tuple(weights.meta["categories"]),
        mean=(0.485, 0.456, 0.406),
        std=(0.229, 0.224, 0.225),
        dataset="imagenet",
        kind="torchvision",
        name="ViT-B/16 (torchvision, ImageNet-1k)" + ("" if pretrained else ", untrained"),
        metrics={"imagenet_top1": top1} if pretrained else {},
        needs_internet=pretrained,
    )
    return describe(model, card).to(device).eval()
