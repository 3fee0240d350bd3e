"""One selection per event (vitviz.app.selection): the image is decoded once per visitor, and any sequence of
changes gives the pictures that setting the final selection at once gives."""

import random
import shutil

import numpy as np
import pytest
from helpers import EXAMPLE

from vitviz.app import selection
from vitviz.app.serving import shared
from vitviz.app.state import Visitor
from vitviz.app.tabs import explore, steps
from vitviz.data import gallery
from vitviz.pictures import explore as explore_pictures


@pytest.fixture
def reads(monkeypatch):
    """Every image file the app opens, in order (none decoded before: the shared results emptied)."""
    shared.SHARED.clear()
    opened = []
    real = selection.read_image

    def counting(payload):
        opened.append(payload.get("path") if isinstance(payload, dict) else payload)
        return real(payload)

    monkeypatch.setattr(selection, "read_image", counting)
    return opened


def test_an_image_is_decoded_once_while_its_file_and_the_models_geometry_stay(reads, tmp_path):
    v = Visitor()
    first = selection.select(v, {"path": EXAMPLE}, "cifar10")
    again = selection.select(v, {"path": EXAMPLE}, "cifar10", token=5)
    assert reads == [EXAMPLE] and again.picture is first.picture and again.token.patch == 5
    assert again.key() == first.key()  # a tab's result is kept across a new token
    random_head = selection.select(v, {"path": EXAMPLE}, "cifar10/random-head")  # another model, the same input
    assert reads == [EXAMPLE] and random_head.picture is first.picture and random_head.key() != first.key()
    digits = selection.select(v, {"path": EXAMPLE}, "mnist")  # another input geometry: what it sees is decoded
    assert reads == [EXAMPLE, EXAMPLE] and digits.pixels.shape[-1] == 1
    copy = tmp_path / "copy.png"  # the same image in another file (uploaded again): read, not decoded again
    shutil.copy(EXAMPLE, copy)
    assert selection.select(v, {"path": str(copy)}, "cifar10").key() == first.key() and len(reads) == 2
    shutil.copy(gallery.items("cifar10")[5][0], copy)  # the same path, another image: decoded
    changed = selection.select(v, {"path": str(copy)}, "cifar10")
    assert reads[2:] == [str(copy)] and not np.array_equal(changed.pixels, first.pixels)
    fresh = selection.select(Visitor(), {"path": EXAMPLE}, "cifar10")  # another visitor: the one decoded, shared
    assert fresh.picture is first.picture and len(reads) == 3
    assert len(v.pictures) <= selection.KEPT_PICTURES


CHANGES = {  # what a page event changes, and the values it may take
    "model_key": ["cifar10", "cifar10/random-head", "mnist"],
    "image": [{"path": p} for p, _ in gallery.items("cifar10")[2:5]],
    "patch": [-1, 0, 17, 40],
    "layer": [1, 3, 6],
    "head": [1, 2, 4],
    "fusion": ["mean", "max"],
}


def explore_pictures_of(values: dict, v: Visitor) -> dict:
    args = {k: val for k, val in values.items() if k != "image"}
    view, _, _, _ = explore.explore_view(values["image"], state=v, **args)
    return {n: getattr(view, n).copy() for n in explore_pictures.PICTURE_NAMES} | {"summary": view.summary}


@pytest.mark.parametrize("seed", [0, 1])
def test_any_sequence_of_changes_draws_what_the_final_selection_draws_at_once(seed):
    rng = random.Random(seed)
    v = Visitor()
    values = {"image": CHANGES["image"][0], "model_key": "cifar10"}
    for _ in range(8):  # one visitor, one change an event, their kept results and pictures reused along the way
        name = rng.choice(list(CHANGES))
        values[name] = rng.choice(CHANGES[name])
        last = explore_pictures_of(values, v)
        walk, _, _ = steps.step_view(values["image"], values["model_key"], 2, values.get("patch", -1), state=v)
    shared.SHARED.clear()  # the reference computes everything anew: nothing of the sequence's results shared
    at_once = explore_pictures_of(values, Visitor())
    for name in at_once:
        assert np.array_equal(last[name], at_once[name]) if name != "summary" else last[name] == at_once[name], name
    alone, _, _ = steps.step_view(values["image"], values["model_key"], 2, values.get("patch", -1), state=Visitor())
    for name in steps.PICTURES:
        assert np.array_equal(getattr(walk, name), getattr(alone, name)), name
