"""What each block does to the tokens, as pictures: the logit lens (the prediction after every block) and the
token norms (every patch token's length after every block, the outliers named)."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image, ImageDraw

from vitviz.explain import interpret
from vitviz.pictures import draw
from vitviz.pictures.panels import Scale, panel


def locks_in(lens: torch.Tensor) -> int:
    """The first block (1-based) after which the leading class of the (L, C) logit lens is the final
    prediction and stays so."""
    top = lens.argmax(-1).tolist()
    k = len(top)
    while k > 1 and top[k - 2] == top[-1]:
        k -= 1
    return k


def lens_panel(classes: tuple[str, ...] | list[str], lens: torch.Tensor) -> np.ndarray:
    """The (L, C) logit lens as a picture: the classes that lead after some block, or end in the top 5."""
    L = lens.shape[0]
    keep = list(dict.fromkeys(lens.argmax(-1).tolist() + lens[-1].topk(min(5, len(classes))).indices.tolist()))[:8]
    grid = draw.lens_grid(lens[:, keep], [f"after block {i + 1}" for i in range(L)], [classes[i] for i in keep])
    return panel(
        grid,
        f"Logit lens: the prediction after each block (the final answer from block {locks_in(lens)} on)",
        Scale("probability", 0.0, 1.0, "one scale for all cells", cmap="viridis"),
    )


def norm_sentence(found: list[tuple[int, int, float]]) -> str:
    """The outlying patch tokens of `interpret.norm_outliers`, in words."""
    if not found:
        return f"no outliers (none reaches {interpret.OUTLIER_RATIO:g}x its layer's median)"
    by_patch: dict[int, list] = {}
    for layer, patch, times in found:
        by_patch.setdefault(patch, []).append((layer, times))
    parts = [
        f"patch {p} (block{'s' if len(v) > 1 else ''} {', '.join(str(l + 1) for l, _ in sorted(v))}; "
        f"{max(t for _, t in v):.1f}x the median)"
        for p, v in list(by_patch.items())[:4]
    ]
    more = f" and {len(by_patch) - 4} more" if len(by_patch) > 4 else ""
    return "outliers outlined: " + "; ".join(parts) + more


def norms_panel(pixels: np.ndarray, norms: torch.Tensor, g: int, L: int, alpha: float, prefix: int = 1) -> np.ndarray:
    """Each block's patch-token norms as a g x g tile on one scale, the outliers (interpret.norm_outliers)
    outlined in white, titled with which tokens they are; CLS (and any registers) set apart in the title."""
    patches = norms[:, prefix:].float()
    lo, hi = float(patches.min()), float(patches.max())
    scaled = ((patches - lo) / max(hi - lo, 1e-12)).view(L, g, g)
    size = max(64, min(112, 720 // L))
    tiles = draw.overlays(pixels, scaled.numpy(), size, "inferno", max(alpha, 0.7), "nearest")
    found = interpret.norm_outliers(norms, prefix=prefix)
    for layer, patch, _ in found:
        im = Image.fromarray(tiles[layer])
        r, c = divmod(patch, g)
        step = size / g
        ImageDraw.Draw(im).rectangle(
            [c * step, r * step, (c + 1) * step - 1, (r + 1) * step - 1], outline=(255, 255, 255), width=2
        )
        tiles[layer] = np.asarray(im)
    strip = draw.tile([list(tiles)], col_labels=[f"after block {i + 1}" for i in range(L)])
    cls = norms[:, 0] if prefix else None  # SigLIP: no token before the patches
    regs = norms[:, 1:prefix]
    others = f"{regs.shape[1]} other token{'s' if regs.shape[1] > 1 else ''} before the patches"
    extra = (
        f"; the {others} (registers or distillation): {float(regs.min()):.3g} to {float(regs.max()):.3g}"
        if regs.numel()
        else ""
    )
    return panel(
        strip,
        f"Token norms after each block: {norm_sentence(found)}"
        + (f". CLS: {float(cls.min()):.3g} to {float(cls.max()):.3g}{extra}" if cls is not None else ""),
        Scale("length (L2 norm) of each patch token", lo, hi, "one scale for all tiles"),
    )
