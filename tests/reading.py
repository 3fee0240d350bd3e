"""Reading a picture's colour-bar numbers back from its pixels, as a visitor reads them.

A colour bar (vitviz.pictures.panels.colorbar) is a gradient framed in grey with its low value under its left end,
its high value under its right end and its middle value under its centre where there is room. This reader finds
each bar by its frame and reads the words under it letter by letter, matching the pixels against the letters of
the font the pictures are drawn with (Pillow's own), each compared where it lies: the low value from the bar's
left edge rightwards, the high value from its right edge leftwards, the middle one around the centre. It knows
nothing of the numbers the app meant to write, so a test that uses it checks what is on the screen.
"""

from __future__ import annotations

import functools

import numpy as np
from PIL import Image, ImageDraw, ImageFont

DIGITS = "0123456789.,-"
LETTERS = "abcdefghijklmnopqrstuvwxyz"
INK = 160  # a pixel darker than this is ink
MOST = 16  # letters in a word at most


@functools.lru_cache(maxsize=64)
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def _width(text: str, size: int) -> float:
    return _font(size).getlength(text)


@functools.lru_cache(maxsize=50_000)
def _drawn(text: str, size: int, x: float, right: int, height: int) -> np.ndarray:
    im = Image.new("L", (right, height), 255)
    ImageDraw.Draw(im).text((x, 0), text, fill=0, font=_font(size))
    return np.asarray(im, dtype=np.float32)


def _miss(band: np.ndarray, text: str, size: int, x: float, a: float, b: float) -> float:
    """How far `text` drawn at `x` is from `band` between columns a and b (mean grey difference)."""
    a, b = max(0, int(a)), min(band.shape[1], int(np.ceil(b)))
    if b <= a:
        return float("inf")
    return float(np.abs(_drawn(text, size, float(x), b, band.shape[0])[:, a:b] - band[:, a:b]).mean())


def _forwards(band: np.ndarray, size: int, x: float, letters: str) -> str:
    """The word drawn from `x` on, read left to right."""
    text = ""
    while len(text) < MOST:
        at = x + _width(text, size)
        stop = _miss(band, text, size, x, at - 1, at + size / 2)
        miss, c = min((_miss(band, text + c, size, x, at - 1, at + _width(c, size) + 1), c) for c in letters)
        if text and stop <= miss:
            break
        text += c
    return text


def _backwards(band: np.ndarray, size: int, end: float, letters: str) -> str:
    """The word that ends at `end`, read right to left."""
    text = ""
    while len(text) < MOST:
        at = end - _width(text, size)
        stop = _miss(band, text, size, at, at - size / 2, at + 1)
        options = []
        for c in letters:
            x = end - _width(c + text, size)
            options.append((_miss(band, c + text, size, x, x - 1, x + _width(c, size) + 1), c))
        miss, c = min(options)
        if text and stop <= miss:
            break
        text = c + text
    return text


def _centred(band: np.ndarray, size: int, centre: float, letters: str, after: int, before: int) -> str:
    """The word centred on `centre` whose ink lies between columns `after` and `before` ("": none there)."""
    ink = np.flatnonzero((band[:, after:before] < INK).any(0))
    if not len(ink):
        return ""
    start, found = after + ink[0], []
    for x in np.arange(start - size / 4 - 1, start + 1.01, 0.25):  # where its first letter's ink begins
        text = _forwards(band, size, x, letters)
        if abs(x + _width(text, size) / 2 - centre) <= 1:
            found.append((_miss(band, text, size, x, x - 2, x + _width(text, size) + 2), text))
    return min(found)[1] if found else "?"


def _greyish(pixels: np.ndarray) -> bool:
    """A line of the bar's grey frame, as JPEG gives it back (each pixel a little off, colourless)."""
    p = pixels.astype(np.int16)
    return bool(np.abs(p - 90).mean() < 10 and np.ptp(p, axis=-1).max() < 48)


def bars(rgb: np.ndarray) -> list[tuple[int, int, int, int]]:
    """(top, bottom, left, right) of each colour bar in an RGB picture: a grey (90, 90, 90) frame at least 100 px
    long and 10 to 40 px tall, a gradient inside; `right` one past its right column. JPEG blurs the frame where
    the gradient is bright, so a row may break for a pixel or two there: its columns are found by the frame's
    sides."""
    grey = (np.abs(rgb.astype(np.int16) - 90) < 14).all(-1)
    runs = []
    for y in range(rgb.shape[0]):
        cols = np.flatnonzero(grey[y])
        for part in np.split(cols, np.flatnonzero(np.diff(cols) > 3) + 1) if len(cols) else []:
            if part[-1] + 1 - part[0] >= 100:
                runs.append((y, int(part[0]), int(part[-1]) + 1))
    found = []
    for y, a, b in runs:
        for y2, a2, b2 in runs:
            if not (10 <= y2 - y <= 40 and abs(a2 - a) <= 1 and abs(b2 - b) <= 3):
                continue
            W = rgb.shape[1]
            lefts = [x for x in range(max(0, min(a, a2) - 1), min(W, max(a, a2) + 2)) if _greyish(rgb[y : y2 + 1, x])]
            rights = [x for x in range(max(0, max(b, b2) - 4), min(W, max(b, b2) + 2)) if _greyish(rgb[y : y2 + 1, x])]
            if not (lefts and rights):
                continue
            left, right = lefts[0], rights[-1] + 1
            if np.ptp(rgb[y + 2 : y2 - 1, left + 2 : right - 2].mean((0, 2))) > 40:
                found.append((y, y2, left, right))
    return found


def read_ticks(picture: np.ndarray) -> list[list[str]]:
    """[low, middle, high] as written under each colour bar of an RGB picture, top down (middle "": none)."""
    rgb = np.asarray(picture, np.uint8)
    gray = np.asarray(Image.fromarray(rgb).convert("L"), dtype=np.float32)
    out = []
    for top, bottom, a, b in bars(rgb):
        size = bottom - top + 3  # the bar is 2 px less tall than its numbers
        band = gray[bottom + 3 : bottom + 3 + size + 6]
        letters = DIGITS if _forwards(band, size, a, DIGITS + LETTERS)[:1] in tuple(DIGITS) else LETTERS
        lo, hi = _forwards(band, size, a, letters), _backwards(band, size, b, letters)
        after, before = int(a + _width(lo, size)) + 2, int(b - _width(hi, size)) - 2
        out.append([lo, _centred(band, size, (a + b) / 2, letters, after, before), hi])
    return out
