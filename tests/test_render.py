"""The pictures: sizes follow the model's geometry, colours come from the map's values, layouts invert."""
import numpy as np
import pytest
import torch
from PIL import Image

from vitviz import gallery, render as R, views
from vitviz.hub import load_model


def test_overlay_size_and_colour_range():
    px = np.zeros((32, 32, 3), np.uint8)
    heat = torch.zeros(8, 8)
    heat[0, 0] = 1.0
    out = R.overlay(px, heat, 256, alpha=1.0, mode="nearest")
    assert out.shape == (256, 256, 3) and out.dtype == np.uint8
    lut = R._lut("inferno")
    assert (out[5, 5] == lut[255]).all() and (out[200, 200] == lut[0]).all()  # hot patch, cold rest
    assert (R.overlay(px, heat, 64, alpha=0.0) == 0).all()  # no map at opacity 0: the black image


def test_colorize_uses_the_given_range():
    m = np.array([[0.0, 0.5], [1.0, 2.0]])
    lut = R._lut("viridis")
    c = R.colorize(m, "viridis", 0.0, 1.0)
    assert (c[0, 0] == lut[0]).all() and (c[1, 0] == lut[255]).all() and (c[1, 1] == lut[255]).all()


def test_pos_tiles_layout_inverts():
    g, size, pad = 8, 20, 2
    sim = torch.eye(g * g)
    img = R.pos_similarity_tiles(sim, tile_size=size, pad=pad)
    assert img.shape == (g * (size + pad) + pad,) * 2 + (3,)
    for k in (0, 9, 27, 63):
        r, c = divmod(k, g)
        x, y = pad + c * (size + pad) + size // 2, pad + r * (size + pad) + size // 2
        assert R.pos_tile_at(x, y, g, size, pad) == k
        # the tile's own position is its brightest pixel (similarity 1 on a -1..1 scale)
        cell = img[y - size // 2:y + size // 2, x - size // 2:x + size // 2]
        assert (cell.reshape(-1, 3) == R._lut("viridis")[255]).all(1).any()
    assert R.pos_tile_at(-5, 10_000, g, size, pad) == (g - 1) * g  # off the edge: the nearest tile


@pytest.mark.parametrize("name", ["cifar10", "mnist"])
def test_explore_pictures_follow_the_model(name):
    model = load_model(name)
    cfg = model.card.config
    pixels = views.image_to_pixels(model, Image.open(gallery.items(name)[0][0]))
    assert pixels.shape == (cfg.image_size, cfg.image_size, cfg.in_chans)
    ex = views.analyse(model, pixels)
    assert ex.attn.shape == (cfg.depth, cfg.num_heads, 1 + cfg.num_patches, 1 + cfg.num_patches)
    v = views.render_explore(model, ex, patch=cfg.num_patches - 1)
    S = views.display_size(cfg)
    assert S % cfg.image_size == 0 and abs(S - 256) <= cfg.image_size / 2 and S >= 32 * cfg.grid_size
    for pic in ("sees", "rollout", "grad_rollout", "head_large", "patch_rollout"):
        assert getattr(v, pic).shape == (S, S, 3), pic
    # layer x head grids: one tile per layer and head
    small = max(48, min(96, 576 // max(cfg.depth, cfg.num_heads)))
    assert v.heads.shape[0] >= cfg.depth * small and v.heads.shape[1] >= cfg.num_heads * small
    assert sum(v.top5.values()) <= 1 + 1e-6 and len(v.top5) == 5
    compact = views.render_explore(model, ex, compact=True)
    assert compact.sees is None and compact.heads is None and compact.rollout is not None
    assert set(compact.pictures()) == {"rollout", "grad_rollout", "rollout_strip"}
