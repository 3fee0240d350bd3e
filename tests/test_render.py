"""The pictures: sizes follow the model's geometry, colours come from the map's values, layouts invert."""

import numpy as np
import pytest
import torch
from PIL import Image

from vitviz.data import gallery
from vitviz.models.hub import load_model
from vitviz.models.loaded import TokenLayout
from vitviz.pictures import draw, explanation, input_view, spots
from vitviz.pictures import explore as explore_pictures


def test_overlay_size_and_colour_range():
    px = np.zeros((32, 32, 3), np.uint8)
    heat = torch.zeros(8, 8)
    heat[0, 0] = 1.0
    out = draw.overlay(px, heat, 256, alpha=1.0, mode="nearest")
    assert out.shape == (256, 256, 3) and out.dtype == np.uint8
    lut = draw.colour_table("inferno")
    assert (out[5, 5] == lut[255]).all() and (out[200, 200] == lut[0]).all()  # hot patch, cold rest
    assert (draw.overlay(px, heat, 64, alpha=0.0) == 0).all()  # no map at opacity 0: the black image


def test_colorize_uses_the_given_range():
    m = np.array([[0.0, 0.5], [1.0, 2.0]])
    lut = draw.colour_table("viridis")
    c = draw.colorize(m, "viridis", 0.0, 1.0)
    assert (c[0, 0] == lut[0]).all() and (c[1, 0] == lut[255]).all() and (c[1, 1] == lut[255]).all()


def test_pos_tiles_layout_inverts():
    g, size, pad = 8, 20, 2
    sim = torch.eye(g * g)
    img = draw.pos_similarity_tiles(sim, tile_size=size, pad=pad)
    assert img.shape == (g * (size + pad) + pad,) * 2 + (3,)
    for k in (0, 9, 27, 63):
        r, c = divmod(k, g)
        x, y = pad + c * (size + pad) + size // 2, pad + r * (size + pad) + size // 2
        assert draw.pos_tile_at(x, y, g, size, pad) == k
        # the tile's own position is its brightest pixel (similarity 1 on a -1..1 scale)
        cell = img[y - size // 2 : y + size // 2, x - size // 2 : x + size // 2]
        assert (cell.reshape(-1, 3) == draw.colour_table("viridis")[255]).all(1).any()
    assert draw.pos_tile_at(-5, 10_000, g, size, pad) == (g - 1) * g  # off the edge: the nearest tile


@pytest.mark.parametrize("name", ["cifar10", "mnist"])
def test_explore_pictures_follow_the_model(name):
    model = load_model(name)
    cfg = model.card.config
    pixels = model.pixels(Image.open(gallery.items(name)[0][0]))
    assert pixels.shape == (cfg.image_size, cfg.image_size, cfg.in_chans)
    ex = explanation.analyse(model, pixels)
    assert ex.attn.shape == (cfg.depth, cfg.num_heads, 1 + cfg.num_patches, 1 + cfg.num_patches)
    v, fresh = explore_pictures.render_explore(
        model, ex, explore_pictures.Options(token=model.layout.token(cfg.num_patches - 1))
    )
    S = explanation.display_size(cfg)
    assert S % cfg.image_size == 0 and abs(S - 256) <= cfg.image_size / 2 and S >= 32 * cfg.grid_size
    M = input_view.main_size(cfg)
    assert v.sees.shape[0] == M and v.sees.shape[1] == input_view.cls_box(M, cfg.grid_size)[2] + 4
    for pic in ("rollout", "class_map", "head_large"):  # the map, a title above it, a colour bar under it
        h, w = getattr(v, pic).shape[:2]
        assert w == M and h > M + 40, pic
    # layer x head grids: one tile per layer and head
    small = max(48, min(96, 576 // max(cfg.depth, cfg.num_heads)))
    assert v.heads.shape[0] >= cfg.depth * small and v.heads.shape[1] >= cfg.num_heads * small
    assert sum(v.top5.values()) <= 1 + 1e-6 and len(v.top5) == 5
    compact, _ = explore_pictures.render_explore(model, ex, compact=True)
    assert compact.sees is None and compact.heads is None and compact.rollout is not None
    assert set(compact.pictures()) == {"rollout", "class_map", "rollout_strip"}


def test_a_panel_carries_its_title_and_a_colour_bar_of_its_own_values():
    from vitviz.pictures import panels

    img = np.zeros((64, 64, 3), np.uint8)
    scale = panels.Scale("attention weight", 0.0123, 0.4567)
    p = panels.panel(img, "Layer 2, head 3", scale)
    assert p.shape[1] == 64
    assert p.shape[0] > 64 + 30  # a title above, a bar under
    # the bar's gradient runs through the colour map from its low end to its high end
    lut = draw.colour_table("inferno")
    rows = [
        r
        for r in range(p.shape[0])
        if (np.abs(p[r].astype(int) - lut[250]).sum(-1) < 30).any()
        and (np.abs(p[r].astype(int) - lut[5]).sum(-1) < 30).any()
    ]
    assert rows, "no colour bar found"
    assert panels.Scale("x", 0.0123, 0.4567).ticks() == ["0.012", "0.234", "0.457"]  # the same places for all
    assert panels.Scale("x", 0, 1, relative=True).ticks()[::2] == ["lowest", "highest"]
    assert panels.number(0.00001234) == "0.0000123" and panels.number(0) == "0"  # plain decimals, never 1.2e-05
    # a narrow range gets the places it needs for its ticks to differ, in plain decimals
    assert panels.Scale("x", 0.00383, 0.00384).ticks() == ["0.003830", "0.003835", "0.003840"]
    assert panels.Scale("x", 8e-05, 2.7e-04).ticks() == ["0.000080", "0.000175", "0.000270"]
    assert panels.Scale("x", 0, 20000).ticks() == ["0", "10,000", "20,000"]
    for lo, hi in ((0.1, 0.1000001), (-3e-4, 5e-4), (14.6, 17.7), (0.25, 0.75)):
        ticks = panels.Scale("x", lo, hi).ticks()
        assert len(set(ticks)) == 3 and not any("e" in t for t in ticks), (lo, hi, ticks)


def test_an_untrained_head_gets_a_sentence_not_a_blank_map(tiny_model, tiny):
    from vitviz.pictures import explore as explore_pictures

    torch.nn.init.zeros_(tiny_model.head.weight)
    torch.nn.init.zeros_(tiny_model.head.bias)
    pixels = np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8)
    ex = explanation.analyse(tiny, pixels)
    assert float(ex.grad_rollout.abs().max()) == 0  # nothing to draw ...
    v, _ = explore_pictures.render_explore(tiny, ex)
    assert "starting zeros" in explore_pictures.flat_relevance_reason(tiny)
    grey = (v.class_map == 238).all(-1).mean()
    assert grey > 0.3  # ... so the panel is the grey message box, not a flat colour map


def test_a_click_on_the_input_picks_the_patch_under_it_or_cls(tiny):
    from vitviz.models.vit import make_config

    cfg = make_config("tiny")
    S, g = input_view.main_size(cfg), cfg.grid_size
    layout = TokenLayout(("CLS",), (g, g), cfg.patch_size)
    pic = input_view.sees_picture(np.zeros((cfg.image_size,) * 2 + (3,), np.uint8), g, S, layout)
    x0, y0, x1, y1 = input_view.cls_box(S, g)
    assert pic.shape[1] >= x1 and (pic[y0 + 3 : y1 - 3, x0 + 3 : x1 - 3] != 255).any()  # the CLS tile is drawn there
    step = S / g
    where = input_view.sees_spots(cfg, layout)
    for k in (0, g + 3, g * g - 1):
        r, c = divmod(k, g)
        assert spots.token_at(where, (c + 0.5) * step, (r + 0.5) * step, layout) == layout.token(k)
    assert spots.token_at(where, (x0 + x1) / 2, (y0 + y1) / 2, layout).name == "CLS"
    assert spots.token_at(where, S + 2, S - 2, layout).name == "CLS"  # anywhere right of the grid
    assert spots.token_at(where, (x0 + x1) / 2, S + 5, layout) is None  # below the picture: no token
    pooled = TokenLayout((), (g, g), cfg.patch_size, "pooling query")  # SigLIP: its tile is the pooling query
    assert spots.token_at(input_view.sees_spots(cfg, pooled), (x0 + x1) / 2, (y0 + y1) / 2, pooled).row is None
    assert spots.token_at(input_view.sees_spots(cfg, pooled), step / 2, step / 2, pooled) == pooled.token(0)


@pytest.mark.parametrize("large", (False, True))
def test_a_colour_bar_shows_the_numbers_of_its_scale_read_back_from_its_pixels(large):
    """The ticks as a visitor reads them off the JPEG the page gets (tests/reading.py: letter by letter against
    the font's own letters) are the scale's: distinct plain decimals, the middle one left out only where it
    would crowd the ends."""
    import io

    from reading import read_ticks

    from vitviz.pictures import panels
    from vitviz.pictures.style import Style, drawn_with

    rng = np.random.default_rng(3)
    ranges = [(0.00383, 0.00384), (8e-05, 2.7e-04), (0, 20000), (-11.1, -1.1), (1, 111), (-0.5, 0.5)]
    ranges += [tuple(sorted(rng.random(2) * 10.0 ** rng.integers(-5, 4))) for _ in range(4)]
    with drawn_with(Style.of(large=large)):
        for lo, hi in ranges:
            scale = panels.Scale("attention weight", lo, hi)
            buf = io.BytesIO()
            Image.fromarray(panels.panel(np.zeros((64, 400, 3), np.uint8), "A map", scale)).save(
                buf, format="JPEG", quality=92, subsampling=0
            )
            (read,) = read_ticks(np.asarray(Image.open(buf).convert("RGB")))
            assert read == scale.ticks(), (lo, hi, read)
        relative = panels.panel(np.zeros((64, 400, 3), np.uint8), "", panels.Scale("x", 0, 1, relative=True))
        assert read_ticks(relative) == [["lowest", "", "highest"]]


def test_a_wide_picture_on_a_phone_says_where_its_labels_title_and_colour_bar_are():
    """On a narrow screen a wide panel carries (left, top, bottom): its rows' labels end at `left`, its title
    ends at `top`, its picture at `bottom` (the colour bar under it); the file's name says so (the page's script
    keeps them in view while it scrolls). A wide screen's panel and a narrow picture carry nothing."""
    from vitviz.app.serving import picfiles
    from vitviz.pictures import panels
    from vitviz.pictures.style import Style, drawn_with

    rows = [[np.full((40, 40, 3), 60 * r, np.uint8) for _ in range(9)] for r in range(3)]
    labels = ["layer 1", "layer 2", "layer 12"]
    scale = panels.Scale("attention weight", 0.0, 1.0)
    with drawn_with(Style.of(narrow=True)):
        grid = draw.tile(rows, labels, [f"head {h + 1}" for h in range(9)])
        p = panels.panel(grid, "Attention from CLS in every layer and head", scale)
        small = panels.panel(np.zeros((40, 200, 3), np.uint8), "A narrow one", scale)
    left, top, bottom = p.frozen
    assert left == draw.tile_margins(tuple(labels), True)[0] and grid.shape[1] > 360
    assert bottom - top == grid.shape[0] and np.array_equal(np.asarray(p)[top:bottom], np.asarray(grid))
    assert (np.asarray(p)[:top] < 128).any() and (np.asarray(p)[bottom:] < 128).any()  # words above and under
    assert (np.asarray(grid)[:, :left] < 128).any()  # the labels lie in that column
    assert picfiles.file_name("heads", p).endswith(f"-f{left}-{top}-{bottom}.jpg")
    assert getattr(small, "frozen", None) is None and not picfiles.file_name("x", small).count("-f")
    assert getattr(panels.panel(grid, "On a wide screen", scale), "frozen", None) is None


def test_a_signed_map_is_drawn_on_a_diverging_scale_centred_on_zero():
    """Occlusion's values are signed (hiding a patch can raise the class's probability): its picture's scale
    runs from -a to a, a its largest magnitude, so that 0 is the colour map's white middle; its title says
    what each side means. A map that cannot be negative keeps its own one-way range."""
    model = load_model("cifar10")
    pixels = model.pixels(Image.open(gallery.items("cifar10")[3][0]))
    ex = explanation.analyse(model, pixels)
    occ = explanation.class_map(model, ex, "occlusion")
    assert float(occ.min()) < 0 < float(occ.max())  # this image has patches on both sides
    drawer = explore_pictures._Drawer(model, ex, explore_pictures.Options(method="occlusion", alpha=1.0, smooth=False))
    m = occ.float().view(8, 8)
    scale = explore_pictures.signed_scale(m, "fall", "red: lowers, blue: raises")
    a = float(occ.abs().max())
    assert (scale.lo, scale.hi, scale.cmap) == (-a, a, "RdBu_r") and scale.ticks()[1] == "0"
    white = draw.colour_table("RdBu_r")[127].astype(int)
    assert white.min() > 230  # the middle of the scale is white
    zero_cell = draw.overlay(pixels, torch.zeros(8, 8), 64, "RdBu_r", 1.0, "nearest", -a, a)[4, 4].astype(int)
    assert np.abs(zero_cell - white).max() <= 1  # a value of 0 is drawn white, whatever the range
    pic = drawer.class_map()

    def has(picture, colour):  # a pixel within a few steps of `colour`
        return (np.abs(picture.reshape(-1, 3).astype(int) - colour.astype(int)).max(1) <= 8).any()

    blue, red = draw.colour_table("RdBu_r")[[2, 253]]
    assert has(pic, blue) and has(pic, red)  # its colour bar is the diverging one, both ends drawn
    legrad = explore_pictures._Drawer(
        model, ex, explore_pictures.Options(method="LeGrad", alpha=1.0, smooth=False)
    ).class_map()
    assert not has(legrad, blue)  # a one-way map keeps its one-way scale
    assert explore_pictures.METHODS["occlusion"].sides and not explore_pictures.METHODS["LeGrad"].sides


@pytest.mark.parametrize("width,size", [(600, 15), (300, 15), (420, 22)])
def test_titles_written_word_by_word_read_as_pils_own_text(width, size):
    """text.write draws each word once and reuses it; the block must look as PIL's ImageDraw.text draws the
    same lines (same wrapping, every stroke within a pixel of PIL's: only kerning across two words is left out)."""
    from PIL import ImageDraw

    from vitviz.pictures import panels
    from vitviz.pictures.text import font

    title = "Attention from patch 17 (row 2, column 1) in layer 5, head 3; the patch itself at the others' maximum"
    ours = panels.text_block(title, width, size, (30, 30, 30))
    f, lines, line = font(size), [], ""
    for word in title.split():  # greedy wrapping measured by PIL, written out here
        if line and f.getlength(f"{line} {word}") > width - 8:
            lines, line = [*lines, line], word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    pil = Image.new("RGB", (width, 4 + (size + 4) * len(lines)), (255, 255, 255))
    for i, text in enumerate(lines):
        x = round((width - f.getlength(text)) / 2)  # on a whole pixel, as the words are placed
        ImageDraw.Draw(pil).text((x, 2 + i * (size + 4)), text, fill=(30, 30, 30), font=f)
    pil = np.asarray(pil)
    assert ours.shape == pil.shape
    for axis in (0, 1):  # the ink's extent along each axis, row by row and column by column
        a, b = (np.flatnonzero((p < 128).any(axis=(2, 1 - axis))) for p in (ours, pil))
        assert abs(a[0] - b[0]) <= 1 and abs(a[-1] - b[-1]) <= 1
    ink = [(p < 128).all(axis=2) for p in (ours, pil)]
    near = [m | np.roll(m, 1, axis=1) | np.roll(m, -1, axis=1) for m in ink]  # within a pixel sideways
    assert not (ink[0] & ~near[1]).any() and not (ink[1] & ~near[0]).any()  # kerning across two words is left out
    assert abs(int(ink[0].sum()) - int(ink[1].sum())) <= 0.05 * ink[1].sum()


def test_a_long_model_name_wraps_whole_and_is_never_cut_at_the_ends():
    from vitviz.pictures import panels
    from vitviz.pictures.text import text_width

    name = "vit_small_patch14_reg4_dinov2.lvd142m"
    for width in (60, 150, 220):
        lines = panels.wrap(f"Rollout of {name}", width, 15)
        assert all(text_width(line, 15) <= width for line in lines), lines
        assert "".join(lines).replace(" ", "") == f"Rolloutof{name}"  # every letter, in order
    assert panels.wrap(f"Rollout of {name}", 150, 15)[1:] == ["vit_small_patch14_", "reg4_dinov2.lvd142m"]


def test_every_token_before_the_patches_has_a_tile_beside_the_grid_and_is_chosen_there():
    """CLS and 4 registers (DINOv2's), and CLS with a distillation token: a tile each, top down; a click on a tile
    is that token; the selected one (a register) is outlined, and no other tile is."""
    from vitviz.models.vit import make_config
    from vitviz.pictures.draw import HIGHLIGHT

    cfg = make_config("tiny")
    S, g = input_view.main_size(cfg), cfg.grid_size
    for prefix in (("CLS", "register 1", "register 2", "register 3", "register 4"), ("CLS", "distillation")):
        layout = TokenLayout(prefix, (g, g), cfg.patch_size)
        tiles = input_view.token_tiles(S, g, layout)
        assert [t[4] for t in tiles] == [input_view.short_name(n) for n in prefix] and tiles[-1][3] <= S
        where = input_view.sees_spots(cfg, layout)
        for k, (x0, y0, x1, y1, _) in enumerate(tiles):
            token = spots.token_at(where, (x0 + x1) / 2, (y0 + y1) / 2, layout)
            assert token.patch is None and token.name == prefix[k] and token.row == k
        chosen = layout.token(-len(prefix))  # the last token before the patches
        pic = input_view.sees_picture(np.zeros((cfg.image_size,) * 2 + (3,), np.uint8), g, S, layout, chosen)
        for k, (x0, y0, x1, y1, _) in enumerate(tiles):
            outlined = (pic[y0, x0:x1] == HIGHLIGHT).all(-1).mean() > 0.9
            assert outlined == (k == len(prefix) - 1), (prefix, k)
