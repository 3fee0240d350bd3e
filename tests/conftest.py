import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent  # the repository (vitviz itself is imported installed: pip install -e .)
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

from vitviz.data.datasets import DATASETS  # noqa: E402
from vitviz.models.hub import loaded  # noqa: E402
from vitviz.models.vit import ViT, make_config  # noqa: E402

SHARED_DATA = Path(os.environ.get("VITVIZ_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    cfg = make_config("tiny", embed_dim=32, depth=2, num_heads=4)
    model = ViT(cfg).eval()
    # random (non-zero) head so logits depend on the input
    torch.nn.init.normal_(model.head.weight, std=0.5)
    return model


@pytest.fixture
def tiny(tiny_model):
    """The tiny ViT's record (vitviz.models.loaded.LoadedViT): what every explaining function takes."""
    return loaded(tiny_model)


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.exists():
        pytest.skip("the shared data sets are not present")
    return SHARED_DATA


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    """A tiny CIFAR-10 and MNIST in the zip layout, so training tests take seconds.

    VITVIZ_TEST_REAL_DATA=1 keeps VITVIZ_DATA as it is (for the README's screenshots)."""
    from helpers import make_zip

    if os.environ.get("VITVIZ_TEST_REAL_DATA"):
        yield Path(os.environ["VITVIZ_DATA"])
        return

    root = tmp_path_factory.mktemp("data")
    make_zip(root / "cifar10-jpeg.zip", n_per_class=32)  # 288 training images: the default batch of 256 fits
    make_zip(root / "mnist-png.zip", n_per_class=32, size=28, mode="L", classes=DATASETS["mnist"]["classes"])
    old = {k: os.environ.get(k) for k in ("VITVIZ_DATA", "VITVIZ_CACHE")}
    os.environ["VITVIZ_DATA"] = str(root)
    os.environ["VITVIZ_CACHE"] = str(root / "cache")
    from vitviz.training import quick

    quick._datasets.clear()
    yield root
    quick._datasets.clear()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def browser(small_data):
    """The app served on 127.0.0.1, and Debian's Chromium to look at it: (browser, url)."""
    import shutil

    from helpers import SHOTS, chromium, free_port

    from vitviz.app import build_demo, launch

    if not os.path.exists(shutil.which("chromium") or "/usr/bin/chromium"):
        pytest.fail("Chromium is not installed (apt-get install chromium); the browser tests need it")
    from playwright.sync_api import sync_playwright

    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = chromium(p)
        yield b, url
        b.close()
    demo.close()


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "bf16: checks the fast path of a machine with native bf16 units (AVX512-BF16, "
        "AMX or a GPU); skipped where there are none. Exact checks ask for fp32.",
    )


def pytest_collection_modifyitems(config, items):
    from vitviz.runtime.device import cpu_has_bf16

    if cpu_has_bf16():
        return
    skip = pytest.mark.skip(reason="this CPU has no native bf16 units")
    for item in items:
        if item.get_closest_marker("bf16") is not None:  # the marker, not a parameter named bf16
            item.add_marker(skip)
