"""A run's precision, measured on its own model: the first run of a process times a few forward and backward
passes of its model in fp32 and in bf16, and its attention alone by each path (vitviz.runtime.speed);
every later run of the process keeps that choice."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vitviz.models.fast_paths import attend
from vitviz.models.vit import ViT
from vitviz.runtime import speed
from vitviz.runtime.device import Precision

MEASURE_IMAGES = 32  # the passes are timed on a batch of at most this many (random) images


def measure(model: ViT, device: torch.device, batch_size: int) -> speed.Choice:
    """Time `model`'s forward and backward passes, and its attention kernel, in fp32 and in bf16, on random
    inputs of the run's shape. The weights, their gradients and the random generators are left as they were."""
    cfg = model.config
    n = min(batch_size, MEASURE_IMAGES)
    hd, tokens = cfg.embed_dim // cfg.num_heads, cfg.num_patches + 1
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        x = torch.randn(n, cfg.in_chans, cfg.image_size, cfg.image_size, device=device)
        target = torch.randint(0, max(1, cfg.num_classes), (n,), device=device)
        # the attention alone is cheap: timed at the run's own batch (at most 256), where timings are steadier
        shape = (min(batch_size, 256), cfg.num_heads, tokens, hd)
        qkv = [torch.randn(shape, device=device) for _ in range(3)]

        def passes(choice: speed.Choice) -> None:
            with Precision(device, choice=choice)():
                logits = model(x)
            F.cross_entropy(logits.float(), target).backward()

        def attention(path: str) -> None:
            q, k, v = (t.bfloat16().requires_grad_() for t in qkv)  # what bf16 matmuls hand the attention
            with Precision(device, choice=speed.Choice(True, path, 1.0, ""))():
                attend(q, k, v, hd**-0.5).float().sum().backward()

        try:
            return speed.decide(device, passes, attention)
        finally:
            model.zero_grad(set_to_none=True)


def run_precision(model: ViT, device: torch.device, amp: bool, batch_size: int) -> Precision:
    """The run's Precision: fp32 when mixed precision is off, else the process's measured choice (measured now,
    on this model, when no run of the process has measured yet)."""
    if not amp:
        return Precision(device, amp=False)
    return Precision(device, choice=speed.chosen("training", device, lambda: measure(model, device, batch_size)))
