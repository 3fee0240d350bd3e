"""Where the tokens are in a picture: the clickable regions that let a visitor pick a token in any picture.

A `Spot` is a block of equal cells (a patch grid over the image, a column of matrix rows, a row of tiles), each
cell one token of the sequence (prefix tokens first, then the patches in reading order). A picture keeps its
spots as it is composed: `under_title` moves them below a panel's title, `moved` right of another picture.
`token_at` is the one way a click on any picture becomes a token (vitviz.models.loaded.Token).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vitviz.models.loaded import Token, TokenLayout
from vitviz.pictures.panels import title_block

READER = -1  # the `first` of a tile standing for what the prediction reads: CLS, or SigLIP's pooling query (no row)


@dataclass(frozen=True)
class Spot:
    """`rows` x `cols` cells of `cw` x `ch` pixels from (x, y); cell i is the token in place `first + i` of the
    sequence, for the first `count` cells (`first` READER: the one cell is what the prediction reads)."""

    x: float
    y: float
    cw: float
    ch: float
    cols: int
    rows: int
    first: int
    count: int

    def row_at(self, x: float, y: float) -> int | None:
        c, r = int((x - self.x) // self.cw), int((y - self.y) // self.ch)
        if x < self.x or y < self.y or not (0 <= c < self.cols and 0 <= r < self.rows):
            return None
        i = r * self.cols + c
        return self.first + i if i < self.count else None


def grid(x: float, y: float, side: float, g: int, first: int) -> Spot:
    """A g x g patch grid drawn `side` pixels wide at (x, y); patch 0 is token `first`."""
    return Spot(x, y, side / g, side / g, g, g, first, g * g)


def moved(spots: list[Spot], dx: float, dy: float) -> list[Spot]:
    return [replace(s, x=s.x + dx, y=s.y + dy) for s in spots]


def under_title(spots: list[Spot], title: str, width: int, picture_width: int) -> list[Spot]:
    """The spots of a picture once `panels.panel(picture, title, ..., min_width)` has put it, `width` wide,
    under its title and centred."""
    dy = title_block(title, width).shape[0] if title else 0
    return moved(spots, max(0, (width - picture_width) // 2), dy)


def tiles(x: float, y: float, width: float, pitch: float, count: int, layout: TokenLayout) -> Spot:
    """`count` tiles stacked from (x, y), `pitch` apart: the tokens before the patches in their order (rows 0 to
    count-1), or SigLIP's one tile, its pooling query."""
    return Spot(x, y, width, pitch, 1, count, 0 if layout.prefix else READER, count)


def token_at(spots: list[Spot], x: float, y: float, layout: TokenLayout) -> Token | None:
    """The token under (x, y) in a picture with these spots, or None where there is none."""
    for s in spots:
        row = s.row_at(x, y)
        if row is not None:
            return layout.token(-1) if row == READER else layout.at_row(row)
    return None
