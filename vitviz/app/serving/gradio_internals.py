"""Every use vitviz makes of Gradio's internals, in one place: each is here because Gradio has no public way to
do it, and tests/test_gradio_internals.py exercises each against the installed Gradio, by name, so that an
upgrade that changes one fails there rather than quietly in a visitor's reply.

- `HookedBlocks`: the Blocks' steps around an event (`validate_inputs`, `preprocess_data`,
  `postprocess_data`), given vitviz names (`check_call`, `check_values`, `before_reply`, `refused_values`)
  that vitviz.app.serving.public.PublicBlocks fills in: a sentence for a malformed call, a file value outside
  the uploads refused, room made in the bounded cache before a reply is written;
- an event's function, inputs, API name and browser-side code (`BlockFunction`): what the sentences name;
- whether an input is left out of the API (a State) and the data model a value must fit;
- the files Gradio tracks (`temp_file_sets`, `upload_file_set`, components' `keep_in_cache`), a component's
  cache folder and a step before its `postprocess`: the cache's bound (gradio_files) and the pictures written
  straight into it (widgets);
- the folder of uploads and the app's allowed folders;
- the order of Gradio's static paths (`serve_first`: the served pictures' folder checked first);
- the form in which Gradio sends an output, a served file's URL among it (`replying_as_sent`: an endpoint's
  reply made on its own thread, not by Gradio's postprocessing on the event loop);
- the text of gradio_client's refusal of an unknown keyword (`UNKNOWN_KEYWORD`), turned into a sentence;
- which endpoints Gradio's MCP server lists as tools (`tools_only`: the others are marked as no tool), the
  folder it writes an agent's inline image to (`prepare_mcp`), and a refusal's text as the sentence itself
  (`Sentence`, raised by `HookedBlocks.process_api`), which is what an MCP client reads.

Public mechanisms are used wherever Gradio has one: `gr.set_static_paths` (the served pictures, then put first),
`app_kwargs` (the API's own refusals), `gr.State(delete_callback=...)`, `demo.unload`, `delete_cache`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable

import gradio as gr
import numpy as np
from gradio.blocks import BlockFunction
from gradio.data_classes import FileData, GradioModel, GradioRootModel, _StaticFiles
from gradio.route_utils import API_PREFIX
from gradio.utils import get_upload_folder

__all__ = ["BlockFunction", "HookedBlocks", "UNKNOWN_KEYWORD"]

HOOKS = {  # the Blocks' steps HookedBlocks overrides, with the parameters it passes on
    "validate_inputs": ("block_fn", "inputs"),
    "preprocess_data": ("block_fn", "inputs", "state", "explicit_call"),
    "postprocess_data": ("block_fn", "predictions", "state"),
}
UNKNOWN_KEYWORD = re.compile(r"Parameter `([^`]+)` is not a valid key-word argument")


class HookedBlocks(gr.Blocks):
    """A Blocks whose steps around every event call four plain methods, which a subclass fills in."""

    def check_call(self, block_fn: BlockFunction, inputs: list) -> None:
        """Before Gradio checks a call's values: raise gr.Error with a sentence to refuse it (here: nothing)."""

    def check_values(self, block_fn: BlockFunction, inputs: list) -> None:
        """Before any value is read or moved: raise gr.Error to refuse it (here: nothing)."""

    def refused_values(self, block_fn: BlockFunction, inputs: list) -> str:
        """The sentence for values Gradio could not read (its own message names Python objects)."""
        return "One of the values sent cannot be used."

    async def before_reply(self, block_fn: BlockFunction, predictions: list | dict) -> None:
        """Before Gradio writes a reply's files (here: nothing)."""

    def validate_inputs(self, block_fn: BlockFunction, inputs: list) -> None:
        self.check_call(block_fn, inputs)
        super().validate_inputs(block_fn, inputs)

    async def preprocess_data(
        self, block_fn: BlockFunction, inputs: list, state: object, explicit_call: bool = False
    ) -> list:
        self.check_values(block_fn, inputs)
        try:
            return await super().preprocess_data(block_fn, inputs, state, explicit_call)
        except gr.Error:
            raise
        except Exception:  # noqa: BLE001 - a framework message about the caller's values
            raise gr.Error(self.refused_values(block_fn, inputs)) from None

    async def postprocess_data(self, block_fn: BlockFunction, predictions: list | dict, state: object) -> list:
        await self.before_reply(block_fn, predictions)
        return await super().postprocess_data(block_fn, predictions, state)

    async def process_api(self, *args, **kwargs) -> dict:
        """An event's refusal raised as a `Sentence`: Gradio's error writes its message's repr where a caller
        reads the error as text (an MCP client's result), a Sentence the message itself."""
        try:
            return await super().process_api(*args, **kwargs)
        except Sentence:
            raise
        except gr.Error as e:
            raise Sentence(e.message, duration=e.duration, visible=e.visible, title=e.title) from None


class Sentence(gr.Error):
    """A gr.Error whose text is its message, as written."""

    def __str__(self) -> str:
        return str(self.message)


def prepare_mcp() -> None:
    """Where Gradio's MCP server writes an image an agent sends inline (a data URL): the folder of uploads, with
    every other upload (checked, bounded and deleted with them), instead of the folder it read at import. Its
    warning about endpoints with a State input is not said: those are the page's, which are no tools."""
    import warnings

    import gradio.mcp

    gradio.mcp.DEFAULT_TEMP_DIR = get_upload_folder()
    warnings.filterwarnings("ignore", message="This MCP server includes a tool that has a gr.State input")


def tools_only(blocks: gr.Blocks, tools: set[Callable]) -> None:
    """Let Gradio's MCP server list as tools the endpoints of `tools` alone: it lists every endpoint of the API
    whose function is unmarked or marked "tool" (as gr.mcp.tool marks one), so the others' functions are marked
    otherwise; they stay in the API."""
    for block_fn in blocks.fns.values():
        if block_fn.api_name and block_fn.fn is not None and block_fn.fn not in tools:
            block_fn.fn._mcp_type = "api"


def mcp_tool_names(blocks: gr.Blocks) -> dict[str, str]:
    """{tool name: endpoint} as Gradio's MCP server names this app's tools (None-free once it is launched with
    MCP; {} otherwise)."""
    server = getattr(blocks, "mcp_server_obj", None)
    return dict(server.tool_to_endpoint) if server is not None else {}


def event_fn(block_fn: BlockFunction) -> Callable:
    return block_fn.fn


def event_inputs(block_fn: BlockFunction) -> list:
    return list(block_fn.inputs)


def api_name(block_fn: BlockFunction) -> str | None:
    """The event's API name, or None for one the API does not list."""
    return block_fn.api_name or None


def runs_js(block_fn: BlockFunction) -> bool:
    """Whether the event runs code in the browser (its values may not be what the API lists)."""
    return bool(getattr(block_fn, "js", None))


def hidden_from_api(block: gr.components.Component) -> bool:
    """Whether an input is left out of the API's values (a State)."""
    return bool(getattr(block, "skip_api", False))


def data_model(block: gr.components.Component) -> type | None:
    """The pydantic model a value of this component must fit (None: any value)."""
    return getattr(block, "data_model", None)


def tracked_sets(blocks: gr.Blocks) -> list[set]:
    """The sets of files Gradio keeps in its cache for these Blocks: replies' copies, then uploads."""
    return [*blocks.temp_file_sets, upload_set(blocks)]


def upload_set(blocks: gr.Blocks) -> set:
    return getattr(blocks, "upload_file_set", set())


def kept_in_cache(blocks: gr.Blocks) -> set:
    """The files Gradio keeps for the page itself (its examples' copies)."""
    keep = set()
    for component in blocks.blocks.values():
        keep.update(getattr(component, "keep_in_cache", set()))
    return keep


def cache_folder(component: gr.components.Component) -> str:
    """The folder Gradio keeps this component's files in."""
    return component.GRADIO_CACHE


def before_postprocess(component: gr.components.Component, step: Callable[[object], object]) -> None:
    """Run `step` on every value the component is about to post-process (Gradio has no hook for it)."""
    plain = component.postprocess

    def postprocess(value: object) -> object:
        return plain(step(value))

    component.postprocess = postprocess


def upload_folder() -> str:
    """The folder Gradio keeps uploads in (it follows GRADIO_TEMP_DIR)."""
    return get_upload_folder()


def allowed_folders(blocks: gr.Blocks) -> list[str]:
    """The folders the app was launched allowing (`launch(allowed_paths=...)`)."""
    return list(getattr(blocks, "allowed_paths", []) or [])


def serve_first(folder: str | os.PathLike) -> None:
    """Serve `folder` as it is (`gr.set_static_paths`) and make it the first of Gradio's static paths: Gradio
    checks each file of every reply against them in turn, resolving both paths each time, and the icons it
    registers itself come first otherwise (two deep paths resolved for each picture, before ours)."""
    gr.set_static_paths([folder])
    paths = _StaticFiles.all_paths
    paths.insert(0, paths.pop())


FILE_ROUTE = f"{API_PREFIX}/file="  # where Gradio serves a file it may serve (a static path's, its cache's)
PLAIN_OUTPUTS = (gr.Label, gr.Markdown, gr.JSON, gr.Textbox, gr.Number, gr.HTML)  # values without files


def answerable_as_sent(outputs: list) -> bool:
    """Whether every output is a picture or a plain value (no other files, no state)."""
    return all(isinstance(block, (gr.Image, *PLAIN_OUTPUTS)) for block in outputs)


def replying_as_sent(
    fn: Callable, outputs: list, served: Callable[[str], bool], files: Callable[[dict], dict[str, str]]
) -> Callable:
    """`fn` answering its outputs in the form Gradio sends them, for an event wired with postprocess=False.

    Gradio's own postprocessing of a reply runs each output's `postprocess` on a thread of its own: a hop from the
    event loop, which every caller shares, to a worker and back for each of /explain's eleven outputs. Here each
    output is made on the event's own thread instead (Gradio still checks each file of the reply against its
    static paths, as it does either way): a picture file `served` (a static path's,
    vitviz.app.serving.picfiles) is named by its URL as Gradio names it, a picture given as an array is first
    written by `files` ({name: array} -> {name: served file}), and a plain output (a label, Markdown) goes
    through its component's own postprocess. Only for outputs that `answerable_as_sent` says can be."""
    if not answerable_as_sent(outputs):
        raise TypeError("only pictures and plain outputs can be answered as sent")

    def as_sent(block: gr.components.Component, value: object) -> object:
        if value is None or (isinstance(value, dict) and value.get("__type__") == "update"):
            return value
        if isinstance(block, gr.Image):
            if not (isinstance(value, str) and served(value)):
                raise TypeError("a picture answered as sent must be a file the app serves")
            return FileData(path=value, url=FILE_ROUTE + value, orig_name=os.path.basename(value)).model_dump()
        out = block.postprocess(value)
        return out.model_dump() if isinstance(out, (GradioModel, GradioRootModel)) else out

    @functools.wraps(fn)
    def answer(*args: object, **kwargs: object) -> object:
        values = fn(*args, **kwargs)
        values = [values] if len(outputs) == 1 else list(values)
        arrays = {
            str(i): v
            for i, (b, v) in enumerate(zip(outputs, values, strict=True))
            if isinstance(b, gr.Image) and isinstance(v, np.ndarray)
        }
        for i, path in files(arrays).items() if arrays else ():
            values[int(i)] = path
        sent = tuple(as_sent(block, value) for block, value in zip(outputs, values, strict=True))
        return sent[0] if len(outputs) == 1 else sent

    return answer
