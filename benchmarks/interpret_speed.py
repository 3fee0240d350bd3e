"""Speed of one explanation on the CPU: attention maps, rollout, gradient rollout and distances, then each
map of vitviz.explain.methods on its own (LeGrad, occlusion, ...).

    python benchmarks/interpret_speed.py [--repeats 30] [--vit-b-16] [--timm] [--words]

Every map's target: a median under 50 ms per image with the shipped model, under 1.5 s
with ViT-B/16. Occlusion's batched passes run in the precision measured faster for forward passes on
this machine (vitviz.runtime.speed; the line says which, and why).

For the shipped CIFAR-10 model, the four together for one image (target: median
under 50 ms on 2 CPU cores). With --vit-b-16, one 224x224 explanation with
torchvision's ViT-B/16 (random weights: speed does not depend on them; target:
median under 1.5 s on 2 CPU cores). With --timm, an Explore update (the analysis, then every
picture of the page drawn) for timm's DeiT-S/16, and for DINOv2-S/14 with registers (no
classifier: its features' pictures instead of the class ones); random weights, target 1.5 s
each. With --words, the same Explore update for CLIP ViT-B/16 and SigLIP 2 B/16 (transformers, at their
full sizes, random weights written to a temporary folder and loaded through load_model("hf:<folder>"))
with 10 labels; target 1.5 s each; and, apart, what a new list of 10 labels costs once (the text tower).
Prints medians, and the ratio to the target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vitviz  # noqa: E402
from vitviz.data import gallery  # noqa: E402
from vitviz.explain import (
    interpret,  # noqa: E402
    methods,  # noqa: E402
)


def time_it(fn, repeats: int) -> float:
    fn()
    fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def everything(model, x):
    """What the Explore view computes: one forward + backward, then rollout per layer and distances."""
    ex = interpret.attention_and_relevance(model, x)
    patch = vitviz.card_of(model).config.patch_size
    return (
        ex,
        interpret.attention_rollout(ex["attn"], all_layers=True),
        interpret.mean_attention_distance(ex["attn"], patch, prefix=model),
    )


def explore_update(model, pixels):
    """What an Explore update costs the server: the analysis and every picture of the view drawn."""
    from vitviz.pictures import explanation
    from vitviz.pictures import explore as explore_pictures

    ex = explanation.analyse(model, pixels)
    return explore_pictures.render_explore(model, ex)


def timm_figures(img, repeats: int):

    cases = {
        "timm/deit_small_patch16_224.fb_in1k": "DeiT-S/16 (timm) 224x224 Explore update (analysis + every picture)",
        "timm/vit_small_patch14_reg4_dinov2.lvd142m": "DINOv2-S/14 with 4 registers (timm, no classifier) 224x224 "
        "Explore update (its features' pictures instead of the class ones)",
    }
    for key, what in cases.items():
        model = vitviz.load_model(key, pretrained=False)
        pixels = model.pixels(img)
        t = time_it(lambda: explore_update(model, pixels), repeats)
        print(f"{what} median {t:.2f} s; target 1.5 s = {t / 1.5:.2f}x")


B16 = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)  # a ViT-B tower
CLIP_TEXT = dict(hidden_size=512, num_hidden_layers=12, num_attention_heads=8, intermediate_size=2048)
WORDS = {  # the full-size towers: (kind, vision, text); SigLIP 2 B/16's text tower has a 256k-token vocabulary
    "CLIP ViT-B/16": ("clip", B16 | dict(image_size=224, patch_size=16), CLIP_TEXT | dict(vocab_size=49408)),
    "SigLIP 2 B/16": ("siglip", B16 | dict(image_size=224, patch_size=16), B16 | dict(vocab_size=256000)),
}
WORDS["CLIP ViT-B/16"][2]["max_position_embeddings"] = 77  # the text lengths they were trained on
WORDS["SigLIP 2 B/16"][2]["max_position_embeddings"] = 64
LABELS = "cat, dog, bird, car, airplane, ship, horse, truck, frog, deer"


def words_figures(img, repeats: int):
    """CLIP and SigLIP 2 at full size: an Explore update with 10 labels, and a new label list's text pass."""
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from hf_cache import save

    from vitviz.models.words import with_labels

    for name, (kind, vision, text) in WORDS.items():
        with tempfile.TemporaryDirectory() as folder:
            base = vitviz.load_model(f"hf:{save(Path(folder) / kind, kind, vision=vision, text=text)}", max_params=None)
        model = with_labels(base, LABELS)
        pixels = model.pixels(img)
        t = time_it(lambda: explore_update(model, pixels), repeats)
        print(
            f"{name} (transformers) 224x224 Explore update with 10 labels: median {t:.2f} s; target 1.5 s = "
            f"{t / 1.5:.2f}x"
        )
        lists = iter(f"{LABELS}, extra {i}" for i in range(100))
        tt = time_it(lambda: with_labels(base, next(lists)), max(3, repeats // 2))
        print(f"{name} a new list of 11 labels through the text tower, once per list: median {tt:.2f} s")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--vit-b-16", action="store_true")
    p.add_argument("--timm", action="store_true", help="only the timm figures")
    p.add_argument("--words", action="store_true", help="only CLIP's and SigLIP 2's figures")
    a = p.parse_args()
    if a.words:
        words_figures(Image.open(gallery.items("cifar10")[3][0]), max(3, a.repeats // 6))
        return
    if a.timm:
        timm_figures(Image.open(gallery.items("cifar10")[3][0]), max(3, a.repeats // 6))
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    img = Image.open(gallery.items("cifar10")[3][0])
    model = vitviz.load_model()
    x = vitviz.preprocess(img, model)
    attn = interpret.attention_maps(model, x)
    parts = {
        "attention maps": lambda: interpret.attention_maps(model, x),
        "rollout (mean, discard 0.9, all layers)": lambda: interpret.attention_rollout(
            attn, "mean", 0.9, all_layers=True
        ),
        "gradient rollout": lambda: interpret.gradient_rollout(model, x),
        "mean attention distance": lambda: interpret.mean_attention_distance(
            attn, vitviz.card_of(model).config.patch_size, prefix=model
        ),
        "all four, separately": lambda: (
            interpret.attention_rollout(interpret.attention_maps(model, x)),
            interpret.gradient_rollout(model, x),
            interpret.mean_attention_distance(attn, 4, prefix=1),
        ),
        "all four, one pass (attention_and_relevance + rollout + distance)": lambda: everything(model, x),
    }
    for name, fn in parts.items():
        print(f"shipped CIFAR-10 model  {name:42s} median {1000 * time_it(fn, a.repeats):7.1f} ms")
    t = time_it(lambda: everything(model, x), a.repeats)
    print(f"target 50 ms: {1000 * t:.1f} ms median = {t / 0.050:.2f}x of the budget")
    print(f"each map on its own (occlusion's batches: {interpret.inference_precision(model, x).choice.reason}):")
    for name in methods.METHODS:
        tm = time_it(lambda: methods.relevance(model, x, name), max(3, a.repeats // 3))
        print(f"shipped CIFAR-10 model  {name:42s} median {1000 * tm:7.1f} ms = {tm / 0.050:.2f}x of 50 ms")
    if a.vit_b_16:
        vit = vitviz.load_model("vit_b_16", pretrained=False)
        xv = vitviz.preprocess(img, vit)
        tv = time_it(lambda: everything(vit, xv), max(3, a.repeats // 6))
        print(
            f"ViT-B/16 224x224 explanation (attention_and_relevance + rollout + distance) median {tv:.2f} s; "
            f"target 1.5 s = {tv / 1.5:.2f}x of the budget"
        )
        for name in methods.METHODS:
            tm = time_it(lambda: methods.relevance(vit, xv, name), 1 if name == "occlusion" else 3)
            print(f"ViT-B/16  {name:30s} median {tm:6.2f} s = {tm / 1.5:.2f}x of 1.5 s")


if __name__ == "__main__":
    main()
