"""Peak memory and wall time of a whole Train-tab run, measured, against its estimate and its budget.

    python benchmarks/run_memory.py                    # the largest run VITVIZ_TRAIN_MEMORY_GB admits (4 GB)
    python benchmarks/run_memory.py --bound 1 --budget 20 --precision bf16

A run is what the Train tab starts (vitviz.app.live.stream_run: the steps, the quick validations,
the epoch's and the final validation, the probe pictures, the kept snapshots), on synthetic CIFAR-sized
data, in a fresh process. Of the Train tab's architectures at its extremes (benchmarks/train_memory.py),
the one whose largest admitted batch moves the most tokens through its layers is run at that batch. It
prints the growth of the process's peak resident memory (VmHWM, its children included: it has none)
over the idle process against TrainConfig.peak_memory_gb, and the run's wall time against its budget.
`--precision bf16` forces bf16 autocast (attention by bf16 matmuls, the path that holds the most)
whatever the CPU's speed; fp32 is what VITVIZ_BF16=0 runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def largest_admitted(bound_gb: float, arch: tuple | None = None):
    """The TrainConfig of the largest run the bound admits for `arch` (width, depth, heads, patch, preset), or
    of the Train tab's extreme architectures the one whose run keeps the most: its parameters' copies and the
    probe pictures' attention beside its largest admitted batch's step."""
    from train_memory import EXTREMES

    from vitviz.training.config import TrainConfig, largest_batch

    best = None
    for w, d, h, patch, preset in [arch] if arch else EXTREMES:
        cfg = TrainConfig.of(preset=preset, embed_dim=w, depth=d, num_heads=h, patch_size=patch)
        cfg = cfg.but(batch_size=largest_batch(cfg, bound_gb))
        if cfg.peak_memory_gb() > bound_gb:
            continue  # not admitted even at the smallest batch
        m = cfg.model_config()
        keeps = m.depth * (m.embed_dim**2 * 12 + m.num_heads * (m.num_patches + 1) ** 2)
        if best is None or keeps > best[0]:
            best = (keeps, cfg)
    return best[1]


def run(bound_gb: float, budget: float, precision: str, arch: tuple | None = None) -> dict:
    import torch
    from train_memory import peak, reset_peak

    from vitviz.app import live
    from vitviz.data.datasets import CIFAR10_CLASSES, Dataset, Split
    from vitviz.runtime import speed
    from vitviz.training import quick

    if precision == "bf16":  # whatever the CPU's speed: the path that holds the most
        speed.decide = lambda *a, **k: speed.Choice(True, "matmuls", 1.0, "bf16: forced")
    cfg = largest_admitted(bound_gb, arch)
    g = torch.Generator().manual_seed(0)

    def split(n):
        return Split(torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8, generator=g), torch.arange(n) % 10)

    n_train = 3 * cfg.budget.batch_size  # a few steps an epoch: the epoch's validation and snapshot come round
    data = Dataset(
        "cifar10", split(n_train), split(1000), split(100), list(CIFAR10_CLASSES), (0.5,) * 3, (0.5,) * 3, True, "x"
    )
    quick._datasets["cifar10"] = data
    cfg = quick.run_config(
        torch.device("cpu"),
        dataset="cifar10",
        preset=cfg.arch.preset,
        depth=cfg.arch.depth,
        num_heads=cfg.arch.num_heads,
        embed_dim=cfg.arch.embed_dim,
        patch_size=cfg.arch.patch_size,
        batch_size=cfg.budget.batch_size,
        time_budget=budget,
        epochs=200,
    )
    base = reset_peak()
    t0 = time.perf_counter()
    last, marks = None, []
    for last in live.stream_run(cfg, stop=__import__("threading").Event()):
        marks.append((round(time.perf_counter() - t0, 1), (last.status or "")[-60:].replace("\n", " ")))
    wall = time.perf_counter() - t0
    m = cfg.model_config()
    return dict(
        config=[m.embed_dim, m.depth, m.num_heads, cfg.budget.batch_size, m.patch_size, cfg.arch.preset],
        precision=precision,
        measured_gb=round((peak() - base) / 2**20, 3),
        estimate_gb=round(cfg.peak_memory_gb(), 3),
        budget_s=budget,
        wall_s=round(wall, 1),
        status=(last.status or "")[:200] if last else "",
        timeline=[m for i, m in enumerate(marks) if m[1] and (i < 2 or i >= len(marks) - 4)],
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bound", type=float, default=float(os.environ.get("VITVIZ_TRAIN_MEMORY_GB") or 4))
    p.add_argument("--budget", type=float, default=30.0, help="the run's time budget, seconds")
    p.add_argument("--precision", choices=["fp32", "bf16", "both"], default="both")
    p.add_argument("--arch", help="width,depth,heads,patch,preset (default: the extreme that keeps the most)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        arch = a.arch.split(",") if a.arch else None
        print(json.dumps(run(a.bound, a.budget, a.precision, (*map(int, arch[:4]), arch[4]) if arch else None)))
        return
    for precision in ("fp32", "bf16") if a.precision == "both" else (a.precision,):
        env = {**os.environ, "VITVIZ_BF16": "0" if precision == "fp32" else ""}
        args = ["--bound", str(a.bound), "--budget", str(a.budget), "--precision", precision, "--child"]
        args += ["--arch", a.arch] if a.arch else []
        out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env, timeout=3600)
        if out.returncode:
            raise SystemExit(out.stderr[-3000:])
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{r['precision']:>5} {' '.join(map(str, r['config']))}: measured {r['measured_gb']:.2f} GB, estimate "
            f"{r['estimate_gb']:.2f} GB ({r['estimate_gb'] / max(r['measured_gb'], 1e-9):.2f}x); "
            f"wall {r['wall_s']:.1f} s for a {r['budget_s']:g} s budget",
            flush=True,
        )


if __name__ == "__main__":
    main()
