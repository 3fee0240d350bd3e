"""From a model and an image to every picture a page shows: interpret, then render.

The app's handlers call these; so do the tests and benchmarks. No Gradio here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import interpret as I
from . import render as R
from .data import pixels_to_tensor, to_pixels


@dataclass
class Explanation:
    pixels: np.ndarray  # (H, W, C) uint8: what the model sees
    probs: torch.Tensor  # (C,)
    target: int  # the class gradient rollout explains
    attn: torch.Tensor  # (L, H, N, N)
    grad_rollout: torch.Tensor  # (P,)


def image_to_pixels(model, image) -> np.ndarray:
    cfg = model.config
    return to_pixels(image, cfg.image_size, cfg.in_chans, invert_light=getattr(model, "dataset", None) == "mnist")


def parse_target(model, target) -> int | None:
    """None for the predicted class; a class index from an index, a name or 'predicted'."""
    if target is None or target == "" or (isinstance(target, str) and target.lower().startswith("predicted")):
        return None
    if isinstance(target, (int, np.integer)) or (isinstance(target, str) and target.strip().lstrip("-").isdigit()
                                                  and target.strip() not in model.classes):
        t = int(target)
    elif target in model.classes:
        t = model.classes.index(target)
    else:
        raise ValueError(f"unknown class {target!r}")
    if not 0 <= t < len(model.classes):
        raise ValueError(f"class index must be in 0..{len(model.classes) - 1}")
    return t


def explain_image(model, pixels: np.ndarray, target=None) -> Explanation:
    x = pixels_to_tensor(pixels, model.mean, model.std).to(next(model.parameters()).device)
    ex = I.explain(model, x, target=parse_target(model, target))
    return Explanation(pixels, ex["logits"][0].softmax(-1).cpu(), int(ex["target"][0]), ex["attn"][0].cpu(),
                       ex["grad_rollout"][0].cpu())


def top_k(model, probs: torch.Tensor, k: int = 5) -> dict[str, float]:
    p, i = probs.topk(min(k, len(probs)))
    return {model.classes[j]: float(v) for v, j in zip(p.tolist(), i.tolist())}


def display_size(cfg) -> int:
    """Side in pixels of the enlarged input: at least 256 and 32 pixels a patch, whole multiples only."""
    return cfg.image_size * max(1, round(max(256, 32 * cfg.grid_size) / cfg.image_size))


def click_to_patch(x: float, y: float, shown_size: int, grid: int) -> int:
    step = shown_size / grid
    r = min(grid - 1, max(0, int(y // step)))
    c = min(grid - 1, max(0, int(x // step)))
    return r * grid + c


def pos_tile_size(grid: int) -> int:
    """Side of one positional-similarity tile on the Model tab."""
    return max(16, min(40, 400 // grid))


def _norm_each(maps: torch.Tensor) -> torch.Tensor:
    """(..., g, g) maps, each scaled to [0, 1] on its own."""
    flat = maps.float().flatten(-2)
    lo, hi = flat.amin(-1, keepdim=True), flat.amax(-1, keepdim=True)
    return ((flat - lo) / (hi - lo).clamp_min(1e-12) * (hi > lo)).view(maps.shape)


def _norm(m: torch.Tensor) -> torch.Tensor:
    """Scale a map to [0, 1] for display."""
    m = m.float()
    lo, hi = m.min(), m.max()
    return (m - lo) / (hi - lo) if hi > lo else torch.zeros_like(m)


def render_explore(model, ex: Explanation, head_fusion: str = "mean", discard_ratio: float = 0.0,
                   layer: int | None = None, head: int | None = None, patch: int | None = None,
                   alpha: float = 0.6, smooth: bool = True, compact: bool = False) -> dict:
    """Every picture of the Explore view. `layer` and `head` are 1-based; `patch` 0-based or None.
    `compact`: only the rollout, gradient rollout and rollout-by-layer pictures (the Compare view)."""
    cfg = model.config
    g = cfg.grid_size
    L, H = ex.attn.shape[:2]
    layer = L if layer is None else min(max(1, int(layer)), L)
    head = 1 if head is None else min(max(1, int(head)), H)
    if patch is not None and not 0 <= patch < g * g:
        patch = None
    mode = "bilinear" if smooth else "nearest"
    S = display_size(cfg)
    small = max(48, min(96, 576 // max(L, H)))
    attn = ex.attn[None]  # (1, L, H, N, N)
    roll = I.attention_rollout(attn, head_fusion, discard_ratio, all_layers=True)[0]  # (L, N, N)
    out = {
        "rollout": R.overlay(ex.pixels, _norm(roll[-1, 0, 1:]).view(g, g), S, alpha=alpha, mode=mode),
        "grad_rollout": R.overlay(ex.pixels, _norm(ex.grad_rollout).view(g, g), S, alpha=alpha, mode=mode),
        "rollout_strip": R.layer_strip(ex.pixels, _norm_each(roll[:, 0, 1:].reshape(L, g, g)),
                                       tile_size=small + 16, alpha=alpha, mode=mode),
    }
    if compact:
        return out
    cls_maps = ex.attn[:, :, 0, 1:].reshape(L, H, g, g)
    out = {
        "sees": np.asarray(R.draw_grid(R.enlarge(ex.pixels, S), g, numbers=True, highlight=patch)),
        **out,
        "heads": R.layer_head_grid(ex.pixels, _norm_each(cls_maps),
                                   tile_size=small, alpha=0.75),
        "head_large": R.overlay(ex.pixels, _norm(cls_maps[layer - 1, head - 1]), S, alpha=0.75, mode="nearest"),
        "patch_heads": None,
        "patch_rollout": None,
    }
    if patch is not None:
        pm = ex.attn[:, :, 1 + patch, 1:].reshape(L, H, g, g)
        grid_img = R.layer_head_grid(ex.pixels, _norm_each(pm),
                                     tile_size=small, alpha=0.75)
        out["patch_heads"] = grid_img
        pr = roll[-1, 1 + patch, 1:].clone()
        others = torch.cat([pr[:patch], pr[patch + 1:]])
        pr[patch] = others.max() if len(others) else pr[patch]  # its own weight would drown the rest
        pr = _norm(pr).view(g, g)
        out["patch_rollout"] = np.asarray(R.draw_grid(R.overlay(ex.pixels, pr, S, alpha=alpha, mode=mode), g,
                                                      numbers=False, highlight=patch, color=(90, 90, 90)))
        out["head_large"] = np.asarray(R.draw_grid(
            R.overlay(ex.pixels, _norm(pm[layer - 1, head - 1]), S, alpha=0.75, mode="nearest"), g,
            numbers=False, highlight=patch, color=(90, 90, 90)))
    return out


def explore_summary(model, ex: Explanation, layer: int, head: int, patch: int | None) -> str:
    cls = model.classes
    p = ex.probs
    pred = int(p.argmax())
    lines = [f"**Prediction:** {cls[pred]} ({100 * float(p[pred]):.1f}%). "
             f"**Gradient rollout explains:** {cls[ex.target]}."]
    src = "the CLS token" if patch is None else f"patch {patch}"
    lines.append(f"**Large view:** attention from {src}, layer {layer}, head {head}.")
    return "  \n".join(lines)


# ---------------------------------------------------------------- Model tab


def distance_over_batch(model, images: list[np.ndarray], batch_size: int = 50) -> torch.Tensor:
    """Mean attention distance (L, H) over a batch of input pixel arrays."""
    device = next(model.parameters()).device
    total, n = None, 0
    for i in range(0, len(images), batch_size):
        x = torch.cat([pixels_to_tensor(p, model.mean, model.std) for p in images[i:i + batch_size]]).to(device)
        d = I.mean_attention_distance(I.attention_maps(model, x), model.config.patch_size) * len(x)
        total = d if total is None else total + d
        n += len(x)
    return total / max(1, n)


def render_model(model, images: list[np.ndarray], position: int | None = None) -> dict:
    sim = I.pos_embed_similarity(model)
    comps, var = I.patch_embed_components(model, 16)
    dist = distance_over_batch(model, images)
    g = model.config.grid_size
    pos = (g * g) // 2 + g // 2 if position is None else position
    N = 1 + model.config.num_patches
    uniform = float(I.mean_attention_distance(torch.full((1, 1, 1, N, N), 1.0 / N), model.config.patch_size))
    fig = R.distance_figure(dist, f"Mean attention distance over {len(images)} images", uniform)
    return {
        "pos_tiles": R.pos_similarity_tiles(sim, tile_size=pos_tile_size(g), highlight=pos),
        "pos_large": R.similarity_map(sim, pos, display_size(model.config)),
        "distance": R.figure_to_array(fig),
        "components": R.components_image(comps),
        "variance": var,
        "card": model_card(model),
        "sim": sim,
    }


DATASET_NAMES = {"cifar10": "CIFAR-10", "mnist": "MNIST"}


def model_card(model) -> str:
    cfg = model.config
    meta = getattr(model, "meta", {}) or {}
    params = sum(p.numel() for p in model.parameters())
    rows = [
        f"### {meta.get('name') or DATASET_NAMES.get(getattr(model, 'dataset', None), 'Custom') + ' ViT'}",
        f"- **Input:** {cfg.image_size}x{cfg.image_size}, {cfg.in_chans} channel(s); "
        f"patch {cfg.patch_size} -> a {cfg.grid_size}x{cfg.grid_size} grid, {cfg.num_patches} patches + CLS",
        f"- **Transformer:** depth {cfg.depth}, {cfg.num_heads} heads, width {cfg.embed_dim}, "
        f"MLP {int(cfg.embed_dim * cfg.mlp_ratio)}; {params:,} parameters",
        f"- **Classes ({cfg.num_classes}):** " + ", ".join(model.classes[:12]) + (" ..." if cfg.num_classes > 12 else ""),
    ]
    m = meta.get("metrics") or {}
    acc = []
    for key, name in (("val_acc", "validation"), ("test_acc", "test"), ("imagenet_top1", "ImageNet top-1")):
        if isinstance(m.get(key), (int, float)) and not math.isnan(m[key]):
            acc.append(f"{name} {100 * m[key]:.2f}%")
    if acc:
        rows.append("- **Accuracy:** " + ", ".join(acc))
    t = meta.get("train") or {}
    if t:
        epochs = m.get("epoch", t.get("epochs"))
        epochs = f"{epochs:g}" if isinstance(epochs, (int, float)) else "?"
        averaged = [s.get("epoch") for s in m.get("averaged_from") or [] if isinstance(s, dict)]
        rows.append(f"- **Training:** {t.get('dataset')}, {epochs} epochs, batch {t.get('batch_size')}, "
                    f"AdamW lr {t.get('lr')}, weight decay {t.get('weight_decay')}, label smoothing "
                    f"{t.get('label_smoothing')}, augmentation {'on' if t.get('augment') else 'off'}"
                    + (f", CutMix/Mixup {t['mix']}" if t.get("mix") else "")
                    + (f", random erasing {t['erase']}" if t.get("erase") else "")
                    + (f"; {m['train_seconds'] / 60:.0f} min of training" if m.get("train_seconds") else "")
                    + (f"; the weights averaged over epochs {min(averaged):g}-{max(averaged):g}"
                       if averaged and all(isinstance(e, (int, float)) for e in averaged) else ""))
    return "\n".join(rows)


# ---------------------------------------------------------------- export


def export_view(pictures: dict[str, np.ndarray | None], attn: torch.Tensor, folder: str | Path) -> tuple[Path, Path]:
    """Write every picture of a view as PNGs in one zip, and the raw attention (L, H, N, N) as .npy."""
    import io
    import zipfile

    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    zpath, npath = folder / "vitviz-view.zip", folder / "vitviz-attention.npy"
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_STORED) as z:
        for name, pic in pictures.items():
            if pic is None:
                continue
            buf = io.BytesIO()
            Image.fromarray(np.asarray(pic, dtype=np.uint8)).save(buf, format="PNG")
            z.writestr(f"{name}.png", buf.getvalue())
    np.save(npath, attn.float().cpu().numpy())
    return zpath, npath
