"""A real headless Chromium, driven by Playwright, uses the page as a visitor would: on a projector
(1280x720), a desktop (1400x1000) and a phone (390x844).

Screenshots go to test-artifacts/ (VITVIZ_SCREENSHOTS overrides the folder).
"""

import os

import pytest
from helpers import SHOTS, click_cell, counted_page, image_src, open_page, settled, wait_change

from vitviz.data import gallery
from vitviz.models.hub import load_model

pytestmark = pytest.mark.usefixtures("small_data")
FIRST_SCREEN = (
    "sees",
    "top5",
    "rollout",
    "class-map",
    "head-large",
    "fusion",
    "discard",
    "method",
    "target",
    "layer",
    "head",
)


REFUSED: list = []  # every request of the walk below (the tests sharing `page`) that was refused or failed


@pytest.fixture(scope="module")
def page(browser):
    b, url = browser
    pg = b.new_page(viewport={"width": 1400, "height": 1000})
    pg.on("response", lambda r: REFUSED.append((r.status, r.url)) if r.status >= 400 else None)
    pg.on(  # a picture replaced while it loads is aborted by the browser itself: not a refusal
        "requestfailed",
        lambda r: REFUSED.append((r.failure, r.url)) if "ABORTED" not in (r.failure or "") else None,
    )
    pg.goto(url)
    wait_change(pg, "rollout", None)
    yield pg
    pg.close()


def box(page, elem_id):
    return page.locator(f"#{elem_id}").first.bounding_box()


def small_text(page, root="#explore-top", below=12):
    """Visible texts in `root` drawn smaller than `below` px: (text, size) pairs."""
    return page.evaluate(
        """([root, below]) => {
        const out = [];
        for (const e of document.querySelectorAll(root + ' *')) {
            const own = [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
            const r = e.getBoundingClientRect();
            const size = parseFloat(getComputedStyle(e).fontSize);
            if (own && r.width > 0 && r.height > 0 && size < below) out.push([e.textContent.trim(), size]);
        }
        return out; }""",
        [root, below],
    )


def test_projector_first_screen_holds_the_image_prediction_maps_and_their_controls(browser):
    pg = open_page(browser, 1280, 720)
    try:
        for elem_id in FIRST_SCREEN:
            b = box(pg, elem_id)
            assert b is not None and b["y"] >= 0 and b["y"] + b["height"] <= 720 and b["x"] + b["width"] <= 1280, (
                elem_id,
                b,
            )
        # the pictures are shown at least at their own size (so their 14-px labels stay 12 px or more), and no
        # toolbar sits over them
        for elem_id in ("rollout", "class-map", "head-large", "sees"):
            shown, natural = pg.evaluate(
                f"() => {{ const i = document.querySelector('#{elem_id} img');"
                " return [i.getBoundingClientRect().width, i.naturalWidth]; }"
            )
            assert shown >= 0.85 * natural, (elem_id, shown, natural)
            assert pg.locator(f"#{elem_id} button[aria-label], #{elem_id} .icon-button").count() == 0, elem_id
        assert small_text(pg) == []
        assert pg.locator("#input-image").is_hidden()  # one image, shown once: the model's view, with its grid
        pg.screenshot(path=str(SHOTS / "explore-1280x720.png"))
        size = lambda: pg.evaluate("() => parseFloat(getComputedStyle(document.querySelector('.vv-help p')).fontSize)")  # noqa
        normal = size()
        pg.locator("#large-type input").check()  # the presentation option: larger type
        pg.wait_for_function("() => document.querySelector('.vv-large') !== null", timeout=5_000)
        assert size() > normal
    finally:
        pg.close()


def test_phone_shows_prediction_and_maps_before_controls_and_a_tap_changes_them(browser):
    pg = open_page(browser, 390, 844)
    try:
        y = {k: box(pg, k)["y"] for k in FIRST_SCREEN}
        assert y["sees"] < y["top5"] < 844  # the prediction on the first screen, under the image
        assert (
            y["top5"]
            < y["rollout"]
            < y["fusion"]
            < y["class-map"]
            < y["method"]
            <= y["target"]
            < y["head-large"]
            < y["layer"]
        )
        before = image_src(pg, "rollout")
        click_cell(pg, 4, 2)
        wait_change(pg, "rollout", before)  # the map under the image now shows the tapped patch
        assert pg.locator("#patch input").first.input_value() == str(4 * 8 + 2)
        pg.screenshot(path=str(SHOTS / "explore-390x844.png"), full_page=True)
    finally:
        pg.close()


def test_one_click_on_the_patch_grid_is_one_server_event(browser):
    """A click on the input's grid selects the token, sets the token's number and menu and redraws every picture
    that follows it, all in one request to the server (counted at the browser: queued and direct calls)."""
    pg, calls, count = counted_page(browser)
    try:
        for place, row, col in ((1, 4, 2), (2, 1, 6)):
            before = image_src(pg, "rollout")
            click_cell(pg, row, col)
            wait_change(pg, "rollout", before)
            pg.wait_for_function(f"() => document.querySelector('#patch input').value === '{row * 8 + col}'")
            settled(pg, "sees", "rollout", "heads", timeout=60_000)
            pg.wait_for_timeout(1500)  # any event the click set off has been sent by now
            assert len(calls) == place, calls  # one more request per click, and only one
        assert f"patch {1 * 8 + 6}" in pg.locator("#summary").inner_text()
    finally:
        pg.remove_listener("request", count)
        pg.close()


def test_explore_patch_cls_and_fusion(page):
    first = image_src(page, "rollout")
    page.locator("#examples img").nth(12).click()  # another example
    second = wait_change(page, "rollout", first)
    click_cell(page, 2, 5)  # row 2, column 5 (scrolled to: the gallery's click scrolled the page down)
    third = wait_change(page, "rollout", second)
    assert page.locator("#patch input").first.input_value() == str(2 * 8 + 5)
    page.wait_for_function("() => /patch 21/.test(document.querySelector('#summary').innerText)", timeout=20_000)
    settled(page, "sees")  # a click on a picture that is still being redrawn can be lost
    sees = page.locator("#sees img").first.bounding_box()
    page.mouse.click(sees["x"] + sees["height"] + 20, sees["y"] + 15)  # the CLS tile: back to the class token
    page.wait_for_function("() => document.querySelector('#patch input').value === '-1'", timeout=20_000)
    page.wait_for_function("() => /token: CLS/.test(document.querySelector('#summary').innerText)", timeout=20_000)
    wait_change(page, "rollout", third)
    before = image_src(page, "rollout")
    page.locator("#fusion label", has_text="max").click()
    wait_change(page, "rollout", before)
    page.screenshot(path=str(SHOTS / "explore.png"), full_page=True)


def test_model_switch_brings_a_matching_image_and_gallery(page):
    page.get_by_role("tab", name="Explore").click()
    before = image_src(page, "sees")
    page.locator("#examples img").nth(2).click()  # CIFAR-10 example 2
    before = wait_change(page, "sees", before)
    page.locator("#model-dd input").click()
    page.get_by_role("option", name="MNIST ViT (shipped)").click()
    wait_change(page, "sees", before)
    page.wait_for_function("() => /MNIST/.test(document.querySelector('#examples').innerText)", timeout=20_000)
    top = page.locator("#top5").inner_text()
    assert not any(c in top for c in ("airplane", "automobile", "ship")), top  # digits, for a digit
    selected = page.locator("#examples .thumbnail-item.selected img")
    assert selected.count() == 1  # the gallery marks the digit now shown: MNIST example 2
    assert os.path.basename(gallery.items("mnist")[2][0]) in selected.first.get_attribute("src")
    before = image_src(page, "sees")
    page.locator("#model-dd input").click()
    page.get_by_role("option", name="CIFAR-10 ViT (shipped)").click()
    wait_change(page, "sees", before)
    page.wait_for_function("() => /CIFAR-10/.test(document.querySelector('#examples').innerText)", timeout=20_000)


def test_step_by_step_follows_the_block_and_the_token(page):
    page.get_by_role("tab", name="Step by step").click()
    for stage in ("input", "sequence", "embedding", "positions", "block", "head", "lens"):
        wait_change(page, f"step-{stage}", None)
    block, head = image_src(page, "step-block"), image_src(page, "step-head")
    box = page.locator("#step-block-n input[type=number]").first
    box.fill("3")
    box.press("Enter")
    wait_change(page, "step-block", block)  # stage 5 redrawn for block 3 ...
    page.wait_for_function("() => /After block 3/.test(document.body.innerText)", timeout=20_000)
    assert image_src(page, "step-head") == head  # ... and the head, which does not depend on it, not sent again
    sequence = image_src(page, "step-sequence")
    pic = page.locator("#step-input img").first.bounding_box()
    page.mouse.click(pic["x"] + pic["height"] * 1.5 / 8, pic["y"] + pic["height"] * 0.5 / 8)  # patch 1
    wait_change(page, "step-sequence", sequence)
    page.wait_for_function("() => /Following patch 1 /.test(document.querySelector('#step-following').innerText)")
    page.screenshot(path=str(SHOTS / "steps.png"), full_page=True)


def test_take_patches_away_by_slider_and_by_click(page):
    page.get_by_role("tab", name="Take patches away").click()
    for name in ("take-picture", "take-curves", "take-maps"):
        wait_change(page, name, None)
    page.wait_for_function("() => /0 of 64 patches hidden/.test(document.body.innerText)", timeout=30_000)
    picture = image_src(page, "take-picture")
    box = page.locator("#take-k input[type=number]").first
    box.fill("10")
    box.press("Enter")
    box.blur()
    wait_change(page, "take-picture", picture)
    page.wait_for_function("() => /10 of 64 patches hidden/.test(document.body.innerText)", timeout=30_000)
    picture = image_src(page, "take-picture")
    pic = page.locator("#take-picture img").first.bounding_box()
    page.mouse.click(pic["x"] + pic["width"] * 7.5 / 8, pic["y"] + pic["height"] * 7.5 / 8)  # patch 63
    wait_change(page, "take-picture", picture)
    page.wait_for_function("() => /(9|11) of 64 patches hidden/.test(document.body.innerText)", timeout=30_000)
    page.screenshot(path=str(SHOTS / "take-away.png"), full_page=True)


def test_model_tab(page):
    page.get_by_role("tab", name="Model").click()
    page.wait_for_function(
        "() => { const i = document.querySelector('#pos-tiles img'); return i && i.naturalWidth > 0; }", timeout=60_000
    )  # drawn again on opening, in the visitor's style (a busy machine: it may wait its turn in the queue)
    page.wait_for_timeout(300)
    settled(page, "pos-tiles", "pos-large", "distance", "components", timeout=60_000)
    model = load_model("cifar10")
    cfg, params = model.card.config, sum(p.numel() for p in model.module.parameters())
    card = page.locator("#model-card").inner_text()
    assert f"{params:,} parameters" in card and f"{cfg.depth}" in card, card  # the model on screen, counted
    sizes = page.evaluate(
        """() => ['pos-tiles', 'pos-large', 'distance', 'components'].map(id => {
            const i = document.querySelector('#' + id + ' img');
            return i ? [i.naturalWidth, i.naturalHeight] : null; })"""
    )
    assert all(s and s[0] >= 200 and s[1] >= 120 for s in sizes), sizes  # every picture drawn, none a blank stub
    before = image_src(page, "pos-large")
    tiles = page.locator("#pos-tiles img").first.bounding_box()
    page.mouse.click(tiles["x"] + tiles["width"] * 0.8, tiles["y"] + tiles["height"] * 0.8)  # a position far right
    wait_change(page, "pos-large", before, timeout=60_000)  # the clicked position shown large
    page.screenshot(path=str(SHOTS / "model.png"), full_page=True)


def test_train_buttons_progress_and_an_early_validation_point(page):
    page.get_by_role("tab", name="Train").click()
    assert page.locator("#stop-btn").is_disabled() and page.locator("#use-btn").is_disabled()
    before = image_src(page, "curves")
    page.locator("#train-btn").click()
    page.wait_for_function("() => !document.querySelector('#stop-btn').disabled", timeout=10_000)
    assert page.locator("#train-btn").is_disabled()
    wait_change(page, "curves", before, timeout=60_000)  # the curve updates while it runs
    page.wait_for_timeout(1000 * float(os.environ.get("VITVIZ_SCREENSHOT_TRAIN_SECONDS", "0")))
    page.locator("#stop-btn").click()
    page.wait_for_function(
        "() => /Stopped|Finished/.test(document.querySelector('#train-status').innerText)", timeout=30_000
    )
    page.wait_for_function("() => !document.querySelector('#use-btn').disabled", timeout=10_000)
    text = page.locator(".vv-progress").inner_text()
    assert "stopped at" in text or "100%" in text, text  # the bar stays where the run got to
    assert page.locator("#stop-btn").is_disabled()
    page.screenshot(path=str(SHOTS / "train.png"), full_page=True)
    before = image_src(page, "sees")
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")  # far down the Train tab
    page.locator("#use-btn").click()
    page.wait_for_function(
        "() => /Trained in this session/.test(document.querySelector('#model-dd input').value)", timeout=20_000
    )
    wait_change(page, "sees", before)  # the Explore tab now shows the freshly trained model
    assert page.get_by_role("tab", name="Explore").get_attribute("aria-selected") == "true"
    page.wait_for_function("() => window.scrollY === 0", timeout=5_000)  # at its top: the menu and image in view


def test_compare_follows_its_inputs(page):
    page.get_by_role("tab", name="Compare").click()
    left = wait_change(page, "compare-rollout-a", None)  # drawn when first looked at, on two models that fit
    wait_change(page, "compare-rollout-b", None)
    a, b = (page.locator(f"#compare-{side} input").first.input_value() for side in "ab")
    if "Trained in this session" in a:  # after the train test's *Explore this model*: the run against the shipped
        assert b == "CIFAR-10 ViT (shipped)", b
    else:  # the shipped model against itself with a random head
        assert a == "CIFAR-10 ViT (shipped)" and "head randomised" in b, (a, b)
    cmap = image_src(page, "compare-class-map-b")
    random_head = "CIFAR-10 ViT, head randomised (sanity check)"
    page.locator("#compare-b input").click()  # another right side: the left one stays as it was
    page.get_by_role("option", name="CIFAR-10 ViT (shipped)" if b == random_head else random_head).click()
    wait_change(page, "compare-class-map-b", cmap)
    assert image_src(page, "compare-rollout-a") == left  # the other side is left as it was
    cmap_a = image_src(page, "compare-class-map-a")
    page.locator("#compare-method label", has_text="LeGrad").click()
    cmap_a = wait_change(page, "compare-class-map-a", cmap_a)
    for side, name in (("a", "CIFAR-10 ViT (shipped)"), ("b", random_head)):  # the screenshot's pair
        if page.locator(f"#compare-{side} input").first.input_value() != name:
            before = image_src(page, f"compare-class-map-{side}")
            page.locator(f"#compare-{side} input").click()
            page.get_by_role("option", name=name).click()
            wait_change(page, f"compare-class-map-{side}", before)
    page.screenshot(path=str(SHOTS / "compare.png"), full_page=True)


def test_a_choice_two_tabs_share_is_one_server_event_and_shows_on_both(browser):
    """Heads combined by "max" on Explore: one request, which redraws Explore and sets Compare's copy of the
    choice (no script in the page copies it); the method picked on Compare shows on Explore in the same way."""
    pg, calls, count = counted_page(browser)
    try:
        before = image_src(pg, "rollout")
        pg.locator("#fusion label", has_text="max").click()
        wait_change(pg, "rollout", before)
        pg.wait_for_timeout(1500)
        assert len(calls) == 1, calls
        pg.remove_listener("request", count)
        pg.get_by_role("tab", name="Compare").click()
        assert pg.locator("#compare-fusion input[value=max]").is_checked()
        pg.locator("#compare-method label", has_text="LeGrad").click()
        pg.get_by_role("tab", name="Explore").click()
        pg.wait_for_function("() => document.querySelector('#method input').value === 'LeGrad'", timeout=20_000)
    finally:
        pg.close()


def test_a_link_whose_upload_is_gone_says_so_until_the_visitor_acts(browser):
    """A link naming an upload the server no longer keeps: the sentence beside the menu is still there 10 s
    after the page has drawn, and no picture calls the example shown "Your image"."""
    b, url = browser
    pg = b.new_page(viewport={"width": 1280, "height": 720})
    try:
        pg.goto(f"{url}?model=cifar10&image=0123456789abcdef/gone.png&layer=3")
        wait_change(pg, "rollout", None)
        settled(pg, "sees", "rollout", "original", timeout=60_000)
        pg.wait_for_timeout(10_000)
        note = pg.locator("#model-note").inner_text()
        assert "no longer kept on the server" in note, note
        assert "Your image" not in pg.locator("body").inner_text()
    finally:
        pg.close()


def test_typing_in_the_class_menu_filters_it_rather_than_adding_to_its_text(page):
    page.get_by_role("tab", name="Explore").click()
    box = page.locator("#target input").first
    box.click()
    page.keyboard.type("cat")
    assert box.input_value() == "cat"  # the text it held was replaced, not added to
    options = page.locator("ul[role=listbox] li")
    page.wait_for_function("() => document.querySelectorAll('ul[role=listbox] li').length > 0", timeout=5_000)
    assert [t.strip() for t in options.all_inner_texts()] == ["cat"]  # the ten classes filtered to the one typed
    page.keyboard.press("Escape")


def test_a_value_typed_into_a_sliders_box_applies_on_enter(browser):
    """ "Discard weakest" and "Every map: opacity": a value typed key by key into the box, then Enter, with the box
    still focused (nothing else done): the rollout is redrawn and the slider shows the value (a value applies as
    it is typed, so it has by the time Enter is pressed)."""
    pg = open_page(browser, 1280, 720)
    try:
        for elem_id, typed in (("discard", "0.5"), ("alpha", "0.3")):
            settled(pg, "rollout")
            before = image_src(pg, "rollout")
            number = pg.locator(f"#{elem_id} input[type=number]").first
            number.fill("")
            number.press_sequentially(typed, delay=80)
            number.press("Enter")
            wait_change(pg, "rollout", before)
            assert float(pg.locator(f"#{elem_id} input[type=range]").first.input_value()) == float(typed)
    finally:
        pg.close()


def test_no_request_of_the_walk_was_refused(page):
    """Last of the walk through every tab on one page (the tests above that share `page`): no request the page
    made was refused (no 4xx or 5xx: a picture's file, an upload, an event) or failed."""
    page.get_by_role("tab", name="Explore").click()
    page.wait_for_timeout(1000)
    assert not REFUSED, REFUSED[:5]
