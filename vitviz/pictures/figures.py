"""matplotlib figures as pictures: mean attention distance per layer and head, training curves.

Each is drawn on its own matplotlib.figure.Figure (never pyplot's global state) and read back as an array."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from vitviz.pictures.draw import as_array


def figure_to_array(fig: Figure) -> np.ndarray:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()


def distance_figure(dist: torch.Tensor, title: str = "Mean attention distance", uniform: float | None = None) -> Figure:
    """(L, H) distances in pixels: one dot per head against network depth (the ViT paper's Figure 7, right).
    `uniform`: the distance uniform attention would give, drawn as a reference line."""
    d = as_array(dist)
    L, H = d.shape
    fig = Figure(figsize=(4.8, 3.4), dpi=100)
    ax = fig.add_subplot()
    cmap = matplotlib.colormaps["tab10" if H <= 10 else "tab20"]
    for h in range(H):
        ax.scatter(np.arange(1, L + 1), d[:, h], s=22, color=cmap(h % cmap.N), label=f"head {h + 1}")
    ax.set_xlabel("network depth (layer)")
    ax.set_ylabel("mean attention distance (pixels)")
    ax.set_title(title, fontsize=10)
    ax.set_xticks(range(1, L + 1))
    top = float(d.max())
    if uniform is not None:
        ax.axhline(uniform, color="#888888", ls="--", lw=1, label="uniform attention")
        top = max(top, uniform)
    ax.set_ylim(0, top * 1.15)
    ax.grid(alpha=0.3)
    if H <= 8:
        ax.legend(fontsize=7, ncol=3, loc="lower right")
    fig.tight_layout()
    return fig


def curves_figure(
    history: list[dict], steps: list[tuple[float, float]] | None = None, quick: list[dict] | None = None
) -> Figure:
    """Loss and accuracy against epochs: per-step training loss (if given), quick validations on a small
    held-out sample (if given), and per-epoch train/validation figures. Accuracy in percent, 0 to 100."""
    fig = Figure(figsize=(8, 3.2), dpi=100)
    ax1, ax2 = fig.subplots(1, 2)
    if steps:
        e, l_ = zip(*steps)
        ax1.plot(e, l_, color="#bbbbbb", lw=1, label="train loss (steps)")
    if quick:
        n = quick[-1].get("images", "")
        ep = [q["epoch"] for q in quick]
        ax1.plot(
            ep, [q["val_loss"] for q in quick], ".-", color="C1", alpha=0.5, lw=1, label=f"validation loss ({n} images)"
        )
        ax2.plot(
            ep,
            [100 * q["val_acc"] for q in quick],
            ".-",
            color="C1",
            alpha=0.5,
            lw=1,
            label=f"validation ({n} images, often)",
        )
    if history:
        ep = [h["epoch"] for h in history]
        ax1.plot(ep, [h["train_loss"] for h in history], "o-", color="C0", label="train loss")
        ax1.plot(ep, [h["val_loss"] for h in history], "o-", color="C1", label="validation loss")
        ax2.plot(ep, [100 * h["train_acc"] for h in history], "o-", color="C0", label="train (epoch)")
        ax2.plot(ep, [100 * h["val_acc"] for h in history], "o-", color="C1", label="validation (epoch)")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("loss")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("accuracy (%)")
    ax2.set_ylim(0, 100)
    ax2.set_yticks(range(0, 101, 20))
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        if ax.has_data():
            ax.legend(fontsize=8)
        else:
            ax.set_xlim(0, 1)
            ax.text(
                0.5,
                0.5 if ax is ax1 else 50,
                "waiting for the first steps"
                if ax is ax1
                else "the first validation point comes\na few seconds into the run",
                ha="center",
                va="center",
                color="#888888",
                fontsize=9,
            )
    fig.tight_layout()
    return fig
