"""The input as the model sees it: the image enlarged with its numbered patch grid and the CLS tile beside it, a
click on that picture as a token (`sees_spots`), and the photo as uploaded with the square the model gets."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from vitviz.models.loaded import Token, TokenLayout
from vitviz.models.vit import ViTConfig
from vitviz.pictures import draw, spots
from vitviz.pictures.explanation import display_size
from vitviz.pictures.panels import panel
from vitviz.pictures.style import px
from vitviz.pictures.text import text_width


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


CLS_GAP = 10  # between the grid and the tiles of the tokens before the patches
TILE_GAP = 4  # between two of those tiles


def short_name(name: str) -> str:
    """A token's name as its tile says it: "CLS", "dist", "reg 1"."""
    return name.replace("register ", "reg ").replace("distillation", "dist")


def token_tiles(S: int, g: int, layout: TokenLayout) -> list[tuple[int, int, int, int, str]]:
    """(x0, y0, x1, y1, word) of each tile right of the S x S grid, top down: one per token before the patches
    (CLS, the distillation token, the registers), or SigLIP's one, its pooling query ("pool"). Stacked within the
    grid's height, as wide as the longest word needs."""
    words = [short_name(n) for n in layout.prefix] or ["pool"]
    side = max(44, round(S / g))
    h = min(side, (S - TILE_GAP * (len(words) - 1)) // len(words))
    w = max(side, 10 + max(round(text_width(word, px(14))) for word in words))
    x0 = S + CLS_GAP
    return [(x0, k * (h + TILE_GAP), x0 + w, k * (h + TILE_GAP) + h, word) for k, word in enumerate(words)]


def cls_box(S: int, g: int, layout: TokenLayout | None = None) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) of the first tile right of the S x S grid: CLS's (a model with only CLS by default)."""
    return token_tiles(S, g, layout or TokenLayout(("CLS",), (g, g), 1))[0][:4]


def sees_picture(pixels: np.ndarray, g: int, S: int, layout: TokenLayout, token: Token | None = None) -> np.ndarray:
    """The input enlarged to S with its numbered grid, and beside it a tile for each token before the patches
    (`token_tiles`); the selected token (None: the first) outlined, a patch on the grid or its tile."""
    token = token or layout.token(-1)
    grid = draw.draw_grid(draw.enlarge(pixels, S), g, numbers=S / g >= 24, highlight=token.patch)
    tiles = token_tiles(S, g, layout)
    canvas = Image.new("RGB", (tiles[0][2] + 4, S), draw.BG)
    canvas.paste(grid, (0, 0))
    d = ImageDraw.Draw(canvas)
    size = px(14)
    f = draw.font(size)
    chosen = None if token.patch is not None else (token.row or 0)  # SigLIP's pooling query: its one tile
    for k, (x0, y0, x1, y1, word) in enumerate(tiles):
        d.rectangle([x0, y0, x1 - 1, y1 - 1], fill=(60, 60, 70))
        d.text((x0 + (x1 - x0 - f.getlength(word)) / 2, y0 + (y1 - y0 - size) / 2 - 1), word, fill=(255,) * 3, font=f)
        if k == chosen:
            d.rectangle([x0, y0, x1 - 1, y1 - 1], outline=draw.HIGHLIGHT, width=3)
    return np.asarray(canvas)


def sees_spots(cfg: ViTConfig, layout: TokenLayout) -> list[spots.Spot]:
    """Where the tokens are in `sees_picture`: its patch grid, and right of it (the gap included) a band per tile
    of a token before the patches, each as tall as the tile and the gap under it (one tile: the grid's height)."""
    S, g = main_size(cfg), cfg.grid_size
    tiles = token_tiles(S, g, layout)
    x1, pitch = tiles[0][2] + 4, (tiles[0][3] + TILE_GAP if len(tiles) > 1 else S)
    return [spots.grid(0, 0, S, g, layout.num_prefix), spots.tiles(S, 0, x1 - S, pitch, len(tiles), layout)]
