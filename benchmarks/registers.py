"""What registers change: the high-norm patch tokens of DINOv2-S/14 against DINOv2-S/14 with 4 registers.

    python benchmarks/registers.py [--images 30] [--folder PHOTOS] [--random]

Both models see the same images (the shipped CIFAR-10 examples, or every image in --folder), at
224x224. For each, the share of images with at least one outlying patch token (a norm of at
least 2.5x its block's median: vitviz.explain.interpret.norm_outliers, CLS and the registers left out)
in the last four blocks, the outliers per image, and the largest ratio. Darcet et al. (2024)
found such tokens in DINOv2 and saw them move into the registers.

The figures need the real weights (about 88 MB each, downloaded once into the Hugging Face
cache); --random runs the same code on random weights, as the tests do, and means nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vitviz  # noqa: E402
from vitviz.data import gallery  # noqa: E402
from vitviz.explain import interpret  # noqa: E402

MODELS = ("vit_small_patch14_dinov2.lvd142m", "vit_small_patch14_reg4_dinov2.lvd142m")


def outliers(model, images: list[Image.Image], last: int = 4) -> dict:
    K = interpret.num_prefix(model)
    found, biggest = [], 0.0
    for im in images:
        norms = interpret.token_norms(model, vitviz.preprocess(im, model))[0]  # (L, N)
        out = [o for o in interpret.norm_outliers(norms, prefix=K) if o[0] >= norms.shape[0] - last]
        found.append(len(out))
        biggest = max([biggest] + [t for *_, t in out])
    n = len(images)
    return {
        "images": n,
        "with": sum(f > 0 for f in found) / max(1, n),
        "per_image": sum(found) / max(1, n),
        "largest": biggest,
    }


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--images", type=int, default=30)
    p.add_argument("--folder", help="a folder of photos (default: the shipped examples)")
    p.add_argument("--random", action="store_true", help="random weights: checks the code, not the finding")
    a = p.parse_args(argv)
    paths = sorted(Path(a.folder).glob("*")) if a.folder else [p for p, _ in gallery.items("cifar10")]
    images = [Image.open(q).convert("RGB") for q in paths[: a.images]]
    torch.set_grad_enabled(False)
    print("model | images | with an outlier (last 4 blocks) | outliers per image | largest ratio")
    for name in MODELS:
        m = vitviz.load_model(f"timm/{name}", pretrained=not a.random)
        r = outliers(m, images)
        print(f"{name} | {r['images']} | {100 * r['with']:.0f}% | {r['per_image']:.2f} | {r['largest']:.1f}x")


if __name__ == "__main__":
    main()
