"""Where a training step's time goes: torch.profiler over a few steps, grouped into kinds of work.

    python benchmarks/profile_step.py [--preset quick] [--batch 256] [--steps 8] [--no-amp]

Runs vitviz's own training step (vitviz.training.loop.train_step: forward, loss, backward, gradient
clipping, AdamW) on random CIFAR-sized batches of the given preset (`quick`: the Train tab's
default; `seed`: the tutorial's dims), after two warm-up steps, and prints a markdown table of
the self CPU time of each kind of operator, its share of the step, and the step's images/s; what the
wall clock saw beyond torch's operators (the dropout's random bits come from numpy) is a row of its own.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vitviz.models.vit import ViT, make_config  # noqa: E402
from vitviz.runtime.device import describe_device  # noqa: E402
from vitviz.training.config import TrainConfig  # noqa: E402
from vitviz.training.loop import make_optimizer, train_step  # noqa: E402
from vitviz.training.precision import run_precision  # noqa: E402

KINDS = [  # (kind, substrings of operator names), first match wins
    ("matrix multiplies (linear, attention scores)", ("addmm", "mm", "bmm", "matmul", "linear", "baddbmm")),
    ("attention kernel (SDPA)", ("scaled_dot_product", "flash_attention", "_efficient_attention")),
    ("LayerNorm", ("layer_norm",)),
    (
        "optimizer (AdamW) and gradient clipping",
        ("adam", "_foreach", "lerp", "addcdiv", "norm", "sqrt", "clamp"),
    ),
    ("GELU", ("gelu",)),
    ("softmax and cross-entropy", ("softmax", "log_softmax", "nll_loss", "cross_entropy")),
    (
        "dropout (one addcmul, with the residual add where it has one) and its mask",
        ("addcmul", "random_", "bernoulli", "dropout", "where", "ge"),
    ),
    ("patch embedding (conv)", ("conv", "im2col", "col2im")),
    (
        "copies, casts, layout",
        (
            "copy_",
            "_to_copy",
            "contiguous",
            "clone",
            "cat",
            "transpose",
            "permute",
            "reshape",
            "view",
            "expand",
            "empty",
            "zeros",
            "fill_",
            "aten::t",
        ),
    ),
    ("elementwise add/mul (residuals, scales, grads)", ("add", "mul", "sub", "div", "sum", "mean")),
]


OUTSIDE = "outside torch's operators (numpy's dropout bits, Python, the profiler)"


def kind_of(name: str) -> str:
    n = name.lower()
    for kind, keys in KINDS:
        if any(k in n for k in keys):
            return kind
    return "other (framework, autograd bookkeeping)"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="quick")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--no-amp", action="store_true")
    a = p.parse_args()
    torch.manual_seed(0)
    model = ViT(make_config(a.preset, dropout=0.0 if a.preset == "quick" else None)).train()
    cfg = TrainConfig.of(dataset="cifar10", preset=a.preset, batch_size=a.batch, amp=not a.no_amp)
    opt = make_optimizer(model, cfg)
    precision = run_precision(model, torch.device("cpu"), cfg.budget.amp, a.batch)  # measured, as a run does
    x = torch.randn(a.batch, 3, 32, 32)
    y = torch.randint(0, 10, (a.batch,))
    for _ in range(2):
        train_step(model, opt, x, y, 1e-3, cfg, precision)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(a.steps):
            train_step(model, opt, x, y, 1e-3, cfg, precision)
        wall = (time.perf_counter() - start) * 1e6
    rows: dict[str, float] = {}
    for ev in prof.key_averages():
        rows[kind_of(ev.key)] = rows.get(kind_of(ev.key), 0.0) + ev.self_cpu_time_total
    rows[OUTSIDE] = max(0.0, wall - sum(rows.values()))
    total = sum(rows.values())
    step_ms = total / 1000 / a.steps
    print(
        f"{describe_device(torch.device('cpu'))}; preset {a.preset}, batch {a.batch}, "
        f"{precision.choice.reason}: {step_ms:.1f} ms a step, "
        f"{a.batch / step_ms * 1000:.0f} img/s under the profiler"
    )
    print("| where a step's time goes | ms a step | share |")
    print("|---|---|---|")
    for kind, us in sorted(rows.items(), key=lambda kv: -kv[1]):
        print(f"| {kind} | {us / 1000 / a.steps:.1f} | {100 * us / total:.0f}% |")
    print("\nthe ten largest operators:")
    for ev in sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:10]:
        print(f"  {ev.key:45s} {ev.self_cpu_time_total / 1000 / a.steps:7.2f} ms  x{ev.count // a.steps}")


if __name__ == "__main__":
    main()
