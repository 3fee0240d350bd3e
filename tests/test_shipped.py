"""The shipped checkpoints: they load with no data set and no internet, they are as good as
their model cards say, and the weights behind the card are the ones shipped."""

import json
import socket
from pathlib import Path

import pytest
import torch
from PIL import Image

import vitviz
from vitviz.data import gallery
from vitviz.models.hub import SHIPPED

# (recorded test accuracy at least, accuracy on the 100 shipped gallery test images at least).
# The recorded bars are issue 3's: 80% on CIFAR-10, 98.5% on MNIST.
BARS = {"cifar10": (0.80, 0.70), "mnist": (0.985, 0.95)}


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No data set anywhere and no network: any connection attempt fails the test."""
    monkeypatch.setenv("VITVIZ_DATA", str(tmp_path / "nothing-here"))
    monkeypatch.setenv("VITVIZ_CACHE", str(tmp_path / "cache"))

    def refuse(*a, **k):
        raise AssertionError("loading a shipped model tried to reach the network")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_model_loads_offline_and_meets_its_bar(name, offline):
    model = vitviz.load_model(None if name == "cifar10" else name)
    assert not model.module.training
    assert len(model.card.classes) == model.card.config.num_classes == 10

    meta = json.loads(SHIPPED[name].with_suffix(".json").read_text())
    recorded_test, gallery_bar = BARS[name]
    assert meta["metrics"]["test_acc"] >= recorded_test, f"{name}: the card's test accuracy is below the bar"

    for f in SHIPPED[name].parent.iterdir():
        assert f.stat().st_size <= 20 * 2**20, f"{f} is over 20 MB"

    items = gallery.items(name)
    assert len(items) == 100
    x = torch.cat([vitviz.preprocess(Image.open(path), model) for path, _ in items])
    truth = torch.tensor([model.card.classes.index(Path(path).stem.rsplit("_", 1)[0]) for path, _ in items])
    with torch.no_grad():
        acc = (model(x).argmax(1) == truth).float().mean().item()
    assert acc >= gallery_bar, f"{name}: {acc:.0%} on the gallery's test images"
