"""The app's shell: the title, the model menu and checkpoint upload above the tabs, the visitor's state, launch.

Each tab (vitviz.app.tabs: explore, steps, removal, model, train, compare) builds its own layout and wires its
own events; this module builds them in order and wires only what crosses tabs: one set of choices shown on
several tabs, a new model (Explore's controls fitted, then the Model tab, then the pictures), the drawing
style, the page opening on a link's view.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import time
import weakref
from pathlib import Path

import gradio as gr

from vitviz.app import choices, link, scrolled, switch, tools
from vitviz.app.handlers import shared, style_switch
from vitviz.app.menu import look_at, model_choices, release_session, release_state, upload_checkpoint
from vitviz.app.page import SHARED_CHOICES, Shell
from vitviz.app.serving import gradio_files, gradio_internals, limits
from vitviz.app.serving.places import PLACES
from vitviz.app.serving.public import APP_KWARGS, PublicBlocks
from vitviz.app.state import Visitor
from vitviz.app.tabs import compare, explore, explore_layout
from vitviz.app.tabs import model as model_tab
from vitviz.app.tabs import removal as removal_tab
from vitviz.app.tabs import steps as steps_tab
from vitviz.app.tabs import train as train_tab
from vitviz.models.hub import import_families
from vitviz.pictures.style import PHONE_PX
from vitviz.runtime import scratch
from vitviz.training.stops import STOPS

ASSETS = Path(__file__).resolve().parent.parent / "assets"
INTRO = """# vitviz: how a Vision Transformer sees
Its patches attend to each other: pick an image, then a patch or CLS, and follow the attention."""
CSS = """
.vv-progress {position: relative; height: 22px; background: #eee; border-radius: 6px; overflow: hidden;}
.vv-bar {height: 100%; background: linear-gradient(90deg, #f97316, #fb923c); transition: width 0.4s;}
.vv-bar.vv-stopped {background: #9ca3af;}
.vv-progress span {position: absolute; left: 8px; top: 2px; font-size: 13px; color: #222;}
.vv-pic [data-testid="block-label"] {position: static !important; margin-bottom: 4px;}
.vv-input img {width: 100%; height: 100%; object-fit: contain; image-rendering: pixelated;}
.vv-pic .image-container, .vv-pic button, .vv-pic .image-frame {height: auto !important;}
.vv-pic img {height: auto !important; max-height: none !important; width: auto !important; max-width: 100%;
             margin: 0 auto; display: block;}
@media (max-width: 700px) {  /* a phone: the wide grids keep their size (their labels readable) and scroll */
  .vv-wide .image-container {overflow-x: auto; display: block !important;}
  .vv-wide button, .vv-wide .image-frame {display: block !important; width: max-content !important;}
  .vv-wide img {max-width: none !important; margin: 0 !important;}
  #class-menus {flex-direction: column !important;}  /* the method's and the class's names whole */
  #step-controls input[type=range], #step-controls .head + div {display: none;}  /* the number box is enough */
  #step-controls {gap: 2px !important; padding: 2px 0 !important;}
  #step-controls .block {padding: 4px 8px !important;}
  #step-controls label span {font-size: 12px !important; margin-bottom: 2px !important;}
  .vv-wide::before {content: "Wider than the screen: scroll it sideways →"; display: block; font-size: 13px;
                    color: #9a3412; padding: 2px 8px;}  /* the picture says it scrolls */
  .vv-wide .image-container::-webkit-scrollbar {height: 12px;}
  .vv-wide .image-container::-webkit-scrollbar-thumb {background: #f97316; border-radius: 6px;}
  .vv-wide .image-container::-webkit-scrollbar-track {background: #fde2cc; border-radius: 6px;}
}
.vv-help, .vv-help p {font-size: 13px !important; line-height: 1.35 !important; color: #444; margin: 0 !important;}
.gradio-container {overflow: clip visible !important;}  /* clipped, not a scroll box: sticky bars stick */
#step-controls {position: sticky; top: 0; z-index: 30; background: var(--background-fill-primary, #fff);
  box-shadow: 0 4px 6px -4px rgba(0,0,0,0.25); padding: 4px 0;}
#step-following p {font-size: 15px; margin: 0;}
.vv-step-text p {font-size: 15px !important; line-height: 1.45 !important;}
.vv-note p {font-size: 14px !important; margin: 0 !important; color: #9a3412;}
#top5 .confidence-set {margin-bottom: 0 !important; padding: 1px 0 !important;}
#input-col {gap: 8px;}
#fusion label {padding-left: 6px !important; padding-right: 6px !important;}  /* three on one line */
#fusion .wrap {gap: 4px !important;}
#top5 .container {padding-top: 0 !important;}
#top5 dt, #top5 dd {font-size: 14px;}
#top5 meter {height: 5px;}
#app-intro h1 {font-size: 22px; margin: 0 0 2px 0;}
#app-head {gap: 12px;}
#model-dd {min-height: 0;}
#app-intro p {font-size: 14px; margin: 0;}
#large-type {padding: 2px 8px;}
.vv-large .prose, .vv-large label span, .vv-large .vv-help p, .vv-large button, .vv-large dt,
.vv-large dd {font-size: 18px !important;}
.vv-large #app-intro h1 {font-size: 24px !important;}  /* the page's own title stays one line */
.vv-large #app-intro p {font-size: 15px !important;}
#numbers {padding: 2px 6px !important;}
"""
LARGE_TYPE_JS = (
    "(on) => { for (const e of document.querySelectorAll('.gradio-container .contain > *')) "
    "e.classList.toggle('vv-large', on); return on; }"
)  # inside .contain: Gradio scopes the CSS there


# a class menu's text selected when it is clicked: what the visitor types replaces it and filters the classes
# (Gradio's menu would otherwise insert the typing into "predicted class")
TYPING_FILTERS_JS = (
    "() => { document.addEventListener('focusin', (e) => { const t = e.target; "
    "if (t.matches && t.matches('#target input, #compare-target input')) t.select(); }); }"
)


def build_demo() -> gr.Blocks:
    scratch.prune_all()  # what an earlier run of the app left
    gradio_files.own_folder()  # Gradio's files of this process in a folder of its own, before any component
    import_families()  # before the first request: concurrent first imports can deadlock
    with PublicBlocks(title="vitviz: see how a ViT sees", delete_cache=limits.delete_cache(), fill_width=True) as demo:
        state = gr.State(Visitor(), time_to_live=limits.get("VITVIZ_STATE_TTL_S"), delete_callback=release_state)
        head = _head()
        with gr.Tabs(overflow_behavior="wrap") as tabs:  # a phone: every tab in view, on two rows
            pages, parts = {}, {}
            for key, title, build in TABS:
                with gr.Tab(title, id=key) as pages[key]:
                    parts[key] = build()
        shell = Shell(state, head["model_dd"], head["model_note"], tabs, gr.Button(visible=False))
        _wire(demo, shell, head, pages, parts)
    return demo


TABS = (  # (id, title, the function that lays it out)
    ("explore", "Explore", explore_layout.build),
    ("steps", "Step by step", steps_tab.build),
    ("take-away", "Take patches away", removal_tab.build),
    ("model", "Model", model_tab.build),
    ("train", "Train", train_tab.build),
    ("compare", "Compare", compare.build),
)


def _head() -> dict:
    """Above the tabs: the title and Large type, the model menu and its note, the checkpoint upload."""
    c = {}
    with gr.Row(equal_height=False, elem_id="app-head"):
        with gr.Column(scale=1, min_width=360):
            gr.Markdown(INTRO, elem_id="app-intro")
            c["large"] = gr.Checkbox(False, label="Large type (for a projector)", elem_id="large-type", container=False)
        with gr.Column(scale=0, min_width=380):
            c["model_dd"] = gr.Dropdown(
                model_choices(),
                value="cifar10",
                label="Model (or type a timm ViT's name, or a Hub id)",
                elem_id="model-dd",
                allow_custom_value=True,
            )
            c["model_note"] = gr.Markdown(elem_classes=["vv-note"], elem_id="model-note")
        with gr.Column(scale=0, min_width=300):
            with gr.Accordion("Upload a checkpoint (.safetensors + .json)", open=False):
                c["ckpt_files"] = gr.File(
                    file_count="multiple", file_types=[".safetensors", ".json"], label="Checkpoint files"
                )
            c["ckpt_status"] = gr.Markdown(elem_classes=["vv-note"], elem_id="ckpt-status")
            c["link"] = gr.Button("Copy a link to this view", size="sm", elem_id="link-btn")
            c["link_url"] = gr.Textbox(
                show_label=False, elem_id="link-url", container=False, visible=False, max_lines=1
            )  # shown with the link once made
    return c


def _wire(demo: gr.Blocks, shell: Shell, head: dict, pages: dict, parts: dict) -> None:
    """Each tab's own events, then what crosses tabs: one set of choices, a new model, the drawing style."""
    tools.wire()  # first: the agents' tools keep their plain names
    ex, st, cp, mt = parts["explore"], parts["steps"], parts["compare"], parts["model"]
    state = shell.state
    explain_event = {**explore.wire(ex, shell), "api_visibility": "private"}
    choices.wire(ex, shell)
    model_tab.wire(mt, shell)
    follows = {  # what redraws each tab (all but Explore only while looked at)
        "explore": explain_event,
        "steps": steps_tab.wire(st, shell, ex, pages["steps"]),
        "take-away": removal_tab.wire(
            parts["take-away"], shell, ex["image"], pages["take-away"], (ex["labels"], ex["template"])
        ),
        "compare": compare.wire(cp, shell, ex, pages["compare"]),
    }
    redraws = list(follows.values())
    for pair in SHARED_CHOICES:  # one choice per visitor, set on the tab where it is made, shown on the other
        for (tab, name), (other, copy) in (pair, pair[::-1]):
            control = parts[tab][name]
            control.input(**shared(follows[tab], control, [parts[other][copy]]))
    pages["explore"].select(**{**explain_event, "fn": explore.open_tab})  # Step by step may have moved the token
    for name in ("model", "train"):
        pages[name].select(look_at(name), state, state, queue=False, api_visibility="private")
    model_view = model_tab.view_event(mt, shell)
    pages["model"].select(**model_view)  # drawn in the visitor's style of the moment
    train_tab.wire(parts["train"], shell, [cp["a"], cp["b"]], demo)
    width = gr.Number(visible=False)  # the browser's width, for a phone's pictures
    head["large"].change(None, head["large"], None, js=LARGE_TYPE_JS)
    for control, name in ((head["large"], "large"), (ex["numbers"], "numbers"), (width, "narrow")):
        event = control.change(style_switch(name), [control, state], state, api_visibility="private")
        for redraw in [*redraws, model_view]:  # every picture drawn again in the new style
            event = event.then(**redraw)
    new_model = shell.model_dd.change(**switch.model_changed(ex, shell), api_visibility="private")
    new_model.then(switch.gallery_mark, state, ex["examples"], api_visibility="private", queue=False).then(
        **model_view
    ).then(**explain_event)
    head["ckpt_files"].upload(
        upload_checkpoint,
        [head["ckpt_files"], state],
        [head["ckpt_status"], state, shell.model_dd],
        api_visibility="private",
    )  # a refused file: a sentence beside it, the menu untouched
    _open(demo, shell, head, ex, model_view, explain_event)
    demo.load(None, head["large"], None, js=LARGE_TYPE_JS)
    demo.load(None, None, None, js=TYPING_FILTERS_JS)
    demo.load(None, None, None, js=scrolled.JS)
    phone = f"() => (window.innerWidth <= {PHONE_PX} ? window.innerWidth : null)"  # a wide screen changes nothing
    demo.load(None, None, width, js=phone)
    demo.unload(release_session)
    gradio_internals.tools_only(demo, {fn for fn, _ in tools.TOOLS.values()})


def _open(demo: gr.Blocks, shell: Shell, head: dict, ex: dict, model_view: dict, explain_event: dict) -> None:
    """The page opening: a link's view set first (vitviz.app.link), the visitor's record made to follow what the
    page shows, the controls fitted to the model, then every picture drawn; and *Copy a link to this view*."""
    state, wanted = shell.state, gr.JSON(visible=False)  # what a link asks of the model and its controls
    outputs = [{"wanted": wanted, "note": shell.model_note}.get(k) or ex[k] for k in link.OPENED]
    load = demo.load(link.opened, [shell.model_dd, state], outputs, api_visibility="private")
    load = load.then(
        choices.opening, [ex["image"], wanted, head["large"], ex["numbers"], state], state, api_visibility="private"
    )
    changed = switch.model_changed(ex, shell)
    fitted = {**changed, "fn": link.fit, "inputs": [wanted, *changed["inputs"][1:]]}
    load.then(**fitted, api_visibility="private").then(
        switch.gallery_mark, state, ex["examples"], api_visibility="private", queue=False
    ).then(**model_view).then(**explain_event)
    asked = [shell.model_dd, ex["target"], ex["method"], ex["layer"], ex["head"], ex["patch"], ex["fusion"]]
    head["link"].click(
        link.view_query,
        [*asked, ex["discard"], ex["image"], state, ex["labels"], ex["template"]],
        head["link_url"],
        api_visibility="private",
    ).then(None, head["link_url"], head["link_url"], js=link.COPY_JS, queue=False, api_visibility="private")


def _exit_normally(*_):
    """SIGTERM or Ctrl-C: stop every run and let it finish its step and its short validation (at most
    STOP_WAIT_S), delete what this process wrote (the app's folders, Gradio's cached files), and exit 0
    at once. The exit skips the interpreter's slow teardown, which could abort on a thread still in torch
    ("terminate called without an active exception"); a second signal during it is ignored."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if STOPS.stop_all():
            deadline = time.monotonic() + STOP_WAIT_S
            while PLACES.counts() != (0, 0) and time.monotonic() < deadline:
                time.sleep(0.1)
        for demo in list(_launched):
            try:
                demo.close()
            except Exception:  # noqa: BLE001 - closing is best effort; the files go below either way
                pass
        _remove_files()
    finally:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


STOP_WAIT_S = 20.0
_launched: weakref.WeakSet = weakref.WeakSet()  # the apps this process serves


def _remove_files() -> None:
    """What this process wrote: the files each app cached for visitors, Gradio's folder of this process, the
    app's own folders (runs, exports, pictures)."""
    for demo in list(_launched):
        gradio_files.remove_all(demo)
    gradio_files.remove_own()
    scratch.remove_own()


def launch(demo: gr.Blocks | None = None, **kw) -> tuple:
    """Serve the app. Gradio's cached files are kept under VITVIZ_CACHE_MAX_MB while it runs, and removed with
    the app's own folders when it exits (Ctrl-C, SIGTERM, demo.close(), the end of the process)."""
    demo = demo or build_demo()
    demo.queue(default_concurrency_limit=2, max_size=limits.queue_size())
    gradio_internals.prepare_mcp()  # an agent's inline image: an upload like any other
    if isinstance(demo, PublicBlocks):
        demo.bound_cache()
    if not kw.get("prevent_thread_lock") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_normally)  # a Space stopping the app
        signal.signal(signal.SIGINT, _exit_normally)  # Ctrl-C at the terminal: the same clean exit
    if not _launched:
        atexit.register(_remove_files)
    _launched.add(demo)
    kw.setdefault("allowed_paths", [str(ASSETS)])
    kw.setdefault("show_error", True)
    kw.setdefault("css", CSS + scrolled.CSS)
    kw.setdefault("max_file_size", limits.upload_limit())
    kw.setdefault("app_kwargs", dict(APP_KWARGS))  # a copy: Gradio writes its MCP lifespan into the one it gets
    return demo.launch(**kw)
