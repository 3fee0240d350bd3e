"""The last step of a model scored in words (CLIP, SigLIP): the image's embedding against each label's text
embedding, and the probabilities the model's rule makes of those scores."""

from __future__ import annotations

import numpy as np
import torch

from vitviz.models.loaded import LoadedViT
from vitviz.pictures import figures


def cosines(model: LoadedViT, logits: torch.Tensor) -> torch.Tensor:
    """(C,) cosine of the image's embedding with each label's text embedding, from the model's (C,) scores:
    score = exp(scale) x cosine (+ bias for SigLIP)."""
    words = model.adapter.words
    bias = 0.0 if words.bias is None else float(words.bias)
    return (logits.float() - bias) / float(words.scale.exp())


def label_bars(model: LoadedViT, logits: torch.Tensor) -> np.ndarray:
    """The labels' cosines with the image and their probabilities by the model's rule, side by side (the 10 most
    probable)."""
    rule = "sigmoid of each score (%)" if model.adapter.words.sigmoid else "softmax over the labels (%)"
    probs = model.probabilities(logits.float())
    return figures.score_bars(
        model.card.classes, cosines(model, logits), probs, "cosine with the label's text embedding", rule
    )


def head_sentence(model: LoadedViT, logits: torch.Tensor) -> str:
    """The last step in words, with this model's numbers."""
    words, classes = model.adapter.words, model.card.classes
    probs = model.probabilities(logits.float())
    best = int(probs.argmax())
    pooled = (
        "the pooling head (a learned query attending to every token) makes one vector of the final-normed tokens"
        if model.layout.reader == "pooling query"
        else "the final norm and a linear projection turn the CLS token into the image's embedding"
    )
    rule = (
        f"plus a learned bias ({float(words.bias):.2f}); each label's sigmoid is its own probability, so they need "
        "not add up to 100%"
        if words.sigmoid
        else "a softmax over your labels makes them probabilities that add up to 100%"
    )
    return (
        f'After the last block {pooled}. Each label, written into the prompt "{model.card.template}", goes through the '
        f"text tower to its own embedding; the score is their cosine times a learned scale "
        f"({float(words.scale.exp()):.1f}), {rule}: **{classes[best]}** ({100 * float(probs[best]):.1f}%)."
    )
