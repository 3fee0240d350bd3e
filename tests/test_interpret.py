import pytest
import torch

from vitviz.explain import interpret


def rand_attn(B=2, L=3, H=4, N=17, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, L, H, N, N, generator=g).softmax(-1)


def test_attention_maps_shape_rows_and_model_untouched(tiny_model, tiny):
    tiny_model.train()
    hooks_before = [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in tiny_model.modules()]
    x = torch.randn(2, 3, 32, 32)
    attn = interpret.attention_maps(tiny, x)
    cfg = tiny_model.config
    assert attn.shape == (2, cfg.depth, cfg.num_heads, 65, 65)
    torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:-1]), atol=1e-5, rtol=0)
    assert tiny_model.training  # mode restored
    assert hooks_before == [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in tiny_model.modules()]
    assert not attn.requires_grad


@pytest.mark.parametrize("fusion", ["mean", "max", "min"])
@pytest.mark.parametrize("discard", [0.0, 0.3, 0.9, 1.0])
def test_rollout_rows_sum_to_one(fusion, discard):
    attn = rand_attn()
    r = interpret.attention_rollout(attn, fusion, discard)
    assert r.shape == (2, 17, 17)
    torch.testing.assert_close(r.sum(-1), torch.ones(2, 17), atol=1e-5, rtol=0)
    rl = interpret.attention_rollout(attn, fusion, discard, all_layers=True)
    assert rl.shape == (2, 3, 17, 17)
    torch.testing.assert_close(rl.sum(-1), torch.ones(2, 3, 17), atol=1e-5, rtol=0)
    torch.testing.assert_close(rl[:, -1], r)


def test_rollout_one_layer_by_hand():
    # one layer, one head, N = 2: A = [[.5, .5], [.25, .75]] -> (A + I) / rowsum
    A = torch.tensor([[0.5, 0.5], [0.25, 0.75]])
    r = interpret.attention_rollout(A.view(1, 1, 1, 2, 2))
    expected = torch.tensor([[1.5 / 2, 0.5 / 2], [0.25 / 2, 1.75 / 2]])
    torch.testing.assert_close(r[0], expected)


def test_rollout_two_layers_by_hand():
    A1 = torch.tensor([[0.5, 0.5], [0.25, 0.75]])
    A2 = torch.tensor([[0.9, 0.1], [0.6, 0.4]])
    norm = lambda a: (a + torch.eye(2)) / (a + torch.eye(2)).sum(-1, keepdim=True)  # noqa: E731
    attn = torch.stack([A1, A2]).view(1, 2, 1, 2, 2)
    r = interpret.attention_rollout(attn)
    torch.testing.assert_close(r[0], norm(A2) @ norm(A1))
    # head fusion: two heads whose mean is A1
    heads = torch.stack(
        [A1 + 0.1 * torch.tensor([[1.0, -1.0], [1.0, -1.0]]), A1 - 0.1 * torch.tensor([[1.0, -1.0], [1.0, -1.0]])]
    )
    torch.testing.assert_close(interpret.attention_rollout(heads.view(1, 1, 2, 2, 2))[0], norm(A1))
    torch.testing.assert_close(interpret.attention_rollout(heads.view(1, 1, 2, 2, 2), "max")[0], norm(heads.amax(0)))


def test_rollout_discard_keeps_cls_column_and_drops_weakest():
    # N = 3; fused weights; discard 2 of 9 entries = the two weakest off column 0
    A = torch.tensor([[0.10, 0.60, 0.30], [0.05, 0.90, 0.05], [0.01, 0.20, 0.79]])
    r = interpret.attention_rollout(A.view(1, 1, 1, 3, 3), discard_ratio=2 / 9)
    kept = A.clone()
    kept[1, 2] = 0.0  # 0.05 (the 0.05 and 0.01 in column 0 are protected)
    kept[2, 1] = 0.0  # 0.20 is the next weakest off column 0
    # weakest off column 0: 0.05 (1,2), 0.20 (2,1) -> both dropped; column 0 and the rest kept
    e = kept + torch.eye(3)
    torch.testing.assert_close(r[0], e / e.sum(-1, keepdim=True))


def test_gradient_rollout_matches_hand_computation(tiny_model, tiny):
    x = torch.randn(2, 3, 32, 32)
    rel = interpret.gradient_rollout(tiny, x)
    assert rel.shape == (2, 64)
    # by hand: the same formula from autograd on the explicit path
    out = tiny_model.forward_intermediates(x, return_attention=True)
    logits, attns = out["logits"], out["attn"]
    t = logits.argmax(-1)
    grads = torch.autograd.grad(logits.gather(1, t[:, None]).sum(), attns)
    R = torch.eye(65).repeat(2, 1, 1)
    for a, g in zip(attns, grads):
        R = R + (g * a).clamp(min=0).mean(1) @ R
    torch.testing.assert_close(rel, R[:, 0, 1:].detach())
    # a different target gives a different map; all relevance non-negative
    other = (t + 1) % 10
    assert not torch.allclose(interpret.gradient_rollout(tiny, x, other), rel)
    assert (rel >= 0).all()
    assert all(p.grad is None for p in tiny_model.parameters())


def test_gradient_rollout_one_layer_by_hand():
    """A 1-layer, 1-head model whose logit is linear in the attention: check R = I + A_bar."""
    A = torch.tensor([[0.2, 0.3, 0.5], [0.1, 0.8, 0.1], [0.4, 0.4, 0.2]], requires_grad=True)
    # y = sum(A * W) so dy/dA = W
    W = torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.5, -1.0], [0.0, 2.0, 1.0]])
    grads = torch.autograd.grad((A * W).sum(), [A])
    rel = interpret._rolled([A.view(1, 1, 3, 3)], (grads[0].view(1, 1, 3, 3),))[:, 0, 1:]
    a_bar = (W * A).clamp(min=0)
    expected = (torch.eye(3) + a_bar)[0, 1:]
    torch.testing.assert_close(rel[0], expected.detach())


def test_mean_attention_distance_uniform_and_identity():
    N = 65
    uniform = torch.full((1, 1, 1, N, N), 1.0 / N)
    d = interpret.mean_attention_distance(uniform, patch_size=4, prefix=1)
    assert d.shape == (1, 1)
    assert abs(d.item() - 16.55) < 0.01
    ident = torch.eye(N).view(1, 1, 1, N, N)
    assert interpret.mean_attention_distance(ident, 4, prefix=1).item() == pytest.approx(0.0, abs=1e-6)


def test_pos_embed_similarity(tiny_model, tiny):
    s = interpret.pos_embed_similarity(tiny)
    assert s.shape == (64, 64)
    torch.testing.assert_close(s, s.T)
    torch.testing.assert_close(s.diagonal(), torch.ones(64), atol=1e-5, rtol=0)


def test_patch_embed_components(tiny_model, tiny):
    comps, var = interpret.patch_embed_components(tiny, 8)
    assert comps.shape == (8, 3, 4, 4)
    assert comps.min() >= 0 and comps.max() <= 1
    assert (var[:-1] >= var[1:]).all() and var.sum() <= 1 + 1e-6


def test_one_pass_agrees_with_parts(tiny_model, tiny):
    x = torch.randn(2, 3, 32, 32)
    e = interpret.attention_and_relevance(tiny, x, target=3)
    attn = interpret.attention_maps(tiny, x)
    torch.testing.assert_close(e["attn"], attn)
    torch.testing.assert_close(e["logits"], tiny_model(x))
    torch.testing.assert_close(e["grad_rollout"], interpret.gradient_rollout(tiny, x, target=3))
    assert e["target"].tolist() == [3, 3]


def test_bad_arguments(tiny_model, tiny):
    with pytest.raises(ValueError):
        interpret.attention_rollout(rand_attn(), "median")
    with pytest.raises(ValueError):
        interpret.attention_rollout(rand_attn(), discard_ratio=1.5)
    with pytest.raises(ValueError):
        interpret.gradient_rollout(tiny, torch.randn(1, 3, 32, 32), target=10)
    with pytest.raises(ValueError):
        interpret.patch_attention(rand_attn(), 16, prefix=1)


def test_occlusion_matches_hiding_one_patch_at_a_time(tiny_model, tiny):
    x = torch.randn(2, 3, 32, 32)
    got = interpret.occlusion(tiny, x, batch_size=10, bf16=False)  # the exact path; several batches per image
    assert got.shape == (2, 64)
    with torch.no_grad():
        probs = tiny_model(x).softmax(-1)
        t = probs.argmax(-1)
        for b in range(2):
            for p in (0, 9, 37, 63):
                r, c = divmod(p, 8)
                xo = x[b : b + 1].clone()
                xo[..., 4 * r : 4 * r + 4, 4 * c : 4 * c + 4] = 0.0  # the mean colour, normalised
                want = probs[b, t[b]] - tiny_model(xo).softmax(-1)[0, t[b]]
                assert got[b, p].item() == pytest.approx(want.item(), abs=1e-5)
    other = interpret.occlusion(tiny, x, target=(int(t[0]) + 1) % 10, bf16=False)
    assert not torch.allclose(other[0], got[0])  # class-specific


def test_token_norms_match_running_the_blocks_by_hand(tiny_model, tiny):
    x = torch.randn(2, 3, 32, 32)
    got = interpret.token_norms(tiny, x)
    assert got.shape == (2, 2, 65)
    with torch.no_grad():
        m = tiny_model
        h = m.patch_embed(x)
        h = torch.cat([m.cls_token.expand(2, -1, -1), h], 1) + m.pos_embed
        for layer, blk in enumerate(m.blocks):
            h = h + blk.attn(blk.norm1(h))[0]
            h = h + blk.mlp(blk.norm2(h))
            torch.testing.assert_close(got[:, layer], h.norm(dim=-1))
    assert not m.blocks[0]._forward_hooks  # no hook left behind
