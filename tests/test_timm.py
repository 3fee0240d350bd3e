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
from helpers import write_hub_cache

import vitviz
from vitviz.explain import interpret, methods
from vitviz.models.timm_vit import TimmError

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
    name, r = family
    m = r.module  # timm's own network, for the references
    K, g, has_head = FAMILIES[name]
    x = torch.randn(1, 3, 224, 224)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    logits, attn = interpret.forward_with_attention(r, x)
    fused = copy.deepcopy(m)
    for blk in fused.blocks:
        blk.attn.fused_attn = True
    with torch.no_grad():
        torch.testing.assert_close(logits, fused(x), atol=1e-4, rtol=1e-4)  # timm's own (fused) forward
    for ours, theirs in zip(attn, timm_attention(m, x), strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)
    assert interpret.num_prefix(r) == K and r.layout.num_prefix == K and attn[0].shape[-1] == K + g * g
    assert r.card.config.grid_size == g and r.card.kind == "timm" and not m.training
    assert (len(r.card.classes) == 1000) == has_head
    assert all(torch.equal(v, before[k]) for k, v in m.state_dict().items())  # the model is unchanged
    assert not any(mod._forward_hooks or mod._forward_pre_hooks for mod in m.modules())
    assert all(blk.attn.fused_attn is False for blk in m.blocks)  # set once, on this instance only
    other = timm.create_model("deit_tiny_patch16_224", pretrained=False)
    assert all(blk.attn.fused_attn == timm.layers.use_fused_attn() for blk in other.blocks)


def test_the_readme_functions_run_on_every_family(family):
    name, m = family
    K, g, has_head = FAMILIES[name]
    x = torch.randn(1, 3, 224, 224)
    attn = interpret.attention_maps(m, x)
    assert attn.shape[-1] == K + g * g
    roll = interpret.attention_rollout(attn)
    torch.testing.assert_close(roll.sum(-1), torch.ones_like(roll.sum(-1)), atol=1e-4, rtol=0)
    assert interpret.patch_attention(attn, 3, prefix=K).shape[-1] == g * g
    norms = interpret.token_norms(m, x)
    assert norms.shape == (1, len(m.blocks), K + g * g)
    interpret.norm_outliers(norms[0], prefix=K)
    assert interpret.pos_embed_similarity(m).shape == (g * g, g * g)
    assert interpret.mean_attention_distance(attn, 16, prefix=K).shape == (len(m.blocks), attn.shape[2])
    w = interpret.walk(m, x)
    assert w["blocks"].shape[:3] == (1, len(m.blocks), K + g * g)
    if has_head:
        lens = interpret.logit_lens(m, x)
        torch.testing.assert_close(lens[:, -1], w["logits"].softmax(-1), atol=1e-5, rtol=1e-4)
        for method in ("gradient rollout", "LeGrad", "attention rollout", "last-layer attention"):
            r = methods.relevance(m, x, method)
            assert r.shape == (1, g * g) and torch.isfinite(r).all(), method


def tiny_timm_vit(**kw):
    from timm.models.vision_transformer import VisionTransformer

    from vitviz.models.timm_vit import read_attention_here

    torch.manual_seed(0)
    m = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=10, **kw).eval()
    read_attention_here(m)
    return m


def test_the_sanity_checks_and_curves_on_timm_models():
    from vitviz.explain import sanity

    deit = vitviz.load_model("timm/deit_tiny_patch16_224.fb_in1k", pretrained=False)
    dino = vitviz.load_model("timm/vit_small_patch16_224.dino", pretrained=False)
    stages = [label for label, _ in sanity.cascade(dino)]
    assert stages[0] == "trained" and "head" not in stages and len(stages) == 1 + 12 + 1  # no head stage
    for m in (deit, vitviz.load_model("timm/vit_small_patch14_reg4_dinov2.lvd142m", pretrained=False)):
        with torch.no_grad():  # untrained, its norms sit at 1 and its biases at 0: make it look trained
            for p in m.module.parameters():
                p.add_(0.1)
        r = sanity.randomised(m, "all")
        unchanged = [
            k for (k, a), b in zip(m.module.state_dict().items(), r.module.state_dict().values()) if torch.equal(a, b)
        ]
        assert unchanged == [], unchanged  # every tensor, registers and layer scales included
    comps, var = interpret.patch_embed_components(deit, 8)
    assert comps.shape == (8, 3, 16, 16) and float(var.sum()) <= 1 + 1e-5


def test_occlusion_and_gradient_rollout_against_hand_computations_on_a_small_timm_vit():
    from vitviz.models.card import ModelCard, describe
    from vitviz.models.hub import loaded
    from vitviz.models.timm_vit import config_of

    m = tiny_timm_vit(reg_tokens=2)
    describe(
        m, ModelCard(config=config_of(m), classes=tuple("abcdefghij"), mean=(0.5,) * 3, std=(0.5,) * 3, kind="timm")
    )
    m.card = ModelCard(
        config=type(m.card.config)(**{**m.card.config.to_dict(), "image_size": 32}),
        classes=m.card.classes,
        mean=m.card.mean,
        std=m.card.std,
        kind="timm",
    )
    x = torch.randn(1, 3, 32, 32)
    r = loaded(m)  # its record, once: what the explaining functions take
    occ = interpret.occlusion(r, x, bf16=False)
    with torch.no_grad():
        p = m(x).softmax(-1)[0]
        t = int(p.argmax())
        xo = x.clone()
        xo[..., 8:16, 0:8] = 0  # patch 4 of the 4 x 4 grid
        want = p[t] - m(xo).softmax(-1)[0, t]
    assert occ[0, 4].item() == pytest.approx(want.item(), abs=1e-5)
    gr = interpret.gradient_rollout(r, x)
    assert gr.shape == (1, 16) and interpret.num_prefix(r) == 3  # CLS and two registers left out


LOAD = """
import json, sys, torch, vitviz
m = vitviz.load_model("timm/" + sys.argv[1])
torch.save({k: v for k, v in m.module.state_dict().items()}, sys.argv[2])
print(json.dumps({"kind": m.card.kind, "classes": len(m.card.classes), "name": m.card.name}))
"""


@pytest.mark.parametrize("name", ["deit_tiny_patch16_224.fb_in1k", "vit_small_patch14_reg4_dinov2.lvd142m"])
def test_pretrained_weights_come_from_the_hub_cache_offline(tmp_path, name):
    sd = write_hub_cache(tmp_path / "hub", name)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", LOAD, name, str(tmp_path / "sd.pt")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
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
    assert all(torch.equal(v, src.state_dict()[k]) for k, v in m.module.state_dict().items())
    with pytest.raises(TimmError, match="no weights file"):
        vitviz.load_model("timm/deit_tiny_patch16_224.fb_in1k", weights=tmp_path / "missing.safetensors")


def test_what_cannot_be_had_gets_a_sentence(tmp_path, monkeypatch):
    with pytest.raises(TimmError, match="not a Vision Transformer vitviz can read; the families that work are"):
        vitviz.load_model("timm/resnet18", pretrained=False)
    with pytest.raises(TimmError, match="timm knows no model called `not_a_model_at_all`"):
        vitviz.load_model("timm/not_a_model_at_all", pretrained=False)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "empty"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    code = (
        "import vitviz\ntry:\n    vitviz.load_model('timm/deit_tiny_patch16_224.fb_in1k')\n"
        "except ValueError as e:\n    print(e)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "need internet once" in out.stdout and "Hugging Face cache" in out.stdout, out.stdout + out.stderr[-1500:]
    assert str(tmp_path) not in out.stdout  # no server path


def test_the_app_serves_deit_from_the_hub_cache(tmp_path, monkeypatch, small_data):
    """The menu's DeiT-S entry, its weights in a Hugging Face cache (random ones, written here): the menu says
    it is on the machine, and Explore, Step by step and the Model tab draw it."""
    import huggingface_hub.constants as hf

    from vitviz.app import menu
    from vitviz.app.tabs import explore
    from vitviz.app.tabs import model as model_tab
    from vitviz.app.tabs import steps as steps_tab
    from vitviz.data import gallery

    key = "timm/deit_small_patch16_224.fb_in1k"
    monkeypatch.setattr(hf, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert "needs internet: 88 MB once" in dict((k, l) for l, k in menu.model_choices())[key]
    write_hub_cache(tmp_path / "hub", key.removeprefix("timm/"))
    assert "on this machine" in dict((k, l) for l, k in menu.model_choices())[key]
    monkeypatch.setattr(menu, "MODELS", menu.SharedModels())
    image = {"path": gallery.items("cifar10")[3][0]}
    out = explore.explain(image, key, patch=100, layer=12, head=6)
    assert len(out[0]) == 5 and all(isinstance(p, str) and p.endswith(".jpg") for p in out[1:9])
    assert "patch 100" in out[-1]
    assert len(steps_tab.steps_api(image, key, 12, 40)) == 14
    assert model_tab.model_view(key, 50)[0] is not None


def test_the_app_serves_a_model_without_a_classifier_and_a_typed_name(tmp_path, monkeypatch, small_data):
    """DINOv2 with registers from the menu, and DeiT-tiny distilled typed by name, their weights in a Hugging
    Face cache written here: every tab that needs no class draws; the one that does says why not."""
    import gradio as gr
    import huggingface_hub.constants as hf
    import numpy as np
    from PIL import Image

    from vitviz.app import menu, switch
    from vitviz.app.state import Visitor
    from vitviz.app.tabs import compare, explore
    from vitviz.app.tabs import model as model_tab
    from vitviz.app.tabs import removal as removal_tab
    from vitviz.app.tabs import steps as steps_tab
    from vitviz.data import gallery

    reg, typed = "timm/vit_small_patch14_reg4_dinov2.lvd142m", "deit_tiny_distilled_patch16_224.fb_in1k"
    monkeypatch.setattr(hf, "HF_HUB_CACHE", str(tmp_path / "hub"))
    for name in (reg.removeprefix("timm/"), typed):
        write_hub_cache(tmp_path / "hub", name)
    monkeypatch.setattr(menu, "MODELS", menu.SharedModels())
    image = {"path": gallery.items("cifar10")[3][0]}
    out = explore.explain(image, reg, patch=40)
    names = explore.explore_pictures.OUTPUT_NAMES
    assert out[0] == {} and "No classifier" in out[-1] and "CLS + 4 registers" in out[-1]
    sim = np.asarray(Image.open(out[names.index("class_map")]))
    assert sim.shape[0] > 224  # the similarity map with its title and colour bar
    assert "knows" not in menu.model_choices()[0][0]
    controls = switch.controls_for(reg, Visitor(), progress=lambda *a, **k: None)
    assert "no classifier" in controls[10]["label"].lower() and controls[9] == ""
    named = dict(zip(switch.CHANGED.names, controls))
    assert named["target"]["visible"] is False and named["method"]["visible"] is False  # no class controls
    for k in ("help_sees", "help_class_map", "help_lens"):  # no line speaks of predicting or a class's map
        assert "predict" not in named[k] and "is classified" not in named[k] and "logit" not in named[k], k
    deit = dict(zip(switch.CHANGED.names, switch.controls_for("cifar10", Visitor(), progress=lambda *a, **k: None)))
    assert "predict" in deit["help_lens"] and deit["target"]["visible"] is True
    assert switch.kept_class(menu.resolve_model(reg, Visitor()), "tabby") == (switch.PREDICTED, "")
    steps = steps_tab.steps_api(image, reg, 12, 5)
    assert "no classifier" in steps[steps_tab.steps.STEP_NAMES.index("head_text")]
    titles = steps_tab.fitted(reg, Visitor())[2:]  # the head's and the read-out's stages say what this model has
    assert titles[0].startswith("### 6. No head") and not any("predict" in t or "logit" in t for t in titles)
    assert "logit" in steps_tab.fitted("cifar10", Visitor())[-1]
    assert steps_tab.fitted("cifar10", Visitor())[2:] == tuple(f"### {t}" for t in steps_tab.steps.TITLES.values())
    assert model_tab.model_view(reg, 30)[0] is not None
    left = compare.compare(image, reg, "cifar10")
    assert "has no classifier" in left[-2] and "no top 5" in left[-2] and left[-1] == ""
    with pytest.raises(gr.Error, match="no classifier"):
        removal_tab.removal_api(image, reg, "LeGrad", 3)
    with pytest.raises(gr.Error, match="need internet once, after which they are kept in the Hugging Face cache"):
        explore.explain(image, "timm/vit_small_patch8_224.dino")  # a menu entry whose weights are not here
    out = explore.explain(image, typed, patch=3)  # typed bare, as a visitor would
    assert len(out[0]) == 5 and "CLS + distillation" in out[-1]
    with pytest.raises(gr.Error, match="timm knows no model called"):
        explore.explain(image, "no_such_vit_anywhere")
    with pytest.raises(gr.Error, match="not a Vision Transformer"):
        explore.explain(image, "resnet18")
    page = switch.controls_for("resnet18", Visitor(), progress=lambda *a, **k: None)
    assert page[0] == "cifar10" and "not a Vision Transformer" in page[9]  # said beside the menu, which goes back
    assert "ResNet" in page[9] and "Error" not in page[9] and "/" not in page[9].split("(")[0]


def test_the_registers_benchmark_runs_on_random_weights():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "registers.py"), "--random", "--images", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if "dinov2" in line]
    assert len(rows) == 2 and all(" | 2 | " in r for r in rows)


def test_a_register_is_a_token_to_select(monkeypatch):
    """A model with registers: each register (and CLS) can be the token whose attention is drawn, numbered
    -1 (CLS) to -K; the row drawn is that token's own, and a number past them gets this model's range."""
    import gradio as gr

    from vitviz.app import handlers, menu, switch
    from vitviz.app.inputs import read_image
    from vitviz.app.state import Visitor
    from vitviz.app.tabs import explore
    from vitviz.data import gallery
    from vitviz.models.card import ModelCard, describe
    from vitviz.models.hub import loaded
    from vitviz.models.timm_vit import config_of
    from vitviz.pictures import explanation
    from vitviz.pictures import explore as explore_pictures

    m = tiny_timm_vit(reg_tokens=2)
    describe(
        m,
        ModelCard(
            config=config_of(m),
            classes=tuple("abcdefghij"),
            mean=(0.5,) * 3,
            std=(0.5,) * 3,
            kind="timm",
            name="tiny with registers",
        ),
    )
    monkeypatch.setattr(menu, "MODELS", menu.SharedModels())
    menu.MODELS._models["timm/tiny_reg"] = r = loaded(m)
    assert r.layout.prefix == ("CLS", "register 1", "register 2")
    image = {"path": gallery.items("cifar10")[3][0]}
    out = explore.explain(image, "timm/tiny_reg", patch=-3, layer=2, head=2)
    assert "selected token: **register 2**" in out[-1]
    number, token_menu = switch.controls_for("timm/tiny_reg", Visitor(), progress=lambda *a, **k: None)[5:7]
    assert (
        "-2 to -3 registers 1 to 2" in number["label"]
        and token_menu["visible"]
        and token_menu["choices"][2] == "register 2"
    )
    page = ("mean", 0.0, "predicted class", 2, 1, 5, 0.6, True, False, "LeGrad", None, None, Visitor())  # patch 5
    picked = dict(zip(explore.TOKEN_PAGE.names, explore.prefix_picked("register 2", image, "timm/tiny_reg", *page)))
    assert (
        picked["patch"] == -3 and picked["prefix_token"]["value"] == "register 2"
    )  # one event: number, menu, pictures
    assert "selected token: **register 2**" in picked["summary"]
    assert handlers.token_shown("timm/tiny_reg", None, 7)["prefix_token"]["value"] is None
    with pytest.raises(gr.Error, match=r"between -3 and 15 \(patches 0 to 15, -1 CLS, -2 to -3 registers 1 to 2\)"):
        explore.explain(image, "timm/tiny_reg", patch=-4)

    pixels = r.pixels(read_image(image))
    ex = explanation.analyse(r, pixels, None)
    x = vitviz.preprocess(read_image(image), r)
    _, attn = interpret.forward_with_attention(loaded(m), x)  # its own record built anew, as the reference
    for prefix, want_name in ((0, "CLS"), (1, "register 1"), (2, "register 2")):
        drawer = explore_pictures._Drawer(r, ex, explore_pictures.Options(token=r.layout.token(-1 - prefix)))
        assert drawer.who == want_name
        torch.testing.assert_close(drawer._token_row(ex.attn[1, 0]), attn[1][0, 0, prefix, 3:], atol=1e-5, rtol=1e-4)
