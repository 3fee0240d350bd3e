"""Where tensors run and in what precision, decided once.

`pick_device` chooses CUDA when there is one; `Precision` is built once per run
(nanoGPT's `ctx`) from a `vitviz.runtime.speed.Choice`: bf16 autocast where bf16 was measured faster,
with attention by the path measured fastest (`attention_path`).
The CPU's flags are read once per process; they say where bf16 can be tried, not what is faster.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from pathlib import Path

import torch

from vitviz.runtime.speed import Choice, forced_fp32, fp32


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@functools.lru_cache(maxsize=1)
def cpu_has_bf16() -> bool:
    """Whether the CPU has native bf16 units (AVX512-BF16 or AMX). VITVIZ_BF16=0 says no whatever the CPU (the
    fp32 path everywhere, as on an AVX2-only CPU)."""
    if forced_fp32():
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def bf16_available(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and cpu_has_bf16()


_attention: contextvars.ContextVar[str] = contextvars.ContextVar("attention", default="fp32")


def attention_path() -> str:
    """How attention runs under bf16 autocast inside the current `with precision():`, a key of
    vitviz.runtime.speed.ATTENTION ("fp32" outside one)."""
    return _attention.get()


class Precision:
    """The autocast context for one device, decided once; `with precision():` around each forward.

    Built from a measured `choice` (vitviz.runtime.speed); without one, bf16 where the device has bf16 units
    and the attention kernel in fp32 on a CPU (the exact path is `amp=False`)."""

    def __init__(self, device: torch.device, amp: bool = True, choice: Choice | None = None):
        self.device = device
        if not amp:
            choice = fp32("fp32: mixed precision is off")
        elif choice is None:
            low = bf16_available(device)
            path = "bf16" if low and device.type == "cuda" else "fp32"
            choice = Choice(low, path, 1.0, "bf16 units found" if low else "fp32")
        self.choice = choice
        self.bf16 = choice.bf16

    @contextlib.contextmanager
    def __call__(self):
        if not self.bf16:
            yield
            return
        token = _attention.set(self.choice.attention)
        try:
            with torch.autocast(self.device.type, torch.bfloat16):
                yield
        finally:
            _attention.reset(token)


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"GPU: {torch.cuda.get_device_name(device)}"
    return f"CPU: {torch.get_num_threads()} threads" + (", bf16 units" if cpu_has_bf16() else "")
