import pytest
import torch

from vitviz.models.vit import PRESETS, ViT, ViTConfig, make_config


def test_fused_equals_explicit_attention(tiny_model):
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        fast = tiny_model(x)
        slow, attn = tiny_model(x, return_attention=True)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)
    cfg = tiny_model.config
    N = 1 + cfg.num_patches
    assert attn.shape == (3, cfg.depth, cfg.num_heads, N, N)
    torch.testing.assert_close(attn.sum(-1), torch.ones(3, cfg.depth, cfg.num_heads, N), atol=1e-5, rtol=0)


def test_presets_build_and_seed_matches_tutorial():
    seed = make_config("seed")
    assert (seed.image_size, seed.patch_size, seed.embed_dim, seed.depth, seed.num_heads) == (32, 4, 256, 4, 4)
    assert int(seed.embed_dim * seed.mlp_ratio) == 128
    for name in PRESETS:
        cfg = make_config(name)
        m = ViT(cfg)
        x = torch.randn(2, cfg.in_chans, cfg.image_size, cfg.image_size)
        assert m(x).shape == (2, cfg.num_classes)


def test_mnist_preset_is_a_7x7_grid():
    cfg = make_config("mnist")
    assert (cfg.image_size, cfg.patch_size, cfg.grid_size, cfg.in_chans) == (28, 4, 7, 1)


def test_config_validation():
    with pytest.raises(ValueError):
        ViTConfig(image_size=30, patch_size=4)
    with pytest.raises(ValueError):
        ViTConfig(embed_dim=100, num_heads=3)
    with pytest.raises(ValueError):
        make_config("nope")
    with pytest.raises(ValueError):
        ViTConfig.from_dict({"embed_dim": 64, "bogus": 1})


def test_no_attention_kept_on_modules(tiny_model):
    x = torch.randn(1, 3, 32, 32)
    before = {k: set(vars(m)) for k, m in tiny_model.named_modules()}
    tiny_model(x, return_attention=True)
    after = {k: set(vars(m)) for k, m in tiny_model.named_modules()}
    assert before == after


def test_logits_not_softmax(tiny_model):
    out = tiny_model(torch.randn(4, 3, 32, 32))
    assert not torch.allclose(out.exp().sum(-1), torch.ones(4))


def test_dropout_statistics_and_modes():
    from vitviz.models.fast_paths import Dropout

    torch.manual_seed(0)
    d = Dropout(0.2)
    x = torch.ones(500, 700, requires_grad=True)
    y = d.train()(x)
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - 51 / 256) < 0.005
    assert abs(y.mean().item() - 1.0) < 0.01  # inverted dropout keeps the expectation
    y.sum().backward()
    assert torch.equal(x.grad == 0, y == 0)
    assert torch.equal(d.eval()(x), x)
    a, b = d.train()(x), d(x)
    assert not torch.equal(a, b)  # fresh masks each call


@pytest.mark.parametrize("preset", ["tiny", "quick", "cifar"])
def test_the_cost_torch_counts_equals_the_model_and_the_formula(preset):
    """models.vit.cost counts on the meta device: the parameters a real model allocates, and the forward's FLOPs
    as the matmuls and attention written out by hand."""
    from vitviz.models.vit import ViT, cost, make_config

    cfg = make_config(preset)
    params, gflop = cost(cfg)
    assert params == sum(p.numel() for p in ViT(cfg).parameters())
    N, D, L, hidden = 1 + cfg.num_patches, cfg.embed_dim, cfg.depth, int(cfg.embed_dim * cfg.mlp_ratio)
    by_hand = (
        L * (2 * N * (4 * D * D + 2 * D * hidden) + 4 * N * N * D) + 2 * cfg.num_patches * D * 3 * cfg.patch_size**2
    )
    by_hand += 2 * D * cfg.num_classes  # the head
    assert gflop * 1e9 == pytest.approx(by_hand, rel=1e-3)
