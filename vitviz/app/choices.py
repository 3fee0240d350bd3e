"""What a visitor chooses that the tabs follow: the image (an example, an upload, a random test image), the
selected token (a click on the input, the menu of tokens before the patches), and what a new model resets
(its classes, ranges, example gallery and token numbering; a sentence beside the menu when it cannot be had).

The Explore tab shows these controls and the shell wires the model menu's change through `controls_for`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vitviz.models.loaded import TokenLayout

if TYPE_CHECKING:  # the shell imports the tabs
    from vitviz.app.shell import Shell

import gradio as gr
import numpy as np
from PIL import Image

from vitviz.app import menu as models
from vitviz.app.handlers import Outputs, token_at, warning
from vitviz.app.inputs import (
    PREDICTED,
    read_image,
    token_index,
    token_numbers,
)
from vitviz.app.menu import resolve_model
from vitviz.app.visitor import DEFAULT_EXAMPLE, Visitor, visitor
from vitviz.data import gallery
from vitviz.data.datasets import DATASETS, DataUnavailable, load_dataset
from vitviz.pictures import explanation as views
from vitviz.runtime import scratch

# ---------------------------------------------------------------- the image: examples, uploads, test images


def examples_default() -> str | None:
    """The example the page opens on: a CIFAR-10 test image of the shipped model's gallery."""
    items = gallery.items("cifar10")
    return items[DEFAULT_EXAMPLE][0] if len(items) > DEFAULT_EXAMPLE else None


def pick_example(model_key: str, state: Visitor | None, evt: gr.SelectData) -> tuple:
    """The clicked example, from the gallery that suits the chosen model (MNIST digits for an MNIST model)."""
    v = visitor(state)
    try:
        ds = resolve_model(model_key, v).card.gallery
    except gr.Error as e:
        return PICKED.reply(state=v, image_note=warning(e))
    items = gallery.items(ds)
    if not items:
        return PICKED.reply(state=v, image_note="⚠️ No examples are shipped for this model.")
    v.crossing.image_gallery, v.crossing.example = ds, evt.index % len(items)
    return PICKED.reply(image=items[v.crossing.example][0], patch=-1, state=v, image_note="")


PICKED = Outputs("image", "patch", "state", "image_note")  # an example picked
NEW_IMAGE = Outputs("image", "patch", "examples", "state", "image_note")  # an upload or a random test image


def upload_image(file: object, model_key: str, state: Visitor | None) -> tuple:
    """An image from the Upload button: it becomes the shown image; the gallery lets go of its selection."""
    v = visitor(state)
    path = file if isinstance(file, str) else getattr(file, "name", None)
    try:
        read_image(path)
        v.crossing.image_gallery = resolve_model(model_key, v).card.gallery
    except gr.Error as e:
        return NEW_IMAGE.reply(state=v, image_note=warning(e))
    v.crossing.example = None
    return NEW_IMAGE.reply(image=path, patch=-1, examples=gr.update(selected_index=None), state=v, image_note="")


_test_sets: dict[str, object] = {}


def random_test_image(model_key: str, state: Visitor | None) -> tuple:
    """A random image of the model's test set, its true label said beside the buttons."""
    v = visitor(state)
    try:
        ds = resolve_model(model_key, v).card.gallery
        if ds not in _test_sets:
            _test_sets[ds] = load_dataset(ds, val_size=0).test
    except gr.Error as e:
        return NEW_IMAGE.reply(state=v, image_note=warning(e))
    except DataUnavailable:
        return NEW_IMAGE.reply(
            state=v,
            image_note="⚠️ The full test set is not on this machine (set VITVIZ_DATA to use it); pick one of the "
            "examples instead.",
        )
    split = _test_sets[ds]
    i = int(np.random.default_rng().integers(len(split)))
    arr = split.x[i].permute(1, 2, 0).numpy()
    label = DATASETS[ds]["classes"][int(split.y[i])]
    path = scratch.new_folder("image") / f"test_{i}_{label}.png"
    Image.fromarray(arr[:, :, 0] if arr.shape[2] == 1 else arr).save(path)
    v.crossing.image_gallery, v.crossing.example = ds, None
    return NEW_IMAGE.reply(
        image=str(path),
        patch=-1,
        examples=gr.update(selected_index=None),
        state=v,
        image_note=f"Random test image #{i}; true label: **{label}**",
    )


def pick_prefix(name: str, model_key: str, state: Visitor | None) -> int | dict:
    """The token menu's choice (CLS, a distillation token, a register) as the selected token's number."""
    try:
        prefix = resolve_model(model_key, state).layout.prefix
    except gr.Error:
        return gr.skip()
    return -1 - prefix.index(name) if name in prefix else gr.skip()


def prefix_shown(patch: object, model_key: str, state: Visitor | None) -> dict:
    """The token menu follows the selected token: its name for a token before the patches, empty for a patch."""
    try:
        layout = resolve_model(model_key, state).layout
        p, k = token_index(patch, layout)
    except gr.Error:
        return gr.skip()
    return gr.update(value=layout.prefix[k] if p is None else None)


def token_controls(layout: TokenLayout) -> tuple:
    """The selected-token number's label, and the token menu (shown where there is more than CLS)."""
    return (
        gr.update(value=-1, label=f"Selected token ({token_numbers(layout)})"),
        gr.update(choices=list(layout.prefix), value="CLS", visible=layout.num_prefix > 1),
    )


# ---------------------------------------------------------------- a new model


def controls_for(model_key: str, state: Visitor | None, progress: gr.Progress = gr.Progress(track_tqdm=True)) -> tuple:
    """When the model changes: its class list, slider ranges and example gallery, an example image that suits
    it if the shown one does not (MNIST digits for an MNIST model), and the CLS token selected again.

    A model that cannot be had (ViT-B/16 or a timm model without internet, no session model yet) is said
    beside the menu, and the sentence stays there while the menu goes back to the shipped CIFAR-10 model. A
    first load of a downloaded model shows its progress (the download's tqdm bar, tracked); it holds up no one
    else (a lock per model)."""
    v = visitor(state)
    note = models.first_load(model_key, progress)
    try:
        model = resolve_model(model_key, v)
    except gr.Error as e:
        note = f"⚠️ {e.message} {note} Showing the {models.SHARED['cifar10']} instead.".replace("  ", " ")
        v.crossing.menu_note = note  # said again when the menu's own change back to the CIFAR-10 model arrives
        model_key = "cifar10"
        model = resolve_model(model_key, v)
    else:
        if not note and v.crossing.menu_note:
            note, v.crossing.menu_note = v.crossing.menu_note, ""
    card = model.card
    items = gallery.items(card.gallery)
    image = gr.skip()
    if v.crossing.image_gallery != card.gallery and items:  # the shown image belongs with another kind of model
        v.crossing.example = min(DEFAULT_EXAMPLE if v.crossing.example is None else v.crossing.example, len(items) - 1)
        v.crossing.image_gallery = card.gallery
        image = items[v.crossing.example][0]
    has_classes = bool(card.classes)  # a model without a classifier has no class to explain
    return (
        model_key,
        gr.update(choices=[PREDICTED] + list(card.classes), value=PREDICTED, interactive=has_classes),
        gr.update(maximum=card.config.depth, value=card.config.depth),
        gr.update(maximum=card.config.num_heads, value=1),
        gr.update(value=items, label=GALLERY_LABELS.get(card.gallery, "Examples"), selected_index=v.crossing.example),
        *token_controls(model.layout),
        image,
        v,
        note,
        gr.update(label=views.what_it_knows(model)),
        gr.update(interactive=has_classes),
    )


GALLERY_LABELS = {"cifar10": "Examples: CIFAR-10 test images", "mnist": "Examples: MNIST test digits"}


def wire(c: dict, shell: Shell) -> None:
    """The choices' events: the examples, the upload and test-image buttons, a click on the input, the token
    menu. `c`: the Explore tab's components, which show them; `shell`: the model menu and the visitor's state."""
    c["examples"].select(
        pick_example,
        [shell.model_dd, shell.state],
        PICKED.components({**c, "state": shell.state}),
        api_visibility="private",
    )
    c["upload"].upload(
        upload_image,
        [c["upload"], shell.model_dd, shell.state],
        NEW_IMAGE.components({**c, "state": shell.state}),
        api_visibility="private",
    )
    c["random"].click(
        random_test_image,
        [shell.model_dd, shell.state],
        NEW_IMAGE.components({**c, "state": shell.state}),
        api_visibility="private",
    )
    c["sees"].select(token_at, [shell.model_dd, shell.state], c["patch"], api_visibility="private")
    c["to_cls"].click(lambda: -1, None, c["patch"], api_visibility="private", queue=False)
    c["prefix_token"].input(
        pick_prefix, [c["prefix_token"], shell.model_dd, shell.state], c["patch"], api_visibility="private"
    )
    c["patch"].change(
        prefix_shown, [c["patch"], shell.model_dd, shell.state], c["prefix_token"], api_visibility="private"
    )


def model_changed(c: dict, shell: Shell) -> dict:
    """What the model menu's change does to this tab: (fn, inputs, outputs) for the shell's chain."""
    return dict(
        fn=controls_for,
        inputs=[shell.model_dd, shell.state],
        outputs=[
            shell.model_dd,
            c["target"],
            c["layer"],
            c["head"],
            c["examples"],
            c["patch"],
            c["prefix_token"],
            c["image"],
            shell.state,
            shell.model_note,
            c["top5"],
            c["method"],
        ],
    )
