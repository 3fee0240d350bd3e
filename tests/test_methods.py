"""LeGrad, occlusion, deletion curves and the sanity checks, against independent computations."""

import pytest
import torch

from vitviz.explain import interpret, methods, sanity


def _legrad_by_hand(model, x, t):
    """LeGrad written out: block by block by hand, one gradient per layer, no hooks and no vitviz helpers."""
    total = 0
    for layer in range(len(model.blocks)):
        h = model.patch_embed(x)
        h = torch.cat([model.cls_token.expand(len(x), -1, -1), h], 1) + model.pos_embed
        for k, blk in enumerate(model.blocks[: layer + 1]):
            y, a = blk.attn(blk.norm1(h), return_attention=True)
            if k == layer:
                kept = a
            h = h + y
            h = h + blk.mlp(blk.norm2(h))
        s = model.head(model.norm(h[:, 0]))[torch.arange(len(x)), t].sum()
        (g,) = torch.autograd.grad(s, kept)
        total = total + g.clamp(min=0).mean(dim=(1, 2))[:, 1:]
    lo, hi = total.amin(1, keepdim=True), total.amax(1, keepdim=True)
    return (total - lo) / (hi - lo)


def test_legrad_matches_the_paper_written_out(tiny_model, tiny):
    x = torch.randn(3, 3, 32, 32)
    t = tiny_model(x).argmax(-1)
    got = interpret.legrad(tiny, x)
    assert got.shape == (3, 64) and got.min() >= 0 and got.max() <= 1
    torch.testing.assert_close(got, _legrad_by_hand(tiny_model, x, t), atol=1e-5, rtol=1e-4)


def test_legrad_is_class_specific(tiny_model, tiny):
    x = torch.randn(1, 3, 32, 32)
    a, b = interpret.legrad(tiny, x, target=0), interpret.legrad(tiny, x, target=1)
    assert (a - b).abs().max() > 0.05


def test_legrad_of_an_untrained_head_is_flat():
    from vitviz.models.hub import loaded
    from vitviz.models.vit import ViT, make_config

    m = ViT(make_config("tiny", embed_dim=32, depth=2, num_heads=4)).eval()  # the head starts at zeros
    assert float(interpret.legrad(loaded(m), torch.randn(1, 3, 32, 32)).abs().max()) == 0
    with pytest.raises(TypeError, match="take a model's record"):  # a module is wrapped once, by its caller
        interpret.legrad(m, torch.randn(1, 3, 32, 32))


def test_occlusion_in_bf16_stays_near_fp32(tiny_model, tiny):
    x = torch.randn(1, 3, 32, 32)
    exact, low = interpret.occlusion(tiny, x, bf16=False), interpret.occlusion(tiny, x, bf16=True)
    assert (exact - low).abs().max() < 0.05


def test_default_occlusion_takes_the_precision_measured_faster_here(tiny_model, tiny):
    """The default is the path measured faster for forward passes on this machine (bf16 or fp32, kept for the
    process), and the unoccluded image runs in the same precision as the occluded ones."""
    x = torch.randn(2, 3, 32, 32)
    chosen = interpret.inference_precision(tiny, x)
    default = interpret.occlusion(tiny, x)
    assert torch.equal(default, interpret.occlusion(tiny, x))  # the same choice every call
    if not chosen.bf16:
        assert torch.equal(default, interpret.occlusion(tiny, x, bf16=False))
    elif chosen.choice.attention == "fp32":  # bf16=True: bf16 matmuls, attention by the fp32 kernel
        assert torch.equal(default, interpret.occlusion(tiny, x, bf16=True))
    assert interpret.inference_precision(tiny, x).choice == chosen.choice  # kept, not measured again
    assert (default - interpret.occlusion(tiny, x, bf16=False)).abs().max() < 0.05


def test_deletion_curve_against_hiding_by_hand(tiny_model, tiny):
    x = torch.randn(2, 3, 32, 32)
    rel = torch.randn(2, 64)
    t = tiny_model(x).argmax(-1)
    got = methods.curves(tiny, x, rel, t, steps=4)
    assert got.shape == (2, 5)
    with torch.no_grad():
        for b in range(2):
            order = rel[b].argsort(descending=True)
            for k, n in enumerate((0, 16, 32, 48, 64)):
                xo = x[b : b + 1].clone()
                for p in order[:n].tolist():
                    r, c = divmod(p, 8)
                    xo[..., 4 * r : 4 * r + 4, 4 * c : 4 * c + 4] = 0
                want = tiny_model(xo).softmax(-1)[0, t[b]]
                assert got[b, k].item() == pytest.approx(want.item(), abs=1e-5)
    ins = methods.curves(tiny, x, rel, t, steps=4, insertion=True)
    torch.testing.assert_close(ins[:, -1], got[:, 0])  # everything revealed is the whole image
    assert methods.auc(torch.ones(1, 5)).item() == pytest.approx(1.0)


def test_every_method_gives_one_value_per_patch(tiny_model, tiny):
    x = torch.randn(2, 3, 32, 32)
    for name in methods.METHODS:
        assert methods.relevance(tiny, x, name).shape == (2, 64), name
    with pytest.raises(ValueError):
        methods.relevance(tiny, x, "saliency")
    # each method says its own cost: occlusion one forward pass a patch and one of the whole image, the rest one
    assert [n for n, m in methods.METHODS.items() if m.passes(64) != 1] == ["occlusion"]
    assert methods.METHODS["occlusion"].passes(64) == 65


def test_spearman_against_its_definition():
    a = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 2.0, 3.0]])
    b = torch.tensor([[4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 2.0, 5.0]])
    got = sanity.spearman(a, b)
    assert got[0].item() == pytest.approx(-1.0)
    ra, rb = torch.tensor([1.5, 1.5, 3.0, 4.0]), torch.tensor([1.0, 2.5, 2.5, 4.0])  # average ranks
    want = torch.corrcoef(torch.stack([ra, rb]))[0, 1]
    assert got[1].item() == pytest.approx(want.item(), abs=1e-6)
    assert sanity.spearman(torch.ones(1, 4), a[:1]).item() == 0  # a flat map keeps no order


def test_cascade_randomises_from_the_top_and_leaves_the_model(tiny_model, tiny):
    before = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    stages = []
    for label, m in sanity.cascade(tiny):
        changed = {
            k.split(".")[0] + ("." + k.split(".")[1] if k.startswith("blocks") else "")
            for k, v in m.module.state_dict().items()
            if not torch.equal(v, before[k])
        }
        stages.append((label, changed))
    assert [s[0] for s in stages] == ["trained", "head", "head + block 2", "+ block 1", "+ embeddings (everything)"]
    assert stages[0][1] == set() and stages[1][1] == {"head"}
    assert stages[2][1] == {"head", "blocks.1"} and stages[3][1] == {"head", "blocks.1", "blocks.0"}
    assert {"patch_embed", "pos_embed", "cls_token"} <= stages[4][1]
    for k, v in tiny_model.state_dict().items():
        assert torch.equal(v, before[k])  # the model itself is never changed


def test_randomised_head_changes_class_maps_but_not_rollout(tiny_model, tiny):
    """What the sanity check predicts: rollout never reads the head; gradient rollout, occlusion and LeGrad do."""
    x = torch.randn(4, 3, 32, 32)
    t = tiny_model(x).argmax(-1)
    rnd = sanity.randomised(tiny, "head")
    assert rnd.card.name.endswith("head randomised") and not rnd.card.metrics
    for name in ("gradient rollout", "occlusion", "LeGrad"):
        rho = sanity.spearman(methods.relevance(tiny, x, name, t), methods.relevance(rnd, x, name, t))
        assert rho.mean() < 0.9, name
    for name in ("attention rollout", "last-layer attention"):
        torch.testing.assert_close(methods.relevance(tiny, x, name), methods.relevance(rnd, x, name))
    checks = sanity.checks(tiny, x, ["attention rollout", "LeGrad"])
    assert checks["head"]["attention rollout"].mean().item() == pytest.approx(1.0)
    assert checks["+ embeddings (everything)"]["attention rollout"].mean() < 0.9


def test_norm_outliers_name_the_high_norm_tokens():
    norms = torch.full((3, 65), 10.0)
    norms[:, 0] = 99.0  # CLS is never flagged
    norms[2, 1 + 12] = 40.0
    norms[1, 1 + 5] = 24.0
    got = interpret.norm_outliers(norms, prefix=1)
    assert got == [(2, 12, 4.0)]
    found = interpret.norm_outliers(norms, ratio=2.0, prefix=1)
    assert [f[:2] for f in found] == [(2, 12), (1, 5)] and found[1][2] == pytest.approx(2.4)


def test_legrad_is_ahead_of_random_on_deletion_with_the_shipped_model():
    """On the shipped model and its 100 example images, hiding LeGrad's patches first makes the predicted
    class's probability fall faster than hiding them in random orders."""
    from PIL import Image

    import vitviz
    from vitviz.data import gallery

    model = vitviz.load_model()
    x = model.tensor([model.pixels(Image.open(p)) for p, _ in gallery.items("cifar10")[:60]])
    with torch.no_grad():
        t = model(x).argmax(-1)
    legrad = methods.auc(methods.curves(model, x, interpret.legrad(model, x, t), t, steps=8)).mean()
    rnd = torch.stack(
        [
            methods.auc(methods.curves(model, x, methods.random_relevance(len(x), 64, s), t, steps=8)).mean()
            for s in range(3)
        ]
    )
    assert legrad < rnd.min() - 0.05, (legrad, rnd)
