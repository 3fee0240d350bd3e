"""Heat maps that read on their own: a title naming what is shown, the map, and its colour bar.

Every map the app shows or exports goes through `panel`: the title says what the map is
(and from which token, for which class), the bar under it carries the colour scale
with the values' own numbers, what a value is (attention weight, relevance, cosine
similarity) and whether the panels of a picture share one scale. A map with nothing
to show (all values equal) becomes `message_panel`, a sentence instead of a flat colour.
Pictures are uint8 (H, W, 3) arrays; text is drawn at least 14 px high, so it stays
12 px or more when the page shows a picture a little smaller than its size (larger with the
visitor's Large type: vitviz.pictures.style).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from vitviz.pictures.draw import BG, colour_table, marked
from vitviz.pictures.style import NARROW_PX, current, px
from vitviz.pictures.text import font, text_width, write

TITLE_PX = 15
TEXT_PX = 14
INK = (30, 30, 30)
GREY = (90, 90, 90)


@dataclass(frozen=True)
class Scale:
    """A map's colour scale: what a value is, the values at the two ends, and whether panels share it."""

    what: str  # "attention weight", "relevance to class 'cat'", "cosine similarity"
    lo: float
    hi: float
    shared: str = "its own range"  # or "each tile its own range", "one scale for all tiles"
    cmap: str = "inferno"
    relative: bool = False  # each tile its own range: the ends read "lowest" and "highest", not numbers

    def ticks(self) -> list[str]:
        """The labels at the two ends and the middle: plain decimals, with as many places as it takes for the
        three to differ (a narrow range such as 0.00383-0.00384 gets 0.003830, 0.003835, 0.003840)."""
        if self.relative:
            return ["lowest", "", "highest"]
        return plain([self.lo, (self.lo + self.hi) / 2, self.hi])


def number(v: float) -> str:
    """One value in plain decimals, never an exponent: three significant digits below 10,000 (0.000123, 0.0456,
    7.89, 123), whole numbers with thousands separators above."""
    return plain([v])[0]


def plain(values: list[float], most: int = 10) -> list[str]:
    """Tick labels in plain decimals: three significant digits of the largest value, then as many more decimal
    places (up to `most`) as it takes for values that differ to read differently; every label with the same places,
    the zeros they all end with dropped; 0 reads "0"; from 10,000 on, whole numbers with thousands separators."""
    big = max((abs(v) for v in values), default=0.0)
    if big >= 1e4:
        return [f"{v:,.0f}" for v in values]
    if big == 0:
        return ["0" for _ in values]
    places = max(0, 2 - math.floor(math.log10(big)))
    while True:
        labels = [f"{v:.{places}f}" for v in values]
        if len(set(labels)) == len(set(values)) or places >= most:
            break
        places += 1
    nonzero = [k for k, v in enumerate(values) if v != 0]
    while places > 0 and all(labels[k].endswith("0") for k in nonzero):
        labels = [x[:-1] for x in labels]
        places -= 1
    return ["0" if v == 0 else x.rstrip(".") for v, x in zip(values, labels)]


def wrap(text: str, width: int, size: int = TEXT_PX) -> list[str]:
    """`text` broken into lines no wider than `width` pixels at `size`; a word wider than a line (a model's name,
    "vit_small_patch14_reg4_dinov2.lvd142m") broken after its _ . / - where it can, else between letters, so that
    no line is cut off at its ends."""
    lines, line = [], ""
    for word in (piece for w in text.split() for piece in _pieces(w, width, size)):
        trial = f"{line} {word}".strip()
        if line and text_width(trial, size) > width:
            lines.append(line)
            line = word
        else:
            line = trial
    return lines + ([line] if line else [])


def _pieces(word: str, width: int, size: int) -> list[str]:
    """`word` as pieces no wider than `width` (itself where it fits)."""
    if text_width(word, size) <= width:
        return [word]
    pieces, piece = [], ""
    for part in re.findall(r"[^_./-]*[_./-]?", word):
        for ch in part if text_width(part, size) > width else [part]:  # a part too wide alone: letter by letter
            if piece and text_width(piece + ch, size) > width:
                pieces.append(piece)
                piece = ""
            piece += ch
    return [*pieces, piece] if piece else pieces


@functools.lru_cache(maxsize=512)
def _text_block(text: str, width: int, size: int, color: tuple, centre: bool, bg: tuple) -> np.ndarray:
    lines = wrap(text, width - 8, size)
    step = size + 4
    im = np.full((4 + step * max(1, len(lines)), width, 3), bg, np.uint8)
    for i, line in enumerate(lines):
        write(im, (width - text_width(line, size)) / 2 if centre else 4, 2 + i * step, line, size, color)
    im.flags.writeable = False
    return im


def text_block(
    text: str,
    width: int,
    size: int = TEXT_PX,
    color: tuple[int, int, int] = INK,
    centre: bool = True,
    bg: tuple[int, int, int] = BG,
) -> np.ndarray:
    """Wrapped text on `bg` (white), `width` wide."""
    return _text_block(text, int(width), int(size), tuple(color), centre, tuple(bg))


@functools.lru_cache(maxsize=64)
def _bar(width: int, height: int, cmap: str) -> np.ndarray:
    idx = np.linspace(0, 255, width).astype(np.uint8)
    bar = np.repeat(colour_table(cmap)[idx][None], height, axis=0)
    bar[[0, -1]] = GREY
    bar[:, [0, -1]] = GREY
    return bar


def colorbar(width: int, scale: Scale) -> np.ndarray:
    """The colour bar of `scale`, `width` wide: the gradient, its end (and middle) values, what they are."""
    return _colorbar(width, scale, px(TEXT_PX))


@functools.lru_cache(maxsize=256)
def _colorbar(width: int, scale: Scale, size: int) -> np.ndarray:
    margin = 10 if width >= 120 else 2
    w = width - 2 * margin
    bar_h = max(12, size - 2)
    canvas = Image.new("RGB", (width, bar_h + 4 + size + 4), BG)
    canvas.paste(Image.fromarray(_bar(w, bar_h, scale.cmap)), (margin, 2))
    d = ImageDraw.Draw(canvas)
    f = font(size)
    lo, mid, hi = scale.ticks()
    y = bar_h + 4
    d.text((margin, y), lo, fill=INK, font=f)
    room = w - f.getlength(lo) - f.getlength(hi)
    if mid and room > f.getlength(mid) + 16:  # the middle value only where it does not crowd the ends
        d.text((margin + (w - f.getlength(mid)) / 2, y), mid, fill=INK, font=f)
    if room < 8:  # too narrow for both ends on one line: the high end goes under, at the right
        canvas = _taller(canvas, size + 4)
        d = ImageDraw.Draw(canvas)
        y += size + 4
    d.text((margin + w - f.getlength(hi), y), hi, fill=INK, font=f)
    caption = text_block(f"{scale.what} ({scale.shared})", width, size, GREY)
    return np.concatenate([np.asarray(canvas), caption])


def _taller(im: Image.Image, extra: int) -> Image.Image:
    out = Image.new("RGB", (im.width, im.height + extra), BG)
    out.paste(im, (0, 0))
    return out


def _fit(img: np.ndarray, width: int) -> np.ndarray:
    """`img` centred on white, `width` wide (never narrower than it is)."""
    h, w = img.shape[:2]
    if w >= width:
        return img
    out = np.full((h, width, 3), BG, np.uint8)
    x = (width - w) // 2
    out[:, x : x + w] = img[:, :, :3]
    return out


def _scrolled(width: int) -> bool:
    """Whether a picture `width` wide is scrolled on the visitor's screen (a phone's, wider than it)."""
    return current().narrow and width > NARROW_PX + 40


def title_block(title: str, width: int) -> np.ndarray:
    """A picture's title, `width` wide: centred over it; on a narrow screen, over a wide picture, wrapped to the
    screen's width at the left, so that it reads before the picture is scrolled."""
    size = px(TITLE_PX)
    if _scrolled(width):
        return _at_left(text_block(title, NARROW_PX, size, INK, centre=False), width)
    return text_block(title, width, size, INK)


def panel(img: np.ndarray, title: str, scale: Scale | None = None, min_width: int = 0, note: str = "") -> np.ndarray:
    """The picture under its title (none: ""), with the colour bar of `scale` under it (none for a plain
    picture), and `note` under that: what its colours are where no bar can say it (an RGB picture). Nothing is
    added above or left of a picture without a title, so clicks on it keep their place."""
    left = getattr(img, "left", 0)  # its rows' labels (draw.Marked)
    img = np.asarray(img)
    width = max(img.shape[1], min_width)
    parts = ([title_block(title, width)] if title else []) + [img if width == img.shape[1] else _fit(img, width)]
    top = parts[0].shape[0] if title else 0
    narrow = _scrolled(width)  # a phone scrolls it: its words at the left, in view
    if scale is not None:
        bar = colorbar(min(NARROW_PX if narrow else width, round(320 * max(1.0, current().text))), scale)
        parts.append(_at_left(bar, width) if narrow else _fit(bar, width))
    if note:
        text = text_block(note, NARROW_PX if narrow else width, px(TEXT_PX), GREY)
        parts.append(_at_left(text, width))
    out = np.concatenate(parts)
    if narrow:  # the title, the rows' labels and the colour bar kept in view while it scrolls
        return marked(out, frozen=(left if width == img.shape[1] else 0, top, top + img.shape[0]))
    return out


def _at_left(img: np.ndarray, width: int) -> np.ndarray:
    """`img` at the left of a white strip `width` wide."""
    out = np.full((img.shape[0], width, 3), BG, np.uint8)
    out[:, : img.shape[1]] = img[:, :width]
    return out


def message_panel(size: int, title: str, message: str) -> np.ndarray:
    """A square with a sentence instead of a map: for a map that has nothing to show."""
    box = np.full((size, size, 3), 238, np.uint8)
    text = text_block(message, size - 24, px(TEXT_PX), INK, bg=(238, 238, 238))
    h = min(text.shape[0], size - 8)
    y = (size - h) // 2
    box[y : y + h, 12 : 12 + text.shape[1]] = text[:h]
    return panel(box, title)


def is_flat(values: list[float], tol: float = 1e-12) -> bool:
    """True when a map's values are all (nearly) equal: drawn, it would be one flat colour."""
    a = np.asarray(values, dtype=np.float64)
    return not np.isfinite(a).all() or float(a.max() - a.min()) <= tol * max(1.0, float(np.abs(a).max()))
