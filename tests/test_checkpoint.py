import json

import pytest
import torch

import vitviz
from vitviz.models import checkpoint


def test_roundtrip(tmp_path, tiny_model):
    vitviz.describe(tiny_model, mean=(0.1, 0.2, 0.3), std=(0.4, 0.5, 0.6), dataset="cifar10")
    checkpoint.save(tmp_path / "m", tiny_model, train_config={"lr": 1}, metrics={"val_acc": 0.5})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.safetensors"]
    m = vitviz.load_model(tmp_path / "m.safetensors")
    assert not m.module.training and m.card.config == tiny_model.config and m.card.classes == tiny_model.card.classes
    assert m.card.mean == (0.1, 0.2, 0.3) and m.card.metrics["val_acc"] == 0.5
    assert m.card.dataset == "cifar10" and m.card.train == {"lr": 1}
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(m(x), tiny_model(x))


def _saved(tmp_path, tiny_model):
    checkpoint.save(tmp_path / "m", tiny_model)
    return tmp_path / "m.safetensors", tmp_path / "m.json"


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda w, j: j.write_text("{not json"), "not valid JSON"),
        (lambda w, j: j.write_text(json.dumps({"format": "other"})), "not a vitviz checkpoint"),
        (lambda w, j: j.write_text(j.read_text().replace('"depth": 2', '"depth": 3')), "missing"),
        (lambda w, j: j.write_text(j.read_text().replace('"embed_dim": 32', '"embed_dim": 48')), "shape"),
        (lambda w, j: w.write_bytes(b"\x80\x02}q\x00." * 10), "not a valid safetensors"),
        (lambda w, j: w.unlink(), "missing"),
        (lambda w, j: j.unlink(), "missing"),
        (lambda w, j: j.write_text(j.read_text().replace('"num_heads": 4', '"num_heads": 5')), "invalid"),
    ],
)
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


# ---------------------------------------------------------------- a save is one set of files


def _kill_after(n_renames, stem, model, metrics):
    """In a child process: save, and die (SIGKILL, no clean-up) after `n_renames` renames."""
    import os
    import signal

    real = os.replace
    count = [0]

    def replace(a, b):
        if count[0] == n_renames:
            os.kill(os.getpid(), signal.SIGKILL)
        count[0] += 1
        real(a, b)

    from vitviz.models import fileset

    fileset.os.replace = replace
    checkpoint.save(stem, model, metrics=metrics, state={"opt.0.exp_avg": torch.full((3,), float(metrics["step"]))})


@pytest.mark.parametrize("n_renames", range(5))
def test_a_kill_at_any_moment_leaves_the_old_set_or_the_new(tmp_path, tiny_model, n_renames):
    import multiprocessing as mp

    stem = tmp_path / "m"
    checkpoint.save(stem, tiny_model, metrics={"step": 1}, state={"opt.0.exp_avg": torch.full((3,), 1.0)})
    old = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    with torch.no_grad():
        tiny_model.head.weight.add_(1.0)
    p = mp.get_context("fork").Process(target=_kill_after, args=(n_renames, stem, tiny_model, {"step": 2}))
    p.start()
    p.join(30)
    m = checkpoint.load(stem)  # recovers: finishes a committed write or drops an uncommitted one
    step = m.card.metrics["step"]
    expect = old if step == 1 else tiny_model.state_dict()
    for k, v in m.state_dict().items():
        torch.testing.assert_close(v, expect[k])
    assert checkpoint.load_state(stem)["opt.0.exp_avg"][0].item() == step  # the resume state matches too
    assert not [f.name for f in tmp_path.iterdir() if f.name.startswith(".")]  # no stray files left
    # with the marker in place (3 renames in: marker, then weights, state ...) the new set wins
    if n_renames >= 1:
        assert step == 2


def test_a_mixed_set_is_refused(tmp_path, tiny_model):
    import shutil

    checkpoint.save(tmp_path / "a", tiny_model, metrics={"step": 1}, state={"x": torch.zeros(1)})
    checkpoint.save(tmp_path / "b", tiny_model, metrics={"step": 2}, state={"x": torch.ones(1)})
    shutil.copyfile(tmp_path / "b.safetensors", tmp_path / "a.safetensors")
    with pytest.raises(checkpoint.CheckpointError, match="different saves"):
        checkpoint.load(tmp_path / "a")
    with pytest.raises(checkpoint.CheckpointError, match="different saves"):
        checkpoint.load_pair(tmp_path / "a.safetensors", tmp_path / "a.json")
    shutil.copyfile(tmp_path / "b.state.safetensors", tmp_path / "c.state.safetensors")
    checkpoint.save(tmp_path / "c", tiny_model)
    assert not (tmp_path / "c.state.safetensors").exists()  # a save without state drops the old one
    checkpoint.save(tmp_path / "c", tiny_model, state={"x": torch.zeros(1)})
    shutil.copyfile(tmp_path / "b.state.safetensors", tmp_path / "c.state.safetensors")
    with pytest.raises(checkpoint.CheckpointError, match="resume state"):
        checkpoint.load_state(tmp_path / "c")


def test_stray_temporary_files_are_cleaned_on_the_next_write(tmp_path, tiny_model):
    (tmp_path / ".m.safetensors.new").write_bytes(b"half a file")
    (tmp_path / ".m.json.tmp1234").write_text("{")
    checkpoint.save(tmp_path / "m", tiny_model)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["m.json", "m.safetensors"]
