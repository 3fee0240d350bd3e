"""The Step by step tab: the Explore image through the chosen model, one stage after another.

Each stage has its picture and its sentence (vitviz.pictures.steps); the visitor picks the block
and the token (a click on the input, or the CLS tile). The forward pass is kept per
image and model, and a stage is redrawn only when what it shows changed.
"""

from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from vitviz.app.handlers import Outputs, endpoint, follow_image, follower, pictures_reply, token_shown, warning
from vitviz.app.inputs import ImagePayload, layer_index, selected_token
from vitviz.app.menu import in_words, resolve_model
from vitviz.app.page import Shell, copies
from vitviz.app.selection import select
from vitviz.app.serving.activity import ACTIVITY
from vitviz.app.state import Visitor, visitor
from vitviz.app.widgets import pic
from vitviz.pictures import spots, steps

STAGES = [  # (picture field, title)
    ("input", "1. The input, as the model receives it"),
    ("sequence", "2. The patches, as a sequence of tokens"),
    ("embedding", "3. The patch embedding"),
    ("positions", "4. The CLS token and the positional embedding"),
    ("block", "5. The encoder blocks, one at a time"),
    ("head", steps.TITLES["head"]),  # these two as a classifier's: each model's own set when it is chosen
    ("lens", steps.TITLES["lens"]),
]


def step_view(
    image: ImagePayload,
    model_key: str = "cifar10",
    block: float = 1,
    patch: float = -1,
    labels: str | None = None,
    template: str | None = None,
    state: Visitor | None = None,
) -> tuple[steps.StepView, set[str], Visitor]:
    """(steps.StepView, the names of the pictures drawn now, the visitor). `labels` and `template`: a CLIP or
    SigLIP model's classes in words (Explore's), which its last stage compares the image with."""
    with ACTIVITY:
        v = visitor(state)
        model = in_words(resolve_model(model_key, v), labels, template)
        b, clamped = layer_index(block, "The block", model.card.config.depth, default=1)
        s = select(v, image, model_key, token=patch, model=model)
        walk = v.steps.keep(s.key(), lambda: s.shared("steps", lambda: steps.walk_image(s.model, s.pixels)))
        with v.drawing():
            view, fresh = steps.render_steps(s.model, walk, b, s.token, v.steps.pictures)
        if clamped:
            view.block_text = f"{clamped}\n\n{view.block_text}"
    return view, fresh, v


def step_page(
    image: ImagePayload, model_key: str, block: float, patch: float, labels: str, template: str, state: Visitor | None
) -> tuple:
    """The page's update: the pictures that changed (gr.skip() for the rest, each new one encoded once) and
    every sentence, then the state; or the reason beside the controls, the pictures kept."""
    try:
        view, fresh, v = step_view(image, model_key, block, patch, labels, template, state)
    except gr.Error as e:
        v = visitor(state)
        v.steps.pictures.clear()
        return PAGE.reply(state=v, note=warning(e))
    drawn = pictures_reply(view, steps.STEP_NAMES, PICTURES, fresh, v.files)
    return PAGE.reply(**drawn, state=v, note="", following=_following(model_key, block, patch, v))


def _following(model_key: str, block: float, token: float, v: Visitor) -> str:
    """The sticky bar's line: which token, through which block (the controls' values, as the stages use them)."""
    model = resolve_model(model_key, v)
    name = selected_token(token, model.layout).name
    b, _ = layer_index(block, "The block", model.card.config.depth, default=1)
    return f"Following **{name}** · stage 5 shows **block {b}** of {model.card.config.depth}"


PICTURES = {name for name, _ in STAGES}
CLICKABLE = ("input", "sequence", "embedding", "positions", "block")  # the stages whose pictures show tokens
PAGE = Outputs(*steps.STEP_NAMES, "state", "note", "following")  # the page's update


def steps_api(
    image: ImagePayload,
    model_key: str = "cifar10",
    block: float = 1,
    patch: float = -1,
    labels: str | None = None,
    template: str | None = None,
    state: Visitor | None = None,
) -> tuple:
    """/steps: every stage's picture (a file) and sentence, in steps.StepView's field order (`labels` and
    `template`: for CLIP or SigLIP, as /explain's)."""
    view, _, v = step_view(image, model_key, block, patch, labels, template, state)
    return API.reply(**pictures_reply(view, steps.STEP_NAMES, PICTURES, set(PICTURES), v.files))


API = Outputs(*steps.STEP_NAMES)
TOKEN_PAGE = Outputs(*PAGE.names, "patch", "prefix_token")  # and the one token control (Explore's) set to it
open_tab, follow = follower("steps", step_page, PAGE)


def token_page(
    image: ImagePayload, model_key: str, block: float, number: int, labels: str, template: str, state: Visitor | None
) -> tuple:
    """Every stage for the newly selected token `number`, and Explore's token control set to it, in one event."""
    update = dict(zip(PAGE.names, step_page(image, model_key, block, number, labels, template, state)))
    return TOKEN_PAGE.reply(**update, **token_shown(model_key, state, number))


def picker(name: str) -> Callable:
    """The click handler of stage `name`'s picture: the token under the click (a patch, CLS, a register) selected,
    every stage that follows it drawn and the token control set, in one event; nothing where there is no token."""

    def pick(
        image: ImagePayload,
        model_key: str,
        block: float,
        token: float,
        labels: str,
        template: str,
        state: Visitor | None,
        evt: gr.SelectData,
    ) -> tuple:
        try:
            view, _, v = step_view(image, model_key, block, token, labels, template, state)  # as drawn (kept)
            layout = resolve_model(model_key, v).layout
        except gr.Error:
            return TOKEN_PAGE.reply()
        picked = spots.token_at(view.spots.get(name, []), *evt.index[:2], layout)
        if picked is None:
            return TOKEN_PAGE.reply()
        return token_page(image, model_key, block, picked.number, labels, template, state)

    return pick


def fitted(model_key: str, state: Visitor | None) -> tuple:
    """For a new model: the block slider's range (its value follows Explore's layer), the button back to the
    token the prediction reads, named, and the titles of the stages that differ by model."""
    try:
        layout, depth = (m := resolve_model(model_key, state)).layout, m.card.config.depth
    except gr.Error:
        return (gr.skip(),) * (2 + len(TITLED))
    titles = steps.stage_titles(m)
    return gr.update(maximum=depth), gr.update(value=f"Back to {layout.first()}"), *(f"### {titles[n]}" for n in TITLED)


TITLED = ("head", "lens")  # the stages whose titles differ by model (steps.stage_titles)


# ---------------------------------------------------------------- layout and wiring


def build() -> dict:
    gr.Markdown(
        "The image of the Explore tab through the chosen model, stage by stage as a ViT tutorial teaches "
        "it, with this model's real numbers. Click a token in any picture to follow it (or pick it on Explore); "
        "the token and the block stay at the top while you scroll."
    )
    c = {}  # the controls under names no stage has
    with gr.Column(elem_id="step-controls"):  # sticky: beside every stage while the page scrolls
        with gr.Row(equal_height=True):
            c["to_cls"] = gr.Button("Back to CLS", size="sm", elem_id="step-cls", min_width=90, scale=0)
            c["which_block"] = gr.Slider(1, 6, value=6, step=1, label="Block (stage 5)", elem_id="step-block-n")
        c["following"] = gr.Markdown(elem_id="step-following")
        c["note"] = gr.Markdown(elem_classes=["vv-note"])
    for name, title in STAGES:
        heading = gr.Markdown(f"### {title}")
        if name in TITLED:
            c[f"title_{name}"] = heading
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=320):
                wide = ["vv-wide"] if name != "input" else []  # a phone scrolls the wide ones
                c[name] = pic(title, f"step-{name}", elem_classes_extra=wide)
            with gr.Column(scale=1, min_width=280):
                c[f"{name}_text"] = gr.Markdown(elem_classes=["vv-step-text"])
    c["api"] = gr.Button(visible=False)
    return c


def wire(c: dict, shell: Shell, explore: dict, tab: gr.Tab) -> dict:
    """The tab's events. `explore`: the Explore tab's components, whose image, labels and prompt it draws, and
    whose token control is the one this tab follows and sets. Returns the event settings that redraw it while it
    is looked at."""
    image, words = explore["image"], (explore["labels"], explore["template"])
    inputs = [image, shell.model_dd, c["which_block"], explore["patch"], *words, shell.state]
    outputs = PAGE.components({**c, "state": shell.state})
    redraw = dict(fn=step_page, inputs=inputs, outputs=outputs)
    fit = dict(
        fn=fitted,
        inputs=[shell.model_dd, shell.state],
        outputs=[c["which_block"], c["to_cls"], *(c[f"title_{n}"] for n in TITLED)],
    )
    page = follow_image(tab, image, shell, redraw, open_tab, follow, fit, copies("steps", c, explore))
    about = (
        "One image through the ViT stage by stage: a picture and a sentence per stage, for a chosen block and token."
    )
    endpoint(c["api"], steps_api, inputs, API.components(c), "steps", about)
    token = {**page, "outputs": TOKEN_PAGE.components({**c, **explore, "state": shell.state})}
    c["to_cls"].click(**{**token, "fn": lambda *a: token_page(*a[:3], -1, *a[4:])})
    for name in CLICKABLE:
        c[name].select(**{**token, "fn": picker(name)})
    return {**page, "fn": follow}
