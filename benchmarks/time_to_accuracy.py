"""Time to accuracy of the Train tab's default quick run, through the CLI (the same loop).

    python benchmarks/time_to_accuracy.py [--budgets 180 600] [--data ../shared/data]

For each time budget, runs `vitviz train` with the app's default quick-run
settings on CIFAR-10 (the learning-rate schedule fits the budget, as in the app),
then reports the test accuracy of the model it ends with. Data loading, start-up and
evaluation are not training time; torch.compile is not used, so there is no compile
time to report. Targets on 2 CPU cores: 55% within 180 s, 68% within 600 s; on one
GPU: 85% within 60 s, 90% within 120 s.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vitviz.training.live import quick_defaults  # noqa: E402
from vitviz.training.loop import describe_device, pick_device  # noqa: E402


def run(budget: float, device, data: str | None, extra: list[str]) -> tuple[float, str]:
    q = quick_defaults(device)
    out = Path(tempfile.mkdtemp(prefix="vitviz-tta-")) / "model"
    cmd = [
        sys.executable,
        "-m",
        "vitviz.train",
        "--dataset",
        "cifar10",
        "--preset",
        q["preset"],
        "--epochs",
        str(q["epochs"]),
        "--time-budget",
        str(budget),
        "--batch-size",
        str(q["batch_size"]),
        "--lr",
        str(q["lr"]),
        "--warmup",
        str(q["warmup"]),
        "--label-smoothing",
        str(q["label_smoothing"]),
        "--out",
        str(out),
        "--test",
        "--device",
        device.type,
        *extra,
    ]
    if not q["augment"]:
        cmd.append("--no-augment")
    if data:
        cmd += ["--data", data]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    m = re.search(r"test accuracy ([0-9.]+)", r.stdout)
    if r.returncode or not m:
        raise SystemExit(f"training failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    epochs = re.findall(r"epoch ([0-9.]+) step", r.stdout + r.stderr)
    return float(m.group(1)), (epochs[-1] if epochs else "?")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--budgets", type=float, nargs="+", default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--data", default=os.environ.get("VITVIZ_DATA"))
    p.add_argument("extra", nargs="*", help="more flags for vitviz train (after --)")
    a = p.parse_args()
    device = pick_device(a.device)
    budgets = a.budgets or ([60, 120] if device.type == "cuda" else [180, 600])
    targets = {60: 0.85, 120: 0.90} if device.type == "cuda" else {180: 0.55, 600: 0.68}
    print(f"device: {describe_device(device)}; quick run: {quick_defaults(device)}")
    for b in budgets:
        acc, epochs = run(b, device, a.data, a.extra)
        t = targets.get(int(b))
        print(
            f"budget {b:5.0f} s: test accuracy {100 * acc:.2f}% after {epochs} epochs"
            + (f" (target {100 * t:.0f}%: {'met' if acc >= t else 'missed'})" if t else ""),
            flush=True,
        )


if __name__ == "__main__":
    main()
