"""Every value from outside (a link's query, the API, plain REST) gets a sentence with the true range: no server
path, no library's message, no exception's class name, no echo of a huge number. Table-driven."""

import json
import re
import tempfile

import httpx
import pytest
from helpers import free_port

from vitviz.app import build_demo, launch, link
from vitviz.app.state import Visitor

RAW = (
    "Traceback",
    "Errno",
    "embedded null",
    "invalid literal",
    "not supported between",
    "HFValidation",
    "validation error",
    "pydantic",
    "Error(",
    "object has no",
    "NoneType",
    tempfile.gettempdir(),
)


def clean(text: str) -> bool:
    return not any(w in text for w in RAW)


def no_long_number(text: str) -> bool:
    return not re.search(r"\d{25,}", text)


class Request:
    def __init__(self, **query):
        self.query_params = query


LINKS = [  # (query, what the sentence beside the menu must say)
    (dict(image="\x00"), "image"),
    (dict(image="a" * 5000), "image"),
    (dict(image="../" * 10 + "etc/passwd"), "no longer kept"),
    (dict(example="cifar10:²"), "example is not one of the app's"),
    (dict(example="cifar10:" + "9" * 400), "example is not one of the app's"),
    (dict(model="a" * 3000), "model"),
    (dict(model="deit\x00tiny"), "model"),
    (dict(model="timm/../../x"), "Unknown model"),
    (dict(head="1e300"), "head"),
    (dict(layer="١٢"), "layer"),
    (dict(token="\x07"), "token"),
    (dict(discard="nan"), "discard"),
    (dict(**{"class": "\x00cat"}), "class"),
]


@pytest.mark.parametrize("query,said", LINKS, ids=[repr(q)[:40] for q, _ in LINKS])
def test_a_hostile_link_gets_a_sentence(query, said, small_data):
    v = Visitor()
    wanted, note, image = link.from_link(Request(**query), v)
    out = link.fit(wanted, v, "predicted class", 6, 1, -1)
    words = " ".join((note, out[9]))
    assert said in words and clean(words) and no_long_number(words), words
    assert out[0] in ("cifar10", wanted.get("model"))  # the page opens on a model, never a dead one


@pytest.fixture(scope="module")
def app(small_data):
    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield url
    demo.close()


@pytest.mark.parametrize("body", ["{}", '{"data": {}}', '{"data": "x"}', "", "[", '{"data": [1, 2], "x": null}'])
def test_a_body_that_cannot_be_read_gets_a_sentence(app, body):
    r = httpx.post(
        app + "gradio_api/call/explain", content=body, headers={"content-type": "application/json"}, timeout=30
    )
    if r.status_code == 200:  # read, then refused by the endpoint itself
        with httpx.stream("GET", app + f"gradio_api/call/explain/{r.json()['event_id']}", timeout=60) as s:
            text = "".join(s.iter_text())
        assert "event: error" in text and clean(text), text
        return
    assert r.status_code in (400, 422), r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "could not be read" in detail and clean(detail), r.text
    assert httpx.get(app + "gradio_api/info", timeout=30).status_code == 200
    assert json.dumps(r.json()).count("loc") == 0  # none of pydantic's account
