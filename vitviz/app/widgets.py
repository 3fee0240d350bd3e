"""Components every tab draws the same way."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from pathlib import Path

import gradio as gr
import numpy as np
from PIL import Image

from vitviz.app.serving.gradio_internals import before_postprocess, cache_folder


def cache_atomically(picture: np.ndarray | Image.Image, cache_dir: str, fmt: str) -> str:
    """`picture` (an array or a PIL image) encoded as `fmt` into Gradio's cache, under the name that its
    bytes give, and written under a temporary name first, then renamed into place. Gradio's own
    save_pil_to_cache rewrites that same file in place, so two visitors whose replies hold the same picture
    could read it half written (the browser or gradio_client then gets an empty or broken image)."""
    im = picture if isinstance(picture, Image.Image) else Image.fromarray(np.asarray(picture))
    with io.BytesIO() as out:
        im.save(out, format=fmt)
        data = out.getvalue()
    folder = Path(cache_dir) / hashlib.sha256(data).hexdigest()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"picture.{fmt}"
    if not path.is_file():
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return str(path.resolve())


def pic(
    label: str, elem_id: str | None = None, fmt: str = "png", elem_classes_extra: tuple[str, ...] = (), **kw
) -> gr.Image:
    """An output picture: no toolbar over it (its title and colour bar are drawn in it; Export saves it), its
    label (when shown) above it, never over it."""
    kw.setdefault("show_label", False)
    im = gr.Image(
        label=label,
        interactive=False,
        format=fmt,
        elem_classes=["vv-pic", *elem_classes_extra],
        elem_id=elem_id,
        buttons=[],
        **kw,
    )

    def written(value: object) -> object:
        """Arrays go to the cache by cache_atomically (a gr.Image subclass would make Gradio write a .pyi)."""
        if isinstance(value, (np.ndarray, Image.Image)):
            return cache_atomically(value, cache_folder(im), fmt)
        return value

    before_postprocess(im, written)
    return im


def help_line(text: str) -> gr.Markdown:
    """The line under a picture that says how to read it."""
    return gr.Markdown(text, elem_classes=["vv-help"])


def progress_html(p: float | None, stopped: bool = False) -> str:
    """The run's progress bar; a run that ended early keeps the bar where it got to, and says so."""
    pct = 0 if p is None else int(round(100 * max(0.0, min(1.0, p))))
    text = f"stopped at {pct}%" if stopped else f"{pct}%"
    return (
        f'<div class="vv-progress"><div class="vv-bar{" vv-stopped" if stopped else ""}" '
        f'style="width:{pct}%"></div><span>{text}</span></div>'
    )
