"""Average the weights of several checkpoints of one run (weight averaging over its last epochs).

    vitviz train ... --out runs/cifar/model --keep-epochs 10
    vitviz average runs/cifar/model-epoch0{51..60} --out runs/cifar/averaged --data ../shared/data

Late in a cosine schedule the weights wander around a minimum; their mean usually sits
nearer its centre and generalises a little better (Izmailov et al. 2018, "Averaging
Weights Leads to Wider Optima"). The checkpoints must share one model config; the JSON of
the result is the last one's, with `averaged_from` listing the sources and, with
`--data`, the averaged model's validation loss and accuracy on the run's held-out split.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vitviz.models.vit import ViT

import argparse
import os
import sys

import torch

from vitviz.data.datasets import DataUnavailable, load_dataset
from vitviz.models import checkpoint
from vitviz.training.loop import evaluate, pick_device


def average(paths: list) -> tuple[torch.nn.Module, list[dict]]:
    """(a model holding the mean of the checkpoints' weights, a summary of each source)."""
    if len(paths) < 2:
        raise checkpoint.CheckpointError("averaging needs at least two checkpoints")
    models = [checkpoint.load(p) for p in paths]
    first = models[0]
    for p, m in zip(paths, models):
        if m.card.config != first.card.config or m.card.classes != first.card.classes:
            raise checkpoint.CheckpointError(f"{p} holds a different model than {paths[0]}")
    states = [m.state_dict() for m in models]
    mean = {k: torch.stack([s[k].float() for s in states]).mean(0) for k in states[0]}
    out = models[-1]
    out.load_state_dict(mean)
    sources = [
        {"checkpoint": str(checkpoint.paths(p)[0].name), **{k: m.card.metrics.get(k) for k in ("epoch", "val_acc")}}
        for p, m in zip(paths, models)
    ]
    return out, sources


def _validation_split(model: ViT, data_arg):
    """The run's held-out split when a data set is at hand (and the run held images out), else None."""
    if not (data_arg or os.environ.get("VITVIZ_DATA")):
        return None
    try:
        data = load_dataset(model.card.dataset, data_arg, val_size=model.card.train.get("val_size", 5000))
    except (DataUnavailable, ValueError) as e:
        print(f"note: no validation figures ({e})", file=sys.stderr)
        return None
    if not len(data.val):
        print("note: the run held out no validation images (val_size 0): no validation figures", file=sys.stderr)
        return None
    return data.val


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="vitviz average", description=__doc__.split("\n")[0])
    p.add_argument("checkpoints", nargs="+", help="checkpoint stems or files of one run")
    p.add_argument("--out", required=True, help="stem of the averaged checkpoint")
    p.add_argument("--data", help="also measure validation accuracy (zip or folder; default $VITVIZ_DATA)")
    p.add_argument("--device", default="auto")
    a = p.parse_args(argv)
    try:
        model, sources = average(a.checkpoints)
    except checkpoint.CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    card = model.card
    metrics = dict(card.metrics)
    for key in ("val_acc", "val_loss", "test_acc"):  # the sources' figures do not describe the mean
        metrics.pop(key, None)
    val = _validation_split(model, a.data)
    if val is not None:
        device = pick_device(a.device)
        metrics["val_loss"], metrics["val_acc"] = evaluate(model.to(device), val, device)
        model.cpu()
        known = [s["val_acc"] for s in sources if isinstance(s["val_acc"], (int, float))]
        print(
            f"averaged {len(sources)} checkpoints: validation accuracy {metrics['val_acc']:.4f}"
            + (f" (the sources: {min(known):.4f} to {max(known):.4f})" if known else "")
        )
    metrics["averaged_from"] = sources
    path = checkpoint.save(a.out, model, train_config=card.train, metrics=metrics, history=card.history)
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
