"""`vitviz explain`: the maps of images or folders of images, as files, for scripts.

    vitviz explain photos/ cat.jpg --model timm/deit_small_patch16_224.fb_in1k --method LeGrad occlusion --out maps

For each image, in --out/<its name>/: each map as a PNG over the image with its colour bar and title, the map's
raw values as .npy (one per patch, in the patch grid's shape), and explained.json: the prediction (top 5), the
class each map explains, the settings and the files. The images go through the model in batches (--batch); any
model vitviz loads (a CLIP or SigLIP model scores --labels, written into --template).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from vitviz.data.images import IMAGE_TYPES
from vitviz.explain import interpret
from vitviz.explain.methods import METHODS
from vitviz.models.loaded import LoadedViT

ATTENTION = ("attention rollout", "last-layer attention")  # the maps read from a token, not for a class


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vitviz explain", description="Write the maps of images as PNG, .npy and JSON.")
    p.add_argument("images", nargs="+", help="image files, or folders (every image under them)")
    p.add_argument("--model", default="cifar10", help="any name vitviz.load_model takes (default cifar10)")
    p.add_argument(
        "--method",
        nargs="+",
        default=None,
        help=f"maps: {', '.join(METHODS)}, or all (default: gradient rollout; attention rollout for a model "
        "without a classifier)",
    )
    p.add_argument("--token", type=int, default=-1, help="the token the attention maps start from (-1: CLS)")
    p.add_argument("--label", default=None, help="the class or label the class maps explain (default: predicted)")
    p.add_argument("--labels", default=None, help="CLIP or SigLIP: its classes in words, comma-separated")
    p.add_argument("--template", default=None, help='CLIP or SigLIP: the prompt, one {} (default "a photo of a {}.")')
    p.add_argument("--batch", type=int, default=16, help="images a batch (default 16)")
    p.add_argument("--out", required=True, help="the folder to write into")
    return p


def image_files(paths: list[str]) -> list[Path]:
    """The files named, and every image under the folders named, in order; ValueError for a name that is neither."""
    found = []
    for name in paths:
        p = Path(name)
        if p.is_dir():
            found += sorted(f for f in p.rglob("*") if f.suffix.lower() in IMAGE_TYPES)
        elif p.is_file():
            found.append(p)
        else:
            raise ValueError(f"there is no file or folder {name}")
    return found


def chosen_methods(asked: list[str] | None, model: LoadedViT) -> list[str]:
    """The maps asked for (all: every map this model can draw), checked; ValueError with a sentence otherwise."""
    classes = bool(model.card.classes)
    if not asked:
        return ["gradient rollout" if classes else "attention rollout"]
    if asked == ["all"]:
        return [m for m in METHODS if classes or not METHODS[m].class_specific]
    for m in asked:
        if m not in METHODS:
            raise ValueError(f"unknown method {m!r}; choose from {', '.join(METHODS)} or all")
        if METHODS[m].class_specific and not classes:
            raise ValueError(f"{model.card.title} has no classifier, so no {m}; choose {' or '.join(ATTENTION)}")
    return list(asked)


def maps_of(model: LoadedViT, x: torch.Tensor, methods: list[str], target: torch.Tensor | None, token: int) -> dict:
    """{method: (B, P)} for a batch: the class maps for `target`, the attention maps from `token`."""
    from vitviz.explain.methods import relevance

    out = {}
    row = model.layout.token(token).row
    for m in methods:
        if m in ATTENTION and token != -1:  # from another token than the one the prediction reads
            with torch.no_grad():
                attn = torch.stack(interpret.intermediates(model, x)["attn"], 1).float()
            rows = interpret.attention_rollout(attn) if m == ATTENTION[0] else attn[:, -1].mean(1)
            out[m] = rows[:, row, model.layout.num_prefix :]
        else:
            out[m] = relevance(model, x, m, target)
    return {m: v.detach().float().cpu() for m, v in out.items()}


def picture(model: LoadedViT, pixels: np.ndarray, values: torch.Tensor, method: str, cls: str | None) -> np.ndarray:
    """The map over the image, titled, with its colour bar (a signed map on a scale centred on 0)."""
    from vitviz.pictures import draw
    from vitviz.pictures.explore import signed_scale
    from vitviz.pictures.input_view import main_size
    from vitviz.pictures.panels import Scale, panel

    m = METHODS[method]
    g = model.layout.grid
    grid = values.view(*g)
    what = m.what.format(cls=cls, reader=model.layout.reader)
    scale = signed_scale(grid, what, m.sides) if m.sides else Scale(what, float(grid.min()), float(grid.max()))
    size = main_size(model.card.config)
    pic = draw.overlay(pixels, grid, size, scale.cmap, 0.6, "bilinear", scale.lo, scale.hi)
    title = method[0].upper() + method[1:] + (f" for '{cls}'" if m.class_specific else "")
    return panel(pic, title, scale)


def explain_batch(
    model: LoadedViT, files: list[Path], a: argparse.Namespace, methods: list[str], out: Path, names: dict
) -> list:
    """Write every file's maps; the JSON record of each (or of why it could not be used)."""
    from PIL import Image

    from vitviz.data.images import open_image

    pixels, used, records = [], [], []
    for f in files:
        try:
            pixels.append(model.pixels(open_image(str(f))))
            used.append(f)
        except (OSError, ValueError) as e:
            records.append({"image": str(f), "error": f"not used: {e}"})
    if not used:
        return records
    x = model.tensor(pixels)
    classes = model.card.classes
    target = None
    if classes:
        with torch.no_grad():
            probs = model.probabilities(model(x).float())
        target = probs.argmax(1)
        if a.label is not None:
            if a.label not in classes:
                raise ValueError(f"{model.card.title} has no class {a.label!r}")
            target = torch.full_like(target, classes.index(a.label))
    maps = maps_of(model, x, methods, target, a.token)
    for i, (f, px) in enumerate(zip(used, pixels)):
        folder = out / names[f]
        folder.mkdir(parents=True, exist_ok=True)
        cls = classes[int(target[i])] if classes else None
        record = {"image": str(f), "model": model.card.title, "settings": _settings(a, methods, model), "maps": {}}
        if classes:
            top = probs[i].topk(min(5, len(classes)))
            record["top5"] = {classes[j]: float(p) for p, j in zip(top.values.tolist(), top.indices.tolist())}
            record["explains"] = cls
        for m in methods:
            stem = m.replace(" ", "-")
            values = maps[m][i].view(*model.layout.grid).numpy()
            np.save(folder / f"{stem}.npy", values)
            Image.fromarray(picture(model, px, maps[m][i], m, cls)).save(folder / f"{stem}.png")
            record["maps"][m] = {"png": f"{stem}.png", "npy": f"{stem}.npy"}
        (folder / "explained.json").write_text(json.dumps(record, indent=1, ensure_ascii=False))
        records.append({**record, "folder": str(folder)})
    return records


def _settings(a: argparse.Namespace, methods: list[str], model: LoadedViT) -> dict:
    return {
        "model": a.model,
        "methods": methods,
        "token": model.layout.token(a.token).name,
        "label": a.label,
        "labels": list(model.card.classes) if model.zero_shot else None,
        "template": a.template,
    }


def folder_names(files: list[Path]) -> dict[Path, str]:
    """Each image's own folder: its name without the suffix, numbered when images share a name."""
    names, seen = {}, {}
    for f in files:
        seen[f.stem] = seen.get(f.stem, 0) + 1
        names[f] = f.stem if seen[f.stem] == 1 else f"{f.stem}-{seen[f.stem]}"
    return names


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    from tqdm import tqdm

    from vitviz.models.hub import load_model
    from vitviz.models.words import with_labels

    try:
        files = image_files(a.images)
        model = load_model(a.model)
        if a.labels or a.template:
            model = with_labels(model, a.labels, a.template)
        methods = chosen_methods(a.method, model)
        model.layout.token(a.token)  # a token this model has
        if a.batch < 1:
            raise ValueError("--batch must be at least 1")
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    out, names = Path(a.out), folder_names(files)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    with tqdm(total=len(files), unit="image", file=sys.stderr) as bar:
        for i in range(0, len(files), a.batch):
            try:
                records += explain_batch(model, files[i : i + a.batch], a, methods, out, names)
            except ValueError as e:
                print(f"error: {e}", file=sys.stderr)
                return 1
            bar.update(len(files[i : i + a.batch]))
    (out / "index.json").write_text(json.dumps(records, indent=1, ensure_ascii=False))
    failed = [r for r in records if "error" in r]
    for r in failed:
        print(f"{r['image']}: {r['error']}", file=sys.stderr)
    print(f"{len(records) - len(failed)} image(s) explained into {out}")
    return 1 if failed and len(failed) == len(records) else 0


if __name__ == "__main__":
    raise SystemExit(main())
