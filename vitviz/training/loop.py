"""Train a ViT: one loop, written as a generator of events. `vitviz train` (vitviz.training.command) runs it
from the command line:

    vitviz train --preset cifar --dataset cifar10 --epochs 100 --out runs/cifar

The loop yields dicts: ``start``, ``step`` (loss, lr, images/s, progress, ETA), ``val`` (a quick
validation on a small held-out sample, every ``quick_val_every_s`` seconds),
``epoch`` (train and validation loss and accuracy), ``snapshot`` (the live
model, on request), ``checkpoint``, and one of ``done``, ``stopped`` or
``error``. The command prints them with a progress bar; the app streams them (vitviz.app.live).

AdamW, linear warmup then cosine decay (by steps, or by wall time when a time
budget is set), label smoothing, data resident on the device as uint8 with
crop and flip done on whole batches there, bf16 autocast where it was measured faster
(vitviz.training.precision), early steps on a random part of each image's patch tokens
(`token_drop`), and an average of the weights for validation (`ema`) when asked. A
checkpoint is written atomically every epoch, so a killed run loses at most one epoch;
``--resume`` goes on from the last one.
What the shipped models reach, in how long, is in checkpoints/README.md. The Train
tab's quick run (vitviz.training.quick.quick_defaults: designed for its time budget, with
early token drop) reaches 59% CIFAR-10 test accuracy in 60 s and 69% in 180 s on 2 CPU cores
with bf16 units:

    python benchmarks/time_to_accuracy.py --budgets 60 180
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


import math
import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from vitviz.data.datasets import Dataset, load_dataset
from vitviz.models import checkpoint
from vitviz.models.card import ModelCard, describe
from vitviz.models.vit import ViT
from vitviz.runtime import memory
from vitviz.runtime.device import Precision, describe_device, pick_device
from vitviz.training.batches import Batches
from vitviz.training.clock import RunClock
from vitviz.training.config import ConfigError, TrainConfig
from vitviz.training.events import result_event, snapshot_event, start_event, step_event
from vitviz.training.heldout import QuickVal, epoch_record, evaluate
from vitviz.training.parts import Meter, Parts, Progress, weight_average
from vitviz.training.precision import run_precision

__all__ = ["TrainConfig", "ConfigError", "train", "evaluate", "build_model", "pick_device", "describe_device"]


def get_lr(step: int, progress: float, cfg: TrainConfig, warmup_steps: int) -> float:
    """Linear warmup over `warmup_steps`, then cosine from cfg.optim.lr to 0 as progress goes 0 -> 1."""
    warm = min(1.0, (step + 1) / max(1, warmup_steps))
    if cfg.budget.time_budget > 0:  # a timed run warms up for at most a tenth of its budget
        warm = max(warm, min(1.0, progress / 0.1))
    return cfg.optim.lr * warm * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def build_model(cfg: TrainConfig, data: Dataset) -> ViT:
    mcfg = cfg.model_config()
    torch.manual_seed(cfg.budget.seed)
    return describe(
        ViT(mcfg),
        ModelCard(
            config=mcfg,
            classes=tuple(data.classes),
            mean=tuple(data.mean),
            std=tuple(data.std),
            dataset=cfg.budget.dataset,
            kind="trained",
        ),
    )


# ---------------------------------------------------------------- the loop's parts


def resume_from(out: str | Path | None, model: ViT) -> Progress:
    """The progress a checkpoint at `out` records, its weights loaded into `model`."""
    prev = checkpoint.load(out)
    if prev.card.config != model.config:
        raise checkpoint.CheckpointError(f"cannot resume: {out} holds a different model config")
    model.load_state_dict(prev.state_dict())
    m = prev.card.metrics
    return Progress(
        step=int(m.get("step", 0)),
        epoch=int(m.get("epoch", 0)),
        elapsed_before=float(m.get("train_seconds", 0.0)),
        history=list(prev.card.history),
        optimizer=checkpoint.load_state(out),
    )


def make_optimizer(model: ViT, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW; no weight decay on biases, norms and embeddings' 1-D parameters. The fused step (one kernel for
    every parameter, on the CPU too) where the device has it: 6% of a quick-preset step on 2 CPU cores."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    device = next(model.parameters()).device
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.optim.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.optim.lr,
        betas=(0.9, 0.99),
        fused=device.type in ("cpu", "cuda"),
    )


def optimizer_state(opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    out = {}
    for i, st in opt.state_dict()["state"].items():
        for k, v in st.items():
            out[f"opt.{i}.{k}"] = v if torch.is_tensor(v) else torch.tensor(v)
    return out


def load_optimizer_state(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor]) -> None:
    sd = opt.state_dict()
    state: dict[int, dict] = {}
    for key, v in tensors.items():
        if key.startswith("opt."):
            _, i, k = key.split(".", 2)
            state.setdefault(int(i), {})[k] = v
    sd["state"] = state
    opt.load_state_dict(sd)


def train_step(
    model: ViT,
    opt: torch.optim.Optimizer,
    xb: torch.Tensor,
    target: torch.Tensor,
    lr: float,
    cfg: TrainConfig,
    precision: Precision,
    keep: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimisation step (on `keep` random patch tokens of each image when > 0); returns (loss, logits)."""
    for g in opt.param_groups:
        g["lr"] = lr
    with precision():
        logits = model(xb, keep=keep)
    loss = F.cross_entropy(logits.float(), target, label_smoothing=cfg.optim.label_smoothing)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
    opt.step()
    return loss, logits


def restore_optimizer(
    opt: torch.optim.Optimizer, gen: torch.Generator, tensors: dict[str, torch.Tensor], device: torch.device | str
) -> None:
    """The optimizer moments and the batch generator's state of a resumed run."""
    load_optimizer_state(opt, {k: v.to(device) for k, v in tensors.items()})
    if "rng" in tensors:
        gen.set_state(tensors["rng"])


# ---------------------------------------------------------------- the loop


def setup(
    cfg: TrainConfig, data: Dataset | None, out: str | Path | None, resume: bool, data_path: str | Path | None
) -> Parts:
    """The run's parts: the data loaded (unless given), the model built or resumed from `out`, on its device."""
    cfg.validate()
    device = pick_device(cfg.budget.device)
    data = data if data is not None else load_dataset(cfg.budget.dataset, data_path, val_size=cfg.budget.val_size)
    model = build_model(cfg, data)
    run = resume_from(out, model) if resume and out is not None and checkpoint.paths(out)[1].exists() else Progress()
    model.to(device).train()
    if device.type == "cpu":
        memory.reuse_freed()  # a step's activations come back from the heap, not page by page from the OS
    precision = run_precision(model, device, cfg.budget.amp, cfg.budget.batch_size)
    gen = torch.Generator().manual_seed(cfg.budget.seed)
    batches = Batches(cfg, data, model.card, device, gen)
    total_steps = max(1, round(cfg.budget.epochs * batches.per_epoch))
    opt = make_optimizer(model, cfg)
    if run.optimizer is not None:
        restore_optimizer(opt, gen, run.optimizer, device)
    warmup = min(round(cfg.optim.warmup * batches.per_epoch), total_steps // 5)
    average = weight_average(model, cfg.optim.ema) if cfg.optim.ema > 0 else None
    return Parts(cfg, device, precision, data, model, run, gen, batches, opt, total_steps, warmup, average)


def tokens_kept(cfg: TrainConfig, progress: float, patches: int) -> int:
    """How many of its `patches` patch tokens a step passes to the blocks at this point of the run (0: all)."""
    if cfg.optim.token_drop <= 0 or progress >= cfg.optim.token_drop_until:
        return 0
    return max(1, round(patches * (1 - cfg.optim.token_drop)))


def train(
    cfg: TrainConfig,
    data: Dataset | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    stop: threading.Event | None = None,
    snapshots: bool = False,
    data_path: str | Path | None = None,
    final_test: bool = False,
) -> Iterator[dict]:
    """Run training; yields event dicts. Set `stop` to end the run early (it keeps what it learned)."""
    p = setup(cfg, data, out, resume, data_path)
    model, run, batches, precision, data, opt, gen = p.model, p.run, p.batches, p.precision, p.data, p.opt, p.gen
    total_steps, warmup_steps = p.total_steps, p.warmup_steps
    yield start_event(p)

    def progress(elapsed: float) -> float:  # by steps, or by wall time when a budget is set, whichever is further
        return max(run.step / total_steps, elapsed / cfg.budget.time_budget if cfg.budget.time_budget > 0 else 0.0)

    def end_epoch(epoch: float, elapsed: float, limit: int = 0) -> Iterator[dict]:
        caps = [c for c in (limit, clock.validation_cap(run.step)) if c]  # 0: no cap
        rec = epoch_record(p.shown, data, precision, cfg, epoch, run.step, elapsed, *meter.take(), min(caps, default=0))
        run.history.append(rec)
        yield {"event": "epoch", **rec}
        path = save_run(out, p.shown, opt, gen, cfg, run.history, rec)
        if path is not None:
            yield {"event": "checkpoint", "path": str(path), "epoch": rec["epoch"]}

    clock = RunClock(cfg, run.step, batches.size, run.elapsed_before)
    quick = QuickVal(cfg, data, precision, batches.per_epoch)
    meter = Meter()
    status, message = "done", "finished"
    batches.start_at(run.step)
    while True:
        elapsed = clock.elapsed()
        if run.step >= total_steps or clock.over():  # a timed run takes no step that would end past its budget
            break
        if stop is not None and stop.is_set():
            status, message = "stopped", "stopped by request"
            break
        xb, target = batches.next()
        done = progress(elapsed)
        lr = get_lr(run.step, done, cfg, warmup_steps)
        keep = tokens_kept(cfg, done, model.config.num_patches)
        began = time.perf_counter()
        loss, logits = train_step(model, opt, xb, target, lr, cfg, precision, keep)
        clock.stepped(time.perf_counter() - began)
        if p.average is not None:
            p.average.update_parameters(p.model)
        run.step += 1
        meter.seen += batches.size
        if run.step % cfg.report.log_every == 0 or run.step == 1:
            loss_v = loss.item()
            if not math.isfinite(loss_v):
                status = "error"
                message = f"training diverged: the loss became {loss_v} at step {run.step}. Try a lower learning rate."
                break
            meter.add(loss_v, logits, target, batches.size)
            yield step_event(run.step, batches, total_steps, cfg, loss_v, lr, meter.rate(), clock.elapsed(), progress)
        if quick.due():
            yield quick.event(p.shown, run.step, clock.elapsed(), clock.validation_cap(run.step, share=0.02))
            meter.rate()  # evaluation time is not training time
        if snapshots and cfg.report.snapshot_every and run.step % cfg.report.snapshot_every == 0:
            handed = time.perf_counter()
            yield snapshot_event("step", run.step, run.step / batches.per_epoch, p.shown)
            meter.t += time.perf_counter() - handed  # the pictures drawn from it are not training time
        if run.step % batches.per_epoch == 0:
            run.epoch += 1
            ending = time.perf_counter()
            yield from end_epoch(run.epoch, clock.elapsed())
            clock.ended_epoch(time.perf_counter() - ending)
            if snapshots:
                yield snapshot_event("epoch", run.step, run.epoch, p.shown)
            meter.rate()  # evaluation time is not training time

    elapsed = clock.elapsed()
    if status != "error" and run.step > 0 and (not run.history or run.history[-1]["step"] != run.step):
        # a stopped run answers fast: it validates on at most 500 images
        yield from end_epoch(run.step / batches.per_epoch, elapsed, 500 if status == "stopped" else 0)
    yield result_event(status, message, run, elapsed, p.shown, out, data.test if final_test else None, precision)


def save_run(
    out: str | Path | None,
    model: ViT,
    opt: torch.optim.Optimizer,
    gen: torch.Generator,
    cfg: TrainConfig,
    history: list,
    rec: dict,
) -> Path | None:
    """Write the checkpoint and its resume state (and the kept epoch copy); None when there is no `out`."""
    if out is None:
        return None
    state = optimizer_state(opt)
    state["rng"] = gen.get_state()
    path = checkpoint.save(out, model, train_config=cfg.settings(), metrics=_metrics(rec), history=history, state=state)
    if cfg.report.keep_epochs > 0 and float(rec["epoch"]).is_integer():
        checkpoint.keep_epoch_copy(out, int(rec["epoch"]), cfg.report.keep_epochs)
    return path


def _metrics(rec: dict) -> dict:
    return {
        "epoch": rec["epoch"],
        "step": rec["step"],
        "val_acc": rec["val_acc"],
        "val_loss": rec["val_loss"],
        "train_seconds": rec["elapsed"],
    }
