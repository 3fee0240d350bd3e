"""`python -m vitviz.space` writes a folder that Spaces accepts: front matter, pins, LFS rules, sizes; it boots."""

import fnmatch
import time

import gradio
import pytest
from helpers import EXAMPLE, serve_app

from vitviz import space
from vitviz.runtime import zerogpu


def front_matter(readme: str) -> dict:
    """The front matter's `key: value` lines, and its one list (preload_from_hub) as a list."""
    head, out, key = readme.split("---")[1], {}, None
    for line in head.strip().splitlines():
        if line.startswith("  - "):
            out[key].append(line[4:])
        elif line.endswith(":"):
            key = line[:-1]
            out[key] = []
        else:
            k, v = line.split(": ", 1)
            out[k] = v.strip('"')
    return out


@pytest.fixture(scope="module", params=["cpu", "zerogpu"])
def folder(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "space"
    assert space.main([str(out), "--hardware", request.param]) == 0
    return request.param, out


def test_front_matter_and_requirements(folder):
    hardware, out = folder
    fm = front_matter((out / "README.md").read_text())
    assert fm["sdk"] == "gradio" and fm["sdk_version"] == gradio.__version__ and (out / fm["app_file"]).is_file()
    assert fm["python_version"] == {"cpu": "3.11", "zerogpu": "3.12"}[hardware]
    assert "timm/deit_small_patch16_224.fb_in1k model.safetensors" in fm["preload_from_hub"]
    clip = next(p for p in fm["preload_from_hub"] if p.startswith("openai/clip-vit-base-patch16 "))
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(clip.split(" ")[1].split(","))
    assert any(p.startswith("google/siglip2-base-patch16-224 ") for p in fm["preload_from_hub"])
    reqs = (out / "requirements.txt").read_text().split()
    assert f"gradio[mcp]=={gradio.__version__}" in reqs and "timm==1.0.31" in reqs and "transformers==5.23.0" in reqs
    if hardware == "zerogpu":
        assert {"torch==2.11.0", "torchvision==0.26.0", "spaces"} <= set(reqs)
    else:
        assert {"torch==2.14.1", "torchvision==0.29.1"} <= set(reqs) and "spaces" not in reqs


def test_every_binary_goes_through_lfs_and_nothing_is_large(folder):
    _, out = folder
    rules = [line.split()[0] for line in (out / ".gitattributes").read_text().splitlines() if "filter=lfs" in line]
    files = [p for p in out.rglob("*") if p.is_file()]
    binaries = [p for p in files if b"\0" in p.read_bytes()[:8192] or p.suffix in (".png", ".safetensors")]
    assert len(binaries) >= 200  # the gallery and the checkpoints
    for p in binaries:
        rel = p.relative_to(out).as_posix()
        assert any(fnmatch.fnmatch(p.name, r) or fnmatch.fnmatch(rel, r) for r in rules), rel
    assert max(p.stat().st_size for p in files) <= 10 * 2**20
    for name in ("cifar10", "mnist"):
        assert (out / "checkpoints" / name / "model.safetensors").is_file()
    assert not list(out.rglob("__pycache__")) and not (out / "tests").exists()


def test_the_folder_refuses_to_overwrite(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    assert space.main([str(tmp_path / "x")]) == 1
    assert (tmp_path / "x" / "keep.txt").read_text() == "mine"


def test_the_cpu_folder_boots_and_answers(folder):
    hardware, out = folder
    if hardware != "cpu":
        pytest.skip("the ZeroGPU folder pins its own torch; tests/test_zerogpu.py boots the app in ZeroGPU mode")
    from gradio_client import handle_file

    server, client = serve_app(out, {"PYTHONPATH": ""})
    try:
        assert len(client.predict(handle_file(EXAMPLE), api_name="/predict")["confidences"]) == 5
    finally:
        server.kill()


@pytest.mark.parametrize(
    "value, on",
    [
        ("1", True),
        ("true", True),
        ("True", True),
        ("yes", True),
        ("", False),
        ("false", False),
        ("0", False),
        ("no", False),
        ("off", False),
    ],
)
def test_zero_gpu_is_on_only_for_true_values(monkeypatch, value, on):
    monkeypatch.setenv("SPACES_ZERO_GPU", value)
    assert zerogpu.enabled() is on


def test_gpu_time_asked_for_is_capped(monkeypatch):
    from vitviz.app.tabs import train as train_tab
    from vitviz.training.config import TrainConfig

    monkeypatch.setenv("VITVIZ_ZEROGPU_MAX_S", "120")
    assert train_tab.gpu_seconds(TrainConfig.of(time_budget=30)) == 30 + train_tab.GPU_MARGIN_S
    assert train_tab.gpu_seconds(TrainConfig.of(time_budget=300)) == 120


def test_a_stop_reaches_a_run_in_another_process():
    import multiprocessing as mp

    from vitviz.training import stops

    stop = stops.FileStop()
    ctx = mp.get_context("fork")
    seen = ctx.Event()

    def worker():  # as ZeroGPU's forked worker: waits for the flag the parent sets
        for _ in range(200):
            if stop.is_set():
                seen.set()
                return
            time.sleep(0.05)

    p = ctx.Process(target=worker)
    p.start()
    time.sleep(0.2)
    stop.set()
    p.join(15)
    assert seen.is_set()
