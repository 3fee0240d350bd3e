"""The parts of the page every tab may wire its events to (the shell builds them, above the tabs)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr


@dataclass
class Shell:
    """What every tab may use: the visitor's state, the model menu and the note beside it, the tabs, the hidden
    /predict button."""

    state: gr.State
    model_dd: gr.Dropdown
    model_note: gr.Markdown
    tabs: gr.Tabs
    hidden_predict: gr.Button
