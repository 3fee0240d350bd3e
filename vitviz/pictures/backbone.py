"""The pictures of a model without a classifier (DINO, DINOv2), where a class map would stand: arrays in,
pictures out (vitviz.explain.features computes them).

- `similarity_panel`: the cosine similarity of every patch's features to the selected patch's, on a
  diverging scale centred on 0 (the centre patch while a token before the patches is selected).
- `backbone_panel`: the patch features as colours (their first three principal components) beside
  each last-layer head's CLS attention kept to 60% of its mass, as the DINO papers draw them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vitviz.pictures.explanation import Explanation

import numpy as np
from PIL import Image

from vitviz.explain import features
from vitviz.pictures import draw
from vitviz.pictures.panels import Scale, panel

KEEP = 0.6  # DINO's share of a head's attention mass


def similarity_panel(ex: Explanation, patch: int | None, size: int, alpha: float) -> np.ndarray:
    g = int(round(ex.features.shape[0] ** 0.5))
    at = patch if patch is not None else (g * g) // 2 + g // 2
    sim = features.similarity_to(ex.features, at).view(g, g)
    pic = draw.overlay(ex.pixels, sim, size, cmap="RdBu_r", alpha=max(alpha, 0.6), mode="nearest", vmin=-1.0, vmax=1.0)
    pic = np.asarray(draw.draw_grid(pic, g, numbers=False, highlight=at, color=(90, 90, 90)))
    which = f"patch {at}" if patch is not None else f"patch {at} (the centre one: the selected token is no patch)"
    return panel(
        pic,
        f"How alike each patch's features are to {which}'s: red alike, blue opposite, white unrelated",
        Scale(
            "cosine similarity of the final patch features",
            -1.0,
            1.0,
            "one scale, -1 to 1, 0 in the middle",
            cmap="RdBu_r",
        ),
    )


def backbone_panel(ex: Explanation, alpha: float) -> np.ndarray:
    g = int(round(ex.features.shape[0] ** 0.5))
    colours, var = features.principal_colours(ex.features)
    masks = features.head_masks(ex.attn[-1], ex.prefix, KEEP)  # (H, P)
    H = masks.shape[0]
    size = max(64, min(112, 720 // (H + 1)))
    pca = np.asarray(
        Image.fromarray((colours.view(g, g, 3).numpy() * 255).astype(np.uint8)).resize((size, size), Image.NEAREST)
    )
    heads = draw.overlays(ex.pixels, masks.float().view(H, g, g).numpy(), size, "inferno", max(alpha, 0.6), "nearest")
    strip = draw.tile([[pca] + list(heads)], col_labels=["features"] + [f"head {h + 1}" for h in range(H)])
    share = ", ".join(f"{100 * float(v):.0f}%" for v in var)
    return panel(
        strip,
        f"Left: the patch features as colours (red, green, blue: their first three principal "
        f"components, {share} of the variance; alike colours, alike features). Then each last-layer "
        f"head's attention from CLS, kept to the patches holding {100 * KEEP:.0f}% of it",
        Scale(
            f"kept: among the patches with {100 * KEEP:.0f}% of the head's CLS attention",
            0.0,
            1.0,
            "each head its own",
            relative=False,
        ),
    )
