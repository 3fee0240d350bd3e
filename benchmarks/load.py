"""Explore latency and training progress while several visitors share the app.

    python benchmarks/load.py [--clients 0 1 4 8] [--budget 30] [--data ../shared/data]

Launches `python app.py` on 127.0.0.1, then for each number of Explore clients: starts one
time-budgeted training run (the quick preset) through gradio_client, and while it trains, that
many clients call /explain in a loop on gallery images (each loop ends when the run does, and
after at most budget + 60 s). Prints the /explain median and 90th-percentile latency and the
run's steps, with the steps as a share of the run with no Explore clients, measured in the
same invocation. A run's budget is wall-clock time, so the share is what other visitors cost it.
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

from app_latency import free_port

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gradio_client import Client, handle_file  # noqa: E402

from vitviz import gallery  # noqa: E402


def start_app(data: str | None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1"}
    if data:
        env["VITVIZ_DATA"] = data
    server = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
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


def explore_loop(url: str, done: threading.Event, hard_stop: float, out: list[float], errors: list[str]):
    client = Client(url, verbose=False)
    images = [p for p, _ in gallery.items("cifar10")]
    i = 0
    while not done.is_set() and time.time() < hard_stop:
        t = time.perf_counter()
        try:
            client.predict(handle_file(images[i % len(images)]), patch=i % 64, api_name="/explain")
            out.append(time.perf_counter() - t)
        except Exception as e:  # counted and reported, not hidden
            errors.append(type(e).__name__)
        i += 1


def one_round(url: str, clients: int, budget: float) -> dict:
    done = threading.Event()
    latencies: list[float] = []
    errors: list[str] = []
    hard_stop = time.time() + budget + 60
    job = Client(url, verbose=False).submit(dataset="cifar10", time_budget=budget, epochs=200, api_name="/train")
    while not job.outputs() and time.time() < hard_stop:  # the run has started
        time.sleep(0.2)
    threads = [threading.Thread(target=explore_loop, args=(url, done, hard_stop, latencies, errors)) for _ in range(clients)]
    for t in threads:
        t.start()
    job.result()
    done.set()
    for t in threads:
        t.join()
    final = job.outputs()[-1][0]
    steps = int(re.search(r"after ([\d,]+) steps", final).group(1).replace(",", ""))
    slowed = any("Slowed by other visitors" in str(o[0]) for o in job.outputs())
    lat = sorted(latencies)
    return {"clients": clients, "steps": steps, "calls": len(lat), "slowed_note": slowed, "errors": len(errors),
            "median_ms": 1000 * statistics.median(lat) if lat else None,
            "p90_ms": 1000 * lat[int(0.9 * (len(lat) - 1))] if lat else None}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--clients", type=int, nargs="+", default=[0, 1, 4, 8])
    p.add_argument("--budget", type=float, default=30)
    p.add_argument("--data", default=os.environ.get("VITVIZ_DATA"))
    a = p.parse_args()
    server, url = start_app(a.data)
    try:
        rows = [one_round(url, n, a.budget) for n in a.clients]
    finally:
        server.kill()
    base = rows[0]["steps"] if rows and rows[0]["clients"] == 0 else None
    print(f"training run: quick preset, {a.budget:g} s budget, on {os.cpu_count()} cores")
    print("Explore clients | /explain calls (errors) | median ms | p90 ms | training steps | share of 0 clients | "
          "note shown")
    for r in rows:
        share = f"{100 * r['steps'] / base:.0f}%" if base else "-"
        med = f"{r['median_ms']:.0f}" if r["median_ms"] else "-"
        p90 = f"{r['p90_ms']:.0f}" if r["p90_ms"] else "-"
        print(f"{r['clients']:15d} | {r['calls']:14d} ({r['errors']}) | {med:>9} | {p90:>6} | {r['steps']:14d} | {share:>18} | "
              f"{'yes' if r['slowed_note'] else 'no'}")


if __name__ == "__main__":
    main()
