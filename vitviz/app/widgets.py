"""Components every tab draws the same way."""
from __future__ import annotations

import gradio as gr


def pic(label: str, elem_id: str | None = None, fmt: str = "png", elem_classes_extra=(), **kw) -> gr.Image:
    """An output picture: no toolbar over it (its title and colour bar are drawn in it; Export saves it), its
    label (when shown) above it, never over it."""
    kw.setdefault("show_label", False)
    return gr.Image(label=label, interactive=False, format=fmt, elem_classes=["vv-pic", *elem_classes_extra], elem_id=elem_id,
                    buttons=[], **kw)


def help_line(text: str) -> gr.Markdown:
    """The line under a picture that says how to read it."""
    return gr.Markdown(text, elem_classes=["vv-help"])


def progress_html(p: float | None, stopped: bool = False) -> str:
    """The run's progress bar; a run that ended early keeps the bar where it got to, and says so."""
    pct = 0 if p is None else int(round(100 * max(0.0, min(1.0, p))))
    text = f"stopped at {pct}%" if stopped else f"{pct}%"
    return (f'<div class="vv-progress"><div class="vv-bar{" vv-stopped" if stopped else ""}" '
            f'style="width:{pct}%"></div><span>{text}</span></div>')
