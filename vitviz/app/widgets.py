"""Components every tab draws the same way."""
from __future__ import annotations

import gradio as gr


def pic(label: str, elem_id: str | None = None, fmt: str = "jpeg", **kw) -> gr.Image:
    """An output picture whose label sits above it, never over it."""
    return gr.Image(label=label, interactive=False, format=fmt, elem_classes=["vv-pic"], elem_id=elem_id, **kw)


def progress_html(p: float | None) -> str:
    pct = 0 if p is None else int(round(100 * max(0.0, min(1.0, p))))
    return (f'<div class="vv-progress"><div class="vv-bar" style="width:{pct}%"></div>'
            f'<span>{pct}%</span></div>')
