"""Which models a visitor can choose, and where each one comes from.

The shipped models, randomised copies of them (the sanity check: the head, or for the CIFAR-10
model every weight, re-initialised) and ViT-B/16 are shared by every visitor: each is loaded once,
under a lock of its own, so a slow load (ViT-B/16's download) holds up only the
visitors who asked for that model. A model typed by name is sized before anything is spent on it
(VITVIZ_MAX_MODEL_PARAMS, vitviz.models.bound); the menu's own entries are the operator's choice and
always load. A model that cannot be had (vitviz.models.bound.ModelError: unknown, unreadable, too
large, its weights not here) is remembered for `VITVIZ_RETRY_LOAD_S` seconds (default 60) instead
of being tried on every request; any other failure is the server's, logged with its cause and never
remembered as the model's. Every failed load is logged once. A visitor's own models (an upload, a
run from the Train tab and its epoch snapshots) live in their `Visitor` state and nowhere else.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable

import gradio as gr
import torch

from vitviz.app.inputs import FieldError, shown
from vitviz.app.serving import limits
from vitviz.app.state import Visitor, visitor
from vitviz.explain.sanity import randomised
from vitviz.models import bound, checkpoint
from vitviz.models.bound import ModelError
from vitviz.models.hub import load_model, loaded
from vitviz.models.loaded import LoadedViT
from vitviz.models.words import with_labels
from vitviz.runtime import memory

LOG = logging.getLogger("vitviz")

SHARED = {
    "cifar10": "CIFAR-10 ViT (shipped)",
    "cifar10/random-head": "CIFAR-10 ViT, head randomised (sanity check)",
    "cifar10/random-all": "CIFAR-10 ViT, every weight randomised (sanity check)",
    "mnist": "MNIST ViT (shipped)",
    "mnist/random-head": "MNIST ViT, head randomised (sanity check)",
    "vit_b_16": "ViT-B/16, ImageNet-1k (torchvision)",
    "timm/deit_small_patch16_224.fb_in1k": "DeiT-S/16, ImageNet-1k (timm)",
    "timm/vit_small_patch8_224.dino": "DINO ViT-S/8, no classifier (timm)",
    "timm/vit_small_patch14_dinov2.lvd142m": "DINOv2 ViT-S/14, no classifier (timm)",
    "timm/vit_small_patch14_reg4_dinov2.lvd142m": "DINOv2 ViT-S/14 with 4 registers, no classifier (timm)",
    "hf:openai/clip-vit-base-patch16": "CLIP ViT-B/16, labels in your words (transformers)",
    "hf:google/siglip2-base-patch16-224": "SigLIP 2 B/16, labels in your words (transformers)",
}
DOWNLOAD_MB = {
    "vit_b_16": 330,
    "timm/deit_small_patch16_224.fb_in1k": 88,
    "timm/vit_small_patch8_224.dino": 87,
    "timm/vit_small_patch14_dinov2.lvd142m": 88,
    "timm/vit_small_patch14_reg4_dinov2.lvd142m": 88,
    "hf:openai/clip-vit-base-patch16": 600,  # about 150 million parameters in fp32, the two towers
    "hf:google/siglip2-base-patch16-224": 1500,  # about 375 million: its text tower's vocabulary is large
}
TYPED = re.compile(r"^(timm/)?[a-z0-9_]{1,100}(\.[a-z0-9_]{1,60})?$")  # a timm name a visitor typed into the menu
HUB_ID = re.compile(r"^(hf:)?[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")  # a Hugging Face Hub id typed into it
MODEL_CHOICES = [(label, key) for key, label in SHARED.items()] + [
    ("Trained in this session (Train tab)", "session"),
    ("Uploaded checkpoint", "upload"),
]


def on_machine(key: str) -> bool:
    """Whether a downloaded model's weights are here already (torchvision's cache, or the Hugging Face cache)."""
    if key == "vit_b_16":
        from vitviz.models.tv_vit import weights_cached

        return weights_cached()
    if key.startswith("timm/"):
        from vitviz.models.timm_vit import weights_cached

        return weights_cached(key.removeprefix("timm/"))
    if key.startswith("hf:"):
        from vitviz.models.hf_vit import cached

        return cached(key.removeprefix("hf:"))
    return True


def model_choices() -> list[tuple[str, str]]:
    """The model menu, saying which model is on this machine and which needs a download (and how large)."""

    def label(name: str, key: str) -> str:
        if key not in DOWNLOAD_MB:
            return name
        return f"{name} ({'on this machine' if on_machine(key) else f'needs internet: {DOWNLOAD_MB[key]} MB once'})"

    return [(label(name, key), key) for name, key in MODEL_CHOICES]


def first_load(key: str, progress: gr.Progress) -> str:
    """Before a downloaded model's first load: show progress, and return the line saying where its weights are
    kept ('' for the others)."""
    key = typed_key(key)
    if not (key in DOWNLOAD_MB or _typed_name(key)) or MODELS.is_loaded(key):
        return ""
    name = title_of(key).split(",")[0]
    size = f" (downloading {DOWNLOAD_MB[key]} MB once)" if key in DOWNLOAD_MB else " (a first download)"
    progress(0, desc=f"Loading {name}" + ("" if on_machine(key) else size))
    return (
        f"{name}'s weights are kept in torchvision's cache."
        if key == "vit_b_16"
        else f"{name}'s weights are kept in the Hugging Face cache."
    )


def look_at(tab: str) -> Callable[[Visitor | None], Visitor]:
    """The handler of a tab's select event for the tabs that draw nothing on opening."""

    def look(state: Visitor | None) -> Visitor:
        v = visitor(state)
        v.crossing.looking = tab
        return v

    return look


_by_session: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def remember(v: Visitor, request: gr.Request | None) -> Visitor:
    """Note whose state this is, so that it can be freed the moment they leave (see `release_session`)."""
    key = getattr(request, "session_hash", None)
    if key:
        _by_session[key] = v
    return v


def release_session(request: gr.Request = None) -> None:
    """demo.unload's handler: a visitor closed or reloaded the page, so their models go now (Gradio would
    keep a closed session's state for an hour)."""
    v = _by_session.pop(getattr(request, "session_hash", None) or "", None)
    if v is not None:
        v.release()


def release_state(value: object) -> None:
    """gr.State's delete_callback: the state expired (VITVIZ_STATE_TTL_S after the visitor's last action)."""
    if isinstance(value, Visitor):
        value.release()


def load_entry(key: str) -> LoadedViT:
    """A model of the menu (no size bound: the operator chose it) or one typed by name (VITVIZ_MAX_MODEL_PARAMS)."""
    return load_model(key, max_params=None if key in SHARED else bound.FROM_ENV)


class SharedModels:
    """The menu's models (records, vitviz.models.loaded: what `loader` gives), each loaded once on first use and then
    only read."""

    def __init__(self, loader=load_entry, retry_after: float | None = None):  # None: VITVIZ_RETRY_LOAD_S, read then
        self._loader, self._retry_after = loader, retry_after
        self._models: dict[str, LoadedViT] = {}
        self._failed: dict[str, tuple[float, str]] = {}  # key -> (when, the sentence to repeat)
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def get(self, key: str) -> LoadedViT:
        model = self._models.get(key)
        if model is not None:
            return model
        with self._lock(key):
            if key in self._models:
                return self._models[key]
            failed = self._failed.get(key)
            wait = limits.get("VITVIZ_RETRY_LOAD_S") if self._retry_after is None else self._retry_after
            if failed and time.monotonic() - failed[0] < wait:
                raise ModelError(failed[1])
            try:
                with torch.inference_mode(False):  # weights must be usable by autograd later
                    model = self._load(key)
            except ModelError as e:  # the model cannot be had: said, and remembered for a while
                LOG.warning("vitviz: model %r was not loaded: %s", key[:120], e)
                memory.give_back()  # what the attempt took goes back at once
                self._failed[key] = (time.monotonic(), str(e))
                raise
            except Exception as e:  # the server's fault (an import, a lock, memory): logged, never remembered
                LOG.error("vitviz: loading model %r failed on the server", key[:120], exc_info=e)
                memory.give_back()
                raise RuntimeError(
                    "the server failed while loading it (its log says why); please try again in a moment"
                ) from None
            self._failed.pop(key, None)
            self._models[key] = model
            self._forget_typed(keep=key)
            return model

    def _forget_typed(self, keep: str):
        """At most VITVIZ_TYPED_MODELS models typed by name stay loaded besides the menu's (the oldest goes; a
        visitor using it keeps their reference until they pick again)."""
        typed = [k for k in self._models if k not in SHARED and k != keep]
        for k in typed[: max(0, len(typed) + 1 - int(limits.get("VITVIZ_TYPED_MODELS")))]:
            del self._models[k]

    def _load(self, key: str):
        """A shipped model from the loader; "<key>/random-head" or "/random-all": a copy of <key> with its head or
        every weight randomised (vitviz.explain.sanity), for the sanity check."""
        base, _, kind = key.partition("/random-")
        return randomised(self.get(base), kind) if kind else self._loader(key)

    def is_loaded(self, key: str) -> bool:
        return key in self._models


MODELS = SharedModels()


def typed_key(key: object) -> str:
    """The menu's key for what a visitor chose or typed: a timm name typed bare gets its "timm/", a Hugging Face
    Hub id (organisation/name) its "hf:"."""
    key = str(key or "cifar10").strip()
    if key in SHARED or key in ("session", "upload") or key.startswith("session@"):
        return key
    if TYPED.match(key):
        return key if key.startswith("timm/") else f"timm/{key}"
    if HUB_ID.match(key) and not key.startswith("timm/") and "/random-" not in key:
        return key if key.startswith("hf:") else f"hf:{key}"
    return key


def _typed_name(key: str) -> bool:
    """Whether `key` (typed_key's) names a timm model or a Hub model, as a visitor may type one."""
    return bool((key.startswith("timm/") and TYPED.match(key)) or (key.startswith("hf:") and HUB_ID.match(key)))


def title_of(key: str) -> str:
    if key in SHARED:
        return SHARED[key]
    if key.startswith("hf:"):
        return f"Hugging Face model `{key.removeprefix('hf:')}`"
    return f"timm model `{key.removeprefix('timm/')}`"


def resolve_model(key: str, state: Visitor | None = None) -> LoadedViT:
    """The model a visitor chose (a menu entry, or any timm ViT's name typed into it); a gr.Error with a plain
    sentence when it cannot be had."""
    key = typed_key(key)
    if key in ("session", "upload") or key.startswith("session@"):
        model = visitor(state).models.get(key)
        if model is None:
            raise gr.Error(
                "No model trained in this session yet: start a run in the Train tab, then press 'Explore this model'."
                if key.startswith("session")
                else "No checkpoint uploaded yet: add its .safetensors and .json files above."
            )
        return model
    if key not in SHARED and not _typed_name(key):
        raise gr.Error(
            f"Unknown model {shown(key)}: choose one from the menu, or type a timm ViT's name "
            "(e.g. `deit_tiny_patch16_224.fb_in1k`: lower-case letters, digits and _, with its tag after a dot) "
            "or a Hugging Face Hub id (e.g. `google/vit-base-patch16-224`)."
        )
    try:
        return MODELS.get(key)
    except (ModelError, RuntimeError) as e:
        raise gr.Error(f"The {title_of(key)} could not be loaded: {e}") from None


def in_words(model: LoadedViT, labels: str | None, template: str | None) -> LoadedViT:
    """A model with a text tower (CLIP, SigLIP) with the visitor's labels and prompt as its classes; any other
    model as it is. A bad list or prompt is a FieldError beside the class menu."""
    if not model.zero_shot:
        return model
    try:
        return with_labels(model, labels if labels not in (None, "") else None, template or None)
    except ValueError as e:
        raise FieldError(str(e), "target") from None


def upload_checkpoint(files: list | None, state: Visitor | None = None, request: gr.Request = None) -> tuple:
    """Load an uploaded checkpoint (two files) into the visitor's state; it becomes the chosen model. A file that
    cannot be used gets a sentence for the note beside the upload, and the menu stays as it was."""
    v = remember(visitor(state), request)
    paths = [f if isinstance(f, str) else getattr(f, "name", None) or f.get("path") for f in (files or [])]
    weights = [p for p in paths if str(p).endswith(".safetensors")]
    metas = [p for p in paths if str(p).endswith(".json")]
    if len(weights) != 1 or len(metas) != 1:
        return ("⚠️ Upload two files together: the weights (.safetensors) and the description (.json).", v, gr.skip())
    try:
        model = checkpoint.load_pair(weights[0], metas[0], max_params=bound.max_params())
    except ModelError as e:  # a bad file, or one describing a model over VITVIZ_MAX_MODEL_PARAMS: refused unbuilt
        LOG.warning("vitviz: an uploaded checkpoint was not loaded: %s", e)
        memory.give_back()
        return f"⚠️ That checkpoint could not be loaded: {str(e).rstrip('.')}.", v, gr.skip()
    v.models["upload"] = loaded(model)
    v.explore.clear()
    cfg = model.card.config
    msg = (
        f"Loaded **{os.path.basename(weights[0])}**: {cfg.image_size}x{cfg.image_size}, patch {cfg.patch_size}, "
        f"depth {cfg.depth}, {cfg.num_heads} heads, {cfg.num_classes} classes."
    )
    return msg, v, "upload"
