"""The story across tabs, in a real Chromium: one image and one set of choices per visitor, followed by every
tab, kept across a model switch; the sticky Step-by-step controls; the signed occlusion map's scale; the probe
pictures of a live run; a link to the view; every tab on a phone; plain words everywhere.

Screenshots go to test-artifacts/ (VITVIZ_SCREENSHOTS overrides the folder): Explore at every size with Large
type off and on.
"""

import io
import re
import tempfile
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from helpers import SHOTS, colour_bars_read, image_src, open_page, settled, wait_change
from PIL import Image

from vitviz.data import gallery

pytestmark = pytest.mark.usefixtures("small_data")
SIZES = ((1280, 720), (390, 844))
FIRST_MAPS = ("rollout", "class-map", "head-large")  # the first screen's maps, each with its colour bar
TABS = ("Explore", "Step by step", "Take patches away", "Model", "Train", "Compare")
PYTHON_NAMES = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|Traceback|\bErrno\b")


def value(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id} input").first.input_value()


def pick(page, elem_id: str, option: str) -> None:
    page.locator(f"#{elem_id} input").first.click()
    page.get_by_role("option", name=option, exact=True).click()


def set_number(page, elem_id: str, number: int) -> None:
    box = page.locator(f"#{elem_id} input[type=number]").first
    box.fill(str(number))
    box.press("Enter")


def upload(page, path: str) -> None:
    """The visitor's own image, through the Upload button's file chooser."""
    with page.expect_file_chooser() as chooser:
        page.locator("#upload-btn").click()
    chooser.value.set_files(path)


def marked(page) -> int:
    """How many examples the gallery marks as shown."""
    return page.locator("#examples .thumbnail-item.selected").count()


def picture(page, elem_id: str) -> np.ndarray:
    """The picture #elem_id shows, as pixels (fetched as the browser fetched it)."""
    src = page.locator(f"#{elem_id} img").first.get_attribute("src")
    with urllib.request.urlopen(src if src.startswith("http") else page.url.split("?")[0].rstrip("/") + src) as r:
        data = r.read()
    with tempfile.NamedTemporaryFile(suffix=".png") as f:
        f.write(data)
        f.flush()
        return np.asarray(Image.open(f.name).convert("RGB"))


def photo(tmp_path: Path) -> str:
    path = tmp_path / "my-photo.png"
    rng = np.random.default_rng(1)
    Image.fromarray((rng.random((48, 48, 3)) * 255).astype(np.uint8)).save(path)
    return str(path)


@pytest.mark.parametrize("width,height", SIZES)
def test_the_image_and_the_choices_survive_a_model_switch_and_a_tab_change(browser, tmp_path, width, height):
    pg = open_page(browser, width, height)
    try:
        before = image_src(pg, "sees")
        upload(pg, photo(tmp_path))
        wait_change(pg, "sees", before)  # (on a phone, perhaps the pictures redrawn for its width first)
        pg.wait_for_function("() => !document.querySelector('#examples .thumbnail-item.selected')", timeout=30_000)
        mine = image_src(pg, "sees")  # no example is shown, so none is marked
        set_number(pg, "patch", 27)
        pg.wait_for_function("() => /patch 27/.test(document.querySelector('#summary').innerText)", timeout=30_000)
        pick(pg, "target", "cat")
        pg.wait_for_function("() => /cat/.test(document.querySelector('#summary').innerText)", timeout=30_000)
        cmap = image_src(pg, "class-map")
        pick(pg, "method", "LeGrad")
        wait_change(pg, "class-map", cmap)
        # a tab change: Step by step follows the token and the layer
        pg.get_by_role("tab", name="Step by step").click()
        wait_change(pg, "step-block", None)
        assert "patch 27" in pg.locator("#step-following").inner_text()  # Explore's token, the one token control
        set_number(pg, "step-block-n", 3)  # ... and a choice made there is Explore's too
        pg.get_by_role("tab", name="Explore").click()
        pg.wait_for_function("() => document.querySelector('#layer input[type=number]').value === '3'", timeout=10_000)
        # to MNIST: a digit stands in for the photo, said beside the menu; the token stays, the class cannot
        pick(pg, "model-dd", "MNIST ViT (shipped)")
        wait_change(pg, "sees", mine)
        pg.wait_for_function(
            "() => /in its place/.test(document.querySelector('#model-note').innerText)", timeout=30_000
        )
        assert marked(pg) == 1 and value(pg, "patch") == "27"
        assert "no class 'cat'" in pg.locator("#model-note").inner_text()
        # and back: the visitor's own photo, unmarked, the token still 27
        pick(pg, "model-dd", "CIFAR-10 ViT (shipped)")
        pg.wait_for_function("() => /back/.test(document.querySelector('#model-note').innerText)", timeout=30_000)
        pg.wait_for_function("() => !document.querySelector('#examples .thumbnail-item.selected')", timeout=10_000)
        assert value(pg, "patch") == "27" and value(pg, "method") == "LeGrad"
        pg.wait_for_function("() => /patch 27/.test(document.querySelector('#summary').innerText)", timeout=30_000)
    finally:
        pg.close()


@pytest.mark.parametrize("width,height", SIZES)
def test_compare_follows_the_explore_image_and_its_class(browser, width, height):
    pg = open_page(browser, width, height)
    try:
        pg.get_by_role("tab", name="Compare").click()
        first = wait_change(pg, "compare-rollout-a", None)
        assert "head randomised" in value(pg, "compare-b")  # the default pair fits the image
        pg.get_by_role("tab", name="Explore").click()
        before = image_src(pg, "sees")
        pg.locator("#examples img").nth(12).click()
        wait_change(pg, "sees", before)
        pick(pg, "target", "dog")
        pg.get_by_role("tab", name="Compare").click()
        wait_change(pg, "compare-rollout-a", first)  # the new Explore image, drawn on opening
        assert value(pg, "compare-target") == "dog"  # one class control, shared with Explore
        pg.wait_for_function(
            "() => /head randomised: top 5/.test(document.body.innerText)", timeout=20_000
        )  # each side names its model
    finally:
        pg.close()


@pytest.mark.parametrize("width,height", SIZES)
def test_the_step_by_step_controls_stay_in_view(browser, width, height):
    pg = open_page(browser, width, height)
    try:
        pg.get_by_role("tab", name="Step by step").click()
        block = wait_change(pg, "step-block", None)
        pg.locator("#step-head").scroll_into_view_if_needed()  # far down the page
        bar = pg.locator("#step-controls").bounding_box()
        assert -1 <= bar["y"] <= 40 and bar["height"] < height / 2, bar  # stuck at the top
        set_number(pg, "step-block-n", 2)  # used from there, it changes stage 5
        wait_change(pg, "step-block", block)
        stage = pg.locator("#step-sequence img").first
        stage.scroll_into_view_if_needed()
        sequence = image_src(pg, "step-sequence")
        b = stage.bounding_box()
        pg.mouse.click(b["x"] + 12, b["y"] + 12)  # a token picked in another stage's picture: patch 0
        wait_change(pg, "step-sequence", sequence)
        pg.wait_for_function("() => /patch 0 /.test(document.querySelector('#step-following').innerText)")
        pg.get_by_role("tab", name="Explore").click()  # the token picked there is Explore's: its pictures follow
        pg.wait_for_function("() => /token: patch 0 /.test(document.querySelector('#summary').innerText)")
        assert value(pg, "patch") == "0"
        pg.get_by_role("tab", name="Step by step").click()
        pg.screenshot(path=str(SHOTS / f"steps-sticky-{width}x{height}.png"))
    finally:
        pg.close()


@pytest.mark.parametrize("width,height", SIZES)
def test_occlusion_is_drawn_on_a_scale_centred_on_zero(browser, width, height):
    pg = open_page(browser, width, height)
    try:
        before = image_src(pg, "class-map")
        pick(pg, "method", "occlusion")
        wait_change(pg, "class-map", before, timeout=60_000)
        pic = picture(pg, "class-map").astype(int)
        r, b = pic[..., 0], pic[..., 2]
        # the colour bar: one row running from deep blue through white to deep red (RdBu, zero in the middle)
        rows = [y for y in range(pic.shape[0]) if ((b - r)[y] > 80).sum() > 10 and ((r - b)[y] > 80).sum() > 10]
        assert rows, "no diverging colour bar in the occlusion picture"
        row = pic[rows[-1]].astype(int)  # the lowest such row: the bar, under the map
        cols = np.nonzero(np.abs(row - 255).sum(-1) > 30)[0]
        ends = row[cols[0] + 2], row[cols[-1] - 2]
        assert ends[0][2] > ends[0][0] + 60 and ends[1][0] > ends[1][2] + 60  # blue at one end, red at the other
        mid = row[(cols[0] + cols[-1]) // 2]
        assert mid.min() > 200  # near white: the zero sits inside the bar
    finally:
        pg.close()


def test_the_probe_pictures_change_while_a_run_goes(browser):
    pg = open_page(browser, 1280, 720)
    try:
        pg.get_by_role("tab", name="Train").click()
        pg.locator("#train-btn").click()
        first = wait_change(pg, "probes", None, timeout=60_000)  # drawn early in the run ...
        wait_change(pg, "probes", first, timeout=60_000)  # ... and again while it learns
        assert "Finished" not in pg.locator("#train-status").inner_text()
        pg.locator("#stop-btn").click()
        pg.wait_for_function(
            "() => /Stopped|Finished/.test(document.querySelector('#train-status').innerText)", timeout=60_000
        )
        text = pg.locator("body").inner_text()
        assert "below training loss" in text  # the curves explain a validation loss under the training loss
        pg.get_by_role("tab", name="Model").click()
        pg.locator("#model-dd input").first.click()
        pg.get_by_role("option", name="Trained in this session (Train tab)", exact=True).click()
        pg.wait_for_function(
            "() => /trained here/.test(document.querySelector('#model-card').innerText)", timeout=30_000
        )
        card = pg.locator("#model-card").inner_text()
        assert "steps" in card and "Accuracy" in card  # the run's own record
    finally:
        pg.close()


def test_a_link_reopens_the_same_view(browser):
    pg = open_page(browser, 1280, 720)
    try:
        before = image_src(pg, "sees")
        pg.locator("#examples img").nth(7).click()
        wait_change(pg, "sees", before)
        set_number(pg, "patch", 21)
        pick(pg, "target", "cat")
        set_number(pg, "layer", 3)
        pg.wait_for_function("() => /patch 21/.test(document.querySelector('#summary').innerText)", timeout=30_000)
        pg.locator("#link-btn").click()
        pg.wait_for_function(
            "() => /[?]model=/.test(document.querySelector('#link-url input')?.value || '')", timeout=20_000
        )
        url = pg.locator("#link-url input").first.input_value()
        assert url.startswith("http://127.0.0.1")  # the whole address, ready to hand out
        for _ in range(2):  # a fresh browser each time: every request its opening makes is answered
            fresh = browser[0].new_context(viewport={"width": 1280, "height": 720})
            other = fresh.new_page()
            refused = []
            other.on("response", lambda r, refused=refused: refused.append((r.status, r.url)) if r.status >= 400 else 0)
            other.goto(url)
            wait_change(other, "rollout", None)
            summary = "() => /patch 21/.test(document.querySelector('#summary').innerText)"
            other.wait_for_function(summary, timeout=30_000)
            assert value(other, "target") == "cat"
            assert other.locator("#layer input[type=number]").first.input_value() == "3"
            shown = other.locator("#examples .thumbnail-item.selected img").first.get_attribute("src")
            assert Path(gallery.items("cifar10")[7][0]).name in shown  # the same example
            settled(other, "sees", "rollout", "class-map", "head-large", "heads", timeout=60_000)
            other.wait_for_timeout(1500)
            assert not refused, refused
            fresh.close()
    finally:
        pg.close()


def test_every_tab_is_reachable_on_a_phone_and_no_page_says_python(browser, tmp_path):
    pg = open_page(browser, 390, 844)
    try:
        for name in TABS:  # no tab behind a menu
            tab = pg.get_by_role("tab", name=name)
            assert tab.is_visible(), name
            tab.click()
            assert tab.get_attribute("aria-selected") == "true", name
            text = pg.locator("body").inner_text()
            assert not PYTHON_NAMES.search(text), (name, PYTHON_NAMES.search(text).group(0))
            assert tempfile.gettempdir() + "/" not in text and "/work/" not in text, name  # no server path
        pg.get_by_role("tab", name="Explore").click()
        broken = tmp_path / "broken.png"
        broken.write_bytes(b"\x89PNG\r\n\x1a\n not really")
        upload(pg, str(broken))
        pg.wait_for_function("() => /could not be used/.test(document.querySelector('#image-note').innerText)")
        note = pg.locator("#image-note").inner_text()
        assert not PYTHON_NAMES.search(note) and "/tmp" not in note, note
    finally:
        pg.close()


@pytest.mark.parametrize("width,height", ((1400, 1000), (1280, 720), (390, 844)))
def test_large_type_reaches_the_pictures(browser, width, height):
    pg = open_page(browser, width, height)
    try:
        normal = picture(pg, "rollout")
        numbers = colour_bars_read(pg, pg.url.split("?")[0], FIRST_MAPS) if width == 1280 else 2
        pg.screenshot(path=str(SHOTS / f"explore-{width}x{height}-normal.png"))
        before = image_src(pg, "rollout")
        shown = {name: image_src(pg, name) for name in FIRST_MAPS}
        pg.locator("#large-type input").check()
        wait_change(pg, "rollout", before)
        large = picture(pg, "rollout")
        # the same map with its title and colour-bar text half as large again: the picture grows in height only
        assert large.shape[1] == normal.shape[1] and large.shape[0] > normal.shape[0] + 20
        if width == 1280:
            for name in FIRST_MAPS[1:]:
                wait_change(pg, name, shown[name])
            # the first screen's colour bars, as read off the pictures: plain decimals, distinct, at both sizes
            assert numbers >= 2 and colour_bars_read(pg, pg.url.split("?")[0], FIRST_MAPS) >= 2
            b = pg.locator("#top5").bounding_box()
            assert b["y"] + b["height"] <= height  # the prediction stays on the first screen
        pg.screenshot(path=str(SHOTS / f"explore-{width}x{height}-large.png"))
    finally:
        pg.close()


MARKS = r"-f(\d+)-(\d+)-(\d+)\.jpg$"  # where a phone's wide picture has its words (picfiles.file_name)


def test_a_phone_keeps_a_scrolled_pictures_labels_title_and_colour_bar_in_view(browser):
    """Scrolled to its right end on a phone, a wide picture (every head's attention; the logit lens) shows at the
    screen's left its own rows' labels, title and colour bar (the pixels the picture has there), while its cells
    between them have moved."""
    pg = open_page(browser, 390, 844)
    try:
        for elem_id in ("heads", "lens"):
            pg.locator(f"#{elem_id}").scroll_into_view_if_needed()
            # the phone's own drawing, with its marks (the page first shows the one drawn before it knew its width)
            src = wait_change(pg, elem_id, None, matching=MARKS)
            left, top, bottom = map(int, re.search(MARKS, src).groups())
            own = picture(pg, elem_id).astype(int)
            box = f"document.querySelector('#{elem_id} .image-container')"
            pg.evaluate(f"() => {{ const b = {box}; b.scrollLeft = b.scrollWidth; }}")
            pg.wait_for_function(
                f"() => {box}.scrollLeft > 0 && "
                f"getComputedStyle({box}.querySelector('.vv-frozen') || document.body).display === 'block'"
            )
            pg.wait_for_timeout(300)  # the layer painted
            shift = pg.evaluate(f"() => {box}.scrollLeft")
            w = pg.evaluate(f"() => Math.min({box}.clientWidth, {box}.querySelector('img').clientWidth)")
            img = pg.locator(f"#{elem_id} img").bounding_box()
            assert round(img["width"]) == own.shape[1] and left > 20 and 0 < top < bottom < own.shape[0]
            pg.locator(f"#{elem_id}").scroll_into_view_if_needed()
            img = pg.locator(f"#{elem_id} img").bounding_box()
            x0 = pg.locator(f"#{elem_id} .image-container").bounding_box()["x"]
            clip = {"x": x0, "y": img["y"], "width": w, "height": own.shape[0]}
            seen = np.asarray(Image.open(io.BytesIO(pg.screenshot(clip=clip))).convert("RGB")).astype(int)
            own = own[: seen.shape[0]]  # a row fewer where the picture sits at a fraction of a pixel

            def near(a, b):  # the same pixels, as two JPEG decoders give them
                return np.abs(a - b).mean() < 4

            assert near(seen[top:bottom, :left], own[top:bottom, :left]), elem_id  # the rows' labels
            assert near(seen[:top, :w], own[:top, :w]), elem_id  # the title
            assert near(seen[bottom:, :w], own[bottom:, :w]), elem_id  # the colour bar and its words
            cells = seen[top:bottom, left:w]
            assert not near(cells, own[top:bottom, left:w]), elem_id  # the cells have moved...
            assert near(cells, own[top:bottom, left + shift : w + shift]), elem_id  # ...by the scroll
            pg.screenshot(path=str(SHOTS / f"phone-scrolled-{elem_id}.png"))
    finally:
        pg.close()
