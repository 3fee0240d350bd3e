"""Labels in words for a model with a text tower (CLIP, SigLIP): the visitor's labels become the model's classes.

`with_labels(model, labels, template)` gives a record (vitviz.models.loaded.LoadedViT) whose classes are the
labels: its logits are the model's own image-text scores, by the model's own rule:
- CLIP: `logit_scale.exp() * cosine(image, text)`; its probabilities are the softmax over the labels.
- SigLIP: `logit_scale.exp() * cosine(image, text) + logit_bias`; each label's probability is its own sigmoid,
  never renormalised over the labels.
Every explaining function then explains a label's score as it would a class's logit. The text embeddings of a
label set are computed once per model and kept, with the labelled record (a few label sets per model, the
oldest out first), so the same words give the same record.

vitviz.explain.interpret.zero_shot is the one-call form: {label: probability}.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace

import torch
from cachetools import LRUCache

from vitviz.models.loaded import LoadedViT

DEFAULT_LABELS = ("cat", "dog", "bird", "car", "airplane", "ship", "horse", "truck", "frog", "deer")
DEFAULT_TEMPLATE = "a photo of a {}."
MAX_LABELS = 50  # a visitor's list, at most, unless VITVIZ_MAX_LABELS says otherwise
MAX_LABEL_CHARS = 60
KEEP = 16  # label sets kept per model


class Words:
    """Normalised text embeddings (C, E) of labels, and the model's rule for scoring an image against them."""

    def __init__(self, embeds: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None):
        self.embeds, self.scale, self.bias = embeds, scale, bias

    @property
    def sigmoid(self) -> bool:
        return self.bias is not None

    def scores(self, image: torch.Tensor) -> torch.Tensor:
        """(B, E) image embeddings -> (B, C) logits by the model's rule."""
        image = image / image.norm(dim=-1, keepdim=True)
        out = image @ self.embeds.to(image.dtype).T * self.scale.exp().to(image.dtype)
        return out if self.bias is None else out + self.bias.to(image.dtype)


def max_labels() -> int:
    """How many labels one list may have: VITVIZ_MAX_LABELS if set to a positive whole number, else 50 (each is
    one pass of the text tower when the list is new)."""
    raw = os.environ.get("VITVIZ_MAX_LABELS", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else MAX_LABELS


def parse_labels(text: str | list | tuple | None) -> tuple[str, ...]:
    """A visitor's labels, comma-separated (or a list): stripped, empty ones and repeats dropped. ValueError with a
    sentence when none is left, there are too many (`max_labels`), or one is too long; checked before the text
    tower runs."""
    if text is None:
        return DEFAULT_LABELS
    if isinstance(text, str) and len(text) > 100_000:
        raise ValueError("That list of labels is far too long.")
    items = text.split(",") if isinstance(text, str) else [str(t) for t in list(text)[:100_000]]
    labels = tuple(dict.fromkeys(t.strip() for t in items if t.strip()))
    if not labels:
        raise ValueError("Type at least one label, e.g. cat, dog, car.")
    if len(labels) > max_labels():
        raise ValueError(f"At most {max_labels()} labels at once; that list has {len(labels)}.")
    long = next((t for t in labels if len(t) > MAX_LABEL_CHARS), None)
    if long is not None:
        raise ValueError(f"A label can have at most {MAX_LABEL_CHARS} characters; one has {len(long)}.")
    return labels


def check_template(template: str | None) -> str:
    """The prompt template: it must hold one {} where the label goes."""
    if template is None:
        return DEFAULT_TEMPLATE
    template = str(template).strip()
    others = template.replace("{}", "", 1)
    if template.count("{}") != 1 or "{" in others or "}" in others or len(template) > 120:
        raise ValueError('The prompt template needs exactly one {} where the label goes, e.g. "a photo of a {}."')
    return template


_lock = threading.Lock()


def _embed(v: LoadedViT, labels: tuple[str, ...], template: str) -> torch.Tensor:
    """(C, E) normalised text embeddings of `template` filled with each label, kept per model."""
    text = v.adapter.text
    key = (labels, template)
    with _lock:
        hit = text.kept.get(key)  # and now the most recently used
        if hit is not None:
            return hit
    tok = text.tokenizer([template.format(t) for t in labels], return_tensors="pt", **text.padding)
    with torch.no_grad():
        out = v.module.get_text_features(input_ids=tok["input_ids"].to(v.device), **text.mask(tok, v.device))
        feats = out.pooler_output if hasattr(out, "pooler_output") else out
        feats = (feats / feats.norm(dim=-1, keepdim=True)).float()
    with _lock:
        text.kept[key] = feats  # the least recently used list goes past KEEP
    return feats


class TextTower:
    """A model's tokenizer, its scoring constants and the label sets it has embedded (held by its card)."""

    def __init__(self, tokenizer, sigmoid: bool):
        self.tokenizer = tokenizer
        self.sigmoid = sigmoid
        # SigLIP was trained on text padded to its full length; CLIP reads up to its end token
        self.padding = {"padding": "max_length" if sigmoid else True, "truncation": True}
        self.with_mask = not sigmoid
        self.kept: LRUCache = LRUCache(KEEP)  # (labels, template) -> their text embeddings
        self.records: LRUCache = LRUCache(KEEP)  # (labels, template) -> the labelled record (models.loaded.LoadedViT)

    def mask(self, tok: dict, device: torch.device) -> dict:
        return {"attention_mask": tok["attention_mask"].to(device)} if self.with_mask else {}


def with_labels(
    model: LoadedViT, labels: str | list[str] | tuple[str, ...] | None = None, template: str | None = None
) -> LoadedViT:
    """The record of `model` whose classes are `labels` (comma-separated text or a list; None: the default list)
    scored with `template` ("a photo of a {}."). A model without a text tower is handed back only when no labels
    are asked for; else ValueError with a sentence."""
    if not isinstance(model, LoadedViT):
        raise TypeError(
            "with_labels takes a model's record: vitviz.load_model(...) or vitviz.models.hub.loaded(module)"
        )
    if getattr(model.adapter, "text", None) is None:
        if labels is None and template is None:
            return model
        raise ValueError(
            f"{model.card.title} has fixed classes; labels in words need a model with a text tower (CLIP, SigLIP)."
        )
    labels, template = parse_labels(labels), check_template(template)
    if model.card.classes == labels and model.card.template == template:
        return model
    text, key = model.adapter.text, (labels, template)
    with _lock:
        kept = text.records.get(key)
    if kept is not None:  # the same record for the same words: what a visitor's views are kept by
        return kept
    from copy import copy

    adapter = copy(model.adapter)
    m = model.module
    adapter.words = Words(
        _embed(model, labels, template), m.logit_scale.detach(), m.logit_bias.detach() if text.sigmoid else None
    )
    cfg = replace(model.card.config, num_classes=len(labels))
    record = replace(model, adapter=adapter, card=replace(model.card, config=cfg, classes=labels, template=template))
    with _lock:
        record = text.records.setdefault(key, record)  # the least recently used past KEEP goes
    return record
