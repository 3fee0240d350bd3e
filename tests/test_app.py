"""The app: handlers called directly, then every public endpoint through gradio_client."""
import gc
import os
import socket
import threading
import time

import gradio as gr
import numpy as np
import pytest
import torch
from PIL import Image

from vitviz import gallery, live
from vitviz.app import build_demo, compare, explore, launch, model_tab, models, train_tab

EXAMPLE = gallery.items("cifar10")[3][0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


pytestmark = pytest.mark.usefixtures("small_data")


def image_file(tmp_path, name, make):
    p = tmp_path / name
    data = make()
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        data(p)
    return str(p)


def bad_inputs(tmp_path):
    """(name, path, must_succeed)."""
    def save(im, fmt, **kw):
        return lambda p: im.save(p, format=fmt, **kw)

    exif = Image.Exif()
    exif[0x0112] = 6
    frames = [Image.new("RGB", (40, 40), c) for c in [(255, 0, 0), (0, 0, 255)]]
    return [
        ("corrupt.png", image_file(tmp_path, "corrupt.png", lambda: b"\x89PNG\r\n\x1a\n" + os.urandom(200)), False),
        ("notes.txt", image_file(tmp_path, "notes.txt", lambda: b"hello, not an image"), False),
        ("empty.jpg", image_file(tmp_path, "empty.jpg", lambda: b""), False),
        ("bomb.png", image_file(tmp_path, "bomb.png", lambda: save(Image.new("1", (10000, 10000)), "PNG")), False),
        ("huge.jpg", image_file(tmp_path, "huge.jpg", lambda: save(Image.new("RGB", (6000, 4000), (90, 120, 200)), "JPEG")), True),
        ("grey.png", image_file(tmp_path, "grey.png", lambda: save(Image.new("L", (50, 40), 128), "PNG")), True),
        ("rgba.png", image_file(tmp_path, "rgba.png", lambda: save(Image.new("RGBA", (30, 30), (255, 0, 0, 60)), "PNG")), True),
        ("cmyk.jpg", image_file(tmp_path, "cmyk.jpg", lambda: save(Image.new("CMYK", (30, 30), (0, 100, 200, 0)), "JPEG")), True),
        ("deep.png", image_file(tmp_path, "deep.png", lambda: save(Image.fromarray(np.full((30, 30), 40000, np.uint16)), "PNG")), True),
        ("palette.gif", image_file(tmp_path, "palette.gif", lambda: save(Image.new("RGB", (30, 30), (0, 200, 0)).convert("P"), "GIF")), True),
        ("anim.gif", image_file(tmp_path, "anim.gif", lambda: save(frames[0], "GIF", save_all=True, append_images=frames[1:])), True),
        ("dot.png", image_file(tmp_path, "dot.png", lambda: save(Image.new("RGB", (1, 1), (5, 5, 5)), "PNG")), True),
        ("rotated.jpg", image_file(tmp_path, "rotated.jpg", lambda: save(Image.new("RGB", (64, 32), (200, 10, 10)), "JPEG", exif=exif)), True),
    ]


# ---------------------------------------------------------------- handlers, directly


def view(image=EXAMPLE, **kw):
    return explore.explore_view({"path": image} if isinstance(image, str) else image, **kw)[0]


def test_explain_handler_gives_every_picture():
    v, _, state = explore.explore_view({"path": EXAMPLE})
    assert len(v.top5) == 5 and abs(sum(v.top5.values()) - 1) < 0.5
    for pic in (v.sees, v.rollout, v.grad_rollout, v.rollout_strip, v.heads, v.head_large):
        assert isinstance(pic, np.ndarray) and pic.ndim == 3 and pic.shape[2] == 3
    assert v.patch_heads is None and v.patch_rollout is None and "Prediction" in v.summary
    v2 = view(patch=10, fusion="max", discard=0.5, state=state)
    assert v2.patch_heads is not None and v2.patch_rollout is not None
    # the Gradio handler returns the same pictures in views.ExploreView's field order, then the state
    out = explore.explain({"path": EXAMPLE}, patch=10, fusion="max", discard=0.5, state=state)
    assert len(out) == len(v2.outputs()) + 1 and out[-1] is state
    assert all(np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b for a, b in zip(out, v2.outputs()))


def test_predict_handler_matches_explain():
    assert explore.predict(EXAMPLE) == pytest.approx(view().top5, abs=1e-4)


@pytest.mark.parametrize("index", range(13))
def test_bad_and_strange_images(tmp_path, index):
    name, path, ok = bad_inputs(tmp_path)[index]
    if ok:
        assert len(view(path).top5) == 5, name
    else:
        with pytest.raises(gr.Error) as e:
            view(path)
        assert "Traceback" not in str(e.value) and len(str(e.value)) > 20, name


def test_bad_options_and_models():
    for kwargs in (dict(fusion="median"), dict(discard=2.0), dict(target="giraffe"), dict(model_key="nope"),
                   dict(model_key="session"), dict(model_key="upload")):
        with pytest.raises(gr.Error):
            view(**kwargs)
    with pytest.raises(gr.Error):
        view(None)


def test_mnist_model_and_its_classes():
    v = view(gallery.items("mnist")[0][0], model_key="mnist", target="3")
    assert set(v.top5) <= set("0123456789")
    updates = explore.controls_for("mnist", None)
    assert updates[0] == "mnist" and updates[1]["choices"][1:] == list("0123456789")
    # a model that cannot be had falls back to the shipped CIFAR-10 model
    assert explore.controls_for("session", None)[0] == "cifar10"


def test_upload_checkpoint(tmp_path, tiny_model):
    from vitviz import checkpoint

    checkpoint.save(tmp_path / "mine", tiny_model)
    state = models.Visitor()
    msg, state, key = models.upload_checkpoint([str(tmp_path / "mine.safetensors"), str(tmp_path / "mine.json")],
                                               state)
    assert key == "upload" and "Loaded" in msg
    assert len(view(model_key="upload", layer=2, head=4, state=state).top5) == 5
    (tmp_path / "evil.json").write_text('{"format": "vitviz-checkpoint", "model": {"depth": "__import__"}}')
    with pytest.raises(gr.Error, match="could not be loaded"):
        models.upload_checkpoint([str(tmp_path / "mine.safetensors"), str(tmp_path / "evil.json")], models.Visitor())
    with pytest.raises(gr.Error, match="two files"):
        models.upload_checkpoint([str(tmp_path / "mine.safetensors")], models.Visitor())


def test_model_view_and_clicks():
    tiles, large, dist, comps, card, note = model_tab.model_view("cifar10", -1, None)
    assert tiles.ndim == 3 and dist.ndim == 3 and "parameters" in card

    class Evt:
        index = [100, 40]

    assert explore.click_patch("cifar10", None, Evt()) == 1 * 8 + 3


class FakeRequest:
    def __init__(self, h):
        self.session_hash = h


def test_train_handler_streams_and_stops_quickly():
    t0 = None
    outs = []
    gen = train_tab.train_run(width=32, heads=2, depth=1, epochs=50, time_budget=0, batch_size=16, request=FakeRequest("a"))
    for o in gen:
        outs.append(o)
        if len(outs) == 3:
            train_tab.stop_run(FakeRequest("a"))
            t0 = time.perf_counter()
    assert time.perf_counter() - t0 < 2.0
    status, state = outs[-1][0], outs[-1][6]
    assert "Stopped" in status
    assert state.models["session"] is not None
    assert len(outs[-1][5]) == 2  # safetensors + json to download
    assert train_tab.stop_run(FakeRequest("a")) == "No run of yours is going."
    model_dd, tabs = train_tab.explore_trained(state)
    assert model_dd["value"] == "session"
    assert len(view(model_key="session", state=state).top5) == 5


def test_epoch_snapshots_can_be_compared():
    state = models.Visitor()
    for out in train_tab.train_run(width=32, heads=2, depth=1, epochs=3, time_budget=0, batch_size=64, state=state,
                            request=FakeRequest("snap")):
        pass
    state, menu = out[6], out[7]
    assert sorted(k for k in state.models if k.startswith("session@")) == ["session@1", "session@2", "session@3"]
    assert ("Trained in this session, after epoch 1", "session@1") in menu["choices"]
    assert out[8]["value"] == "session"  # the right-hand Compare menu switches to the new model
    first, last = state.models["session@1"], state.models["session@3"]
    assert not torch.equal(first.head.weight, last.head.weight)
    left, *_, right_label = compare.compare({"path": EXAMPLE}, "session@1", "session", state=state)[:5]
    assert len(left) == 5 and len(right_label) == 5


def test_snapshots_are_thinned_to_six():
    kept = {}
    for e in range(1, 21):
        live.keep_snapshot(kept, e, torch.nn.Linear(1, 1))
    assert len(kept) == 6 and min(kept) == 1 and max(kept) == 20


def test_train_handler_rejects_bad_settings():
    for kw in (dict(patch=5), dict(width=100, heads=3), dict(lr=-1), dict(dataset="imagenet"), dict(subset=3),
               dict(batch_size=2048)):
        with pytest.raises(gr.Error):
            next(train_tab.train_run(request=FakeRequest("b"), **kw))


def test_training_without_data_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("VITVIZ_DATA", str(tmp_path / "missing"))
    monkeypatch.setattr(live, "_datasets", {})
    with pytest.raises(gr.Error, match="not available"):
        next(train_tab.train_run(request=FakeRequest("c")))


def test_ten_start_stop_cycles_leave_nothing_behind():
    from vitviz.model import ViT

    def count_models():
        gc.collect()
        return sum(isinstance(o, ViT) for o in gc.get_objects())

    state = models.Visitor()
    view()  # shipped models loaded once
    threads0, models0 = threading.active_count(), count_models()
    for i in range(10):
        gen = train_tab.train_run(width=32, heads=2, depth=1, epochs=50, batch_size=16, state=state,
                           request=FakeRequest(f"cycle{i}"))
        for k, o in enumerate(gen):
            if k == 1:
                train_tab.stop_run(FakeRequest(f"cycle{i}"))
        state = o[6]
    assert threading.active_count() <= threads0
    assert len(live.STOPS) == 0
    assert count_models() <= models0 + 1  # only the last session model is kept


# ---------------------------------------------------------------- through gradio_client


@pytest.fixture(scope="module")
def client():
    from gradio_client import Client

    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True,
                          quiet=True)
    yield Client(url, verbose=False)
    demo.close()


def test_api_predict_and_explain(client):
    from gradio_client import handle_file

    lab = client.predict(handle_file(EXAMPLE), api_name="/predict")
    assert len(lab["confidences"]) == 5
    out = client.predict(handle_file(EXAMPLE), api_name="/explain")
    assert len(out) == 10 and os.path.exists(out[1]) and out[7] is None
    out = client.predict(handle_file(EXAMPLE), model_key="cifar10", fusion="min", discard=0.3, patch=12,
                         api_name="/explain")
    assert out[7] is not None and Image.open(out[8]).size == (256, 256)


def test_api_bad_inputs_get_messages_and_the_app_stays_up(client, tmp_path):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    for name, path, ok in bad_inputs(tmp_path):
        if name in ("huge.jpg",):  # covered by the handler test; slow to upload
            continue
        if ok:
            assert len(client.predict(handle_file(path), api_name="/predict")["confidences"]) == 5, name
        else:
            with pytest.raises(AppError) as e:
                client.predict(handle_file(path), api_name="/explain")
            assert "could not" in str(e.value) or "too large" in str(e.value), name
        assert len(client.predict(handle_file(EXAMPLE), api_name="/predict")["confidences"]) == 5


def test_api_train_streams_updates(client):
    job = client.submit(width=32, heads=2, depth=1, epochs=2, time_budget=0, batch_size=16, api_name="/train")
    for _ in job:  # iterate the stream as it comes
        pass
    job.result()
    final = job.outputs()[-1]
    assert len(job.outputs()) >= 3
    assert "Finished" in final[0] and "validation accuracy" in final[0]
    assert len(final[5]) == 2


def test_api_second_training_waits_in_line(client):
    from gradio_client.utils import Status

    first = client.submit(width=32, heads=2, depth=1, epochs=50, time_budget=6, batch_size=16, api_name="/train")
    deadline = time.time() + 20
    running = (Status.PROCESSING, Status.ITERATING)
    while first.status().code not in running and time.time() < deadline:
        time.sleep(0.1)
    second = client.submit(width=32, heads=2, depth=1, epochs=1, batch_size=16, api_name="/train")
    seen_queue = False
    while not first.done() and time.time() < deadline + 20:
        st = second.status()
        if st.code in (Status.IN_QUEUE, Status.SENDING_DATA, Status.JOINING_QUEUE) and st.rank is not None:
            seen_queue = True
        time.sleep(0.2)
    first.result()
    second.result()
    assert seen_queue
    assert "Finished" in second.outputs()[-1][0]


def test_api_export_returns_the_zip_and_the_attention(client):
    import zipfile

    from gradio_client import handle_file

    zpath, npath = client.predict(handle_file(EXAMPLE), patch=5, api_name="/export")
    with zipfile.ZipFile(zpath) as z:
        names = set(z.namelist())
        assert "patch_rollout.png" in names and len(names) == 8
        assert Image.open(z.open("input_with_patch_grid.png")).size == (256, 256)
    attn = np.load(npath)
    assert attn.shape == (6, 6, 65, 65) and np.allclose(attn.sum(-1), 1.0, atol=1e-4)
