"""Where attention goes in the image, and what the patch and position embeddings learned: the ViT paper's
Figure 7 (mean attention distance, the patch filters' principal components, positional similarity) and one
patch's attention. Tensors in, tensors out."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vitviz.models.loaded import LoadedViT, TokenLayout

import math

import torch

from vitviz.explain.layout import num_prefix


def grid_side(num_patches: int) -> int:
    g = math.isqrt(num_patches)
    if g * g != num_patches:
        raise ValueError(f"{num_patches} patches do not form a square grid")
    return g


def patch_centers(g: int, patch_size: float, device: torch.device | str | None = None) -> torch.Tensor:
    """(P, 2) pixel coordinates (row, col) of the patch centres, row-major."""
    idx = torch.arange(g, device=device, dtype=torch.float32)
    rr, cc = torch.meshgrid(idx, idx, indexing="ij")
    return (torch.stack([rr.flatten(), cc.flatten()], -1) + 0.5) * patch_size


def mean_attention_distance(
    attn: torch.Tensor, patch_size: float, *, prefix: LoadedViT | TokenLayout | int
) -> torch.Tensor:
    """(B, L, H, N, N) -> (L, H): attention-weighted distance in pixels from each query patch to the
    key patches (prefix tokens left out, weights renormalised over patches), averaged over queries and images
    (the ViT paper's Figure 7, right). `prefix`: the token layout (see `num_prefix`)."""
    prefix = num_prefix(prefix)
    P = attn.shape[-1] - prefix
    g = grid_side(P)
    c = patch_centers(g, patch_size, attn.device)
    dist = torch.cdist(c, c)  # (P, P)
    w = attn[..., prefix:, prefix:].float()
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-12)
    return (w * dist).sum(-1).mean(dim=(0, -1))  # (B, L, H, P) -> (L, H)


def pos_embed_similarity(model: LoadedViT) -> torch.Tensor | None:
    """(P, P) cosine similarity between the patch positions' learned embeddings (prefix tokens left out: the
    patches' positions are the last P in every family); None for a model with rotary positions (DINOv3), which
    learns no embedding per position."""
    if model.adapter.pos_embed is None:
        return None
    pe = model.adapter.pos_embed.detach()[0, -model.layout.num_patches :].float()  # (P, D)
    pe = pe / pe.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (pe @ pe.T).clamp(-1, 1)


def patch_embed_components(model: LoadedViT, k: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k principal components of the patch-embedding filters (Figure 7, left).

    Returns (components (k, C, p, p), each scaled to [0, 1] for display; explained variance ratio (k,)).
    """
    w = model.adapter.patch_embed.proj.weight.detach().float()  # (D, C, p, p)
    D = w.shape[0]
    flat = w.reshape(D, -1)
    flat = flat - flat.mean(0, keepdim=True)
    _, s, vh = torch.linalg.svd(flat, full_matrices=False)
    k = max(1, min(k, vh.shape[0]))
    comps = vh[:k].reshape(k, *w.shape[1:])
    lo = comps.flatten(1).amin(1).view(k, 1, 1, 1)
    hi = comps.flatten(1).amax(1).view(k, 1, 1, 1)
    var = s**2
    return (comps - lo) / (hi - lo).clamp_min(1e-12), (var[:k] / var.sum().clamp_min(1e-12))


def patch_attention(attn: torch.Tensor, patch: int, *, prefix: LoadedViT | TokenLayout | int) -> torch.Tensor:
    """(B, L, H, N, N) -> (B, L, H, P): attention from patch `patch` (0-based, row-major) to every patch.
    `prefix`: the token layout (see `num_prefix`)."""
    prefix = num_prefix(prefix)
    P = attn.shape[-1] - prefix
    if not 0 <= patch < P:
        raise ValueError(f"patch must be in 0..{P - 1}")
    return attn[..., prefix + patch, prefix:]
