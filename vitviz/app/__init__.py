"""The Gradio app: one module per tab, a shell that builds and wires them.

    shell.py      the model menu, the visitor's state, the tabs, launch
    models.py     which models there are and where each comes from
    inputs.py     what visitors send, made safe (images, numbers, choices)
    explore.py    the Explore tab       model_tab.py  the Model tab
    train_tab.py  the Train tab         compare.py    the Compare tab
    steps_tab.py  the Step by step tab  removal_tab.py the Take patches away tab
    cache.py, widgets.py                small shared pieces
"""
from .shell import build_demo, launch

__all__ = ["build_demo", "launch"]
