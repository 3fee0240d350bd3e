"""A Hugging Face cache written by the tests: tiny random `transformers` models of every class vitviz reads, with
their image processor configs and, for CLIP and SigLIP, a tokenizer built with the `tokenizers` package. The
models go through the real `from_pretrained` path with HF_HUB_OFFLINE=1, from a cache laid out as the Hub's
client lays it out (models--org--name/snapshots/<commit>/, refs/main)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

COMMIT = "0" * 40
WORDS = (
    "a photo of cat dog car red blue bird plane ship truck frog horse deer the an small big green picture "
    "drawing sketch of"
).split()
SIZE, PATCH = 32, 8  # 4x4 patches: small, and the same geometry for every tiny model


def _tokenizer(folder: Path, kind: str) -> None:
    """A word-level tokenizer with the special tokens each family expects, saved as tokenizer.json."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    specials = ["<pad>", "<unk>", "<bos>", "<eos>"]
    vocab = {w: i for i, w in enumerate(specials + sorted(set(WORDS)))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if kind == "clip":  # CLIP reads the end-of-text token
        tok.post_processor = processors.TemplateProcessing(
            single="<bos> $A <eos>", special_tokens=[("<bos>", 2), ("<eos>", 3)]
        )
    else:  # SigLIP reads the last position of a sequence padded to its full length
        tok.post_processor = processors.TemplateProcessing(single="$A <eos>", special_tokens=[("<eos>", 3)])
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "eos_token": "<eos>",
        "model_max_length": 16,
    }
    if kind == "clip":
        config["bos_token"] = "<bos>"
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "special_tokens_map.json").write_text(
        json.dumps({k: v for k, v in config.items() if k.endswith("_token")})
    )


def _processor(folder: Path, kind: str, size: int = SIZE) -> None:
    """The image processor's config as the Hub's repositories hold it (at the model's input size)."""
    imagenet = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    clip = ([0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711])
    half = ([0.5] * 3, [0.5] * 3)
    shortest = {
        "size": {"shortest_edge": size + 4},
        "crop_size": {"height": size, "width": size},
        "do_center_crop": True,
    }
    exact = {"size": {"height": size, "width": size}, "do_center_crop": False}
    spec = {
        "vit": ("ViTImageProcessor", half, exact, 2),
        "deit": ("DeiTImageProcessor", imagenet, shortest, 3),
        "dinov2": ("BitImageProcessor", imagenet, shortest, 3),
        "dinov3_vit": ("DINOv3ViTImageProcessorFast", imagenet, exact, 2),
        "clip": ("CLIPImageProcessor", clip, shortest, 3),
        "siglip": ("SiglipImageProcessor", half, exact, 3),
        "siglip2": ("Siglip2ImageProcessor", half, {"max_num_patches": (size // PATCH) ** 2, "patch_size": PATCH}, 2),
    }[kind]
    name, (mean, std), geometry, resample = spec
    cfg = {
        "image_processor_type": name,
        "do_resize": True,
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": mean,
        "image_std": std,
        "resample": resample,
        "do_convert_rgb": True,
        **geometry,
    }
    (folder / "preprocessor_config.json").write_text(json.dumps(cfg))


def tiny(kind: str, seed: int = 0, vision: dict | None = None, text: dict | None = None) -> torch.nn.Module:
    """A two-layer random model of one class: vit, deit, deit_teacher, dinov2, dinov2_registers, dinov3, clip,
    siglip, dinov2_classifier (refused: not one vitviz reads), resnet (refused: not a ViT). `vision` and `text`
    change the towers' sizes (a benchmark builds full-size ones)."""
    import transformers as T

    torch.manual_seed(seed)
    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, image_size=SIZE, patch_size=PATCH)
    vision = small | (vision or {})
    inner = vision.pop("intermediate_size", 64)
    text = dict(
        vocab_size=len(WORDS) + 4,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=16,
    ) | (text or {})
    labels = {"id2label": {0: "cat", 1: "dog", 2: "car"}, "label2id": {"cat": 0, "dog": 1, "car": 2}}
    if kind == "vit":
        return T.ViTForImageClassification(T.ViTConfig(**vision, intermediate_size=inner, **labels))
    if kind == "deit":
        return T.DeiTForImageClassification(T.DeiTConfig(**vision, intermediate_size=inner, **labels))
    if kind == "deit_teacher":
        return T.DeiTForImageClassificationWithTeacher(T.DeiTConfig(**vision, intermediate_size=inner, **labels))
    if kind == "dinov2":
        return T.Dinov2Model(T.Dinov2Config(**vision, mlp_ratio=2))
    if kind == "dinov2_registers":
        return T.Dinov2WithRegistersModel(T.Dinov2WithRegistersConfig(**vision, mlp_ratio=2, num_register_tokens=4))
    if kind == "dinov3":
        return T.DINOv3ViTModel(T.DINOv3ViTConfig(**vision, intermediate_size=inner, num_register_tokens=4))
    if kind == "clip":
        return T.CLIPModel(
            T.CLIPConfig(
                vision_config=dict(**vision, intermediate_size=inner),
                text_config=dict(**text, bos_token_id=2, eos_token_id=3, pad_token_id=0),
                projection_dim=24,
            )
        )
    if kind == "siglip":
        return T.SiglipModel(
            T.SiglipConfig(
                vision_config=dict(**vision, intermediate_size=inner),
                text_config=dict(**text, pad_token_id=0, bos_token_id=2, eos_token_id=3),
            )
        )
    if kind == "siglip2":  # NaFlex: its positions for a 4 x 4 grid, any shape up to 16 patches
        side = small["image_size"] // small["patch_size"]
        v2 = {k: x for k, x in vision.items() if k != "image_size"} | {"num_patches": side * side}
        return T.Siglip2Model(
            T.Siglip2Config(
                vision_config=dict(**v2, intermediate_size=inner),
                text_config=dict(**text, pad_token_id=0, bos_token_id=2, eos_token_id=3),
            )
        )
    if kind == "dinov2_classifier":
        return T.Dinov2ForImageClassification(T.Dinov2Config(**vision, mlp_ratio=2, **labels))
    if kind == "resnet":
        return T.ResNetModel(T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1]))
    raise ValueError(kind)


PROCESSOR = {
    "deit_teacher": "deit",
    "dinov2_registers": "dinov2",
    "dinov3": "dinov3_vit",
    "dinov2_classifier": "dinov2",
}


def save(folder: Path, kind: str, seed: int = 0, vision: dict | None = None, text: dict | None = None) -> Path:
    """The random model of `kind` (tiny unless `vision` and `text` size it), with its processor (and tokenizer),
    saved in `folder` by `save_pretrained`."""
    folder.mkdir(parents=True, exist_ok=True)
    tiny(kind, seed, dict(vision or {}), text).save_pretrained(folder)
    if kind != "resnet":
        _processor(folder, PROCESSOR.get(kind, kind), (vision or {}).get("image_size", SIZE))
    if kind in ("clip", "siglip", "siglip2"):
        _tokenizer(folder, "clip" if kind == "clip" else "siglip")
    return folder


def write_cache(cache: Path, repos: dict[str, str]) -> Path:
    """A Hugging Face hub cache at `cache` holding {repo id: kind}, as the Hub's client lays it out."""
    for repo, kind in repos.items():
        root = cache / ("models--" + repo.replace("/", "--"))
        save(root / "snapshots" / COMMIT, kind)
        (root / "refs").mkdir(parents=True, exist_ok=True)
        (root / "refs" / "main").write_text(COMMIT)
    return cache


REPOS = {
    "test/vit": "vit",
    "test/deit": "deit",
    "test/deit-distilled": "deit_teacher",
    "test/dinov2": "dinov2",
    "test/dinov2-reg": "dinov2_registers",
    "test/dinov3": "dinov3",
    "test/clip": "clip",
    "test/siglip": "siglip",
    "test/siglip2": "siglip2",
    "test/dinov2-classifier": "dinov2_classifier",
    "test/resnet": "resnet",
}
