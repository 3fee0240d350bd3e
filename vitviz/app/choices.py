"""What a visitor chooses that the tabs follow: the image (an example, an upload, a random test image). The
selected token is chosen on Explore (vitviz.app.tabs.explore: a click on the input, its number, the menu of
tokens before the patches), each in one event. What a new model keeps of them is vitviz.app.switch.

The Explore tab shows these controls.
"""

from __future__ import annotations

import os

import gradio as gr
import numpy as np
from PIL import Image

from vitviz.app import link
from vitviz.app.handlers import Outputs, warning
from vitviz.app.inputs import read_image
from vitviz.app.menu import resolve_model
from vitviz.app.page import Shell
from vitviz.app.state import DEFAULT_EXAMPLE, NONE_SELECTED, Visitor, visitor
from vitviz.app.switch import PHOTO_MODEL, photo_advice
from vitviz.data import gallery
from vitviz.data.datasets import DATASETS, DataUnavailable, load_dataset
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
    v.crossing.new_image(ds, evt.index % len(items))
    return PICKED.reply(
        image=items[v.crossing.example][0], state=v, image_note="", photo_switch=gr.update(visible=False)
    )


def opening(image: str | None, wanted: dict | None, large: bool, numbers: bool, state: Visitor | None) -> Visitor:
    """The page opened (on a link's view, vitviz.app.link): the visitor's record follows what it shows, the image
    (one of the examples, by its name, or their own, for the model `wanted` names) and the drawing style."""
    v = visitor(state)
    model_key = link.model_of(wanted)
    v.restyle(large=large, numbers=numbers)
    path = image.get("path") if isinstance(image, dict) else image
    if not path:
        return v
    name = os.path.basename(str(path))
    for ds in ("cifar10", "mnist"):
        names = [os.path.basename(p) for p, _ in gallery.items(ds)]
        if name in names:
            v.crossing.new_image(ds, names.index(name))
            return v
    try:
        v.crossing.new_image(resolve_model(model_key, v).card.gallery, None, own=str(path))
    except gr.Error:
        pass
    return v


PICKED = Outputs("image", "state", "image_note", "photo_switch")  # an example picked (the selected token kept)
NEW_IMAGE = Outputs("image", "examples", "state", "image_note", "photo_switch")  # an upload or a test image


def upload_image(file: object, model_key: str, state: Visitor | None) -> tuple:
    """An image from the Upload button: it becomes the shown image; the gallery lets go of its selection."""
    v = visitor(state)
    path = file if isinstance(file, str) else getattr(file, "name", None)
    try:
        read_image(path)
        model = resolve_model(model_key, v)
        v.crossing.new_image(model.card.gallery, None, own=path)
    except gr.Error as e:
        return NEW_IMAGE.reply(state=v, image_note=warning(e))
    return NEW_IMAGE.reply(  # a photo on a model of 32x32 pictures: what to use instead
        image=path, examples=gr.update(selected_index=NONE_SELECTED), state=v, **photo_advice(v.crossing, model)
    )


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
    v.crossing.new_image(ds, None, own=str(path))
    return NEW_IMAGE.reply(
        image=str(path),
        examples=gr.update(selected_index=NONE_SELECTED),
        state=v,
        image_note=f"Random test image #{i}; true label: **{label}**",
        photo_switch=gr.update(visible=False),
    )


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
    c["photo_switch"].click(  # the model change that follows keeps the photo (switch.shown_image)
        lambda: PHOTO_MODEL, None, shell.model_dd, queue=False, api_visibility="private"
    )
    c["random"].click(
        random_test_image,
        [shell.model_dd, shell.state],
        NEW_IMAGE.components({**c, "state": shell.state}),
        api_visibility="private",
    )
