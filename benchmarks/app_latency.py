"""End-to-end latency of the Explore tab through gradio_client against a launched app.

    python benchmarks/app_latency.py [--calls 30]

Launches `python app.py` in its own process on 127.0.0.1 (the shipped CIFAR-10
model), then times /explain and /predict from gradio_client: the upload, the
queue, the computation and every picture encoded, until the answer (with the
pictures' URLs) is back, as a browser gets it before it fetches the pictures in
parallel. It also times the same calls with gradio_client downloading every
picture one after another. Target: /explain median under 300 ms on 2 CPU cores.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gradio_client import Client, handle_file  # noqa: E402

from vitviz import gallery  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=30)
    a = p.parse_args()
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1"}
    server = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.time() + 120
        while True:
            try:
                Client(url, verbose=False)
                break
            except Exception:
                if time.time() > deadline or server.poll() is not None:
                    raise SystemExit("the app did not start")
                time.sleep(0.5)
        images = [path for path, _ in gallery.items("cifar10")]
        results = {}
        for download in (False, True):
            client = Client(url, verbose=False, download_files=download)
            for name, kwargs in [("/explain", {}), ("/explain (clicked patch, max fusion)", {"patch": 27, "fusion": "max"}),
                                 ("/predict", {})]:
                api = name.split()[0]
                ts = []
                for i in range(a.calls + 3):
                    img = handle_file(images[i % len(images)])
                    t = time.perf_counter()
                    client.predict(img, **kwargs, api_name=api)
                    if i >= 3:
                        ts.append(time.perf_counter() - t)
                label = f"{name}{', pictures downloaded' if download else ''}"
                results[label] = statistics.median(ts)
                print(f"{label:60s} median {1000 * results[label]:6.0f} ms  (p90 {1000 * sorted(ts)[int(0.9 * len(ts))]:.0f} ms)",
                      flush=True)
        print(f"target 300 ms for /explain: {results['/explain'] / 0.3:.2f}x of the budget")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
