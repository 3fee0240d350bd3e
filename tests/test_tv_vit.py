"""torchvision's ViT-B/16, randomly initialised (no download), through vitviz's functions."""

import pytest
import torch
from PIL import Image

import vitviz
from vitviz.explain import interpret


@pytest.fixture(scope="module")
def vit():
    return vitviz.load_model("vit_b_16", pretrained=False)


@pytest.fixture(scope="module")
def x(vit):
    return vitviz.preprocess(Image.new("RGB", (320, 240), (120, 60, 200)), vit) + 0.3 * torch.randn(1, 3, 224, 224)


def test_metadata(vit):
    cfg = vit.card.config
    assert (cfg.image_size, cfg.patch_size, cfg.depth, cfg.num_heads, cfg.grid_size) == (224, 16, 12, 12, 14)
    assert len(vit.card.classes) == 1000 and not vit.module.training and vit.card.kind == "torchvision"


def test_extracted_attention_matches_q_and_k(vit, x):
    inputs = {}
    hooks = [
        blk.ln_1.register_forward_hook(lambda m, a, o, i=i: inputs.__setitem__(i, o.detach()))
        for i, blk in enumerate(vit.module.encoder.layers)
    ]
    try:
        attn = interpret.attention_maps(vit, x)
    finally:
        for h in hooks:
            h.remove()
    assert attn.shape == (1, 12, 12, 197, 197)
    torch.testing.assert_close(attn.sum(-1), torch.ones(1, 12, 12, 197), atol=1e-4, rtol=0)
    for layer in (0, 5, 11):
        mha = vit.module.encoder.layers[layer].self_attention
        h = inputs[layer]  # (1, N, D): what the attention saw
        D = h.shape[-1]
        q = h @ mha.in_proj_weight[:D].T + mha.in_proj_bias[:D]
        k = h @ mha.in_proj_weight[D : 2 * D].T + mha.in_proj_bias[D : 2 * D]
        q = q.view(1, 197, 12, 64).transpose(1, 2)
        k = k.view(1, 197, 12, 64).transpose(1, 2)
        ref = (q @ k.transpose(-2, -1) / 8.0).softmax(-1)
        torch.testing.assert_close(attn[:, layer], ref, atol=2e-5, rtol=1e-4)


def test_extraction_leaves_the_model_unchanged(vit, x):
    with torch.no_grad():
        before = vit(x)
    interpret.attention_maps(vit, x)
    interpret.gradient_rollout(vit, x)
    with torch.no_grad():
        after = vit(x)
    torch.testing.assert_close(before, after)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in vit.module.modules())
    assert all(p.grad is None for p in vit.module.parameters())


def test_every_interpret_function_accepts_it(vit, x):
    attn = interpret.attention_maps(vit, x)
    assert interpret.attention_rollout(attn, "max", 0.5).shape == (1, 197, 197)
    rel = interpret.gradient_rollout(vit, x, target=3)
    assert rel.shape == (1, 196) and (rel >= 0).all()
    d = interpret.mean_attention_distance(attn, 16, prefix=1)
    assert d.shape == (12, 12) and (d > 0).all() and (d < 224 * 1.5).all()
    s = interpret.pos_embed_similarity(vit)
    assert s.shape == (196, 196)
    torch.testing.assert_close(s.diagonal(), torch.ones(196), atol=1e-5, rtol=0)
    comps, var = interpret.patch_embed_components(vit, 8)
    assert comps.shape == (8, 3, 16, 16)


def test_token_norms_of_vit_b_16(vit, x):
    got = interpret.token_norms(vit, x)
    assert got.shape == (1, 12, 197)
    with torch.no_grad():
        tv = vit.module
        h = tv._process_input(x)
        h = torch.cat([tv.class_token.expand(1, -1, -1), h], 1) + tv.encoder.pos_embedding
        for layer, blk in enumerate(tv.encoder.layers):
            h = blk(h)
            torch.testing.assert_close(got[:, layer], h.norm(dim=-1))


def test_legrad_occlusion_and_the_cascade_on_a_torchvision_vit():
    """A small torchvision VisionTransformer (ViT-B/16's code, few layers) with its card, through the methods
    and the sanity cascade; LeGrad against a hand-written per-layer gradient."""
    from torchvision.models.vision_transformer import VisionTransformer

    from vitviz.explain import methods, sanity
    from vitviz.models.card import ModelCard, describe
    from vitviz.models.hub import loaded
    from vitviz.models.tv_vit import config_of

    torch.manual_seed(0)
    m = VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=5
    ).eval()
    torch.nn.init.normal_(m.heads.head.weight, std=0.5)  # torchvision starts its head at zeros
    describe(m, ModelCard(config=config_of(m), classes=tuple("abcde"), mean=(0.5,) * 3, std=(0.5,) * 3))
    r = loaded(m)
    x = torch.randn(2, 3, 32, 32)
    for name in methods.METHODS:
        assert methods.relevance(r, x, name).shape == (2, 16), name
    occ = interpret.occlusion(r, x, bf16=False)
    with torch.no_grad():
        p = m(x).softmax(-1)
        t = p.argmax(-1)
        xo = x[:1].clone()
        xo[..., 8:16, 16:24] = 0  # patch 6
        assert occ[0, 6].item() == pytest.approx((p[0, t[0]] - m(xo).softmax(-1)[0, t[0]]).item(), abs=1e-5)
    got = interpret.legrad(r, x, target=t)
    assert got.shape == (2, 16) and float(got.max()) == pytest.approx(1.0)
    stages = [label for label, _ in sanity.cascade(r)]
    assert stages == ["trained", "head", "head + block 2", "+ block 1", "+ embeddings (everything)"]
    rnd = sanity.randomised(r, "all")
    assert not torch.equal(rnd.module.encoder.pos_embedding, m.encoder.pos_embedding)
