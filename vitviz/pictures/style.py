"""How the visitor wants pictures drawn: text size (Large type, for a projector), patch numbers on or off, and a
narrow screen (a phone).

The app sets a `Style` around each handler's drawing (`drawn_with`); every function that draws text asks `px`
for its size, so that one switch reaches the titles, colour-bar numbers, labels and patch numbers of every
picture. Figures built with matplotlib take `points` and `figure_width`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

LARGE = 1.5  # Large type: the pictures' own text this much larger
NARROW_PX = 320  # a narrow screen: titles of wide pictures wrapped to this width, at the left
PHONE_PX = 700  # a browser at most this wide is a phone's (the page's CSS media query says the same)


@dataclass(frozen=True)
class Style:
    text: float = 1.0  # text size against the normal
    numbers: bool = True  # patch numbers on the input's grid
    narrow: bool = False  # a phone-sized screen

    @staticmethod
    def of(large: bool = False, numbers: bool = True, narrow: bool = False) -> Style:
        return Style(LARGE if large else 1.0, bool(numbers), bool(narrow))


NORMAL = Style()
_STYLE: ContextVar[Style | None] = ContextVar("vitviz_style", default=None)


def current() -> Style:
    return _STYLE.get() or NORMAL


@contextlib.contextmanager
def drawn_with(style: Style) -> Iterator[Style]:
    """Draw with `style` inside the block (this thread's, and nobody else's)."""
    token = _STYLE.set(style)
    try:
        yield style
    finally:
        _STYLE.reset(token)


def px(size: float) -> int:
    """A text size in pixels, as the current style draws it."""
    return max(1, round(size * current().text))


def points(size: float) -> float:
    """A matplotlib font size, as the current style draws it."""
    return size * current().text
