"""Each of Gradio's internals vitviz uses (vitviz.app.serving.gradio_internals), exercised by name against the
installed Gradio: an upgrade that changes one fails here."""

import inspect
import os

import gradio as gr
import httpx
import numpy as np
import pytest
from helpers import EXAMPLE, free_port
from PIL import Image

from vitviz.app.serving import gradio_internals as internals


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """A small HookedBlocks with one event (an image and a state in, a file out), launched on 127.0.0.1; the
    values each hook saw."""
    out_file = tmp_path_factory.mktemp("reply") / "reply.png"
    Image.new("RGB", (8, 8), (10, 200, 30)).save(out_file)
    seen = {"call": [], "values": [], "reply": []}

    class Recording(internals.HookedBlocks):
        def check_call(self, block_fn, inputs):
            seen["call"].append(block_fn)

        def check_values(self, block_fn, inputs):
            seen["values"].append(list(inputs))

        async def before_reply(self, block_fn, predictions):
            seen["reply"].append(predictions)

    def echo(image, state):
        return str(out_file)

    with Recording() as demo:
        state = gr.State(1)
        image = gr.Image(EXAMPLE, type="filepath")
        reply = gr.File()
        painted = gr.Image()
        button = gr.Button()
        button.click(echo, [image, state], reply, preprocess=False, api_name="echo")
        internals.before_postprocess(painted, lambda v: np.zeros((4, 4, 3), np.uint8) if v == "paint" else v)
    _, url, _ = demo.launch(
        server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True, allowed_paths=["/srv"]
    )
    yield demo, url, seen, (echo, image, state, painted)
    demo.close()


def test_the_blocks_steps_around_an_event_are_still_there():
    for name, params in internals.HOOKS.items():
        method = getattr(gr.Blocks, name)
        assert tuple(inspect.signature(method).parameters)[1:] == params, name


def test_an_event_and_its_inputs_read_as_vitviz_reads_them(app):
    from gradio_client import Client, handle_file

    demo, url, seen, (echo, image, state, painted) = app
    path = Client(url, verbose=False).predict(handle_file(EXAMPLE), api_name="/echo")
    assert path.endswith("reply.png")
    block_fn = seen["call"][-1]  # every step ran, with the event
    assert isinstance(block_fn, internals.BlockFunction) and seen["values"] and seen["reply"]
    assert internals.event_fn(block_fn) is echo and internals.event_inputs(block_fn) == [image, state]
    assert internals.api_name(block_fn) == "echo" and not internals.runs_js(block_fn)
    assert internals.hidden_from_api(state) and not internals.hidden_from_api(image)
    model = internals.data_model(image)
    model.model_validate({"path": EXAMPLE, "meta": {"_type": "gradio.FileData"}}, context={"validate_meta": True})
    with pytest.raises(ValueError):  # pydantic's refusal
        model.model_validate("a bare string", context={"validate_meta": True})


def within(path: str, folder: str) -> bool:
    return os.path.commonpath([os.path.realpath(path), os.path.realpath(folder)]) == os.path.realpath(folder)


def test_the_files_gradio_tracks_are_where_vitviz_looks(app):
    demo, url, _, (_, image, _, painted) = app
    with open(EXAMPLE, "rb") as f:
        up = httpx.post(f"{url}gradio_api/upload", files={"files": ("mine.png", f, "image/png")}, timeout=30).json()[0]
    assert up in internals.upload_set(demo) and any(up in s for s in internals.tracked_sets(demo))
    assert within(up, internals.upload_folder())
    assert any(p.endswith(".png") for p in internals.kept_in_cache(demo))  # the page's own example, kept
    assert within(internals.cache_folder(image), internals.upload_folder())
    assert "/srv" in internals.allowed_folders(demo)
    assert painted.postprocess("paint") is not None  # the step ran before Gradio's own postprocess


def test_gradio_clients_refusal_of_an_unknown_keyword_reads_as_expected(app):
    from gradio_client import Client

    _, url, _, _ = app
    with pytest.raises(Exception) as refused:
        Client(url, verbose=False).predict(None, colour=3, api_name="/echo")
    found = internals.UNKNOWN_KEYWORD.search(str(refused.value))
    assert found and found.group(1) == "colour", str(refused.value)


def test_a_folder_served_first_is_checked_before_gradios_own_static_paths(tmp_path):
    from gradio.data_classes import _StaticFiles
    from gradio.utils import is_static_file

    picture = tmp_path / "p.jpg"
    picture.write_bytes(b"x")
    assert not is_static_file(str(picture))
    gr.set_static_paths([tmp_path / "else"])  # registered before it, as Gradio registers its icons
    internals.serve_first(tmp_path)
    assert is_static_file(str(picture))  # Gradio serves it as it is, never copying it into its cache
    assert _StaticFiles.all_paths[0] == tmp_path.resolve()


def test_mcp_writes_an_inline_image_among_the_uploads_and_a_refusal_reads_as_its_sentence():
    import gradio.mcp

    internals.prepare_mcp()
    assert gradio.mcp.DEFAULT_TEMP_DIR == internals.upload_folder()
    said = internals.Sentence("The method must be one of a, b.")
    assert isinstance(said, gr.Error) and str(said) == "The method must be one of a, b."
    assert str(gr.Error("x")) != "x"  # why: Gradio's own error reads as its message's repr


def raw_reply(url: str, api: str, data: list) -> list:
    """An endpoint's outputs as Gradio sends them (its REST call: the data of the completed event)."""
    import json

    event = httpx.post(f"{url}gradio_api/call/{api}", json={"data": data}, timeout=30).json()["event_id"]
    with httpx.stream("GET", f"{url}gradio_api/call/{api}/{event}", timeout=30) as stream:
        lines = list(stream.iter_lines())
    kinds = [line for line in lines if line.startswith("event:")]
    assert kinds[-1] == "event: complete", lines
    return json.loads(lines[lines.index(kinds[-1]) + 1][len("data:") :])


def test_a_reply_answered_as_sent_is_what_gradios_postprocessing_sends():
    """replying_as_sent makes an endpoint's reply on its own thread in Gradio's own form: the same JSON as the same
    outputs through Gradio's postprocessing (a served picture by its URL, a label, Markdown), for every client."""
    from gradio_client import Client

    from vitviz.app.serving import picfiles

    folder = picfiles.served() / "as-sent-test"
    folder.mkdir(exist_ok=True)
    picture = picfiles.write_picture(np.full((6, 6, 3), 90, np.uint8), folder / "p.jpg")
    values = (picture, {"cat": 0.7, "dog": 0.3}, "**bold** words")

    with gr.Blocks() as demo:
        outputs = [gr.Image(), gr.Label(), gr.Markdown()]
        plain, sent = gr.Button(), gr.Button()
        plain.click(lambda: values, None, outputs, api_name="plain")
        answer = internals.replying_as_sent(lambda: values, outputs, picfiles.is_served, picfiles.REPLIES.paths)
        sent.click(answer, None, outputs, postprocess=False, api_name="sent")
    assert internals.answerable_as_sent(outputs) and not internals.answerable_as_sent([gr.File()])
    with pytest.raises(TypeError):
        internals.replying_as_sent(lambda: None, [gr.File()], picfiles.is_served, picfiles.REPLIES.paths)
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        assert raw_reply(url, "sent", []) == raw_reply(url, "plain", [])
        client = Client(url, verbose=False)
        got = client.predict(api_name="/sent")
        assert got[1:] == client.predict(api_name="/plain")[1:] and np.array_equal(
            np.asarray(Image.open(got[0])), np.asarray(Image.open(picture))
        )
        array = np.full((6, 6, 3), 90, np.uint8)  # a picture given as an array: written among the served files
        drawn = internals.replying_as_sent(lambda: (array, {}, ""), outputs, picfiles.is_served, picfiles.REPLIES.paths)
        reply = drawn()[0]
        assert picfiles.is_served(reply["path"]) and reply["url"] == internals.FILE_ROUTE + reply["path"]
        stray = internals.replying_as_sent(
            lambda: ("/etc/passwd", {}, ""), outputs, picfiles.is_served, picfiles.REPLIES.paths
        )
        with pytest.raises(TypeError):  # only a picture the app serves is named as it is
            stray()
    finally:
        demo.close()
