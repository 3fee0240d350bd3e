"""A model a stranger names is sized before anything is spent on it, and a fresh start loads like any other moment.

Offline, on Hugging Face caches the tests write: random weights for the small models; for a large one only a stub
file where its weights would be (it must be refused before that file is read)."""

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from helpers import EXAMPLE, serve_app, write_hub_cache

import vitviz
from vitviz.models import bound, checkpoint
from vitviz.models.bound import ModelError, TooLarge

ROOT = Path(__file__).resolve().parent.parent
LARGE = "vit_large_patch16_224.augreg_in21k_ft_in1k"  # 304M parameters: over the default bound
MISSING = "vit_base_patch16_224.augreg2_in21k_ft_in1k"  # 86M: under it, but its weights are not here
SMALL = "deit_tiny_patch16_224.fb_in1k"  # 5.7M: under it, weights in the cache


def stub_cache(cache: Path, name: str) -> None:
    """A cache entry for timm/<name> whose weights file is a stub: reading it would fail, so a refusal that
    comes first is one that read nothing."""
    snap = cache / f"models--timm--{name}" / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (snap / "model.safetensors").write_bytes(b"not weights")
    (cache / f"models--timm--{name}" / "refs").mkdir()
    (cache / f"models--timm--{name}" / "refs" / "main").write_text("0" * 40)


def rss_mb(pid: int | None = None) -> float:
    text = Path(f"/proc/{pid or 'self'}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", text).group(1)) / 1024


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    cache = tmp_path_factory.mktemp("hub")
    write_hub_cache(cache, SMALL)
    stub_cache(cache, LARGE)
    return cache


def test_the_bound_reads_its_variable(monkeypatch):
    monkeypatch.delenv(bound.ENV, raising=False)
    assert bound.max_params() == bound.DEFAULT_MAX_PARAMS == 200_000_000
    for raw, want in (("5e6", 5_000_000), ("0", bound.DEFAULT_MAX_PARAMS), ("x", bound.DEFAULT_MAX_PARAMS)):
        monkeypatch.setenv(bound.ENV, raw)
        assert bound.max_params() == want
    assert bound.resolve(None) is None and bound.resolve(10) == 10


def test_every_menu_entry_fits_the_default_bound():
    """What the menu offers always loads: counted here on the meta device, as the bound counts."""
    import timm
    from torchvision.models import vit_b_16

    from vitviz.app.menu import SHARED

    with torch.device("meta"):
        sizes = {"vit_b_16": bound.count(vit_b_16())}
        for key in SHARED:
            if key.startswith("timm/"):
                sizes[key] = bound.count(timm.create_model(key.removeprefix("timm/"), pretrained=False))
    assert all(0 < n <= bound.DEFAULT_MAX_PARAMS for n in sizes.values()), sizes
    with torch.device("meta"):
        large = bound.count(timm.create_model(LARGE, pretrained=False))
    assert large > bound.DEFAULT_MAX_PARAMS  # ViT-L does not fit


PYTHON_API = """
import json, os, resource, sys
import vitviz
from vitviz.models.bound import ModelError
def rss(): return int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) / 1024
vitviz.load_model('cifar10')  # the imports, so that what follows measures the loads alone
out = {}
for name, kw in [(sys.argv[1], {}), (sys.argv[2], {}), (sys.argv[3], {}), (sys.argv[1], {'max_params': 10_000_000})]:
    before = rss()
    try:
        m = vitviz.load_model('timm/' + name, **kw)
        out[name + str(kw)] = ['loaded', m.card.config.embed_dim, rss() - before]
    except ModelError as e:
        out[name + str(kw)] = [type(e).__name__, str(e), rss() - before]
print(json.dumps(out))
"""


def test_the_python_api_counts_before_it_builds(hub):
    env = {**os.environ, "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1"}
    env.pop(bound.ENV, None)
    out = subprocess.run(
        [sys.executable, "-c", PYTHON_API, SMALL, LARGE, MISSING], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got[SMALL + "{}"][:2] == ["loaded", 192]
    kind, sentence, grew = got[LARGE + "{}"]
    assert kind == "TooLarge" and grew < 100, got  # building ViT-L would take 1.2 GB
    assert "304.3M parameters" in sentence and "200.0M" in sentence and "VITVIZ_MAX_MODEL_PARAMS" in sentence
    kind, sentence, grew = got[MISSING + "{}"]
    assert kind == "TimmError" and "need internet once" in sentence and grew < 100, got  # ViT-B: 350 MB if built
    kind, sentence, _ = got[SMALL + "{'max_params': 10000000}"]
    assert kind == "loaded"  # 5.7M under a 10M bound
    with pytest.raises(TooLarge, match="5.7M parameters"):
        vitviz.load_model("timm/" + SMALL, pretrained=False, max_params=1_000_000)
    assert vitviz.load_model("timm/" + SMALL, pretrained=False, max_params=None).card.config.depth == 12


def test_a_checkpoint_describing_a_billion_parameters_is_refused_unbuilt(tmp_path):
    from safetensors.torch import save_file

    from vitviz.app import menu
    from vitviz.app.state import Visitor

    meta = json.loads((ROOT / "checkpoints" / "cifar10" / "model.json").read_text())
    meta.pop("write", None)
    meta["model"].update(embed_dim=4096, depth=60, num_heads=32, mlp_ratio=4.0)  # about 12 billion
    (tmp_path / "big.json").write_text(json.dumps(meta))
    save_file({"x": torch.zeros(1)}, str(tmp_path / "big.safetensors"))
    before = rss_mb()
    note, state, menu_value = menu.upload_checkpoint(
        [str(tmp_path / "big.safetensors"), str(tmp_path / "big.json")], Visitor()
    )
    assert rss_mb() - before < 100
    assert "could not be loaded" in note and "parameters" in note and "VITVIZ_MAX_MODEL_PARAMS" in note, note
    assert not state.models
    meta["model"].update(embed_dim=1024, depth=24, num_heads=16)  # ViT-L's shape, 300M: within the JSON's sanity
    (tmp_path / "big.json").write_text(json.dumps(meta))
    with pytest.raises(TooLarge, match="more than the 200.0M"):
        checkpoint.load_pair(tmp_path / "big.safetensors", tmp_path / "big.json", max_params=200_000_000)
    meta["model"]["mlp_ratio"] = 1e6
    (tmp_path / "big.json").write_text(json.dumps(meta))
    with pytest.raises(checkpoint.CheckpointError, match="implausibly large"):
        checkpoint.load_pair(tmp_path / "big.safetensors", tmp_path / "big.json")


def test_a_typed_name_and_a_link_are_bounded_like_the_api(hub, monkeypatch):
    """The same three names typed into the menu and opened from a link, in this process: refused before they
    are built, nothing kept after five more tries; the small one loads."""
    import huggingface_hub.constants as hf

    from vitviz.app import link, menu, switch
    from vitviz.app.state import Visitor

    monkeypatch.setattr(hf, "HF_HUB_CACHE", str(hub))
    monkeypatch.delenv(bound.ENV, raising=False)
    monkeypatch.setattr(menu, "MODELS", menu.SharedModels(retry_after=0))  # every try is a real one
    quiet = lambda *a, **k: None  # noqa: E731

    class Request:
        def __init__(self, **query):
            self.query_params = query

    vitviz.load_model("cifar10")
    for name, said in ((LARGE, "304.3M parameters"), (MISSING, "need internet once")):
        before = rss_mb()
        for _ in range(6):
            typed = switch.controls_for(name, Visitor(), progress=quiet)
            wanted, _, _ = link.from_link(Request(model=name), Visitor())
            opened = link.fit(wanted, Visitor(), "predicted class", 12, 1, -1)
        assert rss_mb() - before < 100, name
        for out in (typed, opened):
            assert out[0] == "cifar10" and said in out[9], out[9]  # said beside the menu; the shipped model shown
            assert "`" + name + "`" in out[9]  # the name as code: Markdown keeps its underscores
        assert f"timm/{name}" not in menu.MODELS._models
    for out in (
        switch.controls_for(SMALL, Visitor(), progress=quiet),
        link.fit({"model": SMALL}, Visitor(), "", 1, 1, -1),
    ):
        assert menu.typed_key(out[0]) == f"timm/{SMALL}" and "could not" not in out[9]


def test_only_a_models_own_failure_is_remembered(caplog):
    """A fault of the server (an import that failed, a deadlock) is logged and tried again next time; a model
    that cannot be had is remembered, and logged once per try."""
    from vitviz.app import menu

    calls = []

    def flaky(key):
        calls.append(key)
        if len(calls) == 1:
            raise RuntimeError("deadlock detected by _ModuleLock('torchvision')")
        if key == "gone":
            raise ModelError("`gone` needs internet once")
        return vitviz.load_model("mnist")

    shared = menu.SharedModels(flaky, retry_after=60)
    with caplog.at_level("WARNING", logger="vitviz"):
        with pytest.raises(RuntimeError) as e:
            shared.get("mnist")
        assert "deadlock" not in str(e.value) and "try again" in str(e.value)
        assert shared.get("mnist").card.config.num_classes == 10  # tried again at once, and loaded
        with pytest.raises(ModelError, match="needs internet"):
            shared.get("gone")
        with pytest.raises(ModelError, match="needs internet"):
            shared.get("gone")  # remembered: not tried again within the minute
    assert calls == ["mnist", "mnist", "gone"]
    logged = [r.getMessage() for r in caplog.records]
    assert sum("deadlock" in (r.exc_text or "") or "failed on the server" in r.getMessage() for r in caplog.records)
    assert sum("'gone'" in m for m in logged) == 1, logged


STARTS = 4  # each a fresh process whose four first loads race each other's imports


def test_the_api_is_bounded_and_a_fresh_start_loads_four_families_at_once(hub, tmp_path):
    """Fresh starts of `python app.py` (STARTS), each followed at once by four first loads of different families
    on four threads: none fails (a load may only be refused for its own reason). Then, on the last, the API's
    bound: refused in words, the server's memory not grown, nothing kept after ten more calls."""
    from gradio_client import handle_file

    env = {"HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1", "VITVIZ_WORK_DIR": str(tmp_path / "work")}
    keys = ["mnist", f"timm/{SMALL}", "cifar10/random-head", "vit_b_16"]  # ours, timm, a sanity copy, torchvision
    allowed = {"vit_b_16": "need internet once"}  # its weights are not here: its own sentence, and no other
    for start in range(STARTS):
        server, client = serve_app(ROOT, env)
        try:
            replies = {}

            def first_load(key, client=client, replies=replies):
                try:
                    replies[key] = client.predict(handle_file(EXAMPLE), key, api_name="/explain")
                except Exception as e:  # noqa: BLE001 - the sentence is what is checked
                    replies[key] = str(e)

            threads = [threading.Thread(target=first_load, args=(k,)) for k in keys]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            for key in keys:
                reply = replies.get(key)
                if key in allowed:
                    assert isinstance(reply, str) and allowed[key] in reply, (start, key, reply)
                else:
                    assert isinstance(reply, (list, tuple)), (start, key, reply)
            if start < STARTS - 1:
                continue
            before = rss_mb(server.pid)
            for name, said in ((LARGE, "304.3M parameters"), (MISSING, "need internet once")):
                for _ in range(11):
                    with pytest.raises(Exception) as e:
                        client.predict(handle_file(EXAMPLE), name, api_name="/explain")
                    assert said in str(e.value) and "Traceback" not in str(e.value)
            assert rss_mb(server.pid) - before < 100
            assert len(client.predict(handle_file(EXAMPLE), SMALL, api_name="/explain")[0]["confidences"]) == 5
        finally:
            server.terminate()
            server.wait(60)
