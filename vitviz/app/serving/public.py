"""A Gradio Blocks that answers a malformed API call with a sentence, not a framework message.

Gradio checks a call's values before any handler runs, and its own messages name Python
objects, pydantic's rules and web pages ("1 validation error for ImageData ...", "didn't
receive enough input values ... <gradio.components.image.Image object at 0x...>"). `PublicBlocks`
says instead what the endpoint takes and what was wrong: how many values it takes and
their names, and which value is not of its kind (an image that is a bare string). The
app's whole queue being full gets a sentence too (`busy_sentence`), in the error's detail, which
gradio_client shows.
"""

from __future__ import annotations

import inspect
import os

import anyio
import gradio as gr
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.middleware import Middleware

from vitviz.app.serving import gradio_files
from vitviz.app.serving import gradio_internals as internals
from vitviz.app.serving.gradio_internals import BlockFunction, HookedBlocks


def _names(block_fn) -> list[str]:
    """The API's parameter names for an event's inputs, in order (state and hidden inputs left out)."""
    try:
        params = [
            p.name
            for p in inspect.signature(internals.event_fn(block_fn)).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    inputs = internals.event_inputs(block_fn)
    names = params + [f"value {i + 1}" for i in range(len(params), len(inputs))]
    return [n for n, b in zip(names, inputs) if not internals.hidden_from_api(b)]


LATER = ("labels", "template")  # parameters the API gained later: a call written before them may leave them out


def _fill_later(block_fn: BlockFunction, inputs: list) -> None:
    """A call that sends every value but the trailing ones in LATER gets None (their default) for those, and for
    the state (as Gradio does for a call that sends every value)."""
    every = internals.event_inputs(block_fn)
    if not internals.api_name(block_fn) or len(inputs) >= len(every):
        return
    names, blocks = _names(block_fn), [b for b in every if not internals.hidden_from_api(b)]
    left_out = len(names) - len(inputs)
    if left_out <= 0 or not all(n in LATER for n in names[len(names) - left_out :]):
        return
    sent = iter(inputs + [None] * left_out)
    full = [None if internals.hidden_from_api(b) else next(sent) for b in every]
    if len(full) == len(every) and len(blocks) == len(names):
        inputs[:] = full


def _endpoint(block_fn: BlockFunction) -> str:
    name = internals.api_name(block_fn)
    return f"/{name}" if name else "This event"


def count_sentence(block_fn: BlockFunction, got: int) -> str:
    names = _names(block_fn)
    return (
        f"{_endpoint(block_fn)} takes {len(names)} value(s), in this order: {', '.join(names)}; this call "
        f"sent {got}. Leave a value out by name (gradio_client fills in its default), not by position."
    )


def kind_sentence(block_fn: BlockFunction, inputs: list) -> str:
    """Which value is not of the kind its component takes, found by checking each against its data model."""
    names = _names(block_fn)
    every = internals.event_inputs(block_fn)
    visible = [b for b in every if not internals.hidden_from_api(b)]
    values = [v for v, b in zip(inputs, every) if not internals.hidden_from_api(b)]
    for name, block, value in zip(names, visible, values):
        model = internals.data_model(block)
        if model is None or value is None:
            continue
        try:
            model.model_validate(value, context={"validate_meta": True})
        except Exception:  # noqa: BLE001 - any refusal of this value is what we are looking for
            if isinstance(block, (gr.Image, gr.File)):
                return (
                    f"{_endpoint(block_fn)}: '{name}' must be a file (with gradio_client: handle_file(path or "
                    f'URL); over REST: {{"path": ...}} or {{"url": ...}}), not {_show(value)}.'
                )
            return f"{_endpoint(block_fn)}: '{name}' is not a value its control accepts ({_show(value)})."
    return f"{_endpoint(block_fn)}: one of the values sent cannot be used; see the API page for what each takes."


FILES = (gr.Image, gr.File, gr.UploadButton)


def outside_uploads(block_fn: BlockFunction, inputs: list, readable: list[str]) -> str:
    """The sentence for a file value naming a path on the server outside `readable` (the folder of uploads and
    the app's own allowed folders), or "". Gradio checks a file sent with its type tag; one sent as a bare
    {"path": ...} would otherwise be read wherever it points, and its picture sent back."""
    roots = [os.path.realpath(r) for r in readable]
    for name, block, value in zip(_names_all(block_fn), internals.event_inputs(block_fn), inputs):
        if not isinstance(block, FILES):
            continue
        for item in value if isinstance(value, list) else [value]:
            path = item.get("path") if isinstance(item, dict) else None
            if isinstance(path, str) and path.startswith(("http://", "https://")):
                continue  # a URL: Gradio fetches it into its cache (guarded against local addresses) before use
            if isinstance(path, str) and not _within(os.path.realpath(path), roots):
                return (
                    f"{_endpoint(block_fn)}: '{name}' must be a file uploaded to this app (with gradio_client: "
                    'handle_file(path or URL); over REST: upload it to /gradio_api/upload first, then send {"path": '
                    "the path it answers}); a path elsewhere on the server is never read."
                )
    return ""


def _within(path: str, roots: list[str]) -> bool:
    """Whether the resolved `path` is one of the resolved `roots` or inside one."""
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _names_all(block_fn: BlockFunction) -> list[str]:
    """A name for each of an event's inputs, hidden ones included, in order."""
    shown = iter(_names(block_fn))
    every = internals.event_inputs(block_fn)
    return [f"value {i + 1}" if internals.hidden_from_api(b) else next(shown) for i, b in enumerate(every)]


def _show(value) -> str:
    text = repr(value)
    return f"a {type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


def call_refused(request: gr.Request | None, exc: Exception) -> JSONResponse:
    """FastAPI's handler for a TypeError or ValueError that a route (not a handler: those become gr.Error)
    raised while reading a call, as Gradio's keyword API does for an unknown parameter: a 400 with a sentence
    instead of a bare 500."""
    text = str(exc)
    found = internals.UNKNOWN_KEYWORD.search(text)
    api = request.url.path.rstrip("/").rsplit("/", 1)[-1]
    if found:
        sentence = (
            f"/{api} has no parameter called '{found.group(1)[:40]}'; the app's API page (\"Use via API\" "
            "at the foot of the page) lists its parameters."
        )
    else:
        sentence = f"This call to /{api} could not be read; the app's API page lists what it takes."
    return JSONResponse(status_code=400, content={"detail": sentence, "error": sentence})


def body_refused(request: gr.Request, exc: Exception) -> JSONResponse:
    """FastAPI's handler for a request whose body is not what the route reads (an empty body, `data` missing or
    not a list): a 422 with a sentence instead of pydantic's account of its rules."""
    api = request.url.path.rstrip("/").rsplit("/", 1)[-1]
    sentence = (
        f'This call to /{api} could not be read: send a JSON object {{"data": [...]}} with the values in the '
        'order the app\'s API page ("Use via API" at the foot of the page) lists them.'
    )
    return JSONResponse(status_code=422, content={"detail": sentence, "error": sentence})


APP_KWARGS = {
    "exception_handlers": {TypeError: call_refused, ValueError: call_refused, RequestValidationError: body_refused},
    "middleware": [Middleware(gradio_files.UploadRoom)],  # room made in the bounded cache before an upload lands
}


class PublicBlocks(HookedBlocks):
    """The app's Blocks: a malformed call gets a sentence, a file value outside the uploads is refused before it
    is read, and room is made in the bounded cache before a reply's files are written (the hooks:
    vitviz.app.serving.gradio_internals.HookedBlocks)."""

    _bound = None

    def bound_cache(self) -> None:
        """Keep Gradio's cached files under VITVIZ_CACHE_MAX_MB from now on (vitviz.app.serving.gradio_files)."""
        if self._bound is None:
            self._bound = gradio_files.SizeBound(self).start()

    def close(self, *args, **kwargs) -> object:
        """Close the server, stop the bound and delete the files this app's Blocks cached."""
        out = super().close(*args, **kwargs)
        if self._bound is not None:
            self._bound.stop()
            self._bound = None
        gradio_files.remove_all(self)
        return out

    def check_call(self, block_fn: BlockFunction, inputs: list) -> None:
        _fill_later(block_fn, inputs)
        wanted = len(internals.event_inputs(block_fn))
        extra = len(inputs) > wanted and internals.api_name(block_fn) and not internals.runs_js(block_fn)
        if len(inputs) < wanted or extra:
            raise gr.Error(count_sentence(block_fn, len(inputs)))

    def check_values(self, block_fn: BlockFunction, inputs: list) -> None:
        readable = [*internals.allowed_folders(self), internals.upload_folder()]
        outside = outside_uploads(block_fn, inputs, readable)
        if outside:
            raise gr.Error(outside)

    def refused_values(self, block_fn: BlockFunction, inputs: list) -> str:
        return kind_sentence(block_fn, inputs)

    async def before_reply(self, block_fn: BlockFunction, predictions: list | dict) -> None:
        """Room made in the bounded cache for the files and pictures Gradio is about to write for this reply
        (vitviz.app.serving.gradio_files.make_room), before it writes them."""
        nbytes, names = gradio_files.reply_size(predictions)
        if nbytes and self._bound is not None:
            try:
                await anyio.to_thread.run_sync(gradio_files.make_room, nbytes, names)
            except gradio_files.TooBig:  # a reply larger than the whole bound: the periodic check takes it later
                pass
