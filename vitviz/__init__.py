"""vitviz: see how a Vision Transformer sees."""
from . import zerogpu

if zerogpu.enabled():
    import spaces  # noqa: F401  ZeroGPU needs it imported before anything touches CUDA
from .card import ModelCard, card_of, describe
from .data import preprocess
from .model import PRESETS, ViT, ViTConfig, make_config
from .hub import load_model

__all__ = ["ViT", "ViTConfig", "PRESETS", "make_config", "load_model", "preprocess", "ModelCard", "card_of",
           "describe"]
__version__ = "0.1.0"
