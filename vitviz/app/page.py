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


SHARED_CHOICES = (  # one choice shown on two tabs, as (tab, control) pairs (the token has one control, Explore's)
    (("explore", "layer"), ("steps", "which_block")),
    (("explore", "target"), ("compare", "target")),
    (("explore", "method"), ("compare", "method")),
    (("explore", "fusion"), ("compare", "fusion")),
    (("explore", "discard"), ("compare", "discard")),
)


def copies(tab: str, own: dict, explore: dict) -> dict:
    """`tab`'s controls that show a choice Explore shares (SHARED_CHOICES), each with Explore's control."""
    return {own[name]: explore[made] for (t, made), (other, name) in SHARED_CHOICES if other == tab and t == "explore"}
