"""`vitviz explain` and `vitviz faithfulness`: the commands for many images.

explain writes each map of a folder's images as PNG, .npy and JSON, for our ViT and a transformers CLIP, each
map equal to the Python API's for that image alone. faithfulness sharded over two gloo processes by torchrun
gives the table one process gives, and a run stopped half-way continues to the same table; Chefer et al.'s
perturbation is checked against a reference written here from the paper's definition.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hf_cache import save
from PIL import Image

import vitviz
from vitviz import explaining
from vitviz.data import gallery
from vitviz.explain import faithfulness as faith
from vitviz.explain import methods

pytestmark = pytest.mark.usefixtures("shared_data")


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    folder = tmp_path_factory.mktemp("three")
    for k, (path, _) in enumerate(gallery.items("cifar10")[:3]):
        Image.open(path).save(folder / f"photo{k}.png")
    return folder


def test_explain_writes_every_map_of_a_folder_as_the_python_api_draws_it(three, tmp_path):
    out = tmp_path / "ours"
    assert explaining.main([str(three), "--method", "LeGrad", "attention rollout", "--out", str(out)]) == 0
    model = vitviz.load_model("cifar10")
    for k in range(3):
        folder = out / f"photo{k}"
        record = json.loads((folder / "explained.json").read_text())
        x = vitviz.preprocess(Image.open(three / f"photo{k}.png"), model)
        cls = model.card.classes.index(record["explains"])
        assert cls == int(model(x).argmax())  # the predicted class, explained
        for m, stem in (("LeGrad", "LeGrad"), ("attention rollout", "attention-rollout")):
            alone = methods.relevance(model, x, m, cls)[0].view(*model.layout.grid).numpy()
            assert np.allclose(np.load(folder / f"{stem}.npy"), alone, atol=1e-5)
            png = Image.open(folder / f"{stem}.png")
            assert png.height > png.width > 100  # the map with its title and colour bar under it
    assert len(json.loads((out / "index.json").read_text())) == 3


def test_explain_a_clip_model_on_labels_and_from_a_patch(three, tmp_path):
    clip = save(tmp_path / "clip", "clip")
    out = tmp_path / "clip-maps"
    argv = [str(three), "--model", f"hf:{clip}", "--labels", "red car, small dog, blue bird", "--out", str(out)]
    assert explaining.main([*argv, "--method", "gradient rollout", "attention rollout", "--token", "5"]) == 0
    model = vitviz.with_labels(vitviz.load_model(f"hf:{clip}"), "red car, small dog, blue bird")
    record = json.loads((out / "photo1" / "explained.json").read_text())
    assert set(record["top5"]) == {"red car", "small dog", "blue bird"} and record["settings"]["token"] == "patch 5"
    x = vitviz.preprocess(Image.open(three / "photo1.png"), model)
    cls = model.card.classes.index(record["explains"])
    alone = methods.relevance(model, x, "gradient rollout", cls)[0].view(*model.layout.grid).numpy()
    assert np.allclose(np.load(out / "photo1" / "gradient-rollout.npy"), alone, atol=1e-5)
    from vitviz.explain import interpret

    attn = torch.stack(interpret.intermediates(model, x)["attn"], 1).float()
    row = interpret.attention_rollout(attn)[0, model.layout.token(5).row, model.layout.num_prefix :]
    assert np.allclose(np.load(out / "photo1" / "attention-rollout.npy").ravel(), row.numpy(), atol=1e-6)


def test_explain_says_what_is_wrong(three, tmp_path, capsys):
    assert explaining.main([str(three), "--method", "bogus", "--out", str(tmp_path)]) == 1
    assert "unknown method 'bogus'" in capsys.readouterr().err
    assert explaining.main([str(tmp_path / "nothing"), "--out", str(tmp_path)]) == 1
    assert "there is no file or folder" in capsys.readouterr().err
    (three / "broken.png").write_bytes(b"not an image")
    try:
        assert explaining.main([str(three), "--out", str(tmp_path / "b")]) == 0  # the others are explained
        index = json.loads((tmp_path / "b" / "index.json").read_text())
        assert sum("error" in r for r in index) == 1 and len(index) == 4
    finally:
        (three / "broken.png").unlink()


def reference_hits(model, pixels: np.ndarray, relevance: torch.Tensor, target: int) -> list[int]:
    """Chefer et al.'s positive perturbation for one image, from the paper's code's definition: for 10%, ..., 90%,
    the int(P * step) patches with the highest relevance set to black in the image (0 before the normalisation),
    then whether the model still predicts `target`."""
    g, patch = model.layout.grid[0], model.layout.patch_size
    P = g * g
    order = sorted(range(P), key=lambda p: (-float(relevance[p]), p))
    hits = []
    for step in [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]:
        img = pixels.copy()
        for p in order[: int(P * step)]:
            r, c = divmod(p, g)
            img[r * patch : (r + 1) * patch, c * patch : (c + 1) * patch] = 0
        with torch.no_grad():
            hits.append(int(int(model(model.tensor(img)).argmax()) == target))
    return hits


def test_perturbation_follows_the_papers_definition():
    model = vitviz.load_model("cifar10")
    pixels = [np.asarray(Image.open(p).convert("RGB")) for p, _ in gallery.items("cifar10")[:6]]
    x = model.tensor(pixels)
    pred = model(x).argmax(1)
    rel = methods.relevance(model, x, "attention rollout")
    pos = faith.perturbation(model, x, rel, pred)
    neg = faith.perturbation(model, x, -rel, pred)
    for i in range(len(pixels)):
        assert pos[i].int().tolist() == reference_hits(model, pixels[i], rel[i], int(pred[i]))
        assert neg[i].int().tolist() == reference_hits(model, pixels[i], -rel[i], int(pred[i]))
        area = sum((a + b) / 2 * 0.1 for a, b in zip(pos[i].tolist(), pos[i, 1:].tolist())) * 100
        assert float(faith.area(pos[i : i + 1])[0]) == pytest.approx(area)
    assert pos.mean() < neg.mean()  # the patches it ranks first matter more than those it ranks last


def faithfulness(out: Path, procs: int = 1, **popen) -> subprocess.Popen:
    args = ["-m", "vitviz", "faithfulness", "--images", "64", "--batch", "8", "--steps", "4", "--precision", "fp32"]
    args += ["--maps", "gradient rollout", "random order", "--bootstrap", "200", "--out", str(out)]
    launcher = [] if procs == 1 else ["-m", "torch.distributed.run", "--nproc_per_node", str(procs)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, *launcher, *args], env=env, text=True, **popen)


def test_two_processes_give_the_table_of_one_and_a_stopped_run_resumes_to_it(tmp_path):
    one, two, stopped = tmp_path / "one", tmp_path / "two", tmp_path / "stopped"
    assert faithfulness(one).wait(300) == 0
    assert faithfulness(two, procs=2).wait(300) == 0
    table = (one / "table.md").read_text()
    assert table == (two / "table.md").read_text() and "gradient rollout" in table
    assert (
        json.loads((one / "results.json").read_text())["maps"] == json.loads((two / "results.json").read_text())["maps"]
    )
    run = faithfulness(stopped)
    deadline = time.time() + 240
    while len(list((stopped / "batches").glob("*.pt"))) < 3 and time.time() < deadline and run.poll() is None:
        time.sleep(0.2)
    run.kill()
    run.wait(30)
    done = {p: p.stat().st_mtime_ns for p in (stopped / "batches").glob("*.pt")}
    assert 3 <= len(done) < 8 and not (stopped / "table.md").exists()
    assert faithfulness(stopped).wait(300) == 0
    assert (stopped / "table.md").read_text() == table
    assert all(p.stat().st_mtime_ns == t for p, t in done.items())  # read again, not made again
    other = subprocess.run(
        [sys.executable, "-m", "vitviz", "faithfulness", "--images", "32", "--out", str(one)],
        capture_output=True,
        text=True,
    )
    assert other.returncode == 1 and "holds a run with other settings (images" in other.stderr
