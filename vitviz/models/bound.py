"""How large a model may be, decided before anything is spent on it; and the error every family raises.

A model someone names (a menu entry, a typed timm name, a link's `model=`, an API call, an uploaded
checkpoint, `load_model` from Python) is counted before its weights are downloaded and before any
tensor is allocated: timm's and our own architectures are built on the meta device (no memory), a
checkpoint's JSON gives its config. Above `VITVIZ_MAX_MODEL_PARAMS` (default 200 million: ViT-B/16's
86M fits, ViT-L/16's 304M does not) the load stops with a sentence giving both numbers.

`ModelError` is what a family raises for a model that cannot be had or shown (unknown, unreadable,
too large, its weights not here); the sentence says why. Anything else a load raises is a fault of
the server, not of the model, and is never remembered as the model's.
"""

from __future__ import annotations

import os

import torch

ENV = "VITVIZ_MAX_MODEL_PARAMS"
DEFAULT_MAX_PARAMS = 200_000_000
FROM_ENV = "env"  # load_model's default: the bound read from VITVIZ_MAX_MODEL_PARAMS


class ModelError(ValueError):
    """A model that cannot be had or cannot be shown: the sentence says why."""


class TooLarge(ModelError):
    """A model over the bound, refused before it was downloaded or built."""


def max_params() -> int:
    """VITVIZ_MAX_MODEL_PARAMS when set to a positive number, else the default."""
    try:
        v = float(os.environ.get(ENV, ""))
    except ValueError:
        return DEFAULT_MAX_PARAMS
    return int(v) if v > 0 and v == v and v != float("inf") else DEFAULT_MAX_PARAMS


def resolve(limit: int | float | str | None) -> int | None:
    """The bound a load runs under: FROM_ENV reads the variable, None means none, a number is itself."""
    return max_params() if limit == FROM_ENV else (None if limit is None else int(limit))


def count(module: torch.nn.Module) -> int:
    """Parameters of a module, meta-device ones included (counting allocates nothing)."""
    return sum(p.numel() for p in module.parameters())


def millions(n: float) -> str:
    return f"{n / 1e6:,.1f}M" if n < 1e9 else f"{n / 1e9:,.2f}B"


def megabytes(n: float) -> str:
    return f"{n / 2**20:,.0f} MB" if n < 2**30 else f"{n / 2**30:,.1f} GB"


def check(name: str, params: int, limit: int | None, download_bytes: int | None = None) -> None:
    """TooLarge, with both numbers in one sentence, when `params` is over `limit` (None: no bound)."""
    if limit is None or params <= limit:
        return
    size = f" (a {megabytes(download_bytes)} download)" if (download_bytes or 0) >= 2**20 else ""
    raise TooLarge(
        f"{name} has {millions(params)} parameters{size}, more than the {millions(limit)} a model may have on this "
        f"server ({ENV}); choose a smaller model, such as a ViT-S or ViT-B."
    )


def hub_file_size(repo: str, filenames: tuple[str, ...]) -> int | None:
    """The size in bytes of the first of `filenames` in a Hub repository, as the Hugging Face cache holds it or,
    when online, as the Hub's metadata says (a few seconds at most); None when neither can tell."""
    try:
        from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url, try_to_load_from_cache
    except ImportError:  # pragma: no cover - a requirement of timm and transformers
        return None
    for filename in filenames:
        cached = try_to_load_from_cache(repo, filename)
        if isinstance(cached, str):
            return os.path.getsize(cached)
    if constants.HF_HUB_OFFLINE:
        return None
    for filename in filenames:
        try:
            return get_hf_file_metadata(hf_hub_url(repo, filename), timeout=5).size
        except Exception:  # noqa: BLE001 - no such file, no network: the size is simply not known
            continue
    return None
