"""Train a ViT: one loop, written as a generator of events, and its CLI.

    python -m vitviz.train --preset cifar --dataset cifar10 --epochs 100 --out runs/cifar

The loop yields dicts: ``start``, ``step`` (loss, lr, images/s, progress, ETA), ``val`` (a quick
validation on a small held-out sample, every ``quick_val_every_s`` seconds),
``epoch`` (train and validation loss and accuracy), ``snapshot`` (the live
model, on request), ``checkpoint``, and one of ``done``, ``stopped`` or
``error``. The CLI prints them with a progress bar; the app streams them.

AdamW, linear warmup then cosine decay (by steps, or by wall time when a time
budget is set), label smoothing, data resident on the device as uint8 with
crop and flip done on whole batches there, bf16 autocast on CUDA and on CPUs
with native bf16. A checkpoint is written atomically every epoch, so a killed
run loses at most one epoch; ``--resume`` goes on from the last one.
What the shipped models reach, in how long, is in checkpoints/README.md. The Train
tab's quick run (preset `quick`, batch 256, lr 6e-3, a 180 s budget) reaches 57% CIFAR-10
test accuracy in 3 minutes on 2 CPU cores, and 68.7% with a 600 s budget:

    python benchmarks/time_to_accuracy.py --budgets 180 600
"""
from __future__ import annotations

import argparse
import math
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
import torch.nn.functional as F

from . import checkpoint
from .card import ModelCard, describe
from .batches import Batches
from .data import DATASETS, Dataset, load_dataset
from .device import Precision, describe_device, pick_device
from .validate import QuickVal, epoch_record, evaluate
from .model import PRESETS, ViT
from .train_config import ConfigError, TrainConfig

__all__ = ["TrainConfig", "ConfigError", "train", "evaluate", "build_model", "pick_device", "describe_device"]


def get_lr(step: int, progress: float, cfg: TrainConfig, warmup_steps: int) -> float:
    """Linear warmup over `warmup_steps`, then cosine from cfg.lr to 0 as progress goes 0 -> 1."""
    warm = min(1.0, (step + 1) / max(1, warmup_steps))
    if cfg.time_budget > 0:  # a timed run warms up for at most a tenth of its budget
        warm = max(warm, min(1.0, progress / 0.1))
    return cfg.lr * warm * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def build_model(cfg: TrainConfig, data: Dataset) -> ViT:
    mcfg = cfg.model_config()
    torch.manual_seed(cfg.seed)
    return describe(ViT(mcfg), ModelCard(config=mcfg, classes=tuple(data.classes), mean=tuple(data.mean),
                                         std=tuple(data.std), dataset=cfg.dataset, kind="trained"))


# ---------------------------------------------------------------- the loop's parts


@dataclass
class Progress:
    """Where a run stands: restored by --resume, advanced by every step."""
    step: int = 0
    epoch: float = 0
    elapsed_before: float = 0.0  # seconds trained before this process (a resumed run)
    history: list = field(default_factory=list)
    optimizer: dict | None = None  # the resume state's tensors


def resume_from(out, model: ViT) -> Progress:
    """The progress a checkpoint at `out` records, its weights loaded into `model`."""
    prev = checkpoint.load(out)
    if prev.card.config != model.config:
        raise checkpoint.CheckpointError(f"cannot resume: {out} holds a different model config")
    model.load_state_dict(prev.state_dict())
    m = prev.card.metrics
    return Progress(step=int(m.get("step", 0)), epoch=int(m.get("epoch", 0)),
                    elapsed_before=float(m.get("train_seconds", 0.0)), history=list(prev.card.history),
                    optimizer=checkpoint.load_state(out))


def make_optimizer(model: ViT, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW; no weight decay on biases, norms and embeddings' 1-D parameters. The fused step (one kernel for
    every parameter, on the CPU too) where the device has it: 6% of a quick-preset step on 2 CPU cores."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    device = next(model.parameters()).device
    return torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.99),
                             fused=device.type in ("cpu", "cuda"))


def optimizer_state(opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    out = {}
    for i, st in opt.state_dict()["state"].items():
        for k, v in st.items():
            out[f"opt.{i}.{k}"] = v if torch.is_tensor(v) else torch.tensor(v)
    return out


def load_optimizer_state(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor]):
    sd = opt.state_dict()
    state: dict[int, dict] = {}
    for key, v in tensors.items():
        if key.startswith("opt."):
            _, i, k = key.split(".", 2)
            state.setdefault(int(i), {})[k] = v
    sd["state"] = state
    opt.load_state_dict(sd)


def train_step(model: ViT, opt, xb, target, lr: float, cfg: TrainConfig, precision: Precision):
    """One optimisation step; returns (loss tensor, logits)."""
    for g in opt.param_groups:
        g["lr"] = lr
    with precision():
        logits = model(xb)
    loss = F.cross_entropy(logits.float(), target, label_smoothing=cfg.label_smoothing)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
    opt.step()
    return loss, logits


def restore_optimizer(opt, gen: torch.Generator, tensors: dict[str, torch.Tensor], device):
    """The optimizer moments and the batch generator's state of a resumed run."""
    load_optimizer_state(opt, {k: v.to(device) for k, v in tensors.items()})
    if "rng" in tensors:
        gen.set_state(tensors["rng"])


class Meter:
    """Training loss and accuracy since the last epoch end, and images/s since the last report."""

    def __init__(self):
        self.loss, self.correct, self.n = 0.0, 0, 0
        self.seen, self.t = 0, time.perf_counter()

    def add(self, loss: float, logits, target, bs: int):
        self.loss += loss * bs
        self.correct += (logits.argmax(1) == target.argmax(1)).sum().item()  # the majority label when mixed
        self.n += bs

    def rate(self) -> float:
        now = time.perf_counter()
        ips = self.seen / max(1e-9, now - self.t)
        self.seen, self.t = 0, now
        return ips

    def take(self) -> tuple[float, float]:
        out = self.loss / max(1, self.n), self.correct / max(1, self.n)
        self.loss, self.correct, self.n = 0.0, 0, 0
        return out


# ---------------------------------------------------------------- the loop


def train(cfg: TrainConfig, data: Dataset | None = None, out: str | Path | None = None, resume: bool = False,
          stop: threading.Event | None = None, snapshots: bool = False, data_path=None, final_test: bool = False):
    """Run training; yields event dicts. Set `stop` to end the run early (it keeps what it learned)."""
    cfg.validate()
    device = pick_device(cfg.device)
    precision = Precision(device, cfg.amp)
    data = data if data is not None else load_dataset(cfg.dataset, data_path, val_size=cfg.val_size)
    model = build_model(cfg, data)
    run = resume_from(out, model) if resume and out is not None and checkpoint.paths(out)[1].exists() else Progress()
    model.to(device).train()
    gen = torch.Generator().manual_seed(cfg.seed)
    batches = Batches(cfg, data, model.card, device, gen)
    total_steps = max(1, round(cfg.epochs * batches.per_epoch))
    warmup_steps = min(round(cfg.warmup * batches.per_epoch), total_steps // 5)
    opt = make_optimizer(model, cfg)
    if run.optimizer is not None:
        restore_optimizer(opt, gen, run.optimizer, device)
    yield {"event": "start", "config": asdict(cfg), "model": model.config.to_dict(), "params": model.num_params(),
           "device": str(device), "device_name": describe_device(device), "train_images": batches.n,
           "steps": total_steps, "steps_per_epoch": batches.per_epoch, "resumed_step": run.step, "data": data.source}

    def progress(elapsed):  # by steps, or by wall time when a budget is set, whichever is further
        return max(run.step / total_steps, elapsed / cfg.time_budget if cfg.time_budget > 0 else 0.0)

    def end_epoch(epoch, elapsed, limit=0):
        rec = epoch_record(model, data, precision, cfg, epoch, run.step, elapsed, *meter.take(), limit)
        run.history.append(rec)
        yield {"event": "epoch", **rec}
        path = save_run(out, model, opt, gen, cfg, run.history, rec)
        if path is not None:
            yield {"event": "checkpoint", "path": str(path), "epoch": rec["epoch"]}

    t0 = time.perf_counter() - run.elapsed_before
    quick = QuickVal(cfg, data, precision, batches.per_epoch)
    meter = Meter()
    status, message = "done", "finished"
    batches.start_at(run.step)
    while True:
        elapsed = time.perf_counter() - t0
        if run.step >= total_steps or (cfg.time_budget > 0 and elapsed >= cfg.time_budget):
            break
        if stop is not None and stop.is_set():
            status, message = "stopped", "stopped by request"
            break
        xb, target = batches.next()
        lr = get_lr(run.step, progress(elapsed), cfg, warmup_steps)
        loss, logits = train_step(model, opt, xb, target, lr, cfg, precision)
        run.step += 1
        meter.seen += batches.size
        if run.step % cfg.log_every == 0 or run.step == 1:
            loss_v = loss.item()
            if not math.isfinite(loss_v):
                status = "error"
                message = f"training diverged: the loss became {loss_v} at step {run.step}. Try a lower learning rate."
                break
            meter.add(loss_v, logits, target, batches.size)
            yield step_event(run.step, batches, total_steps, cfg, loss_v, lr, meter.rate(),
                             time.perf_counter() - t0, progress)
        if quick.due():
            yield quick.event(model, run.step, time.perf_counter() - t0)
            meter.rate()  # evaluation time is not training time
        if snapshots and cfg.snapshot_every and run.step % cfg.snapshot_every == 0:
            yield {"event": "snapshot", "at": "step", "step": run.step, "epoch": run.step / batches.per_epoch,
                   "model": model}
        if run.step % batches.per_epoch == 0:
            run.epoch += 1
            yield from end_epoch(run.epoch, time.perf_counter() - t0)
            if snapshots:
                yield {"event": "snapshot", "at": "epoch", "step": run.step, "epoch": run.epoch, "model": model}
            meter.rate()  # evaluation time is not training time

    elapsed = time.perf_counter() - t0
    if status != "error" and run.step > 0 and (not run.history or run.history[-1]["step"] != run.step):
        # a stopped run answers fast: it validates on at most 500 images
        yield from end_epoch(run.step / batches.per_epoch, elapsed, 500 if status == "stopped" else 0)
    yield result_event(status, message, run, elapsed, model, out, data.test if final_test else None, precision)


def result_event(status, message, run, elapsed, model, out, test, precision) -> dict:
    """The run's last event (`done`, `stopped` or `error`), with the model in eval mode, and its test accuracy
    when a test split is given."""
    model.eval()
    path = str(checkpoint.paths(out)[0]) if out is not None and run.history else None
    result = {"event": status, "message": message, "step": run.step, "train_seconds": elapsed, "model": model,
              "history": run.history, "path": path}
    if status != "error" and test is not None and run.step > 0:
        _, result["test_acc"] = evaluate(model, test, precision.device, precision=precision)
    return result


def step_event(step, batches, total_steps, cfg, loss, lr, ips, elapsed, progress) -> dict:
    eta = (total_steps - step) / max(1e-9, ips / batches.size)
    if cfg.time_budget > 0:
        eta = min(eta, cfg.time_budget - elapsed)
    return {"event": "step", "step": step, "epoch": step / batches.per_epoch, "loss": loss, "lr": lr,
            "images_per_s": ips, "progress": min(1.0, progress(elapsed)), "elapsed": elapsed, "eta": max(0.0, eta)}


def save_run(out, model, opt, gen, cfg: TrainConfig, history: list, rec: dict):
    """Write the checkpoint and its resume state (and the kept epoch copy); None when there is no `out`."""
    if out is None:
        return None
    state = optimizer_state(opt)
    state["rng"] = gen.get_state()
    path = checkpoint.save(out, model, train_config=asdict(cfg), metrics=_metrics(rec), history=history, state=state)
    if cfg.keep_epochs > 0 and float(rec["epoch"]).is_integer():
        checkpoint.keep_epoch_copy(out, int(rec["epoch"]), cfg.keep_epochs)
    return path


def _metrics(rec: dict) -> dict:
    return {"epoch": rec["epoch"], "step": rec["step"], "val_acc": rec["val_acc"], "val_loss": rec["val_loss"],
            "train_seconds": rec["elapsed"]}


# ---------------------------------------------------------------- CLI


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m vitviz.train", description="Train a Vision Transformer on CIFAR-10 or MNIST.")
    defaults = TrainConfig()
    p.add_argument("--dataset", choices=sorted(DATASETS), default=defaults.dataset)
    p.add_argument("--preset", choices=sorted(PRESETS), default=defaults.preset, help="model size preset")
    for name in ("embed_dim", "depth", "num_heads", "patch_size"):
        p.add_argument("--" + name.replace("_", "-"), type=int, help=f"override the preset's {name}")
    p.add_argument("--mlp-ratio", type=float, help="override the preset's mlp_ratio")
    p.add_argument("--dropout", type=float, help="override the preset's dropout")
    p.add_argument("--epochs", type=float, default=defaults.epochs)
    p.add_argument("--time-budget", type=float, default=0.0, help="seconds of training; the LR schedule fits it")
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--lr", type=float, default=defaults.lr)
    p.add_argument("--weight-decay", type=float, default=defaults.weight_decay)
    p.add_argument("--warmup", type=float, default=defaults.warmup, help="warmup epochs")
    p.add_argument("--label-smoothing", type=float, default=defaults.label_smoothing)
    p.add_argument("--no-augment", action="store_true", help="turn off crop and flip")
    p.add_argument("--mix", type=float, default=defaults.mix,
                   help="probability that a batch is mixed with CutMix or Mixup (even odds); 0 turns it off")
    p.add_argument("--erase", type=float, default=defaults.erase, help="random-erasing probability per image")
    p.add_argument("--subset", type=int, default=0, help="train on this many images (0: all)")
    p.add_argument("--val-size", type=int, default=defaults.val_size)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--no-amp", action="store_true", help="train in fp32")
    p.add_argument("--data", help="zip or folder with train/<class>/, test/<class>/ (default: $VITVIZ_DATA, else download)")
    p.add_argument("--out", help="checkpoint stem, e.g. runs/cifar/model (writes .safetensors and .json)")
    p.add_argument("--resume", action="store_true", help="go on from the checkpoint at --out")
    p.add_argument("--test", action="store_true", help="report test accuracy at the end")
    p.add_argument("--keep-epochs", type=int, default=0,
                   help="also keep the last N epochs' weights as OUT-epochNNN, to average with vitviz.average")
    return p


def config_from_args(a: argparse.Namespace) -> TrainConfig:
    """The validated config the command line asks for (ConfigError with a sentence otherwise)."""
    kw = {f.name: getattr(a, f.name) for f in fields(TrainConfig) if hasattr(a, f.name)}
    kw["augment"] = not a.no_augment
    kw["amp"] = not a.no_amp
    return TrainConfig.parse(**kw)


def main(argv=None) -> int:
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
                print(f"{ev['params']:,} parameters on {ev['device_name']}; {ev['train_images']:,} training images "
                      f"from {ev['data']}; {ev['steps']:,} steps", flush=True)
                bar = tqdm(total=ev["steps"], initial=ev["resumed_step"], unit="step", dynamic_ncols=True, mininterval=2)
            elif kind == "step":
                bar.update(ev["step"] - bar.n)
                bar.set_postfix(loss=f"{ev['loss']:.3f}", lr=f"{ev['lr']:.2e}", img_s=f"{ev['images_per_s']:.0f}")
            elif kind == "epoch":
                bar.write(f"epoch {ev['epoch']:g} step {ev['step']} train loss {ev['train_loss']:.4f} "
                          f"acc {ev['train_acc']:.4f} | val loss {ev['val_loss']:.4f} acc {ev['val_acc']:.4f} "
                          f"| {ev['elapsed']:.0f}s")
            elif kind in ("done", "stopped", "error"):
                if bar is not None:
                    bar.close()
                if kind == "error":
                    print(f"error: {ev['message']}", file=sys.stderr)
                    return 1
                line = f"{kind} after {ev['step']} steps, {ev['train_seconds']:.0f}s of training"
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
    sys.exit(main())
