"""Peak memory of a training step, measured, against TrainConfig.peak_memory_gb's estimate.

    python benchmarks/train_memory.py            # the calibration grid (a few minutes on 2 cores)
    python benchmarks/train_memory.py --largest  # each menu architecture at the largest batch that is allowed

Each configuration runs two real training steps (AdamW, bf16 autocast where the CPU has it) in a fresh
process; the growth of its peak resident memory over the idle process is what the Train tab's
VITVIZ_TRAIN_MEMORY_GB bound is checked against.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The Train tab's architectures at its extremes (width, depth, heads, patch, preset), each run at the largest batch
# whose estimate VITVIZ_TRAIN_MEMORY_GB allows: the runs where an estimate below the truth would hurt.
EXTREMES = [
    (64, 4, 4, 4, "quick"),
    (64, 4, 8, 2, "quick"),
    (384, 12, 8, 2, "tiny"),
    (384, 12, 8, 4, "tiny"),
    (512, 12, 16, 4, "tiny"),
    (32, 1, 1, 2, "quick"),
    (256, 4, 4, 4, "seed"),
    (128, 12, 16, 2, "tiny"),
]
GRID = [
    (64, 4, 4, 256, 4),
    (192, 6, 6, 128, 4),
    (256, 4, 4, 512, 4),
    (512, 12, 16, 64, 4),
    (384, 8, 8, 256, 4),
    (512, 12, 16, 256, 4),
    (128, 4, 4, 1024, 2),
]


def _status_kb(field: str) -> int | None:
    """A field of /proc/self/status in KiB (Linux), or None."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak() -> int:
    """Start measuring the peak afresh (Linux: clear_refs 5 resets VmHWM); the resident KiB now. ru_maxrss is
    not used: it survives exec, so a child of a large process would start at its parent's peak."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _status_kb("VmRSS") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak() -> int:
    return _status_kb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def one(w: int, d: int, h: int, bs: int, patch: int, preset: str = "tiny") -> dict:
    sys.path.insert(0, str(ROOT))
    import torch

    from vitviz.data.datasets import CIFAR10_CLASSES, Dataset, Split
    from vitviz.runtime.device import Precision, pick_device
    from vitviz.training.config import TrainConfig
    from vitviz.training.loop import build_model, make_optimizer, train_step

    base = reset_peak()
    cfg = TrainConfig.of(preset=preset, embed_dim=w, depth=d, num_heads=h, patch_size=patch, batch_size=bs)
    empty = Split(torch.zeros(0, 3, 32, 32, dtype=torch.uint8), torch.zeros(0, dtype=torch.long))
    data = Dataset("cifar10", empty, empty, empty, list(CIFAR10_CLASSES), (0.5,) * 3, (0.5,) * 3, True, "none")
    model = build_model(cfg, data).train()
    opt = make_optimizer(model, cfg)
    precision = Precision(pick_device("cpu"))
    x = torch.randn(bs, 3, 32, 32)
    y = torch.nn.functional.one_hot(torch.zeros(bs, dtype=torch.long), 10).float()
    t = time.perf_counter()
    for _ in range(2):
        train_step(model, opt, x, y, 1e-3, cfg, precision)
    grow = (peak() - base) / 2**20  # KiB -> GB
    return dict(
        config=[w, d, h, bs, patch, preset],
        measured_gb=round(grow, 2),
        estimate_gb=round(cfg.peak_memory_gb(), 2),
        step_s=round((time.perf_counter() - t) / 2, 2),
    )


def largest(w: int, d: int, h: int, patch: int, preset: str) -> tuple:
    """(w, d, h, the largest batch the memory bound allows, patch, preset)."""
    sys.path.insert(0, str(ROOT))
    from vitviz.training.config import TrainConfig, largest_batch

    limit = float(os.environ.get("VITVIZ_TRAIN_MEMORY_GB") or 4)
    cfg = TrainConfig.of(preset=preset, embed_dim=w, depth=d, num_heads=h, patch_size=patch)
    return w, d, h, largest_batch(cfg, limit), patch, preset


def measure(c: tuple) -> dict:
    """One configuration's peak, in a fresh process."""
    out = subprocess.run([sys.executable, __file__, *map(str, c)], capture_output=True, text=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    if "-h" in sys.argv or "--help" in sys.argv:
        print("usage: python benchmarks/train_memory.py [--largest]\n\n" + __doc__.split("\n")[0])
        return
    if len(sys.argv) in (6, 7):
        print(json.dumps(one(*map(int, sys.argv[1:6]), *sys.argv[6:])))
        return
    grid = [largest(*c) for c in EXTREMES] if "--largest" in sys.argv else GRID
    print("width depth heads batch patch | measured GB | estimate GB | ratio | s/step")
    for c in grid:
        r = measure(c)
        print(
            f"{' '.join(map(str, c)):>24} | {r['measured_gb']:11.2f} | {r['estimate_gb']:11.2f} | "
            f"{r['estimate_gb'] / r['measured_gb']:5.2f} | {r['step_s']:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
