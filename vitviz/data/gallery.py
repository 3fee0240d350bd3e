"""The example images shipped with the app: 10 test images per class of CIFAR-10 and MNIST.

python -m vitviz.data.gallery --data ../shared/data   # (re)build vitviz/assets/gallery/
"""

from __future__ import annotations

import argparse
import random
import zipfile
from io import BytesIO
from pathlib import Path

from PIL import Image

from vitviz.data.datasets import DATASETS

GALLERY = Path(__file__).resolve().parent.parent / "assets" / "gallery"


def items(dataset: str = "cifar10") -> list[tuple[str, str]]:
    """[(path, caption)] of the shipped examples, caption = the true class."""
    folder = GALLERY / dataset
    if not folder.is_dir():
        return []
    out = []
    for p in sorted(folder.glob("*.png")):
        label = p.stem.rsplit("_", 1)[0]
        out.append((str(p), f"{label} (true label)" if dataset == "cifar10" else f"digit {label}"))
    return out


def build(data: Path, per_class: int = 10, seed: int = 0) -> None:
    for name, spec in DATASETS.items():
        zpath = data / spec["archive"]
        out = GALLERY / name
        out.mkdir(parents=True, exist_ok=True)
        rng = random.Random(seed)
        with zipfile.ZipFile(zpath) as z:
            names = [n for n in z.namelist() if n.startswith("test/") and not n.endswith("/")]
            for c in spec["classes"]:
                members = sorted(n for n in names if n.split("/")[1] == c)
                for k, n in enumerate(rng.sample(members, per_class)):
                    im = Image.open(BytesIO(z.read(n))).convert("RGB" if spec["in_chans"] == 3 else "L")
                    im.save(out / f"{c}_{k}.png", optimize=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True, type=Path)
    build(p.parse_args().data)
