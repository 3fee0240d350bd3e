"""What several test modules share: small synthetic data sets and zips, a free port, a fake request, helpers
for the browser and the Hugging Face cache."""

import io
import os
import re
import zipfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from vitviz.data import gallery
from vitviz.data.datasets import CIFAR10_CLASSES, Dataset, Split

EXAMPLE = gallery.items("cifar10")[3][0]  # a CIFAR-10 test image the tests share


def synthetic_cifar(n_train=256, n_val=64, n_test=64, seed=0) -> Dataset:
    """Images whose class is readable from a coloured square's position: learnable in a few steps."""
    g = torch.Generator().manual_seed(seed)

    def make(n):
        y = torch.randint(0, 10, (n,), generator=g)
        x = torch.randint(0, 60, (n, 3, 32, 32), generator=g, dtype=torch.uint8)
        for i, c in enumerate(y.tolist()):
            r, col = divmod(c, 4)
            x[i, c % 3, r * 8 : (r + 1) * 8, col * 8 : (col + 1) * 8] = 250
        return Split(x, y)

    return Dataset(
        "cifar10",
        make(n_train),
        make(n_val),
        make(n_test),
        list(CIFAR10_CLASSES),
        (0.5, 0.5, 0.5),
        (0.25, 0.25, 0.25),
        True,
        "synthetic",
    )


def serve_app(folder, env: dict, seconds: float = 120):
    """Start `python app.py` in `folder` on 127.0.0.1 with `env` added; (server process, gradio_client Client)
    once it answers. Fails the test, with the app's output, if it does not within `seconds`."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import pytest
    from gradio_client import Client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1", **env}
    server = subprocess.Popen(
        [sys.executable, "app.py"], cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.time() + seconds
    while True:
        try:
            return server, Client(f"http://127.0.0.1:{port}/", verbose=False)
        except Exception:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail(f"the app in {folder} did not start:\n" + (server.stdout.read() or "")[-3000:])
            time.sleep(0.5)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_hub_cache(cache, name: str) -> dict:
    """A Hugging Face cache holding random weights for timm/<name>, as a download would leave it."""
    import timm
    import torch
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


def image_src(page, elem_id: str):
    """The src of the first picture inside #elem_id on a Playwright page (None: none yet)."""
    loc = page.locator(f"#{elem_id} img")
    return loc.first.get_attribute("src") if loc.count() else None


def wait_change(page, elem_id: str, old, timeout: float = 30_000, matching: str = ""):
    """Wait until #elem_id shows a loaded picture whose src is not `old` (and matches the regular expression
    `matching`, if given); its src."""
    page.wait_for_function(
        """([id, old, matching]) => { const i = document.querySelector('#' + id + ' img');
                           return i && i.complete && i.naturalWidth > 0 && i.getAttribute('src') !== old
                                  && new RegExp(matching).test(i.src); }""",
        arg=[elem_id, old, matching],
        timeout=timeout,
    )
    return image_src(page, elem_id)


def settled(page, *elem_ids: str, timeout: float = 30_000) -> None:
    """Wait until none of #elem_ids shows Gradio's busy overlay (its status tracker, hidden when idle)."""
    page.wait_for_function(
        """(ids) => ids.every(id => { const t = document.querySelector('#' + id + ' [data-testid=status-tracker]');
                                     return !t || t.classList.contains('hide'); })""",
        arg=list(elem_ids),
        timeout=timeout,
    )


def click_cell(page, row: float, col: float, cells: int = 8) -> None:
    """Click the input's picture (#sees) at cell (row, col) of its square grid of `cells` a side (fractions
    reach between cells, or past the grid to the tiles right of it), once no picture of the view is being
    redrawn: a click on a picture under Gradio's busy overlay can be lost."""
    settled(page, "sees", "rollout", "top5", timeout=60_000)
    page.locator("#sees img").first.scroll_into_view_if_needed()
    sees = page.locator("#sees img").first.bounding_box()
    side = sees["height"]
    page.mouse.click(sees["x"] + side * (col + 0.5) / cells, sees["y"] + side * (row + 0.5) / cells)


def make_zip(path, n_per_class=3, size=32, mode="RGB", classes=CIFAR10_CLASSES):
    with zipfile.ZipFile(path, "w") as z:
        for split in ("train", "test"):
            for ci, c in enumerate(classes):
                for k in range(n_per_class):
                    im = Image.new(mode, (size, size), color=(ci * 20, k * 40, 100) if mode == "RGB" else ci * 20)
                    buf = io.BytesIO()
                    im.save(buf, format="PNG")
                    z.writestr(f"{split}/{c}/{k:04d}.png", buf.getvalue())
    return path


class FakeRequest:
    """What a handler reads of gr.Request: the session, and the caller's address (None: not known)."""

    def __init__(self, h, host=None):
        self.session_hash = h
        self.client = type("Client", (), {"host": host})()


CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium(playwright):
    """Debian's Chromium under Playwright, with the flags this machine needs (never `playwright install`)."""
    import shutil

    return playwright.chromium.launch(
        executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=CHROMIUM_FLAGS
    )


class Evt:
    """A stand-in for gr.SelectData: what was clicked (an index, or the (x, y) of a click on a picture)."""

    def __init__(self, index):
        self.index = index


def skipped(value) -> bool:
    """Whether a handler's output is gr.skip(): the page keeps what it shows."""
    return isinstance(value, dict) and value.get("__type__") == "update" and len(value) == 1


SHOTS = Path(os.environ.get("VITVIZ_SCREENSHOTS", Path(__file__).resolve().parent.parent / "test-artifacts"))


def counted_page(browser) -> tuple:
    """(a page at 1400 x 1000 once its opening has ended, the events it sends the server from now on, the listener
    that counts them): each a POST to the queue or to a direct route, seen at the browser."""
    calls = []

    def count(request) -> None:
        if request.method == "POST" and ("/queue/join" in request.url or "/run/" in request.url):
            calls.append(request.url)

    pg = open_page(browser, 1400, 1000)
    settled(pg, "sees", "rollout", "heads", timeout=60_000)
    pg.on("request", count)
    for _ in range(40):  # whatever the opening set off has ended: no event sent for 3 s (at most 60 s)
        seen = len(calls)
        pg.wait_for_timeout(1500)
        if len(calls) == seen:
            pg.wait_for_timeout(1500)
            if len(calls) == seen:
                break
    settled(pg, "sees", "rollout", "heads", "class-map", timeout=60_000)
    calls.clear()
    return pg, calls, count


def open_page(browser, width: int, height: int):
    """A new page of the app served by the `browser` fixture, at width x height, once it has drawn Explore."""
    b, url = browser
    pg = b.new_page(viewport={"width": width, "height": height})
    pg.goto(url)
    wait_change(pg, "rollout", None)  # the page opens on an example, already explained
    return pg


def canonical(value):
    """A reply in a form that compares exactly: image files as their pixels, zips as their members' bytes."""
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, np.ndarray):
        return ("array", value.shape, value.tobytes())
    if isinstance(value, torch.Tensor):
        return canonical(value.numpy())
    if isinstance(value, str) and value.startswith("/") and Path(value).is_file():
        if value.endswith(".zip"):
            with zipfile.ZipFile(value) as z:
                return {n: z.read(n) for n in sorted(z.namelist())}
        if value.endswith(".npy"):
            return canonical(np.load(value))
        return canonical(np.asarray(Image.open(value)))
    if hasattr(value, "value") and hasattr(value, "__dict__"):  # a gr.update or a component value
        return repr(value)
    return value


def use_hub_cache(monkeypatch, cache) -> None:
    """`cache` as the Hugging Face cache, and no network: what a machine without internet has."""
    import huggingface_hub.constants as hf

    monkeypatch.setattr(hf, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hf, "HF_HUB_OFFLINE", True)


PLAIN = re.compile(r"-?\d{1,3}(,\d{3})*(\.\d+)?")  # a plain decimal: no exponent, no unit


def colour_bars_read(page, url: str, elem_ids) -> int:
    """Read every colour bar of the pictures #elem_ids show (fetched as the browser fetches them; tests/reading.py
    reads their pixels) and check each as a visitor would: plain decimals, distinct and rising, or "lowest" and
    "highest" (tiles each with their own range). The number of bars with numbers."""
    import httpx
    from reading import read_ticks

    numbers = 0
    for name in elem_ids:
        src = page.locator(f"#{name} img").first.get_attribute("src")
        data = httpx.get(src if src.startswith("http") else url.rstrip("/") + src).content
        for ticks in read_ticks(np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))):
            if ticks[0] == "lowest":
                assert ticks[2] == "highest", (name, ticks)
                continue
            written = [t for t in ticks if t]
            assert all(PLAIN.fullmatch(t) for t in written), (name, ticks)
            values = [float(t.replace(",", "")) for t in written]
            assert len(values) >= 2 and values == sorted(set(values)), (name, ticks)
            numbers += 1
    return numbers


def open_on_photo(page, url: str, path: str, timeout: float = 90_000) -> str:
    """Open the app, wait for its first pictures, upload the photo at `path` through the Upload button and wait for
    the pictures of it; the rollout's src."""
    page.goto(url)
    wait_change(page, "rollout", None, timeout=timeout)
    with page.expect_file_chooser() as chooser:
        page.locator("#upload-btn").click()
    chooser.value.set_files(path)
    return wait_change(page, "rollout", image_src(page, "rollout"), timeout=timeout)
