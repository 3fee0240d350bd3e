"""What one event's view is drawn from, resolved once: the model's record (in the visitor's words, for CLIP and
SigLIP), the image as that model sees it, and the selected token. Every tab's handler starts from `select`;
the functions below it take the record and the pixels and never resolve or decode again.

The image is decoded once per visitor: a `Picture` is kept by its file's content (the bytes' digest, read once
per file) and the model's input geometry, a few at a time. An event that changes a layer, a head or a token
reads no file; an API caller who uploads the same image again (a new file each time) has it read, not decoded;
a tab's result is kept under that digest (`Selection.key`) rather than a hash of its pixels.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from PIL import Image

from vitviz.app.inputs import FieldError, ImagePayload, image_file, read_image, selected_token
from vitviz.app.menu import in_words, resolve_model
from vitviz.app.serving.shared import NO_OWNER, SHARED, nbytes_of
from vitviz.app.state import Visitor
from vitviz.models.loaded import LoadedViT, Token

T = TypeVar("T")
KEPT_PICTURES = 4  # decoded images a visitor keeps (the Explore image, Compare's sides, one more)
MAX_FILE_BYTES = 64 * 2**20  # a file larger is never read whole to be named (the upload bound refuses it first)


@dataclass(frozen=True, eq=False)
class Picture:
    """An image as one model sees it: read and decoded once."""

    source: str  # the digest of its file's bytes: the same image uploaded twice is one source
    photo: Image.Image  # the image as uploaded (EXIF applied on drawing)
    pixels: np.ndarray  # what the model sees of it: uint8 (H, W, C)


@dataclass(frozen=True, eq=False)
class Selection:
    """What a view is drawn from: the model chosen (by its menu key) and its record, the image as it sees it,
    and the selected token (vitviz.models.loaded.Token)."""

    model_key: str
    model: LoadedViT
    picture: Picture
    token: Token

    @property
    def pixels(self) -> np.ndarray:
        return self.picture.pixels

    def shared(self, tab: str, compute: Callable[[], T], *more: object) -> T:
        """`compute()`'s result for this selection and `more`, computed once for every visitor and API caller who
        selects the same model record and image file (vitviz.app.serving.shared)."""
        if not self.picture.source:  # a file that could not be named: nothing to share it under
            return compute()
        return SHARED.get(self.model, (tab, self.picture.source, *more), compute, nbytes_of)

    def key(self, *more: object) -> tuple:
        """What a tab's result for this selection depends on: the model (its menu key and the very record), the
        image's file, and `more`."""
        return (self.model_key, id(self.model), self.picture.source, *more)


def select(
    v: Visitor,
    image: ImagePayload,
    model_key: str,
    labels: str | None = None,
    template: str | None = None,
    token: object = -1,
    model: LoadedViT | None = None,
) -> Selection:
    """The selection an event asks for: the model resolved once (in `labels` and `template` for a model with a
    text tower; `model`: the record this event resolved already), the image decoded once for this visitor, the
    token checked against the model; gr.Error (a FieldError about its control) with a sentence otherwise."""
    model = model or in_words(resolve_model(model_key, v), labels, template)
    chosen = selected_token(token, model.layout)
    return Selection(model_key, model, picture(v, model, image), chosen)


def picture(v: Visitor, model: LoadedViT, payload: ImagePayload) -> Picture:
    """The image of `payload` as `model` sees it: the visitor's kept one while its file and the model's input
    geometry are the same, else read, decoded and kept now."""
    image_file(payload)  # there, and within the upload bound: a call alone would be refused, so is this one
    source = _digest(v, payload)
    card = model.card
    geometry = (card.config.image_size, card.config.in_chans, card.prepare, card.light_on_dark)
    key = (source, geometry)
    kept = v.pictures.get(key)
    if kept is not None:
        return kept
    if source:  # decoded once for every visitor and caller who sends the same file to a model of this geometry
        made = SHARED.get(NO_OWNER, ("decoded", *key), lambda: _decoded(model, payload, source), nbytes_of)
    else:
        made = _decoded(model, payload, source)
    v.pictures[key] = made
    while len(v.pictures) > KEPT_PICTURES:
        v.pictures.pop(next(iter(v.pictures)))
    return made


def _decoded(model: LoadedViT, payload: ImagePayload, source: str) -> Picture:
    photo = read_image(payload)
    try:
        return Picture(source, photo, model.pixels(photo))
    except ValueError as e:
        raise FieldError(f"That image could not be used: {e}.", "image") from None


def _digest(v: Visitor, payload: ImagePayload) -> str:
    """The digest of the bytes of the file a payload names: the visitor's kept one while the file's path, size
    and modification time are the same, else read now; "" where it cannot be read (read_image then says why)."""
    path = payload.get("path") if isinstance(payload, dict) else payload
    try:
        st = os.stat(path)
        stamp = (str(path), st.st_size, st.st_mtime_ns)
        if stamp not in v.digests:
            if st.st_size > MAX_FILE_BYTES:
                return ""
            with open(path, "rb") as f:
                v.digests[stamp] = hashlib.blake2b(f.read(), digest_size=16).hexdigest()
            while len(v.digests) > 4 * KEPT_PICTURES:
                v.digests.pop(next(iter(v.digests)))
        return v.digests[stamp]
    except (OSError, TypeError, ValueError):
        return ""
