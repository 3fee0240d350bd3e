"""Results shared by every visitor and API caller (vitviz.app.serving.shared): computed once for one model record
and one image file, handed only to a call that would compute the very same thing, bounded by their memory."""

import gc
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from helpers import EXAMPLE
from PIL import Image

from vitviz.app import selection
from vitviz.app.serving import shared
from vitviz.app.serving.picfiles import ReplyFiles
from vitviz.app.state import Visitor
from vitviz.app.tabs import explore
from vitviz.pictures import drawn, explanation
from vitviz.pictures import explore as explore_pictures
from vitviz.pictures.style import Style, drawn_with
from vitviz.runtime.shared import SharedResults, nbytes_of


class Record:
    """A stand-in for a model record: anything that can be referred to weakly."""


def test_a_result_is_computed_once_for_callers_at_the_same_moment():
    cache, owner, made = SharedResults(lambda: 1), Record(), []

    def compute():
        made.append(1)
        time.sleep(0.2)  # the others ask while this one computes
        return np.ones(10)

    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda _: cache.get(owner, ("a",), compute, nbytes_of), range(6)))
    assert len(made) == 1 and all(g is got[0] for g in got)
    assert cache.get(owner, ("a",), lambda: pytest.fail("computed again"), nbytes_of) is got[0]


def test_a_result_is_only_handed_to_the_same_record_and_key():
    cache, one, other = SharedResults(lambda: 1), Record(), Record()
    a = cache.get(one, ("img", 1), lambda: np.zeros(3), nbytes_of)
    assert cache.get(other, ("img", 1), lambda: np.ones(3), nbytes_of) is not a  # another model
    assert cache.get(one, ("img", 2), lambda: np.ones(3), nbytes_of) is not a  # another class
    assert len(cache) == 3
    del one
    gc.collect()  # a record that is gone takes its results with it
    assert len(cache) == 1 and cache.get(other, ("img", 1), lambda: None, lambda v: 0) is not None


def test_the_results_are_bounded_by_their_memory_least_recently_used_first():
    cache, owner = SharedResults(lambda: 1), Record()  # 1 MiB
    quarter = 2**18
    for k in range(4):
        cache.get(owner, (k,), lambda: np.zeros(quarter, np.uint8), nbytes_of)
    cache.get(owner, (0,), lambda: pytest.fail("0 is kept"), nbytes_of)  # 0 now the most recently used
    cache.get(owner, (4,), lambda: np.zeros(quarter, np.uint8), nbytes_of)
    assert cache.nbytes() <= 2**20 and len(cache) == 4
    kept = {k for k in range(5) if cache.get(owner, (k,), lambda: None, lambda v: 0) is not None}
    assert kept == {0, 2, 3, 4}  # 1 went: the least recently used
    too_big = cache.get(owner, ("big",), lambda: np.zeros(2**21, np.uint8), nbytes_of)
    assert too_big.nbytes == 2**21 and cache.nbytes() <= 2**20  # answered, never kept


def test_a_result_that_grows_is_measured_again():
    cache, owner = SharedResults(lambda: 1), Record()
    growing = cache.get(owner, ("grows",), lambda: {"a": np.zeros(2**18, np.uint8)}, nbytes_of)
    growing["b"] = np.zeros(2**19 + 2**18, np.uint8)  # as an explanation gains maps and pictures: now 1 MiB
    cache.get(owner, ("next",), lambda: np.zeros(2**10, np.uint8), nbytes_of)
    assert cache.nbytes() <= 2**20 and len(cache) == 1


def test_a_failed_computation_is_not_kept_and_the_waiting_callers_compute_their_own():
    cache, owner, calls = SharedResults(lambda: 1), Record(), []
    started = threading.Event()

    def failing():
        calls.append("fail")
        started.set()
        time.sleep(0.2)
        raise ValueError("no")

    def waiting():
        started.wait(5)
        return cache.get(owner, ("k",), lambda: calls.append("own") or np.ones(2), nbytes_of)

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(cache.get, owner, ("k",), failing, nbytes_of)
        second = pool.submit(waiting)
        with pytest.raises(ValueError):
            first.result()
        assert np.array_equal(second.result(), np.ones(2))
    assert calls == ["fail", "own"]


def test_api_callers_share_the_analysis_and_the_pictures_and_get_what_a_lone_call_computes(monkeypatch):
    analysed = []
    real = explanation.analyse
    monkeypatch.setattr(explanation, "analyse", lambda *a, **k: analysed.append(1) or real(*a, **k))
    shared.SHARED.clear()
    first, _, ex1, _ = explore.explore_view({"path": EXAMPLE}, "cifar10", patch=5, layer=2, state=None)
    second, _, ex2, _ = explore.explore_view({"path": EXAMPLE}, "cifar10", patch=9, layer=3, state=None)
    assert len(analysed) == 1 and ex2 is ex1  # two callers without state: one analysis
    assert second.class_map is first.class_map and second.lens is first.lens  # the same options: drawn once
    assert second.rollout is not first.rollout  # another token: drawn for it
    monkeypatch.setattr(shared.SHARED, "bound", lambda: 0)  # nothing shared: each call computes alone
    shared.SHARED.clear()
    alone, _, ex3, _ = explore.explore_view({"path": EXAMPLE}, "cifar10", patch=9, layer=3, state=None)
    assert ex3 is not ex1 and len(analysed) == 2
    for name in explore_pictures.PICTURE_NAMES:
        assert np.array_equal(getattr(second, name), getattr(alone, name)), name
    assert second.summary == alone.summary


def test_an_explanation_draws_a_picture_once_for_each_style():
    v = Visitor()
    s = selection.select(v, {"path": EXAMPLE}, "cifar10")
    ex = explanation.analyse(s.model, s.pixels, None)
    o = explore_pictures.Options(layer=2, head=1)
    one, _ = explore_pictures.render_explore(s.model, ex, o)
    two, fresh = explore_pictures.render_explore(s.model, ex, o)  # another visitor's cache: drawn now for them
    assert fresh == set(explore_pictures.PICTURE_NAMES) and two.heads is one.heads
    with drawn_with(Style.of(large=True, numbers=True, narrow=False)):
        large, _ = explore_pictures.render_explore(s.model, ex, o)
    assert large.heads is not one.heads and large.heads.shape != one.heads.shape
    assert ex.kept() == 2 * len(explore_pictures.PICTURE_NAMES) + 1  # and rollout up to each layer, once


def test_the_pictures_drawn_are_kept_within_their_bound_and_go_with_their_result(monkeypatch):
    monkeypatch.setattr(drawn.PICTURES, "bound", lambda: 1)  # 1 MiB
    drawn.PICTURES.clear()
    result, made = drawn.Drawn(), []

    def picture(k):
        made.append(k)
        return np.zeros(2**18 + k, np.uint8)  # a quarter of the bound

    for k in range(5):
        result.once(("p", k), lambda k=k: picture(k))
    assert result.kept() == 3  # the oldest two let go
    result.once(("p", 4), lambda: picture(99))  # kept: not drawn again
    result.once(("p", 0), lambda: picture(0))  # let go: drawn again
    assert made == [0, 1, 2, 3, 4, 0]
    other = drawn.Drawn()
    assert other.once(("p", 4), lambda: "its own") == "its own"  # another result's pictures are its own
    del result
    gc.collect()
    assert len(drawn.PICTURES) == 1  # the result gone, its pictures go with it


def test_a_picture_encoded_once_is_linked_into_another_visitors_folder(tmp_path):
    from vitviz.app.serving import picfiles

    pic = np.random.default_rng(0).integers(0, 255, (16, 16, 3), dtype=np.uint8)
    first = picfiles.write_once(pic, tmp_path / "a.jpg")
    second = picfiles.write_once(pic, tmp_path / "b.jpg")
    assert os.stat(first).st_ino == os.stat(second).st_ino  # one encoding, two names
    os.remove(first)  # one name deleted: the other stays, and a third is linked from it
    third = picfiles.write_once(pic, tmp_path / "c.jpg")
    assert os.path.exists(second) and open(third, "rb").read() == open(second, "rb").read()
    os.remove(second), os.remove(third)
    fourth = picfiles.write_once(pic, tmp_path / "d.jpg")  # every file gone: encoded again
    assert np.array_equal(
        np.asarray(Image.open(fourth)), np.asarray(Image.open(picfiles.write_picture(pic, tmp_path / "e.jpg")))
    )


def test_a_reply_names_the_file_of_a_picture_written_before_while_the_picture_lives(tmp_path):
    files = ReplyFiles(ttl_s=300)
    pic = np.zeros((8, 8, 3), np.uint8)
    a = files.paths({"x": pic})["x"]
    assert files.paths({"y": pic})["y"] == a  # the same picture, asked again under any name
    assert files.paths({"x": pic.copy()})["x"] != a  # an equal copy is another picture: written anew
    os.remove(a)  # swept: written again
    b = files.paths({"x": pic})["x"]
    assert b != a and os.path.exists(b)
    del pic
    gc.collect()
    assert not files._written  # the picture gone, its entry goes


def test_a_decoded_image_is_shared_by_visitors_sending_the_same_file():
    shared.SHARED.clear()
    one = selection.select(Visitor(), {"path": EXAMPLE}, "cifar10")
    two = selection.select(Visitor(), {"path": EXAMPLE}, "cifar10")
    assert two.picture is one.picture
    digits = selection.select(Visitor(), {"path": EXAMPLE}, "mnist")  # another geometry: its own
    assert digits.picture is not one.picture and digits.pixels.shape[-1] == 1


def test_nbytes_counts_tensors_arrays_and_images():
    value = {"t": torch.zeros(4, dtype=torch.float32), "a": [np.zeros(3, np.uint8)], "im": Image.new("RGB", (2, 5))}
    assert nbytes_of(value) == 16 + 3 + 30
