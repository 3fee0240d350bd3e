"""One image through the ViT, stage by stage, as the tutorials teach it, with the model's real tensors.

`walk_image` runs the model once (vitviz.explain.interpret.walk); `StepView` holds a picture and a
sentence per stage, drawn by `render_steps` for a chosen block and token. The sentences
name the numbers of the model in use. No Gradio here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
import torch
from PIL import Image, ImageDraw

from vitviz.explain import interpret
from vitviz.models.loaded import LoadedViT, Token
from vitviz.pictures import draw, figures, spots
from vitviz.pictures.drawn import Drawn
from vitviz.pictures.explanation import nearest_one_based
from vitviz.pictures.explore import PictureCache
from vitviz.pictures.input_view import main_size, sees_picture, sees_spots
from vitviz.pictures.layers import lens_panel, locks_in
from vitviz.pictures.panels import Scale, message_panel, panel
from vitviz.pictures.style import px
from vitviz.pictures.words import head_sentence, label_bars


@dataclass
class Walk(Drawn):
    """What every stage is drawn from: the input pixels and the tensors of one forward pass."""

    pixels: np.ndarray  # (H, W, C) uint8, as the model receives it before normalisation
    x: torch.Tensor  # (C, H, W) normalised
    patches: torch.Tensor  # (P, D) the patch embedding's output
    tokens: torch.Tensor  # (N, D) CLS prepended, positional embedding added
    blocks: torch.Tensor  # (L, N, D) each block's output
    attn: torch.Tensor  # (L, H, N, N)
    lens: torch.Tensor  # (L, C) the logit lens: class probabilities after each block
    logits: torch.Tensor  # (C,)


def walk_image(model: LoadedViT, pixels: np.ndarray) -> Walk:
    card = model.card
    x = model.tensor(pixels)
    w = interpret.walk(model, x)
    L = w["blocks"].shape[1]
    lens = interpret.lens(model, w["blocks"])[0].cpu() if card.classes else torch.zeros(L, 0)  # no classifier: no lens
    return Walk(
        pixels,
        x[0].cpu(),
        w["patches"][0].cpu(),
        w["tokens"][0].cpu(),
        w["blocks"][0].cpu(),
        w["attn"][0].cpu(),
        lens,
        w["logits"][0].cpu(),
    )


@dataclass
class StepView:
    """A picture and a sentence per stage; the field order is the order of the outputs."""

    input: np.ndarray
    input_text: str
    sequence: np.ndarray
    sequence_text: str
    embedding: np.ndarray
    embedding_text: str
    positions: np.ndarray
    positions_text: str
    block: np.ndarray
    block_text: str
    head: np.ndarray
    head_text: str
    lens: np.ndarray
    lens_text: str
    spots: dict = field(default_factory=dict)  # not an output: each picture's tokens, where a click picks one

    def outputs(self) -> tuple:
        return tuple(getattr(self, name) for name in STEP_NAMES)


STEP_NAMES = tuple(f.name for f in fields(StepView) if f.name != "spots")


def _matrix(m: torch.Tensor, title: str, what: str, first: int, mark_first: bool = False) -> tuple:
    """A (rows, D) matrix as a heat strip per row (one row a token, the first the token in place `first` of the
    sequence), on a symmetric diverging scale; and its rows' spots."""
    a = m.float().numpy()
    hi = float(np.abs(a).max()) or 1.0
    step = max(1, a.shape[1] // 384)  # at most 384 columns shown: every `step`-th value
    a = a[:, ::step]
    sy = max(1, min(4, 256 // a.shape[0]))
    sx = max(1, min(3, 384 // a.shape[1]))
    img = np.repeat(np.repeat(draw.colorize(a, "RdBu_r", -hi, hi), sy, 0), sx, 1)
    if mark_first:
        img = img.copy()
        img[:sy, :, :] = (0, 200, 230)  # the CLS row, outlined in the highlight colour
    note = "" if step == 1 else f"; every {step}th value shown"
    rows = [spots.Spot(0, 0, img.shape[1], sy, 1, a.shape[0], first, a.shape[0])]
    pic = panel(img, title, Scale(what + note, -hi, hi, "one scale for the whole matrix", cmap="RdBu_r"), min_width=300)
    return pic, spots.under_title(rows, title, max(300, img.shape[1]), img.shape[1])


def _sequence(pixels: np.ndarray, g: int, patch: int | None, first: int) -> tuple:
    """The patches cut out and laid in reading order, numbered, the selected one outlined; and their spots
    (patch 0 the token in place `first`)."""
    img = draw.to_rgb(pixels)
    p = img.shape[0] // g
    cell = max(20, min(36, 560 // min(g * g, 16)))
    per_row = min(g * g, 16 if g <= 8 else 28)
    rows = -(-g * g // per_row)
    label = px(13 if cell >= 24 else 11)
    below = label + 5  # room for the number under each tile
    canvas = Image.new("RGB", (per_row * (cell + 4) + 4, rows * (cell + below) + 4), draw.BG)
    d = ImageDraw.Draw(canvas)
    f = draw.font(label)
    for k in range(g * g):
        r, c = divmod(k, g)
        tile = Image.fromarray(np.ascontiguousarray(img[r * p : (r + 1) * p, c * p : (c + 1) * p])).resize(
            (cell, cell), Image.NEAREST
        )
        x, y = 4 + (k % per_row) * (cell + 4), 4 + (k // per_row) * (cell + below)
        canvas.paste(tile, (x, y))
        d.text((x, y + cell + 1), str(k), fill=(40, 40, 40), font=f)
        if k == patch:
            d.rectangle([x - 2, y - 2, x + cell + 1, y + cell + 1], outline=draw.HIGHLIGHT, width=2)
    return np.asarray(canvas), [spots.Spot(2, 2, cell + 4, cell + below, per_row, rows, first, g * g)]


def _filters(model: LoadedViT, k: int = 16) -> np.ndarray:
    weight = model.adapter.patch_embed.proj.weight
    w = weight.detach().float().cpu()[:k]  # (k, C, p, p)
    lo = w.flatten(1).amin(1)[:, None, None, None]
    hi = w.flatten(1).amax(1)[:, None, None, None]
    grid = draw.components_image((w - lo) / (hi - lo).clamp_min(1e-12), tile_size=32, cols=8)
    title = f"The first {len(w)} of {weight.shape[0]} filters"
    if w.shape[1] == 1:  # one channel: a grey bar says it all
        return panel(grid, title, Scale("filter weight", 0, 1, "each filter its own range", cmap="gray", relative=True))
    return panel(grid, title, note=FILTER_COLOURS)


FILTER_COLOURS = (
    "Each filter drawn as a colour picture: its red, green and blue weights stretched from the filter's lowest "
    "(dark) to its highest (bright); mid-grey is not zero."
)


def _head(model: LoadedViT, w: Walk) -> np.ndarray:
    """The last stage: the head's logits and probabilities, a model scored in words' comparison with each label,
    or why a model without a classifier has none."""
    if not model.card.classes:
        return message_panel(224, "The head", NO_HEAD)
    return label_bars(model, w.logits) if model.zero_shot else _bars(model, w)


def _bars(model: LoadedViT, w: Walk) -> np.ndarray:
    """The head: the largest logits and their softmax probabilities, side by side."""
    classes = model.card.classes
    return figures.score_bars(
        classes, w.logits, w.logits.softmax(-1), "logit (the head's raw score)", "softmax probability (%)"
    )


def _block(model: LoadedViT, w: Walk, block: int, row: int, stand_in: bool = False) -> tuple:
    """Block `block` (1-based): every head's attention from the token in place `row` of the sequence, and the
    tokens' norms after it; and the patches' spots on both. `stand_in`: the row stands in for SigLIP's pooling
    query, which is in no block (the title says so)."""
    cfg = model.card.config
    layout = model.layout
    K = layout.num_prefix
    g = cfg.grid_size
    H = w.attn.shape[1]
    maps = w.attn[block - 1, :, row, K:].reshape(1, H, g, g)
    lo, hi = maps.flatten(2).amin(-1)[..., None, None], maps.flatten(2).amax(-1)[..., None, None]
    small = max(56, min(96, 600 // H))
    tiles = draw.overlays(w.pixels, ((maps - lo) / (hi - lo).clamp_min(1e-12))[0], small, alpha=0.75)
    strip = draw.tile([list(tiles)], col_labels=[f"head {j + 1}" for j in range(H)], pad=3)
    _, top = draw.tile_margins((), True)
    title = f"Block {block}: attention from {layout.at_row(row).name}, head by head" + (
        f" ({layout.first()} is in no block)" if stand_in else ""
    )
    heads = panel(strip, title, Scale("attention weight", 0, 1, "each tile its own range", relative=True))
    head_spots = [spots.grid(3 + j * (small + 3), top + 3, small, g, K) for j in range(H)]
    norms = w.blocks[block - 1].norm(dim=-1)
    S = main_size(cfg)
    n = norms[K:].view(g, g)
    pic = draw.overlay(
        w.pixels, n, S, cmap="magma", alpha=0.8, mode="nearest", vmin=float(n.min()), vmax=float(n.max())
    )
    title2 = f"Token norms after block {block}" + (f" ({layout.prefix[0]}: {float(norms[0]):.1f})" if K else "")
    pic = panel(
        pic, title2, Scale("length (L2 norm) of each patch token", float(n.min()), float(n.max()), cmap="magma")
    )
    return _side(
        (heads, spots.under_title(head_spots, title, strip.shape[1], strip.shape[1])),
        (pic, spots.under_title([spots.grid(0, 0, S, g, K)], title2, S, S)),
    )


TITLES = {"head": "6. The head: logits, softmax, prediction", "lens": "Over depth: the logit lens"}  # a classifier's


def stage_titles(model: LoadedViT) -> dict[str, str]:
    """The titles of the stages that differ by model (the head, and the read-out over depth), by stage name: a
    model without a classifier has neither logits nor a logit lens; one scored in words compares the image with
    each label, by its own rule (CLIP's softmax, SigLIP's sigmoid for each)."""
    if not model.card.classes:
        return {"head": "6. No head: the features are the output", "lens": "Over depth: nothing to read out"}
    if model.zero_shot:
        rule = "a sigmoid for each" if model.adapter.words.sigmoid else "softmax"
        return {**TITLES, "head": f"6. The head: the image against each label ({rule})"}
    return TITLES


NO_HEAD = (
    "This model has no classifier: it learned its features without labels (DINO, DINOv2), so there is no "
    "head to read after any block. Explore shows its features instead."
)


def _inputs_text(cfg, C, g, p, P, D, mean, std, front, N, grow, patch) -> dict[str, str]:
    """The first four stages' sentences, the same for every model."""
    return {
        "input_text": f"The model receives a {cfg.image_size}x{cfg.image_size} image with {C} channel(s), each "
        f"normalised as (value - mean) / std with mean ({mean}) and std ({std}). It is cut into a "
        f"{g}x{g} grid of {p}x{p}-pixel patches. Click a patch, or CLS, to follow it below.",
        "sequence_text": f"The grid read row by row becomes a sequence of {P} patches, each {p} x {p} x {C} = "
        f"{p * p * C} numbers. From here on the model sees a list, not an image.",
        "embedding_text": f"One learned linear map (the filters above, one per output value; the first 16 of {D}) "
        f"turns each patch into a {D}-value token: {P} x {p * p * C} -> {P} x {D}.",
        "positions_text": f"{front} put in front ({N} tokens) and a learned positional embedding is "
        f"added to every token, one {D}-vector per position, so each token also carries where it "
        f"is; on this image it changes the patch tokens by {100 * grow:.0f}% of their length on "
        f"average. Right: how similar position {patch if patch is not None else (g * g) // 2 + g // 2}'s "
        "embedding is to every other position's (the centre one while a token before the patches is selected).",
    }


def _positions_text(model: LoadedViT, front: str, N: int, D: int, grow: float, patch: int | None) -> str | None:
    """The fourth stage's sentence where the usual one is false: no learned positions (rotary), or no token put
    in front (SigLIP); None otherwise."""
    if interpret.pos_embed_similarity(model) is None:
        return (
            f"{front} put in front ({N} tokens). No positional embedding is added: inside every attention, each "
            "query and key is turned by an angle set by its patch's row and column (rotary positions), so "
            "attention knows where tokens are without a vector per position."
        )
    if not model.layout.prefix:
        return (
            f"No token is put in front: the {N} tokens are the patches, and a learned positional embedding is added "
            f"to each, one {D}-vector per position (it changes them by {100 * grow:.0f}% of their length on "
            f"average). After the last block a {model.layout.reader} reads them all. Right: how similar "
            f"{f'position {patch}' if patch is not None else 'the centre position'}'s embedding is to every other "
            "position's."
        )
    return None


def _reads(model: LoadedViT) -> str:
    """What reads the tokens to predict, in words."""
    if model.layout.reader == "pooling query":
        return "the pooling head reading the final-normed tokens, scored against your labels,"
    if model.layout.reader == "CLS and distillation":
        return "the CLS and distillation tokens read by the final norm and their two heads (averaged)"
    return "the CLS token read by the final norm and " + (
        "projection, scored against your labels," if model.zero_shot else "head"
    )


def texts(model: LoadedViT, w: Walk, block: int, patch: int | None) -> dict[str, str]:
    """The sentences of every stage, with this model's numbers."""
    card = model.card
    cfg, classes = card.config, card.classes
    P, D, N, L, p, C = cfg.num_patches, cfg.embed_dim, cfg.num_patches + 1, cfg.depth, cfg.patch_size, cfg.in_chans
    g = cfg.grid_size
    mean = ", ".join(f"{v:.3g}" for v in card.mean)
    std = ", ".join(f"{v:.3g}" for v in card.std)
    layout = model.layout
    K = layout.num_prefix
    N = layout.num_tokens
    grow = float((w.tokens[K:] - w.patches).norm(dim=-1).mean() / w.patches.norm(dim=-1).mean().clamp_min(1e-12))
    front = "A learned CLS token is" if K == 1 else f"{K} learned tokens ({', '.join(layout.prefix)}) are"
    if not classes:
        inputs = _inputs_text(cfg, C, g, p, P, D, mean, std, front, N, grow, patch)
        return {
            **inputs,
            "positions_text": _positions_text(model, front, N, D, grow, patch) or inputs["positions_text"],
            "block_text": f"Each of the {L} blocks lets every token attend to all {N} (attention, then an MLP, "
            "each added back to its input).",
            "head_text": NO_HEAD,
            "lens_text": NO_HEAD,
        }
    top = [(classes[i], float(v)) for v, i in zip(*w.lens[block - 1].topk(min(3, len(classes))))]
    final = int(w.logits.argmax())
    lock = locks_in(w.lens)
    inputs = _inputs_text(cfg, C, g, p, P, D, mean, std, front, N, grow, patch)
    inputs["positions_text"] = _positions_text(model, front, N, D, grow, patch) or inputs["positions_text"]
    return {
        **inputs,
        "block_text": f"Each of the {L} blocks lets every token attend to all {N} (attention, then an MLP, each added "
        f"back to its input). After block {block}, {_reads(model)} would give: "
        + ", ".join(f"{c} {100 * v:.0f}%" for c, v in top)
        + ".",
        "head_text": head_sentence(model, w.logits)
        if model.zero_shot
        else f"After block {L} the final norm and a linear head turn the CLS token's {D} values into "
        f"{len(classes)} logits; softmax makes them probabilities: **{classes[final]}** "
        f"({100 * float(w.logits.softmax(-1)[final]):.1f}%).",
        "lens_text": f"The leading class after each block; the final prediction, {classes[final]}, leads from block "
        f"{lock} of {L} on.",
    }


def render_steps(
    model: LoadedViT,
    w: Walk,
    block: int = 1,
    token: Token | None = None,
    cache: PictureCache | None = None,
) -> tuple[StepView, set[str]]:
    """Every stage for block `block` (1-based, clamped) and the selected token (vitviz.models.loaded.Token; None,
    or one this model lacks: the first, CLS), and the names of the pictures drawn now: those that do not depend on
    what changed come from `cache`."""
    cfg = model.card.config
    L, g = cfg.depth, cfg.grid_size
    block = nearest_one_based(block, L, default=1)
    token = model.layout.kept(token.number if token else -1)
    patch, K = token.patch, model.layout.num_prefix
    row = 0 if token.row is None else token.row  # SigLIP's pooling query is in no row: patch 0's stands in
    cache = cache or PictureCache()
    sim_at = patch if patch is not None else (g * g) // 2 + g // 2
    prefix = ", ".join(model.layout.prefix)
    tokens = (
        f"{len(w.tokens)} tokens (" + (f"{prefix} first, CLS outlined" if K else "the patches alone") + ") + positions"
    )
    made = {
        "input": (("token", token.number), lambda: _input(cfg, model.layout, w.pixels, token)),
        "sequence": (("patch", patch), lambda: _sequence(w.pixels, g, patch, K)),
        "embedding": (
            (),
            lambda: _side(
                (_filters(model), []),
                _matrix(w.patches, f"{cfg.num_patches} patch tokens x {cfg.embed_dim} values", "embedding value", K),
            ),
        ),
        "positions": (
            ("patch", patch),
            lambda: _side(_matrix(w.tokens, tokens, "token value", 0, True), _similarity(model, sim_at, K)),
        ),
        "block": (
            ("block", block, "row", row, "patch", patch),
            lambda: _block(model, w, block, row, stand_in=patch is None and not K),
        ),
        "head": ((), lambda: (_head(model, w), [])),
        "lens": (
            (),
            lambda: (
                lens_panel(model.card.classes, w.lens)
                if model.card.classes
                else message_panel(224, "Over depth", NO_HEAD),
                [],
            ),
        ),
    }
    got = {name: cache.get(name, w, key, make) for name, (key, make) in made.items()}
    view = StepView(**{name: pic for name, ((pic, _), _) in got.items()}, **texts(model, w, block, patch))
    view.spots = {name: spots for name, ((_, spots), _) in got.items()}
    return view, {name for name, (_, new) in got.items() if new}


def _input(cfg, layout, pixels: np.ndarray, token: Token) -> tuple:
    """Stage 1: the input on its grid with a tile for each token before the patches (SigLIP: its pooling query's),
    the selected one outlined; the patches' and the tiles' spots."""
    return sees_picture(pixels, cfg.grid_size, main_size(cfg), layout, token), sees_spots(cfg, layout)


def _similarity(model: LoadedViT, position: int, K: int) -> tuple:
    title = f"Position {position}'s embedding against every position's"
    if interpret.pos_embed_similarity(model) is None:
        why = "This model learns no embedding per position: it turns each query and key by its position (rotary)."
        return message_panel(224, "Positions", why), []
    pic = panel(
        draw.similarity_map(interpret.pos_embed_similarity(model), position, 224),
        title,
        Scale("cosine similarity", -1.0, 1.0, "one scale, -1 to 1", cmap="viridis"),
    )
    return pic, spots.under_title([spots.grid(0, 0, 224, model.card.config.grid_size, K)], title, 224, 224)


def _side(a: tuple, b: tuple) -> tuple:
    """Two (picture, spots) side by side, 20 px apart: one picture and the spots of both."""
    (pa, sa), (pb, sb) = a, b
    h = max(pa.shape[0], pb.shape[0])
    pad = lambda m: np.concatenate([m, np.full((h - m.shape[0], m.shape[1], 3), 255, np.uint8)])  # noqa: E731
    return np.concatenate([pad(pa), np.full((h, 20, 3), 255, np.uint8), pad(pb)], 1), sa + spots.moved(
        sb, pa.shape[1] + 20, 0
    )
