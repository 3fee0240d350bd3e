"""The model menu's timm entries in a real headless Chromium: each one, on a photo, draws its pictures and shows
no error. Their weights are random ones in a Hugging Face cache this test writes (no hub is reached)."""

import os
import re
import shutil

import pytest
from helpers import chromium, colour_bars_read, free_port, image_src, open_on_photo, wait_change, write_hub_cache
from PIL import Image, ImageDraw

from vitviz.app import build_demo, launch, menu

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.usefixtures("small_data")
ENTRIES = [k for k in menu.SHARED if k.startswith("timm/")]


def photo(path):
    """A 640 x 480 picture with a sky, a ground and a red disc: a photo's size and shape, not a 32-px thumbnail."""
    im = Image.new("RGB", (640, 480), (120, 170, 230))
    d = ImageDraw.Draw(im)
    d.rectangle([0, 300, 640, 480], fill=(90, 140, 60))
    d.ellipse([250, 150, 390, 290], fill=(210, 40, 40))
    im.save(path)
    return str(path)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import huggingface_hub.constants as hf

    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is not installed (apt-get install chromium); the browser test needs it")
    from playwright.sync_api import sync_playwright

    cache = tmp_path_factory.mktemp("hub")
    for key in ENTRIES:
        write_hub_cache(cache, key.removeprefix("timm/"))
    mp = pytest.MonkeyPatch()
    mp.setattr(hf, "HF_HUB_CACHE", str(cache))
    mp.setattr(menu, "MODELS", menu.SharedModels())
    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    with sync_playwright() as p:
        b = chromium(p)
        yield b, url, photo(tmp_path_factory.mktemp("photo") / "photo.png")
        b.close()
    demo.close()
    mp.undo()


@pytest.mark.parametrize("key", ENTRIES)
def test_each_timm_entry_draws_a_photo(served, key):
    b, url, path = served
    page = b.new_page(viewport={"width": 1400, "height": 1000})
    try:
        before = open_on_photo(page, url, path)
        label = next(lbl for lbl, k in menu.model_choices() if k == key)
        assert "on this machine" in label
        page.locator("#model-dd input").click()
        page.get_by_role("option", name=label).click()
        for name in ("rollout", "class-map", "head-large"):
            wait_change(page, name, before if name == "rollout" else None, timeout=90_000)
        assert colour_bars_read(page, url, ("rollout", "class-map", "head-large")) >= 2
        note = page.locator("#model-note").inner_text()
        assert "⚠️" not in note, note
        assert "could not" not in page.locator("#explore-top").inner_text()
        if "no classifier" in label:  # the top-5 box may arrive after the maps on a loaded machine
            from playwright.sync_api import expect

            expect(page.locator("#top5")).to_contain_text("no classifier", ignore_case=True, timeout=60_000)
        if "registers" in label:  # a register is a token to select: its maps are drawn from it
            old = image_src(page, "head-large")
            page.locator("#prefix-token input").click()
            page.get_by_role("option", name="register 2").click()
            wait_change(page, "head-large", old, timeout=90_000)
            assert "selected token: register 2" in page.locator("#summary").inner_text()
            assert page.locator("#patch input").input_value() == "-3"
        page.screenshot(
            path=str(os.environ.get("VITVIZ_SCREENSHOTS", "/tmp")) + f"/{key.split('/')[1]}.png", full_page=False
        )
    finally:
        page.close()


def test_a_photo_on_the_cifar_model_is_told_what_to_use_and_switched_keeping_the_photo(served):
    """A 640 x 480 photo on the shipped CIFAR-10 model: one line says the model cannot know it and names DeiT-S;
    its button switches the menu to DeiT-S, and the model then sees the photo (sky above, grass below), not an
    example in its place."""
    import io

    import httpx
    import numpy as np
    from playwright.sync_api import expect

    from vitviz.app.switch import PHOTO_MODEL

    b, url, path = served
    page = b.new_page(viewport={"width": 1280, "height": 720})
    try:
        open_on_photo(page, url, path)
        expect(page.locator("#image-note")).to_contain_text("DeiT-S", timeout=30_000)
        assert "CIFAR-10" in page.locator("#image-note").inner_text()
        before = image_src(page, "sees")
        page.locator("#photo-switch").click()
        wait_change(page, "sees", before, timeout=90_000)
        label = next(lbl for lbl, k in menu.model_choices() if k == PHOTO_MODEL)
        assert page.locator("#model-dd input").input_value() == label
        assert "in its place" not in page.locator("#model-note").inner_text()
        expect(page.locator("#photo-switch")).to_be_hidden()
        src = image_src(page, "sees")
        seen = np.asarray(Image.open(io.BytesIO(httpx.get(src if src.startswith("http") else url + src).content)))
        h = min(seen.shape[:2])  # the grid is square, at the left of the picture
        sky, grass = (
            seen[h // 10 : h // 5, h // 10 : h // 3].mean((0, 1)),
            seen[-h // 5 : -h // 10, : h // 3].mean((0, 1)),
        )
        assert sky[2] > sky[0] + 40 and grass[1] > grass[0] + 20 and grass[1] > grass[2], (sky, grass)
    finally:
        page.close()


BARRED = ("rollout", "class-map", "head-large", "rollout-strip", "lens", "heads", "norms")  # Explore's maps


def srcs(page) -> dict:
    return {name: image_src(page, name) for name in BARRED}


def all_changed(page, old: dict, timeout: float = 90_000) -> dict:
    """Wait until every picture named in `old` shows another file than there (loaded or not: a picture below the
    fold loads when scrolled to); the srcs of BARRED's."""
    page.wait_for_function(
        """(old) => Object.entries(old).every(([id, src]) => {
               const i = document.querySelector('#' + id + ' img'); return i && i.getAttribute('src') !== src; })""",
        arg=old,
        timeout=timeout,
    )
    return srcs(page)


CLASS_WORDS = re.compile(r"\bpredict\w*|\bclass(es)?\b|\blogit\b", re.IGNORECASE)


@pytest.mark.parametrize("width,height,large", ((1280, 720, False), (1280, 720, True), (390, 844, False)))
def test_dinov2_with_registers_speaks_of_its_features_and_a_register_is_chosen_on_its_tile(
    served, width, height, large
):
    """DINOv2 with 4 registers (no classifier): its colour bars' numbers (ranges as narrow as 0.00383 to 0.00384
    with random weights) read as distinct plain decimals; no word of Explore or Step by step speaks of
    predicting or of a class; the grid
    has a tile for each register beside it, and a click on register 2's tile redraws every map from that
    register and outlines that tile, and no other."""
    import io

    import httpx
    import numpy as np
    from playwright.sync_api import expect

    from vitviz.pictures.draw import HIGHLIGHT
    from vitviz.pictures.input_view import main_size, short_name, token_tiles

    key = ENTRIES[-1]
    b, url, path = served
    page = b.new_page(viewport={"width": width, "height": height})
    try:
        open_on_photo(page, url, path)
        if large:
            page.locator("#large-type input").check()
        shown = srcs(page)
        page.locator("#model-dd input").click()
        page.get_by_role("option", name=next(lbl for lbl, k in menu.model_choices() if k == key)).click()
        shown = all_changed(page, shown)
        assert colour_bars_read(page, url, BARRED) >= 3  # its narrow ranges (random weights) in plain decimals
        words = page.locator("body").inner_text()  # what is on the page (the other tabs are hidden)
        assert not CLASS_WORDS.search(words), words[CLASS_WORDS.search(words).start() - 80 :][:160]
        page.get_by_role("tab", name="Step by step").click()
        expect(page.locator("body")).to_contain_text("Explore shows its features instead", timeout=90_000)
        words = page.locator("body").inner_text()
        assert not CLASS_WORDS.search(words), words[CLASS_WORDS.search(words).start() - 80 :][:160]
        page.get_by_role("tab", name="Explore").click()

        model = menu.resolve_model(key)
        cfg, layout = model.card.config, model.layout
        S, g = main_size(cfg), cfg.grid_size
        tiles = token_tiles(S, g, layout)
        assert [t[4] for t in tiles] == ["CLS", "reg 1", "reg 2", "reg 3", "reg 4"]
        img = page.locator("#sees img")
        img.scroll_into_view_if_needed()
        box = img.bounding_box()
        scale = box["width"] / page.evaluate("() => document.querySelector('#sees img').naturalWidth")
        x0, y0, x1, y1, word = tiles[2]
        assert word == short_name("register 2")
        before = image_src(page, "head-large")
        img.click(position={"x": (x0 + x1) / 2 * scale, "y": (y0 + y1) / 2 * scale})
        page.wait_for_function(
            "() => /selected token: register 2/.test(document.querySelector('#summary').innerText)", timeout=90_000
        )
        token_maps = ("rollout", "class-map", "head-large", "rollout-strip", "heads")  # those drawn from a token
        all_changed(page, {name: shown[name] for name in token_maps})
        assert image_src(page, "head-large") != before
        assert page.locator("#patch input").input_value() == "-3"
        src = image_src(page, "sees")
        sees = np.asarray(Image.open(io.BytesIO(httpx.get(src if src.startswith("http") else url + src).content)))
        for k, (a0, b0, a1, b1, _) in enumerate(tiles):
            edge = np.abs(sees[b0 + 1, a0 + 4 : a1 - 4].astype(int) - HIGHLIGHT).sum(-1) < 60
            assert (edge.mean() > 0.8) == (k == 2), (k, edge.mean())
    finally:
        page.close()
