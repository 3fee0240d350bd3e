"""Checkpoints: safetensors weights plus a JSON file; loading runs no code.

A checkpoint is a pair of files with one stem, ``NAME.safetensors`` and
``NAME.json``. The JSON holds the model config, class names, normalisation,
the data set, the training config and the metrics. A training run also keeps
``NAME.state.safetensors`` (optimizer moments and RNG) so ``--resume`` can go on.
The files of one save are written as one set (vitviz.models.fileset) and carry one write
id, so a run killed at any moment leaves the previous checkpoint or the new one,
and a pair mixed from two saves is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import replace
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from vitviz.models import bound
from vitviz.models.bound import ModelError
from vitviz.models.card import card_from_meta, card_of, describe
from vitviz.models.fileset import recover, write_set
from vitviz.models.loaded import LoadedViT, module_of
from vitviz.models.vit import ViT, ViTConfig

FORMAT = "vitviz-checkpoint"
VERSION = 1
MAX_JSON_BYTES = 1_000_000
MAX_WEIGHTS_BYTES = 400_000_000


class CheckpointError(ModelError):
    """The files are not a valid vitviz checkpoint; the message names what is wrong."""


def paths(path: str | os.PathLike) -> tuple[Path, Path]:
    """(weights, json) for a checkpoint given by its stem, its .safetensors or its .json path."""
    p = Path(path)
    if p.is_dir():
        p = p / "model"
    if p.suffix in (".safetensors", ".json"):
        p = p.with_suffix("")
    return p.with_suffix(".safetensors"), p.with_suffix(".json")


def write_json(path: Path, obj: dict) -> None:
    """Rewrite a checkpoint's JSON in place (its write id kept), atomically."""
    write_set(
        path.with_name(f".{path.stem}.json.commit"), {path: lambda t: t.write_text(json.dumps(obj, indent=2) + "\n")}
    )


def model_meta(model: ViT, **changes) -> dict:
    """The checkpoint JSON of a model: its card (with `changes`, e.g. train, metrics, history)."""
    return {"format": FORMAT, "version": VERSION, **replace(card_of(model), **changes).meta()}


def save(
    path: str | Path,
    model: ViT | LoadedViT,
    train_config: dict | None = None,
    metrics: dict | None = None,
    history: list | None = None,
    state: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write weights and JSON (and the resume state, when given) as one set; returns the weights path.

    All the files carry one write id (the weights and the state in their safetensors metadata), so a set
    mixed from two writes is refused on loading; vitviz.models.fileset makes a kill at any moment leave the old
    set or the new one.
    """
    model = module_of(model)
    wpath, jpath = paths(path)
    stamp = uuid.uuid4().hex
    tag = {"format": FORMAT, "write": stamp, "step": str((metrics or {}).get("step", ""))}
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}
    meta = {
        **model_meta(model, train=train_config or {}, metrics=metrics or {}, history=tuple(history or ())),
        "write": stamp,
    }
    files = {wpath: lambda t: save_file(tensors, str(t), metadata=tag)}
    if state is not None:
        state = {k: v.detach().cpu().contiguous() for k, v in state.items()}
        files[state_path(path)] = lambda t: save_file(state, str(t), metadata=tag)
    files[jpath] = lambda t: t.write_text(json.dumps(meta, indent=2) + "\n")
    write_set(_marker(path), files)
    if state is None:
        state_path(path).unlink(missing_ok=True)  # a resume state from an earlier write no longer matches
    return wpath


def _marker(path) -> Path:
    wpath, _ = paths(path)
    return wpath.with_name(f".{wpath.stem}.commit")


def recover_set(path: str | Path) -> None:
    """Finish or undo an interrupted write of the checkpoint at `path` (see vitviz.models.fileset)."""
    wpath, jpath = paths(path)
    recover(_marker(path), [wpath, jpath, state_path(path)])


def _write_id(wpath: Path) -> str | None:
    try:
        with safe_open(str(wpath), "pt") as f:
            return (f.metadata() or {}).get("write")
    except (SafetensorError, OSError, ValueError, RuntimeError):
        return None  # load_tensors says what is wrong with the file


def check_same_write(meta: dict, wpath: Path, what: str = "weights") -> None:
    """CheckpointError when the JSON and the weights (or resume state) come from different writes."""
    a, b = meta.get("write"), _write_id(wpath)
    if (a or b) and a != b:
        raise CheckpointError(
            f"the {what} and the JSON come from different saves (a write was interrupted, or "
            "files of two checkpoints were mixed); use a matching pair"
        )


def read_meta(path: str | Path) -> dict:
    _, jpath = paths(path)
    if not jpath.exists():
        raise CheckpointError(f"missing {jpath.name}: a checkpoint needs its JSON file beside the weights")
    if jpath.stat().st_size > MAX_JSON_BYTES:
        raise CheckpointError(f"{jpath.name} is too large to be a checkpoint description")
    try:
        meta = json.loads(jpath.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise CheckpointError(f"{jpath.name} is not text: a checkpoint's description is a JSON file") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{jpath.name} is not valid JSON (line {e.lineno}: {e.msg.lower()})") from None
    return validate_meta(meta)


def validate_meta(meta: object) -> dict:
    if not isinstance(meta, dict):
        raise CheckpointError("the checkpoint JSON must be an object")
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"the JSON is not a vitviz checkpoint (its 'format' is {meta.get('format')!r})")
    if not isinstance(meta.get("model"), dict):
        raise CheckpointError("the checkpoint JSON has no 'model' config")
    try:
        cfg = ViTConfig.from_dict(meta["model"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"the model config is invalid: {e}") from None
    if (
        max(cfg.depth, cfg.num_heads) > 64
        or cfg.embed_dim > 4096
        or cfg.image_size > 1024
        or cfg.num_classes > 100_000
        or cfg.mlp_ratio > 16
    ):
        raise CheckpointError("the model config is implausibly large")
    if cfg.num_classes < 1:
        raise CheckpointError("the model config has no classes: a vitviz checkpoint is a classifier")
    classes = meta.get("classes")
    if not (isinstance(classes, list) and len(classes) == cfg.num_classes and all(isinstance(c, str) for c in classes)):
        raise CheckpointError(f"'classes' must list {cfg.num_classes} names")
    norm = meta.get("normalization", {})
    for key in ("mean", "std"):
        v = norm.get(key) if isinstance(norm, dict) else None
        if not (isinstance(v, list) and len(v) == cfg.in_chans and all(isinstance(t, (int, float)) for t in v)):
            raise CheckpointError(f"normalization.{key} must list {cfg.in_chans} numbers")
    if any(s <= 0 for s in norm["std"]):
        raise CheckpointError("normalization.std must be positive")
    return meta


def skeleton(meta: dict) -> ViT:
    """The model a validated JSON describes, on the meta device: its names, shapes and size, no memory."""
    with torch.device("meta"):
        return ViT(ViTConfig.from_dict(meta["model"]))


def check_size(meta: dict, max_params: int | None, what: str = "This checkpoint") -> None:
    """bound.TooLarge when the model the JSON describes has more than `max_params` parameters (counted on the
    meta device, before any weights are read)."""
    bound.check(what, bound.count(skeleton(meta)), max_params)


def build(
    meta: dict,
    tensors: dict[str, torch.Tensor] | None = None,
    device: torch.device | str = "cpu",
    kind: str = "shipped",
) -> ViT:
    """A model from validated metadata and (optionally) its weights, in eval mode, with its card. With weights,
    their names and shapes are checked against the architecture on the meta device, and the model takes the
    tensors as they are (`assign=True`): a file that does not fit costs no memory."""
    if tensors is None:
        model = ViT(ViTConfig.from_dict(meta["model"]))
    else:
        model = skeleton(meta)
        expected = model.state_dict()
        missing = sorted(set(expected) - set(tensors))
        extra = sorted(set(tensors) - set(expected))
        if missing or extra:
            raise CheckpointError(
                "the weights do not match the config"
                + (f"; missing: {', '.join(missing[:4])}" if missing else "")
                + (f"; unexpected: {', '.join(extra[:4])}" if extra else "")
            )
        for k, v in tensors.items():
            if v.shape != expected[k].shape:
                raise CheckpointError(
                    f"weight {k} has shape {tuple(v.shape)}, the config needs {tuple(expected[k].shape)}"
                )
            if not v.is_floating_point():
                raise CheckpointError(f"weight {k} is not a floating-point tensor")
            if not torch.isfinite(v).all():
                raise CheckpointError(f"weight {k} contains NaN or infinite values")
        model.load_state_dict({k: v.float().contiguous() for k, v in tensors.items()}, assign=True)
    return describe(model, card_from_meta(meta, kind)).to(device).eval()


def load_tensors(wpath: Path) -> dict[str, torch.Tensor]:
    if not wpath.exists():
        raise CheckpointError(f"missing {wpath.name}: a checkpoint needs its .safetensors weights")
    if wpath.stat().st_size > MAX_WEIGHTS_BYTES:
        raise CheckpointError(f"{wpath.name} is too large")
    try:
        return load_file(str(wpath))
    except (SafetensorError, OSError, ValueError, RuntimeError):
        raise CheckpointError(f"{wpath.name} is not a valid safetensors file") from None


def load(
    path: str | Path, device: torch.device | str = "cpu", kind: str = "shipped", max_params: int | None = None
) -> ViT:
    """Load a checkpoint (its stem, .safetensors or .json path) into an eval-mode ViT; bound.TooLarge, before the
    weights are read, when its JSON describes more than `max_params` parameters."""
    recover_set(path)
    wpath, _ = paths(path)
    meta = read_meta(path)
    check_size(meta, max_params)
    tensors = load_tensors(wpath)
    check_same_write(meta, wpath)
    return build(meta, tensors, device, kind)


def load_pair(
    weights_file: str | Path, json_file: str | Path, device: torch.device | str = "cpu", max_params: int | None = None
) -> ViT:
    """Load from two separately named files (uploads keep their own names); the size bound as in `load`."""
    try:
        text = Path(json_file).read_bytes()
        if len(text) > MAX_JSON_BYTES:
            raise CheckpointError("the JSON file is too large to be a checkpoint description")
        meta = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CheckpointError("the JSON file is not valid JSON") from None
    meta = validate_meta(meta)
    check_size(meta, max_params)
    tensors = load_tensors(Path(weights_file))
    check_same_write(meta, Path(weights_file))
    return build(meta, tensors, device, kind="uploaded")


def state_path(path: str | Path) -> Path:
    """Where a checkpoint's resume state (optimizer moments and RNG) lives, beside its weights."""
    return paths(path)[0].with_suffix(".state.safetensors")


def load_state(path: str | Path) -> dict[str, torch.Tensor] | None:
    """The resume state saved with the checkpoint at `path` (None when there is none); CheckpointError
    when it belongs to another write than the checkpoint's JSON."""
    recover_set(path)
    spath = state_path(path)
    if not spath.exists():
        return None
    check_same_write(read_meta(path), spath, what="resume state")
    return load_file(str(spath))


def keep_epoch_copy(out: str | Path | None, epoch: int, keep: int) -> None:
    """Copy the checkpoint just written to OUT-epochNNN and delete the copies more than `keep` epochs old."""
    wpath, jpath = paths(out)
    stem = wpath.with_suffix("")
    dst = stem.with_name(f"{stem.name}-epoch{epoch:03d}")
    write_set(
        _marker(dst),
        {
            dst.with_suffix(".safetensors"): lambda t: shutil.copyfile(wpath, t),
            dst.with_suffix(".json"): lambda t: shutil.copyfile(jpath, t),
        },
    )
    for old in stem.parent.glob(f"{stem.name}-epoch*.json"):
        n = old.stem.rsplit("-epoch", 1)[1]
        if n.isdigit() and int(n) <= epoch - keep:
            for f in paths(old):
                f.unlink(missing_ok=True)
