"""What the ViT attends to: pure functions, tensors in and tensors out.

Shapes: B images, L layers, H heads, N = K + P tokens: K prefix tokens (CLS first,
then a distillation token or registers, if any; none for SigLIP) and P patches on a g x g
grid. Every function here works on every family vitviz reads (vitviz.models.loaded). A
function that gets attention alone must be told the token layout (`prefix`: the model's
record, its TokenLayout, or K); one that gets the model asks it.

The maps start from the token the prediction reads (the layout's `reader`): CLS; CLS and the
distillation token, averaged, for a distilled DeiT (it predicts with the mean of its two
heads); SigLIP's pooling query, whose attention over the last block's tokens (its pooling
head's) is the last step of rollout and the row its maps read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

import torch

from vitviz.explain.geometry import (  # noqa: F401  the Model tab's measures, here with the rest
    grid_side,
    mean_attention_distance,
    patch_attention,
    patch_centers,
    patch_embed_components,
    pos_embed_similarity,
)
from vitviz.explain.layout import needs_classes, num_prefix, read_row  # noqa: F401
from vitviz.models.fast_paths import attend
from vitviz.models.loaded import LoadedViT, TokenLayout, eval_mode
from vitviz.models.vit import ViT
from vitviz.runtime import speed
from vitviz.runtime.device import Precision
from vitviz.runtime.speed import Choice, fp32


def classify(model: LoadedViT, tokens: torch.Tensor) -> torch.Tensor:
    """Logits from (B, N, D) tokens as the model's final norm and head read them (its CLS token, or what its
    head pools), as if the model stopped where these tokens are."""
    return record(model).classify(tokens)


def intermediates(model: LoadedViT, x: torch.Tensor, grad: bool = False) -> dict:
    """One eval-mode pass that returns everything it computed, from this call alone (LoadedViT's
    forward_intermediates). No hook goes on the model and nothing is kept on it, so any number of threads can
    share one model."""
    return record(model).forward_intermediates(x, grad)


def record(model: LoadedViT) -> LoadedViT:
    """`model`, which must be a record: TypeError with a sentence for a bare module (wrap it once, where it is
    made: vitviz.load_model, or vitviz.models.hub.loaded)."""
    if not isinstance(model, LoadedViT):
        raise TypeError(
            "vitviz's explaining functions take a model's record (vitviz.models.loaded.LoadedViT), not a bare "
            f"{type(model).__name__}: use vitviz.load_model(...), or vitviz.models.hub.loaded(module) once for a "
            "module of your own"
        )
    return model


def forward_with_attention(
    model: LoadedViT, x: torch.Tensor, grad: bool = False
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(logits (B, C), [L x (B, H, N, N)]) in eval mode. With grad=True the attention stays in the graph."""
    out = intermediates(model, x, grad)
    return out["logits"], out["attn"]


def attention_maps(model: LoadedViT, x: torch.Tensor) -> torch.Tensor:
    """Softmax attention of every layer and head: (B, L, H, N, N). Leaves the model as it was."""
    if x.ndim != 4:
        raise ValueError(f"expected a (B, C, H, W) batch, got shape {tuple(x.shape)}")
    _, attn = forward_with_attention(model, x)
    return torch.stack(attn, dim=1).float()


def fuse_heads(attn: torch.Tensor, head_fusion: str = "mean") -> torch.Tensor:
    """(..., H, N, N) -> (..., N, N) by the mean, max or min over heads."""
    if head_fusion == "mean":
        return attn.mean(-3)
    if head_fusion == "max":
        return attn.amax(-3)
    if head_fusion == "min":
        return attn.amin(-3)
    raise ValueError(f"head_fusion must be mean, max or min, not {head_fusion!r}")


def attention_rollout(
    attn: torch.Tensor, head_fusion: str = "mean", discard_ratio: float = 0.0, all_layers: bool = False
) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema, 2020): (B, L, H, N, N) -> (B, N, N), or (B, L, N, N) with all_layers.

    Per layer: fuse the heads; zero the weakest `discard_ratio` of the fused weights
    (never a weight on the CLS token, column 0); add the identity for the residual
    path; renormalise each row to sum to 1; then multiply through the layers,
    R_l = A_l @ R_{l-1}. Every row of the result sums to 1.
    """
    if attn.ndim != 5:
        raise ValueError(f"expected (B, L, H, N, N) attention, got shape {tuple(attn.shape)}")
    if not 0.0 <= discard_ratio <= 1.0:
        raise ValueError("discard_ratio must be between 0 and 1")
    B, L, H, N, _ = attn.shape
    a = fuse_heads(attn.float(), head_fusion)  # (B, L, N, N)
    if discard_ratio > 0:
        flat = a.flatten(2)  # (B, L, N*N)
        protected = torch.zeros(N, N, dtype=torch.bool, device=a.device)
        protected[:, 0] = True  # weights on the CLS token are kept
        ranked = flat.masked_fill(protected.flatten(), float("inf"))
        k = min(int(N * N * discard_ratio), N * N - N)
        if k > 0:
            _, drop = ranked.topk(k, dim=-1, largest=False)
            flat = flat.scatter(-1, drop, 0.0)
        a = flat.view(B, L, N, N)
    eye = torch.eye(N, device=a.device, dtype=a.dtype)
    a = a + eye
    a = a / a.sum(-1, keepdim=True)
    result = eye.expand(B, N, N)
    layers = []
    for layer in range(L):
        result = a[:, layer] @ result  # (B, N, N)
        layers.append(result)
    return torch.stack(layers, dim=1) if all_layers else result


def _targets(logits: torch.Tensor, target: torch.Tensor | int | None) -> torch.Tensor:
    B = logits.shape[0]
    if target is None:
        return logits.argmax(-1)
    t = torch.as_tensor(target, device=logits.device, dtype=torch.long)
    t = t.expand(B) if t.ndim == 0 else t
    if t.shape != (B,):
        raise ValueError(f"target must be an int or a ({B},) tensor")
    if (t < 0).any() or (t >= logits.shape[-1]).any():
        raise ValueError(f"target class out of range 0..{logits.shape[-1] - 1}")
    return t


def gradient_rollout(model: LoadedViT, x: torch.Tensor, target: torch.Tensor | int | None = None) -> torch.Tensor:
    """Class-specific relevance (Chefer, Gur & Wolf, ICCV 2021): (B, C, H, W) -> (B, P).

    Per layer A_bar = mean over heads of max(0, dy_t/dA * A); R starts at the
    identity and R <- R + A_bar @ R; the map is the row the prediction reads
    (`read_row`: CLS's; SigLIP's pooling query's, its A_bar times R). `target`
    None means the predicted class; an int or a (B,) tensor picks the class.
    """
    needs_classes(model)
    out = intermediates(model, x, grad=True)
    t = _targets(out["logits"], target)
    return _relevance_of(model, out, out["logits"].gather(1, t[:, None]).sum())


def _relevance_of(model: LoadedViT, out: dict, score: torch.Tensor) -> torch.Tensor:
    """Gradient rollout's (B, P) map of `score` from one pass's intermediates."""
    attns, pool = out["attn"], out.get("pool")
    grads = _grad(score, attns + ([pool] if pool is not None else []))
    bar = None if pool is None else (grads[-1].float() * pool.detach().float()).clamp(min=0).mean(1)  # (B, N)
    return read_row(model.layout, _rolled(attns, grads[: len(attns)]), bar).detach()


def _grad(score: torch.Tensor, attns: list[torch.Tensor], retain: bool = False) -> list[torch.Tensor]:
    """d score / d attention for each layer (`retain`: keep the graph for another gradient).

    torchvision's MultiheadAttention returns its weights as a view made after they
    were used, so the gradient is taken at the view's base (the tensor the output
    was computed from) and reshaped.
    """
    targets = [a._base if a._base is not None and a._base.numel() == a.numel() else a for a in attns]
    return [g.view_as(a) for g, a in zip(torch.autograd.grad(score, targets, retain_graph=retain), attns)]


def _rolled(attns: list[torch.Tensor], grads) -> torch.Tensor:
    """(B, N, N) relevance R from per-layer attention and its gradient (Chefer et al.'s rule)."""
    B, _, N, _ = attns[0].shape
    R = torch.eye(N, device=attns[0].device).expand(B, N, N)
    for a, g in zip(attns, grads):
        a_bar = (g.float() * a.detach().float()).clamp(min=0).mean(1)  # (B, N, N)
        R = R + a_bar @ R
    return R.detach()


def attention_and_relevance(model: LoadedViT, x: torch.Tensor, target: torch.Tensor | int | None = None) -> dict:
    """One forward and one backward pass for what the Explore view draws: logits (B, C), the explained
    class (B,), attention (B, L, H, N, N), gradient rollout (B, P) and the logit lens (B, L, C). Rollout and
    distances are cheap functions of the attention; the caller computes the ones it shows."""
    needs_classes(model)
    out = intermediates(model, x, grad=True)
    logits, attns, seen = out["logits"], out["attn"], out["tokens"]
    t = _targets(logits, target)
    pool = out.get("pool")
    return {
        "logits": logits.detach().float(),
        "target": t,
        "attn": torch.stack([a.detach() for a in attns], 1).float(),
        "pool": None if pool is None else pool.detach().float(),  # SigLIP: its pooling query's attention (B, H, N)
        "grad_rollout": _relevance_of(model, out, logits.gather(1, t[:, None]).sum()),
        "lens": lens(model, torch.stack([o.detach() for o in seen], 1)),  # the same pass's logit lens
        "norms": torch.stack([o.detach().float().norm(dim=-1) for o in seen], 1),
    }


# ---------------------------------------------------------------- occlusion and token norms


def inference_precision(model: LoadedViT, x: torch.Tensor, images: int = 8) -> Precision:
    """The precision of batched forward passes on `x`'s device: the process's choice, measured once (on this
    model and `images` copies of x's first image, in fp32 and in bf16; for vitviz's own ViT, its attention
    alone by each path too) by the first call that needs it."""
    device = x.device
    module = model.module

    def measure() -> speed.Choice:
        batch = x[:1].expand(images, *x.shape[1:]).contiguous()

        def passes(choice: speed.Choice) -> None:
            with torch.no_grad(), eval_mode(model), Precision(device, choice=choice)():
                model(batch)

        attention = None
        if isinstance(module, ViT):  # other families run their own attention: no path to choose
            cfg = module.config
            shape = (64, cfg.num_heads, cfg.num_patches + 1, cfg.embed_dim // cfg.num_heads)
            qkv = [torch.randn(shape, device=device, dtype=torch.bfloat16) for _ in range(3)]

            def attention(path: str) -> None:
                with torch.no_grad(), Precision(device, choice=speed.Choice(True, path, 1.0, ""))():
                    attend(*qkv, shape[-1] ** -0.5)

        with torch.random.fork_rng(devices=[]):
            return speed.decide(device, passes, attention)

    return Precision(device, choice=speed.chosen("inference", device, measure))


def hide_patches(x: torch.Tensor, hidden: torch.Tensor, patch: int) -> torch.Tensor:
    """`x` (B, C, H, W) with the patches where `hidden` (B, P) is true set to the data set's mean colour (0 in
    the normalised input)."""
    B, _, H, W = x.shape
    keep = (~hidden).to(x.dtype).view(B, 1, H // patch, W // patch)
    return x * keep.repeat_interleave(patch, 2).repeat_interleave(patch, 3)


@torch.no_grad()
def occlusion(
    model: LoadedViT,
    x: torch.Tensor,
    target: torch.Tensor | int | None = None,
    batch_size: int = 256,
    bf16: bool | None = None,
) -> torch.Tensor:
    """How much the target class's probability falls when one patch is hidden: (B, C, H, W) -> (B, P).

    A hidden patch is set to the data set's mean colour (`hide_patches`). `target` None means the predicted
    class. All B x P occluded images run as batches of `batch_size`: with `bf16` None in the precision measured
    faster for forward passes on this machine (`inference_precision`), else in bf16 (True) or fp32 (False: the
    exact path). The unoccluded image runs in the same precision as the occluded ones, so that rounding never
    shows up as a patch's effect."""
    needs_classes(model)
    patch = model.layout.patch_size
    B, _, H, W = x.shape
    P = (H // patch) * (W // patch)
    if bf16 is None:
        precision = inference_precision(model, x)
    else:
        asked = Choice(True, "fp32", 1.0, "bf16: asked for")  # bf16 matmuls, attention by the fp32 kernel
        precision = Precision(x.device, choice=asked if bf16 else fp32("fp32: asked for"))

    def probs_of(images: torch.Tensor) -> torch.Tensor:
        with precision():
            return model.probabilities(model(images).float())

    with eval_mode(model):
        probs = probs_of(x)
        t = _targets(probs, target)
        base = probs.gather(1, t[:, None])[:, 0]  # (B,)
        hidden = torch.empty(B * P)
        for start in range(0, B * P, batch_size):
            k = torch.arange(start, min(start + batch_size, B * P), device=x.device)  # image k // P, patch k % P
            one = torch.nn.functional.one_hot(k % P, P).bool()
            out = probs_of(hide_patches(x[k // P], one, patch))
            hidden[start : start + len(k)] = out.gather(1, t[k // P, None])[:, 0].cpu()
    return base.cpu()[:, None] - hidden.view(B, P)


def legrad(model: LoadedViT, x: torch.Tensor, target: torch.Tensor | int | None = None) -> torch.Tensor:
    """LeGrad (Bousselham et al., 2024): (B, C, H, W) -> (B, P), each image's map scaled to 0..1.

    For every layer l the tokens after block l go through the final norm and head, as if the model stopped
    there; s_l is the target's score (a class's logit; for CLIP and SigLIP the label's image-text score, from
    the CLS token's projection or SigLIP's pooling head). The gradient of s_l with respect to the attention that
    forms it, its positive part averaged over heads (and over query tokens), gives each token's sensitivity:
    layer l's self-attention for a model that reads CLS; for SigLIP, as the paper does, its pooling head's
    attention applied to layer l's tokens. The patches' values are summed over the layers and min-max scaled
    per image (all zeros when nothing depends on the patches). `target` None: the predicted class."""
    needs_classes(model)
    out = intermediates(model, x, grad=True)
    attns, K = out["attn"], model.layout.num_prefix
    t = _targets(out["logits"], target)
    pooled = model.layout.reader == "pooling query"
    total = torch.zeros(x.shape[0], attns[0].shape[-1] - K, device=x.device)
    with torch.enable_grad():  # each layer's tokens through the final norm and head, in the same graph
        for layer, (tokens, a) in enumerate(zip(out["tokens"], attns)):
            logits, a = model.adapter.pool(tokens) if pooled else (classify(model, tokens), a)
            s = logits.gather(1, t[:, None]).sum()
            g = _grad(s, [a], retain=layer < len(attns) - 1)[0].float().clamp(min=0)
            total += g.mean(1) if pooled else g.mean(dim=(1, 2))[:, K:]
    lo, hi = total.amin(1, keepdim=True), total.amax(1, keepdim=True)
    return ((total - lo) / (hi - lo).clamp_min(1e-30) * (hi > lo)).detach()


@torch.no_grad()
def token_norms(model: LoadedViT, x: torch.Tensor) -> torch.Tensor:
    """The L2 norm of every token after each block: (B, C, H, W) -> (B, L, N), CLS first. Large ViTs grow a
    few high-norm tokens that dominate attention (Darcet et al., 2024, "Vision Transformers Need Registers")."""
    return torch.stack([t.float().norm(dim=-1) for t in intermediates(model, x)["tokens"]], 1)


OUTLIER_RATIO = 2.5


def norm_outliers(
    norms: torch.Tensor, ratio: float = OUTLIER_RATIO, *, prefix: LoadedViT | TokenLayout | int
) -> list[tuple[int, int, float]]:
    """High-norm patch tokens in one image's (L, N) token norms: (layer, patch, norm / the layer's median
    patch norm) for every patch at least `ratio` times that median, 0-based, largest first. The prefix tokens
    (CLS, registers) are left out: their norms differ by design. `prefix`: the token layout (see `num_prefix`)."""
    patches = norms[:, num_prefix(prefix) :].float()
    times = patches / patches.median(-1, keepdim=True).values.clamp_min(1e-12)
    layer, patch = torch.nonzero(times >= ratio, as_tuple=True)
    found = [(int(a), int(b), float(times[a, b])) for a, b in zip(layer, patch)]
    return sorted(found, key=lambda f: -f[2])


def walk(model: LoadedViT, x: torch.Tensor) -> dict:
    """One image batch through the model, stage by stage, with the real tensors (eval mode, no gradients):
    'patches' (B, P, D) the patch embedding's output; 'tokens' (B, N, D) CLS prepended and the positional
    embedding added, as the first block receives them; 'blocks' (B, L, N, D) each block's output; 'attn'
    (B, L, H, N, N); 'logits' (B, C)."""
    out = intermediates(model, x)
    return {
        "patches": out["patches"].float(),
        "tokens": out["input"].float(),
        "blocks": torch.stack(out["tokens"], 1).float(),
        "attn": torch.stack(out["attn"], 1).float(),
        "logits": out["logits"].float(),
    }


def lens(model: LoadedViT, blocks: torch.Tensor) -> torch.Tensor:
    """(B, L, N, D) block outputs -> (B, L, C) class probabilities: each block's tokens through the model's
    final norm and head (what the model would predict if it stopped there; for CLIP and SigLIP, each layer's
    pooled token through the final norm and projection against every label), by the model's own rule."""
    with torch.no_grad():
        return model.probabilities(
            torch.stack([classify(model, blocks[:, i].to(model.dtype)) for i in range(blocks.shape[1])], 1).float()
        )


def logit_lens(model: LoadedViT, x: torch.Tensor) -> torch.Tensor:
    """The logit lens: (B, C, H, W) -> (B, L, C) class probabilities after each block. The last layer's is the
    model's own prediction."""
    needs_classes(model)
    return lens(model, walk(model, x)["blocks"])


def zero_shot(
    image: Image.Image, model: LoadedViT, labels: str | list[str] | None = None, template: str | None = None
) -> dict[str, float]:
    """{label: probability} of a PIL image for a model with a text tower (CLIP, SigLIP), labels comma-separated or
    a list (None: vitviz.models.words.DEFAULT_LABELS), in `template` ("a photo of a {}."): CLIP's softmax over
    the labels, SigLIP's independent sigmoids. For the maps of a label, explain with
    `vitviz.models.words.with_labels(model, labels)` as the model."""
    from vitviz.models.words import with_labels

    v = with_labels(model, labels, template)
    with torch.no_grad():
        p = v.probabilities(v(v.prepare(image)[1]).float())[0]
    return dict(zip(v.card.classes, p.tolist()))
