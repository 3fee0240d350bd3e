import json

import pytest
import torch

import vitviz
from vitviz import checkpoint


def test_roundtrip(tmp_path, tiny_model):
    vitviz.describe(tiny_model, mean=(0.1, 0.2, 0.3), std=(0.4, 0.5, 0.6), dataset="cifar10")
    checkpoint.save(tmp_path / "m", tiny_model, train_config={"lr": 1}, metrics={"val_acc": 0.5})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.safetensors"]
    m = vitviz.load_model(tmp_path / "m.safetensors")
    assert not m.training and m.card.config == tiny_model.config and m.card.classes == tiny_model.card.classes
    assert m.card.mean == (0.1, 0.2, 0.3) and m.card.metrics["val_acc"] == 0.5
    assert m.card.dataset == "cifar10" and m.card.train == {"lr": 1}
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(m(x), tiny_model(x))


def _saved(tmp_path, tiny_model):
    checkpoint.save(tmp_path / "m", tiny_model)
    return tmp_path / "m.safetensors", tmp_path / "m.json"


@pytest.mark.parametrize("mutate, words", [
    (lambda w, j: j.write_text("{not json"), "not valid JSON"),
    (lambda w, j: j.write_text(json.dumps({"format": "other"})), "not a vitviz checkpoint"),
    (lambda w, j: j.write_text(j.read_text().replace('"depth": 2', '"depth": 3')), "missing"),
    (lambda w, j: j.write_text(j.read_text().replace('"embed_dim": 32', '"embed_dim": 48')), "shape"),
    (lambda w, j: w.write_bytes(b"\x80\x02}q\x00." * 10), "not a valid safetensors"),
    (lambda w, j: w.unlink(), "missing"),
    (lambda w, j: j.unlink(), "missing"),
    (lambda w, j: j.write_text(j.read_text().replace('"num_heads": 4', '"num_heads": 5')), "invalid"),
])
def test_invalid_checkpoints_give_clear_errors(tmp_path, tiny_model, mutate, words):
    w, j = _saved(tmp_path, tiny_model)
    mutate(w, j)
    with pytest.raises(checkpoint.CheckpointError, match=words):
        checkpoint.load(w)


def test_pickle_is_never_loaded(tmp_path, tiny_model):
    import pickle

    w, j = _saved(tmp_path, tiny_model)
    w.write_bytes(pickle.dumps({"a": torch.zeros(2)}))
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.load_pair(w, j)


def test_nan_weights_rejected(tmp_path, tiny_model):
    with torch.no_grad():
        tiny_model.head.weight[0, 0] = float("nan")
    w, _ = _saved(tmp_path, tiny_model)
    with pytest.raises(checkpoint.CheckpointError, match="NaN"):
        checkpoint.load(w)
