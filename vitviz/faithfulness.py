"""`vitviz faithfulness`: how faithful each map is, on any model and any folder of images or data set.

    vitviz faithfulness --model cifar10 --dataset cifar10 --images 1000 --out runs/faith
    torchrun --nproc_per_node 2 -m vitviz faithfulness --model cifar10 --dataset cifar10 --images 1000 --out runs/faith

Every map of vitviz.explain.methods and a random order, scored by vitviz.explain.faithfulness (deletion and
insertion as RISE, positive and negative perturbation as Chefer et al.), with a 95% bootstrap interval of each
mean; a Markdown table (table.md) and a JSON file (results.json) in --out.

The images are cut into batches of --batch in the run's order. Under torchrun (torch.distributed: gloo on CPU,
NCCL on GPUs) rank r takes batches r, r + N, ...; each batch's scores are written to --out as soon as they are
made, and gathered on rank 0, which writes the table: a batch is computed the same way in one process or many,
so the table is the same to its last digit. A run that is stopped continues where it was, with the same
command: the batches in --out are read, not made again (a --out made with other settings is refused).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

from vitviz.data.images import IMAGE_TYPES
from vitviz.explain import faithfulness as faith
from vitviz.explain.methods import METHODS, RANDOM
from vitviz.models.loaded import LoadedViT
from vitviz.runtime.device import Precision


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vitviz faithfulness",
        description="Deletion, insertion and positive/negative perturbation scores of every map, over many images.",
    )
    p.add_argument("--model", default="cifar10", help="any name vitviz.load_model takes (default cifar10)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--folder", help="a folder of images (every image under it, in name order)")
    src.add_argument("--dataset", choices=["cifar10", "mnist"], help="a data set's test split (default: the model's)")
    p.add_argument("--data", default=os.environ.get("VITVIZ_DATA"), help="the data sets' zips (default $VITVIZ_DATA)")
    p.add_argument("--images", type=int, default=1000, help="how many images (default 1000; 0: all)")
    p.add_argument("--maps", nargs="+", default=[*METHODS, RANDOM], help="the maps to score (default: all)")
    p.add_argument("--steps", type=int, default=16, help="deletion and insertion steps (default 16)")
    p.add_argument("--batch", type=int, default=32, help="images a batch (default 32)")
    p.add_argument("--seed", type=int, default=0, help="the data set's sample, the random order, the bootstrap")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16"],
        default="auto",
        help="the forward passes' precision (auto: bf16 where it is measured faster here, chosen once per run)",
    )
    p.add_argument("--out", required=True, help="the folder for the batches, table.md and results.json")
    return p


class Images:
    """The run's images, in order, read a batch at a time: a folder's files, or a sample of a test split."""

    def __init__(self, a: argparse.Namespace, model: LoadedViT):
        self.model = model
        if a.folder:
            root = Path(a.folder)
            if not root.is_dir():
                raise ValueError(f"there is no folder {a.folder}")
            self.files = sorted(str(f.relative_to(root)) for f in root.rglob("*") if f.suffix.lower() in IMAGE_TYPES)
            self.root, self.split = root, None
            if not self.files:
                raise ValueError(f"{a.folder} holds no image ({', '.join(IMAGE_TYPES)})")
            names = self.files
        else:
            from vitviz.data.datasets import load_dataset

            name = a.dataset or model.card.dataset or "cifar10"
            self.split = load_dataset(name, a.data, val_size=0).test
            order = torch.randperm(len(self.split.y), generator=torch.Generator().manual_seed(a.seed)).tolist()
            names = [f"{name}/test/{i}" for i in order]
            self.order = order
        self.names = names[: a.images] if a.images > 0 else names

    def __len__(self) -> int:
        return len(self.names)

    def batch(self, ids: list[int]) -> torch.Tensor:
        from PIL import Image

        from vitviz.data.images import open_image

        pictures = []
        for i in ids:
            if self.split is None:
                try:
                    im = open_image(str(self.root / self.names[i]))
                except (OSError, ValueError) as e:
                    raise ValueError(f"{self.names[i]} could not be read ({e}): move it out of the folder") from None
            else:
                arr = self.split.x[self.order[i]].permute(1, 2, 0).numpy()
                im = Image.fromarray(arr[..., 0] if arr.shape[-1] == 1 else arr)
            pictures.append(self.model.pixels(im))
        return self.model.tensor(pictures)


def settings_of(a: argparse.Namespace, images: Images) -> dict:
    return {
        "model": a.model,
        "images": images.names,
        "maps": list(a.maps),
        "steps": a.steps,
        "batch": a.batch,
        "seed": a.seed,
        "precision": a.precision,
    }


def check_out(out: Path, settings: dict) -> None:
    """--out made now, or made before by a run with these settings; else ValueError saying so."""
    out.mkdir(parents=True, exist_ok=True)
    written = out / "settings.json"
    if written.exists():
        before = json.loads(written.read_text())
        if before != settings:
            differ = ", ".join(k for k in settings if before.get(k) != settings[k])
            raise ValueError(f"{out} holds a run with other settings ({differ}): choose another --out, or delete it")
    else:
        tmp = written.with_suffix(".tmp")
        tmp.write_text(json.dumps(settings))
        tmp.replace(written)


def precision_of(a: argparse.Namespace, model: LoadedViT, images: Images, world: int) -> Precision:
    """The run's one precision: the one its --out records (a resumed run), else --precision's, measured on
    rank 0 for auto and told to every rank (the numbers depend on it, and on nothing else of the process)."""
    from vitviz.explain.interpret import inference_precision
    from vitviz.runtime import speed

    device = torch.device(model.device)
    kept = Path(a.out) / "precision.json"
    choice = None
    if kept.exists():
        choice = speed.Choice(**json.loads(kept.read_text()))
    elif a.precision == "fp32":
        choice = speed.fp32("fp32: asked for")
    elif a.precision == "bf16":
        choice = speed.Choice(True, "fp32", 1.0, "bf16: asked for")
    elif int(os.environ.get("RANK", "0")) == 0:
        choice = inference_precision(model, images.batch([0])).choice
    if world > 1:
        import torch.distributed as dist

        told = [choice]
        dist.broadcast_object_list(told, src=0)
        choice = told[0]
    if int(os.environ.get("RANK", "0")) == 0 and not kept.exists():
        kept.write_text(json.dumps({k: getattr(choice, k) for k in ("bf16", "attention", "speedup", "reason")}))
    return Precision(device, choice=choice)


def run_batches(
    a: argparse.Namespace, model: LoadedViT, images: Images, rank: int, world: int, precision: Precision
) -> dict:
    """{batch number: scores} of this rank's batches: read from --out where a run made them, else made now."""
    n = len(images)
    mine = list(range(rank, (n + a.batch - 1) // a.batch, world))
    done = {}
    bar = _bar(sum(min(n, (b + 1) * a.batch) - b * a.batch for b in mine), rank == 0)
    for b in mine:
        path = Path(a.out) / "batches" / f"{b:06d}.pt"
        ids = list(range(b * a.batch, min(n, (b + 1) * a.batch)))
        if path.exists():
            done[b] = torch.load(path, weights_only=True)
        else:
            scores = faith.score(model, images.batch(ids), a.maps, ids, a.steps, a.seed, precision=precision)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            torch.save(scores, tmp)
            tmp.replace(path)  # whole or absent: a run stopped mid-write leaves no half batch
            done[b] = scores
        bar.update(len(ids))
    bar.close()
    return done


def _bar(total: int, show: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="image", disable=not show, file=sys.stderr)


def results(a: argparse.Namespace, model: LoadedViT, batches: dict) -> dict:
    """Per map and score: the mean, its 95% bootstrap interval, and the images; with the run's description."""
    ordered = [batches[b] for b in sorted(batches)]
    predicted = torch.cat([s["predicted"] for s in ordered])
    table = {}
    for name in a.maps:
        table[name] = {}
        for score in faith.SCORES:
            values = torch.cat([s[name][score] for s in ordered]).double()
            lo, hi = faith.bootstrap(values, a.bootstrap, a.seed)
            table[name][score] = {"mean": float(values.mean()), "ci95": [lo, hi]}
    return {
        "model": model.card.title,
        "images": len(predicted),
        "maps": table,
        "settings": {"steps": a.steps, "seed": a.seed, "bootstrap": a.bootstrap, "batch": a.batch},
        "protocol": faith.__doc__.split("\n\n", 1)[1].strip(),
    }


def markdown(r: dict) -> str:
    """The table: a row per map, best deletion first; each score's mean and 95% interval."""
    fmt = {"deletion": "{:.3f}", "insertion": "{:.3f}", "positive": "{:.2f}", "negative": "{:.2f}"}
    head = {
        "deletion": "deletion AUC (lower is better)",
        "insertion": "insertion AUC (higher is better)",
        "positive": "positive perturbation AUC, % (lower is better)",
        "negative": "negative perturbation AUC, % (higher is better)",
    }
    lines = [
        f"{r['images']} images, {r['model']}; 95% bootstrap intervals in brackets; forward passes in {r['precision']}.",
        "",
        "| map | " + " | ".join(head[s] for s in faith.SCORES) + " |",
        "|---|" + "---|" * len(faith.SCORES),
    ]
    for name, row in sorted(r["maps"].items(), key=lambda kv: kv[1]["deletion"]["mean"]):
        cells = []
        for s in faith.SCORES:
            f = fmt[s]
            lo, hi = row[s]["ci95"]
            cells.append(f"{f.format(row[s]['mean'])} [{f.format(lo)}, {f.format(hi)}]")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _distributed() -> tuple[int, int, str]:
    """(rank, world size, device) under torchrun (its process group started: NCCL on GPUs, gloo on CPU); (0, 1,
    the device) alone."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = f"cuda:{local}" if cuda else "cpu"
    if world == 1:
        return 0, 1, device
    import torch.distributed as dist

    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    return dist.get_rank(), world, device


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    unknown = [m for m in a.maps if m not in METHODS and m != RANDOM]
    if unknown or a.images < 0 or a.batch < 1 or a.steps < 1:
        why = f"unknown map {unknown[0]!r}; choose from {', '.join([*METHODS, RANDOM])}" if unknown else ""
        print(f"error: {why or '--images must be 0 or more, --batch and --steps at least 1'}", file=sys.stderr)
        return 2
    rank, world, device = _distributed()
    try:
        return _run(a, rank, world, device)
    finally:
        if world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()


def _run(a: argparse.Namespace, rank: int, world: int, device: str) -> int:
    from vitviz.models.hub import load_model

    try:
        model = load_model(a.model, device=device)
        if not model.card.classes:
            raise ValueError(f"{model.card.title} has no classifier: the scores follow a class's probability")
        images = Images(a, model)
        if rank == 0:
            check_out(Path(a.out), settings_of(a, images))
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if world > 1:
        import torch.distributed as dist

        dist.barrier()  # --out checked before any rank writes to it
        if not (Path(a.out) / "settings.json").exists():
            return 1
    precision = precision_of(a, model, images, world)
    try:
        batches = run_batches(a, model, images, rank, world, precision)
    except ValueError as e:  # an image that cannot be read (torchrun then stops the other ranks)
        print(f"error: {e}", file=sys.stderr)
        return 1
    if world > 1:
        import torch.distributed as dist

        gathered = [None] * world
        dist.all_gather_object(gathered, batches)  # every rank's batches (NCCL too), tabulated on rank 0
        if rank != 0:
            return 0
        batches = {b: s for part in gathered for b, s in part.items()}
    r = {**results(a, model, batches), "precision": precision.choice.reason}
    out = Path(a.out)
    (out / "results.json").write_text(json.dumps(r, indent=1))
    table = markdown(r)
    (out / "table.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
