"""How faithful each map is over many images, a batch at a time: the scores `vitviz faithfulness` tabulates.

For the class the model predicts on the whole image, each map (vitviz.explain.methods, and a random order)
ranks the patches, and the patches are taken away in that order:

- **Deletion and insertion** (RISE, Petsiuk et al., 2018; vitviz.explain.methods.curves): the patches are set to
  the data set's mean colour, most relevant first, in `steps` equal steps (insertion: revealed on an all-mean
  image). The score is the area under the class's probability, over the fraction of patches, 0 to 1
  (deletion: lower is better; insertion: higher is better).
- **Positive and negative perturbation** (Chefer et al., CVPR 2021): 10%, 20%, ..., 90% of the patches are
  removed, most relevant first (positive) or least relevant first (negative), and removed means black, as the
  paper's code does (the pixels set to 0 before the normalisation), not the mean colour. At each step the
  image counts 1 if the model still predicts the class it predicted on the whole image, else 0; the score is
  the area under that curve over the nine steps (trapezoids, 0.1 apart, in percent: 0 to 80). Over images it
  is the paper's area under the top-1 accuracy curve (positive: lower is better; negative: higher is better).

Every image's scores depend on that image alone (its random order too: seeded by its index), and a batch is
computed the same way whoever computes it, so shards give the numbers one process gives.
"""

from __future__ import annotations

import torch

from vitviz.explain import methods
from vitviz.models.loaded import LoadedViT, eval_mode
from vitviz.runtime.device import Precision

FRACTIONS = tuple(k / 10 for k in range(1, 10))  # Chefer et al.: 10% to 90% of the patches removed
SCORES = ("deletion", "insertion", "positive", "negative")
CHUNK = {"cpu": 32, "cuda": 512}  # images a forward pass: on a CPU small chunks stay in cache (measured 1.6x)
BETTER = {"deletion": "lower", "insertion": "higher", "positive": "lower", "negative": "higher"}


def black(model: LoadedViT) -> torch.Tensor:
    """(C,) a black pixel as the model's normalised input has it: (0 - mean) / std."""
    mean, std = (torch.as_tensor(v, dtype=torch.float32) for v in (model.mean, model.std))
    return (-mean / std).view(-1)


def removed(x: torch.Tensor, hidden: torch.Tensor, patch: int, fill: torch.Tensor) -> torch.Tensor:
    """`x` (B, C, H, W) with the patches where `hidden` (B, P) is true set to the colour `fill` (C,)."""
    B, C, H, W = x.shape
    mask = hidden.view(B, 1, H // patch, W // patch).repeat_interleave(patch, 2).repeat_interleave(patch, 3)
    return torch.where(mask, fill.to(x.dtype).to(x.device).view(1, C, 1, 1), x)


def random_maps(patches: int, image_ids: list[int], seed: int = 0) -> torch.Tensor:
    """(B, P) a random order for each image, seeded by the image's own index (the same in any batch)."""
    return torch.stack([methods.random_relevance(1, patches, seed * 1_000_003 + i)[0] for i in image_ids])


@torch.no_grad()
def _predicted(model: LoadedViT, xs: torch.Tensor, batch_size: int, precision: Precision | None) -> torch.Tensor:
    with eval_mode(model), (precision or Precision(xs.device, amp=False))():
        return torch.cat([model(xs[i : i + batch_size]).float().argmax(1) for i in range(0, len(xs), batch_size)])


def perturbation(
    model: LoadedViT,
    x: torch.Tensor,
    relevance: torch.Tensor,
    target: torch.Tensor,
    batch_size: int = 256,
    precision: Precision | None = None,
) -> torch.Tensor:
    """(B, 9) Chefer et al.'s hits: 1 where the model still predicts `target` with the FRACTIONS of the patches
    that `relevance` ranks first removed (black), else 0. Every step of the whole batch goes through the model
    together, in `precision` (None: fp32)."""
    B, P = relevance.shape
    r = methods.ranks(relevance)
    counts = [int(P * f) for f in FRACTIONS]  # as the paper's code: int(base_size * step)
    hidden = torch.stack([r < n for n in counts], 1).reshape(-1, P)  # (B * 9, P)
    xs = x[:, None].expand(B, len(counts), *x.shape[1:]).reshape(-1, *x.shape[1:])
    pred = _predicted(model, removed(xs, hidden, model.card.config.patch_size, black(model)), batch_size, precision)
    return (pred.view(B, len(counts)) == target.view(B, 1)).float()


def area(hits: torch.Tensor) -> torch.Tensor:
    """(B,) the area under (B, 9) hit curves, in percent, over the steps 0.1 apart."""
    return torch.trapezoid(100 * hits, dx=0.1, dim=1)


def score(
    model: LoadedViT,
    x: torch.Tensor,
    maps: list[str],
    image_ids: list[int],
    steps: int = 16,
    seed: int = 0,
    batch_size: int | None = None,
    precision: Precision | None = None,
) -> dict:
    """Every score of every map in `maps` (names of vitviz.explain.methods, or RANDOM) for the images `x`
    (B, C, H, W), whose indices in the whole run are `image_ids`: {"predicted": (B,), map: {score: (B,)}}. The
    forward passes of the scores and of occlusion run in `precision` (None: fp32), the predicted class too."""
    precision = precision or Precision(x.device, amp=False)
    batch_size = batch_size or CHUNK.get(x.device.type, 256)
    pred = _predicted(model, x, batch_size, precision)
    out: dict = {"predicted": pred.cpu()}
    P = model.card.config.num_patches
    for name in maps:
        if name == methods.RANDOM:
            rel = random_maps(P, image_ids, seed).to(x.device)
        else:
            rel = methods.relevance(model, x, name, pred, bf16=precision.bf16)
        rel = rel.float()
        curve = {"steps": steps, "batch_size": batch_size, "precision": precision}
        out[name] = {
            "deletion": methods.auc(methods.curves(model, x, rel, pred, **curve)),
            "insertion": methods.auc(methods.curves(model, x, rel, pred, insertion=True, **curve)),
            "positive": area(perturbation(model, x, rel, pred, batch_size, precision)),
            "negative": area(perturbation(model, x, -rel, pred, batch_size, precision)),
        }
        out[name] = {k: v.float().cpu() for k, v in out[name].items()}
    return out


def bootstrap(values: torch.Tensor, rounds: int = 1000, seed: int = 0) -> tuple[float, float]:
    """The 95% bootstrap interval of the mean of `values` (percentiles of `rounds` resamples with replacement,
    drawn with `seed`)."""
    n = len(values)
    if n < 2:
        v = float(values.mean()) if n else float("nan")
        return v, v
    g = torch.Generator().manual_seed(seed)
    means = values.double()[torch.randint(n, (rounds, n), generator=g)].mean(1)
    lo, hi = torch.quantile(means, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return lo, hi
