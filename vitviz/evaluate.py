"""`vitviz evaluate`: a checkpoint's test (or validation) accuracy, and its training curves as a picture.

python -m vitviz.evaluate --checkpoint checkpoints/cifar10/model --data ../shared/data
"""

from __future__ import annotations

import argparse
import sys
import time

from vitviz.data.datasets import DataUnavailable, load_dataset
from vitviz.models import checkpoint
from vitviz.models.hub import load_model
from vitviz.training.loop import evaluate, pick_device


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="vitviz evaluate", description="Report a checkpoint's test accuracy.")
    p.add_argument(
        "--checkpoint", default=None, help="checkpoint stem or file; 'cifar10' or 'mnist' for a shipped model"
    )
    p.add_argument("--data", help="zip or folder with train/ and test/ (default: $VITVIZ_DATA, else download)")
    p.add_argument("--split", choices=["test", "val"], default="test")
    p.add_argument("--device", default="auto")
    p.add_argument("--record", action="store_true", help="write the accuracy into the checkpoint's JSON metrics")
    p.add_argument(
        "--curves", help="also save the checkpoint's training curves (loss and accuracy per epoch) as this PNG"
    )
    a = p.parse_args(argv)
    device = pick_device(a.device)
    try:
        model = load_model(a.checkpoint, device=str(device))
        name = model.card.dataset or ("mnist" if model.card.config.in_chans == 1 else "cifar10")
        data = load_dataset(name, a.data)
    except (checkpoint.CheckpointError, DataUnavailable, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    split = data.test if a.split == "test" else data.val
    t = time.perf_counter()
    loss, acc = evaluate(model.module, split, device)
    print(
        f"{name} {a.split} accuracy {acc:.4f} ({round(acc * len(split))}/{len(split)}), loss {loss:.4f}, "
        f"{len(split) / (time.perf_counter() - t):.0f} images/s on {device}"
    )
    if a.record:
        if a.checkpoint in (None, "cifar10", "mnist"):
            from vitviz.models.hub import SHIPPED

            target = SHIPPED[a.checkpoint or "cifar10"]
        else:
            target = a.checkpoint
        meta = checkpoint.read_meta(target)
        meta.setdefault("metrics", {})[f"{a.split}_acc"] = acc
        checkpoint.write_json(checkpoint.paths(target)[1], meta)
        print(f"recorded {a.split}_acc in {checkpoint.paths(target)[1]}")
    if a.curves:
        from vitviz.pictures.figures import curves_figure  # matplotlib, only when asked

        fig = curves_figure(list(model.card.history))
        fig.suptitle(f"{name}: test accuracy {100 * acc:.2f}%", fontsize=10)
        fig.tight_layout()
        fig.savefig(a.curves)
        print(f"curves saved to {a.curves}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
