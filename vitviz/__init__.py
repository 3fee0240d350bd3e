"""vitviz: see how a Vision Transformer sees."""

from vitviz.runtime import zerogpu

if zerogpu.enabled():
    import spaces  # noqa: F401  ZeroGPU needs it imported before anything touches CUDA
from vitviz.explain.interpret import zero_shot
from vitviz.models.card import ModelCard, card_of, describe
from vitviz.models.hub import load_model
from vitviz.models.loaded import preprocess
from vitviz.models.vit import PRESETS, ViT, ViTConfig, make_config
from vitviz.models.words import with_labels

__all__ = [
    "ViT",
    "ViTConfig",
    "PRESETS",
    "make_config",
    "load_model",
    "preprocess",
    "ModelCard",
    "card_of",
    "describe",
    "zero_shot",
    "with_labels",
]
__version__ = "0.1.0"
