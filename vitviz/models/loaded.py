"""One record of a loaded model, whatever its family: what every explaining function asks.

`loaded(model)` gives the `LoadedViT` of a module (our ViT, torchvision's, timm's) or hands a
record back as it is. It holds the module, its card (vitviz.models.card), its device, its family's
adapter and the token layout: the prefix tokens before the patches, by name (CLS, then a
distillation token or registers), and the patch grid. Its `forward_intermediates` returns every
block's tokens and per-head attention from that call alone; `classify` reads logits off any
block's tokens; `eval_mode` runs a block in eval mode without writing to a model already in it.

`load_model` builds the record once; `loaded(module)` builds one for a module passed in (an
adapter holds only references), so nothing is kept on the module. Each family's particulars live in
its adapter: vitviz.models.vit (ours), vitviz.models.tv_vit, vitviz.models.timm_vit, vitviz.models.hf_towers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from PIL import Image

from vitviz.data.images import pixels_to_tensor, to_pixels
from vitviz.models.card import ModelCard


@dataclass(frozen=True)
class Token:
    """One token a visitor selects, in the three ways it is written, converted in one place (`TokenLayout.token`):
    `number`, the page's and the API's (0 to P-1 a patch, -1 the first token before the patches, -2 to -K the
    others); `row`, its row in the sequence and in attention (the tokens before the patches first; None for
    SigLIP's pooling query, which is in no block); `name` ("patch 17", "CLS", "register 2", "the pooling query")."""

    number: int
    row: int | None
    name: str

    @property
    def patch(self) -> int | None:
        """The patch it is (0-based), or None for a token before the patches."""
        return self.number if self.number >= 0 else None

    @property
    def prefix(self) -> int:
        """Which token before the patches it is (0 CLS, then a distillation token or registers); 0 for a patch."""
        return -1 - self.number if self.number < 0 else 0


class TokenError(ValueError):
    """A token number this model does not have; its message says the model's numbering."""


@dataclass(frozen=True)
class TokenLayout:
    prefix: tuple[str, ...]  # the tokens before the patches, by name: ("CLS",), ("CLS", "distillation"), ...
    grid: tuple[int, int]  # patch rows x columns
    patch_size: int  # pixels
    reader: str = "CLS"  # the token(s) the prediction reads: "CLS", "CLS and distillation", "pooling query"

    @property
    def num_prefix(self) -> int:
        return len(self.prefix)

    @property
    def num_patches(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def num_tokens(self) -> int:
        return self.num_prefix + self.num_patches

    def counted(self) -> str:
        """The prefix tokens in words, registers counted: "CLS", "CLS + distillation", "CLS + 4 registers"; for a
        model with none (SigLIP), what reads the patches instead."""
        if not self.prefix:
            return f"no token before them (a {self.reader} reads them after the last block)"
        registers = sum(name.startswith("register") for name in self.prefix)
        named = [name for name in self.prefix if not name.startswith("register")]
        return " + ".join(named + ([f"{registers} register{'s' * (registers > 1)}"] if registers else []))

    def first(self) -> str:
        """What selecting token -1 means, in words: the first token before the patches ("CLS"), or, for a model
        with none (SigLIP), "the pooling query"."""
        return self.prefix[0] if self.prefix else f"the {self.reader}"

    @property
    def lowest(self) -> int:
        """The lowest token number: -K, the last token before the patches (-1 for a model with none: its pooling
        query)."""
        return -max(1, self.num_prefix)

    def token(self, number: int) -> Token:
        """Token `number` in the page's numbering; TokenError, with this model's numbering, for one it lacks."""
        if isinstance(number, bool) or int(number) != number or not self.lowest <= number < self.num_patches:
            raise TokenError(
                f"this model's tokens are numbered {self.lowest} to {self.num_patches - 1} ({self.numbering()})"
            )
        number = int(number)
        if number >= 0:
            return Token(number, self.num_prefix + number, f"patch {number}")
        k = -1 - number
        return Token(number, k, self.prefix[k]) if self.prefix else Token(number, None, self.first())

    def at_row(self, row: int) -> Token:
        """The token in row `row` of the sequence (the tokens before the patches first)."""
        if not 0 <= row < self.num_tokens:
            raise TokenError(f"this model's sequence has rows 0 to {self.num_tokens - 1}, not {row}")
        return self.token(row - self.num_prefix if row >= self.num_prefix else -1 - row)

    def kept(self, number: int | None) -> Token:
        """Token `number` where this model has it, else its first (CLS): what a new model keeps of a selection."""
        try:
            return self.token(-1 if number is None else number)
        except (TokenError, TypeError, ValueError, OverflowError):
            return self.token(-1)

    def numbering(self) -> str:
        """How this model's tokens are numbered, in words: "patches 0 to 63, -1 CLS, -2 to -5 registers 1 to 4"."""
        K, P = self.num_prefix, self.num_patches
        words = [f"patches 0 to {P - 1}", f"-1 {self.first()}"]
        if K == 2:
            words.append(f"-2 {self.prefix[1]}")
        elif K > 2:
            registers = all(n.startswith("register") for n in self.prefix[1:])
            words.append(
                f"-2 to {-K} registers 1 to {K - 1}"
                if registers
                else ", ".join(f"{-1 - k} {n}" for k, n in enumerate(self.prefix) if k)
            )
        return ", ".join(words)


class eval_mode:
    """Run a block in eval mode. A model in eval mode already (every model the app shares) is not written to, so
    concurrent requests never race on it; one in training mode (a run's own, in its thread) is switched back."""

    def __init__(self, module):
        self.module = module_of(module)
        self.was = self.module.training

    def __enter__(self):
        if self.was:
            self.module.eval()

    def __exit__(self, *exc):
        if self.was:
            self.module.train(True)


@runtime_checkable
class Adapter(Protocol):
    """What a family's adapter gives its record, by the same names for every family: our ViT is its own
    (vitviz.models.vit), then vitviz.models.tv_vit.TorchvisionAdapter, timm_vit.TimmAdapter and
    hf_towers.HFAdapter. A family whose prediction is not read off CLS says so in `reader`; one with a text tower
    also has `text` (its tower), `words` (the labels' embeddings), `logits` and `pool`."""

    blocks: torch.nn.ModuleList  # the encoder blocks, in order
    norm: torch.nn.Module  # the final norm
    patch_embed: torch.nn.Module  # with .proj, the convolution that embeds each patch
    pos_embed: torch.Tensor | None  # the positional embedding, (1, N or P, D); None for rotary positions

    @property
    def head(self) -> torch.nn.Module | None: ...  # the classifier

    def prefix_names(self) -> tuple[str, ...]: ...  # the tokens before the patches, by name

    def embeddings(self) -> list[torch.nn.Parameter]: ...  # the learned tokens and positions

    def classify(self, tokens: torch.Tensor) -> torch.Tensor: ...  # logits from (B, N, D) tokens

    def forward_intermediates(self, x: torch.Tensor, return_attention: bool = True) -> dict: ...


@dataclass(frozen=True, eq=False)
class LoadedViT:
    module: torch.nn.Module  # the network
    card: ModelCard  # what it is: config, classes, normalisation, record
    adapter: Adapter  # its family's names: blocks, norm, head, patch_embed, pos_embed, forward_intermediates
    layout: TokenLayout

    @property
    def device(self) -> torch.device:
        return next(self.module.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.module.parameters()).dtype

    @property
    def input_size(self) -> tuple[int, int]:
        s = self.card.config.image_size
        return s, s

    @property
    def mean(self) -> tuple[float, ...]:
        return self.card.mean

    @property
    def std(self) -> tuple[float, ...]:
        return self.card.std

    def pixels(self, image: Image.Image) -> np.ndarray:
        """What the model sees of `image` (a PIL image of any mode and size): uint8 (H, W, C), resized and cropped
        as its card says (a `transformers` model: as its own image processor does); ValueError with a sentence
        for an image it cannot use."""
        card = self.card
        return to_pixels(
            image, self.input_size[0], card.config.in_chans, invert_light=card.light_on_dark, prepare=card.prepare
        )

    def tensor(self, pixels: np.ndarray | list[np.ndarray]) -> torch.Tensor:
        """uint8 (H, W, C) pixels (or a list of them) as the normalised float (B, C, H, W) the model takes, on its
        device."""
        batch = pixels if isinstance(pixels, list) else [pixels]
        return torch.cat([pixels_to_tensor(p, self.mean, self.std) for p in batch]).to(self.device)

    def prepare(self, image: Image.Image) -> tuple[np.ndarray, torch.Tensor]:
        """(what the model sees of `image`, the tensor it takes of it): each image's preparation, written once."""
        pixels = self.pixels(image)
        return pixels, self.tensor(pixels)

    @property
    def blocks(self) -> torch.nn.ModuleList:
        return self.adapter.blocks

    @property
    def norm(self) -> torch.nn.Module:
        return self.adapter.norm

    @property
    def head(self) -> torch.nn.Module | None:
        """The classifier, or None for a model without one (DINO, DINOv2)."""
        return self.adapter.head if self.card.config.num_classes else None

    def embeddings(self) -> list[torch.nn.Parameter]:
        """The learned tokens and positions: CLS (and distillation or register tokens), the positional embedding."""
        return list(self.adapter.embeddings())

    def forward_intermediates(self, x: torch.Tensor, grad: bool = False) -> dict:
        """One eval-mode pass: 'logits' (B, C), 'attn' [L x (B, H, N, N)], 'tokens' [L x (B, N, D)] each block's
        output, 'patches' (B, P, D), 'input' (B, N, D) what the first block receives. N counts every prefix
        token. With grad=True it all stays in the graph."""
        with eval_mode(self.module), torch.set_grad_enabled(grad):
            return self.adapter.forward_intermediates(x, return_attention=True)

    def classify(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits from (B, N, D) tokens as the final norm and head read them."""
        return self.adapter.classify(tokens)

    @property
    def zero_shot(self) -> bool:
        """Whether its classes are words a visitor chooses (CLIP, SigLIP: vitviz.models.words)."""
        return getattr(self.adapter, "text", None) is not None

    @property
    def sigmoid(self) -> bool:
        """Whether each class's probability is its own sigmoid (SigLIP), not a share of a softmax."""
        words = getattr(self.adapter, "words", None)
        return words is not None and words.sigmoid

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """Class probabilities by the model's own rule: the softmax over the classes, or, for SigLIP, each
        label's own sigmoid (never renormalised)."""
        return logits.sigmoid() if self.sigmoid else logits.softmax(-1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of a plain forward pass, in eval mode."""
        with eval_mode(self.module):
            return getattr(self.adapter, "logits", self.module)(x)


def module_of(model: torch.nn.Module | LoadedViT) -> torch.nn.Module:
    """The network of a record, or the module itself: for what works on weights (saving, copying, training)."""
    return model.module if isinstance(model, LoadedViT) else model


def preprocess(image: Image.Image, model: LoadedViT) -> torch.Tensor:
    """A PIL image (any mode, any size) -> the (1, C, H, W) float tensor `model` (its record) takes, on its
    device: `vitviz.preprocess`."""
    return model.prepare(image)[1]
