"""The Step by step tab's engine: the logit lens against forward hooks, every stage for every kind of model."""

import numpy as np
import pytest
import torch
from helpers import Evt, skipped
from PIL import Image

import vitviz
from vitviz.app import menu
from vitviz.app.state import Visitor
from vitviz.app.tabs import steps as steps_tab
from vitviz.data import gallery
from vitviz.explain import interpret
from vitviz.models.hub import load_model
from vitviz.pictures import explanation, steps

EXAMPLE = gallery.items("cifar10")[3][0]


def lens_by_hooks(model, blocks, norm, head, x):
    """The logit lens written out: hooks on the blocks keep each output's CLS token, then norm, head, softmax."""
    kept = []
    handles = [
        b.register_forward_hook(lambda m, a, out: kept.append((out[0] if isinstance(out, tuple) else out)[:, 0]))
        for b in blocks
    ]
    with torch.no_grad():
        model.eval()
        logits = model(x)
    for h in handles:
        h.remove()
    return torch.stack([head(norm(k)).softmax(-1) for k in kept], 1), logits


@pytest.mark.parametrize("name", ["cifar10", "mnist"])
def test_logit_lens_matches_hooks_and_ends_at_the_prediction(name):
    model = load_model(name)
    cfg = model.card.config
    x = torch.randn(3, cfg.in_chans, cfg.image_size, cfg.image_size)
    m = model.module  # the reference reads the network itself
    want, logits = lens_by_hooks(m, m.blocks, m.norm, m.head, x)
    got = interpret.logit_lens(model, x)
    assert got.shape == (3, cfg.depth, cfg.num_classes)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got[:, -1], logits.softmax(-1), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got.sum(-1), torch.ones(3, cfg.depth))


@pytest.fixture(scope="module")
def vit():
    return vitviz.load_model("vit_b_16", pretrained=False)


def test_logit_lens_of_vit_b_16(vit):
    x = torch.randn(1, 3, 224, 224)
    m = vit.module
    want, logits = lens_by_hooks(m, m.encoder.layers, m.encoder.ln, m.heads, x)
    got = interpret.logit_lens(vit, x)
    assert got.shape == (1, 12, 1000)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got[:, -1], logits.softmax(-1), atol=1e-5, rtol=1e-4)


def test_walk_tensors_are_the_stages_of_the_forward_pass():
    model = load_model("cifar10")
    x = torch.randn(2, 3, 32, 32)
    w = interpret.walk(model, x)
    m = model.module
    with torch.no_grad():
        patches = m.patch_embed(x)
        tokens = torch.cat([m.cls_token.expand(2, -1, -1), patches], 1) + m.pos_embed
    torch.testing.assert_close(w["patches"], patches)
    torch.testing.assert_close(w["tokens"], tokens)
    torch.testing.assert_close(w["logits"], model(x))
    assert w["blocks"].shape == (2, 6, 65, 192) and w["attn"].shape == (2, 6, 6, 65, 65)


@pytest.mark.parametrize("name", ["cifar10", "mnist", "vit_b_16"])
def test_every_stage_renders_and_names_the_models_numbers(name, vit):
    model = vit if name == "vit_b_16" else load_model(name)
    cfg = vitviz.models.card.card_of(model).config
    pixels = model.pixels(Image.open(gallery.items("mnist" if name == "mnist" else "cifar10")[0][0]))
    w = steps.walk_image(model, pixels)
    view, fresh = steps.render_steps(model, w, block=cfg.depth, token=model.layout.token(cfg.num_patches - 1))
    assert fresh == {n for n, _ in steps_tab.STAGES}
    for n, _ in steps_tab.STAGES:
        pic = getattr(view, n)
        assert isinstance(pic, np.ndarray) and pic.ndim == 3 and pic.shape[2] == 3 and pic.shape[0] > 50, n
    assert (
        f"{cfg.num_patches} x {cfg.patch_size**2 * cfg.in_chans} -> {cfg.num_patches} x {cfg.embed_dim}"
        in view.embedding_text
    )
    assert f"{cfg.grid_size}x{cfg.grid_size} grid" in view.input_text and f"{cfg.depth} blocks" in view.block_text
    # another block redraws that stage alone
    cache = steps.PictureCache()
    steps.render_steps(model, w, 1, None, cache)
    _, fresh = steps.render_steps(model, w, 2, None, cache)
    assert fresh == {"block"}


def test_the_lens_sentence_says_where_the_prediction_locks_in():
    w = steps.Walk(
        None,
        None,
        None,
        None,
        None,
        None,
        torch.tensor([[0.6, 0.4], [0.3, 0.7], [0.6, 0.4], [0.2, 0.8], [0.1, 0.9]]),
        torch.tensor([0.0, 1.0]),
    )
    assert steps.locks_in(w.lens) == 4


def test_the_steps_handler_and_its_errors():
    out = steps_tab.step_page({"path": EXAMPLE}, "cifar10", 3, 21, None, None, Visitor())
    assert len(out) == len(steps.STEP_NAMES) + 3 and out[-2] == "" and "patch 21" in out[-1] and "block 3" in out[-1]
    names = steps.STEP_NAMES
    assert "After block 3" in out[names.index("block_text")]
    bad = steps_tab.step_page({"path": EXAMPLE}, "cifar10", 3, 99, None, None, Visitor())
    assert "Token 99" in bad[-2]


def test_the_tab_follows_the_image_only_while_it_is_open():
    v = Visitor()
    closed = steps_tab.follow({"path": EXAMPLE}, "cifar10", 1, -1, None, None, v)
    assert all(isinstance(o, dict) and o.get("__type__") == "update" for o in closed[: len(steps.STEP_NAMES)])
    opened = steps_tab.open_tab({"path": EXAMPLE}, "cifar10", 1, -1, None, None, v)
    assert isinstance(opened[0], str) and v.crossing.looking == "steps"  # drawn: a picture file
    other = gallery.items("cifar10")[5][0]
    moved = steps_tab.follow({"path": other}, "cifar10", 1, -1, None, None, v)
    assert isinstance(moved[steps.STEP_NAMES.index("input")], str)  # a new image, redrawn while open
    menu.look_at("explore")(v)
    assert v.crossing.looking == "explore"
    left = steps_tab.follow(
        {"path": EXAMPLE}, "cifar10", 1, -1, None, None, v
    )  # another tab is looked at: nothing sent
    assert all(isinstance(o, dict) and o.get("__type__") == "update" for o in left[: len(steps.STEP_NAMES)])


def test_the_explore_view_draws_the_same_logit_lens_from_its_own_forward_pass():
    model = load_model("cifar10")
    pixels = model.pixels(Image.open(EXAMPLE))
    ex = explanation.analyse(model, pixels)
    x = model.tensor(pixels)
    from vitviz.data.images import pixels_to_tensor  # the record's tensor is the plain normalisation, on its device

    torch.testing.assert_close(x, pixels_to_tensor(pixels, model.card.mean, model.card.std))
    torch.testing.assert_close(ex.lens, interpret.logit_lens(model, x)[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ex.lens[-1], ex.probs, atol=1e-5, rtol=1e-4)


def test_a_click_on_any_stage_picks_the_token_under_it():
    v = Visitor()
    model = menu.resolve_model("cifar10")
    cfg, K = model.card.config, model.layout.num_prefix
    view, _, v = steps_tab.step_view({"path": EXAMPLE}, "cifar10", 2, -1, state=v)
    for name in steps_tab.CLICKABLE:
        assert view.spots[name], name
        picture = getattr(view, name)
        for spot in view.spots[name]:  # every spot lies inside its picture, and its cells are tokens of the model
            assert 0 <= spot.x and spot.x + spot.cw * spot.cols <= picture.shape[1] + 1, (name, spot)
            assert 0 <= spot.y and spot.y + spot.ch * spot.rows <= picture.shape[0] + 1, (name, spot)
            assert 0 <= spot.first and spot.first + spot.count <= K + cfg.num_patches

    def pick(name, x, y):  # the number the token control is set to, in the one event the click causes
        out = steps_tab.picker(name)({"path": EXAMPLE}, "cifar10", 2, -1, None, None, v, Evt([x, y]))
        return dict(zip(steps_tab.TOKEN_PAGE.names, out))["patch"]

    s = view.spots["input"][0]  # stage 1's grid: row 2, column 5 is patch 21; the CLS tile is -1
    assert pick("input", s.x + 5.5 * s.cw, s.y + 2.5 * s.ch) == 21
    cls = view.spots["input"][1]
    assert pick("input", cls.x + cls.cw / 2, cls.y + cls.ch / 2) == -1
    s = view.spots["sequence"][0]  # the sequence: the 20th tile is patch 19
    assert pick("sequence", s.x + (19 % s.cols + 0.5) * s.cw, s.y + (19 // s.cols + 0.5) * s.ch) == 19
    rows = view.spots["positions"][0]  # the token matrix: row 0 is CLS, row K + 7 is patch 7
    assert pick("positions", rows.x + 5, rows.y + 0.5 * rows.ch) == -1
    assert pick("positions", rows.x + 5, rows.y + (K + 7.5) * rows.ch) == 7
    for s in view.spots["block"]:  # each head's tile and the norms: row 3, column 1 is patch 25
        assert pick("block", s.x + 1.5 * s.cw, s.y + 3.5 * s.ch) == 3 * cfg.grid_size + 1
    assert skipped(pick("block", 0, 0))  # the title: no token
    # the attention tile really is where the spot says: the selected patch's own overlay differs from its neighbour
    after, _, v = steps_tab.step_view({"path": EXAMPLE}, "cifar10", 2, 25, state=v)
    assert not np.array_equal(after.input, view.input)
