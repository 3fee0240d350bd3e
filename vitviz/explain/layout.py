"""Which tokens an explanation reads: how many come before the patches, which row the prediction reads, and
whether there are classes to explain at all. vitviz.explain.interpret and vitviz.explain.geometry ask these."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vitviz.models.loaded import LoadedViT

import torch

from vitviz.models.loaded import TokenLayout


def num_prefix(model: LoadedViT | TokenLayout | int) -> int:
    """K: how many tokens come before the patches (1 for CLS alone; 2 with DeiT's distillation token; 1 + the
    registers for DINOv2 with registers; 0 for SigLIP), of a model's record, a token layout, or K itself."""
    if isinstance(model, bool) or model is None:
        raise TypeError("give the token layout: the model's record, its TokenLayout, or the number of prefix tokens")
    if isinstance(model, int):
        return model
    return model.num_prefix if isinstance(model, TokenLayout) else model.layout.num_prefix


def needs_classes(model: LoadedViT) -> None:
    """ValueError with a sentence when the model has no classes to explain (DINO, DINOv2, DINOv3 backbones)."""
    if model.head is None:
        raise ValueError(
            f"{model.card.title} has no classifier (it learned without labels), so there is no class to explain; its "
            "attention, features and patch similarity show what it sees."
        )


def read_row(layout: TokenLayout, R: torch.Tensor, pool: torch.Tensor | None = None) -> torch.Tensor:
    """The row the prediction reads of (B, [L,] N, N) token-to-token relevance R, over the patches: (B, [L,] P).
    CLS's row; CLS's and the distillation token's averaged when both heads predict; SigLIP's pooling query:
    `pool` (B, N), its attention (or relevance) over the last block's tokens, times R."""
    K = layout.num_prefix
    if layout.reader == "pooling query":
        if pool is None:
            raise ValueError("this model pools with an attention head: its pooling query's attention is needed")
        p = pool.float().view(pool.shape[0], *([1] * (R.ndim - 3)), 1, -1)  # (B, [1,] 1, N)
        return (p @ R.float())[..., 0, K:]
    rows = 2 if layout.reader == "CLS and distillation" else 1
    return R[..., :rows, K:].float().mean(-2)
