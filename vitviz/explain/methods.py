"""Every map vitviz can draw over the patches, by name, and the test of a map: the deletion curve.

A method turns (model, x, target) into one value per patch, (B, P); higher means more
relevant. `relevance` runs one by name; the Explore, Compare and "Take patches away"
views, the faithfulness and sanity benchmarks and the tests all go through it, so a
method added here is selectable everywhere a map is shown.

The deletion curve (RISE, Petsiuk et al., 2018) hides patches most relevant first with
the data set's mean colour (0 in the normalised input) and follows the probability of
the explained class: a faithful map makes it fall fast, so a lower area under the curve
is better. Insertion reveals patches on an all-mean image in the same order (higher is
better).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vitviz.explain import interpret
from vitviz.models.loaded import LoadedViT, eval_mode
from vitviz.models.vit import ViTConfig, cost
from vitviz.runtime.device import Precision


@dataclass(frozen=True)
class Method:
    name: str
    what: str  # what a value is, for the colour bar ({cls}: the explained class)
    about: str  # one sentence for the line under the picture
    class_specific: bool  # whether it explains a class (else it is the same for every class)
    sides: str = ""  # a signed map (values below 0 mean something): what each side of 0 says, "" otherwise
    per_patch: bool = False  # its cost: one forward pass per patch (and one of the whole image), else one pass

    def passes(self, num_patches: int) -> int:
        """The forward passes one map of a model with `num_patches` patches takes."""
        return 1 + num_patches if self.per_patch else 1


METHODS = {
    m.name: m
    for m in (
        Method(
            "gradient rollout",
            "relevance to '{cls}'",
            "Attention weighted by the class score's gradient, positive part, rolled through the layers "
            "(Chefer et al., 2021).",
            True,
        ),
        Method(
            "LeGrad",
            "sensitivity of '{cls}', scaled 0..1",
            "How much the class score, read after each layer, rises with each patch's attention, summed over "
            "the layers (Bousselham et al., 2024).",
            True,
        ),
        Method(
            "occlusion",
            "fall in the probability of '{cls}'",
            "How much the class probability falls when that one patch is replaced by the data set's mean "
            "colour: the plainest causal test.",
            True,
            "red: hiding the patch lowers it, blue: hiding it raises it",
            per_patch=True,
        ),
        Method(
            "attention rollout",
            "rolled-out attention from {reader}",
            "Attention from {reader} multiplied through every layer (Abnar & Zuidema, 2020); the same for every class.",
            False,
        ),
        Method(
            "last-layer attention",
            "attention weight from {reader}",
            "The last attention {reader} gives (the last layer's, or a pooling head's), averaged over its heads; "
            "the same for every class.",
            False,
        ),
    )
}
CLASS_MAPS = ("gradient rollout", "LeGrad", "occlusion")  # the Explore view's class map offers these
DEFAULT_CLASS_MAP = CLASS_MAPS[0]  # the one shown first, wherever a class map is drawn
RANDOM = "random order"  # the baseline every deletion curve is drawn against


def relevance(
    model: LoadedViT, x: torch.Tensor, method: str, target: torch.Tensor | int | None = None, bf16: bool | None = None
) -> torch.Tensor:
    """(B, P) values of `method` for the images `x` and class `target` (None: the predicted class); `bf16`: the
    precision of occlusion's forward passes (None: the one measured faster here; interpret.occlusion)."""
    interpret.record(model)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    if METHODS[method].class_specific:
        interpret.needs_classes(model)
    if method == "gradient rollout":
        return interpret.gradient_rollout(model, x, target)
    if method == "LeGrad":
        return interpret.legrad(model, x, target)
    if method == "occlusion":
        return interpret.occlusion(model, x, target, bf16=bf16)
    with torch.no_grad():
        out = interpret.intermediates(model, x)
    attn, pool = torch.stack(out["attn"], 1).float(), out.get("pool")
    pool = None if pool is None else pool.float().mean(1)  # SigLIP: its pooling query's attention, heads averaged
    layout = model.layout
    if method == "attention rollout":
        return interpret.read_row(layout, interpret.attention_rollout(attn), pool)
    eye = torch.eye(attn.shape[-1], device=attn.device).expand_as(attn[:, -1, 0])
    return interpret.read_row(layout, eye if pool is not None else attn[:, -1].mean(1), pool)  # last-layer attention


def forward_gflop(cfg: ViTConfig) -> float:
    """How many GFLOP one image's forward pass costs (torch's count, vitviz.models.vit.cost)."""
    return cost(cfg)[1]


def random_relevance(batch: int, patches: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(batch, patches, generator=torch.Generator().manual_seed(seed))


def ranks(relevance: torch.Tensor) -> torch.Tensor:
    """(B, P) rank of each patch, 0 for the most relevant (ties: the lower patch number first)."""
    order = relevance.argsort(dim=1, descending=True, stable=True)
    out = torch.empty_like(order)
    out.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    return out


def hide(model: LoadedViT, x: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """`x` with the patches where `hidden` (B, P) is true set to the mean colour (interpret.hide_patches, at
    the model's patch size)."""
    return interpret.hide_patches(x, hidden, model.card.config.patch_size)


@torch.no_grad()
def curves(
    model: LoadedViT,
    x: torch.Tensor,
    relevance: torch.Tensor,
    target: torch.Tensor,
    steps: int = 16,
    insertion: bool = False,
    batch_size: int = 512,
    precision: Precision | None = None,
) -> torch.Tensor:
    """(B, steps + 1) probability of `target` (B,) as the patches are hidden (or, `insertion`, revealed)
    most relevant first, after 0, 1/steps, ..., all of them; the forward passes in `precision` (None: fp32)."""
    B, P = relevance.shape
    r = ranks(relevance)
    counts = [round(k * P / steps) for k in range(steps + 1)]
    chosen = torch.stack([r < n for n in counts], 1)  # (B, K, P): the patches taken at each step
    hidden = ~chosen if insertion else chosen
    xs = x[:, None].expand(B, len(counts), *x.shape[1:]).reshape(-1, *x.shape[1:])
    masked = hide(model, xs, hidden.reshape(-1, P))
    with eval_mode(model), (precision or Precision(x.device, amp=False))():
        probs = torch.cat(
            [model.probabilities(model(masked[i : i + batch_size]).float()) for i in range(0, len(masked), batch_size)]
        )
    return probs.view(B, len(counts), -1).gather(2, target.view(B, 1, 1).expand(B, len(counts), 1))[..., 0]


def auc(c: torch.Tensor) -> torch.Tensor:
    """Area under (B, K) curves over the fraction of patches, 0..1."""
    return torch.trapezoid(c, dx=1.0 / (c.shape[1] - 1), dim=1)
