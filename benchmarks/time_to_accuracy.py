"""Time to accuracy of the Train tab's quick run (vitviz's training loop, in this process), against the old recipe.

    python benchmarks/time_to_accuracy.py [--budgets 60 180] [--dataset cifar10] [--baseline] [--ablate]

For each time budget, trains with the app's quick-run settings for that budget
(vitviz.training.quick.quick_defaults: the learning-rate schedule, the token drop and the weight
average all fit the budget, as in the app), then reports the test accuracy of the model it ends
with. `--baseline` also runs, in the same invocation and on the same machine, the quick recipe as it
was before it was designed for a time budget (BASELINE below, frozen here), and prints the
difference; `--ablate` runs the recipe without each of its ideas in turn (WITHOUT below), to say what
each gave. Every run of one invocation trains in the precision measured once at its start, so that
a noisy measurement cannot favour one recipe; data loading and evaluation are not training time.
Targets on 2 CPU cores with bf16 units: 52% at 60 s and 65% at 180 s, and 5 points over the baseline
at 60 s; MNIST 97% at 60 s. On one GPU: 85% within 60 s, 90% within 120 s.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vitviz.data.datasets import Dataset, load_dataset  # noqa: E402
from vitviz.models.vit import ViT  # noqa: E402
from vitviz.training.loop import TrainConfig, describe_device, pick_device, train  # noqa: E402
from vitviz.training.precision import run_precision  # noqa: E402
from vitviz.training.quick import quick_defaults  # noqa: E402

# The CPU quick run as it stood before this benchmark's --baseline existed: an epoch recipe cut short by the
# budget (preset `quick`: width 64, depth 4, 4 heads), every token every step, no weight average.
BASELINE = dict(preset="quick", epochs=30, batch_size=256, lr=6e-3, warmup=0.5, label_smoothing=0.1, augment=True)
# Each idea of the budget recipe, and the recipe without it (--ablate runs each).
WITHOUT = {
    "token drop": dict(token_drop=0.0),
    "weight average": dict(ema=0.0),
    "no crop and flip": dict(augment=True),
}
TARGETS = {
    ("cifar10", "cpu"): {60: 0.52, 180: 0.65},
    ("mnist", "cpu"): {60: 0.97},
    ("cifar10", "cuda"): {60: 0.85, 120: 0.90},
}


def run(recipe: dict, data: Dataset, budget: float, device) -> tuple[float, str]:
    """Train `recipe` for `budget` seconds in this process (vitviz's loop, as the CLI and the app run it) and
    return (test accuracy, how far it got)."""
    cfg = TrainConfig.parse(**{**recipe, "dataset": data.name, "time_budget": budget, "device": device.type})
    for ev in train(cfg, data=data, final_test=True):
        if ev["event"] == "start":
            how = ev["precision"]
        if ev["event"] in ("done", "stopped", "error"):
            end = ev
    if end["event"] == "error":
        raise SystemExit(f"training failed: {end['message']}")
    return end["test_acc"], f"{end['history'][-1]['epoch']:.2f} epochs ({end['step']} steps; {how})"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--budgets", type=float, nargs="+", default=None)
    p.add_argument("--dataset", default="cifar10", choices=["cifar10", "mnist"])
    p.add_argument("--baseline", action="store_true", help="also run the old quick recipe, in this invocation")
    p.add_argument("--ablate", action="store_true", help="also run the recipe without each of its ideas")
    p.add_argument("--device", default="auto")
    p.add_argument("--data", default=os.environ.get("VITVIZ_DATA"))
    a = p.parse_args()
    device = pick_device(a.device)
    budgets = a.budgets or ([60, 120] if device.type == "cuda" else [60, 180])
    targets = TARGETS.get((a.dataset, device.type), {})
    data = load_dataset(a.dataset, a.data)
    # the process's precision is measured once, before any clock runs, and every recipe then trains in it
    model = ViT(TrainConfig.parse(**quick_defaults(device, budgets[0], a.dataset), dataset=a.dataset).model_config())
    chosen = run_precision(model.to(device), device, True, 256).choice.reason
    print(f"device: {describe_device(device)}; {a.dataset}; {chosen}")
    for b in budgets:
        recipe = quick_defaults(device, b, a.dataset)
        print(f"quick run for {b:g} s: {recipe}", flush=True)
        acc, how = run(recipe, data, b, device)
        t = targets.get(int(b))
        line = f"budget {b:5.0f} s: test accuracy {100 * acc:.2f}% after {how}"
        line += f" (target {100 * t:.0f}%: {'met' if acc >= t else 'missed'})" if t else ""
        if a.baseline:
            base, how = run(BASELINE, data, b, device)
            line += f"; baseline recipe {100 * base:.2f}% after {how}: {100 * (acc - base):+.2f} points"
        print(line, flush=True)
        for idea, undo in WITHOUT.items() if a.ablate else ():
            if all(recipe.get(k) == v for k, v in undo.items()):
                continue  # the recipe does not use this idea at this budget
            less, how = run({**recipe, **undo}, data, b, device)
            print(f"  without {idea}: {100 * less:.2f}% after {how}: the idea gave {100 * (acc - less):+.2f} points")


if __name__ == "__main__":
    main()
