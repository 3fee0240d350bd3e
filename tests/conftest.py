import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

from vitviz.model import ViT, make_config  # noqa: E402

SHARED_DATA = Path(os.environ.get("VITVIZ_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    cfg = make_config("tiny", embed_dim=32, depth=2, num_heads=4)
    model = ViT(cfg).eval()
    # random (non-zero) head so logits depend on the input
    torch.nn.init.normal_(model.head.weight, std=0.5)
    return model


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.exists():
        pytest.skip("the shared data sets are not present")
    return SHARED_DATA
