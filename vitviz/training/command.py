"""`vitviz train` (and `python -m vitviz.train`): the command-line front end of the training loop.

The loop (vitviz.training.loop.train) yields events; this prints them, one line per epoch under a tqdm
bar, and the app streams the same events (vitviz.app.live)."""

from __future__ import annotations

import argparse
import sys

from vitviz.data.datasets import DATASETS
from vitviz.models import checkpoint
from vitviz.models.vit import PRESETS
from vitviz.training.config import SETTINGS, ConfigError, TrainConfig
from vitviz.training.loop import train


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vitviz train", description="Train a Vision Transformer on CIFAR-10 or MNIST.")
    defaults = TrainConfig()
    p.add_argument("--dataset", choices=sorted(DATASETS), default=defaults.budget.dataset)
    p.add_argument("--preset", choices=sorted(PRESETS), default=defaults.arch.preset, help="model size preset")
    for name in ("embed_dim", "depth", "num_heads", "patch_size"):
        p.add_argument("--" + name.replace("_", "-"), type=int, help=f"override the preset's {name}")
    p.add_argument("--mlp-ratio", type=float, help="override the preset's mlp_ratio")
    p.add_argument("--dropout", type=float, help="override the preset's dropout")
    p.add_argument("--epochs", type=float, default=defaults.budget.epochs)
    p.add_argument("--time-budget", type=float, default=0.0, help="seconds of training; the LR schedule fits it")
    p.add_argument("--batch-size", type=int, default=defaults.budget.batch_size)
    p.add_argument("--lr", type=float, default=defaults.optim.lr)
    p.add_argument("--weight-decay", type=float, default=defaults.optim.weight_decay)
    p.add_argument("--warmup", type=float, default=defaults.optim.warmup, help="warmup epochs")
    p.add_argument("--label-smoothing", type=float, default=defaults.optim.label_smoothing)
    p.add_argument("--no-augment", action="store_true", help="turn off crop and flip")
    p.add_argument(
        "--mix",
        type=float,
        default=defaults.optim.mix,
        help="probability that a batch is mixed with CutMix or Mixup (even odds); 0 turns it off",
    )
    p.add_argument("--erase", type=float, default=defaults.optim.erase, help="random-erasing probability per image")
    p.add_argument(
        "--token-drop",
        type=float,
        default=defaults.optim.token_drop,
        help="fraction of patch tokens left out of each early step (cheaper steps); 0 turns it off",
    )
    p.add_argument(
        "--token-drop-until",
        type=float,
        default=defaults.optim.token_drop_until,
        help="... for this fraction of the run",
    )
    p.add_argument(
        "--ema",
        type=float,
        default=defaults.optim.ema,
        help="decay of a weight average used for validation and the result",
    )
    p.add_argument("--subset", type=int, default=0, help="train on this many images (0: all)")
    p.add_argument("--val-size", type=int, default=defaults.budget.val_size)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--no-amp", action="store_true", help="train in fp32")
    p.add_argument(
        "--data", help="zip or folder with train/<class>/, test/<class>/ (default: $VITVIZ_DATA, else download)"
    )
    p.add_argument("--out", help="checkpoint stem, e.g. runs/cifar/model (writes .safetensors and .json)")
    p.add_argument("--resume", action="store_true", help="go on from the checkpoint at --out")
    p.add_argument("--test", action="store_true", help="report test accuracy at the end")
    p.add_argument(
        "--keep-epochs",
        type=int,
        default=0,
        help="also keep the last N epochs' weights as OUT-epochNNN, to average with vitviz.training.average",
    )
    return p


def config_from_args(a: argparse.Namespace) -> TrainConfig:
    """The validated config the command line asks for (ConfigError with a sentence otherwise)."""
    kw = {name: getattr(a, name) for name in SETTINGS if hasattr(a, name)}
    kw["augment"] = not a.no_augment
    kw["amp"] = not a.no_amp
    return TrainConfig.parse(**kw)


def main(argv: list[str] | None = None) -> int:
    from tqdm import tqdm

    a = parser().parse_args(argv)
    if a.resume and not a.out:
        parser().error("--resume needs --out")
    try:
        cfg = config_from_args(a)
    except ConfigError as e:
        parser().error(str(e))
    bar = None
    try:
        for ev in train(cfg, out=a.out, resume=a.resume, data_path=a.data, final_test=a.test):
            kind = ev["event"]
            if kind == "start":
                print(
                    f"{ev['params']:,} parameters on {ev['device_name']} ({ev['precision']}); "
                    f"{ev['train_images']:,} training images from {ev['data']}; {ev['steps']:,} steps",
                    flush=True,
                )
                bar = tqdm(
                    total=ev["steps"], initial=ev["resumed_step"], unit="step", dynamic_ncols=True, mininterval=2
                )
            elif kind == "step":
                bar.update(ev["step"] - bar.n)
                bar.set_postfix(loss=f"{ev['loss']:.3f}", lr=f"{ev['lr']:.2e}", img_s=f"{ev['images_per_s']:.0f}")
            elif kind == "epoch":
                bar.write(
                    f"epoch {ev['epoch']:g} step {ev['step']} train loss {ev['train_loss']:.4f} "
                    f"acc {ev['train_acc']:.4f} | val loss {ev['val_loss']:.4f} acc {ev['val_acc']:.4f} "
                    f"| {ev['elapsed']:.0f}s"
                )
            elif kind in ("done", "stopped", "error"):
                if bar is not None:
                    bar.close()
                if kind == "error":
                    print(f"error: {ev['message']}", file=sys.stderr)
                    return 1
                steps = f"{ev['step']} step{'' if ev['step'] == 1 else 's'}"
                line = f"{kind} after {steps}, {ev['train_seconds']:.0f}s of training"
                if "test_acc" in ev:
                    line += f"; test accuracy {ev['test_acc']:.4f}"
                if ev.get("path"):
                    line += f"; checkpoint {ev['path']}"
                print(line, flush=True)
    except KeyboardInterrupt:
        print("\ninterrupted; the last epoch's checkpoint is kept", file=sys.stderr)
        return 130
    except (checkpoint.CheckpointError, ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
