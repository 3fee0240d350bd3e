"""The lines under Explore's pictures that say how to read them: a classifier's, and those of a model that learned
its features without labels (DINOv2, DINOv3), whose pictures are its features' own; the model change sets them
(vitviz.app.switch.controls_for), so that no line speaks of a class to a model that has none."""

from __future__ import annotations

from vitviz.explain import interpret
from vitviz.explain.methods import CLASS_MAPS, METHODS

HELP = {
    "sees": "What the model sees, cut into its patches. **Click a patch** to see what it attends to; click a "
    "**tile beside the grid** for a token before the patches: **CLS** (the class token, whose output is "
    "classified), and where a model has them its distillation token (dist) or registers (reg).",
    "rollout": "Where the selected token's information comes from, attention multiplied through every layer "
    "(Abnar & Zuidema, 2020). Brighter: more. *Discard weakest*: the share of each layer's weakest attention "
    "weights dropped before multiplying (0: none).",
    "class_map": "Which patches matter for the named class, by the chosen method. "
    + " ".join(f"**{m}**: {METHODS[m].about}" for m in CLASS_MAPS)
    + " The *Take patches away* tab tests them.",
    "head_large": "One head of one layer: the selected token's softmax row, how much it takes from each patch "
    "(the row sums to 1 with CLS).",
    "rollout_strip": "Rollout stopped after layer 1, 2, ...: how the picture forms with depth.",
    "lens": "What the model would predict if it stopped after each block: the CLS token read by the final norm "
    "and head (the logit lens). The Step by step tab walks through every stage.",
    "norms": "How long each patch token is after each block (its L2 norm). Large ViTs grow a few tokens with "
    f"far larger norms that soak up attention (Darcet et al., 2024); any at {interpret.OUTLIER_RATIO:g}x its "
    "block's median or more is outlined and named in the title.",
    "heads": "Each tile is one head's attention from the selected token. Early layers often look near the token, "
    "later ones across the image.",
}
WITHOUT_CLASSES = {  # the same lines for a model that learned its features without labels (DINOv2, DINOv3)
    "sees": "What the model sees, cut into its patches. **Click a patch** to see what it attends to; click a "
    "**tile beside the grid** for a token before the patches: **CLS** (it gathers the whole image) and, where "
    "the model has them, its registers (reg: spare tokens it learned to park global information in).",
    "class_map": "This model has no classifier, so nothing to explain by name: the map shows how alike each patch's "
    "final features are to the selected patch's (cosine similarity; red alike, blue opposite). Patches of one "
    "object are alike: that is what these models learn.",
    "lens": "The final features in three colours (their three main directions: patches of one colour are alike), "
    "and where each head of the last layer looks most from CLS.",
}
HELPED = ("sees", "class_map", "lens")  # the lines that follow the model (vitviz.app.switch.controls_for)


def help_for(has_classes: bool) -> dict:
    """The help lines that depend on the model: a classifier's, or a model without one's."""
    return {f"help_{k}": HELP[k] if has_classes else WITHOUT_CLASSES[k] for k in HELPED}
