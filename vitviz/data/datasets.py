"""Data sets, preprocessing and batch augmentation.

CIFAR-10 and MNIST come from a local zip or folder laid out as
``train/<class>/*`` and ``test/<class>/*`` (``--data`` or the VITVIZ_DATA
environment variable; a folder holding ``cifar10-jpeg.zip`` / ``mnist-png.zip``
works too) or, with neither, through torchvision's download. Either way the
images end up in memory as uint8 tensors (N, C, H, W), decoded once and cached.

Any single image (a visitor's, a file's) becomes what the model sees in
vitviz.data.images (``to_pixels``; a model's own: vitviz.models.loaded.LoadedViT.prepare).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

import hashlib
import io
import math
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]

# What each data set is: its classes, geometry, normalisation and augmentation.
DATASETS = {
    "cifar10": dict(
        classes=CIFAR10_CLASSES,
        image_size=32,
        in_chans=3,
        flip=True,
        mean=(0.4914, 0.4822, 0.4465),
        std=(0.2470, 0.2435, 0.2616),
        archive="cifar10-jpeg.zip",
    ),
    "mnist": dict(
        classes=[str(i) for i in range(10)],
        image_size=28,
        in_chans=1,
        flip=False,
        mean=(0.1307,),
        std=(0.3081,),
        archive="mnist-png.zip",
    ),
}

MAX_PIXELS = 64_000_000  # larger images are refused as likely decompression bombs


class DataUnavailable(RuntimeError):
    """The data set is neither on disk nor downloadable; the message says what to do."""


@dataclass
class Split:
    x: torch.Tensor  # (N, C, H, W) uint8
    y: torch.Tensor  # (N,) int64

    def __len__(self):
        return len(self.y)


@dataclass
class Dataset:
    name: str
    train: Split
    val: Split
    test: Split
    classes: list[str]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    flip: bool
    source: str


def cache_dir() -> Path:
    d = Path(os.environ.get("VITVIZ_CACHE", Path.home() / ".cache" / "vitviz"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def find_source(name: str, data: str | os.PathLike | None = None) -> Path | None:
    """The local zip or folder for data set `name`, from `data` or VITVIZ_DATA; None if neither is set."""
    spec = DATASETS[name]
    root = data if data is not None else os.environ.get("VITVIZ_DATA")
    if not root:
        return None
    p = Path(root).expanduser()
    if p.is_file():
        return p
    if p.is_dir():
        for cand in (p / spec["archive"], p / name, p / spec["archive"].removesuffix(".zip")):
            if cand.exists():
                return cand
        if (p / "train").is_dir() and (p / "test").is_dir():
            return p
    raise DataUnavailable(
        f"no {name} data at {p}: expected {spec['archive']} or a folder with train/<class>/ and test/<class>/"
    )


def _decode(raw: bytes, in_chans: int) -> np.ndarray:
    with Image.open(io.BytesIO(raw)) as im:
        arr = np.asarray(im.convert("RGB" if in_chans == 3 else "L"))
    return arr if arr.ndim == 3 else arr[:, :, None]


def _read_layout(src: Path, name: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Decode every image of a train/<class>/, test/<class>/ zip or folder into uint8 arrays."""
    spec = DATASETS[name]
    index = {c: i for i, c in enumerate(spec["classes"])}
    if src.is_file():
        zf = zipfile.ZipFile(src)
        names = [n for n in zf.namelist() if not n.endswith("/")]
        read = zf.read
    else:
        zf = None
        names = [str(p.relative_to(src)) for p in src.rglob("*") if p.is_file()]
        read = lambda n: (src / n).read_bytes()  # noqa: E731
    out = {}
    try:
        for split in ("train", "test"):
            items = []
            for n in names:
                parts = n.replace("\\", "/").split("/")
                if len(parts) >= 3 and parts[-3] == split and parts[-2] in index:
                    items.append((parts[-2], parts[-1], n))
            if not items:
                raise DataUnavailable(f"{src} has no {split}/<class>/ images for {name}")
            items.sort()
            xs = np.stack([_decode(read(n), spec["in_chans"]) for _, _, n in items])
            ys = np.array([index[c] for c, _, _ in items], dtype=np.int64)
            size = spec["image_size"]
            if xs.shape[1:3] != (size, size):
                raise DataUnavailable(f"{src}: images are {xs.shape[1]}x{xs.shape[2]}, expected {size}x{size}")
            out[split] = (xs.transpose(0, 3, 1, 2).copy(), ys)
    finally:
        if zf is not None:
            zf.close()
    return out


def _download(name: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    import torchvision

    root = cache_dir() / "torchvision"
    cls = {"cifar10": torchvision.datasets.CIFAR10, "mnist": torchvision.datasets.MNIST}[name]
    out = {}
    try:
        for split in ("train", "test"):
            ds = cls(str(root), train=split == "train", download=True)
            x = np.asarray(ds.data)
            x = x[:, None] if x.ndim == 3 else x.transpose(0, 3, 1, 2)
            out[split] = (np.ascontiguousarray(x, dtype=np.uint8), np.asarray(ds.targets, dtype=np.int64))
    except Exception as e:  # no internet, a broken mirror, a full disk
        raise DataUnavailable(
            f"{name} is not available: no local copy (set VITVIZ_DATA or pass --data) and the download failed ({e})"
        ) from None
    return out


def _load_arrays(name: str, data=None) -> tuple[dict, str]:
    src = find_source(name, data)
    if src is None:
        key, desc = f"{name}-torchvision", "torchvision download"
    else:
        st = src.stat()
        key = name + "-" + hashlib.sha1(f"{src.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
        desc = str(src)
    cached = cache_dir() / f"{key}.npz"
    if cached.exists():
        try:
            with np.load(cached) as z:
                return {s: (z[f"{s}_x"], z[f"{s}_y"]) for s in ("train", "test")}, desc
        except Exception:
            cached.unlink(missing_ok=True)
    arrays = _download(name) if src is None else _read_layout(src, name)
    tmp = cached.with_suffix(f".tmp{os.getpid()}.npz")
    np.savez(tmp, **{f"{s}_{k}": v for s, (x, y) in arrays.items() for k, v in (("x", x), ("y", y))})
    os.replace(tmp, cached)
    return arrays, desc


def load_dataset(name: str = "cifar10", data: str | Path | None = None, val_size: int = 5000, seed: int = 0) -> Dataset:
    """Load a data set into memory; `val_size` training images (a fixed random draw) are held out for validation."""
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; choose from {sorted(DATASETS)}")
    spec = DATASETS[name]
    arrays, desc = _load_arrays(name, data)
    tx, ty = (torch.from_numpy(a) for a in arrays["train"])
    val_size = min(val_size, len(ty) // 10)  # a small data set keeps at least 90% for training
    perm = torch.randperm(len(ty), generator=torch.Generator().manual_seed(seed))
    val_idx, train_idx = perm[:val_size], perm[val_size:]
    return Dataset(
        name=name,
        train=Split(tx[train_idx], ty[train_idx]),
        val=Split(tx[val_idx], ty[val_idx]),
        test=Split(*(torch.from_numpy(a) for a in arrays["test"])),
        classes=list(spec["classes"]),
        mean=spec["mean"],
        std=spec["std"],
        flip=spec["flip"],
        source=desc,
    )


# ---------------------------------------------------------------- batches


def normalize(x: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """uint8 (B, C, H, W) -> float, normalised per channel."""
    m = torch.tensor(mean, device=x.device).view(1, -1, 1, 1)
    s = torch.tensor(std, device=x.device).view(1, -1, 1, 1)
    return (x.float() / 255.0 - m) / s


def augment(x: torch.Tensor, flip: bool = True, pad: int = 4, generator: torch.Generator | None = None) -> torch.Tensor:
    """Random crop with zero padding and (optionally) horizontal flip, on a whole uint8 batch at once."""
    B, C, H, W = x.shape
    dev = x.device
    if pad > 0:
        xp = torch.nn.functional.pad(x, (pad, pad, pad, pad))  # (B, C, H+2p, W+2p)
        dy = torch.randint(0, 2 * pad + 1, (B,), generator=generator).to(dev)
        dx = torch.randint(0, 2 * pad + 1, (B,), generator=generator).to(dev)
        rows = dy[:, None] + torch.arange(H, device=dev)  # (B, H)
        cols = dx[:, None] + torch.arange(W, device=dev)  # (B, W)
        xp = xp.gather(2, rows[:, None, :, None].expand(B, C, H, W + 2 * pad))  # (B, C, H, W+2p)
        x = xp.gather(3, cols[:, None, None, :].expand(B, C, H, W))
    if flip:
        m = (torch.rand(B, generator=generator) < 0.5).to(dev)
        x = torch.where(m[:, None, None, None], x.flip(3), x)
    return x


def random_erase(x: torch.Tensor, p: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Random erasing (Zhong et al. 2020) on a normalised float batch: with probability p per image,
    one rectangle (2-33% of the area, aspect 0.3-3.3) is filled with Gaussian noise."""
    B, C, H, W = x.shape
    if p <= 0:
        return x
    dev = x.device
    area = torch.empty(B).uniform_(0.02, 1 / 3, generator=generator) * H * W
    aspect = torch.exp(torch.empty(B).uniform_(math.log(0.3), math.log(1 / 0.3), generator=generator))
    h = (area * aspect).sqrt().round().clamp(1, H).long()
    w = (area / aspect).sqrt().round().clamp(1, W).long()
    top = (torch.rand(B, generator=generator) * (H - h + 1)).long()
    left = (torch.rand(B, generator=generator) * (W - w + 1)).long()
    on = torch.rand(B, generator=generator) < p
    ys, xs = torch.arange(H)[None, :], torch.arange(W)[None, :]
    rows = (ys >= top[:, None]) & (ys < (top + h)[:, None])  # (B, H)
    cols = (xs >= left[:, None]) & (xs < (left + w)[:, None])  # (B, W)
    mask = (rows[:, :, None] & cols[:, None, :] & on[:, None, None]).to(dev)[:, None]  # (B, 1, H, W)
    noise = torch.randn(x.shape, generator=generator).to(dev, x.dtype)
    return torch.where(mask, noise, x)


def mix_batch(
    x: torch.Tensor, y: torch.Tensor, num_classes: int, p: float, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """CutMix or Mixup (even odds) with probability p, on a whole batch paired with its reverse.

    Returns the batch and soft targets (B, num_classes). CutMix pastes one box of the partner
    image (area 1 - lam, lam ~ Beta(1, 1)) and weights the labels by the pasted area; Mixup
    blends the two images with lam ~ Beta(0.8, 0.8) (the DeiT settings)."""
    target = torch.nn.functional.one_hot(y, num_classes).float()
    if p <= 0 or float(torch.rand(1, generator=generator)) >= p:
        return x, target
    B, C, H, W = x.shape
    partner = x.flip(0)
    cutmix = float(torch.rand(1, generator=generator)) < 0.5
    alpha = 1.0 if cutmix else 0.8
    lam = float(np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,), generator=generator))).beta(alpha, alpha))
    if cutmix:
        cut = math.sqrt(1 - lam)
        h, w = round(H * cut), round(W * cut)
        cy = int(torch.randint(0, H, (1,), generator=generator))
        cx = int(torch.randint(0, W, (1,), generator=generator))
        y0, y1 = max(0, cy - h // 2), min(H, cy + h - h // 2)
        x0, x1 = max(0, cx - w // 2), min(W, cx + w - w // 2)
        x = x.clone()
        x[:, :, y0:y1, x0:x1] = partner[:, :, y0:y1, x0:x1]
        lam = 1 - (y1 - y0) * (x1 - x0) / (H * W)
    else:
        x = lam * x + (1 - lam) * partner
    return x, lam * target + (1 - lam) * target.flip(0)


# ---------------------------------------------------------------- single images
