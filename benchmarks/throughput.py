"""Training and inference images/s: vitviz's ViT against the tutorial's code, same dims, same run.

    python benchmarks/throughput.py [--steps 20] [--rounds 4] [--device cpu|cuda] [--no-amp] [--synthetic N]

Training: the two take turns, `--rounds` rounds of `--steps` steps each (after `--warmup` steps), so a
machine whose speed drifts (shared cores move 10-30% within minutes) slows both alike; each side's
img/s is its images over its time in all rounds, and the line gives the range of the rounds' ratios.
Both sides run end to end including data: the baseline through a DataLoader of
per-image PIL transforms (the tutorial's recipe), vitviz through its own
training loop (uint8 data in memory, batch augmentation as tensor ops, bf16
autocast where the hardware has it). The model is the tutorial's: 32x32,
patch 4, dim 256, depth 4, heads 4, MLP 128 (vitviz's `seed` preset).
Prints images/s for both and the ratios, then the device's measured matmul peak in bf16 and
fp32 (an 8320x256 by 256x768 product, the shape of a qkv projection) and the fraction of it that
vitviz's training reaches (one trained image of these dims is about 0.57 GFLOP of matmuls).
`--no-amp` trains vitviz in fp32 even where bf16 units exist (the path of CPUs without them).
`--synthetic N` runs both on N random CIFAR-sized images (more where the rounds need more) instead of
the data set (throughput alone, where the data set cannot be had). The precision vitviz trains in is
measured as a run measures it, and said.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tutorial_baseline import TutorialViT, loader  # noqa: E402

import vitviz  # noqa: E402
from vitviz.data.datasets import DATASETS, Dataset, Split, load_dataset  # noqa: E402
from vitviz.runtime import speed  # noqa: E402
from vitviz.training.loop import TrainConfig, describe_device, evaluate, pick_device, train  # noqa: E402


def baseline_rounds(data, steps, warmup, device, bs=128) -> Iterator[float]:
    """The tutorial's training, `steps` steps at a time after `warmup`: yields each round's images/s."""
    torch.manual_seed(0)
    model = TutorialViT().to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    crit = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    it = iter(loader(data.train.x, data.train.y, train=True, batch_size=bs))

    def run(n: int) -> float:
        t = time.perf_counter()
        for _ in range(n):
            x, y = next(it)
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            opt.step()
        loss.item()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return n * bs / (time.perf_counter() - t)

    run(warmup)
    while True:
        yield run(steps)


def ours_rounds(data, steps, warmup, device, rounds, bs=128, amp=True) -> Iterator[float]:
    """vitviz's training loop, `steps` steps at a time after `warmup`: yields each round's images/s, timed from
    step event to step event (the loop is paused between rounds)."""
    cfg = TrainConfig.of(
        dataset="cifar10",
        preset="seed",
        epochs=(warmup + rounds * steps + 1) / (len(data.train) // bs),
        batch_size=bs,
        log_every=1,
        device=device.type,
        val_size=0,
        amp=amp,
    )
    events = (ev for ev in train(cfg, data=data) if ev["event"] == "step")
    for ev in events:
        if ev["step"] >= warmup:
            break
    while True:
        t = time.perf_counter()
        for _, ev in zip(range(steps), events):
            pass
        yield steps * bs / (time.perf_counter() - t)


def time_train(data, steps, warmup, rounds, device, amp) -> tuple[float, float, list[float]]:
    """Both trainings in turns, `rounds` rounds of `steps` steps each, so that a machine whose speed drifts
    (shared cores) slows both alike: (tutorial img/s, vitviz img/s, each round's ratio), a side's img/s being
    its images over its time across all rounds."""
    base = baseline_rounds(data, steps, warmup, device)
    ours = ours_rounds(data, steps, warmup, device, rounds, amp=amp)
    pairs = [(next(base), next(ours)) for _ in range(rounds)]
    base.close()
    ours.close()
    mean = [len(pairs) / sum(1 / p[i] for p in pairs) for i in (0, 1)]  # images over time, steps being equal
    return mean[0], mean[1], [o / b for b, o in pairs]


def time_baseline_infer(data, n, device, bs=128):
    model = TutorialViT().to(device).eval()
    dl = loader(data.test.x[:n], data.test.y[:n], train=False, batch_size=bs)
    with torch.no_grad():
        next(iter(dl))  # start the workers
        t = time.perf_counter()
        for x, y in dl:
            model(x.to(device)).argmax(1).cpu()
    return n / (time.perf_counter() - t)


def time_ours_infer(data, n, device):
    from vitviz.models.vit import ViT, make_config

    model = ViT(make_config("seed")).to(device).eval()
    vitviz.describe(model, mean=tuple(data.mean), std=tuple(data.std))
    split = type(data.test)(data.test.x[:n], data.test.y[:n])
    evaluate(model, type(data.test)(split.x[:500], split.y[:500]), device)
    t = time.perf_counter()
    evaluate(model, split, device)
    return n / (time.perf_counter() - t)


def random_cifar(n: int) -> Dataset:
    """n random 32x32 RGB images with random labels, as training and test split: for speed alone."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (n, 3, 32, 32), generator=g, dtype=torch.uint8)
    y = torch.randint(0, 10, (n,), generator=g)
    spec = DATASETS["cifar10"]
    split = Split(x, y)
    return Dataset(
        "cifar10",
        split,
        Split(x[:0], y[:0]),
        split,
        list(spec["classes"]),
        spec["mean"],
        spec["std"],
        spec["flip"],
        f"{n} random images",
    )


TRAIN_GFLOP = 0.57  # matmul work of one trained image at the tutorial's dims (forward + backward)


def matmul_peak(device, dtype, repeats: int = 20) -> float:
    """Measured GFLOP/s of an 8320x256 by 256x768 matmul in `dtype`."""
    a = torch.randn(8320, 256, device=device, dtype=dtype)
    b = torch.randn(256, 768, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(repeats):
        a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 2 * 8320 * 256 * 768 * repeats / (time.perf_counter() - t) / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=4, help="turns of --steps steps each side takes")
    p.add_argument("--infer-images", type=int, default=5000)
    p.add_argument("--device", default="auto")
    p.add_argument("--data", default=os.environ.get("VITVIZ_DATA"))
    p.add_argument("--no-amp", action="store_true", help="vitviz in fp32 even where bf16 units exist")
    p.add_argument("--synthetic", type=int, default=0, help="N random images instead of the data set")
    a = p.parse_args()
    device = pick_device(a.device)
    n = max(20000, (a.warmup + a.rounds * a.steps + 2) * 128)  # no epoch ends (and validates) inside a round
    if a.synthetic:
        data = random_cifar(max(a.synthetic, n))
    else:
        data = load_dataset("cifar10", a.data, val_size=0)
        data.train.x, data.train.y = data.train.x[:n], data.train.y[:n]
    print(f"device: {describe_device(device)}; torch {torch.__version__}")
    base, ours, ratios = time_train(data, a.steps, a.warmup, a.rounds, device, amp=not a.no_amp)
    rows = [("train", base, ours)]
    print(
        f"train      tutorial {base:8.0f} img/s   vitviz {ours:8.0f} img/s   ratio {ours / base:5.2f}x "
        f"({a.rounds} rounds of {a.steps} steps each in turn; a round's ratio {min(ratios):.2f}-{max(ratios):.2f}x)",
        flush=True,
    )
    base, ours = time_baseline_infer(data, a.infer_images, device), time_ours_infer(data, a.infer_images, device)
    rows.append(("inference", base, ours))
    print(f"inference  tutorial {base:8.0f} img/s   vitviz {ours:8.0f} img/s   ratio {ours / base:5.2f}x", flush=True)
    bf16, fp32 = matmul_peak(device, torch.bfloat16), matmul_peak(device, torch.float32)
    why = "fp32: --no-amp" if a.no_amp else speed.chosen("training", device, lambda: None).reason  # as measured
    amp = why.startswith("bf16")
    print(f"vitviz's run measured and chose {why}")
    used = bf16 if amp else fp32
    ours = rows[0][2]
    print(
        f"matmul peak: bf16 {bf16:.0f} GFLOP/s, fp32 {fp32:.0f} GFLOP/s (bf16 {bf16 / fp32:.2f}x fp32); vitviz trains "
        f"in {'bf16' if amp else 'fp32'}: {ours * TRAIN_GFLOP:.0f} GFLOP/s of matmuls = "
        f"{100 * ours * TRAIN_GFLOP / used:.0f}% "
        f"of that peak ({used / TRAIN_GFLOP:.0f} img/s if matmuls were all)"
    )
    return rows


if __name__ == "__main__":
    main()
