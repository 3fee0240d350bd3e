"""The pictures of a training run as it learns: rollout on fixed probe images with their predictions, the
positional embeddings' similarity, and the loss and accuracy curves."""

from __future__ import annotations

import numpy as np
import torch

from vitviz.data.datasets import normalize
from vitviz.explain import interpret
from vitviz.models.loaded import LoadedViT
from vitviz.pictures import draw, figures
from vitviz.pictures.panels import Scale, panel
from vitviz.pictures.style import Style, drawn_with


@torch.no_grad()
def render_snapshot(
    r: LoadedViT, probes_x: torch.Tensor, probes_y: torch.Tensor, classes: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """(rollout over the probe images with their predictions, positional-similarity tiles) of the run's model
    (its record, `r`)."""
    card = r.card
    x = normalize(probes_x.to(r.device), card.mean, card.std)
    logits, attn = interpret.forward_with_attention(r, x)  # in eval mode, the run's mode restored (models.loaded)
    fused = torch.stack([a.float().mean(1, keepdim=True) for a in attn], 1)  # (B, L, 1, N, N): heads averaged
    del attn  # each layer's heads, freed before the rollout: a run's estimate counts them once
    roll = interpret.attention_rollout(fused.cpu())[:, 0, 1:]  # (B, P), the mean fusion's rollout
    g = card.config.grid_size
    pred = logits.argmax(-1).cpu()
    tiles, labels, colors = [], [], []
    for i in range(len(x)):
        px = probes_x[i].permute(1, 2, 0).numpy()
        m = roll[i]
        m = (m - m.min()) / (m.max() - m.min()).clamp_min(1e-12)
        tiles.append(draw.overlay(px, m.view(g, g), 112, alpha=0.6))
        labels.append(classes[int(pred[i])])
        colors.append((20, 140, 40) if int(pred[i]) == int(probes_y[i]) else (200, 30, 30))
    probes = panel(
        draw.tile([tiles], col_labels=labels, col_colors=colors),
        "Rollout from CLS on fixed images, with the prediction (green: right, red: wrong)",
        Scale("attention rolled through every layer", 0, 1, "each image its own range", relative=True),
    )
    sim = interpret.pos_embed_similarity(r)
    pos = draw.pos_similarity_tiles(sim, tile_size=max(14, min(28, 240 // g)))
    return probes, panel(
        pos,
        "Positional-embedding similarity (each tile: one position against all)",
        Scale("cosine similarity", -1.0, 1.0, "one scale for all tiles", cmap="viridis"),
        min_width=300,
    )


def empty_curves(style: Style = Style()) -> np.ndarray:
    """The curves before a run: the axes, already in percent 0 to 100."""
    return curves([], [], (), style)


def curves(
    history: list[dict],
    steps: list[tuple[float, float]],
    quick: list[dict] | tuple = (),
    style: Style = Style(),
    stopped: bool = False,
) -> np.ndarray:
    """The loss per step, and the accuracy of every validation (the quick ones and each epoch's), drawn in `style`;
    `stopped`: the run's last validation is where the visitor stopped it."""
    with drawn_with(style):
        return figures.figure_to_array(figures.curves_figure(history, steps[-2000:], list(quick), stopped))
