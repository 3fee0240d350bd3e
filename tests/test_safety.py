"""A public app: no visitor can take, fill or crash the shared machine. Small limits, real requests."""

import gc
import json
import os
import subprocess
import sys
import time

import httpx
import pytest
from helpers import EXAMPLE, FakeRequest, free_port

from vitviz.app import build_demo, launch, menu, switch
from vitviz.app.serving import limits
from vitviz.app.state import Visitor
from vitviz.app.tabs import explore
from vitviz.app.tabs import train as train_tab
from vitviz.models.bound import ModelError
from vitviz.models.vit import ViT
from vitviz.runtime import scratch
from vitviz.training.config import TrainConfig
from vitviz.training.pace import Pace

pytestmark = pytest.mark.usefixtures("small_data")
TINY = dict(width=32, heads=2, depth=1, batch_size=16)


def test_no_run_trains_past_the_cap(monkeypatch):
    monkeypatch.setenv("VITVIZ_MAX_TRAIN_SECONDS", "3")
    t0 = time.perf_counter()
    for out in train_tab.train_run(epochs=200, time_budget=3600, request=FakeRequest("cap"), **TINY):
        pass
    assert time.perf_counter() - t0 < 3 + 15  # the cap, plus the final validation and pictures
    assert "Finished" in out[0]
    cfg, note = limits.cap_time(TrainConfig.of(time_budget=0))
    assert cfg.budget.time_budget == 3 and "at most 3 s" in note


def test_a_run_that_does_not_fit_in_memory_is_refused_before_it_starts(monkeypatch):
    import gradio as gr

    monkeypatch.setenv("VITVIZ_TRAIN_MEMORY_GB", "3")
    with pytest.raises(gr.Error, match=r"about \d+\.\d GB.*batch of \d+ would fit"):
        next(
            train_tab.train_run(
                dataset="cifar10", width=512, depth=12, heads=16, patch=4, batch_size=2048, request=FakeRequest("big")
            )
        )
    # nothing was allocated: measured in a fresh process, whose peak no earlier test has raised
    out = subprocess.run(
        [sys.executable, "-c", REFUSED_RUN],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "VITVIZ_TRAIN_MEMORY_GB": "2"},
    )
    refused, grew_kib = out.stdout.split()[-2:]
    assert refused == "refused" and int(grew_kib) < 50_000, out.stdout + out.stderr[-2000:]


REFUSED_RUN = """
import resource
import gradio as gr
from vitviz.app.tabs import train as train_tab
class Request:
    session_hash, client = "big", type("Client", (), {"host": None})()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    next(train_tab.train_run(dataset="cifar10", width=512, depth=12, heads=16, patch=4, batch_size=2048,
                             request=Request()))
    print("trained")
except gr.Error:
    print("refused")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


def test_memory_estimate_covers_what_a_step_uses():
    # peaks (growth over the idle process) of two training steps on this project's 2-core machine, in GB,
    # measured by benchmarks/train_memory.py: (width, depth, heads, batch, patch) -> GB
    measured = {
        (64, 4, 4, 256, 4): 0.50,
        (192, 6, 6, 128, 4): 0.82,
        (256, 4, 4, 512, 4): 1.84,
        (512, 12, 16, 64, 4): 2.03,
        (384, 8, 8, 256, 4): 3.52,
        (512, 12, 16, 256, 4): 5.24,
        (128, 4, 4, 1024, 2): 6.63,
    }
    for (w, d, h, bs, p), gb in measured.items():
        est = TrainConfig.of(preset="tiny", embed_dim=w, depth=d, num_heads=h, batch_size=bs, patch_size=p)
        assert gb <= est.peak_memory_gb() <= 2.5 * gb + 0.5, (w, d, h, bs, p)


def test_pace_tells_when_a_run_is_slowed():
    busy = [0]
    pace = Pace(("model", 1), window=3, others=lambda: busy[0])
    for v in (100, 100, 100):
        pace.add(v)
    assert pace.note() == ""
    for v in (30, 30, 30):
        pace.add(v)
    assert "30% of the best speed" in pace.note() and "Slowed down" in pace.note()
    busy[0] = 2
    assert "2 other request(s)" in pace.note()
    # a later run of the same model knows the best speed from the start, even when slowed from its first step
    later = Pace(("model", 1), window=3, others=lambda: 1)
    for v in (40, 40, 40):
        later.add(v)
    assert "40% of the best speed" in later.note()


def test_explore_requests_are_counted_as_activity():
    from vitviz.app.serving.activity import Activity

    a = Activity(window=0.2)
    with a:
        assert a.recent() == 1
    assert a.recent() == 1
    time.sleep(0.25)
    assert a.recent() == 0


def test_visitor_models_are_freed_when_they_leave_or_expire():
    v = Visitor()
    for out in train_tab.train_run(epochs=1, time_budget=0, state=v, request=FakeRequest("leaver"), **TINY):
        pass
    assert v.models
    menu.release_session(FakeRequest("leaver"))  # what demo.unload calls when the tab closes
    assert not v.models
    v.models["upload"] = object()
    menu.release_state(v)  # what gr.State calls when the state expires
    assert not v.models


def test_folders_the_app_makes_are_pruned(monkeypatch, tmp_path):
    monkeypatch.setenv("VITVIZ_WORK_DIR", str(tmp_path))
    monkeypatch.setenv("VITVIZ_KEEP_FOLDERS", "3")
    for _ in range(5):
        files, _ = explore.export({"path": EXAMPLE})
        time.sleep(0.01)
    exports = sorted(tmp_path.glob("vitviz-export-*"))
    assert len(exports) == 3 and all(os.path.exists(f) for f in files)  # the newest answer is still there
    for i in range(5):
        (tmp_path / f"vitviz-image-{i}").mkdir()
    scratch.prune_all()
    assert len(list(tmp_path.glob("vitviz-image-*"))) == 3


# ---------------------------------------------------------------- through the server


@pytest.fixture
def app(monkeypatch):
    monkeypatch.setenv("VITVIZ_MAX_TRAIN_SECONDS", "4")
    monkeypatch.setenv("VITVIZ_TRAIN_QUEUE", "1")
    monkeypatch.setenv("VITVIZ_MAX_UPLOAD_MB", "1")
    monkeypatch.setenv("VITVIZ_STATE_TTL_S", "2")
    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield url
    demo.close()


TRAIN_ARGS = ["cifar10", "quick", 1, 2, 32, 4, 200, 3600, 16, 0.006, 0, True, 0]  # asks for an hour


def post_train(url, args=TRAIN_ARGS):
    return httpx.post(url + "gradio_api/call/train", json={"data": args}, timeout=30)


def read_result(url, event_id, timeout=60):
    with httpx.stream("GET", url + f"gradio_api/call/train/{event_id}", timeout=timeout) as r:
        return "".join(r.iter_text())


def test_an_abandoned_run_ends_at_the_cap_and_one_caller_holds_one_place(app):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    t0 = time.perf_counter()
    first = post_train(app)  # its result is never read
    assert first.status_code == 200
    time.sleep(1.0)
    second = post_train(app)  # the same address: one place per caller
    text = read_result(app, second.json()["event_id"], timeout=30)
    assert "one per visitor" in text and "Traceback" not in text
    with pytest.raises(AppError, match="one per visitor"):  # gradio_client shows the sentence itself
        Client(app, verbose=False).predict(*TRAIN_ARGS, api_name="/train")
    deadline = time.time() + 40
    while time.time() < deadline:  # the abandoned run ends at the 4 s cap and gives its place back
        third = post_train(app)
        text = read_result(app, third.json()["event_id"], timeout=60)
        if "one per visitor" not in text:
            break
        time.sleep(0.5)
    assert "Finished" in text and time.perf_counter() - t0 < 2 * 4 + 40  # two capped runs, one after the other


def test_upload_size_is_bounded(app):
    big = os.urandom(int(1.5 * 2**20))
    r = httpx.post(app + "gradio_api/upload", files={"files": ("big.png", big, "image/png")}, timeout=30)
    assert r.status_code == 413 and "1" in r.text
    small = httpx.post(app + "gradio_api/upload", files={"files": ("ok.png", open(EXAMPLE, "rb"), "image/png")})
    assert small.status_code == 200


def test_ten_visitors_leave_nothing_behind(app):
    from gradio_client import Client

    def count():
        gc.collect()
        return sum(isinstance(o, ViT) for o in gc.get_objects())

    def one_visitor():
        c = Client(app, verbose=False)
        c.predict(*TRAIN_ARGS[:6], 1, 0, 16, 0.006, 0, True, 0, api_name="/train")

    one_visitor()
    time.sleep(4)  # the state's time to live is 2 s; Gradio checks every second
    after_one = count()
    for _ in range(10):
        one_visitor()
    time.sleep(4)
    assert count() <= after_one + 1


BAD = {  # (endpoint, arguments): strings, huge integers, zero and negative sizes, wrong types (JSON has no
    # infinities or NaNs, so gradio_client cannot send them: plain REST does, below)
    "explain": [
        dict(layer="abc"),
        dict(head="1e999"),
        dict(patch=2**70),
        dict(patch=1e300),
        dict(patch=64),
        dict(discard="x"),
        dict(alpha=-5),
        dict(fusion=3),
        dict(target=[1, 2]),
        dict(model_key="../../x"),
        dict(head=1e300),  # far out of range: refused with the true range, never echoed
        dict(layer="١٢"),  # digits, but not ASCII ones
        dict(patch="\x00"),
        dict(model_key="a" * 3000),
        dict(model_key="deit\x00"),
        dict(target="\x00\x01cat"),
        dict(fusion="m\nean"),
    ],
    "train": [
        dict(patch=0),
        dict(patch=-4),
        dict(seed=2**70),
        dict(depth="abc"),
        dict(width="inf"),
        dict(batch_size=0),
        dict(batch_size=-8),
        dict(epochs=0),
        dict(lr="nan"),
        dict(subset=-1),
        dict(time_budget=-1),
        dict(heads=0),
        dict(time_budget="x"),
        dict(time_budget="١٢٠"),
        dict(epochs=1e300),
        dict(seed="\x00"),
    ],
}
RAW_MESSAGES = (
    "Traceback",
    "invalid literal",
    "convert",
    "Overflow",
    "modulo",
    "NoneType",
    "object has no",
    "not supported between",
    "embedded null",
    "HFValidation",
    "Errno",
    "0" * 25,  # a huge number echoed whole
)


def test_every_strange_value_gets_a_sentence_through_the_client(app):
    from gradio_client import Client, handle_file
    from gradio_client.exceptions import AppError

    c = Client(app, verbose=False)
    for endpoint, cases in BAD.items():
        for kw in cases:
            args = dict(kw)
            if endpoint == "explain":
                args["image"] = handle_file(EXAMPLE)
            with pytest.raises(AppError) as e:
                c.predict(**args, api_name=f"/{endpoint}")
            msg = str(e.value)
            assert len(msg) > 20 and not any(w in msg for w in RAW_MESSAGES), (endpoint, kw, msg)
    assert len(c.predict(handle_file(EXAMPLE), api_name="/predict")["confidences"]) == 5


def call_raw(app, endpoint, data: str) -> str:
    """POST a hand-written JSON body (which may hold Infinity or NaN) and read the whole answer."""
    r = httpx.post(
        app + f"gradio_api/call/{endpoint}",
        content='{"data": %s}' % data,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    if r.status_code != 200:  # refused at the door: still a sentence, never a trace
        return "event: error\ndata: " + r.text
    with httpx.stream("GET", app + f"gradio_api/call/{endpoint}/{r.json()['event_id']}", timeout=60) as s:
        return "".join(s.iter_text())


def test_every_strange_value_gets_a_sentence_through_plain_rest(app):
    up = httpx.post(app + "gradio_api/upload", files={"files": ("cat.png", open(EXAMPLE, "rb"), "image/png")})
    image = json.dumps({"path": up.json()[0], "meta": {"_type": "gradio.FileData"}})
    for raw in ('"abc"', "Infinity", "-Infinity", "NaN", str(2**70), "-4", "[1]", "{}"):
        for slot in range(5, 10):  # layer, head, patch, alpha, and the smooth flag
            args = ["cifar10", '"mean"', "0", '"predicted class"', "6", "1", "-1", "0.6", "true", "false"]
            args = [json.dumps("cifar10"), *args[1:]]
            args[slot - 1] = raw
            text = call_raw(app, "explain", "[%s, %s]" % (image, ", ".join(args)))
            assert "event: complete" in text or "event: error" in text, (raw, slot, text)
            assert not any(w in text for w in RAW_MESSAGES), (raw, slot, text)
    for raw in ("Infinity", "NaN", "-Infinity", str(2**70), "0", "-4", '"abc"'):
        for slot in (2, 3, 4, 5, 7, 8, 9, 12):  # depth, heads, width, patch, budget, batch, lr, seed
            args = [json.dumps(v) for v in TRAIN_ARGS]
            args[slot] = raw
            text = call_raw(app, "train", "[%s]" % ", ".join(args))
            if "event: error" not in text:  # a value that is fine (a zero budget, say) trains, up to the cap
                assert "Finished" in text, (raw, slot, text)
            assert not any(w in text for w in RAW_MESSAGES), (raw, slot, text)
    assert httpx.get(app + "gradio_api/info").status_code == 200  # still up
    assert "event: complete" in call_raw(app, "predict", '[%s, "cifar10"]' % image)


def test_gradio_cache_is_cleared_on_a_schedule(monkeypatch):
    assert build_demo().delete_cache == (600, 3600)
    monkeypatch.setenv("VITVIZ_CACHE_MAX_AGE_S", "120")
    assert build_demo().delete_cache == (120, 120)


def test_a_first_vit_b_16_load_shows_progress_and_where_its_weights_go(monkeypatch):
    from vitviz.models.tv_vit import weights_folder

    shown, infos = [], []
    from vitviz.models.hub import load_model

    def loader(key):
        if key == "vit_b_16":
            raise ModelError("no internet here; once downloaded, its weights are kept in torchvision's cache")
        return load_model(key)

    monkeypatch.setattr(menu, "MODELS", menu.SharedModels(loader))
    monkeypatch.setattr(explore.gr, "Info", lambda msg: infos.append(msg))
    monkeypatch.setattr(explore.gr, "Warning", lambda msg: infos.append(msg))
    out = switch.controls_for("vit_b_16", None, progress=lambda *a, **k: shown.append(k.get("desc", "")))
    assert shown and "Loading ViT-B/16" in shown[0]
    assert "torchvision's cache" in out[9] and weights_folder() not in out[9]  # where, without a server path
    assert out[0] == "cifar10" and "no internet" in out[9]  # the menu falls back, said beside it
    v = out[8]
    again = switch.controls_for("cifar10", v, progress=lambda *a, **k: None)  # the menu's own change back
    assert again[9] == out[9]  # the sentence stays beside the menu ...
    mnist = switch.controls_for("mnist", v, progress=lambda *a, **k: None)
    assert mnist[9] == ""  # ... until the next pick
    assert "knows only 10 classes, at 28x28 px" in mnist[10]["label"]  # what the prediction box can say


def test_compare_draws_the_side_that_works_and_says_why_the_other_cannot(monkeypatch):
    from vitviz.app.tabs import compare
    from vitviz.models.hub import load_model

    def loader(key):
        if key == "vit_b_16":
            raise ModelError("no internet here; once downloaded, its weights are kept in torchvision's cache")
        return load_model(key)

    monkeypatch.setattr(menu, "MODELS", menu.SharedModels(loader))
    out = compare.compare({"path": EXAMPLE}, "cifar10", "vit_b_16")
    n = len(compare.SIDE)
    left, right, note_a, note_b = out[:n], out[n : 2 * n], out[-2], out[-1]
    assert len(left[0]) == 5 and all(p is not None for p in left)  # the working side is drawn as usual
    assert all(p is None for p in right) and "no internet" in note_b and not note_a
    page = compare.compare_page({"path": EXAMPLE}, "cifar10", "mnist", "median", 0.0, "LeGrad", None, None)
    assert (
        "Head fusion" in page[compare.PAGE.names.index("note")]
    )  # a bad option: said under the image, every panel kept as it was
