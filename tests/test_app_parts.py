"""The app's parts on their own: the model store, the per-model cache, the gallery choice, the clicks."""

import gc
import threading
import time
import zipfile

import gradio as gr
import numpy as np
import pytest
import torch
from helpers import Evt

from vitviz.app import choices, menu, switch
from vitviz.app.state import Visitor
from vitviz.app.tabs import explore
from vitviz.app.tabs import model as model_tab
from vitviz.data import gallery
from vitviz.models import checkpoint
from vitviz.models.bound import ModelError
from vitviz.models.hub import load_model
from vitviz.pictures import explanation
from vitviz.pictures import explore as explore_pictures
from vitviz.training.config import ConfigError, TrainConfig

EXAMPLE = gallery.items("cifar10")[3][0]


def uploaded(tmp_path, name):
    """A visitor whose uploaded checkpoint is a copy of the shipped `name` model."""
    checkpoint.save(tmp_path / name, load_model(name))
    v = Visitor()
    menu.upload_checkpoint([str(tmp_path / f"{name}.safetensors"), str(tmp_path / f"{name}.json")], v)
    return v


def test_pick_example_follows_the_model_not_the_menu_key(tmp_path):
    v = uploaded(tmp_path, "mnist")
    assert v.models["upload"].card.kind == "uploaded" and v.models["upload"].card.dataset == "mnist"
    path, v, note, photo_switch = choices.pick_example("upload", v, Evt(3))
    assert path == gallery.items("mnist")[3][0] and not note and photo_switch["visible"] is False
    updates = switch.controls_for("upload", v)
    assert [p for p, _ in updates[4]["value"]] == [p for p, _ in gallery.items("mnist")]
    assert updates[4]["selected_index"] == 3  # the gallery marks the digit shown
    assert choices.pick_example("cifar10", v, Evt(5))[0] == gallery.items("cifar10")[5][0]


def test_position_click_redraws_only_the_highlight(monkeypatch):
    model_tab.model_view("cifar10")  # fills the cache
    calls = []
    monkeypatch.setattr(explanation, "summarise_model", lambda *a: calls.append(a))
    cfg = load_model("cifar10").card.config
    size = explanation.pos_tile_size(cfg.grid_size)
    # the centre of the tile in row 2, column 5
    pos, tiles, large = model_tab.pos_click(
        "cifar10", None, Evt([2 + 5 * (size + 2) + size // 2, 2 + 2 * (size + 2) + size // 2])
    )
    assert pos == 2 * cfg.grid_size + 5 and not calls
    s = model_tab.summary_of(menu.MODELS.get("cifar10"))
    expect = explanation.position_pictures(s, cfg, pos)
    assert np.array_equal(tiles, expect[0]) and np.array_equal(large, expect[1])
    other = explanation.position_pictures(s, cfg, 0)
    assert not np.array_equal(tiles, other[0])  # the highlight moved


def test_model_cache_is_bounded_and_forgets_dead_models(tiny_model):
    cache = model_tab.ModelCache(size=2)
    made = []
    ms = [torch.nn.Linear(1, 1) for _ in range(3)]
    for m in ms:
        cache.get(m, lambda: made.append(1) or len(made))
    assert len(cache) == 2 and cache.get(ms[2], lambda: -1) == 3  # the oldest went first
    del ms[2], m
    gc.collect()
    assert len(cache) == 1


def test_one_slow_load_does_not_hold_up_another_model():
    """The slow load waits until the fast one has returned: were the fast one held behind the slow one's lock,
    it would never return (the slow load gives up after 30 s, and the test fails)."""
    started, fast_done = threading.Event(), threading.Event()

    def loader(key):
        if key == "slow":
            started.set()
            fast_done.wait(30)
        return key.upper()

    store = menu.SharedModels(loader)
    t = threading.Thread(target=store.get, args=("slow",))
    t.start()
    assert started.wait(30)
    assert store.get("fast") == "FAST"
    assert t.is_alive()  # the slow load is still under way: the fast one did not wait for it
    fast_done.set()
    t.join(30)
    assert store.get("slow") == "SLOW"


def test_a_failed_load_is_remembered_for_a_while():
    tries = []

    def loader(key):
        tries.append(key)
        raise ModelError("no internet here")

    store = menu.SharedModels(loader, retry_after=0.3)
    for _ in range(3):
        with pytest.raises(ModelError, match="no internet"):
            store.get("vit_b_16")
    assert len(tries) == 1
    time.sleep(0.35)
    with pytest.raises(ModelError):
        store.get("vit_b_16")
    assert len(tries) == 2


def test_export_files_hold_every_picture_and_the_attention():
    files, _ = explore.export({"path": EXAMPLE}, patch=9)
    zpath, npath = files
    v, _, ex, _ = explore.explore_view({"path": EXAMPLE}, patch=9)
    with zipfile.ZipFile(zpath) as z:
        names = sorted(z.namelist())
        assert names == sorted(f"{explanation.EXPORT_NAMES[k]}.png" for k in v.pictures())
        assert len(names) == len(explore_pictures.PICTURE_NAMES)
        for k, pic in v.pictures().items():  # lossless: the page's picture, its title and colour bar included
            from PIL import Image

            assert np.array_equal(np.asarray(Image.open(z.open(f"{explanation.EXPORT_NAMES[k]}.png"))), pic), k
    attn = np.load(npath)
    np.testing.assert_allclose(attn, ex.attn.numpy())
    np.testing.assert_allclose(attn.sum(-1), 1.0, atol=1e-4)  # softmax rows


@pytest.mark.parametrize(
    "values, words",
    [
        (dict(depth="abc"), "must be a number"),
        (dict(depth=float("inf")), "finite"),
        (dict(embed_dim=float("nan")), "finite"),
        (dict(patch_size=0), "does not divide"),
        (dict(patch_size=-4), "does not divide"),
        (dict(seed=2**70), "seed"),
        (dict(batch_size=2.5), "whole number"),
        (dict(subset=3), "at least one batch"),
        (dict(embed_dim=100, num_heads=3), "divisible"),
        (dict(lr=0), "more than 0"),
        (dict(dataset="imagenet"), "data set"),
        (dict(wobble=1), "no training setting"),
    ],
)
def test_train_config_refuses_with_a_sentence(values, words):
    with pytest.raises(ConfigError, match=words) as e:
        TrainConfig.parse(**values)
    msg = str(e.value)
    assert msg[0].isupper() and msg.endswith(".") and "Traceback" not in msg


def test_train_config_parses_loose_values():
    cfg = TrainConfig.parse(depth="3", embed_dim=64.0, num_heads="4", lr="0.01", augment="false", subset="")
    a, o = cfg.arch, cfg.optim
    assert (a.depth, a.embed_dim, a.num_heads, o.lr, o.augment, cfg.budget.subset) == (3, 64, 4, 0.01, False, 0)


def test_bad_explore_values_get_sentences():
    for kw, words in (
        (dict(layer="abc"), "must be a number"),
        (dict(head=float("inf")), "finite"),
        (dict(patch=float("nan")), "finite"),
        (dict(patch=64), "Token 64 is not in this model"),
        (dict(discard=float("-inf")), "finite"),
        (dict(alpha="x"), "must be a number"),
    ):
        with pytest.raises(gr.Error, match=words):
            explore.explore_view({"path": EXAMPLE}, **kw)
