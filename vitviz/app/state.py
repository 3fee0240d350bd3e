"""One visitor's state, kept in their gr.State: their own models, and each tab's own record.

What every tab follows (the shown image's gallery and example, the tab looked at, the note beside the
menu) is `Crossing`; what one tab computed for one image and model, and the pictures it drew from it,
is that tab's `TabState`, kept under one cache key (vitviz.app.selection.Selection.key), so that no tab reads
another's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vitviz.app.serving.picfiles import REPLIES, PictureFiles
from vitviz.pictures.explore import PictureCache
from vitviz.pictures.style import Style, drawn_with
from vitviz.runtime import memory

DEFAULT_EXAMPLE = 3  # the gallery image the page opens on
NONE_SELECTED = -1  # the gallery's selected_index when no example is shown (None leaves the old one marked)


@dataclass
class TabState:
    """One tab's own memory: the result it computed for one image and model, and the pictures drawn from it."""

    key: tuple | None = None
    result: Any = None
    pictures: PictureCache = field(default_factory=PictureCache)

    def keep(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """The result for `key`: the kept one, or `compute()` kept now (the pictures of the old one let go)."""
        if self.key != key:
            self.key, self.result = key, compute()
            self.pictures.clear()
            self.renewed()
        return self.result

    def renewed(self) -> None:
        """What a new result resets besides the pictures (nothing here)."""

    def clear(self) -> None:
        self.key = self.result = None
        self.pictures.clear()
        self.renewed()


@dataclass
class Crossing:
    """What every tab follows."""

    image_gallery: str = "cifar10"  # the examples the shown image belongs with (an upload: the model's then)
    example: int | None = DEFAULT_EXAMPLE  # which of those examples it is; None: the visitor's own image
    own: str | None = None  # the visitor's own image (an upload, a random test image), kept to come back to
    own_gallery: str | None = None  # the examples it belongs with
    stand_in: bool = False  # the example shown stands in for `own`, which the model chosen cannot take
    depth: int | None = None  # the chosen model's depth (a new model keeps the last layer the last)
    looking: str = "explore"  # the tab looked at (a tab drawn from the Explore image follows it only then)
    menu_note: str = ""  # why the chosen model could not be had, said until the visitor picks again
    toggled: set = field(default_factory=set)  # patches clicked on Take patches away: hidden, or shown again
    large: bool = False  # Large type: the pictures' own text drawn larger
    numbers: bool = True  # patch numbers on the input's grid
    narrow: bool = False  # a phone-sized screen: wide pictures' titles at the left, curves stacked

    def style(self) -> Style:
        """How this visitor's pictures are drawn."""
        return Style.of(large=self.large, numbers=self.numbers, narrow=self.narrow)

    def selected(self) -> int:
        """The gallery's selected index: the example shown, or none."""
        return NONE_SELECTED if self.example is None else self.example

    def new_image(self, gallery: str, example: int | None, own: str | None = None) -> None:
        """The visitor chose an image: an example of `gallery`, or their own (`own`)."""
        self.image_gallery, self.example, self.stand_in = gallery, example, False
        if own is not None:
            self.own, self.own_gallery = own, gallery
        self.toggled = set()


@dataclass
class Visitor:
    """One visitor's own things."""

    models: dict = field(default_factory=dict)  # "upload", "session", "session@<epoch>" -> model record
    files: PictureFiles = field(default_factory=PictureFiles)  # the pictures the page shows, encoded
    crossing: Crossing = field(default_factory=Crossing)
    explore: TabState = field(default_factory=TabState)  # result: the Explanation
    steps: TabState = field(default_factory=TabState)  # result: the steps.Walk
    removal: TabState = field(default_factory=TabState)  # result: the removal.Study
    pictures: dict = field(default_factory=dict)  # the images decoded for it (vitviz.app.selection.Picture)
    digests: dict = field(default_factory=dict)  # (path, size, mtime) -> the digest of that file's bytes

    def drawing(self) -> contextlib.AbstractContextManager:
        """Draw in this visitor's style inside the block."""
        return drawn_with(self.crossing.style())

    def restyle(self, **changes) -> bool:
        """Change how pictures are drawn (large, numbers, narrow); True if anything changed (the kept pictures are
        let go: the next answers draw them anew)."""
        before = self.crossing.style()
        for name, value in changes.items():
            setattr(self.crossing, name, bool(value))
        if self.crossing.style() == before:
            return False
        for tab in self.tabs():
            tab.pictures.clear()
        return True

    def tabs(self) -> tuple[TabState, ...]:
        return (self.explore, self.steps, self.removal)

    def forget_session_models(self) -> None:
        for k in [k for k in self.models if k.startswith("session")]:
            del self.models[k]
        self._forget_results()

    def release(self) -> None:
        """Let go of everything this visitor holds (they left, or their state expired), and give the memory
        back to the OS."""
        held = bool(self.models)
        self.models.clear()
        self._forget_results()
        if held:
            memory.give_back()

    def _forget_results(self):
        self.files.clear()
        self.pictures.clear()
        self.digests.clear()
        for tab in self.tabs():
            tab.clear()


def visitor(state: Visitor | None) -> Visitor:
    """The visitor's state; for API callers and direct calls that pass none, a fresh one whose pictures go to
    the shared reply files (nothing of it outlives the call, and no caller's files are another's)."""
    return state if isinstance(state, Visitor) else Visitor(files=REPLIES)
