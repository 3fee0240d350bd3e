"""Train a ViT: one loop, written as a generator of events, and its CLI.

    python -m vitviz.train --preset cifar --dataset cifar10 --epochs 100 --out runs/cifar

The loop yields dicts: ``start``, ``step`` (loss, lr, images/s, progress, ETA),
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
import contextlib
import math
import shutil
import sys
import threading
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F

from . import checkpoint
from .data import DATASETS, Dataset, Split, augment, load_dataset, mix_batch, normalize, random_erase
from .model import PRESETS, ViT, make_config


@dataclass
class TrainConfig:
    dataset: str = "cifar10"  # cifar10 or mnist
    preset: str = "tiny"  # a name from vitviz.model.PRESETS
    embed_dim: int | None = None  # overrides of the preset's sizes
    depth: int | None = None
    num_heads: int | None = None
    patch_size: int | None = None
    mlp_ratio: float | None = None
    dropout: float | None = None
    epochs: float = 10  # passes over the training set (may be fractional)
    time_budget: float = 0.0  # seconds of training; 0 means none. The schedule follows whichever ends first
    batch_size: int = 128
    lr: float = 2e-3  # peak learning rate
    weight_decay: float = 0.05
    warmup: float = 1.0  # warmup length in epochs (at most a fifth of the run)
    label_smoothing: float = 0.1
    augment: bool = True  # random crop with padding, and flips where the data set allows them
    mix: float = 0.0  # probability that a batch is mixed by CutMix or Mixup (0: never)
    erase: float = 0.0  # probability of random erasing per image (0: never)
    subset: int = 0  # train on this many images (0: the whole training split)
    val_size: int = 5000  # held out of the training set for validation
    seed: int = 0
    device: str = "auto"  # auto, cpu or cuda
    amp: bool = True  # bf16 autocast where the hardware has it
    log_every: int = 10  # steps between step events
    snapshot_every: int = 0  # steps between snapshot events (0: at epoch ends only)
    eval_images: int = 0  # validate on this many held-out images (0: all of them)
    keep_epochs: int = 0  # also keep the last N epochs' weights as OUT-epochNNN (for vitviz.average)

    def model_overrides(self) -> dict:
        keys = ("embed_dim", "depth", "num_heads", "patch_size", "mlp_ratio", "dropout")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def cpu_has_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def autocast(device: torch.device, enabled: bool = True):
    """bf16 autocast on CUDA with bf16 and on CPUs with native bf16; otherwise fp32."""
    if enabled and device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", torch.bfloat16)
    if enabled and device.type == "cpu" and cpu_has_bf16():
        return torch.autocast("cpu", torch.bfloat16)
    return contextlib.nullcontext()


@torch.no_grad()
def evaluate(model: ViT, split: Split, device=None, batch_size: int = 500, amp: bool = True) -> tuple[float, float]:
    """(mean loss, accuracy) of `model` on a split, in eval mode; restores the model's mode."""
    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    loss_sum, correct = 0.0, 0
    try:
        for i in range(0, len(split), batch_size):
            x = normalize(split.x[i:i + batch_size].to(device), model.mean, model.std)
            y = split.y[i:i + batch_size].to(device)
            with autocast(device, amp):
                logits = model(x)
            loss_sum += F.cross_entropy(logits.float(), y, reduction="sum").item()
            correct += (logits.argmax(1) == y).sum().item()
    finally:
        model.train(was_training)
    n = max(1, len(split))
    return loss_sum / n, correct / n


def get_lr(step: int, progress: float, cfg: TrainConfig, warmup_steps: int) -> float:
    """Linear warmup over `warmup_steps`, then cosine from cfg.lr to 0 as progress goes 0 -> 1."""
    warm = min(1.0, (step + 1) / max(1, warmup_steps))
    if cfg.time_budget > 0:  # a timed run warms up for at most a tenth of its budget
        warm = max(warm, min(1.0, progress / 0.1))
    return cfg.lr * warm * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def build_model(cfg: TrainConfig, data: Dataset) -> ViT:
    spec = DATASETS[cfg.dataset]
    mcfg = make_config(cfg.preset, image_size=spec["image_size"], in_chans=spec["in_chans"],
                       num_classes=len(data.classes), **cfg.model_overrides())
    torch.manual_seed(cfg.seed)
    model = ViT(mcfg, classes=data.classes)
    model.mean, model.std, model.dataset = tuple(data.mean), tuple(data.std), cfg.dataset
    return model


def _opt_state(opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    out = {}
    for i, st in opt.state_dict()["state"].items():
        for k, v in st.items():
            out[f"opt.{i}.{k}"] = v if torch.is_tensor(v) else torch.tensor(v)
    return out


def _load_opt_state(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor]):
    sd = opt.state_dict()
    state: dict[int, dict] = {}
    for key, v in tensors.items():
        if key.startswith("opt."):
            _, i, k = key.split(".", 2)
            state.setdefault(int(i), {})[k] = v
    sd["state"] = state
    opt.load_state_dict(sd)


def train(cfg: TrainConfig, data: Dataset | None = None, out: str | Path | None = None, resume: bool = False,
          stop: threading.Event | None = None, snapshots: bool = False, data_path=None, final_test: bool = False):
    """Run training; yields event dicts. Set `stop` to end the run early (it keeps what it learned)."""
    if cfg.dataset not in DATASETS:
        raise ValueError(f"unknown data set {cfg.dataset!r}")
    if cfg.preset not in PRESETS:
        raise ValueError(f"unknown preset {cfg.preset!r}")
    device = pick_device(cfg.device)
    if data is None:
        data = load_dataset(cfg.dataset, data_path, val_size=cfg.val_size)
    model = build_model(cfg, data)
    history: list[dict] = []
    step, epoch, elapsed_before = 0, 0, 0.0
    gen = torch.Generator().manual_seed(cfg.seed)
    opt_tensors = None
    if resume and out is not None and checkpoint.paths(out)[1].exists():
        prev = checkpoint.load(out)
        if prev.config != model.config:
            raise checkpoint.CheckpointError(f"cannot resume: {out} holds a different model config")
        model.load_state_dict(prev.state_dict())
        meta = prev.meta
        history = meta.get("history", [])
        epoch = int(meta.get("metrics", {}).get("epoch", 0))
        step = int(meta.get("metrics", {}).get("step", 0))
        elapsed_before = float(meta.get("metrics", {}).get("train_seconds", 0.0))
        opt_tensors = checkpoint.load_state(out)
    model.to(device).train()

    train_x, train_y = data.train.x, data.train.y
    if cfg.subset and cfg.subset < len(train_y):
        idx = torch.randperm(len(train_y), generator=torch.Generator().manual_seed(cfg.seed + 1))[:cfg.subset]
        train_x, train_y = train_x[idx], train_y[idx]
    train_x, train_y = train_x.to(device), train_y.to(device)
    n = len(train_y)
    bs = min(cfg.batch_size, n)
    steps_per_epoch = max(1, n // bs)
    total_steps = max(1, round(cfg.epochs * steps_per_epoch))
    warmup_steps = min(round(cfg.warmup * steps_per_epoch), total_steps // 5)

    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.99))
    if opt_tensors is not None:
        _load_opt_state(opt, {k: v.to(device) for k, v in opt_tensors.items()})
        if "rng" in opt_tensors:
            gen.set_state(opt_tensors["rng"])

    pad = 4 if data.name == "cifar10" else 2
    yield {"event": "start", "config": asdict(cfg), "model": model.config.to_dict(), "params": model.num_params(),
           "device": str(device), "device_name": describe_device(device), "train_images": n,
           "steps": total_steps, "steps_per_epoch": steps_per_epoch, "resumed_step": step, "data": data.source}

    def save(metrics):
        if out is None:
            return None
        state = _opt_state(opt)
        state["rng"] = gen.get_state()
        path = checkpoint.save(out, model, train_config=asdict(cfg), metrics=metrics, history=history, state=state)
        if cfg.keep_epochs > 0 and float(metrics["epoch"]).is_integer():
            keep_epoch_copy(out, int(metrics["epoch"]), cfg.keep_epochs)
        return path

    def progress(elapsed):
        p = step / total_steps
        if cfg.time_budget > 0:
            p = max(p, elapsed / cfg.time_budget)
        return p

    t0 = time.perf_counter() - elapsed_before
    seen_window, t_window = 0, time.perf_counter()
    run_loss, run_correct, run_n = 0.0, 0, 0
    status, message = "done", "finished"
    perm = torch.randperm(n, generator=gen).to(device)
    pos = (step % steps_per_epoch) * bs
    while True:
        elapsed = time.perf_counter() - t0
        if step >= total_steps or (cfg.time_budget > 0 and elapsed >= cfg.time_budget):
            break
        if stop is not None and stop.is_set():
            status, message = "stopped", "stopped by request"
            break
        if pos + bs > n:
            perm, pos = torch.randperm(n, generator=gen).to(device), 0
        idx = perm[pos:pos + bs]
        pos += bs
        xb, yb = train_x[idx], train_y[idx]
        if cfg.augment:
            xb = augment(xb, flip=data.flip, pad=pad, generator=gen)
        xb = normalize(xb, model.mean, model.std)
        if cfg.erase > 0:
            xb = random_erase(xb, cfg.erase, generator=gen)
        xb, target = mix_batch(xb, yb, model.config.num_classes, cfg.mix, generator=gen)
        lr = get_lr(step, progress(elapsed), cfg, warmup_steps)
        for g in opt.param_groups:
            g["lr"] = lr
        with autocast(device, cfg.amp):
            logits = model(xb)
        loss = F.cross_entropy(logits.float(), target, label_smoothing=cfg.label_smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        seen_window += bs
        if step % cfg.log_every == 0 or step == 1:
            loss_v = loss.item()
            if not math.isfinite(loss_v):
                status = "error"
                message = (f"training diverged: the loss became {loss_v} at step {step}. "
                           "Try a lower learning rate.")
                break
            run_loss += loss_v * bs
            run_correct += (logits.argmax(1) == target.argmax(1)).sum().item()  # the majority label when mixed
            run_n += bs
            now = time.perf_counter()
            ips = seen_window / max(1e-9, now - t_window)
            seen_window, t_window = 0, now
            elapsed = now - t0
            p = progress(elapsed)
            eta = (total_steps - step) / max(1e-9, ips / bs)
            if cfg.time_budget > 0:
                eta = min(eta, cfg.time_budget - elapsed)
            yield {"event": "step", "step": step, "epoch": step / steps_per_epoch, "loss": loss_v, "lr": lr,
                   "images_per_s": ips, "progress": min(1.0, p), "elapsed": elapsed, "eta": max(0.0, eta)}
        if snapshots and cfg.snapshot_every and step % cfg.snapshot_every == 0:
            yield {"event": "snapshot", "at": "step", "step": step, "epoch": step / steps_per_epoch, "model": model}
        if step % steps_per_epoch == 0:
            epoch += 1
            rec = _epoch_record(model, data, device, cfg, epoch, step, time.perf_counter() - t0,
                                run_loss / max(1, run_n), run_correct / max(1, run_n))
            run_loss, run_correct, run_n = 0.0, 0, 0
            history.append(rec)
            yield {"event": "epoch", **rec}
            path = save(_metrics(rec))
            if path is not None:
                yield {"event": "checkpoint", "path": str(path), "epoch": epoch}
            if snapshots:
                yield {"event": "snapshot", "at": "epoch", "step": step, "epoch": epoch, "model": model}
            seen_window, t_window = 0, time.perf_counter()  # evaluation time is not training time

    elapsed = time.perf_counter() - t0
    if status != "error" and (not history or history[-1]["step"] != step) and step > 0:
        # a stopped run answers fast: it validates on at most 500 images
        rec = _epoch_record(model, data, device, cfg, step / steps_per_epoch, step, elapsed,
                            run_loss / max(1, run_n), run_correct / max(1, run_n), 500 if status == "stopped" else 0)
        history.append(rec)
        yield {"event": "epoch", **rec}
        path = save(_metrics(rec))
        if path is not None:
            yield {"event": "checkpoint", "path": str(path), "epoch": rec["epoch"]}
    model.eval()
    result = {"event": status, "message": message, "step": step, "train_seconds": elapsed, "model": model,
              "history": history, "path": str(checkpoint.paths(out)[0]) if out is not None and history else None}
    if status != "error" and final_test and step > 0:
        _, result["test_acc"] = evaluate(model, data.test, device, amp=cfg.amp)
    yield result


def keep_epoch_copy(out, epoch: int, keep: int):
    """Copy the checkpoint just written to OUT-epochNNN and delete the copies more than `keep` epochs old."""
    wpath, jpath = checkpoint.paths(out)
    stem = wpath.with_suffix("")
    dst = stem.with_name(f"{stem.name}-epoch{epoch:03d}")
    shutil.copyfile(wpath, dst.with_suffix(".safetensors"))
    shutil.copyfile(jpath, dst.with_suffix(".json"))  # the JSON last: a pair whose JSON is there is complete
    for old in stem.parent.glob(f"{stem.name}-epoch*.json"):
        n = old.stem.rsplit("-epoch", 1)[1]
        if n.isdigit() and int(n) <= epoch - keep:
            for f in checkpoint.paths(old):
                f.unlink(missing_ok=True)


def _epoch_record(model, data, device, cfg, epoch, step, elapsed, train_loss, train_acc, limit: int = 0) -> dict:
    """Validation figures at the end of an epoch (or of the run); `limit` caps the images used."""
    n = min(x for x in (len(data.val), cfg.eval_images or len(data.val), limit or len(data.val)))
    val = Split(data.val.x[:n], data.val.y[:n])
    val_loss, val_acc = evaluate(model, val, device, amp=cfg.amp) if n else (float("nan"), float("nan"))
    model.train()
    return {"epoch": round(float(epoch), 4), "step": step, "train_loss": train_loss, "train_acc": train_acc,
            "val_loss": val_loss, "val_acc": val_acc, "elapsed": elapsed}


def _metrics(rec: dict) -> dict:
    return {"epoch": rec["epoch"], "step": rec["step"], "val_acc": rec["val_acc"], "val_loss": rec["val_loss"],
            "train_seconds": rec["elapsed"]}


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"GPU: {torch.cuda.get_device_name(device)}"
    return f"CPU: {torch.get_num_threads()} threads" + (", bf16" if cpu_has_bf16() else "")


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
    kw = {f.name: getattr(a, f.name) for f in fields(TrainConfig) if hasattr(a, f.name)}
    kw["augment"] = not a.no_augment
    kw["amp"] = not a.no_amp
    return TrainConfig(**kw)


def main(argv=None) -> int:
    from tqdm import tqdm

    a = parser().parse_args(argv)
    if a.resume and not a.out:
        parser().error("--resume needs --out")
    cfg = config_from_args(a)
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
