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
from matplotlib.ticker import MaxNLocator

from vitviz.pictures.draw import as_array
from vitviz.pictures.style import current


def figure_to_array(fig: Figure) -> np.ndarray:
    """The figure as an (H, W, 3) picture, its text enlarged first where the style asks (Large type)."""
    scale = current().text
    if scale != 1.0:
        _enlarge_text(fig, scale)
        if fig.get_layout_engine() is None:  # a constrained layout lays the larger text out itself when drawn
            fig.tight_layout()
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()


def _enlarge_text(fig: Figure, scale: float) -> None:
    """Every text of the figure (titles, axis labels, tick labels, legends, notes) `scale` times larger."""
    for text in fig.findobj(matplotlib.text.Text):
        text.set_fontsize(text.get_fontsize() * scale)
    for ax in fig.axes:  # ticks are made anew when drawn: their size is the axis's
        ticks = ax.xaxis.get_ticklabels() + ax.yaxis.get_ticklabels()
        size = ticks[0].get_fontsize() if ticks else 10 * scale
        ax.tick_params(labelsize=size)


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
    history: list[dict],
    steps: list[tuple[float, float]] | None = None,
    quick: list[dict] | None = None,
    stopped: bool = False,
) -> Figure:
    """Loss and accuracy against epochs: per-step training loss (if given), quick validations on a small
    held-out sample (if given), and the figures of each epoch that ended: its training loss and accuracy, the
    mean of its own steps, drawn at its middle (where the step curve they average runs), and its validation at
    its end. A last, unfinished epoch gets only its validation, as a star: where the visitor stopped
    (`stopped`), or where the run ended (its time budget). Epochs run from 0, a handful of ticks however short
    the run so far; accuracy in percent, 0 to 100. On a narrow screen (vitviz.pictures.style) the two plots
    stand one above the other."""
    narrow = current().narrow
    fig = Figure(figsize=(4.0, 5.4) if narrow else (8, 3.2), dpi=100)
    ax1, ax2 = fig.subplots(2, 1) if narrow else fig.subplots(1, 2)
    if steps:
        e, l_ = zip(*steps)
        ax1.plot(e, l_, color="#bbbbbb", lw=1, label="train loss (each step)")
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
    ended = [h for h in history if h["epoch"] >= 1 and abs(h["epoch"] - round(h["epoch"])) < 1e-3]
    if ended:
        ep = [h["epoch"] for h in ended]
        mid = [e - 0.5 for e in ep]
        ax1.plot(mid, [h["train_loss"] for h in ended], "o-", color="C0", label="train loss (epoch mean)")
        ax1.plot(ep, [h["val_loss"] for h in ended], "o-", color="C1", label="validation loss (epoch end)")
        ax2.plot(mid, [100 * h["train_acc"] for h in ended], "o-", color="C0", label="train (epoch mean)")
        ax2.plot(ep, [100 * h["val_acc"] for h in ended], "o-", color="C1", label="validation (epoch end)")
    last = history[-1] if history and history[-1] not in ended else None
    if last is not None:
        said = "validation where you stopped" if stopped else "validation at the run's end"
        ax1.plot([last["epoch"]], [last["val_loss"]], "*", ms=11, color="C1", label=said)
        ax2.plot([last["epoch"]], [100 * last["val_acc"]], "*", ms=11, color="C1", label=said)
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("loss")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("accuracy (%)")
    ax2.set_ylim(0, 100)
    ax2.set_yticks(range(0, 101, 20))
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        if ax.has_data():
            ax.set_xlim(
                0, max(1.05 * ax.dataLim.intervalx[1], 0.05)
            )  # one point: still an axis from 0, not 0.0275-0.03
            ax.xaxis.set_major_locator(MaxNLocator(5))
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


def score_bars(
    classes: tuple[str, ...], scores: torch.Tensor, probs: torch.Tensor, score_label: str, prob_label: str
) -> np.ndarray:
    """The 10 most probable classes: their raw scores (left, grey) and probabilities in % (right, orange), side by
    side on one row per class."""
    k = min(10, len(classes))
    idx = probs.topk(k).indices.tolist()[::-1]
    fig = Figure(figsize=(7.2, 0.32 * k + 1.1), dpi=100)
    a1, a2 = fig.subplots(1, 2, sharey=True)
    names = [classes[i][:18] for i in idx]
    a1.barh(names, [float(scores[i]) for i in idx], color="#6b7280")
    a1.set_xlabel(score_label)
    a2.barh(names, [100 * float(probs[i]) for i in idx], color="#f97316")
    a2.set_xlabel(prob_label)
    a2.set_xlim(0, 100)
    for ax in (a1, a2):
        ax.grid(alpha=0.3, axis="x")
        ax.tick_params(labelsize=10)
    fig.tight_layout()
    return figure_to_array(fig)
