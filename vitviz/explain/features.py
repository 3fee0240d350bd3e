"""What a ViT without a classifier (DINO, DINOv2) shows of an image: tensors in, tensors out.

- `head_masks`: each last-layer head's attention from CLS over the patches, kept down to the patches
  that hold `keep` (60%) of its mass, as DINO's paper draws them (Caron et al., 2021, Figure 3).
- `principal_colours`: the first three principal components of the patch features as an RGB
  colour per patch, as DINOv2's paper draws them (Oquab et al., 2024, Figure 1).
- `similarity_to`: the cosine similarity of every patch's features to one patch's.
"""

from __future__ import annotations

import torch


def head_masks(attn: torch.Tensor, prefix: int, keep: float = 0.6) -> torch.Tensor:
    """(H, N, N) last-layer attention -> (H, P) bool: per head, the fewest patches whose CLS attention, over the
    patches and renormalised there, adds up to at least `keep`."""
    a = attn[:, 0, prefix:].float()
    a = a / a.sum(-1, keepdim=True).clamp_min(1e-12)
    order = a.argsort(-1, descending=True)
    mass = a.gather(-1, order).cumsum(-1)
    chosen = (mass - a.gather(-1, order)) < keep  # a patch is kept while the mass before it is short of `keep`
    return torch.zeros_like(a, dtype=torch.bool).scatter(-1, order, chosen)


def principal_colours(features: torch.Tensor, k: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """(P, D) patch features -> ((P, k) each component min-max scaled to 0..1, (k,) explained variance ratio)."""
    f = features.float()
    f = f - f.mean(0, keepdim=True)
    _, s, vh = torch.linalg.svd(f, full_matrices=False)
    proj = f @ vh[:k].T  # (P, k)
    lo, hi = proj.amin(0, keepdim=True), proj.amax(0, keepdim=True)
    var = s**2
    return (proj - lo) / (hi - lo).clamp_min(1e-12), var[:k] / var.sum().clamp_min(1e-12)


def similarity_to(features: torch.Tensor, patch: int) -> torch.Tensor:
    """(P, D) patch features -> (P,) cosine similarity of each patch's features to patch `patch`'s, -1 to 1."""
    f = features.float()
    f = f / f.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (f @ f[patch]).clamp(-1, 1)
