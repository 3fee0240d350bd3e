"""The agents' tools: the app launched with MCP, driven by the official `mcp` client over streamable HTTP.

Every tool is listed with a description that says what it returns; explain answers a picture equal to the one the
Explore code draws (and to /explain's, within its JPEG encoding), and the numbers behind it; a bad value or a
refused image gets the sentence the API gives; many agents at once get what each gets alone. With MCP off the
tools stay in the API and there is no MCP route.
"""

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
import torch
from gradio_client import Client, handle_file
from helpers import free_port
from PIL import Image

from vitviz.app import build_demo, launch, tools
from vitviz.app.serving import gradio_internals
from vitviz.app.serving.calls import Slots
from vitviz.app.tabs.explore import explore_view
from vitviz.data import gallery
from vitviz.explain import interpret
from vitviz.models.hub import load_model

mcp = pytest.importorskip("mcp")
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

EXAMPLE = gallery.items("cifar10")[3][0]


@pytest.fixture(scope="module")
def app():
    demo = build_demo()
    _, url, _ = launch(
        demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True, mcp_server=True
    )
    yield demo, url
    demo.close()


def data_url(path) -> str:
    return "data:image/png;base64," + base64.b64encode(open(path, "rb").read()).decode()


def calls(url: str, *requests: tuple[str, dict]) -> list:
    """Each (tool, arguments) called at once, each on its own MCP session; their results in order."""

    async def one(name, args):
        async with (
            httpx.AsyncClient(timeout=120) as http,
            streamable_http_client(f"{url}gradio_api/mcp/", http_client=http) as (r, w, _),
        ):
            async with mcp.ClientSession(r, w) as s:
                await s.initialize()
                return await s.call_tool(name, args)

    async def every():
        return await asyncio.gather(*(one(n, a) for n, a in requests))

    return asyncio.run(every())


def listed(url: str):
    async def go():
        async with streamable_http_client(f"{url}gradio_api/mcp/") as (r, w, _):
            async with mcp.ClientSession(r, w) as s:
                await s.initialize()
                return (await s.list_tools()).tools

    return asyncio.run(go())


def pictures(result) -> list[np.ndarray]:
    return [np.asarray(Image.open(io.BytesIO(base64.b64decode(c.data)))) for c in result.content if c.type == "image"]


def numbers(result) -> dict:
    texts = [c.text for c in result.content if c.type == "text" and c.text.lstrip().startswith("{")]
    assert len(texts) == 1, result.content
    return json.loads(texts[0])


def test_every_tool_is_listed_and_says_what_it_returns(app):
    demo, url = app
    found = {t.name: t for t in listed(url)}
    assert set(found) == set(tools.TOOLS)  # the page's own endpoints are no tools
    assert gradio_internals.mcp_tool_names(demo)["explain"] == "/tool_explain"
    for name, t in found.items():
        assert "Returns:" in t.description and len(t.description) > 80, name
        props = t.inputSchema["properties"]
        if "image" in props:
            assert props["image"]["type"] == "string" and "url" in props["image"]["format"]
            assert all(p.get("description") for p in props.values()), name  # every parameter explained
    assert {"method", "target", "token", "labels"} <= set(found["explain"].inputSchema["properties"])


def test_explain_answers_the_picture_the_page_draws_and_its_numbers(app):
    _, url = app
    (res,) = calls(url, ("explain", {"image": data_url(EXAMPLE), "method": "LeGrad", "target": "cat"}))
    assert not res.isError, res.content
    (picture,) = pictures(res)
    view, _, ex, _ = explore_view({"path": str(EXAMPLE)}, "cifar10", target="cat", method="LeGrad")
    assert np.array_equal(picture, view.class_map)  # PNG: the very pixels drawn
    told = numbers(res)
    assert told["explains"] == "cat" and told["method"] == "LeGrad"
    m = load_model("cifar10")
    legrad = interpret.legrad(m, m.tensor(ex.pixels), torch.tensor([m.card.classes.index("cat")]))[0]
    assert np.allclose(np.array(told["values"]).ravel(), legrad.numpy(), rtol=1e-5, atol=1e-6)
    assert told["most_relevant_patches"][0] == int(legrad.argmax())
    client = Client(url, verbose=False, ssl_verify=False)
    page = client.predict(handle_file(str(EXAMPLE)), target="cat", method="LeGrad", api_name="/explain")
    jpeg = np.asarray(Image.open(page[3]).convert("RGB")).astype(int)  # /explain's class map, as a JPEG
    assert jpeg.shape == picture.shape and np.abs(jpeg - picture).mean() < 3


def test_attention_numbers_are_the_models_attention_row(app):
    _, url = app
    (res,) = calls(url, ("attention", {"image": data_url(EXAMPLE), "layer": 2, "head": 3, "token": 9}))
    told = numbers(res)
    m = load_model("cifar10")
    x = m.tensor(np.asarray(Image.open(EXAMPLE).convert("RGB")))
    _, attn = interpret.forward_with_attention(m, x)
    row = attn[1][0, 2, 1 + 9]  # layer 2, head 3, from patch 9 (after CLS)
    assert np.allclose(np.array(told["weights"]).ravel(), row[1:].numpy(), atol=1e-6)
    assert told["to_tokens_before_the_patches"]["CLS"] == pytest.approx(float(row[0]), abs=1e-6)
    assert len(pictures(res)) == 1


def test_each_tool_answers_its_pictures_to_a_client_without_progress(app):
    _, url = app
    image = data_url(EXAMPLE)
    asked = [
        ("predict", {"image": image, "k": 3}),
        ("step_by_step", {"image": image, "stage": "positions"}),
        ("take_patches_away", {"image": image, "method": "occlusion", "k": 5}),
        ("compare_models", {"image": image}),
        ("list_models", {}),
    ]
    got = dict(zip((n for n, _ in asked), calls(url, *asked)))
    assert all(not r.isError for r in got.values()), {n: r.content for n, r in got.items() if r.isError}
    assert [len(pictures(got[n])) for n, _ in asked] == [0, 1, 2, 2, 0]
    top = numbers(got["predict"])["top"]
    assert len(top) == 3 and top[0]["probability"] >= top[1]["probability"] >= top[2]["probability"]
    away = numbers(got["take_patches_away"])
    assert len(away["hidden_patches"]) == 5 and set(away["deletion_auc"]) >= {"occlusion", "random order"}
    assert "cifar10" in {m["model"] for m in numbers(got["list_models"])["models"]}


def test_bad_values_get_the_apis_sentence(app, monkeypatch):
    _, url = app
    client = Client(url, verbose=False, ssl_verify=False)
    image = data_url(EXAMPLE)
    for args in ({"method": "bogus"}, {"token": 999}, {"model": "no_such_model_anywhere"}):
        (res,) = calls(url, ("explain", {"image": image, **args}))
        assert res.isError
        said = res.content[0].text
        with pytest.raises(Exception) as api:
            client.predict(handle_file(str(EXAMPLE)), **args, api_name="/tool_explain")
        assert said in str(api.value) and said[0].isupper() and not said.startswith("'"), said
        assert "Traceback" not in said and "Error" not in said.split(":")[0]
    monkeypatch.setenv("VITVIZ_MAX_UPLOAD_MB", "0.001")  # the upload bound holds for an inline image
    (res,) = calls(url, ("predict", {"image": image}))
    assert res.isError and "larger than the 0.001 MB" in res.content[0].text
    monkeypatch.delenv("VITVIZ_MAX_UPLOAD_MB")
    (res,) = calls(url, ("predict", {"image": "not a url"}))
    assert res.isError


def test_agents_at_once_get_what_each_gets_alone(app):
    _, url = app
    image = data_url(EXAMPLE)
    asked = [("explain", {"image": image, "method": "attention rollout", "token": t}) for t in (-1, 5, 17, 40)]
    alone = [calls(url, a)[0] for a in asked]
    together = calls(url, *asked)
    for a, b in zip(alone, together):
        assert numbers(a) == numbers(b)
        assert all(np.array_equal(p, q) for p, q in zip(pictures(a), pictures(b)))
    assert len({json.dumps(numbers(r)["values"]) for r in together}) == 4


def test_slots_bound_running_calls_and_tell_the_one_that_waits_too_long(monkeypatch):
    monkeypatch.setenv("VITVIZ_TOOL_SLOTS", "1")
    monkeypatch.setenv("VITVIZ_TOOL_WAIT_S", "0.3")
    slots = Slots()
    with slots.taken():
        t = time.monotonic()
        with pytest.raises(Exception, match="The app is busy: 1 tool calls are running"):
            with slots.taken():
                pass
        assert time.monotonic() - t >= 0.3
    with slots.taken():  # free again
        assert slots.running == 1
    assert slots.running == 0 and slots.waiting == 0


def test_no_mcp_serves_the_api_without_an_mcp_route(tmp_path):
    port = free_port()
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "vitviz", "app", "--port", str(port), "--no-mcp"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.time() + 120
        while True:
            try:
                client = Client(url, verbose=False, ssl_verify=False)
                break
            except Exception:
                assert time.time() < deadline and server.poll() is None, server.stdout.read()[-3000:]
                time.sleep(0.5)
        picture, text = client.predict(handle_file(str(EXAMPLE)), api_name="/tool_attention")
        assert json.loads(text)["layer"] == 6 and Image.open(picture).size[0] > 100
        assert httpx.get(f"{url}gradio_api/mcp/schema", timeout=10).status_code == 404
        assert httpx.post(f"{url}gradio_api/mcp/", json={}, timeout=10).status_code == 404
    finally:
        server.terminate()
        server.wait(30)


def test_another_app_in_the_same_process_starts_after_one_with_mcp(app):
    from vitviz.app.serving.public import APP_KWARGS

    assert "lifespan" not in APP_KWARGS  # Gradio writes the MCP server's lifespan into a copy, never into ours
    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        assert httpx.get(f"{url}gradio_api/info", timeout=30).status_code == 200
        assert httpx.post(f"{url}gradio_api/mcp/", json={}, timeout=10).status_code == 404  # MCP only where asked
    finally:
        demo.close()
