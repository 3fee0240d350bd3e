"""Stopping is clean, and an app cleans up only what it wrote: `python app.py` as a Space runs it."""

import json
import signal
import time
from pathlib import Path

import httpx
import pytest
from helpers import EXAMPLE, serve_app

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.usefixtures("small_data")


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_sigterm_during_a_run_exits_0_and_leaves_nothing(tmp_path):
    """A run training when the server is told to stop: the run stops, the process exits 0 (not an abort), and
    neither Gradio's cache nor the app's folders keep a file."""
    cache, work = tmp_path / "gradio", tmp_path / "work"
    server, client = serve_app(ROOT, {"GRADIO_TEMP_DIR": str(cache), "VITVIZ_WORK_DIR": str(work)})
    try:
        url = client.src.rstrip("/") + "/"
        # a run of width 128, depth 4 at batch 16 on the small data: it trains for its minute unless stopped
        args = ["cifar10", "quick", 4, 4, 128, 4, 200, 60, 16, 0.001, 0, True, 0]
        r = httpx.post(url + "gradio_api/call/train", json={"data": args}, timeout=30)
        event = r.json()["event_id"]
        seen, deadline = "", time.time() + 90
        with httpx.stream("GET", url + f"gradio_api/call/train/{event}", timeout=120) as s:
            for chunk in s.iter_text():
                seen += chunk
                if "step " in seen or time.time() > deadline:  # it trains
                    break
        assert "step " in seen, seen[-2000:]
        assert files_under(cache)  # the run's pictures, copied into Gradio's cache
        server.send_signal(signal.SIGTERM)
        code = server.wait(60)
    finally:
        if server.poll() is None:
            server.kill()
    out = server.stdout.read() or ""
    assert code == 0, out[-3000:]
    assert "terminate called" not in out and "Traceback" not in out, out[-3000:]
    assert not files_under(cache), files_under(cache)
    assert not files_under(work), files_under(work)


def page_files(url: str) -> list[dict]:
    """Every file a new page of the app shows at once: the file payloads in its config (the examples, the
    image it opens on)."""
    config = httpx.get(url + "config", timeout=30).json()
    found = []

    def walk(x):
        if isinstance(x, dict):
            if isinstance(x.get("path"), str) and isinstance(x.get("url"), str):
                found.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(config.get("components", []))
    return [f for f in found if f["url"].startswith(url)]  # the API page's examples point elsewhere


def test_two_apps_on_one_host_stop_one_the_other_serves(tmp_path):
    """Two apps sharing Gradio's default temp folder (the system's temp folder, here one of the test's): one
    stops and cleans up; the other still serves every file of a new page and explains its opening image."""
    env = {"TMPDIR": str(tmp_path), "GRADIO_TEMP_DIR": "", "VITVIZ_WORK_DIR": str(tmp_path / "work")}
    first, a = serve_app(ROOT, env)
    second, b = serve_app(ROOT, env)
    try:
        from gradio_client import handle_file

        for client in (a, b):
            client.predict(handle_file(EXAMPLE), api_name="/explain")
        url = b.src.rstrip("/") + "/"
        shown = page_files(url)
        assert shown
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0
        for f in page_files(url):  # a new page, after the other app's cleanup
            assert httpx.get(f["url"], timeout=30).status_code == 200, f
        image = next(f for f in shown if f["path"].endswith(".png"))
        payload = {"path": image["path"], "meta": {"_type": "gradio.FileData"}}  # as the page sends it
        body = {"data": [payload, "cifar10", "mean", 0, "predicted class", 6, 1, -1, 0.6, True, False, "LeGrad"]}
        r = httpx.post(url + "gradio_api/call/explain", json=body, timeout=30)
        with httpx.stream("GET", url + f"gradio_api/call/explain/{r.json()['event_id']}", timeout=120) as s:
            text = "".join(s.iter_text())
        assert "event: complete" in text, text[-1000:]
        assert ".jpg" in json.dumps(text)  # its pictures
    finally:
        for server in (first, second):
            if server.poll() is None:
                server.terminate()
                server.wait(60)
