"""What a stranger's malformed call gets: a sentence, the true range, a bounded cache.

Through plain REST and gradio_client on a running app (127.0.0.1): a wrong type, too few and too
many values, values out of this model's range; Gradio's cache kept under VITVIZ_CACHE_MAX_MB while
the app runs, and emptied when it closes.
"""

import json
import os
import shutil
import time
from pathlib import Path

import httpx
import pytest
from helpers import free_port

from vitviz.app import build_demo, launch
from vitviz.app.serving import gradio_files
from vitviz.data import gallery

EXAMPLE = gallery.items("cifar10")[3][0]
FRAMEWORK = ("pydantic", "object at 0x", "Traceback", "validation error", "Error:", "didn't receive")


@pytest.fixture(scope="module")
def app():
    mp = pytest.MonkeyPatch()
    mp.setenv("VITVIZ_CACHE_MAX_MB", "1")
    mp.setenv("VITVIZ_CACHE_CHECK_S", "0.2")
    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield demo, url
    demo.close()
    mp.undo()


def rest(url: str, api: str, data) -> str:
    """POST a call and read its whole event stream: the text an outsider sees."""
    r = httpx.post(f"{url}gradio_api/call/{api}", json={"data": data}, timeout=30)
    if r.status_code != 200:
        return r.text
    with httpx.stream("GET", f"{url}gradio_api/call/{api}/{r.json()['event_id']}", timeout=60) as s:
        return "".join(s.iter_text())


def error_of(text: str) -> str:
    """The error message of an event stream ('' if it did not fail)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "event: error" and i + 1 < len(lines):
            payload = lines[i + 1].removeprefix("data:").strip()
            try:
                data = json.loads(payload)
            except ValueError:
                return payload
            return str(data.get("error") if isinstance(data, dict) else data)
    return ""


def uploaded(url: str) -> dict:
    with open(EXAMPLE, "rb") as f:
        r = httpx.post(f"{url}gradio_api/upload", files={"files": ("cat.png", f, "image/png")}, timeout=30)
    return {"path": r.json()[0], "meta": {"_type": "gradio.FileData"}}


EXPLAIN = lambda image, **kw: [
    image,
    kw.get("model", "cifar10"),
    "mean",
    0.0,
    "predicted class",  # noqa: E731
    kw.get("layer", 6),
    kw.get("head", 1),
    kw.get("patch", -1),
    0.6,
    True,
    False,
    "gradient rollout",
]


def test_malformed_calls_get_sentences(app):
    _, url = app
    img = uploaded(url)
    cases = {
        "a bare string for the image": (rest(url, "explain", EXPLAIN("cat.png")), "'image' must be a file"),
        "too few values": (rest(url, "explain", EXPLAIN(img)[:3]), "/explain takes 14 value(s)"),
        "too many values": (rest(url, "explain", EXPLAIN(img) + [1, 2, 3, 4]), "/explain takes 14 value(s)"),
        "/train one short": (rest(url, "train", ["cifar10"] * 12), "/train takes 13 value(s)"),
    }
    for what, (text, want) in cases.items():
        msg = error_of(text)
        assert want in msg, (what, text[:300])
        assert not any(f in msg for f in FRAMEWORK), (what, msg)
        assert "this call sent" in msg or "must be a file" in msg
    ok = rest(url, "explain", EXPLAIN(img))
    assert "event: complete" in ok and not error_of(ok)  # the well-formed call still works


def test_a_path_on_the_server_that_nobody_uploaded_is_never_read(app, tmp_path):
    """A file value must be an upload (or one of the app's own examples): a bare {"path": ...} naming any other
    file on the server is refused with a sentence, before anything reads it."""
    _, url = app
    secret = tmp_path / "secret.png"
    shutil.copy(EXAMPLE, secret)
    upload = uploaded(url)["path"]
    around = os.path.join(os.path.dirname(upload), "..", "..", str(secret).lstrip("/"))  # climbing out of uploads
    for sent in ({"path": str(secret)}, {"path": str(secret), "meta": {"_type": "gradio.FileData"}}, {"path": around}):
        text = rest(url, "explain", EXPLAIN(sent))
        msg = error_of(text)
        assert "must be a file uploaded to this app" in msg and "never read" in msg, (sent, text[:300])
        assert "airplane" not in text and "confidences" not in text  # nothing about the file came back
    for fine in ({"path": upload}, {"path": EXAMPLE}):  # an upload, and the app's own example, are read
        ok = rest(url, "explain", EXPLAIN(fine))
        assert "event: complete" in ok and not error_of(ok), (fine, ok[:300])


def test_an_unknown_parameter_gets_a_sentence(app):
    from gradio_client import Client

    _, url = app
    r = httpx.post(f"{url}gradio_api/call/v2/explain", json={"colour": 3}, timeout=30)
    assert r.status_code == 400 and "no parameter called 'colour'" in r.json()["detail"]
    with pytest.raises(TypeError, match="colour"):  # gradio_client says so itself, before sending
        Client(url, verbose=False).predict(None, colour=3, api_name="/explain")


def test_values_out_of_range_are_told_this_models_range(app):
    _, url = app
    img = uploaded(url)
    for patch in (-5, 64, 2**70):  # off the grid: refused, with this model's range
        msg = error_of(rest(url, "explain", EXPLAIN(img, patch=patch)))
        assert "between -1 and 63" in msg and "1e+09" not in msg and "e+" not in msg, msg
    for kw in (dict(layer=2**70), dict(head=-(10**300))):  # far from any model's range: refused, never echoed
        msg = error_of(rest(url, "explain", EXPLAIN(img, **kw)))
        assert "between 1 and 6 for this model" in msg and "e+" not in msg and "000000" not in msg, msg
    cases = [
        (dict(layer=0), "layers 1 to 6: layer 1 is shown"),
        (dict(layer=999), "layer 6 is shown"),
        (dict(head=-3), "Head -3 is not in this model, which has heads 1 to 6: head 1 is shown"),
        (dict(model="mnist", layer=6), "layers 1 to 4: layer 4 is shown"),
    ]
    for kw, want in cases:  # a layer or head past this model's: the nearest is drawn, and the reply says so
        text = rest(url, "explain", EXPLAIN(img, **kw))
        assert want in text and not error_of(text), (kw, text[-400:])
    text = rest(url, "steps", [img, "cifar10", 99, -1])
    assert "Block 99 is not in this model, which has blocks 1 to 6: block 6 is shown" in text


def test_gradio_client_shows_the_sentence(app):
    from gradio_client import Client, handle_file
    from gradio_client.exceptions import AppError

    _, url = app
    c = Client(url, verbose=False)
    with pytest.raises(AppError, match="between -1 and 63"):
        c.predict(handle_file(EXAMPLE), patch=-5, api_name="/explain")


def test_the_cache_stays_under_its_bound_while_the_app_runs(app):
    from gradio_client import Client, handle_file

    demo, url = app
    c = Client(url, verbose=False)
    last = None
    for patch in range(12):  # about 0.2 MB of new pictures each
        last = c.predict(handle_file(EXAMPLE), patch=patch, layer=1 + patch % 6, api_name="/explain")
    deadline = time.time() + 10
    while gradio_files.total_bytes(demo) > 2**20 and time.time() < deadline:
        time.sleep(0.2)
    assert gradio_files.total_bytes(demo) <= 2**20
    assert all(os.path.exists(p) for p in last if isinstance(p, str) and p.startswith("/"))  # local copies


def test_enforce_deletes_the_oldest_first(tmp_path):
    class FakeBlocks:
        blocks = {}

        def __init__(self):
            self.upload_file_set = set()
            self.temp_file_sets = [set(), self.upload_file_set]

    b = FakeBlocks()
    upload = tmp_path / "upload.png"
    upload.write_bytes(b"u" * 1000)
    b.upload_file_set.add(str(upload))  # the oldest file of all, but an upload: it goes last
    time.sleep(0.01)
    for i in range(10):
        d = tmp_path / f"h{i}"
        d.mkdir()
        f = d / "pic.jpg"
        f.write_bytes(b"x" * 1000)
        os.utime(f, (i, i))
        b.temp_file_sets[0].add(str(f))
        time.sleep(0.01)  # ctime order
    assert gradio_files.enforce(b, 11_000) == 0  # at the bound: nothing goes
    removed = gradio_files.enforce(b, 5_000)
    assert removed == 7 and gradio_files.total_bytes(b) == 4000 and upload.exists()  # down to 80% of the bound
    left = sorted(int(Path(p).parent.name[1:]) for p in b.temp_file_sets[0] if Path(p).exists())
    assert left == [7, 8, 9] and not (tmp_path / "h0").exists()  # the newest kept, empty folders gone
    assert gradio_files.enforce(b, 1_000) == 4 and not upload.exists()  # an upload goes when nothing else is left


def test_closing_the_app_removes_its_cached_files(tmp_path):
    from gradio_client import Client, handle_file
    from PIL import Image

    mine = tmp_path / "mine.png"  # not one of the page's examples (Gradio would share their cached copy)
    Image.new("RGB", (40, 30), (200, 120, 40)).save(mine)
    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    Client(url, verbose=False).predict(handle_file(str(mine)), api_name="/explain")
    files = [p for *_, p in gradio_files.tracked(demo)]
    assert [os.path.basename(p) for p in files] == ["mine.png"]  # the upload; the reply's pictures are served
    demo.close()  # from the app's own folder, never copied into Gradio's cache
    assert not any(os.path.exists(p) for p in files)


def test_the_app_removes_what_it_wrote_when_it_is_stopped(tmp_path):
    """`python app.py`, one call, then SIGTERM (how a Space stops an app): Gradio's cached copies and the app's
    own folders are gone."""
    import signal

    from gradio_client import handle_file
    from helpers import serve_app

    cache, work = tmp_path / "gradio", tmp_path / "work"
    root = Path(__file__).resolve().parent.parent
    server, client = serve_app(root, {"GRADIO_TEMP_DIR": str(cache), "VITVIZ_WORK_DIR": str(work)})
    try:
        client.predict(handle_file(EXAMPLE), patch=3, api_name="/explain")
        written = [p for p in cache.rglob("*") if p.is_file()]
        assert written and any(work.glob("vitviz-*"))
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    finally:
        if server.poll() is None:
            server.kill()
    assert not [p for p in cache.rglob("*") if p.is_file()]
    assert not list(work.glob("vitviz-*"))


def test_the_cache_bound_holds_at_every_moment(monkeypatch):
    """With the periodic check off (an hour apart), replies and uploads still never take the cache past
    VITVIZ_CACHE_MAX_MB: room is made before each write. Sampled on disk every few milliseconds."""
    import threading

    import httpx
    from gradio_client import Client, handle_file

    monkeypatch.setenv("VITVIZ_CACHE_MAX_MB", "1")
    monkeypatch.setenv("VITVIZ_CACHE_CHECK_S", "3600")
    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    folder, worst, done = gradio_files.own_folder(), [0], threading.Event()
    page = {p for c in demo.blocks.values() for p in getattr(c, "keep_in_cache", set())}
    page |= {os.path.join(w, n) for w, _, names in os.walk(folder) for n in names}  # earlier tests' files too

    def sample():
        while not done.is_set():
            total = 0
            for where, _, names in os.walk(folder):  # a folder deleted mid-walk is passed over
                for name in names:
                    path = os.path.join(where, name)
                    try:
                        total += os.path.getsize(path) if path not in page else 0
                    except OSError:
                        pass
            worst[0] = max(worst[0], total)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        c = Client(url, verbose=False)
        for i in range(16):  # about 0.2 MB of new pictures each, and an upload of 0.3 MB every fourth
            c.predict(handle_file(EXAMPLE), patch=i, layer=1 + i % 6, api_name="/explain")
            if i % 4 == 0:
                noise = os.urandom(300_000)
                r = httpx.post(url + "gradio_api/upload", files={"files": (f"n{i}.png", noise, "image/png")})
                assert r.status_code == 200
        big = httpx.post(url + "gradio_api/upload", files={"files": ("big.png", os.urandom(1_200_000), "image/png")})
        assert big.status_code == 413 and "cannot be kept" in big.text  # larger than the whole bound: refused
    finally:
        done.set()
        sampler.join(5)
        demo.close()
    assert 0 < worst[0] <= 2**20, worst[0]
