"""timm's ViTs through vitviz, offline, with random weights: every family's logits, attention and token layout
against timm's own, the pretrained path through a Hugging Face cache this test writes, and the sentences for
what cannot be had."""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import vitviz
from vitviz import interpret as I
from vitviz import methods
from vitviz.timm_vit import TimmError

timm = pytest.importorskip("timm")
ROOT = Path(__file__).resolve().parent.parent

# name -> (prefix tokens K, grid side, has a classifier)
FAMILIES = {
    "deit_tiny_patch16_224.fb_in1k": (1, 14, True),
    "deit_small_patch16_224.fb_in1k": (1, 14, True),
    "deit_tiny_distilled_patch16_224.fb_in1k": (2, 14, True),
    "vit_small_patch16_224.dino": (1, 14, False),
    "vit_small_patch8_224.dino": (1, 28, False),
    "vit_small_patch14_dinov2.lvd142m": (1, 16, False),
    "vit_small_patch14_reg4_dinov2.lvd142m": (5, 16, False),
}


def timm_attention(model, x):
    """timm's own attention, read independently: a copy with non-fused attention and a hook on each block's
    attention dropout, whose input is the softmax."""
    twin = copy.deepcopy(model)
    seen = []
    for blk in twin.blocks:
        blk.attn.fused_attn = False
        blk.attn.attn_drop.register_forward_hook(lambda m, a, o: seen.append(a[0].detach()))
    with torch.no_grad():
        twin(x)
    return seen


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request):
    torch.manual_seed(0)
    return request.param, vitviz.load_model(f"timm/{request.param}", pretrained=False)


def test_logits_attention_and_token_layout_equal_timms(family):
    name, m = family
    K, g, has_head = FAMILIES[name]
    x = torch.randn(1, 3, 224, 224)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    logits, attn = I.forward_with_attention(m, x)
    fused = copy.deepcopy(m)
    for blk in fused.blocks:
        blk.attn.fused_attn = True
    with torch.no_grad():
        torch.testing.assert_close(logits, fused(x), atol=1e-4, rtol=1e-4)  # timm's own (fused) forward
    for ours, theirs in zip(attn, timm_attention(m, x), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)
    assert I.num_prefix(m) == K and attn[0].shape[-1] == K + g * g
    assert m.card.config.grid_size == g and m.card.kind == "timm" and not m.training
    assert (len(m.card.classes) == 1000) == has_head
    assert all(torch.equal(v, before[k]) for k, v in m.state_dict().items())  # the model is unchanged
    assert not any(mod._forward_hooks or mod._forward_pre_hooks for mod in m.modules())
    assert all(blk.attn.fused_attn is False for blk in m.blocks)  # set once, on this instance only
    other = timm.create_model("deit_tiny_patch16_224", pretrained=False)
    assert all(blk.attn.fused_attn == timm.layers.use_fused_attn() for blk in other.blocks)


def test_the_readme_functions_run_on_every_family(family):
    name, m = family
    K, g, has_head = FAMILIES[name]
    x = torch.randn(1, 3, 224, 224)
    attn = I.attention_maps(m, x)
    assert attn.shape[-1] == K + g * g
    roll = I.attention_rollout(attn)
    torch.testing.assert_close(roll.sum(-1), torch.ones_like(roll.sum(-1)), atol=1e-4, rtol=0)
    assert I.patch_attention(attn, 3, prefix=K).shape[-1] == g * g
    norms = I.token_norms(m, x)
    assert norms.shape == (1, len(m.blocks), K + g * g)
    I.norm_outliers(norms[0], prefix=K)
    assert I.pos_embed_similarity(m).shape == (g * g, g * g)
    assert I.mean_attention_distance(attn, 16, prefix=K).shape == (len(m.blocks), attn.shape[2])
    w = I.walk(m, x)
    assert w["blocks"].shape[:3] == (1, len(m.blocks), K + g * g)
    if has_head:
        lens = I.logit_lens(m, x)
        torch.testing.assert_close(lens[:, -1], w["logits"].softmax(-1), atol=1e-5, rtol=1e-4)
        for method in ("gradient rollout", "LeGrad", "attention rollout", "last-layer attention"):
            r = methods.relevance(m, x, method)
            assert r.shape == (1, g * g) and torch.isfinite(r).all(), method


def tiny_timm_vit(**kw):
    from timm.models.vision_transformer import VisionTransformer

    from vitviz.timm_vit import read_attention_here

    torch.manual_seed(0)
    m = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=10, **kw).eval()
    read_attention_here(m)
    return m


def test_occlusion_and_gradient_rollout_against_hand_computations_on_a_small_timm_vit():
    from vitviz.card import ModelCard, describe
    from vitviz.timm_vit import config_of

    m = tiny_timm_vit(reg_tokens=2)
    describe(m, ModelCard(config=config_of(m), classes=tuple("abcdefghij"), mean=(0.5,) * 3, std=(0.5,) * 3,
                          kind="timm"))
    m.card = ModelCard(config=type(m.card.config)(**{**m.card.config.to_dict(), "image_size": 32}),
                       classes=m.card.classes, mean=m.card.mean, std=m.card.std, kind="timm")
    x = torch.randn(1, 3, 32, 32)
    occ = I.occlusion(m, x, bf16=False)
    with torch.no_grad():
        p = m(x).softmax(-1)[0]
        t = int(p.argmax())
        xo = x.clone()
        xo[..., 8:16, 0:8] = 0  # patch 4 of the 4 x 4 grid
        want = p[t] - m(xo).softmax(-1)[0, t]
    assert occ[0, 4].item() == pytest.approx(want.item(), abs=1e-5)
    gr = I.gradient_rollout(m, x)
    assert gr.shape == (1, 16) and I.num_prefix(m) == 3  # CLS and two registers left out


def write_hub_cache(cache: Path, name: str) -> dict:
    """A Hugging Face cache holding random weights for timm/<name>, as a download would leave it."""
    from safetensors.torch import save_file

    torch.manual_seed(1)
    sd = {k: v.contiguous() for k, v in timm.create_model(name, pretrained=False).state_dict().items()}
    repo = cache / f"models--timm--{name}"
    snap = repo / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    save_file(sd, str(snap / "model.safetensors"))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    return sd


LOAD = """
import json, sys, torch, vitviz
m = vitviz.load_model("timm/" + sys.argv[1])
torch.save({k: v for k, v in m.state_dict().items()}, sys.argv[2])
print(json.dumps({"kind": m.card.kind, "classes": len(m.card.classes), "name": m.card.name}))
"""


@pytest.mark.parametrize("name", ["deit_tiny_patch16_224.fb_in1k", "vit_small_patch14_reg4_dinov2.lvd142m"])
def test_pretrained_weights_come_from_the_hub_cache_offline(tmp_path, name):
    sd = write_hub_cache(tmp_path / "hub", name)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", LOAD, name, str(tmp_path / "sd.pt")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["kind"] == "timm" and "untrained" not in info["name"]
    got = torch.load(tmp_path / "sd.pt")
    for k, v in sd.items():
        if k == "pos_embed" and got[k].shape != v.shape:  # DINOv2: 518 px (37 x 37) interpolated to 224 (16 x 16)
            assert v.shape[1] - got[k].shape[1] == 37 * 37 - 16 * 16
            continue
        assert torch.equal(got[k], v), k


def test_a_local_safetensors_file(tmp_path):
    from safetensors.torch import save_file

    torch.manual_seed(2)
    src = timm.create_model("deit_tiny_patch16_224", pretrained=False)
    save_file({k: v.contiguous() for k, v in src.state_dict().items()}, str(tmp_path / "mine.safetensors"))
    m = vitviz.load_model("timm/deit_tiny_patch16_224.fb_in1k", weights=tmp_path / "mine.safetensors")
    assert all(torch.equal(v, src.state_dict()[k]) for k, v in m.state_dict().items())
    with pytest.raises(TimmError, match="no weights file"):
        vitviz.load_model("timm/deit_tiny_patch16_224.fb_in1k", weights=tmp_path / "missing.safetensors")


def test_what_cannot_be_had_gets_a_sentence(tmp_path, monkeypatch):
    with pytest.raises(TimmError, match="not a Vision Transformer vitviz can read; the families that work are"):
        vitviz.load_model("timm/resnet18", pretrained=False)
    with pytest.raises(TimmError, match="timm knows no model called 'not_a_model_at_all'"):
        vitviz.load_model("timm/not_a_model_at_all", pretrained=False)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "empty"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    code = ("import vitviz\ntry:\n    vitviz.load_model('timm/deit_tiny_patch16_224.fb_in1k')\n"
            "except ValueError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "need internet once" in out.stdout and "Hugging Face cache" in out.stdout, out.stdout + out.stderr[-1500:]
    assert str(tmp_path) not in out.stdout  # no server path
