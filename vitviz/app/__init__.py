"""The Gradio app: one module per tab, a shell that builds the tabs and wires what crosses them.

    shell.py          the model menu, the visitor's state, the tabs, launch
    serve.py          `vitviz app`: the command that serves it
    menu.py           which models there are, where each comes from; the visitor's own
    inputs.py         what visitors send, made safe (images, numbers, choices)
    explore_tab.py    Explore               steps_tab.py    Step by step
    removal_tab.py    Take patches away     model_tab.py    Model
    train_tab.py      Train                 compare_tab.py  Compare
    public.py, limits.py, places.py, gradio_files.py, picfiles.py, activity.py: a public app's bounds
    cache.py, widgets.py                    small shared pieces

`build_demo` and `launch` are imported on first use, so `serve` can set the environment Gradio reads
before Gradio is imported.
"""


def __getattr__(name: str):
    if name in ("build_demo", "launch"):
        from vitviz.app import shell

        return getattr(shell, name)
    raise AttributeError(f"module 'vitviz.app' has no attribute {name!r}")


__all__ = ["build_demo", "launch"]
