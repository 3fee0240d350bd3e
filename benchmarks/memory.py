"""Does memory come back after visitors leave? The server's resident memory after one visitor's finished
run and after ten more visitors' runs, once their states have expired.

    python benchmarks/memory.py [--visitors 10] [--budget 8] [--data ../shared/data]

Launches `python app.py` on 127.0.0.1 with VITVIZ_STATE_TTL_S=5. Each visitor is a new gradio_client
session that trains the shipped CIFAR-10 architecture (preset `cifar`, 1.8M parameters, batch 128) for
`budget` seconds, so each keeps its model and epoch snapshots in its state until it expires. Prints the
server's RSS (from /proc) after the first visitor and after all of them, each after the states expired.
"""

from __future__ import annotations

import argparse
import os
import time

from gradio_client import Client
from load import start_app


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def visit(url: str, budget: float):
    Client(url, verbose=False).predict(
        dataset="cifar10",
        preset="cifar",
        depth=6,
        heads=6,
        width=192,
        patch=4,
        epochs=200,
        time_budget=budget,
        batch_size=128,
        api_name="/train",
    )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--visitors", type=int, default=10)
    p.add_argument("--budget", type=float, default=8)
    p.add_argument("--data", default=os.environ.get("VITVIZ_DATA"))
    a = p.parse_args()
    os.environ["VITVIZ_STATE_TTL_S"] = "5"
    server, url = start_app(a.data)
    try:
        idle = rss_mb(server.pid)
        visit(url, a.budget)
        time.sleep(8)
        one = rss_mb(server.pid)
        for _ in range(a.visitors):
            visit(url, a.budget)
        time.sleep(8)
        many = rss_mb(server.pid)
    finally:
        server.kill()
    print(
        f"server RSS: idle {idle:.0f} MB; after 1 visitor's run {one:.0f} MB; after {a.visitors} more "
        f"{many:.0f} MB: {many - one:+.0f} MB (states expire 5 s after the last action)"
    )


if __name__ == "__main__":
    main()
