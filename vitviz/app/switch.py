"""A new model in the menu: what of the visitor's image and choices it keeps, and what it must change.

The visitor's own image (an upload, a random test image) stays while the new model can take it. A model that
reads another kind of image (MNIST's grey digits, a photo) gets an example in its place, said beside the menu,
and the visitor's image comes back with a model that can take it again. The class explained, the method, the
layer and head and the selected token are kept where the new model has them (the last layer stays the last);
where it does not, the nearest it has is chosen and the sentence beside the menu says so.

The shell wires the menu's change through `model_changed`; the Explore tab shows the controls.
"""

from __future__ import annotations

import os

import gradio as gr
from PIL import Image

from vitviz.app import menu
from vitviz.app.handlers import Outputs
from vitviz.app.help import help_for
from vitviz.app.inputs import PREDICTED, selected_token
from vitviz.app.menu import resolve_model
from vitviz.app.page import Shell
from vitviz.app.state import DEFAULT_EXAMPLE, Crossing, Visitor, visitor
from vitviz.data import gallery
from vitviz.models.card import DATASET_NAMES
from vitviz.models.loaded import LoadedViT, Token, TokenLayout
from vitviz.pictures import explanation

GALLERY_LABELS = {"cifar10": "Examples: CIFAR-10 test images", "mnist": "Examples: MNIST test digits"}
KINDS = {"cifar10": "colour photos", "mnist": "grey handwritten digits"}  # what each gallery's models read

CHANGED = Outputs(
    "model",
    "target",
    "layer",
    "head",
    "examples",
    "patch",
    "prefix_token",
    "image",
    "state",
    "note",
    "top5",
    "method",
    "labels",
    "template",
    "to_cls",
    "help_sees",
    "help_class_map",
    "help_lens",
    "photo_switch",
    "image_note",
)


def token_controls(layout: TokenLayout, token: Token) -> tuple:
    """The selected token's number with its label, and the token menu (shown where there is more than CLS)
    naming it."""
    return (
        gr.update(value=token.number, label=f"Selected token ({layout.numbering()})"),
        gr.update(
            choices=list(layout.prefix),
            value=token.name if token.patch is None and layout.prefix else None,
            visible=layout.num_prefix > 1,
        ),
    )


def controls_for(
    model_key: str,
    state: Visitor | None,
    target: str | None = PREDICTED,
    layer: float | None = None,
    head: float | None = None,
    patch: float | None = -1,
    labels: str | None = None,
    template: str | None = None,
    progress: gr.Progress = gr.Progress(track_tqdm=True),
) -> tuple:
    """When the model changes: its class list, slider ranges, example gallery and token numbering, with the
    visitor's choices (`target`, `layer`, `head`, `patch`) kept where it has them; the visitor's own image
    kept where it can take it, or an example that suits it in its place.

    A model that cannot be had (ViT-B/16 or a timm model without internet, no session model yet) is said
    beside the menu, and the sentence stays there while the menu goes back to the shipped CIFAR-10 model. A
    first load of a downloaded model shows its progress (the download's tqdm bar, tracked); it holds up no one
    else (a lock per model)."""
    v = visitor(state)
    note = menu.first_load(model_key, progress)
    try:
        model = resolve_model(model_key, v)
    except gr.Error as e:  # its sentence says why (and, only where internet is needed, where weights are kept)
        note = f"⚠️ {e.message} Showing the {menu.SHARED['cifar10']} instead."
        v.crossing.menu_note = note  # said again when the menu's own change back to the CIFAR-10 model arrives
        model_key = "cifar10"
        model = resolve_model(model_key, v)
    else:
        if not note and v.crossing.menu_note:
            note, v.crossing.menu_note = v.crossing.menu_note, ""
    model, words_note = _worded(model, labels, template)
    card, cfg = model.card, model.card.config
    image, image_note = shown_image(v.crossing, model)
    target, target_note = kept_class(model, target)
    token = kept_token(model.layout, patch)
    before, v.crossing.depth = v.crossing.depth, cfg.depth
    last = layer is None or (before is not None and layer >= before)  # the last layer stays the last
    layer = cfg.depth if last else max(1, min(int(layer), cfg.depth))
    head = max(1, min(int(head or 1), cfg.num_heads))
    number, token_menu = token_controls(model.layout, token)
    has_classes = bool(card.classes)  # a model without a classifier has no class to explain
    items = gallery.items(card.gallery)
    return CHANGED.reply(
        model=model_key,
        target=gr.update(
            choices=[PREDICTED] + list(card.classes),
            value=target,
            visible=has_classes,  # a model without a classifier has no class control at all
            label="Explain label" if model.zero_shot else "Explain class",
        ),
        layer=gr.update(maximum=cfg.depth, value=layer),
        head=gr.update(maximum=cfg.num_heads, value=head),
        examples=gr.update(
            value=items, label=GALLERY_LABELS.get(card.gallery, "Examples"), selected_index=v.crossing.selected()
        ),
        patch=number,
        prefix_token=token_menu,
        image=image,
        state=v,
        note=" ".join(n for n in (note, image_note, words_note, target_note) if n),
        top5=gr.update(label=explanation.what_it_knows(model), num_top_classes=explanation.shown_classes(model)),
        method=gr.update(visible=has_classes),
        labels=gr.update(visible=model.zero_shot),
        template=gr.update(visible=model.zero_shot),
        to_cls=gr.update(value=f"Back to {model.layout.first()}"),
        **help_for(has_classes),
        **photo_advice(v.crossing, model),  # a model change also ends what was said of the last image
    )


def _worded(model: LoadedViT, labels: str | None, template: str | None) -> tuple[LoadedViT, str]:
    """A model with a text tower with the visitor's words (their defaults, and a sentence, where they cannot be
    used); any other model as it is."""
    try:
        return menu.in_words(model, labels, template), ""
    except gr.Error as e:
        return menu.in_words(model, None, None), f"⚠️ {e.message} The default labels are used."


def words_changed(model_key: str, labels: str, template: str, target: str | None, state: Visitor | None) -> tuple:
    """New labels or a new prompt: the class menu lists the labels (the chosen one kept if it is still there),
    the prediction box says what it scores; a bad list or prompt is said beside the menu, which stays."""
    try:
        model = menu.in_words(resolve_model(model_key, state), labels, template)
    except gr.Error as e:
        return gr.skip(), gr.skip(), f"⚠️ {e.message}"
    target, target_note = kept_class(model, target)
    return (
        gr.update(choices=[PREDICTED] + list(model.card.classes), value=target),
        gr.update(label=explanation.what_it_knows(model), num_top_classes=explanation.shown_classes(model)),
        target_note,
    )


def shown_image(crossing: Crossing, model: LoadedViT) -> tuple[str | dict, str]:
    """(the image to show now, or gr.skip() to keep the shown one; the sentence saying what changed, or "")."""
    want = model.card.gallery
    items = gallery.items(want)
    name = model.card.title
    if crossing.own and crossing.example is None and crossing.own_gallery != want and items:
        crossing.example, crossing.image_gallery, crossing.stand_in = DEFAULT_EXAMPLE % len(items), want, True
        return items[crossing.example][0], (
            f"Your image is of {KINDS.get(crossing.own_gallery or '', 'another kind')}, and the {name} reads "
            f"{KINDS.get(want, 'other images')}: showing {DATASET_NAMES.get(want, want)} example "
            f"{crossing.example + 1} in its place. Choose a model for {KINDS.get(crossing.own_gallery or '', 'it')} "
            "and your image comes back."
        )
    if crossing.own and crossing.stand_in and crossing.own_gallery == want:
        crossing.stand_in = False
        if os.path.isfile(crossing.own):
            crossing.example, crossing.image_gallery = None, want
            return crossing.own, "Your own image is back."
        crossing.own = None  # gone from the server's folders: an example of this model's kind instead
        crossing.example, crossing.image_gallery = min(crossing.example or 0, len(items) - 1), want
        return items[crossing.example][0], (
            f"Your own image is no longer kept on the server (upload it again): showing "
            f"{DATASET_NAMES.get(want, want)} example {crossing.example + 1}."
        )
    if crossing.image_gallery != want and items:  # an example of the other kind: the same place in this gallery
        crossing.example = min(DEFAULT_EXAMPLE if crossing.example is None else crossing.example, len(items) - 1)
        crossing.image_gallery = want
        return items[crossing.example][0], ""
    return gr.skip(), ""


PHOTO_MODEL = "timm/deit_small_patch16_224.fb_in1k"  # a model that knows photos: ImageNet's 1,000 classes, 224 px


def photo_advice(crossing: Crossing, model: LoadedViT) -> dict:
    """The image's note and the switch to a photo model (outputs "image_note", "photo_switch"): the line saying
    that this model cannot know the visitor's photo, and the switch shown, for their own image at least 4x the
    model's input a side on a model trained on CIFAR-10's 32x32 pictures (which calls anything one of its 10
    kinds); else no line and no switch."""
    side = model.card.config.image_size
    try:
        photo = model.card.dataset == "cifar10" and crossing.example is None and bool(crossing.own)
        if photo:
            with Image.open(crossing.own) as im:
                photo = min(im.size) >= 4 * side
    except OSError:
        photo = False
    line = (
        f"The {model.card.title} knows only CIFAR-10's 10 kinds of {side}x{side} px pictures, so it calls any photo "
        "one of them. For a photo, use a model trained on ImageNet's photos: **DeiT-S** (1,000 classes, 224x224 px)."
    )
    return {"image_note": line if photo else "", "photo_switch": gr.update(visible=photo)}


def kept_class(model: LoadedViT, target: str | None) -> tuple[str, str]:
    """(the class to explain with this model, "" or the sentence saying it does not know the one chosen)."""
    classes = model.card.classes
    if not classes:  # no classifier: no class to keep, and nothing to say about it
        return PREDICTED, ""
    if not target or target == PREDICTED or target in classes:
        return target or PREDICTED, ""
    return PREDICTED, f"The {model.card.title} has no class '{target}': it explains its predicted class."


def kept_token(layout: TokenLayout, patch: object) -> Token:
    """The selected token where this model has it (its patches and the tokens before them), else CLS."""
    try:
        return selected_token(patch, layout)
    except gr.Error:
        return layout.token(-1)


def gallery_mark(state: Visitor | None) -> dict:
    """The gallery's mark set again after its examples changed (a new list keeps the old mark otherwise)."""
    return gr.update(selected_index=visitor(state).crossing.selected())


KEPT = ("target", "layer", "head", "patch", "labels", "template")  # the visitor's choices a new model keeps


def model_changed(c: dict, shell: Shell) -> dict:
    """What the model menu's change does to the Explore tab: (fn, inputs, outputs) for the shell's chain."""
    named = {**c, "model": shell.model_dd, "state": shell.state, "note": shell.model_note}
    return dict(
        fn=controls_for,
        inputs=[shell.model_dd, shell.state, *(c[k] for k in KEPT)],
        outputs=CHANGED.components(named),
    )
