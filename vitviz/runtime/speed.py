"""bf16 or fp32, chosen by timing the work itself, once per process.

A CPU flag says that bf16 units exist, not that they are fast: the same flag sits on units of very
different throughput, and a CPU can have a fast bf16 matmul and a slow bf16 attention backward. So the
first run that needs a choice times its own work in both precisions:

1. a small matmul in each (milliseconds), so that a CPU without fast bf16 units is never asked to run a
   whole step in bf16 (an AVX2-only CPU multiplies bf16 about 80x slower than fp32);
2. the attention alone, forward and backward, at the run's own shape, by each of its paths (ATTENTION): the
   fused kernel in fp32 (its bf16 inputs cast up and its gradients cast back), the fused kernel in bf16, and
   plain bf16 matmuls and softmax (fastest for short sequences on many CPUs); the fastest is kept;
3. a few passes of the run's own model, fp32 against bf16 matmuls (attention as chosen in 2).

The choice is kept for the process, one per kind of work ("training": forward and backward;
"inference": forward only) and device. VITVIZ_BF16=0 chooses fp32 without measuring.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

MIN_GAIN = 1.1  # bf16 is chosen only when it is at least this much faster than fp32
# How attention runs under bf16 autocast: the fused kernel in fp32 or in bf16, or bf16 matmuls and a softmax.
ATTENTION = {"fp32": "the fused kernel in fp32", "bf16": "the fused kernel in bf16", "matmuls": "bf16 matmuls"}


@dataclass(frozen=True)
class Choice:
    """What runs in bf16, and why, in a line a person can read."""

    bf16: bool  # the matmuls (linear layers, convolutions) under bf16 autocast
    attention: str  # with bf16 matmuls, how attention runs: a key of ATTENTION
    speedup: float  # the measured work's fp32 time over the chosen path's time (1.0 for fp32)
    reason: str  # "bf16: 2.6x faster here", "fp32: this CPU has no fast bf16 ..."
    timings: dict = field(default_factory=dict, compare=False)  # what was measured, seconds each


def fp32(reason: str, timings: dict | None = None) -> Choice:
    return Choice(False, "fp32", 1.0, reason, timings or {})


def forced_fp32() -> bool:
    """VITVIZ_BF16=0 (or false, no, off): fp32 everywhere, as on a CPU without bf16 units."""
    return os.environ.get("VITVIZ_BF16", "").strip().lower() in ("0", "false", "no", "off")


def race(contenders: dict[str, Callable[[], object]], rounds: int = 3) -> dict[str, float]:
    """The shortest time of each contender over `rounds` rounds, after one untimed call each (caches, lazy
    allocations). The contenders take turns within each round, so a burst of other work on shared cores slows
    them alike rather than one of them."""
    for fn in contenders.values():
        fn()
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(rounds):
        for name, fn in contenders.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def matmul_gain(device: torch.device, n: int = 256) -> float:
    """How many times faster an n x n x n matmul runs in bf16 than in fp32 on `device`: a few milliseconds at
    most, even where bf16 is 80x slower."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    la, lb = a.bfloat16(), b.bfloat16()
    t = race({"fp32": lambda: a @ b, "bf16": lambda: la @ lb}, rounds=5)
    return t["fp32"] / t["bf16"]


def decide(
    device: torch.device,
    passes: Callable[[Choice], object],
    attention: Callable[[str], object] | None = None,
    rounds: int = 3,
) -> Choice:
    """Time `passes(choice)` (the run's own work, under Precision(device, choice=choice)) in fp32 and in bf16,
    and `attention(path)` (its attention alone) by each path of ATTENTION, and return the faster choice."""
    if forced_fp32():
        return fp32("fp32: VITVIZ_BF16=0 asks for it")
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return Choice(True, "bf16", 1.0, "bf16: this GPU has bf16 units")
        return fp32("fp32: this GPU has no bf16 units")
    if device.type != "cpu":
        return fp32(f"fp32 on {device.type}")
    gain = matmul_gain(device)
    timings = {"matmul_gain": gain}
    if gain < MIN_GAIN:
        return fp32(f"fp32: this CPU has no fast bf16 (a bf16 matmul runs at {gain:.2g}x fp32's speed here)", timings)
    path = "fp32"
    if attention is not None:
        raced = race({name: lambda name=name: attention(name) for name in ATTENTION}, rounds + 2)
        timings |= {f"attention {name}": t for name, t in raced.items()}
        path = min(raced, key=raced.get)
    timings |= race({"fp32": lambda: passes(fp32("")), "bf16": lambda: passes(Choice(True, path, 1.0, ""))}, rounds)
    speed = timings["fp32"] / timings["bf16"]
    if speed < MIN_GAIN:
        return fp32(f"fp32: bf16 was no faster here ({speed:.2f}x fp32's speed)", timings)
    why = f"bf16: {speed:.1f}x faster here"
    if attention is not None:
        gain = timings["attention fp32"] / timings[f"attention {path}"]
        why += f"; attention by {ATTENTION[path]}" + (f", {gain:.1f}x the fp32 kernel's speed" if gain > 1 else "")
    return Choice(True, path, speed, why, timings)


_choices: dict[tuple[str, str], Choice] = {}
_locks: dict[tuple[str, str], threading.Lock] = {}
_guard = threading.Lock()


def chosen(kind: str, device: torch.device, measure: Callable[[], Choice]) -> Choice:
    """The process's choice for `kind` of work on `device`: the first caller measures (`measure()`), everyone
    after gets the same choice; a caller arriving during the measurement waits for it."""
    key = (kind, device.type)
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _choices:
            _choices[key] = measure()
        return _choices[key]
