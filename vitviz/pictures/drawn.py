"""Pictures drawn once from a result, for everyone who looks at it.

A result (an image's explanation, its walk through the blocks, its removal study) may be shared by every visitor
and API caller who sends the same image to the same model (vitviz.app.serving.shared). `Drawn` gives it the
pictures drawn from it, by what they were drawn with (a picture's name, its options, the style), and what several
pictures are drawn from (rollout up to each layer): the first to ask makes one, the others get the same object,
and the most recently used are kept in one store for the process while they fit its bound (a class clicking
around one example asks for the same pictures again and again; the shipped model's pictures of one token hold
2.3 MB). Nothing is changed after it is made, so sharing it changes no reply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from vitviz.runtime.shared import SharedResults, nbytes_of

T = TypeVar("T")
PICTURES = SharedResults(lambda: 256)  # the app bounds it by VITVIZ_PICTURES_MB (vitviz.app.serving.shared)


class Drawn:
    """A result that keeps what is drawn from it in PICTURES, under itself (held weakly: the pictures go with it)."""

    def once(self, key: tuple, make: Callable[[], T]) -> T:
        """What is drawn (or computed for drawing) from this result under `key`: kept, or made now and kept."""
        return PICTURES.get(self, key, make, nbytes_of)

    def kept(self) -> int:
        """How many pictures (and things pictures are drawn from) this result keeps now."""
        return PICTURES.held_by(self)
