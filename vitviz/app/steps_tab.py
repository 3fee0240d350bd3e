"""The Step by step tab: the Explore image through the chosen model, one stage after another.

Each stage has its picture and its sentence (vitviz.pictures.steps); the visitor picks the block
and the token (a click on the input, or the CLS tile). The forward pass is kept per
image and model, and a stage is redrawn only when what it shows changed.
"""

from __future__ import annotations

import gradio as gr

from vitviz.app.activity import ACTIVITY
from vitviz.app.inputs import layer_index, patch_index, pixels_for
from vitviz.app.menu import follower, resolve_model, visitor
from vitviz.app.widgets import pic
from vitviz.pictures import steps
from vitviz.pictures.explore import PictureCache
from vitviz.pictures.input_view import click_to_token

STAGES = [  # (picture field, title)
    ("input", "1. The input, as the model receives it"),
    ("sequence", "2. The patches, as a sequence of tokens"),
    ("embedding", "3. The patch embedding"),
    ("positions", "4. The CLS token and the positional embedding"),
    ("block", "5. The encoder blocks, one at a time"),
    ("head", "6. The head: logits, softmax, prediction"),
    ("lens", "Over depth: the logit lens"),
]


def step_view(image, model_key: str = "cifar10", block: float = 1, patch: float = -1, state=None):
    """(steps.StepView, the names of the pictures drawn now, the visitor)."""
    with ACTIVITY:
        v = visitor(state)
        model = resolve_model(model_key, v)
        cfg = model.card.config
        b, clamped = layer_index(block, "The block", cfg.depth, default=1)
        p = patch_index(patch, cfg.num_patches)
        pixels = pixels_for(model, image)
        key = (model_key, id(model), hash(pixels.tobytes()))
        if v.walk is None or v.walk[0] != key:
            v.walk = (key, steps.walk_image(model, pixels))
            v.step_pictures = PictureCache()
        view, fresh = steps.render_steps(model, v.walk[1], b, p, v.step_pictures)
        if clamped:
            view.block_text = f"{clamped}\n\n{view.block_text}"
    return view, fresh, v


def step_page(image, model_key, block, patch, state):
    """The page's update: the pictures that changed (gr.skip() for the rest, each new one encoded once) and
    every sentence, then the state; or the reason beside the controls, the pictures kept."""
    try:
        view, fresh, v = step_view(image, model_key, block, patch, state)
    except gr.Error as e:
        v = visitor(state)
        v.step_pictures.clear()
        return (*[gr.skip()] * len(steps.STEP_NAMES), v, f"⚠️ {e.message}")
    files = v.files.paths({name: getattr(view, name) for name in fresh})
    out = [
        files[name] if name in fresh else gr.skip() if name in PICTURES else getattr(view, name)
        for name in steps.STEP_NAMES
    ]
    return (*out, v, "")


PICTURES = {name for name, _ in STAGES}


def steps_api(image, model_key: str = "cifar10", block: float = 1, patch: float = -1, state=None):
    """/steps: every stage's picture (a file) and sentence, in steps.StepView's field order."""
    view, _, v = step_view(image, model_key, block, patch, state)
    files = v.files.paths({name: getattr(view, name) for name in PICTURES})
    return tuple(files.get(name, getattr(view, name)) for name in steps.STEP_NAMES)


open_tab, follow = follower("steps", step_page, len(steps.STEP_NAMES))


def click(model_key: str, state, evt: gr.SelectData):
    try:
        cfg = resolve_model(model_key, state).card.config
    except gr.Error:
        return gr.skip()
    return click_to_token(evt.index[0], evt.index[1], cfg)


def block_range(model_key: str, state):
    try:
        depth = resolve_model(model_key, state).card.config.depth
    except gr.Error:
        return gr.skip()
    return gr.update(maximum=depth, value=min(depth, 1))


# ---------------------------------------------------------------- layout and wiring


def build() -> dict:
    gr.Markdown(
        "The image of the Explore tab through the chosen model, stage by stage as a ViT tutorial teaches "
        "it, with this model's real numbers. Pick a block and a token; every picture follows."
    )
    c = {}  # the controls under names no stage has
    with gr.Row():
        c["which_block"] = gr.Slider(1, 6, value=1, step=1, label="Block (stage 5)", elem_id="step-block-n")
        c["token"] = gr.Number(
            value=-1, precision=0, label="Token: patch number (-1: CLS); or click stage 1", elem_id="step-token"
        )
    c["note"] = gr.Markdown(elem_classes=["vv-note"])
    for name, title in STAGES:
        gr.Markdown(f"### {title}")
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=320):
                c[name] = pic(title, f"step-{name}", elem_classes_extra=["vv-wide"])  # a phone scrolls it
            with gr.Column(scale=1, min_width=280):
                c[f"{name}_text"] = gr.Markdown(elem_classes=["vv-step-text"])
    c["api"] = gr.Button(visible=False)
    return c


def wire(c: dict, shell, image, tab):
    inputs = [image, shell.model_dd, c["which_block"], c["token"], shell.state]
    outputs = [c[name] for name in steps.STEP_NAMES] + [shell.state, c["note"]]
    page = dict(
        fn=step_page,
        inputs=inputs,
        outputs=outputs,
        preprocess=False,
        api_visibility="private",
        trigger_mode="always_last",
        concurrency_limit=4,
    )
    tab.select(**{**page, "fn": open_tab})
    image.change(**{**page, "fn": follow})
    c["api"].click(
        steps_api,
        inputs,
        [c[name] for name in steps.STEP_NAMES],
        preprocess=False,
        api_name="steps",
        concurrency_limit=4,
        api_description="One image through the ViT stage by stage: a picture and "
        "a sentence per stage, for a chosen block and token.",
    )
    c["which_block"].change(**page)
    c["token"].change(**page)
    c["input"].select(click, [shell.model_dd, shell.state], c["token"], api_visibility="private")
    shell.model_dd.change(block_range, [shell.model_dd, shell.state], c["which_block"], api_visibility="private").then(
        **{**page, "fn": follow}
    )
