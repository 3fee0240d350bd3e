"""From a model and an image to every picture a page shows: interpret, then render.

The app's handlers call these; so do the tests and benchmarks. No Gradio here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

    from vitviz.models.loaded import LoadedViT
    from vitviz.models.vit import ViTConfig

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from vitviz.data.images import flattened
from vitviz.explain import interpret
from vitviz.pictures import draw, figures
from vitviz.pictures.drawn import Drawn
from vitviz.pictures.panels import Scale, message_panel, panel


@dataclass
class Explanation(Drawn):
    """One image through one model: what every Explore picture is drawn from."""

    pixels: np.ndarray  # (H, W, C) uint8: what the model sees
    probs: torch.Tensor  # (C,)
    target: int  # the class gradient rollout explains
    attn: torch.Tensor  # (L, H, N, N)
    grad_rollout: torch.Tensor  # (P,)
    lens: torch.Tensor  # (L, C) the logit lens: class probabilities after each block
    norms: torch.Tensor  # (L, N) every token's L2 norm after each block
    maps: dict = field(default_factory=dict)  # method name -> (P,) map for `target`, made on first use
    prefix: int = 1  # the tokens before the patches: CLS, then distillation or register tokens
    original: np.ndarray | None = None  # the visitor's image as uploaded (a thumbnail), before the crop
    features: torch.Tensor | None = None  # (P, D) the patches' final features, for a model without a classifier
    pool: torch.Tensor | None = None  # (H, N) SigLIP: its pooling query's attention over the last block's tokens

    def __post_init__(self):
        self.maps.setdefault("gradient rollout", self.grad_rollout)  # made in the analysis's own pass

    @property
    def has_head(self) -> bool:
        return self.features is None


def nearest_one_based(value: object, count: int, default: int | None = None) -> int:
    """A 1-based layer, head or block brought into 1..`count` (None: `default`, or else `count`): the one rule
    every view and the app's sentences follow."""
    v = (count if default is None else default) if value is None else int(value)
    return min(max(1, v), count)


def original_thumbnail(image: Image.Image, box: int = 200) -> np.ndarray:
    """The visitor's image as uploaded, flattened as the model gets it (vitviz.data.images.flattened: EXIF-rotated,
    transparency on white), RGB, scaled to fit `box` x `box` (a small one enlarged, its pixels kept sharp)."""
    from PIL import Image

    im = flattened(image).convert("RGB")
    scale = box / max(im.size)
    size = (max(1, round(im.width * scale)), max(1, round(im.height * scale)))
    return np.asarray(im.resize(size, Image.NEAREST if scale > 1 else Image.BILINEAR))


def parse_target(model: LoadedViT, target: int | None) -> int | None:
    """None for the predicted class; a class index from an index, a name or 'predicted'."""
    classes = model.card.classes
    if target is None or target == "" or (isinstance(target, str) and target.lower().startswith("predicted")):
        return None
    if isinstance(target, (int, np.integer)) or (
        isinstance(target, str) and target.strip().lstrip("-").isdigit() and target.strip() not in classes
    ):
        t = int(target)
    elif target in classes:
        t = classes.index(target)
    else:
        raise ValueError(f"unknown class {str(target)[:40]!r}")
    if not 0 <= t < len(classes):
        raise ValueError(f"class index must be in 0..{len(classes) - 1}")
    return t


def analyse(model: LoadedViT, pixels: np.ndarray, target: int | None = None) -> Explanation:
    """One forward and backward pass: probabilities, attention and gradient rollout for `target`."""
    x = model.tensor(pixels)
    K = model.layout.num_prefix
    if model.head is None:  # no classifier (DINO, DINOv2): no class, no logit lens; its features instead
        with torch.no_grad():
            out = model.forward_intermediates(x)
            features = model.norm(out["tokens"][-1])[0, K:].float().cpu()
        return Explanation(
            pixels,
            torch.zeros(0),
            -1,
            torch.stack(out["attn"], 1)[0].float().cpu(),
            torch.zeros(model.layout.num_patches),
            torch.zeros(len(model.blocks), 0),
            torch.stack([t.float().norm(dim=-1) for t in out["tokens"]], 1)[0].cpu(),
            prefix=K,
            features=features,
        )
    ex = interpret.attention_and_relevance(model, x, target=parse_target(model, target))
    return Explanation(
        pixels,
        model.probabilities(ex["logits"][0]).cpu(),
        int(ex["target"][0]),
        ex["attn"][0].cpu(),
        ex["grad_rollout"][0].cpu(),
        ex["lens"][0].cpu(),
        ex["norms"][0].cpu(),
        prefix=K,
        pool=None if ex["pool"] is None else ex["pool"][0].cpu(),
    )


def class_map(model: LoadedViT, ex: Explanation, method: str) -> torch.Tensor:
    """(P,) map of `method` for the explanation's image and class, made once per explanation."""
    from vitviz.explain.methods import relevance

    if method not in ex.maps:
        x = model.tensor(ex.pixels)
        ex.maps[method] = relevance(model, x, method, ex.target)[0].cpu()
    return ex.maps[method]


def what_it_knows(model: LoadedViT) -> str:
    """The prediction box's title: which classes the model knows, at what size (a photo of anything else still
    gets one of them)."""
    card = model.card
    s, n = card.config.image_size, len(card.classes)
    if n == 0:
        return "No classifier: this model learned without labels and names nothing"
    if model.zero_shot:
        rule = (
            "each its own sigmoid: they need not add up to 100%" if model.adapter.words.sigmoid else "softmax over them"
        )
        return f"Zero-shot: your {n} label{'s' * (n > 1)}, scored against the image ({rule})"
    if n <= 12:
        return f"Top 5 (this model knows only {n} classes, at {s}x{s} px)"
    return f"Top 5 of the {n:,} classes it knows ({s}x{s} px)"


def shown_classes(model: LoadedViT) -> int:
    """How many classes the prediction box lists: the top 5, or every label of a model scored in words (up to
    10)."""
    return min(10, len(model.card.classes)) if model.zero_shot else 5


def top_k(model: LoadedViT, probs: torch.Tensor, k: int | None = None) -> dict[str, float]:
    """The `k` most probable classes (None: `shown_classes`) with their probabilities."""
    classes = model.card.classes
    k = shown_classes(model) if k is None else k
    p, i = probs.topk(min(k, len(probs)))
    return {classes[j]: float(v) for v, j in zip(p.tolist(), i.tolist())}


def display_size(cfg: ViTConfig) -> int:
    """Side in pixels of the enlarged input: a whole multiple of the input's side, near 256 and at least
    32 pixels a patch."""
    return cfg.image_size * max(1, round(max(256, 32 * cfg.grid_size) / cfg.image_size))


def pos_tile_size(grid: int) -> int:
    """Side of one positional-similarity tile on the Model tab."""
    return max(16, min(40, 400 // grid))


# ---------------------------------------------------------------- Model tab


@dataclass
class ModelSummary:
    """The Model tab's pictures that depend only on the model (and its example images), computed once."""

    similarity: torch.Tensor | None  # (P, P) positional-embedding cosine similarity; None: rotary positions
    distances: torch.Tensor  # (L, H) mean attention distance of every head, in pixels
    uniform: float  # the distance uniform attention would give
    components: torch.Tensor  # (k, C, p, p) the patch-embedding filters' principal components, each in [0, 1]
    variance: torch.Tensor  # (k,) their explained variance ratio
    card: str  # the model card, markdown
    images: int  # how many images the distances average over


def distance_over_batch(model: LoadedViT, images: list[np.ndarray], batch_size: int = 50) -> torch.Tensor:
    """Mean attention distance (L, H) over a batch of input pixel arrays."""
    card = model.card
    total, n = None, 0
    for i in range(0, len(images), batch_size):
        x = model.tensor(list(images[i : i + batch_size]))
        d = interpret.mean_attention_distance(
            interpret.attention_maps(model, x), card.config.patch_size, prefix=model
        ) * len(x)
        total = d if total is None else total + d
        n += len(x)
    return total / max(1, n)


def summarise_model(model: LoadedViT, images: list[np.ndarray]) -> ModelSummary:
    """The expensive part of the Model tab: attention distances over `images`, the SVD (no pictures: they are
    drawn for each visitor, in their style)."""
    cfg = model.card.config
    comps, var = interpret.patch_embed_components(model, 16)
    N = cfg.num_patches  # uniform attention over the patches alone: the same whatever comes before them
    return ModelSummary(
        similarity=interpret.pos_embed_similarity(model),
        distances=distance_over_batch(model, images),
        uniform=float(
            interpret.mean_attention_distance(torch.full((1, 1, 1, N, N), 1.0 / N), cfg.patch_size, prefix=0)
        ),
        components=comps,
        variance=var,
        card=model_card(model),
        images=len(images),
    )


def distance_picture(s: ModelSummary) -> np.ndarray:
    fig = figures.distance_figure(s.distances, f"Mean attention distance over {s.images} images", s.uniform)
    return figures.figure_to_array(fig)


def components_picture(s: ModelSummary, cols: int = 8) -> np.ndarray:
    """The principal components, each labelled with its number and its share of the filters' variance."""
    one = draw.component_tiles(s.components, tile_size=64)
    rows = []
    for start in range(0, len(one), cols):
        part = one[start : start + cols]
        labels = [f"{start + i + 1}: {100 * float(s.variance[start + i]):.0f}%" for i in range(len(part))]
        rows.append(draw.tile([part], col_labels=labels))
    width = max(r.shape[1] for r in rows)
    grid = np.concatenate([np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0)), constant_values=255) for r in rows])
    return panel(
        grid,
        "The patch embedding's main directions (principal components): number, share of the variance",
        note=f"Together {100 * float(s.variance.sum()):.0f}% of the filters' variance. "
        + (
            "Each drawn as a colour picture, its red, green and blue stretched from its lowest (dark) to its highest "
            "(bright) value; mid-grey is not zero."
            if s.components.shape[1] == 3
            else "Each from its lowest (dark) to its highest (bright) value."
        ),
        min_width=300,
    )


def default_position(cfg: ViTConfig) -> int:
    """The position the Model tab highlights first: the one nearest the grid's centre."""
    g = cfg.grid_size
    return (g * g) // 2 + g // 2


def position_pictures(summary: ModelSummary, cfg: ViTConfig, position: int) -> tuple[np.ndarray, np.ndarray]:
    """(the similarity tiles with `position` outlined, that position's similarity map large): cheap redraws."""
    g = cfg.grid_size
    if summary.similarity is None:  # rotary positions (DINOv3): no embedding per position to compare
        why = (
            "This model learns no embedding per position: it turns each query and key by its patch's position "
            "(rotary positions), so there is no positional embedding to compare."
        )
        return message_panel(display_size(cfg), "Positional embeddings", why), message_panel(
            display_size(cfg), f"Position {position}", why
        )
    scale = Scale("cosine similarity of positional embeddings", -1.0, 1.0, "one scale for all tiles", cmap="viridis")
    tiles = draw.pos_similarity_tiles(summary.similarity, tile_size=pos_tile_size(g), highlight=position)
    large = draw.similarity_map(summary.similarity, position, display_size(cfg))
    return (
        panel(tiles, "", scale),
        panel(
            large,
            f"Position {position} (outlined) against every position",
            Scale("cosine similarity", -1.0, 1.0, "the same -1..1 scale as the tiles", cmap="viridis"),
        ),
    )


def pos_click_to_position(x: float, y: float, cfg: ViTConfig) -> int:
    return draw.pos_tile_at(x, y, cfg.grid_size, pos_tile_size(cfg.grid_size))


def model_card(model: LoadedViT) -> str:
    r = model
    card, cfg = r.card, r.card.config
    params = sum(p.numel() for p in r.module.parameters())
    prefix = r.layout.counted()
    rows = [
        f"### {card.title}",
        f"- **Input:** {cfg.image_size}x{cfg.image_size}, {cfg.in_chans} channel(s); "
        f"patch {cfg.patch_size} -> a {cfg.grid_size}x{cfg.grid_size} grid, {cfg.num_patches} patches + {prefix}",
        f"- **Transformer:** depth {cfg.depth}, {cfg.num_heads} heads, width {cfg.embed_dim}, "
        f"MLP {int(cfg.embed_dim * cfg.mlp_ratio)}; {params:,} parameters",
        _classes_line(r),
    ]
    acc = card.accuracy()
    if acc:
        rows.append("- **Accuracy:** " + ", ".join(f"{name} {100 * v:.2f}%" for name, v in acc.items()))
    if card.train:
        rows.append(_training_line(card))
    return "\n".join(rows)


def _classes_line(r: LoadedViT) -> str:
    card, n = r.card, r.card.config.num_classes
    if r.zero_shot:
        rule = "each label's own sigmoid" if r.adapter.words.sigmoid else "a softmax over the labels"
        return (
            f"- **Labels ({n}), in your words:** "
            + ", ".join(card.classes[:12])
            + (" ..." if n > 12 else "")
            + f'. Each is written into the prompt "{card.template}", read by the text tower, and scored by its '
            f"cosine with the image's embedding ({rule})."
        )
    if n:
        return f"- **Classes ({n}):** " + ", ".join(card.classes[:12]) + (" ..." if n > 12 else "")
    return (
        "- **Classes:** none. This model has no classifier: it was trained to give features (self-supervised), so "
        "its pictures show attention and features, not classes."
    )


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _training_line(card) -> str:
    t, m = card.train, card.metrics
    epochs = m.get("epoch", t.get("epochs"))
    epochs = f"{epochs:g}" if isinstance(epochs, (int, float)) else "?"
    averaged = [s.get("epoch") for s in m.get("averaged_from") or [] if isinstance(s, dict)]
    seconds = m.get("train_seconds")
    return (
        f"- **Training:** {t.get('dataset')}, {epochs} epochs, batch {t.get('batch_size')}, "
        f"AdamW lr {t.get('lr')}, weight decay {t.get('weight_decay')}, label smoothing "
        f"{t.get('label_smoothing')}, augmentation {'on' if t.get('augment') else 'off'}"
        + (f", CutMix/Mixup {t['mix']}" if t.get("mix") else "")
        + (f", random erasing {t['erase']}" if t.get("erase") else "")
        + (f", {m['step']:,} steps" if isinstance(m.get("step"), int) else "")
        + (f"; {_duration(seconds)} of training" if isinstance(seconds, (int, float)) and seconds else "")
        + (
            f"; the weights averaged over epochs {min(averaged):g}-{max(averaged):g}"
            if averaged and all(isinstance(e, (int, float)) for e in averaged)
            else ""
        )
    )


# ---------------------------------------------------------------- export

EXPORT_NAMES = {
    "sees": "input_with_patch_grid",
    "rollout": "attention_rollout",
    "class_map": "class_map",
    "rollout_strip": "rollout_by_layer",
    "heads": "attention_every_layer_x_head",
    "head_large": "selected_layer_head",
    "lens": "logit_lens",
    "norms": "token_norms",
    "original": "your_image_and_the_crop",
}


def export_view(view: object, attn: torch.Tensor, folder: str | Path) -> tuple[Path, Path]:
    """Write every picture of a view (a pictures.explore.ExploreView) as PNGs in one zip, and the raw attention
    (L, H, N, N) as .npy."""
    import io
    import zipfile

    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    zpath, npath = folder / "vitviz-view.zip", folder / "vitviz-attention.npy"
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_STORED) as z:
        for name, pic in view.pictures().items():
            buf = io.BytesIO()
            Image.fromarray(np.asarray(pic, dtype=np.uint8)).save(buf, format="PNG")
            z.writestr(f"{EXPORT_NAMES.get(name, name)}.png", buf.getvalue())
    np.save(npath, attn.float().cpu().numpy())
    return zpath, npath
