"""The app's shell: the model menu and checkpoint upload above the tabs, the visitor's state, launch.

Each tab (explore, model_tab, train_tab, compare) builds its own layout and wires its
own events; this file builds them in order and wires only what crosses tabs: a model
change updates Explore's controls, then the Model tab, then Explore's pictures.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from . import compare, explore, model_tab, train_tab
from .. import scratch
from . import limits
from .models import MODEL_CHOICES, Visitor, release_session, release_state, upload_checkpoint

ASSETS = Path(__file__).resolve().parent.parent / "assets"
INTRO = """# vitviz: see how a Vision Transformer sees
Pick or upload an image. The ViT cuts it into patches (left), predicts, and shows where its attention goes:
**attention rollout** (attention through all layers, Abnar & Zuidema 2020), **gradient rollout**
(class-specific relevance, Chefer et al. 2021), and every layer and head.
**Click a patch** on the model's input to see what that patch attends to."""
CSS = """
.vv-progress {position: relative; height: 22px; background: #eee; border-radius: 6px; overflow: hidden;}
.vv-bar {height: 100%; background: linear-gradient(90deg, #f97316, #fb923c); transition: width 0.4s;}
.vv-progress span {position: absolute; left: 8px; top: 2px; font-size: 13px; color: #222;}
.vv-pic [data-testid="block-label"] {position: static !important; margin-bottom: 4px;}
#input-image img {width: 100%; height: 100%; object-fit: contain; image-rendering: pixelated;}
"""


@dataclass
class Shell:
    """What every tab may use: the visitor's state, the model menu, the tabs, the hidden /predict button."""
    state: gr.State
    model_dd: gr.Dropdown
    tabs: gr.Tabs
    hidden_predict: gr.Button


def build_demo() -> gr.Blocks:
    scratch.prune_all()  # what an earlier run of the app left
    with gr.Blocks(title="vitviz: see how a ViT sees", delete_cache=limits.delete_cache()) as demo:
        state = gr.State(Visitor(), time_to_live=limits.get("VITVIZ_STATE_TTL_S"), delete_callback=release_state)
        gr.Markdown(INTRO)
        with gr.Row():
            model_dd = gr.Dropdown(MODEL_CHOICES, value="cifar10", label="Model", scale=3, elem_id="model-dd")
            with gr.Accordion("Upload a checkpoint (.safetensors + .json)", open=False):
                ckpt_files = gr.File(file_count="multiple", file_types=[".safetensors", ".json"],
                                     label="Checkpoint files")
                ckpt_status = gr.Markdown()
        with gr.Tabs() as tabs:
            with gr.Tab("Explore", id="explore"):
                ex = explore.build()
            with gr.Tab("Model", id="model"):
                mt = model_tab.build()
            with gr.Tab("Train", id="train"):
                tr = train_tab.build()
            with gr.Tab("Compare", id="compare"):
                cp = compare.build()
        shell = Shell(state, model_dd, tabs, gr.Button(visible=False))

        explain_event = explore.wire(ex, shell)
        model_tab.wire(mt, shell)
        train_tab.wire(tr, shell, [cp["a"], cp["b"]], demo)
        compare.wire(cp, shell)

        model_view = model_tab.view_event(mt, shell)
        model_dd.change(**explore.model_changed(ex, shell), api_visibility="private").then(
            **model_view).then(**{**explain_event, "api_visibility": "private"})
        ckpt_files.upload(upload_checkpoint, [ckpt_files, state], [ckpt_status, state, model_dd],
                          api_visibility="private")
        demo.load(**explore.model_changed(ex, shell), api_visibility="private")
        first = explore.examples_default()
        if first:
            demo.load(lambda: first, None, ex["image"], api_visibility="private")
        demo.load(**model_view)
        demo.unload(release_session)
    return demo


def launch(demo: gr.Blocks | None = None, **kw):
    demo = demo or build_demo()
    demo.queue(default_concurrency_limit=2, max_size=limits.queue_size())
    kw.setdefault("allowed_paths", [str(ASSETS)])
    kw.setdefault("show_error", True)
    kw.setdefault("css", CSS)
    kw.setdefault("max_file_size", limits.upload_limit())
    return demo.launch(**kw)
