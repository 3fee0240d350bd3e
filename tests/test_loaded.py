"""The one record of a loaded model, for every family, and the sanity check that leaves nothing trained."""

import pytest
import torch

import vitviz
from vitviz.explain import sanity
from vitviz.models.hub import loaded
from vitviz.models.loaded import Adapter, LoadedViT


def test_the_record_of_each_family():
    ours = vitviz.load_model()
    tv = vitviz.load_model("vit_b_16", pretrained=False)
    deit = vitviz.load_model("timm/deit_tiny_distilled_patch16_224.fb_in1k", pretrained=False)
    dino = vitviz.load_model("timm/vit_small_patch14_reg4_dinov2.lvd142m", pretrained=False)
    want = {
        id(ours): (("CLS",), (8, 8), 4, True),
        id(tv): (("CLS",), (14, 14), 16, True),
        id(deit): (("CLS", "distillation"), (14, 14), 16, True),
        id(dino): (("CLS", "register 1", "register 2", "register 3", "register 4"), (16, 16), 14, False),
    }
    for m in (ours, tv, deit, dino):
        r = loaded(m.module)  # a module's record is built from it, and a record is handed back as it is
        prefix, grid, patch, has_head = want[id(m)]
        assert isinstance(m, LoadedViT) and loaded(m) is m and r.module is m.module and r.card is m.card
        assert isinstance(r.adapter, Adapter)  # every family gives the record the same names (a typed Protocol)
        assert (r.layout.prefix, r.layout.grid, r.layout.patch_size) == (prefix, grid, patch)
        assert (r.head is not None) == has_head and r.device == torch.device("cpu")
        assert r.layout.at_row(0).name == "CLS" and r.layout.at_row(len(prefix)).name == "patch 0"
        assert len(r.blocks) == r.card.config.depth
        x = torch.randn(1, 3, *r.input_size)
        out = r.forward_intermediates(x)
        assert len(out["tokens"]) == len(r.blocks) and out["attn"][0].shape[-1] == r.layout.num_tokens
        torch.testing.assert_close(r.classify(out["tokens"][-1]), out["logits"])
        assert all(isinstance(p, torch.nn.Parameter) for p in r.embeddings())


@pytest.mark.parametrize("which", ["ours", "torchvision"])
def test_every_weight_randomised_changes_every_tensor(which):
    m = vitviz.load_model() if which == "ours" else vitviz.load_model("vit_b_16", pretrained=False)
    if which == "torchvision":  # untrained: its norms at 1 and 0, its biases and head at 0; make it look trained
        with torch.no_grad():
            for p in m.module.parameters():
                p.add_(0.1)
    before = {k: v.clone() for k, v in m.module.state_dict().items()}
    r = sanity.randomised(m, "all")
    after = r.module.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) == len(before), sorted(set(before) - set(changed))
    assert all(torch.equal(v, before[k]) for k, v in m.module.state_dict().items())  # the original is untouched


def test_a_module_is_wrapped_once_where_it_is_made():
    """The explaining functions take the record; a module of one's own is wrapped once (hub.loaded), and a bare
    module passed to them is refused with a sentence, not half-explained."""
    from vitviz.explain import interpret, methods

    r = vitviz.load_model()
    m = r.module
    x = torch.randn(1, 3, 32, 32)
    again = loaded(m)  # a record built from the module: the same answers as the loaded one
    assert loaded(r) is r and again.module is m and again.card is r.card
    assert torch.equal(interpret.occlusion(r, x, bf16=False), interpret.occlusion(again, x, bf16=False))
    for name in methods.METHODS:
        if name != "occlusion":
            assert torch.equal(methods.relevance(r, x, name), methods.relevance(again, x, name)), name
            with pytest.raises(TypeError, match="take a model's record"):
                methods.relevance(m, x, name)


@pytest.mark.parametrize(
    "prefix,reader",
    [
        (("CLS",), "CLS"),
        (("CLS", "distillation"), "CLS and distillation"),
        (("CLS",) + tuple(f"register {i}" for i in range(1, 5)), "CLS"),
        ((), "pooling query"),
    ],
)
def test_a_token_is_written_three_ways_and_converted_in_one_place(prefix, reader):
    from vitviz.models.loaded import Token, TokenError, TokenLayout

    layout = TokenLayout(prefix, (3, 3), 16, reader)
    K = len(prefix)
    numbers = range(layout.lowest, layout.num_patches)
    assert list(numbers)[0] == -max(1, K) and list(numbers)[-1] == 8
    rows = []
    for n in numbers:
        t = layout.token(n)
        assert isinstance(t, Token) and t.number == n
        if n >= 0:  # a patch: after every token before the patches, named by its number
            assert (t.patch, t.prefix, t.row, t.name) == (n, 0, K + n, f"patch {n}")
        elif K:  # a token before the patches: -1 CLS, then the others in order
            assert (t.patch, t.prefix, t.row, t.name) == (None, -1 - n, -1 - n, prefix[-1 - n])
        else:  # SigLIP: -1 is its pooling query, which is in no row
            assert (t.patch, t.row, t.name) == (None, None, "the pooling query")
        if t.row is not None:
            assert layout.at_row(t.row) == t
            rows.append(t.row)
    assert sorted(rows) == list(range(layout.num_tokens))  # every row of the sequence is one token
    for bad in (layout.lowest - 1, layout.num_patches, 2.5, True):
        with pytest.raises(TokenError, match="numbered"):
            layout.token(bad)
        assert layout.kept(bad) == layout.token(-1)  # a selection this model lacks falls back to its first token
    assert layout.numbering().startswith("patches 0 to 8, -1 ")
