"""The input as the model sees it: the image enlarged with its numbered patch grid and the CLS tile beside it, a
click on that picture as a token (`sees_spots`), and the photo as uploaded with the square the model gets."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from vitviz.models.loaded import TokenLayout
from vitviz.models.vit import ViTConfig
from vitviz.pictures import draw, spots
from vitviz.pictures.explanation import display_size
from vitviz.pictures.panels import panel
from vitviz.pictures.style import px


def main_size(cfg: ViTConfig) -> int:
    """Side of the first row's maps: the enlarged input, halved until it is at most 320 px."""
    s = display_size(cfg)
    while s > 320 and s % 2 == 0:
        s //= 2
    return s


def original_picture(photo: np.ndarray, size: int, prepare: tuple = ()) -> np.ndarray:
    """The photo as uploaded with what the model gets outlined (vitviz.data.images.to_pixels): the centre square,
    or as the model's own processor prepares it (`prepare`, the card's: squeezed whole, or its shorter side
    resized and the centre cropped); `photo` is explanation.original_thumbnail's, so the sizes said are those
    of that picture's original."""
    h, w = photo.shape[:2]
    side = min(h, w)
    if prepare and prepare[0] == "shortest":  # the shorter side to `edge`, then a `crop` square from the centre
        side = max(1, min(side, round(side * prepare[2] / prepare[1])))
    box = (0, 0, w, h) if prepare and prepare[0] == "exact" else ((w - side) // 2, (h - side) // 2, side, side)
    x0, y0, bw, bh = box
    im = Image.fromarray(photo)
    ImageDraw.Draw(im).rectangle([x0, y0, x0 + bw - 1, y0 + bh - 1], outline=draw.HIGHLIGHT, width=3)
    if box[2:] == (w, h):
        what = "all of it" + (", squeezed" if h != w else "")
    else:
        what = "the outlined centre square"
    return panel(np.asarray(im), f"The image: the model gets {what}, resized to {size}x{size} px", min_width=300)


CLS_GAP = 10


def cls_box(S: int, g: int) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) of the CLS tile, right of the S x S grid."""
    side = max(44, round(S / g))
    return S + CLS_GAP, 0, S + CLS_GAP + side, side


def sees_picture(pixels: np.ndarray, g: int, S: int, patch: int | None, first: str = "CLS") -> np.ndarray:
    """The input enlarged to S with its numbered grid (the selected patch outlined), and the tile of the token
    the prediction reads beside it (`first`: "CLS", or "pool" for SigLIP's pooling query), outlined when that
    token is selected."""
    grid = draw.draw_grid(draw.enlarge(pixels, S), g, numbers=S / g >= 24, highlight=patch)
    x0, y0, x1, y1 = cls_box(S, g)
    canvas = Image.new("RGB", (x1 + 4, S), draw.BG)
    canvas.paste(grid, (0, 0))
    d = ImageDraw.Draw(canvas)
    d.rectangle([x0, y0, x1 - 1, y1 - 1], fill=(60, 60, 70))
    size = px(14)
    f = draw.font(size)
    d.text(
        (x0 + (x1 - x0 - f.getlength(first)) / 2, y0 + (y1 - y0 - size) / 2 - 1), first, fill=(255, 255, 255), font=f
    )
    if patch is None:
        d.rectangle([x0, y0, x1 - 1, y1 - 1], outline=draw.HIGHLIGHT, width=3)
    return np.asarray(canvas)


def sees_spots(cfg: ViTConfig, layout: TokenLayout) -> list[spots.Spot]:
    """Where the tokens are in `sees_picture`: its patch grid, and right of it (the whole height, the gap
    included) the tile of the token the prediction reads."""
    S, g = main_size(cfg), cfg.grid_size
    x1 = cls_box(S, g)[2] + 4
    return [spots.grid(0, 0, S, g, layout.num_prefix), spots.tile(S, 0, x1, S, layout)]


def first_tile(layout: TokenLayout) -> str:
    """The word on the input's tile beside the grid: the first token before the patches, or "pool" for a model
    without one (SigLIP: its pooling query)."""
    return layout.prefix[0] if layout.prefix else "pool"
