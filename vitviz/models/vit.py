"""The Vision Transformer (Dosovitskiy et al., 2021) and its config, written to read like timm's.

Conv patch embedding, a CLS token, learned positional embeddings, pre-norm
blocks, a final LayerNorm and a linear head that returns logits. Attention runs
through F.scaled_dot_product_attention; with ``return_attention=True`` the same
weights run through an explicit softmax and every layer's attention comes back
as a (B, L, H, N, N) tensor, N = 1 + patches. The measured fast paths (dropout with
its residual add in one pass, the q/k/v split, attention's path under bf16) are
vitviz.models.fast_paths.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn as nn

from vitviz.models.fast_paths import Dropout, attend, split_heads


def intermediates(
    logits: torch.Tensor, attns: list, patches: torch.Tensor, first: torch.Tensor, tokens: list, with_attention: bool
) -> dict:
    """What every family's forward_intermediates returns: 'logits' (B, C), 'attn' [L x (B, H, N, N)] (None
    without attention), 'patches' (B, P, D) the patch embedding, 'input' (B, N, D) what the first block
    receives, 'tokens' [L x (B, N, D)] each block's output, every prefix token included."""
    return {
        "logits": logits,
        "attn": attns if with_attention else None,
        "patches": patches,
        "input": first,
        "tokens": tokens,
    }


@dataclass(frozen=True)
class ViTConfig:
    image_size: int = 32  # input height and width in pixels
    in_chans: int = 3  # 3 for RGB, 1 for greyscale
    patch_size: int = 4  # side of a square patch; must divide image_size
    embed_dim: int = 192  # token width D
    depth: int = 6  # number of transformer blocks L
    num_heads: int = 3  # attention heads H per block
    mlp_ratio: float = 2.0  # MLP hidden width = mlp_ratio * embed_dim
    num_classes: int = 10  # size of the head's output (0: no classifier, as DINO's backbones)
    dropout: float = 0.0  # dropout after embeddings, attention projection and MLP

    def __post_init__(self):
        problems = ViTConfig.problems_of(self.to_dict())
        if problems:
            raise ValueError(problems[0])

    @staticmethod
    def problems_of(values: dict, signs: bool = True) -> list[str]:
        """What is wrong with a config of these values (the fields' defaults where one is missing), each as a
        sentence; [] when it can be built. The one place the rules live (TrainConfig asks it too, `signs`
        False: it bounds each size itself, with the range the page shows)."""
        v = {f.name: f.default for f in fields(ViTConfig)} | values
        size, patch, width, heads = v["image_size"], v["patch_size"], v["embed_dim"], v["num_heads"]
        out = []
        if patch < 1 or size % patch:
            fits = ", ".join(str(p) for p in range(2, 17) if size % p == 0)
            out.append(f"Patch size {patch} does not divide the {size}-pixel images; try {fits}.")
        if heads >= 1 and width % heads:
            out.append(f"The width ({width}) must be divisible by the number of heads ({heads}).")
        if signs and (
            min(size, v["in_chans"], width, v["depth"], heads) < 1 or v["num_classes"] < 0 or v["mlp_ratio"] <= 0
        ):
            out.append("Every size must be positive.")
        if signs and not 0.0 <= v["dropout"] < 1.0:
            out.append("The dropout must be at least 0 and below 1.")
        return out

    @property
    def grid_size(self) -> int:
        return self.image_size // self.patch_size

    @property
    def num_patches(self) -> int:
        return self.grid_size**2

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ViTConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown model config fields: {sorted(unknown)}")
        return cls(**d)


# Named presets: overrides of the defaults above (timm's model_args style).
PRESETS: dict[str, dict] = {
    # The CIFAR-10 tutorial's model in shared/seeds: dim 256, depth 4, heads 4, MLP 128.
    "seed": dict(embed_dim=256, depth=4, num_heads=4, mlp_ratio=0.5, dropout=0.2),
    # Small enough to train live on 2 CPU cores and still learn in minutes.
    "tiny": dict(embed_dim=128, depth=4, num_heads=4, mlp_ratio=2.0),
    # The Train tab's quick run on a CPU: narrow, so it sees the most images in 3 minutes.
    "quick": dict(embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0),
    # The shipped CIFAR-10 model.
    "cifar": dict(embed_dim=192, depth=6, num_heads=6, mlp_ratio=2.0),
    # The shipped MNIST model: 28x28 greyscale, patch 4, a 7x7 grid.
    "mnist": dict(image_size=28, in_chans=1, embed_dim=96, depth=4, num_heads=4, mlp_ratio=2.0),
}


def make_config(preset: str = "tiny", **overrides) -> ViTConfig:
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {sorted(PRESETS)}")
    return ViTConfig(**{**PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None}})


class Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int, dropout: float):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, 3 * dim)  # projections for all heads, in one batch
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = Dropout(dropout)

    def forward(
        self, x: torch.Tensor, return_attention: bool = False, residual: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the projected attention output, added to `residual` when given; the attention or None)."""
        B, N, D = x.shape
        q, k, v = split_heads(self.qkv(x), self.num_heads)  # each (B, H, N, hd), contiguous
        attn = None
        if return_attention:
            attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)  # (B, H, N, N)
            x = attn @ v
        else:
            x = attend(q, k, v, self.scale)
        x = x.transpose(1, 2).reshape(B, N, D)  # (B, H, N, hd) -> (B, N, D)
        y = self.proj(x)
        return (self.proj_drop(y) if residual is None else self.proj_drop.add(residual, y)), attn


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int, dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = Dropout(dropout)

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """The MLP's output, added to `residual` when given."""
        y = self.fc2(self.drop(self.act(self.fc1(x))))
        return self.drop(y) if residual is None else self.drop.add(residual, y)


class Block(nn.Module):
    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.embed_dim)
        self.attn = Attention(cfg.embed_dim, cfg.num_heads, cfg.dropout)
        self.norm2 = nn.LayerNorm(cfg.embed_dim)
        self.mlp = Mlp(cfg.embed_dim, int(cfg.embed_dim * cfg.mlp_ratio), cfg.dropout)

    def forward(self, x: torch.Tensor, return_attention: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the block's output tokens, its per-head attention when asked, else None)."""
        x, attn = self.attn(self.norm1(x), return_attention, residual=x)
        x = self.mlp(self.norm2(x), residual=x)
        return x, attn


class PatchEmbed(nn.Module):
    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.proj = nn.Conv2d(cfg.in_chans, cfg.embed_dim, kernel_size=cfg.patch_size, stride=cfg.patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)  # (B, D, h, w) -> (B, N, D)


class ViT(nn.Module):
    """The network only. What it was trained on (classes, normalisation, record) is its card:
    vitviz.models.card.describe attaches one, vitviz.models.card.card_of reads it."""

    def __init__(self, config: ViTConfig):
        super().__init__()
        self.config = config
        D = config.embed_dim
        self.patch_embed = PatchEmbed(config)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + config.num_patches, D))
        self.pos_drop = Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.depth))
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, config.num_classes)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        w = self.patch_embed.proj.weight
        nn.init.xavier_uniform_(w.view(w.shape[0], -1))
        nn.init.zeros_(self.patch_embed.proj.bias)
        nn.init.zeros_(self.head.weight)

    def forward_intermediates(self, x: torch.Tensor, return_attention: bool = True, keep: int = 0) -> dict:
        """Run the model and return what it computed on the way, from this call alone:
        {'logits': (B, C), 'attn': [L x (B, H, N, N)] or None, 'patches': (B, P, D) the patch embedding,
        'input': (B, N, D) the tokens the first block receives, 'tokens': [L x (B, N, D)] each block's output}.

        Nothing is kept on the module, so concurrent calls never see each other's tensors. The attention
        tensors are part of the autograd graph (gradient rollout and LeGrad take gradients with respect to them).
        `keep` > 0 (training's cheaper early steps) passes only that many patch tokens, a random set per image
        with their own positions, to the blocks (FLIP's patch dropping).
        """
        B = x.shape[0]
        patches = self.patch_embed(x)  # (B, P, D)
        pos = self.pos_embed
        x = torch.cat([self.cls_token.expand(B, -1, -1), patches], dim=1) + pos  # (B, N, D)
        if 0 < keep < patches.shape[1]:
            chosen = torch.rand(B, patches.shape[1], device=x.device).argsort(1)[:, :keep] + 1  # 1..P: patches
            x = torch.cat([x[:, :1], x.gather(1, chosen[..., None].expand(-1, -1, x.shape[2]))], dim=1)
        if x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            x = x.to(torch.get_autocast_dtype("cpu"))  # the residual stream in bf16 too (LayerNorms compute in fp32)
        x = self.pos_drop(x)
        first, attns, tokens = x, [], []
        for blk in self.blocks:
            x, a = blk(x, return_attention)
            attns.append(a)
            tokens.append(x)
        return intermediates(self.head(self.norm(x)[:, 0]), attns, patches, first, tokens, return_attention)

    num_prefix_tokens = 1  # CLS

    def prefix_names(self) -> tuple[str, ...]:
        return ("CLS",)

    def embeddings(self) -> list[nn.Parameter]:
        """The learned CLS token and positional embedding."""
        return [self.cls_token, self.pos_embed]

    def classify(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits from (B, N, D) tokens: the CLS token through the final norm and the head."""
        return self.head(self.norm(tokens[:, 0]))

    def forward(self, x: torch.Tensor, return_attention: bool = False, keep: int = 0) -> torch.Tensor:
        out = self.forward_intermediates(x, return_attention, keep)
        if return_attention:
            return out["logits"], torch.stack(out["attn"], dim=1)  # (B, L, H, N, N)
        return out["logits"]

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


@functools.lru_cache(maxsize=64)
def cost(cfg: ViTConfig) -> tuple[int, float]:
    """(parameters, GFLOP of one image's forward pass) of the ViT `cfg` describes, counted by torch on the meta
    device (nothing allocated, nothing computed): its parameters, and torch.utils.flop_counter's count of the
    forward's matmuls and attention. Kept per config."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = ViT(cfg).eval()
        x = torch.empty(1, cfg.in_chans, cfg.image_size, cfg.image_size)
    with FlopCounterMode(display=False) as flops, torch.no_grad():
        model(x)
    return sum(p.numel() for p in model.parameters()), flops.get_total_flops() / 1e9
