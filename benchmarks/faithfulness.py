"""Do the maps point at what the model uses? Deletion and insertion curves on CIFAR-10 test images.

    python benchmarks/faithfulness.py [--images 1000] [--steps 16] [--checkpoint cifar10]

For each map (last-layer CLS attention averaged over heads, attention rollout, gradient
rollout, and a random order), patches are ranked most relevant first. Deletion replaces
them, in that order, with the data set's mean colour and tracks the probability of the
originally predicted class (a faithful map makes it fall fast: lower area is better).
Insertion starts from an all-mean image and reveals patches in that order (it should rise
fast: higher area is better). Areas under the curves are over the fraction of patches, 0 to 1.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vitviz  # noqa: E402
from vitviz import interpret as I  # noqa: E402
from vitviz.data import load_dataset, normalize  # noqa: E402


def rankings(model, x: torch.Tensor, seed: int) -> dict[str, torch.Tensor]:
    """(B, P) relevance per method."""
    attn = I.attention_maps(model, x)
    g = torch.Generator().manual_seed(seed)
    return {
        "last-layer CLS attention": attn[:, -1, :, 0, 1:].mean(1),
        "attention rollout": I.attention_rollout(attn)[:, 0, 1:],
        "gradient rollout": I.gradient_rollout(model, x),
        "random": torch.rand(x.shape[0], attn.shape[-1] - 1, generator=g),
    }


@torch.no_grad()
def curve(model, x: torch.Tensor, relevance: torch.Tensor, target: torch.Tensor, steps: int, insertion: bool):
    """(B, steps + 1) probability of `target` as patches are removed (or revealed) most relevant first."""
    B, C, H, W = x.shape
    P = relevance.shape[1]
    g = int(P ** 0.5)
    p = H // g
    order = relevance.argsort(dim=1, descending=True)
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(P).expand(B, P))
    probs = []
    for k in range(steps + 1):
        n = round(k * P / steps)
        chosen = (rank < n).float().view(B, 1, g, g)
        mask = chosen.repeat_interleave(p, 2).repeat_interleave(p, 3)  # 1 where the patch is chosen
        keep = mask if insertion else 1 - mask
        probs.append(model(x * keep).float().softmax(-1).gather(1, target[:, None])[:, 0])
    return torch.stack(probs, 1)


def auc(c: torch.Tensor) -> torch.Tensor:
    return torch.trapezoid(c, dx=1.0 / (c.shape[1] - 1), dim=1)


def main():
    pa = argparse.ArgumentParser()
    pa.add_argument("--images", type=int, default=1000)
    pa.add_argument("--steps", type=int, default=16)
    pa.add_argument("--batch", type=int, default=250)
    pa.add_argument("--checkpoint", default=None)
    pa.add_argument("--data", default=os.environ.get("VITVIZ_DATA"))
    pa.add_argument("--seed", type=int, default=0)
    a = pa.parse_args()
    model = vitviz.load_model(a.checkpoint)
    test = load_dataset(model.card.dataset or "cifar10", a.data, val_size=0).test
    idx = torch.randperm(len(test), generator=torch.Generator().manual_seed(a.seed))[:a.images]
    totals: dict[str, dict[str, list]] = {}
    acc = []
    t0 = time.perf_counter()
    for i in range(0, len(idx), a.batch):
        b = idx[i:i + a.batch]
        x = normalize(test.x[b], model.card.mean, model.card.std)
        with torch.no_grad():
            pred = model(x).argmax(1)
        acc.append((pred == test.y[b]).float())
        for name, rel in rankings(model, x, a.seed + i).items():
            d = auc(curve(model, x, rel, pred, a.steps, insertion=False))
            ins = auc(curve(model, x, rel, pred, a.steps, insertion=True))
            totals.setdefault(name, {"del": [], "ins": []})
            totals[name]["del"].append(d)
            totals[name]["ins"].append(ins)
    n = len(idx)
    print(f"{n} CIFAR-10 test images (model accuracy on them {100 * torch.cat(acc).mean():.1f}%), {a.steps} steps, "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"{'map':28s} {'deletion AUC (lower is better)':>32s} {'insertion AUC (higher is better)':>34s}")
    for name, r in totals.items():
        d, ins = torch.cat(r["del"]), torch.cat(r["ins"])
        print(f"{name:28s} {d.mean():24.3f} ± {d.std() / n ** 0.5:.3f} {ins.mean():26.3f} ± {ins.std() / n ** 0.5:.3f}")


if __name__ == "__main__":
    main()
