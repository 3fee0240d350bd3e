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

from vitviz.app import limits
from vitviz.training.config import TrainConfig, largest_batch

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("preset, width, depth, heads, patch", [("seed", 256, 4, 4, 4), ("quick", 64, 4, 4, 4)])
def test_the_largest_allowed_run_peaks_under_its_estimate(preset, width, depth, heads, patch):
    bound = limits.DEFAULTS["VITVIZ_TRAIN_MEMORY_GB"]
    cfg = TrainConfig(preset=preset, embed_dim=width, depth=depth, num_heads=heads, patch_size=patch)
    batch = largest_batch(cfg, bound)
    assert 8 < batch <= 2048
    estimate = TrainConfig(
        preset=preset, embed_dim=width, depth=depth, num_heads=heads, patch_size=patch, batch_size=batch
    ).peak_memory_gb()
    assert estimate <= bound
    if batch < 2048:  # one more image would be refused
        over = TrainConfig(
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
