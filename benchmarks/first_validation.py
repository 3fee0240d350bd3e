"""How soon a Train-tab run puts its first validation point on the curve.

    python benchmarks/first_validation.py [--dataset cifar10] [--seconds 40]

Runs the Train tab's default quick run (vitviz.app.live's stream, as the page gets it) on the
data set's full local copy, and prints, from the moment the run is asked for (data
already loaded, as on a page that has trained before; the first load is timed apart):
when the first step was reported, when the first validation point arrived and on how
many images, and how many points the curve had after `--seconds`. Target: the first
point within about 8 s.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from vitviz.app import live  # noqa: E402
from vitviz.runtime.device import pick_device  # noqa: E402
from vitviz.training import quick  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="cifar10")
    p.add_argument("--seconds", type=float, default=40)
    a = p.parse_args()
    device = pick_device("auto")
    t = time.perf_counter()
    quick.get_data(a.dataset)
    print(f"data loaded once in {time.perf_counter() - t:.1f} s")
    cfg = quick.run_config(device, dataset=a.dataset, time_budget=a.seconds)
    stop = threading.Event()
    t0 = time.perf_counter()
    first_step = first_val = None
    vals = 0
    for up in live.stream_run(cfg, stop):
        now = time.perf_counter() - t0
        if first_step is None and up.status and "step" in up.status:
            first_step = now
        if up.curves is not None and up.status is None and not up.done:  # a quick-validation update
            vals += 1
            if first_val is None:
                first_val = now
        if up.done:
            break
    print(
        f"{a.dataset}: first step reported at {first_step:.1f} s; first validation point at "
        f"{first_val:.1f} s ({cfg.report.quick_val_images} held-out images, every {cfg.report.quick_val_every_s:g} s); "
        f"{vals} points in a {a.seconds:g} s run (target: the first within about 8 s)"
    )


if __name__ == "__main__":
    main()
