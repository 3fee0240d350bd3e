"""How fast `vitviz faithfulness` scores images, against today's loop, and sharded over processes.

    python benchmarks/faithfulness_speed.py [--images 64] [--shard-images 256] [--checkpoint cifar10]

1. Today's loop: one image at a time, as the app's per-image study does it (vitviz.pictures.removal.study: each
   map by methods.relevance, each curve by methods.curves, fp32 in chunks of 512), for the same four scores.
2. `vitviz faithfulness`'s engine: a batch of 32 images, every perturbation step of the whole batch through the
   model together, in chunks that suit the device, in the precision measured faster here.
   Printed: seconds per image of each, and their ratio (the same images, the same maps, in turns, one process).
3. `torchrun --nproc_per_node 2` (gloo) against one process, the same command on `--shard-images` images:
   images per second of each, and their ratio (each a fresh process: start-up included).
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

from vitviz.data.datasets import normalize  # noqa: E402
from vitviz.explain import faithfulness as faith  # noqa: E402
from vitviz.explain import methods  # noqa: E402
from vitviz.explain.interpret import inference_precision  # noqa: E402
from vitviz.explain.methods import METHODS, RANDOM  # noqa: E402
from vitviz.runtime.device import Precision  # noqa: E402

CHEAP = ["gradient rollout", "attention rollout", RANDOM]  # the sharding run's maps: its share of start-up is small


def engine(model, x, maps, precision) -> float:
    t = time.perf_counter()
    for i in range(0, len(x), 32):
        faith.score(model, x[i : i + 32], maps, list(range(i, min(len(x), i + 32))), precision=precision)
    return (time.perf_counter() - t) / len(x)


def today(model, x, maps) -> float:
    """Today's per-image path (vitviz.pictures.removal.study's): each map as methods.relevance makes it (occlusion
    in the precision it measures), each curve through methods.curves (fp32, chunks of 512); Chefer's perturbation
    the same way, for the same four scores."""
    fp32, P = Precision(x.device, amp=False), model.card.config.num_patches
    t = time.perf_counter()
    for i in range(len(x)):
        one = x[i : i + 1]
        with torch.no_grad():
            pred = model(one).float().argmax(1)
        for name in maps:
            rel = faith.random_maps(P, [i]) if name == RANDOM else methods.relevance(model, one, name, pred)
            for insertion in (False, True):
                methods.auc(methods.curves(model, one, rel.float(), pred, 16, insertion=insertion))
            for r in (rel, -rel):
                faith.area(faith.perturbation(model, one, r.float(), pred, 512, fp32))
    return (time.perf_counter() - t) / len(x)


def sharded(a, procs: int) -> float:
    out = tempfile.mkdtemp(prefix="faith-")
    args = ["-m", "vitviz", "faithfulness", "--images", str(a.shard_images), "--out", out, "--maps", *CHEAP]
    args += ["--model", a.checkpoint or "cifar10", "--bootstrap", "100"] + (["--data", a.data] if a.data else [])
    cmd = [sys.executable, *args] if procs == 1 else ["torchrun", "--nproc_per_node", str(procs), *args]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return a.shard_images / (time.perf_counter() - t)


def main():
    pa = parser(images=64, batch=32)
    pa.add_argument("--shard-images", type=int, default=256)
    pa.add_argument("--maps", nargs="+", default=[*METHODS, RANDOM])
    a = pa.parse_args()
    model, test, idx = model_and_sample(a)
    x = normalize(test.x[idx], model.card.mean, model.card.std)
    precision = inference_precision(model, x)
    engine(model, x[:4], a.maps, precision)  # warm up
    old, new = today(model, x, a.maps), engine(model, x, a.maps, precision)
    print(f"{len(x)} images, maps: {', '.join(a.maps)}; {torch.get_num_threads()} threads")
    print(f"today's loop, one image at a time (fp32):  {old:.3f} s an image")
    print(f"vitviz faithfulness, batches of 32 ({precision.choice.reason}): {new:.3f} s an image")
    print(f"ratio: {old / new:.2f}x")
    one, two = sharded(a, 1), sharded(a, 2)
    print(f"{a.shard_images} images ({', '.join(CHEAP)}): 1 process {one:.2f} images/s, 2 gloo processes {two:.2f}")
    print(f"ratio (2 processes / 1): {two / one:.2f}x")


if __name__ == "__main__":
    main()
