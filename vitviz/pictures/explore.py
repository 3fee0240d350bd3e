"""The Explore view's pictures, each drawn from an Explanation and only the options it depends on.

A visitor's `PictureCache` keeps the last picture of each name with what it was drawn
from, so a change of layer redraws the layer-and-head view alone; `render_explore`
says which pictures are new, and the page sends only those. The selected token (the
CLS token, or a patch) is what the rollout, the layer-and-head view, the rollout by
layer and the every-layer-and-head grid are drawn from; gradient rollout always
explains a class. Every map is a `panels.panel`: titled, with its colour bar.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import numpy as np
import torch

from vitviz.explain import interpret
from vitviz.explain.methods import DEFAULT_CLASS_MAP, METHODS
from vitviz.models.loaded import LoadedViT, Token
from vitviz.pictures import draw, style
from vitviz.pictures.backbone import backbone_panel, similarity_panel
from vitviz.pictures.explanation import Explanation, class_map, nearest_one_based, top_k
from vitviz.pictures.input_view import main_size, original_picture, sees_picture
from vitviz.pictures.layers import lens_panel, norms_panel
from vitviz.pictures.panels import Scale, is_flat, message_panel, panel


@dataclass(frozen=True)
class Options:
    """What the visitor chose: rollout's head fusion and discard ratio, the large view's layer and head
    (1-based), the selected token (vitviz.models.loaded.Token; None: the first, CLS), the maps' opacity and
    smoothing, and whether the many-panel pictures share one colour scale."""

    fusion: str = "mean"
    discard: float = 0.0
    layer: int | None = None
    head: int | None = None
    token: Token | None = None
    alpha: float = 0.6
    smooth: bool = True
    shared: bool = False
    method: str = DEFAULT_CLASS_MAP  # the class map's method (vitviz.explain.methods.CLASS_MAPS)


@dataclass
class ExploreView:
    """The Explore tab's pictures, by name: uint8 (H, W, 3) arrays; None where not drawn (the compact view of
    Compare draws four). The field order is the order of the outputs."""

    top5: dict[str, float]
    sees: np.ndarray | None = None  # the input, enlarged, with its numbered patch grid and the CLS tile
    rollout: np.ndarray | None = None  # from the selected token
    class_map: np.ndarray | None = None  # the chosen method's map for the explained class
    head_large: np.ndarray | None = None  # the selected layer and head, from the selected token
    rollout_strip: np.ndarray | None = None  # rollout from the selected token up to each layer
    heads: np.ndarray | None = None  # attention from the selected token, every layer x head
    lens: np.ndarray | None = None  # the logit lens: the prediction after each block
    norms: np.ndarray | None = None  # every patch token's norm after each block, outliers outlined
    original: np.ndarray | None = None  # the visitor's image as uploaded, the square the model gets outlined
    summary: str = ""

    def outputs(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self))

    def pictures(self) -> dict[str, np.ndarray]:
        """{name: picture} of the pictures this view holds."""
        return {f.name: getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), np.ndarray)}


OUTPUT_NAMES = tuple(f.name for f in fields(ExploreView))
PICTURE_NAMES = tuple(n for n in OUTPUT_NAMES if n not in ("top5", "summary"))
DEPENDS = {  # the options each picture is drawn from, past the image and the model
    "sees": ("token",),
    "rollout": ("token", "fusion", "discard", "alpha", "smooth"),
    "class_map": ("method", "alpha", "smooth"),
    "head_large": ("token", "layer", "head", "alpha"),
    "rollout_strip": ("token", "fusion", "discard", "alpha", "smooth", "shared"),
    "heads": ("token", "alpha", "shared"),
    "lens": (),
    "norms": ("alpha",),
    "original": (),
}
# a model without a classifier draws its features' similarity to the selected patch, and its heads' masks
WITHOUT_CLASSES = {**DEPENDS, "class_map": ("alpha", "token"), "lens": ("alpha",)}


class PictureCache:
    """One visitor's last picture of each name, with the explanation and options it was drawn from."""

    def __init__(self):
        self._made: dict[str, tuple] = {}

    def get(self, name: str, ex: Explanation, key: tuple, make: Callable[[], object]) -> np.ndarray | None:
        """(picture, True if it was drawn now)."""
        hit = self._made.get(name)
        if hit is not None and hit[0] is ex and hit[1] == key:
            return hit[2], False
        pic = ex.once((name, key, style.current()), make)
        self._made[name] = (ex, key, pic)
        return pic, True

    def clear(self) -> None:
        self._made.clear()


def signed_scale(m: torch.Tensor, what: str, sides: str) -> Scale:
    """A diverging scale centred on 0 for a map whose sign means something (`sides`, said in the picture's
    title): -a..a, a its largest magnitude, white at 0."""
    a = max(float(m.abs().max()), 1e-12)
    return Scale(f"{what}; white: no change", -a, a, "its own range, centred on 0", cmap="RdBu_r")


def scale_tiles(maps: torch.Tensor, shared: bool) -> tuple[torch.Tensor, Scale]:
    """(K, g, g) attention maps scaled to [0, 1] (each on its own, or all on one 0..max scale) and that scale."""
    flat = maps.float().flatten(1)
    if shared:
        hi = float(flat.max())
        return (maps.float() / max(hi, 1e-12)), Scale("attention weight", 0.0, hi, "one scale for all tiles")
    lo, hi = flat.amin(1, keepdim=True), flat.amax(1, keepdim=True)
    out = ((flat - lo) / (hi - lo).clamp_min(1e-12) * (hi > lo)).view(maps.shape)
    return out, Scale("attention weight", 0.0, 1.0, "each tile its own range", relative=True)


class _Drawer:
    """The pictures of one explanation under one set of options."""

    def __init__(self, model: LoadedViT, ex: Explanation, o: Options):
        self.card, self.ex, self.o = model.card, ex, o
        cfg = self.card.config
        self.g, self.S = cfg.grid_size, main_size(cfg)
        self.L, self.H = ex.attn.shape[:2]
        self.mode = "bilinear" if o.smooth else "nearest"
        self.K = ex.prefix  # CLS, then distillation or register tokens
        self.token = o.token or model.layout.token(-1)
        self.row = self.token.row  # the selected token's row of attention; None: SigLIP's pooling query
        self.who = self.token.name
        # SigLIP's pooling query: its attention is its pooling head's (H, N), after the last block
        self.pool = ex.pool if self.row is None else None
        self._roll = None
        self.model = model
        # what _token_row does to a selected patch's own weight, said on every picture drawn from it
        self.own = "" if self.token.patch is None else "; the patch itself at the others' maximum"

    def rolled(self) -> torch.Tensor:
        """Rollout up to each layer, every token's row: made once per explanation, fusion and discard (whatever
        the token, the layer and the head), for everyone who looks at it."""
        if self._roll is None:

            def every_layer() -> torch.Tensor:
                return interpret.attention_rollout(self.ex.attn[None], self.o.fusion, self.o.discard, all_layers=True)[
                    0
                ]

            self._roll = self.ex.once(("rollout up to each layer", self.o.fusion, self.o.discard), every_layer)
        return self._roll

    def row_of(self, m: torch.Tensor) -> torch.Tensor:
        """The selected token's row of `m` over the patches, as it is. SigLIP's pooling query reads rolled-out
        relevance `m` through its pooling head's attention (heads averaged)."""
        if self.row is None:
            return self.pool.mean(0) @ m[..., :, self.K :]
        return m[..., self.row, self.K :]

    def layer_head(self) -> tuple[int, int]:
        return nearest_one_based(self.o.layer, self.L), nearest_one_based(self.o.head, self.H, default=1)

    def _token_row(self, m: torch.Tensor) -> torch.Tensor:
        """`row_of(m)`, a selected patch's own weight drawn at the others' maximum (it would drown the rest)."""
        r = self.row_of(m)
        if self.row is None:
            return r
        r = r.clone()
        patch = self.token.patch
        if patch is not None and r.shape[-1] > 1:
            others = torch.cat([r[..., :patch], r[..., patch + 1 :]], -1)
            r[..., patch] = others.amax(-1)
        return r

    def _own(self, m: torch.Tensor, what: str, title: str, outline: bool = True, sides: str = "") -> np.ndarray:
        """`m` over the image on its own range; a signed map (`sides` says what each side of 0 means) on a
        diverging scale centred on 0, so that 0 is white whatever the range."""
        m = m.float().view(self.g, self.g)
        scale = signed_scale(m, what, sides) if sides else Scale(what, float(m.min()), float(m.max()))
        pic = draw.overlay(self.ex.pixels, m, self.S, scale.cmap, self.o.alpha, self.mode, scale.lo, scale.hi)
        return panel(self._outline(pic) if outline else pic, title, scale)

    def _outline(self, pic: np.ndarray) -> np.ndarray:
        if self.token.patch is None:
            return pic
        return np.asarray(draw.draw_grid(pic, self.g, numbers=False, highlight=self.token.patch, color=(90, 90, 90)))

    def sees(self) -> np.ndarray:
        return sees_picture(self.ex.pixels, self.g, self.S, self.model.layout, self.token)

    def rollout(self) -> np.ndarray:
        return self._own(
            self._token_row(self.rolled()[-1]),
            "attention rolled through every layer" + self.own,
            f"Attention rollout from {self.who}",
        )

    def class_map(self) -> np.ndarray:
        if not self.ex.has_head:
            return similarity_panel(self.ex, self.token.patch, self.S, self.o.alpha)
        method = METHODS[self.o.method]
        cls = self.card.classes[self.ex.target]
        noun = "label" if self.model.zero_shot else "class"
        why = f"the predicted {noun}" if self.ex.target == int(self.ex.probs.argmax()) else f"the chosen {noun}"
        title = f"{method.name[0].upper() + method.name[1:]}" + (f" for '{cls}'" if method.class_specific else "")
        m = class_map(self.model, self.ex, method.name)
        if is_flat(m):
            return message_panel(self.S, title, flat_relevance_reason(self.model))
        what = method.what.format(cls=cls) + (f", {why}" if method.class_specific else "")
        if method.sides:
            title += f" ({method.sides})"
        return self._own(m, what, title, outline=False, sides=method.sides)

    def norms(self) -> np.ndarray:
        return norms_panel(self.ex.pixels, self.ex.norms, self.g, self.L, self.o.alpha, self.K)

    def head_large(self) -> np.ndarray:
        layer, head = self.layer_head()
        if self.row is None:
            return self._pool_head(head)
        m = self._token_row(self.ex.attn[layer - 1, head - 1])
        lo, hi = float(m.min()), float(m.max())
        pic = draw.overlay(
            self.ex.pixels, m.view(self.g, self.g), self.S, alpha=self.o.alpha, mode="nearest", vmin=lo, vmax=hi
        )
        to_prefix = float(self.ex.attn[layer - 1, head - 1, self.row, : self.K].sum())
        names = (
            "CLS"
            if self.K == 1
            else f"CLS and the {self.K - 1} other token{'s' if self.K > 2 else ''} before the patches"
        )
        share = f" ({100 * to_prefix:.0f}% of this attention goes to {names})" if self.K else ""
        return panel(
            self._outline(pic),
            f"Layer {layer}, head {head}: attention from {self.who}{share}",
            Scale("attention weight" + self.own, lo, hi),
        )

    def rollout_strip(self) -> np.ndarray:
        maps, scale = scale_tiles(self._token_row(self.rolled()).view(self.L, self.g, self.g), self.o.shared)
        size = max(64, min(112, 720 // self.L))
        strip = draw.layer_strip(self.ex.pixels, maps, tile_size=size, alpha=self.o.alpha, mode=self.mode)
        scale = Scale(
            "attention rolled through every layer" + self.own, scale.lo, scale.hi, scale.shared, relative=scale.relative
        )
        return panel(strip, f"Rollout from {self.who}, up to each layer", scale)

    def lens(self) -> np.ndarray:
        if not self.ex.has_head:
            return backbone_panel(self.ex, self.o.alpha)
        return lens_panel(self.card.classes, self.ex.lens)

    def original(self) -> np.ndarray:
        return (
            original_picture(self.ex.original, self.card.config.image_size, self.card.prepare)
            if self.ex.original is not None
            else message_panel(160, "The image", "The image as uploaded is shown here.")
        )

    def _pool_head(self, head: int) -> np.ndarray:
        """One head of SigLIP's pooling head: the pooling query's attention over the last block's tokens."""
        m = self.pool[head - 1, self.K :]
        lo, hi = float(m.min()), float(m.max())
        pic = draw.overlay(
            self.ex.pixels, m.view(self.g, self.g), self.S, alpha=self.o.alpha, mode="nearest", vmin=lo, vmax=hi
        )
        return panel(
            pic,
            f"Pooling head, head {head}: attention from the pooling query over the last block's tokens "
            "(it takes part in no layer)",
            Scale("attention weight", lo, hi),
        )

    def heads(self) -> np.ndarray:
        if self.row is None:  # the pooling query attends once, in the pooling head: its heads in one row
            maps, scale = scale_tiles(self.pool[:, self.K :].reshape(self.H, self.g, self.g), self.o.shared)
            small = max(48, min(96, 576 // self.H))
            grid = draw.layer_head_grid(
                self.ex.pixels,
                maps.view(1, self.H, self.g, self.g),
                tile_size=small,
                alpha=max(self.o.alpha, 0.5),
                row_labels=["pooling head"],
            )
            return panel(grid, "Attention from the pooling query in each head of the pooling head", scale)
        maps = self._token_row(self.ex.attn).reshape(self.L * self.H, self.g, self.g)
        maps, scale = scale_tiles(maps, self.o.shared)
        scale = Scale(scale.what + self.own, scale.lo, scale.hi, scale.shared, relative=scale.relative)
        small = max(48, min(96, 576 // max(self.L, self.H)))
        grid = draw.layer_head_grid(
            self.ex.pixels, maps.view(self.L, self.H, self.g, self.g), tile_size=small, alpha=max(self.o.alpha, 0.5)
        )
        return panel(grid, f"Attention from {self.who} in every layer and head", scale)


def flat_relevance_reason(model: LoadedViT) -> str:
    head = model.head  # ours: a Linear; torchvision's: its `heads`; timm's: its head
    weights = [p for name, p in head.named_parameters() if name.endswith("weight")] if head is not None else []
    if weights and not any(p.detach().any() for p in weights):
        return (
            "Every patch has zero relevance: this model's classification head is still at its starting "
            "zeros, so no class depends on any patch yet. Train it for a few steps and look again."
        )
    return "Every patch has the same relevance to this class, so there is no map to draw."


def render_explore(
    model: LoadedViT,
    ex: Explanation,
    options: Options = Options(),
    cache: PictureCache | None = None,
    compact: bool = False,
) -> tuple[ExploreView, set[str]]:
    """The Explore view and the names of the pictures drawn now (the rest came from `cache` unchanged).
    `compact`: the top 5, rollout, gradient rollout and rollout by layer (the Compare view)."""
    o = _kept(model, options)
    cache = cache or PictureCache()
    d = _Drawer(model, ex, o)
    view, fresh = ExploreView(top5=top_k(model, ex.probs) if ex.has_head else {}), set()
    names = ("rollout", "class_map", "rollout_strip") if compact else PICTURE_NAMES
    for name in names:
        key = tuple(getattr(o, k) for k in (DEPENDS if ex.has_head else WITHOUT_CLASSES)[name])
        pic, new = cache.get(name, ex, key, getattr(d, name))
        setattr(view, name, pic)
        if new:
            fresh.add(name)
    if not compact:
        view.summary = explore_summary(model, ex, o)
    return view, fresh


def _kept(model: LoadedViT, options: Options) -> Options:
    """The options with a token this model has (else CLS) and a method vitviz knows (else the default)."""
    return replace(
        options,
        token=model.layout.kept(options.token.number if options.token else -1),
        method=options.method if options.method in METHODS else DEFAULT_CLASS_MAP,
    )


def drawn_values(model: LoadedViT, ex: Explanation, options: Options = Options()) -> dict[str, torch.Tensor]:
    """The numbers the Explore pictures draw, each (P,) over the patches in patch order, from the selected token
    as its pictures are (a selected patch's own weight as it is, where the pictures draw it at the others'
    maximum): "rollout", "head_large" (the options' layer and head), and "class_map" (the method's map for the
    explained class) for a model with a classifier; "head_to_prefix": that head's weight on each token before
    the patches (none for SigLIP's pooling query)."""
    d = _Drawer(model, ex, _kept(model, options))
    layer, head = d.layer_head()
    values = {"rollout": d.row_of(d.rolled()[-1])}
    if d.row is None:
        values["head_large"] = d.pool[head - 1, d.K :]  # its pooling head's attention over the last block's
    else:
        values["head_large"] = ex.attn[layer - 1, head - 1, d.row, d.K :]
        values["head_to_prefix"] = ex.attn[layer - 1, head - 1, d.row, : d.K]
    if ex.has_head:
        values["class_map"] = class_map(model, ex, d.o.method)
    return {k: v.float().cpu() for k, v in values.items()}


def explore_summary(model: LoadedViT, ex: Explanation, o: Options) -> str:
    r = model
    cfg, cls = r.card.config, r.card.classes
    prefix = r.layout.counted()
    sees = (
        f"selected token: **{o.token.name}** · the model sees {cfg.image_size}x{cfg.image_size} px in "
        f"{cfg.patch_size}-px patches: a {cfg.grid_size}x{cfg.grid_size} grid, {cfg.num_patches} patch tokens "
        f"+ {prefix}, through {cfg.depth} layers of {cfg.num_heads} heads."
    )
    if not ex.has_head:
        return (
            f"**No classifier**: this model learned its features without labels; its heads' attention, its "
            f"features' colours and their similarity show what it sees · {sees}"
        )
    pred = int(ex.probs.argmax())
    return f"**Prediction: {cls[pred]}** ({100 * float(ex.probs[pred]):.1f}%) · {sees}"


# ---------------------------------------------------------------- the input with its grid and the CLS tile
