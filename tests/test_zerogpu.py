"""ZeroGPU as a Space runs it: the real `spaces` package, against a stand-in device API on 127.0.0.1.

The app boots in its own process with SPACES_ZERO_GPU=true (so `spaces` patches that process's torch,
not this one's); the stand-in answers the device API's calls, records what /schedule is asked for, and
grants no GPU (503), as a busy ZeroGPU would.
"""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from helpers import EXAMPLE, free_port, serve_app

from vitviz.pictures.explore import OUTPUT_NAMES

pytest.importorskip("spaces")
ROOT = Path(__file__).resolve().parent.parent


class DeviceAPI(BaseHTTPRequestHandler):
    calls: list = []

    def do_POST(self):
        url = urlparse(self.path)
        self.calls.append((url.path, {k: v[0] for k, v in parse_qs(url.query).items()}))
        self.send_response(200 if url.path in ("/startup-report", "/allow", "/release") else 503)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self):
        body = json.dumps({"size": 0}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def zero_app(small_data):
    api = ThreadingHTTPServer(("127.0.0.1", free_port()), DeviceAPI)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    server, client = serve_app(
        ROOT,
        {
            "SPACES_ZERO_GPU": "true",
            "VITVIZ_ZEROGPU_MAX_S": "120",
            "SPACES_ZERO_DEVICE_API_URL": f"http://127.0.0.1:{api.server_address[1]}",
        },
    )
    yield client
    server.kill()
    api.shutdown()


def test_zero_gpu_app_boots_and_explains(zero_app):
    from gradio_client import handle_file

    assert ("/startup-report", {}) in DeviceAPI.calls  # `spaces` really ran in ZeroGPU mode
    out = zero_app.predict(handle_file(EXAMPLE), api_name="/explain")
    assert len(out) == len(OUTPUT_NAMES) and os.path.exists(out[OUTPUT_NAMES.index("rollout")])


@pytest.mark.parametrize("budget, asked", [(3600, 120), (30, 50)])
def test_a_run_asks_for_no_more_gpu_time_than_the_cap(zero_app, budget, asked):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="GPU"):  # the stand-in grants none
        zero_app.predict(dataset="cifar10", time_budget=budget, batch_size=64, api_name="/train")
    schedules = [q for path, q in DeviceAPI.calls if path == "/schedule"]
    assert int(schedules[-1]["durationSeconds"]) == asked
