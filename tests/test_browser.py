"""A real headless Chromium, driven by Playwright, uses the page as a visitor would.

Screenshots go to test-artifacts/ (VITVIZ_SCREENSHOTS overrides the folder).
"""
import os
import shutil
from pathlib import Path

import pytest

from test_app import free_port
from vitviz.app import build_demo, launch

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(os.environ.get("VITVIZ_SCREENSHOTS", Path(__file__).resolve().parent.parent / "test-artifacts"))
pytestmark = pytest.mark.usefixtures("small_data")


@pytest.fixture(scope="module")
def page():
    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is not installed (apt-get install chromium); the browser test needs it")
    from playwright.sync_api import sync_playwright

    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True,
                          quiet=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync"])
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.goto(url)
        yield pg
        browser.close()
    demo.close()


def image_src(page, elem_id):
    loc = page.locator(f"#{elem_id} img")
    return loc.first.get_attribute("src") if loc.count() else None


def wait_change(page, elem_id, old, timeout=20_000):
    page.wait_for_function(
        """([id, old]) => { const i = document.querySelector('#' + id + ' img');
                           return i && i.complete && i.naturalWidth > 0 && i.getAttribute('src') !== old; }""",
        arg=[elem_id, old], timeout=timeout)
    return image_src(page, elem_id)


def test_explore_pick_click_fuse(page):
    first = wait_change(page, "sees", None)  # the page opens on an example, already explained
    page.locator("#examples img").nth(12).click()  # another example
    second = wait_change(page, "sees", first)
    box = page.locator("#sees img").first.bounding_box()
    # click the patch in row 2, column 5 of the 8x8 grid
    page.mouse.click(box["x"] + box["width"] * 5.5 / 8, box["y"] + box["height"] * 2.5 / 8)
    wait_change(page, "sees", second)
    page.wait_for_function("() => document.querySelector('#patch-heads img') !== null", timeout=20_000)
    assert page.locator("#patch input").first.input_value() == str(2 * 8 + 5)
    before = image_src(page, "rollout")
    page.locator("#fusion label", has_text="max").click()
    wait_change(page, "rollout", before)
    page.screenshot(path=str(SHOTS / "explore.png"), full_page=True)


def test_model_tab(page):
    page.get_by_role("tab", name="Model").click()
    page.wait_for_function("() => { const i = document.querySelector('#pos-tiles img'); return i && i.naturalWidth > 0; }",
                           timeout=20_000)
    page.screenshot(path=str(SHOTS / "model.png"), full_page=True)


def test_train_start_watch_stop(page):
    page.get_by_role("tab", name="Train").click()
    page.locator("#train-btn").click()
    page.wait_for_function("() => { const i = document.querySelector('#curves img'); return i && i.naturalWidth > 0; }",
                           timeout=60_000)
    first = image_src(page, "curves")
    wait_change(page, "curves", first, timeout=60_000)  # the curve updates while it runs
    page.wait_for_timeout(1000 * float(os.environ.get("VITVIZ_SCREENSHOT_TRAIN_SECONDS", "0")))
    page.locator("#stop-btn").click()
    page.wait_for_function("() => /Stopped|Finished/.test(document.querySelector('#train-status').innerText)",
                           timeout=30_000)
    page.screenshot(path=str(SHOTS / "train.png"), full_page=True)
    before = image_src(page, "sees")
    page.locator("#use-btn").click()
    page.wait_for_function("() => /Trained in this session/.test(document.querySelector('#model-dd input').value)",
                           timeout=20_000)
    wait_change(page, "sees", before)  # the Explore tab now shows the freshly trained model
    assert page.get_by_role("tab", name="Explore").get_attribute("aria-selected") == "true"


def test_compare_tab(page):
    page.get_by_role("tab", name="Compare").click()
    before = image_src(page, "compare-rollout-a")
    page.locator("#compare-btn").click()
    wait_change(page, "compare-rollout-a", before)
    wait_change(page, "compare-rollout-b", None)
    page.screenshot(path=str(SHOTS / "compare.png"), full_page=True)
