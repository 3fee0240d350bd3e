"""The memory estimate holds for the largest runs the Train tab allows.

Each run is the architecture at the largest batch whose estimate the default bound
(VITVIZ_TRAIN_MEMORY_GB, 4 GB) lets through, trained for two real steps in a child process
(benchmarks/train_memory.py), whose peak resident memory over the idle process must stay under
the estimate. The seed preset (dropout 0.2) is the one the estimate once fell short on.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vitviz.app.serving import limits
from vitviz.training.config import TrainConfig, largest_batch

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("preset, width, depth, heads, patch", [("seed", 256, 4, 4, 4), ("quick", 64, 4, 4, 4)])
def test_the_largest_allowed_run_peaks_under_its_estimate(preset, width, depth, heads, patch):
    bound = limits.DEFAULTS["VITVIZ_TRAIN_MEMORY_GB"]
    cfg = TrainConfig.of(preset=preset, embed_dim=width, depth=depth, num_heads=heads, patch_size=patch)
    batch = largest_batch(cfg, bound)
    assert 8 < batch <= 2048
    estimate = TrainConfig.of(
        preset=preset, embed_dim=width, depth=depth, num_heads=heads, patch_size=patch, batch_size=batch
    ).peak_memory_gb()
    assert estimate <= bound
    if batch < 2048:  # one more image would be refused
        over = TrainConfig.of(
            preset=preset, embed_dim=width, depth=depth, num_heads=heads, patch_size=patch, batch_size=batch + 1
        )
        assert over.peak_memory_gb() > bound
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "train_memory.py"),
            str(width),
            str(depth),
            str(heads),
            str(batch),
            str(patch),
            preset,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    measured = json.loads(out.stdout.strip().splitlines()[-1])["measured_gb"]
    assert 0.3 < measured < estimate, (measured, estimate)


@pytest.mark.parametrize("precision", ["fp32", pytest.param("bf16", marks=pytest.mark.bf16)])
def test_a_whole_run_at_the_largest_admitted_size_peaks_under_its_estimate(precision):
    """A whole Train-tab run (its steps, quick validations, epoch ends, final validation, probe pictures and
    kept snapshots), in a child process, at the largest size a 1.2 GB bound admits (benchmarks/run_memory.py picks
    the architecture that keeps the most): its peak over the idle process stays under the estimate the bound
    was checked against. The bf16 path runs where the CPU has bf16 units (bf16 attention by matmuls, the path
    that holds the most)."""
    args = ["--bound", "1.2", "--budget", "8", "--precision", precision, "--child"]
    env = {**__import__("os").environ, "VITVIZ_BF16": "0" if precision == "fp32" else ""}
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run_memory.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["estimate_gb"] <= 1.2 and "Finished" in r["status"], r
    assert 0.05 < r["measured_gb"] < r["estimate_gb"], r


def test_a_timed_run_takes_no_step_past_its_budget_and_validates_what_fits():
    from vitviz.training.clock import RunClock

    cfg = TrainConfig.of(time_budget=30)
    clock = RunClock(cfg, step=0, batch=32)
    clock.t0 -= 20  # 20 s trained
    clock.stepped(5.0)
    assert not clock.over()  # 20 + 5 < 30: one more step fits
    clock.stepped(30.0)
    assert clock.over()  # a step now takes about 10 s (its recent average): the next would end past 30 s
    end = RunClock(cfg, step=0, batch=32)
    end.t0 -= 20
    end.stepped(5.0)
    end.ended_epoch(6.0)
    assert end.over()  # 20 s, a 5 s step and the run's end (as long as the last epoch's: 6 s) pass 30 s
    # 10 steps of 32 images in 20 s: 16 images/s trained, about 48/s forward; a tenth of the budget is 3 s
    assert clock.validation_cap(10) == pytest.approx(48 * 3, abs=2)
    assert clock.validation_cap(10, share=0.02) == pytest.approx(48 * 2, abs=2)  # 2 s at least
    assert RunClock(TrainConfig.of(time_budget=0), 0, 32).validation_cap(10) == 0  # no budget: every image
