"""Hugging Face ZeroGPU: is it on? Decided from SPACES_ZERO_GPU without importing torch.

On ZeroGPU the `spaces` package must be imported before anything touches CUDA; vitviz/__init__
does that first when `enabled()`. Only a true value turns it on ("1", "true", "yes", "on"); any
other value, "false" included, leaves it off.
"""

from __future__ import annotations

import os

TRUE = ("1", "true", "yes", "on")


def enabled() -> bool:
    return os.environ.get("SPACES_ZERO_GPU", "").strip().lower() in TRUE


def gpu_seconds_cap() -> float:
    """The most GPU time one run asks for (VITVIZ_ZEROGPU_MAX_S, default 120: a free account has 5 minutes a
    day, an anonymous visitor 2)."""
    try:
        v = float(os.environ.get("VITVIZ_ZEROGPU_MAX_S", "120"))
    except ValueError:
        v = 120.0
    return v if v > 0 else 120.0
