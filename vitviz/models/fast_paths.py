"""The ViT's measured fast paths on the CPU, each with the plain computation it equals (tests/test_fast_paths.py
checks them against it; docs/benchmarks.md says what each gave):

- `Dropout`: inverted dropout whose mask comes from numpy's raw random words, applied with its residual add in
  one pass each way (`_Drop`): torch's per-element bernoulli_ took 40% of a training step;
- `split_heads`: the fused q/k/v projection into three (B, H, N, hd) tensors in one copy each way (`_Heads`);
- `attend`: softmax(q k^T * scale) v by the path measured fastest under bf16 autocast (vitviz.runtime.speed).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from vitviz.runtime.device import attention_path


class _Drop(torch.autograd.Function):
    """base + x * mask * scale (base 0 for plain dropout, the residual stream for a block's branch), mask 0/1:
    one pass each way (addcmul), where multiply, scale and add took three. Only the mask is kept."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx, base: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, scale: float
    ) -> torch.Tensor:
        ctx.save_for_backward(mask)
        ctx.scale, ctx.plain = scale, base.dim() == 0
        return torch.addcmul(base, x, mask, value=scale)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> tuple:
        (mask,) = ctx.saved_tensors
        zero = grad.new_zeros(())
        return None if ctx.plain else grad, torch.addcmul(zero, grad, mask, value=ctx.scale), None, None


class Dropout(nn.Module):
    """Inverted dropout. On the CPU the mask comes from raw 64-bit words of numpy's PCG64 (seeded from torch's
    generator, so torch.manual_seed still fixes it), 8 uniform bytes a word, compared straight into a 0/1
    mask: of x's dtype for bf16 x (a boolean one is cast in every multiply), boolean for fp32 x (4 bytes an
    element to keep otherwise). torch's per-element bernoulli_ took 40% of a training step there. The drop
    probability is rounded to a multiple of 1/256 (0.2 -> 51/256)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, True)
        return _Drop.apply(x.new_zeros(()), x, *self._mask(x))

    def add(self, base: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """base + dropout(x), in one pass on the CPU (a block's residual add)."""
        if not self.training or self.p == 0 or x.device.type != "cpu" or base.dtype != x.dtype:
            return base + self(x)
        return _Drop.apply(base, x, *self._mask(x))

    def _mask(self, x: torch.Tensor) -> tuple[torch.Tensor, float]:
        seed = int(torch.empty((), dtype=torch.int64).random_())
        rand = torch.from_numpy(np.random.PCG64(seed).random_raw((x.numel() + 7) // 8).view(np.uint8))
        cut = round(self.p * 256)
        kind = x.dtype if x.element_size() <= 2 else torch.bool
        mask = torch.ge(rand, cut, out=torch.empty(rand.shape, dtype=kind))[: x.numel()].view(x.shape)
        return mask, 256 / (256 - cut)


class _Heads(torch.autograd.Function):
    """(B, N, 3 * H * hd) projections -> q, k, v, each (B, H, N, hd) and contiguous, in one copy each way
    (torch's own reshape-permute-unbind stacks the three gradients, then copies them again)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, qkv: torch.Tensor, heads: int) -> tuple:
        B, N, three_d = qkv.shape
        return qkv.view(B, N, 3, heads, three_d // (3 * heads)).permute(2, 0, 3, 1, 4).contiguous().unbind(0)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, *grads: torch.Tensor) -> tuple:
        like = next(g for g in grads if g is not None)
        B, H, N, hd = like.shape
        out = torch.empty(B, N, 3, H, hd, dtype=like.dtype, device=like.device)
        for i, g in enumerate(grads):
            if g is None:
                out[:, :, i].zero_()
            else:
                out[:, :, i].copy_(g.transpose(1, 2))
        return out.view(B, N, 3 * H * hd), None


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(q k^T * scale) v for (B, H, N, hd) tensors. Under bf16 autocast on a CPU, by the path measured
    fastest there (vitviz.runtime.speed): the fused kernel in fp32 or in bf16, or bf16 matmuls and a bf16
    softmax (for a small ViT's short sequences often the fastest: the N x N scores are small)."""
    path = attention_path() if q.device.type == "cpu" and torch.is_autocast_enabled("cpu") else "native"
    if path == "fp32":
        with torch.autocast("cpu", enabled=False):
            return F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    if path == "matmuls":  # the softmax in bf16 too: its copies to fp32 and back cost more than it does
        return ((q @ k.transpose(-2, -1)) * scale).softmax(-1) @ v
    return F.scaled_dot_product_attention(q, k, v)


def split_heads(qkv: torch.Tensor, heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, N, 3 * H * hd) projections -> q, k, v, each (B, H, N, hd) and contiguous."""
    return _Heads.apply(qkv, heads)
