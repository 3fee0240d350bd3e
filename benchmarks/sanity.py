"""Sanity checks for every map (Adebayo et al., 2018): cascading randomisation on CIFAR-10 test images.

    python benchmarks/sanity.py [--images 200] [--checkpoint cifar10]

The classifier head is re-initialised, then the blocks from the top down, then the patch
embedding, CLS token and positions (vitviz.explain.sanity.cascade). After each stage every
method's map for the trained model's predicted class is compared with the trained
model's map by Spearman's rank correlation over the patches; the table gives the mean
over the images (± its standard error at the last stage). 1.0: the map did not change
although the weights did, so it says nothing about them; near 0: it follows the weights.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from testset import model_and_sample, parser  # noqa: E402

from vitviz.data.datasets import normalize  # noqa: E402
from vitviz.explain import (
    methods,  # noqa: E402
    sanity,  # noqa: E402
)


def main():
    a = parser(images=200, batch=50).parse_args()
    model, test, idx = model_and_sample(a)
    names = list(methods.METHODS)
    rho: dict[str, dict[str, list]] = {}
    t0 = time.perf_counter()
    for i in range(0, len(idx), a.batch):
        x = normalize(test.x[idx[i : i + a.batch]], model.card.mean, model.card.std)
        for stage, by_method in sanity.checks(model, x, names, seed=a.seed).items():
            for name, r in by_method.items():
                rho.setdefault(stage, {}).setdefault(name, []).append(r)
        print(f"  {i + len(x)} images, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    print(
        f"{len(idx)} CIFAR-10 test images, mean Spearman correlation with the trained model's map, "
        f"{time.perf_counter() - t0:.0f} s"
    )
    print("| randomised | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for stage, by_method in rho.items():
        print(f"| {stage} | " + " | ".join(f"{torch.cat(by_method[n]).mean():.3f}" for n in names) + " |")
    last = rho[list(rho)[-1]]
    print(
        "standard error at the last stage: "
        + ", ".join(f"{n} {torch.cat(last[n]).std() / len(idx) ** 0.5:.3f}" for n in names)
    )


if __name__ == "__main__":
    main()
