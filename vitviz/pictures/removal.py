"""Take patches away: does the model need what a map points at? (The "Take patches away" tab.)

`study` runs, once per image and model, every map of vitviz.explain.methods for the class the
model predicts, and each map's deletion curve (plus a random order's). `render_removal`
then draws, for the patches the visitor has hidden (clicked, or the top k of a map):
the input with those patches in the data set's mean colour, the prediction without
them, the deletion curves with the visitor's own point on them, and every map with
its area under the curve. No Gradio here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vitviz.models.card import ModelCard
    from vitviz.models.loaded import LoadedViT
    from vitviz.models.vit import ViTConfig

from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure
from PIL import ImageDraw

from vitviz.explain import methods
from vitviz.models.loaded import eval_mode
from vitviz.pictures import draw, figures
from vitviz.pictures.explanation import top_k
from vitviz.pictures.explore import scale_tiles
from vitviz.pictures.input_view import main_size
from vitviz.pictures.panels import Scale, message_panel, panel
from vitviz.pictures.style import current

STEPS = 16  # points of a deletion curve past the first


def study_passes(cfg: ViTConfig) -> int:
    """The forward passes `study` runs: every map's (occlusion's one a patch, and the whole image) and every
    curve (STEPS + 1 each, the random order's too)."""
    maps = sum(m.passes(cfg.num_patches) for m in methods.METHODS.values() if m.per_patch)
    return maps + (len(methods.METHODS) + 1) * (STEPS + 1)


def study_gflop(cfg: ViTConfig) -> float:
    return methods.forward_gflop(cfg) * study_passes(cfg)


@dataclass
class Study:
    """One image through one model, with every map and its deletion curve, for the predicted class."""

    pixels: np.ndarray
    x: torch.Tensor  # (1, C, H, W) normalised
    target: int
    prob: float  # the class's probability on the whole image
    maps: dict  # method -> (P,) values (the random order included)
    curves: dict  # method -> (STEPS + 1,) probability as patches go, most relevant first
    auc: dict  # method -> area under that curve


def study(model: LoadedViT, pixels: np.ndarray, seed: int = 0, costly: bool = True) -> Study:
    """Every map and curve for the predicted class; without `costly`, no occlusion and no curves (a model too
    large for the machine's budget: vitviz.app.serving.limits)."""
    card = model.card
    x = model.tensor(pixels)
    with eval_mode(model), torch.no_grad():
        probs = model.probabilities(model(x).float())[0]
    t = int(probs.argmax())
    target = torch.tensor([t], device=x.device)
    cheap = {name for name, m in methods.METHODS.items() if not m.per_patch}
    maps = {name: methods.relevance(model, x, name, t) for name in methods.METHODS if costly or name in cheap}
    maps[methods.RANDOM] = methods.random_relevance(1, card.config.num_patches, seed)
    curves = {name: methods.curves(model, x, m, target, STEPS)[0].cpu() for name, m in maps.items()} if costly else {}
    return Study(
        pixels,
        x,
        t,
        float(probs[t]),
        {k: v[0].cpu() for k, v in maps.items()},
        curves,
        {k: float(methods.auc(c[None])[0]) for k, c in curves.items()},
    )


def top_patches(s: Study, method: str, k: int) -> set[int]:
    """The k patches `method` ranks most relevant."""
    r = methods.ranks(s.maps[method][None])[0]
    return {int(p) for p in torch.nonzero(r < k).flatten()}


@dataclass
class RemovalView:
    picture: np.ndarray  # the input, hidden patches in the mean colour, on its numbered grid
    top5: dict[str, float]  # the prediction without them
    curves: np.ndarray  # the deletion curves, the visitor's point on them
    maps: np.ndarray  # every map, each titled with its area under the curve
    summary: str
    hidden: frozenset = frozenset()  # the patches hidden


def render_removal(model: LoadedViT, s: Study, hidden: set[int], why_not: str = "") -> RemovalView:
    """The view for the `hidden` patches; `why_not`: the sentence shown instead of the curves (not studied)."""
    card = model.card
    cfg = card.config
    mask = torch.zeros(1, cfg.num_patches, dtype=torch.bool)
    mask[0, sorted(hidden)] = True
    with eval_mode(model), torch.no_grad():
        probs = model.probabilities(model(methods.hide(model, s.x, mask.to(s.x.device))).float())[0].cpu()
    now = float(probs[s.target])
    cls = card.classes[s.target]
    summary = (
        f"**{len(hidden)} of {cfg.num_patches} patches hidden.** '{cls}' (the prediction on the whole "
        f"image): {100 * s.prob:.1f}% with every patch, **{100 * now:.1f}%** without these. The model now "
        f"says **{card.classes[int(probs.argmax())]}** ({100 * float(probs.max()):.1f}%)."
    )
    return RemovalView(
        hidden_picture(s.pixels, card, hidden),
        top_k(model, probs),
        curves_picture(s, cls, len(hidden) / cfg.num_patches, now)
        if s.curves
        else message_panel(main_size(cfg), "Deletion curves", why_not),
        maps_picture(s, cfg),
        summary,
        frozenset(hidden),
    )


def hidden_picture(pixels: np.ndarray, card: ModelCard, hidden: set[int]) -> np.ndarray:
    """The input enlarged with its numbered grid, the hidden patches filled with the data set's mean colour
    (what the model gets there), crossed by a diagonal so they read as taken away."""
    cfg = card.config
    S, g = main_size(cfg), cfg.grid_size
    mean = [round(255 * m) for m in card.mean]
    fill = tuple(mean * 3 if len(mean) == 1 else mean)
    im = draw.draw_grid(draw.enlarge(pixels, S), g, numbers=S / g >= 24).convert("RGB")
    d = ImageDraw.Draw(im)
    step = S / g
    for p in hidden:
        r, c = divmod(p, g)
        box = [c * step, r * step, (c + 1) * step - 1, (r + 1) * step - 1]
        d.rectangle(box, fill=fill, outline=(230, 230, 230))
        d.line([box[0], box[3], box[2], box[1]], fill=(230, 230, 230), width=1)
    return np.asarray(im)


def curves_picture(s: Study, cls: str, fraction: float, now: float) -> np.ndarray:
    return figures.figure_to_array(curves_figure(s, cls, fraction, now))


def curves_figure(s: Study, cls: str, fraction: float, now: float) -> Figure:
    """The deletion curves, the visitor's patches a point on them; the legend under the axes, inside the figure
    at any text size (one column, and a taller figure, in Large type)."""
    large = current().text > 1
    fig = Figure(figsize=(5.6, 6.4 if large else 4.8), dpi=100, layout="constrained")
    ax = fig.subplots()
    xs = np.linspace(0, 1, STEPS + 1)
    colour = {name: f"C{i}" for i, name in enumerate(methods.METHODS)}  # a method keeps its colour from image to image
    for name, c in sorted(s.curves.items(), key=lambda kv: s.auc[kv[0]]):  # the legend from best to worst
        style = dict(color="#999999", ls="--") if name == methods.RANDOM else dict(color=colour[name])
        ax.plot(xs, 100 * c.numpy(), lw=1.8, label=f"{name}: area {s.auc[name]:.3f}", **style)
    ax.plot([fraction], [100 * now], "o", ms=9, mfc="none", mec="black", mew=2, label="your patches")
    ax.set_xlabel("fraction of patches hidden, most relevant first")
    ax.set_ylabel(f"probability of '{cls}' (%)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    fig.legend(
        fontsize=8,
        title="lower area: the map found what matters",
        title_fontsize=8,
        loc="outside lower center",
        ncol=1 if large else 2,
    )
    ax.set_title(f"Deletion curves for '{cls}' on this image", fontsize=10)
    return fig


def maps_picture(s: Study, cfg: ViTConfig) -> np.ndarray:
    """Every method's map over the image (each its own range), its area under the deletion curve above it."""
    g = cfg.grid_size
    names = [n for n in methods.METHODS if n in s.maps]
    scaled, _ = scale_tiles(torch.stack([s.maps[n] for n in names]).view(len(names), g, g), shared=False)
    tiles = draw.overlays(s.pixels, scaled.numpy(), 190, "inferno", 0.6, "nearest")
    if not s.auc:
        return panel(
            draw.tile([list(tiles)], col_labels=names),
            "Every map for this image",
            Scale("each map's own values", 0.0, 1.0, "each tile its own range", relative=True),
        )
    strip = draw.tile([list(tiles)], col_labels=[f"{n}: {s.auc[n]:.3f}" for n in names])
    return panel(
        strip,
        f"Every map for this image; above each, the area under its deletion curve, lower is better (random order: "
        f"{s.auc[methods.RANDOM]:.3f})",
        Scale("each map's own values", 0.0, 1.0, "each tile its own range", relative=True),
    )
