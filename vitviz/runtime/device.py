"""Where tensors run and in what precision, decided once.

`pick_device` chooses CUDA when there is one; `Precision` is built once per run
(nanoGPT's `ctx`): bf16 autocast on CUDA with bf16 and on CPUs with native bf16
(AVX512-BF16 or AMX), fp32 elsewhere. The CPU's flags are read once per process.
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

import torch


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@functools.lru_cache(maxsize=1)
def cpu_has_bf16() -> bool:
    """Whether the CPU has native bf16 units (AVX512-BF16 or AMX). VITVIZ_BF16=0 says no whatever the CPU (the
    fp32 path everywhere, as on an AVX2-only CPU)."""
    if os.environ.get("VITVIZ_BF16", "").strip().lower() in ("0", "false", "no", "off"):
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


class Precision:
    """The autocast context for one device, decided once; `with precision():` around each forward."""

    def __init__(self, device: torch.device, amp: bool = True):
        self.device = device
        self.bf16 = amp and bf16_available(device)

    def __call__(self):
        return torch.autocast(self.device.type, torch.bfloat16) if self.bf16 else contextlib.nullcontext()


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"GPU: {torch.cuda.get_device_name(device)}"
    return f"CPU: {torch.get_num_threads()} threads" + (", bf16" if cpu_has_bf16() else "")
