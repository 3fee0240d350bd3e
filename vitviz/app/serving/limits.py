"""What one visitor may use of a shared machine, each with a default for a free 2-core Space.

Every bound is read from its environment variable when it is needed (tests and operators can
change it without a restart); the README lists them all.

    VITVIZ_MAX_TRAIN_SECONDS  300   no run trains longer, whatever it asks for
    VITVIZ_TRAIN_SLOTS        1     runs at a time
    VITVIZ_TRAIN_QUEUE        4     visitors who may wait for a slot; the next is told to come back
    VITVIZ_TRAIN_MEMORY_GB    4     a run whose estimated peak memory is larger is refused
    VITVIZ_MAX_UPLOAD_MB      20    largest upload (Gradio refuses a larger file before it is stored)
    VITVIZ_CACHE_MAX_AGE_S    3600  Gradio's cached files older than this are deleted (checked every 10 min)
    VITVIZ_CACHE_MAX_MB       500   Gradio's cached files take at most this much disk (oldest deleted first)
    VITVIZ_CACHE_CHECK_S      5     how often that size is checked
    VITVIZ_STATE_TTL_S        1800  a visitor's own models are freed this long after their last action
    VITVIZ_KEEP_FOLDERS       20    folders of each kind (runs, exports, images) kept on disk
    VITVIZ_QUEUE_SIZE         64    requests waiting in Gradio's queue, all events together
    VITVIZ_RETRY_LOAD_S       60    a failed model load is remembered this long before it is tried again
    VITVIZ_MODEL_CACHE        8     models whose Model-tab summary is kept
    VITVIZ_TYPED_MODELS       2     timm or Hub models typed by name kept loaded besides the menu's
    VITVIZ_MAX_MAP_GFLOP      100   the most compute one occlusion map or one image's deletion curves may take
    VITVIZ_TOOL_SLOTS         4     MCP tool calls answered at once (vitviz.app.serving.calls)
    VITVIZ_TOOL_WAIT_S        60    seconds a tool call waits for a slot before it is told to come back

The size of a model someone names, VITVIZ_MAX_MODEL_PARAMS (200 million), is read where models are
loaded: vitviz.models.bound; the labels in one list for CLIP or SigLIP, VITVIZ_MAX_LABELS (50), where labels
are read: vitviz.models.words.
"""

from __future__ import annotations

import os

import gradio as gr

from vitviz.models.vit import ViTConfig
from vitviz.training.config import TrainConfig

DEFAULTS = {
    "VITVIZ_MAX_TRAIN_SECONDS": 300,
    "VITVIZ_TRAIN_SLOTS": 1,
    "VITVIZ_TRAIN_QUEUE": 4,
    "VITVIZ_TRAIN_MEMORY_GB": 4.0,
    "VITVIZ_MAX_UPLOAD_MB": 20,
    "VITVIZ_CACHE_MAX_AGE_S": 3600,
    "VITVIZ_STATE_TTL_S": 1800,
    "VITVIZ_QUEUE_SIZE": 64,
    "VITVIZ_RETRY_LOAD_S": 60,
    "VITVIZ_MODEL_CACHE": 8,
    "VITVIZ_MAX_MAP_GFLOP": 100,
    "VITVIZ_CACHE_MAX_MB": 500,
    "VITVIZ_TYPED_MODELS": 2,
    "VITVIZ_CACHE_CHECK_S": 5,
    "VITVIZ_TOOL_SLOTS": 4,
    "VITVIZ_TOOL_WAIT_S": 60,
    "VITVIZ_SHARED_MB": 256,
    "VITVIZ_PICTURES_MB": 256,
}


def get(name: str) -> float:
    """The bound's value: its environment variable if set to a positive number, else the default."""
    raw = os.environ.get(name, "")
    try:
        v = float(raw)
    except ValueError:
        return DEFAULTS[name]
    return v if v > 0 else DEFAULTS[name]


def cap_time(cfg: TrainConfig, also: float | None = None) -> tuple[TrainConfig, str]:
    """The run with its time budget capped (at `also` too, when given); a note for the visitor when it applied."""
    cap = get("VITVIZ_MAX_TRAIN_SECONDS") if also is None else min(get("VITVIZ_MAX_TRAIN_SECONDS"), also)
    if 0 < cfg.budget.time_budget <= cap:
        return cfg, ""
    asked = f"{cfg.budget.time_budget:g} s" if cfg.budget.time_budget else "no time budget"
    cfg = cfg.but(time_budget=cap)
    return cfg, f"(This machine trains for at most {cap:g} s a run; you asked for {asked}.)"


def check_memory(cfg: TrainConfig) -> None:
    """gr.Error, saying what would fit, when the run's estimated peak memory is over the bound."""
    limit = get("VITVIZ_TRAIN_MEMORY_GB")
    need = cfg.peak_memory_gb()
    if need <= limit:
        return

    def need_at(batch: int) -> float:
        return cfg.but(batch_size=batch).peak_memory_gb()

    fits = cfg.budget.batch_size // 2
    while fits > 8 and need_at(fits) > limit:
        fits //= 2
    hint = (
        f"a batch of {fits} would fit"
        if fits >= 8 and need_at(fits) <= limit
        else "a smaller width, depth or a larger patch size would"
    )
    raise gr.Error(
        f"This run would need about {need:.1f} GB of memory, more than the {limit:g} GB a run may use "
        f"on this machine; {hint}."
    )


def queue_size() -> int:
    """The most requests waiting in Gradio's queue (VITVIZ_QUEUE_SIZE, default 64); explicit, because on
    ZeroGPU Gradio would otherwise make it 1."""
    return int(get("VITVIZ_QUEUE_SIZE"))


def upload_limit() -> str:
    return f"{get('VITVIZ_MAX_UPLOAD_MB'):g}mb"


def delete_cache() -> tuple[int, int]:
    age = int(get("VITVIZ_CACHE_MAX_AGE_S"))
    return min(600, age), age


def map_cost_note(what: str, passes: int, gflop: float) -> str:
    """'' when `what` (passes forward passes, gflop in all) fits VITVIZ_MAX_MAP_GFLOP; else the sentence saying
    why it is not computed here."""
    limit = get("VITVIZ_MAX_MAP_GFLOP")
    if gflop <= limit:
        return ""
    return (
        f"{what} would take {passes} forward passes of this model (about {gflop:,.0f} GFLOP), more than the "
        f"{limit:g} GFLOP one visitor's map may use on this machine (VITVIZ_MAX_MAP_GFLOP)."
    )


def method_refusal(method: str, cfg: ViTConfig) -> str:
    """'' when `method`'s map of a model with this config fits the budget (its cost: the method's own passes,
    vitviz.explain.methods.Method.passes); else the sentence why not."""
    from vitviz.explain.methods import METHODS, forward_gflop

    found = METHODS.get(method)
    passes = found.passes(cfg.num_patches) if found else 1
    if passes == 1:
        return ""
    note = map_cost_note(method[0].upper() + method[1:], passes, passes * forward_gflop(cfg))
    return note and note + " Choose gradient rollout or LeGrad for this model."
