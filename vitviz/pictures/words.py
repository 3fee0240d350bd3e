"""The last step of a model scored in words (CLIP, SigLIP): the image's embedding against each label's text
embedding, and the probabilities the model's rule makes of those scores."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from vitviz.models.loaded import LoadedViT, loaded
from vitviz.pictures import figures as FG


def cosines(model: LoadedViT, logits: torch.Tensor) -> torch.Tensor:
    """(C,) cosine of the image's embedding with each label's text embedding, from the model's (C,) scores:
    score = exp(scale) x cosine (+ bias for SigLIP)."""
    words = loaded(model).adapter.words
    bias = 0.0 if words.bias is None else float(words.bias)
    return (logits.float() - bias) / float(words.scale.exp())


def label_bars(model: LoadedViT, logits: torch.Tensor) -> np.ndarray:
    """The labels' cosines with the image and their probabilities by the model's rule, side by side (the 10 most
    probable)."""
    v = loaded(model)
    classes, probs = v.card.classes, v.probabilities(logits.float())
    cos = cosines(model, logits)
    k = min(10, len(classes))
    idx = probs.topk(k).indices.tolist()[::-1]
    fig = Figure(figsize=(7.2, 0.32 * k + 1.1), dpi=100)
    a1, a2 = fig.subplots(1, 2, sharey=True)
    names = [classes[i][:18] for i in idx]
    a1.barh(names, [float(cos[i]) for i in idx], color="#6b7280")
    a1.set_xlabel("cosine with the label's text embedding")
    a2.barh(names, [100 * float(probs[i]) for i in idx], color="#f97316")
    a2.set_xlabel("sigmoid of each score (%)" if v.adapter.words.sigmoid else "softmax over the labels (%)")
    a2.set_xlim(0, 100)
    for ax in (a1, a2):
        ax.grid(alpha=0.3, axis="x")
        ax.tick_params(labelsize=10)
    fig.tight_layout()
    return FG.figure_to_array(fig)


def head_sentence(model: LoadedViT, logits: torch.Tensor) -> str:
    """The last step in words, with this model's numbers."""
    v = loaded(model)
    words, classes = v.adapter.words, v.card.classes
    probs = v.probabilities(logits.float())
    best = int(probs.argmax())
    pooled = (
        "the pooling head (a learned query attending to every token) makes one vector of the final-normed tokens"
        if v.layout.reader == "pooling query"
        else "the final norm and a linear projection turn the CLS token into the image's embedding"
    )
    rule = (
        f"plus a learned bias ({float(words.bias):.2f}); each label's sigmoid is its own probability, so they need "
        "not add up to 100%"
        if words.sigmoid
        else "a softmax over your labels makes them probabilities that add up to 100%"
    )
    return (
        f'After the last block {pooled}. Each label, written into the prompt "{v.card.template}", goes through the '
        f"text tower to its own embedding; the score is their cosine times a learned scale "
        f"({float(words.scale.exp()):.1f}), {rule}: **{classes[best]}** ({100 * float(probs[best]):.1f}%)."
    )
