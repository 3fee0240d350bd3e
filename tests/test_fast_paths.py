"""The training step's CPU fast paths equal what they stand for, computed the plain way.

Each fused piece of vitviz.models.vit (a dropout fused with its residual add, the q/k/v split in one copy
each way, the bf16 residual stream) is checked against plain torch on the same inputs,
forward and backward; and the heap setting a run makes keeps freed memory for the next step.
"""

import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

from vitviz.models.fast_paths import Dropout, split_heads
from vitviz.models.vit import ViT, make_config


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_fused_with_the_residual_add_equals_the_plain_sum(dtype):
    d = Dropout(0.2).train()
    x = torch.randn(16, 33, 40, dtype=dtype, requires_grad=True)
    base = torch.randn(16, 33, 40, dtype=dtype, requires_grad=True)
    torch.manual_seed(3)
    out = d.add(base, x)
    torch.manual_seed(3)
    mask, scale = d._mask(x)  # the same draw
    kept = mask.to(torch.float32) * scale
    expected = base.float() + x.float() * kept
    tol = 0.0 if dtype == torch.float32 else 0.02
    assert (out.float() - expected).abs().max().item() <= tol * expected.abs().max().item()
    assert 0.18 < 1 - mask.float().mean().item() < 0.22
    g = torch.randn_like(out)
    out.backward(g)
    assert torch.equal(base.grad, g)  # the residual passes its gradient on untouched
    assert torch.allclose(x.grad.float(), (g.float() * kept).to(dtype).float(), rtol=0.01, atol=0)
    torch.manual_seed(3)
    assert torch.equal(d.eval().add(base, x), base + x)


def test_heads_split_equals_torch_reshape_permute():
    B, N, H, hd = 3, 7, 4, 5
    qkv = torch.randn(B, N, 3 * H * hd, dtype=torch.float64, requires_grad=True)
    q, k, v = split_heads(qkv, H)
    rq, rk, rv = qkv.reshape(B, N, 3, H, hd).permute(2, 0, 3, 1, 4).unbind(0)
    for a, b in ((q, rq), (k, rk), (v, rv)):
        assert a.is_contiguous() and torch.equal(a, b)
    grads = [torch.randn(B, H, N, hd, dtype=torch.float64) for _ in range(3)]
    (ours,) = torch.autograd.grad((q, k, v), qkv, grads)
    (ref,) = torch.autograd.grad((rq, rk, rv), qkv, grads)
    assert torch.equal(ours, ref)
    (only_k,) = torch.autograd.grad(split_heads(qkv, H)[1].sum(), qkv)  # unused q, v: zero gradient
    assert only_k.view(B, N, 3, H, hd)[:, :, [0, 2]].abs().max() == 0


def test_bf16_training_forward_keeps_its_residual_stream_in_bf16_and_agrees_with_fp32():
    torch.manual_seed(0)
    model = ViT(make_config("tiny")).eval()
    torch.nn.init.normal_(model.head.weight, std=0.2)
    x = torch.randn(4, 3, 32, 32)
    exact = model.forward_intermediates(x, return_attention=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = model.forward_intermediates(x, return_attention=False)
    assert exact["input"].dtype == torch.float32 and low["input"].dtype == torch.bfloat16
    assert all(t.dtype == torch.bfloat16 for t in low["tokens"])
    err = (low["logits"].float() - exact["logits"]).norm() / exact["logits"].norm()
    assert err < 0.03, err  # bf16's rounding, not a different function
    q = torch.autograd.grad(F.cross_entropy(model(x), torch.tensor([0, 1, 2, 3])), model.blocks[0].attn.qkv.bias)
    assert q[0].abs().sum() > 0  # the plain path still trains the bias


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_a_run_keeps_freed_memory_for_its_next_step():
    """Step-sized allocations freed and taken again: after reuse_freed, the second round onwards takes
    its pages from the heap, not fresh from the OS (by default glibc returns the heap's free top)."""
    code = textwrap.dedent(
        """
        import resource, sys, torch
        from vitviz.runtime import memory
        if sys.argv[1] == "reuse":
            assert memory.reuse_freed()
        def round_():
            held = [torch.ones(2 << 20) for _ in range(24)]  # 24 x 8 MB, every page touched
            del held
        round_()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(4):
            round_()
        print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        """
    )
    faults = {}
    for mode in ("default", "reuse"):
        out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        faults[mode] = int(out.stdout.split()[-1])
    pages = 4 * 24 * (8 << 20) // 4096
    assert faults["reuse"] < 0.25 * pages, faults
    assert faults["default"] > 2 * faults["reuse"], faults  # what the setting saves
