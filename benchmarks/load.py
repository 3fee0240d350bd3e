"""Explore under load: errors, silently different replies, latency and throughput, idle and during a run.

    python benchmarks/load.py [--clients 1 4 8] [--seconds 20] [--budget 30] [--data ../shared/data]

Launches `python app.py` on 127.0.0.1. First one client makes every call of a fixed set once,
alone: /explain on gallery images with different patches, layers and class-map methods. Those
replies are the references. Then for each number of clients, twice (the app idle, and while one
time-budgeted training run of the quick preset trains through /train), that many gradio_client
clients call /explain from the same set in a loop for `--seconds` (bounded in time and count).
Every reply is compared with its reference, picture by picture in pixels and text by text: a
failed call is an error, a reply that differs is "different". Both must be 0. Prints the calls,
errors, different replies, median and p95 latency, calls per second, and the run's training steps
as a share of the same run with no clients, measured in the same invocation.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from app_latency import free_port
from PIL import Image

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gradio_client import Client, handle_file  # noqa: E402

from vitviz.data import gallery  # noqa: E402

METHODS = ("gradient rollout", "LeGrad", "occlusion")
MAX_CALLS = 2000  # per round, whatever the time


def start_app(data: str | None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1"}
    if data:
        env["VITVIZ_DATA"] = data
    server = subprocess.Popen(
        [sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 120
    while True:
        try:
            Client(url, verbose=False)
            return server, url
        except Exception:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                raise SystemExit("the app did not start")
            time.sleep(0.5)


def requests() -> list[dict]:
    """The fixed set of /explain calls: images x patches x layers x methods."""
    images = [p for p, _ in gallery.items("cifar10")][:6]
    return [
        dict(
            image=path, patch=-1 if i % 5 == 0 else (7 * i) % 64, layer=1 + i % 6, head=1 + i % 3, method=METHODS[i % 3]
        )
        for i, path in enumerate(images * 2)
    ]


def call(client: Client, r: dict):
    return client.predict(
        handle_file(r["image"]),
        patch=r["patch"],
        layer=r["layer"],
        head=r["head"],
        method=r["method"],
        api_name="/explain",
    )


def canonical(reply) -> list:
    """Pictures as their pixels, texts as they are."""
    out = []
    for v in reply:
        if isinstance(v, str) and v.startswith("/") and os.path.isfile(v):
            out.append(np.asarray(Image.open(v)).tobytes())
        else:
            out.append(repr(v))
    return out


def client_loop(url, k, reqs, refs, until, stats, lock):
    client = Client(url, verbose=False)
    i = k
    while time.time() < until and stats["calls"] < MAX_CALLS:
        r = reqs[i % len(reqs)]
        t = time.perf_counter()
        try:
            got = canonical(call(client, r))
            ok = got == refs[i % len(reqs)]
            dt = time.perf_counter() - t
            with lock:
                stats["latency"].append(dt)
                stats["different"] += not ok
        except Exception as e:  # counted and reported, never hidden
            with lock:
                stats["errors"].append(type(e).__name__ + ": " + str(e)[:80])
        with lock:
            stats["calls"] += 1
        i += 1


def one_round(url, clients, seconds, reqs, refs, budget=None) -> dict:
    stats, lock = {"calls": 0, "latency": [], "different": 0, "errors": []}, threading.Lock()
    job = None
    if budget:
        job = Client(url, verbose=False).submit(dataset="cifar10", time_budget=budget, epochs=200, api_name="/train")
        deadline = time.time() + 60
        while not job.outputs() and time.time() < deadline:  # the run has started
            time.sleep(0.2)
    start = time.time()
    threads = [
        threading.Thread(target=client_loop, args=(url, k, reqs, refs, start + seconds, stats, lock))
        for k in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    wall = time.time() - start
    steps = None
    if job is not None:
        job.result()
        steps = int(re.search(r"after ([\d,]+) steps", job.outputs()[-1][0]).group(1).replace(",", ""))
    lat = sorted(stats["latency"])
    return {
        "clients": clients,
        "run": budget is not None,
        "calls": stats["calls"],
        "errors": stats["errors"],
        "different": stats["different"],
        "per_s": len(lat) / wall,
        "median_ms": 1000 * statistics.median(lat) if lat else None,
        "p95_ms": 1000 * lat[int(0.95 * (len(lat) - 1))] if lat else None,
        "steps": steps,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--budget", type=float, default=30, help="the training run's time budget (s)")
    p.add_argument("--data", default=os.environ.get("VITVIZ_DATA"))
    a = p.parse_args()
    server, url = start_app(a.data)
    try:
        reqs = requests()
        one = Client(url, verbose=False)
        refs = [canonical(call(one, r)) for r in reqs]  # each call alone: the references
        rows = [one_round(url, n, a.seconds, reqs, refs) for n in a.clients]
        alone = one_round(url, 0, a.budget, reqs, refs, budget=a.budget)
        rows += [one_round(url, n, a.budget, reqs, refs, budget=a.budget) for n in a.clients]
    finally:
        server.kill()
    print(
        f"{len(reqs)} distinct /explain calls; {os.cpu_count()} cores; during a run: quick preset, "
        f"{a.budget:g} s budget, {alone['steps']} steps with no clients"
    )
    print("clients | training | calls | errors | different | median ms | p95 ms | calls/s | run's steps")
    for r in rows:
        med = f"{r['median_ms']:.0f}" if r["median_ms"] else "-"
        p95 = f"{r['p95_ms']:.0f}" if r["p95_ms"] else "-"
        share = f"{r['steps']} ({100 * r['steps'] / alone['steps']:.0f}%)" if r["steps"] else "-"
        print(
            f"{r['clients']:7d} | {'yes' if r['run'] else 'no':>8} | {r['calls']:5d} | {len(r['errors']):6d} | "
            f"{r['different']:9d} | {med:>9} | {p95:>6} | {r['per_s']:7.2f} | {share}"
        )
    for r in rows:
        for e in r["errors"][:3]:
            print(f"  error with {r['clients']} clients: {e}")


if __name__ == "__main__":
    main()
