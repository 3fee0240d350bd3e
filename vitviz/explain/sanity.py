"""Sanity checks for maps (Adebayo et al., 2018, "Sanity Checks for Saliency Maps").

Cascading randomisation: the classifier head is re-initialised first, then the blocks
from the top down, then the patch embedding, CLS token and positions. After each
stage, each method's map is compared with the trained model's by Spearman's rank
correlation. A map that stays the same while the weights it claims to explain are
random explains nothing about them: attention rollout never looks at the head, so
it does not move at the first stage.

Re-initialising uses each layer's own `reset_parameters` (PyTorch's default init:
non-zero, unlike our ViT's zero-initialised head), under a fixed seed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from vitviz.models.loaded import LoadedViT

import copy

import torch

from vitviz.models.card import describe
from vitviz.models.hub import loaded
from vitviz.models.loaded import eval_mode

KINDS = {"head": "head randomised", "all": "every weight randomised"}  # the app's randomised models


def _reinit(module: torch.nn.Module, seed: int):
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for m in module.modules():
            reset = getattr(m, "reset_parameters", None) or getattr(m, "_reset_parameters", None)
            if callable(reset) and any(True for _ in m.parameters(recurse=False)):
                reset()


def cascade(model: LoadedViT, seed: int = 0) -> Iterator[tuple[str, LoadedViT]]:
    """Yield (stage label, model) from the trained model through every randomisation stage. The model
    yielded (a record, vitviz.models.loaded) is one copy, randomised further at each stage; `model` itself is never
    changed."""
    a = loaded(copy.deepcopy(model.module).eval())
    yield "trained", a
    if a.head is not None:  # a model without a classifier has no head stage to randomise
        _reinit(a.head, seed)
        yield "head", a
    L = len(a.blocks)
    for k in range(L - 1, -1, -1):
        _reinit(a.blocks[k], seed + 1 + k)
        yield f"+ block {k + 1}" if k < L - 1 else f"head + block {L}", a
    _reinit(a.adapter.patch_embed.proj, seed + L + 1)
    _reinit(a.norm, seed + L + 3)  # the final norm too: nothing trained is left
    g = torch.Generator().manual_seed(seed + L + 2)
    with torch.no_grad():  # (never around a yield: the caller would run without gradients)
        for p in a.embeddings():
            p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    yield "+ embeddings (everything)", a


def randomised(model: LoadedViT, kind: str, seed: int = 0) -> LoadedViT:
    """A copy of `model` with its head ("head") or every weight ("all") randomised, its card saying so."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}")
    card = model.card
    stop = "head" if kind == "head" else "+ embeddings (everything)"
    for label, m in cascade(model, seed):
        if label == stop:
            break
    return loaded(describe(m.module, card, name=f"{card.title}, {KINDS[kind]}", metrics={}, history=()))


def average_ranks(v: torch.Tensor) -> torch.Tensor:
    """(B, P) ranks 1..P of each row's values, ties given their average rank."""
    v = v.float()
    below = (v[:, None, :] < v[:, :, None]).sum(-1).float()  # how many values lie below each
    equal = (v[:, None, :] == v[:, :, None]).sum(-1).float()  # itself included
    return below + (equal + 1) / 2


def spearman(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Spearman's rank correlation of each row of (B, P) maps a and b; 0 where either row is constant (a
    flat map keeps no order to compare)."""
    ra, rb = average_ranks(a), average_ranks(b)
    ra, rb = ra - ra.mean(1, keepdim=True), rb - rb.mean(1, keepdim=True)
    den = ra.norm(dim=1) * rb.norm(dim=1)
    return torch.where(den > 0, (ra * rb).sum(1) / den.clamp_min(1e-30), torch.zeros_like(den))


def checks(
    model: LoadedViT, x: torch.Tensor, methods: list[str], seed: int = 0, target: torch.Tensor | int | None = None
) -> dict[str, dict[str, torch.Tensor]]:
    """{stage: {method: (B,) Spearman correlation with the trained model's map}} over the cascade. Every map
    explains the trained model's prediction (or `target`) at every stage, as Adebayo et al. do."""
    from vitviz.explain.methods import relevance

    with eval_mode(model), torch.no_grad():
        t = model(x).argmax(-1) if target is None else target
    first, out = {}, {}
    for stage, m in cascade(model, seed):
        maps = {name: relevance(m, x, name, t) for name in methods}
        if stage == "trained":
            first = maps
            continue
        out[stage] = {name: spearman(first[name], maps[name]) for name in methods}
    return out
