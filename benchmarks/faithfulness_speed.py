"""How fast `vitviz faithfulness` scores images, against today's loop, and sharded over processes.

    python benchmarks/faithfulness_speed.py [--images 64] [--shard-images 256] [--checkpoint cifar10]

1. Today's loop: one image at a time, as the app's per-image study does it (vitviz.pictures.removal.study: each
   map by methods.relevance, each curve by methods.curves, fp32 in chunks of 512), for the same four scores.
2. `vitviz faithfulness`'s engine: a batch of 32 images, every perturbation step of the whole batch through the
   model together, in chunks that suit the device, in the precision measured faster here.
   Printed: seconds per image of each, and their ratio (the same images, the same maps, one process; the two
   take turns batch by batch, each first on every other batch, so that a machine's drift falls on both), and
   the bound the arithmetic sets: the engine's FLOPs an image (torch's flop counter) over the best matmul speed
   the device showed in the run (measured after each batch), the least time an image can take in that precision.
3. `torchrun --nproc_per_node 2` (gloo) against one process, the same command on `--shard-images` images:
   images per second of each, and their ratio (each a fresh process: start-up included; two runs of each, in
   the order one, two, two, one).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from testset import model_and_sample, parser  # noqa: E402
from throughput import matmul_peak  # noqa: E402

from vitviz.data.datasets import normalize  # noqa: E402
from vitviz.explain import faithfulness as faith  # noqa: E402
from vitviz.explain import methods  # noqa: E402
from vitviz.explain.interpret import inference_precision  # noqa: E402
from vitviz.explain.methods import METHODS, RANDOM  # noqa: E402
from vitviz.runtime.device import Precision  # noqa: E402

CHEAP = ["gradient rollout", "attention rollout", RANDOM]  # the sharding run's maps: its share of start-up is small


def engine(model, x, maps, precision, start: int = 0) -> float:
    """Seconds for `vitviz faithfulness`'s engine on the batch `x`, whose first image is image `start`."""
    t = time.perf_counter()
    faith.score(model, x, maps, list(range(start, start + len(x))), precision=precision)
    return time.perf_counter() - t


def today(model, x, maps, start: int = 0) -> float:
    """Seconds for today's per-image path on the images `x` (vitviz.pictures.removal.study's): each map as
    methods.relevance makes it (occlusion in the precision it measures), each curve through methods.curves (fp32,
    chunks of 512); Chefer's perturbation the same way, for the same four scores."""
    fp32, P = Precision(x.device, amp=False), model.card.config.num_patches
    t = time.perf_counter()
    for i in range(len(x)):
        one = x[i : i + 1]
        with torch.no_grad():
            pred = model(one).float().argmax(1)
        for name in maps:
            rel = faith.random_maps(P, [start + i]) if name == RANDOM else methods.relevance(model, one, name, pred)
            for insertion in (False, True):
                methods.auc(methods.curves(model, one, rel.float(), pred, 16, insertion=insertion))
            for r in (rel, -rel):
                faith.area(faith.perturbation(model, one, r.float(), pred, 512, fp32))
    return time.perf_counter() - t


def arithmetic(model, x, maps, precision) -> float:
    """GFLOP an image of the engine's work, as torch's flop counter counts it over the batch `x`: the matmuls
    and convolutions of every forward and backward pass, and the attention where its kernel is counted (the
    CPU's fused one is not: the bound it gives is then a generous one)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as count:
        faith.score(model, x, maps, list(range(len(x))), precision=precision)
    return count.get_total_flops() / len(x) / 1e9


def sharded(a, procs: int) -> float:
    """Seconds of one run of `vitviz faithfulness` on `a.shard_images` images in `procs` processes (torchrun)."""
    out = tempfile.mkdtemp(prefix="faith-")
    args = ["-m", "vitviz", "faithfulness", "--images", str(a.shard_images), "--out", out, "--maps", *CHEAP]
    args += ["--model", a.checkpoint or "cifar10", "--bootstrap", "100"] + (["--data", a.data] if a.data else [])
    cmd = [sys.executable, *args] if procs == 1 else ["torchrun", "--nproc_per_node", str(procs), *args]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t


def main():
    pa = parser(images=64, batch=32)
    pa.add_argument("--shard-images", type=int, default=256)
    pa.add_argument("--maps", nargs="+", default=[*METHODS, RANDOM])
    a = pa.parse_args()
    model, test, idx = model_and_sample(a)
    x = normalize(test.x[idx], model.card.mean, model.card.std)
    precision = inference_precision(model, x)
    engine(model, x[:4], a.maps, precision)  # warm up
    old = new = 0.0
    peaks = []  # the device's matmul GFLOP/s in the engine's precision, measured after each batch: the best is kept
    for k, i in enumerate(range(0, len(x), a.batch)):  # batch by batch, first one then the other: a drift is shared
        part = x[i : i + a.batch]
        if k % 2 == 0:
            old += today(model, part, a.maps, i)
        new += engine(model, part, a.maps, precision, i)
        if k % 2 == 1:
            old += today(model, part, a.maps, i)
        peaks.append(matmul_peak(x.device, torch.bfloat16 if precision.bf16 else torch.float32))
    old, new = old / len(x), new / len(x)
    print(f"{len(x)} images, maps: {', '.join(a.maps)}; {torch.get_num_threads()} threads")
    print(f"today's loop, one image at a time (fp32):  {old:.3f} s an image")
    print(f"vitviz faithfulness, batches of {a.batch} ({precision.choice.reason}): {new:.3f} s an image")
    print(f"ratio: {old / new:.2f}x")
    work, peak = arithmetic(model, x[:4], a.maps, precision), max(peaks)
    print(
        f"the engine's arithmetic: {work:.1f} GFLOP an image (torch's flop counter); at the best matmul speed this "
        f"device showed in the run, in that precision ({peak:.0f} GFLOP/s; {min(peaks):.0f} at its worst), at least "
        f"{work / peak:.3f} s an image: at most {old / (work / peak):.1f}x today's loop here, were nothing else to "
        "take time"
    )
    runs = {1: [], 2: []}
    for procs in (1, 2, 2, 1):  # each first once: a drift of the machine falls on both
        runs[procs].append(sharded(a, procs))
    one, two = (2 * a.shard_images / sum(runs[n]) for n in (1, 2))
    print(f"{a.shard_images} images ({', '.join(CHEAP)}): 1 process {one:.2f} images/s, 2 gloo processes {two:.2f}")
    print(f"ratio (2 processes / 1): {two / one:.2f}x")


if __name__ == "__main__":
    main()
