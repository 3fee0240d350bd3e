"""End-to-end latency of the Explore tab through gradio_client, against a no-op endpoint in the same app.

    python benchmarks/app_latency.py [--calls 30]

Serves the app (the shipped CIFAR-10 model) in its own process on 127.0.0.1, with one
endpoint added for this benchmark: /noop, which takes the same upload and returns a
fixed label. Then times, through gradio_client, /noop, /explain on a new image each
call, /explain on the same image with another layer or patch (an update as the page
makes it), /predict, and /steps with another block (the Step-by-step tab): the upload, the
queue, the computation and every picture
encoded, until the answer (with the pictures' URLs) is back, as a browser gets it
before it fetches the pictures in parallel. Prints each median and its ratio to
/noop's. The cases take turns call by call. Target: /explain at most 1.5x /noop.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serving import client as started  # noqa: E402  the same app with /noop, served the same way
from serving import free_port, serve

CASES = [  # (label, endpoint, options, which image: an offset into the examples that moves each call, or None:
    # always the first; the two new-image cases use different images, so that neither finds the other's work)
    ("/noop", "/noop", {}, 0),
    ("/explain, a new image", "/explain", {}, 0),
    ("/explain, a new image, patch 27, max fusion", "/explain", {"patch": 27, "fusion": "max"}, 7),
    ("/explain, same image, another layer", "/explain", "layer", None),
    ("/explain, same image, another patch", "/explain", "patch", None),
    ("/predict, a new image", "/predict", {}, 0),
    ("/steps, same image, another block", "/steps", "block", None),
]


def time_cases(client, images, calls) -> dict[str, list[float]]:
    """Each case's call times, the cases taking turns call by call (so a busy moment of the machine falls on
    all of them alike); the first three rounds warm up and are not counted."""
    from gradio_client import handle_file

    times = {label: [] for label, *_ in CASES}
    for i in range(calls + 3):
        for label, endpoint, options, offset in CASES:
            img = handle_file(images[(i + offset) % len(images)] if offset is not None else images[0])
            kw = (
                options
                if isinstance(options, dict)
                else {options: 1 + i % 6 if options in ("layer", "block") else i % 64}
            )
            t = time.perf_counter()
            client.predict(img, **kw, api_name=endpoint)
            if i >= 3:
                times[label].append(time.perf_counter() - t)
    return times


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.serve:
        return serve(a.serve, str(ROOT))
    from gradio_client import Client

    from vitviz.data import gallery

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        started(url, server)
        images = [path for path, _ in gallery.items("cifar10")]
        client = Client(url, verbose=False, download_files=False)
        medians = {}
        for label, ts in time_cases(client, images, a.calls).items():
            medians[label] = statistics.median(ts)
            ratio = medians[label] / medians["/noop"]
            print(
                f"{label:48s} median {1000 * medians[label]:6.0f} ms  "
                f"p90 {1000 * sorted(ts)[int(0.9 * len(ts))]:5.0f} ms"
                f"  {ratio:4.2f}x /noop",
                flush=True,
            )
        worst = max(v for k, v in medians.items() if k.startswith("/explain")) / medians["/noop"]
        print(
            f"slowest /explain: {worst:.2f}x /noop (target at most 1.5x); /steps with another block: "
            f"{1000 * medians['/steps, same image, another block']:.0f} ms (target under 300 ms)"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
