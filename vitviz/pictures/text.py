"""Words written into pictures: the font at a size, a text's width and the text itself, each word measured and
drawn once for the process (a picture's title differs from the last one by a number; its words repeat), so that
titles cost a copy of pixels, not a FreeType layout.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont


@functools.lru_cache(maxsize=32)
def font(size: int = 12) -> ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


@functools.lru_cache(maxsize=8192)
def _measured(word: str, size: int) -> float:
    return font(size).getlength(word)


def text_width(text: str, size: int) -> float:
    """`text`'s width in pixels at `size`, one space between its words: each word measured once for the process
    (titles differ by a number; their words repeat)."""
    words = text.split()
    return sum(_measured(w, size) for w in words) + _measured(" ", size) * max(0, len(words) - 1)


@functools.lru_cache(maxsize=4096)
def _ink(word: str, size: int) -> np.ndarray:
    """How much of each pixel `word` covers (0-255) at `size`, drawn at (size, 2): a margin of `size` on every
    side for glyphs that reach past their advance."""
    im = Image.new("L", (math.ceil(_measured(word, size)) + 2 * size, 2 * size + 4), 0)
    ImageDraw.Draw(im).text((size, 2), word, fill=255, font=font(size))
    return np.asarray(im)


def write(canvas: np.ndarray, x: float, y: int, text: str, size: int, color: tuple[int, int, int]) -> None:
    """`text` written into the RGB `canvas` in place with its top-left at (x, y), as PIL's ImageDraw.text writes it
    (each pixel blended towards `color` by how much of it the glyphs cover), from words drawn once each."""
    H, W = canvas.shape[:2]
    space = _measured(" ", size)
    ink = np.asarray(color, np.float32)
    for word in text.split():
        mask = _ink(word, size)
        top, left = y - 2, round(x) - size
        y0, x0 = max(0, top), max(0, left)
        y1, x1 = min(H, top + mask.shape[0]), min(W, left + mask.shape[1])
        if y1 > y0 and x1 > x0:
            a = mask[y0 - top : y1 - top, x0 - left : x1 - left, None].astype(np.float32) / 255
            region = canvas[y0:y1, x0:x1]
            region[:] = np.rint(region * (1 - a) + ink * a).astype(np.uint8)
        x += _measured(word, size) + space
