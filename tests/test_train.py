import math
import subprocess
import sys
import threading

import pytest
import torch
from helpers import synthetic_cifar

from vitviz.models import checkpoint
from vitviz.training.loop import TrainConfig, train

TINY = dict(preset="tiny", embed_dim=32, depth=2, num_heads=2, batch_size=32, log_every=1, val_size=0)


def events(cfg, **kw):
    return list(train(cfg, data=synthetic_cifar(), **kw))


def test_event_stream_shape():
    evs = events(TrainConfig.of(epochs=2, **TINY))
    kinds = [e["event"] for e in evs]
    assert kinds[0] == "start" and kinds[-1] == "done"
    assert kinds.count("epoch") == 2
    steps = [e for e in evs if e["event"] == "step"]
    assert [e["step"] for e in steps] == list(range(1, 17))
    for e in steps:
        assert e["images_per_s"] > 0 and 0 <= e["progress"] <= 1 and e["lr"] >= 0 and e["eta"] >= 0
    ep = [e for e in evs if e["event"] == "epoch"][-1]
    assert 0 <= ep["val_acc"] <= 1 and math.isfinite(ep["val_loss"])
    assert not evs[-1]["model"].training


def test_loss_falls_when_overfitting_one_batch():
    data = synthetic_cifar(n_train=32)
    cfg = TrainConfig.of(epochs=100, lr=1e-2, warmup=0, augment=False, label_smoothing=0.0, weight_decay=0.0, **TINY)
    losses = [e["loss"] for e in train(cfg, data=data) if e["event"] == "step"]
    assert losses[-1] < 0.4 * losses[0]


def test_learning_rate_schedule_warms_up_and_decays():
    lrs = [e["lr"] for e in events(TrainConfig.of(epochs=4, warmup=1, lr=1e-3, **TINY)) if e["event"] == "step"]
    peak = lrs.index(max(lrs))
    assert 0 < peak < len(lrs) - 1
    assert lrs[0] < max(lrs) and lrs[-1] < 0.1 * max(lrs)


def test_stop_keeps_what_it_learned(tmp_path):
    stop = threading.Event()
    out = tmp_path / "run" / "m"
    seen = []
    for ev in train(TrainConfig.of(epochs=50, **TINY), data=synthetic_cifar(), stop=stop, out=out):
        seen.append(ev)
        if ev["event"] == "step" and ev["step"] == 5:
            stop.set()
    assert seen[-1]["event"] == "stopped" and seen[-1]["step"] == 5
    m = checkpoint.load(out)
    torch.testing.assert_close(m.head.weight, seen[-1]["model"].head.weight.cpu())


def test_nan_loss_stops_with_a_clear_message(monkeypatch):
    import vitviz.training.loop as T

    step = T.train_step

    def diverging(*args):  # as a far too high learning rate would (TrainConfig refuses one above 1)
        loss, logits = step(*args)
        return loss * float("nan"), logits

    monkeypatch.setattr(T, "train_step", diverging)
    evs = events(TrainConfig.of(epochs=2, lr=1.0, warmup=0, **TINY))
    assert evs[-1]["event"] == "error"
    assert "diverged" in evs[-1]["message"] and "learning rate" in evs[-1]["message"]


def test_checkpoint_every_epoch_and_resume(tmp_path):
    out = tmp_path / "m"
    cfg = TrainConfig.of(epochs=3, **TINY)
    data = synthetic_cifar()
    stop = threading.Event()
    for ev in train(cfg, data=data, out=out, stop=stop):
        if ev["event"] == "checkpoint" and ev["epoch"] == 1:
            stop.set()  # as if killed after the first epoch's checkpoint
    state = checkpoint.load_state(out)
    assert state is not None and any(k.startswith("opt.") for k in state)
    evs = list(train(cfg, data=data, out=out, resume=True))
    assert evs[0]["resumed_step"] >= 8
    assert evs[-1]["event"] == "done" and evs[-1]["step"] == 24
    epochs = [e["epoch"] for e in evs if e["event"] == "epoch"]
    assert epochs[-1] == 3
    assert len(checkpoint.read_meta(out)["history"]) >= 3


def test_resume_refuses_a_different_model(tmp_path):
    out = tmp_path / "m"
    events(TrainConfig.of(epochs=1, **TINY), out=out)
    with pytest.raises(checkpoint.CheckpointError, match="different model"):
        list(train(TrainConfig.of(epochs=1, **{**TINY, "depth": 3}), data=synthetic_cifar(), out=out, resume=True))


def test_cli_help_and_bad_data():
    r = subprocess.run([sys.executable, "-m", "vitviz.train", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for flag in (
        "--preset",
        "--dataset",
        "--epochs",
        "--batch-size",
        "--lr",
        "--weight-decay",
        "--warmup",
        "--label-smoothing",
        "--seed",
        "--data",
        "--out",
        "--resume",
    ):
        assert flag in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "vitviz.train", "--data", "/nonexistent/place", "--epochs", "1"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "error:" in r.stderr and "Traceback" not in r.stderr


def test_cli_trains_on_a_zip_and_evaluate_reports(tmp_path):
    from helpers import make_zip

    z = make_zip(tmp_path / "cifar10-jpeg.zip", n_per_class=4)
    env_cache = {"VITVIZ_CACHE": str(tmp_path / "cache")}
    import os

    env = {**os.environ, **env_cache}
    out = tmp_path / "run" / "m"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "vitviz.train",
            "--data",
            str(z),
            "--epochs",
            "1",
            "--embed-dim",
            "32",
            "--depth",
            "1",
            "--num-heads",
            "2",
            "--batch-size",
            "8",
            "--val-size",
            "8",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert "epoch 1" in r.stderr + r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "vitviz.evaluate", "--checkpoint", str(out), "--data", str(z)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert "test accuracy" in r.stdout and "/40)" in r.stdout


def test_keep_epochs_and_average(tmp_path, capsys, monkeypatch):
    from vitviz.training import average

    monkeypatch.delenv("VITVIZ_DATA", raising=False)  # no data: the mean gets no validation figure

    out = tmp_path / "run" / "model"
    events(TrainConfig.of(epochs=4, keep_epochs=2, **TINY), out=out)
    kept = sorted(p.name for p in out.parent.glob("model-epoch*"))
    assert kept == [
        "model-epoch003.json",
        "model-epoch003.safetensors",
        "model-epoch004.json",
        "model-epoch004.safetensors",
    ]
    a, b = checkpoint.load(out.parent / "model-epoch003"), checkpoint.load(out.parent / "model-epoch004")
    assert torch.equal(b.state_dict()["head.weight"], checkpoint.load(out).state_dict()["head.weight"])

    avg = tmp_path / "avg" / "model"
    assert (
        average.main([str(out.parent / "model-epoch003"), str(out.parent / "model-epoch004"), "--out", str(avg)]) == 0
    )
    m = checkpoint.load(avg)
    for k, v in m.state_dict().items():
        torch.testing.assert_close(v, (a.state_dict()[k] + b.state_dict()[k]) / 2)
    assert [s["epoch"] for s in m.card.metrics["averaged_from"]] == [3, 4]
    assert "val_acc" not in m.card.metrics  # a source's figure would not describe the mean

    other = tmp_path / "other" / "model"
    events(TrainConfig.of(epochs=1, **{**TINY, "depth": 3}), out=other)
    assert average.main([str(out), str(other), "--out", str(tmp_path / "bad")]) == 1
    assert "different model" in capsys.readouterr().err


def test_average_measures_validation_with_data(tmp_path, small_data, capsys):
    from vitviz.training import average

    out = tmp_path / "run" / "model"
    events(TrainConfig.of(epochs=2, keep_epochs=2, **{**TINY, "val_size": 24}), out=out)
    avg = tmp_path / "avg"
    two_epochs = [str(out.parent / "model-epoch001"), str(out.parent / "model-epoch002")]
    rc = average.main([*two_epochs, "--out", str(avg), "--data", str(small_data)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "validation accuracy" in printed
    val = checkpoint.read_meta(avg)["metrics"]["val_acc"]
    assert 0.0 <= val <= 1.0 and f"{val:.4f}" in printed

    # a run that held out nothing gets no (meaningless) validation figure
    events(TrainConfig.of(epochs=2, keep_epochs=2, **TINY), out=out)
    assert average.main([*two_epochs, "--out", str(avg), "--data", str(small_data)]) == 0
    assert "no validation" in capsys.readouterr().err
    assert "val_acc" not in checkpoint.read_meta(avg)["metrics"]


def test_live_runs_prune_old_folders(tmp_path):
    import os

    from vitviz.runtime.scratch import prune

    RUN_PREFIX = "vitviz-run-"

    for i in range(5):
        d = tmp_path / f"{RUN_PREFIX}{i}"
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"x")
        os.utime(d, (1000 + i, 1000 + i))
    (tmp_path / "unrelated").mkdir()
    prune("run", keep=2, where=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"{RUN_PREFIX}3", f"{RUN_PREFIX}4", "unrelated"])


def test_quick_validations_come_on_time_and_match_an_evaluation_by_hand():
    from vitviz.data.datasets import Split
    from vitviz.training.loop import evaluate

    data = synthetic_cifar(n_train=512, n_val=64)
    cfg = TrainConfig.of(
        epochs=50,
        time_budget=2.5,
        quick_val_every_s=0.5,
        quick_val_images=40,
        **{**TINY, "val_size": 64, "snapshot_every": 1},
    )
    seen = []
    for ev in train(cfg, data=data, snapshots=True):
        if ev["event"] == "val":
            seen.append(ev)
            assert ev["images"] == 40 and 0 <= ev["val_acc"] <= 1
        if ev["event"] == "snapshot" and seen and ev["step"] == seen[-1]["step"]:
            model = ev["model"]
            loss, acc = evaluate(model, Split(data.val.x[:40], data.val.y[:40]))
            assert acc == pytest.approx(seen[-1]["val_acc"]) and loss == pytest.approx(seen[-1]["val_loss"], rel=1e-3)
    assert len(seen) >= 2 and seen[0]["elapsed"] >= 0.25  # the first after half the interval, then one each
    assert all(b["elapsed"] - a["elapsed"] >= 0.5 - 1e-3 and b["step"] > a["step"] for a, b in zip(seen, seen[1:]))


def test_dropped_tokens_are_a_random_set_of_patches_with_their_own_positions():
    from vitviz.models.vit import ViT, make_config

    torch.manual_seed(0)
    model = ViT(make_config("tiny", embed_dim=32, depth=2, num_heads=2)).eval()
    x = torch.randn(3, 3, 32, 32)
    full = model.forward_intermediates(x, return_attention=False)
    part = model.forward_intermediates(x, return_attention=False, keep=16)
    assert part["input"].shape == (3, 17, 32) and part["tokens"][-1].shape == (3, 17, 32)
    assert torch.equal(part["input"][:, 0], full["input"][:, 0])  # CLS always kept
    for b in range(3):  # each kept token is one of this image's patch tokens, position added, none twice
        same = (part["input"][b, 1:, None] == full["input"][b, None, 1:]).all(-1)  # (16 kept, 64 patches)
        hits = same.nonzero()[:, 1]
        assert len(hits) == 16 and len(set(hits.tolist())) == 16
    assert not torch.equal(part["input"][0, 1:], part["input"][1, 1:])  # another set per image


def test_tokens_are_dropped_only_in_the_early_part_of_a_run():
    from vitviz.training.loop import tokens_kept

    cfg = TrainConfig.of(token_drop=0.75, token_drop_until=0.4, **TINY)
    assert tokens_kept(cfg, 0.0, 64) == 16 and tokens_kept(cfg, 0.39, 64) == 16  # a quarter of 64 kept
    assert tokens_kept(cfg, 0.4, 64) == 0 and tokens_kept(cfg, 0.9, 64) == 0  # then every token
    assert tokens_kept(TrainConfig.of(**TINY), 0.0, 64) == 0


def test_the_weight_average_follows_its_formula_and_the_run_reports_it():
    from vitviz.training.parts import weight_average

    torch.manual_seed(0)
    net = torch.nn.Linear(3, 2)
    avg = weight_average(net, 0.9)
    expect = None
    for n in range(30):  # the n-th update: the first copies, each later one an average with the warmed-up decay
        with torch.no_grad():
            for p in net.parameters():
                p.add_(torch.randn_like(p))
        avg.update_parameters(net)
        d = min(0.9, (1 + n) / (10 + n))
        now = [p.detach().clone() for p in net.parameters()]
        expect = now if expect is None else [d * e + (1 - d) * p for e, p in zip(expect, now)]
    assert not avg.module.training and all(p.requires_grad for p in avg.module.parameters())
    for e, a in zip(expect, avg.module.parameters()):
        assert torch.allclose(e, a, atol=1e-6)
    from vitviz.explain import interpret
    from vitviz.models.hub import loaded

    done = events(TrainConfig.of(epochs=1, ema=0.9, **TINY))[-1]
    assert done["event"] == "done" and not done["model"].training
    assert interpret.legrad(loaded(done["model"]), torch.randn(1, 3, 32, 32)).shape == (
        1,
        64,
    )  # the average explains as any model
