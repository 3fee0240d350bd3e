"""The vision towers of `transformers` models, run block by block: ViT, DeiT (with its distillation token),
DINOv2 (with or without registers), DINOv3 (registers, rotary positions), CLIP, SigLIP and SigLIP 2 (NaFlex,
run at its square size).

`HFAdapter` gives such a model the names vitviz.explain.interpret uses (blocks, norm, head, patch embedding,
positions, prefix tokens) and a forward that returns every block's tokens and per-head attention from that call
alone. The blocks are the model's own modules, called as its encoder calls them; attention goes through
transformers' attention interface under the name "vitviz" (set on vitviz's instance only): while a call of
`forward_intermediates` has set a list in this thread's context (a ContextVar, so each thread and each call has
its own), it computes transformers' eager attention and appends its softmax weights to that list; otherwise it
is SDPA. Nothing is hooked, nothing is kept on the module, and other instances of the same classes keep their
own attention.

What an image is worth (`image_features`): a classifier's logits (DeiT distilled: the mean of its two heads), a
backbone's CLS features (DINOv2, DINOv3: no classes), CLIP's projected CLS token, SigLIP's pooled token.
vitviz.models.words turns the last two into scores for words.
"""

from __future__ import annotations

from contextvars import ContextVar
from types import SimpleNamespace

import torch

from vitviz.models.vit import intermediates

ATTENTION = "vitviz"
POOLED = ("siglip", "siglip2")  # the towers that pool with an attention head, not a CLS token
_SINK: ContextVar[list | None] = ContextVar("vitviz_attention", default=None)


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' eager attention when this context holds a list to append the weights to; SDPA otherwise."""
    sink = _SINK.get()
    if sink is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = torch.nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    used = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    out = torch.matmul(used, value).transpose(1, 2).contiguous()
    sink.append(weights)
    return out, weights


def register_attention() -> None:
    """Make "vitviz" an attention implementation transformers knows (once per process; idempotent)."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, _attention)


def pool_attention(head: torch.nn.Module, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """SigLIP's attention-pooling head on (B, N, D) tokens, as torch's MultiheadAttention computes it, with its
    probe's per-head attention: (pooled (B, D), attention (B, H, N))."""
    mha = head.attention
    B, N, D = tokens.shape
    H = mha.num_heads
    w, b = mha.in_proj_weight, mha.in_proj_bias
    probe = head.probe.expand(B, 1, D)
    q = torch.nn.functional.linear(probe, w[:D], b[:D]).view(B, 1, H, D // H).transpose(1, 2)
    k = torch.nn.functional.linear(tokens, w[D : 2 * D], b[D : 2 * D]).view(B, N, H, D // H).transpose(1, 2)
    v = torch.nn.functional.linear(tokens, w[2 * D :], b[2 * D :]).view(B, N, H, D // H).transpose(1, 2)
    a = ((q * (D // H) ** -0.5) @ k.transpose(-2, -1)).softmax(-1)  # (B, H, 1, N)
    out = mha.out_proj((a @ v).transpose(1, 2).reshape(B, 1, D))
    out = out + head.mlp(head.layernorm(out))
    return out[:, 0], a[:, :, 0]


class HFAdapter:
    """A `transformers` vision model under vitviz's names (see the module's docstring). `words`, for CLIP and
    SigLIP, scores image features against labels (vitviz.models.words); None elsewhere."""

    def __init__(self, model, words=None):
        self.model = model
        self.kind = model.config.model_type
        self.words = words
        self.text = None  # its text tower (vitviz.models.words.TextTower), set by the record
        vision = self._vision()
        self.vision = vision
        self.embedding = vision.embeddings
        stack = getattr(vision, "encoder", None) or getattr(vision, "model", None) or vision
        self.blocks = getattr(stack, "layer", None) or stack.layers
        self.norm = next(getattr(vision, n) for n in ("layernorm", "norm", "post_layernorm") if hasattr(vision, n))
        self.pre = getattr(vision, "pre_layrnorm", torch.nn.Identity())
        proj = getattr(self.embedding, "patch_embeddings", None) or self.embedding.patch_embedding
        proj = getattr(proj, "projection", proj)
        self.patch_size = int(getattr(vision.config, "patch_size", 0) or proj.kernel_size[0])
        if isinstance(proj, torch.nn.Linear):  # SigLIP 2 (NaFlex): a linear map of each patch's (p, p, C) pixels
            p = self.patch_size
            w = proj.weight.view(proj.out_features, p, p, -1).permute(0, 3, 1, 2)  # as a convolution's (D, C, p, p)
            proj = SimpleNamespace(weight=w, kernel_size=(p, p), linear=proj)
        self.patch_embed = SimpleNamespace(proj=proj)
        self.head = self._head()

    def _vision(self):
        m = self.model
        for name in ("vit", "deit", "vision_model"):
            if hasattr(m, name):
                return getattr(m, name)
        return m  # Dinov2Model, Dinov2WithRegistersModel, DINOv3ViTModel are the tower themselves

    def _head(self):
        m = self.model
        if hasattr(m, "cls_classifier"):
            return torch.nn.ModuleList([m.cls_classifier, m.distillation_classifier])
        return (
            getattr(m, "classifier", None)
            or getattr(m, "visual_projection", None)
            or getattr(self.vision, "head", None)
        )

    # ------------------------------------------------------------ the token layout

    def prefix_names(self) -> tuple[str, ...]:
        """CLS, then DeiT's distillation token or the registers; SigLIP has none (it pools with a probe)."""
        if self.kind in POOLED:
            return ()
        registers = getattr(self.model.config, "num_register_tokens", 0) or 0
        dist = ("distillation",) if self.kind == "deit" else ()
        return ("CLS",) + dist + tuple(f"register {i + 1}" for i in range(registers))

    @property
    def reader(self) -> str:
        """The token(s) the prediction reads, whose attention the maps start from: CLS; CLS and the distillation
        token (a distilled DeiT predicts with the mean of its two heads); SigLIP's pooling query."""
        if self.kind in POOLED:
            return "pooling query"
        return "CLS and distillation" if isinstance(self.head, torch.nn.ModuleList) else "CLS"

    @property
    def pos_embed(self) -> torch.Tensor | None:
        """(1, prefix + P, D) or (1, P, D) learned positions at the input's grid; None for rotary positions."""
        e = self.embedding
        if hasattr(e, "position_embeddings"):
            g = self.model.config.image_size
            if self.kind.startswith("dinov2"):  # trained at another size: what the blocks get at this one
                with torch.no_grad():
                    return e.interpolate_pos_encoding(e.position_embeddings[:, : 1 + (g // self.patch_size) ** 2], g, g)
            return e.position_embeddings
        if hasattr(e, "position_embedding"):
            return e.position_embedding.weight[None]
        return None

    def embeddings(self) -> list:
        """The learned prefix tokens and positions."""
        e = self.embedding
        found = [getattr(e, n, None) for n in ("cls_token", "class_embedding", "distillation_token", "register_tokens")]
        pos = getattr(e, "position_embeddings", None)
        pos = pos if pos is not None else getattr(getattr(e, "position_embedding", None), "weight", None)
        return [t for t in found + [pos] if t is not None]

    # ------------------------------------------------------------ the forward

    def _layer_kwargs(self, x: torch.Tensor) -> dict:
        if self.kind == "dinov3_vit":
            return {"position_embeddings": self.vision.rope_embeddings(x)}
        if self.kind in ("clip", *POOLED):
            return {"attention_mask": None}
        return {}

    def _embed(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(what the first block receives (B, N, D), the patch embedding (B, P, D))."""
        x = x.to(self.patch_embed.proj.weight.dtype)
        if self.kind == "siglip2":  # its processor's (B, P, p*p*C) patches, on a square grid of the input's
            B, C, H, W = x.shape
            p, gh, gw = self.patch_size, H // self.patch_size, W // self.patch_size
            flat = x.reshape(B, C, gh, p, gw, p).permute(0, 2, 4, 3, 5, 1).reshape(B, gh * gw, p * p * C)
            shapes = torch.tensor([[gh, gw]] * B, device=x.device)
            return self.embedding(flat, shapes), self.patch_embed.proj.linear(flat)
        patches = self.patch_embed.proj(x).flatten(2).transpose(1, 2)
        return self.pre(self.embedding(x)), patches

    def image_features(self, tokens: torch.Tensor) -> torch.Tensor:
        """What the model makes of (B, N, D) block outputs: logits, CLS features, or its image embedding."""
        n = self.norm(tokens)
        if self.kind in POOLED:
            return pool_attention(self.head, n)[0]
        if isinstance(self.head, torch.nn.ModuleList):  # DeiT distilled: the mean of its two heads
            return (self.head[0](n[:, 0]) + self.head[1](n[:, 1])) / 2
        return n[:, 0] if self.head is None else self.head(n[:, 0])

    def classify(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits from (B, N, D) block outputs: the model's own, or its scores for the labels."""
        f = self.image_features(tokens)
        return f if self.words is None else self.words.scores(f)

    def pool(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """SigLIP: (logits, the pooling query's attention (B, H, N)) from (B, N, D) block outputs."""
        pooled, a = pool_attention(self.head, self.norm(tokens))
        return (pooled if self.words is None else self.words.scores(pooled)), a

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """A plain forward pass (SDPA, no attention kept): what the model predicts."""
        h, _ = self._embed(x)
        kw = self._layer_kwargs(x)
        for layer in self.blocks:
            h = layer(h, **kw)
        return self.classify(h)

    def forward_intermediates(self, x: torch.Tensor, return_attention: bool = True) -> dict:
        """Every block's output and attention (vitviz.models.vit.intermediates's keys); SigLIP adds 'pool', its
        pooling query's attention (B, H, N) over the last block's tokens."""
        h, patches = self._embed(x)
        first, attns, tokens = h, [], []
        kw = self._layer_kwargs(x)
        for layer in self.blocks:
            sink = []
            token = _SINK.set(sink)
            try:
                h = layer(h, **kw)
            finally:
                _SINK.reset(token)
            attns.append(sink[0])
            tokens.append(h)
        if self.kind in POOLED:
            logits, pool = self.pool(h)
            return intermediates(logits, attns, patches, first, tokens, return_attention) | {"pool": pool}
        return intermediates(self.classify(h), attns, patches, first, tokens, return_attention)
