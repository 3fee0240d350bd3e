"""Do the maps point at what the model uses? Deletion and insertion curves on CIFAR-10 test images.

    python benchmarks/faithfulness.py [--images 1000] [--steps 16] [--checkpoint cifar10]

For each map of vitviz.explain.methods (gradient rollout, LeGrad, occlusion, attention rollout,
last-layer CLS attention) and a random order, patches are ranked most relevant first for
the class the model predicts. Deletion replaces them, in that order, with the data set's
mean colour and tracks that class's probability (a faithful map makes it fall fast: lower
area is better). Insertion starts from an all-mean image and reveals patches in that order
(it should rise fast: higher area is better). Areas are over the fraction of patches, 0 to 1;
± is the standard error over images.
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
from vitviz.explain import methods  # noqa: E402


def main():
    pa = parser(images=1000, batch=100)
    pa.add_argument("--steps", type=int, default=16)
    a = pa.parse_args()
    model, test, idx = model_and_sample(a)
    totals: dict[str, dict[str, list]] = {}
    seconds: dict[str, float] = {}
    acc = []
    t0 = time.perf_counter()
    for i in range(0, len(idx), a.batch):
        b = idx[i : i + a.batch]
        x = normalize(test.x[b], model.card.mean, model.card.std)
        with torch.no_grad():
            pred = model(x).argmax(1)
        acc.append((pred == test.y[b]).float())
        maps = {}
        for name in methods.METHODS:
            t = time.perf_counter()
            maps[name] = methods.relevance(model, x, name, pred)
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t
        maps[methods.RANDOM] = methods.random_relevance(len(b), maps[name].shape[1], a.seed + i)
        for name, rel in maps.items():
            r = totals.setdefault(name, {"del": [], "ins": []})
            r["del"].append(methods.auc(methods.curves(model, x, rel, pred, a.steps)))
            r["ins"].append(methods.auc(methods.curves(model, x, rel, pred, a.steps, insertion=True)))
        print(f"  {i + len(b)} images, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    n = len(idx)
    print(
        f"{n} CIFAR-10 test images (model accuracy on them {100 * torch.cat(acc).mean():.1f}%), {a.steps} steps, "
        f"{time.perf_counter() - t0:.0f} s, {torch.get_num_threads()} threads"
    )
    print("| map | deletion AUC (lower is better) | insertion AUC (higher is better) | map time per image |")
    print("|---|---|---|---|")
    for name, r in sorted(totals.items(), key=lambda kv: torch.cat(kv[1]["del"]).mean()):
        d, ins = torch.cat(r["del"]), torch.cat(r["ins"])
        ms = f"{1000 * seconds[name] / n:.1f} ms" if name in seconds else "-"
        print(
            f"| {name} | {d.mean():.3f} ± {d.std() / n**0.5:.3f} | {ins.mean():.3f} ± {ins.std() / n**0.5:.3f} | {ms} |"
        )


if __name__ == "__main__":
    main()
