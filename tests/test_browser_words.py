"""CLIP asked in words, in a real headless Chromium: a photo, three labels typed, one picked; the scores and the maps
are drawn again, and the link to the view carries the labels. The menu's CLIP and SigLIP 2 entries are tiny random
models in a Hugging Face cache this test writes (no hub is reached)."""

import os
import shutil
from urllib.parse import parse_qs, urlparse

import pytest
from helpers import chromium, free_port, image_src, open_on_photo, wait_change
from hf_cache import write_cache
from PIL import Image, ImageDraw

from vitviz.app import build_demo, launch, menu

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.usefixtures("small_data")
ENTRIES = {"openai/clip-vit-base-patch16": "clip", "google/siglip2-base-patch16-224": "siglip"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import huggingface_hub.constants as hf

    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is not installed (apt-get install chromium); the browser test needs it")
    from playwright.sync_api import sync_playwright

    cache = write_cache(tmp_path_factory.mktemp("hub"), ENTRIES)
    mp = pytest.MonkeyPatch()
    mp.setattr(hf, "HF_HUB_CACHE", str(cache))
    mp.setattr(menu, "MODELS", menu.SharedModels())
    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    path = tmp_path_factory.mktemp("photo") / "photo.png"
    im = Image.new("RGB", (640, 480), (120, 170, 230))
    ImageDraw.Draw(im).ellipse([250, 150, 390, 290], fill=(210, 40, 40))
    im.save(path)
    with sync_playwright() as p:
        b = chromium(p)
        yield b, url, str(path)
        b.close()
    demo.close()
    mp.undo()


def choose(page, elem_id: str, option: str) -> None:
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option", name=option, exact=True).click()


@pytest.mark.parametrize("key", ["hf:openai/clip-vit-base-patch16", "hf:google/siglip2-base-patch16-224"])
def test_labels_typed_on_a_photo_redraw_the_scores_and_maps_and_go_in_the_link(served, key):
    b, url, path = served
    page = b.new_page(viewport={"width": 1400, "height": 1000})
    try:
        open_on_photo(page, url, path)
        label = next(lbl for lbl, k in menu.model_choices() if k == key)
        assert "on this machine" in label
        before = image_src(page, "class-map")
        choose(page, "model-dd", label)
        page.locator("#labels textarea, #labels input").first.wait_for(state="visible", timeout=60_000)
        before = wait_change(page, "class-map", before, timeout=90_000)
        box = page.locator("#labels textarea, #labels input").first
        box.fill("cat, dog, red car")
        box.press("Enter")
        page.wait_for_function("() => /red car/.test(document.querySelector('#top5')?.innerText || '')", timeout=60_000)
        assert "cat" in page.locator("#top5").inner_text() and "dog" in page.locator("#top5").inner_text()
        choose(page, "target", "red car")
        wait_change(page, "class-map", before, timeout=90_000)  # the map of the picked label
        for note in ("#model-note", "#target-note"):
            text = page.locator(note).inner_text() if page.locator(note).count() else ""
            assert "⚠️" not in text, text
        page.locator("#link-btn").click()
        page.wait_for_function(
            "() => /labels=/.test(document.querySelector('#link-url input')?.value || '')", timeout=20_000
        )
        query = parse_qs(urlparse(page.locator("#link-url input").first.input_value()).query)
        assert query["labels"] == ["cat, dog, red car"] and query["class"] == ["red car"]
        assert query["model"] == [key]
    finally:
        page.close()
