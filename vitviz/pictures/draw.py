"""Arrays in, pictures out; never calls the model.

Maps are drawn with matplotlib colormaps applied as lookup tables (fast enough
for an interactive page); plots are built on matplotlib.figure.Figure, never on
pyplot's global state. Pictures are uint8 numpy arrays (H, W, 3) or PIL images.
"""

from __future__ import annotations

import functools
import math

import matplotlib
import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw

from vitviz.pictures.style import current, px
from vitviz.pictures.text import font, text_width

BG = (255, 255, 255)
HIGHLIGHT = (0, 230, 255)


class Marked(np.ndarray):
    """A picture that says where its words are, for a phone that scrolls it sideways (vitviz.app.scrolled keeps
    them in view): `left`, the width of its rows' labels (tile, lens_grid); `frozen` (panels.panel's, on a narrow
    screen), (left, top, bottom): that label column, the title above `top` and the colour bar below `bottom`."""

    left: int = 0
    frozen: tuple[int, int, int] | None = None


def marked(picture: np.ndarray, **marks) -> np.ndarray:
    """`picture` as a `Marked` view carrying `marks` (left=..., frozen=...)."""
    out = np.asarray(picture).view(Marked)
    for name, value in marks.items():
        setattr(out, name, value)
    return out


def as_array(a: float) -> np.ndarray:
    return a.detach().cpu().float().numpy() if torch.is_tensor(a) else np.asarray(a, dtype=np.float32)


def colorize(
    m: torch.Tensor, cmap: str = "inferno", vmin: float | None = None, vmax: float | None = None
) -> np.ndarray:
    """A 2-D map -> uint8 RGB through a matplotlib colormap; the range defaults to the map's own."""
    a = as_array(m)
    lo = float(np.nanmin(a)) if vmin is None else vmin
    hi = float(np.nanmax(a)) if vmax is None else vmax
    t = np.subtract(a, lo, dtype=np.float32)
    t *= np.float32(255 / (hi - lo if hi > lo else 1.0))
    np.clip(t, 0, 255, out=t)
    np.nan_to_num(t, copy=False)
    return np.take(colour_table(cmap), t.astype(np.uint8), axis=0)  # a third of fancy indexing's time


@functools.lru_cache(maxsize=16)
def colour_table(cmap: str) -> np.ndarray:
    """256 RGB colours of a matplotlib colormap."""
    return (matplotlib.colormaps[cmap](np.linspace(0, 1, 256))[:, :3] * 255).astype(np.uint8)


def upsample(m: torch.Tensor, size: int, mode: str = "bilinear") -> np.ndarray:
    """(h, w) -> (size, size), nearest (honest patches) or bilinear (smooth)."""
    if mode not in ("nearest", "bilinear"):
        raise ValueError("mode must be nearest or bilinear")
    t = torch.as_tensor(as_array(m))[None, None]
    kw = {"align_corners": False} if mode == "bilinear" else {}
    return F.interpolate(t, size=(size, size), mode=mode, **kw)[0, 0].numpy()


def to_rgb(pixels: np.ndarray) -> np.ndarray:
    p = np.asarray(pixels)
    if p.ndim == 2:
        p = p[:, :, None]
    return np.repeat(p, 3, axis=2) if p.shape[2] == 1 else p[:, :, :3]


def enlarge(pixels: np.ndarray, size: int = 256) -> np.ndarray:
    """The model's input (h, w, C) uint8, enlarged with nearest neighbours to (size, size, 3)."""
    p = to_rgb(pixels)
    return np.asarray(Image.fromarray(p).resize((size, size), Image.NEAREST))


def _heat(maps: np.ndarray, size: int, cmap: str, vmin: float, vmax: float, mode: str) -> np.ndarray:
    """(K, g, g) maps coloured at (K, size, size, 3). Nearest and a whole number of pixels a cell: coloured
    first, then repeated (the same picture as upsampling first, a fraction of the work)."""
    g = maps.shape[-1]
    if mode == "nearest" and size % g == 0:
        return np.repeat(np.repeat(colorize(maps, cmap, vmin, vmax), size // g, 1), size // g, 2)
    if mode not in ("nearest", "bilinear"):
        raise ValueError("mode must be nearest or bilinear")
    t = torch.as_tensor(maps)[:, None]
    kw = {"align_corners": False} if mode == "bilinear" else {}
    return colorize(F.interpolate(t, size=(size, size), mode=mode, **kw)[:, 0].numpy(), cmap, vmin, vmax)


def _blend(base: np.ndarray, col: np.ndarray, alpha: float) -> np.ndarray:
    a = int(round(256 * min(1.0, max(0.0, alpha))))
    return ((base.astype(np.uint16) * (256 - a) + col.astype(np.uint16) * a) >> 8).astype(np.uint8)


def overlay(
    pixels: np.ndarray,
    heat: torch.Tensor | np.ndarray,
    size: int = 256,
    cmap: str = "inferno",
    alpha: float = 0.6,
    mode: str = "bilinear",
    vmin: float | None = None,
    vmax: float | None = None,
) -> np.ndarray:
    """A (g, g) map drawn over the enlarged image with the given alpha; colours span [vmin, vmax] (default:
    the map's own range)."""
    h = as_array(heat)
    lo = float(np.nanmin(h)) if vmin is None else vmin
    hi = float(np.nanmax(h)) if vmax is None else vmax
    return _blend(enlarge(pixels, size), _heat(h[None], size, cmap, lo, hi, mode)[0], alpha)


def overlays(
    pixels: np.ndarray,
    maps: torch.Tensor,
    size: int,
    cmap: str = "inferno",
    alpha: float = 0.6,
    mode: str = "nearest",
    vmin: float = 0.0,
    vmax: float = 1.0,
) -> np.ndarray:
    """(K, g, g) maps, each over the enlarged image on one scale [vmin, vmax]: (K, size, size, 3), in one pass."""
    return _blend(enlarge(pixels, size)[None], _heat(as_array(maps), size, cmap, vmin, vmax, mode), alpha)


def draw_grid(
    img: np.ndarray | Image.Image,
    grid: int,
    numbers: bool = True,
    highlight: int | None = None,
    color: tuple[int, int, int] = (255, 255, 255),
) -> Image.Image:
    """Patch grid lines over a square picture, each patch numbered (row-major, from 0), one highlighted."""
    im = (img if isinstance(img, Image.Image) else Image.fromarray(np.asarray(img))).convert("RGBA")
    S = im.width
    size = number_size(S / grid, str(grid * grid - 1)) if numbers and current().numbers else None
    im = Image.alpha_composite(im, _grid_layer(S, grid, size, color)).convert("RGB")
    if highlight is not None and 0 <= highlight < grid * grid:
        step = S / grid
        r, c = divmod(highlight, grid)
        ImageDraw.Draw(im).rectangle(
            [c * step, r * step, (c + 1) * step - 1, (r + 1) * step - 1], outline=HIGHLIGHT, width=3
        )
    return im


def number_size(step: float, widest: str) -> int | None:
    """The font size for patch numbers on patches `step` pixels wide: as large as the style asks, but small
    enough that the widest number (outlined) covers at most a corner of its patch: half its width and height,
    three quarters with Large type (read from a back row, the numbers matter more than the pixels they cover;
    they can be switched off); None where even the smallest readable size would not fit."""
    large = current().text > 1
    return _number_size(step, widest, px(10), 0.75 if large else 0.5)


@functools.lru_cache(maxsize=64)
def _number_size(step: float, widest: str, want: int, share: float) -> int | None:
    room = step * share
    for size in range(want, 6, -1):
        if font(size).getlength(widest) + 3 <= room and size + 3 <= room:
            return size
    return None


@functools.lru_cache(maxsize=32)
def _grid_layer(S: int, grid: int, size: int | None, color: tuple) -> Image.Image:
    """The lines and numbers (at `size`; None: no numbers) of a patch grid on a transparent layer, drawn once."""
    layer = Image.new("RGBA", (S, S), (0, 0, 0, 0))
    d = ImageDraw.Draw(layer)
    step = S / grid
    for i in range(1, grid):
        x = round(i * step)
        d.line([(x, 0), (x, S)], fill=(*color, 255), width=1)
        d.line([(0, x), (S, x)], fill=(*color, 255), width=1)
    if size:
        f = font(size)
        for k in range(grid * grid):
            r, c = divmod(k, grid)
            d.text(
                (c * step + 2, r * step + 1),
                str(k),
                fill=(255, 255, 255, 255),
                font=f,
                stroke_width=1,
                stroke_fill=(0, 0, 0, 255),
            )
    return layer


def tile(
    images: list[list[np.ndarray]],
    row_labels: tuple | list = None,
    col_labels: tuple | list = None,
    pad: int = 3,
    label_size: int = 14,
    col_colors: tuple | list = None,
) -> np.ndarray:
    """A rows x cols grid of equally sized RGB tiles with optional labels on the left and on top
    (`col_colors`: one RGB colour per top label)."""
    rows, cols = len(images), max(len(r) for r in images)
    h, w = images[0][0].shape[:2]
    label_size = px(label_size)
    frame = _tile_frame(
        rows,
        cols,
        h,
        w,
        pad,
        tuple(row_labels or ()),
        tuple(col_labels or ()),
        label_size,
        tuple(map(tuple, col_colors)) if col_colors else None,
    )
    canvas = frame.copy()
    left, top = tile_margins(tuple(row_labels or ()), bool(col_labels), label_size)
    for r, row in enumerate(images):
        for c, t in enumerate(row):
            y, x = top + pad + r * (h + pad), left + pad + c * (w + pad)
            canvas[y : y + h, x : x + w] = to_rgb(t)
    return marked(canvas, left=left) if left else canvas


def tile_margins(row_labels: tuple, has_cols: bool, size: int | None = None) -> tuple[int, int]:
    """(left, top): where `tile` puts its first tile, after the row and column labels (at `size`; None: as
    `tile` draws them by default)."""
    size = px(14) if size is None else size
    left = 8 + int(max(text_width(lab, size) for lab in row_labels)) if row_labels else 0
    return left, (size + 7 if has_cols else 0)


@functools.lru_cache(maxsize=64)
def _tile_frame(rows, cols, h, w, pad, row_labels, col_labels, size, col_colors) -> np.ndarray:
    """The white canvas of `tile` with its labels drawn, made once per layout."""
    left, top = tile_margins(row_labels, bool(col_labels), size)
    canvas = Image.new("RGB", (left + cols * (w + pad) + pad, top + rows * (h + pad) + pad), BG)
    d = ImageDraw.Draw(canvas)
    f = font(size)
    for r, lab in enumerate(row_labels):
        d.text((4, top + pad + r * (h + pad) + (h - size) // 2), lab, fill=(40, 40, 40), font=f)
    for c, lab in enumerate(col_labels):
        lab = lab if f.getlength(lab) <= w + pad else lab.split()[-1]  # "head 12" over a narrow tile: "12"
        x = left + pad + c * (w + pad) + max(0, (w - f.getlength(lab)) / 2)
        d.text((x, 2), lab, fill=col_colors[c] if col_colors else (40, 40, 40), font=f)
    return np.asarray(canvas)


def layer_head_grid(
    pixels: np.ndarray,
    maps: torch.Tensor,
    tile_size: int = 72,
    cmap: str = "inferno",
    alpha: float = 0.7,
    mode: str = "nearest",
    row_labels: list[str] | None = None,
) -> np.ndarray:
    """(L, H, g, g) per-head maps, each scaled to [0, 1], over the image: one row per layer (or per
    `row_labels`), one column per head."""
    m = as_array(maps)
    L, H = m.shape[:2]
    tiles = overlays(pixels, m.reshape(L * H, *m.shape[2:]), tile_size, cmap, alpha, mode)
    rows = [[tiles[i * H + j] for j in range(H)] for i in range(L)]
    return tile(rows, row_labels or [f"layer {i + 1}" for i in range(L)], [f"head {j + 1}" for j in range(H)])


def lens_grid(
    probs: torch.Tensor,
    row_labels: list[str],
    col_labels: list[str],
    cell: tuple[int, int] = (84, 26),
    cmap: str = "viridis",
) -> np.ndarray:
    """(rows, cols) probabilities in [0, 1] as coloured cells on one 0..1 scale, labelled, each row's largest
    written in its cell (the logit lens: a row a block, a column a class)."""
    p = as_array(probs)
    w, h = cell
    size = px(13)
    f = font(size)
    w, h = max(w, round(w * current().text)), max(h, size + 8)
    cells = np.repeat(np.repeat(colorize(p, cmap, 0.0, 1.0), h, 0), w, 1)
    left = 8 + int(max(f.getlength(lab) for lab in row_labels))
    top = size + 7
    canvas = Image.new("RGB", (left + cells.shape[1] + 2, top + cells.shape[0] + 2), BG)
    canvas.paste(Image.fromarray(cells), (left, top))
    d = ImageDraw.Draw(canvas)
    for c, lab in enumerate(col_labels):
        lab = lab if f.getlength(lab) <= w - 4 else lab[: max(1, int(len(lab) * (w - 8) / f.getlength(lab)))] + "."
        d.text((left + c * w + (w - f.getlength(lab)) / 2, 2), lab, fill=(40, 40, 40), font=f)
    for r, lab in enumerate(row_labels):
        d.text((4, top + r * h + (h - size) / 2), lab, fill=(40, 40, 40), font=f)
        c = int(np.argmax(p[r]))
        text = f"{100 * p[r, c]:.0f}%"
        d.text(
            (left + c * w + (w - f.getlength(text)) / 2, top + r * h + (h - size) / 2),
            text,
            fill=(0, 0, 0) if p[r, c] > 0.6 else (255, 255, 255),
            font=f,
        )
    return marked(np.asarray(canvas), left=left)


def layer_strip(
    pixels: np.ndarray,
    maps: torch.Tensor,
    tile_size: int = 96,
    cmap: str = "inferno",
    alpha: float = 0.6,
    mode: str = "bilinear",
    prefix: str = "up to layer",
) -> np.ndarray:
    """(L, g, g) maps scaled to [0, 1] side by side, labelled by layer: rollout building with depth."""
    m = as_array(maps)
    tiles = overlays(pixels, m, tile_size, cmap, alpha, mode)
    return tile([list(tiles)], col_labels=[f"{prefix} {i + 1}" for i in range(len(m))])


def pos_similarity_tiles(
    sim: torch.Tensor, tile_size: int = 40, pad: int = 2, cmap: str = "viridis", highlight: int | None = None
) -> np.ndarray:
    """(P, P) similarities as the ViT paper's Figure 7 (centre): for each position on the g x g grid,
    a small g x g map of its similarity to every other position, on a shared -1..1 scale."""
    s = as_array(sim)
    g = math.isqrt(s.shape[0])
    H = g * (tile_size + pad) + pad
    canvas = Image.new("RGB", (H, H), BG)
    for k in range(g * g):
        t = colorize(s[k].reshape(g, g), cmap, -1.0, 1.0)
        im = Image.fromarray(t).resize((tile_size, tile_size), Image.NEAREST)
        r, c = divmod(k, g)
        canvas.paste(im, (pad + c * (tile_size + pad), pad + r * (tile_size + pad)))
    if highlight is not None and 0 <= highlight < g * g:
        r, c = divmod(highlight, g)
        x, y = pad + c * (tile_size + pad), pad + r * (tile_size + pad)
        ImageDraw.Draw(canvas).rectangle(
            [x - 2, y - 2, x + tile_size + 1, y + tile_size + 1], outline=(255, 60, 60), width=2
        )
    return np.asarray(canvas)


def pos_tile_at(x: float, y: float, grid: int, tile_size: int = 40, pad: int = 2) -> int:
    """The position whose tile in `pos_similarity_tiles(..., tile_size, pad)` holds pixel (x, y); a click in a
    gap or on the border goes to the nearest tile."""
    step = tile_size + pad
    c = min(grid - 1, max(0, int((x - pad) // step)))
    r = min(grid - 1, max(0, int((y - pad) // step)))
    return r * grid + c


def similarity_map(sim: torch.Tensor, position: int, size: int = 256, cmap: str = "viridis") -> np.ndarray:
    """One position's similarity to all others, large, with that position outlined."""
    s = as_array(sim)
    g = math.isqrt(s.shape[0])
    img = colorize(upsample(s[position].reshape(g, g), size, "nearest"), cmap, -1.0, 1.0)
    return np.asarray(draw_grid(img, g, numbers=False, highlight=position, color=(60, 60, 60)))


def component_tiles(comps: torch.Tensor, tile_size: int = 48) -> list[np.ndarray]:
    """(k, C, p, p) components in [0, 1] -> k small RGB pictures, `tile_size` square."""
    tiles = []
    for comp in as_array(comps):
        arr = (np.transpose(comp, (1, 2, 0)) * 255).astype(np.uint8)
        tiles.append(np.asarray(Image.fromarray(to_rgb(arr)).resize((tile_size, tile_size), Image.NEAREST)))
    return tiles


def components_image(comps: torch.Tensor, tile_size: int = 48, cols: int = 8) -> np.ndarray:
    """(k, C, p, p) components in [0, 1] -> a grid of small pictures (the ViT paper's Figure 7, left)."""
    tiles = component_tiles(comps, tile_size)
    rows = [tiles[i : i + cols] for i in range(0, len(tiles), cols)]
    while len(rows[-1]) < cols and len(rows) > 1:
        rows[-1].append(np.full_like(tiles[0], 255))
    return tile(rows)
