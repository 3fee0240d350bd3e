"""The app: handlers called directly, then every public endpoint through gradio_client."""

import gc
import os
import re
import threading
import time

import gradio as gr
import numpy as np
import pytest
import torch
from helpers import EXAMPLE, FakeRequest, free_port, skipped
from PIL import Image

from vitviz.app import build_demo, choices, handlers, launch, menu, switch
from vitviz.app.state import DEFAULT_EXAMPLE, NONE_SELECTED, Visitor
from vitviz.app.tabs import compare, explore
from vitviz.app.tabs import model as model_tab
from vitviz.app.tabs import train as train_tab
from vitviz.data import gallery
from vitviz.pictures import explanation, input_view
from vitviz.pictures import explore as explore_pictures
from vitviz.runtime import speed
from vitviz.training import quick, record, stops

pytestmark = pytest.mark.usefixtures("small_data")


def image_file(tmp_path, name, make):
    p = tmp_path / name
    data = make()
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        data(p)
    return str(p)


def bad_inputs(tmp_path):
    """(name, path, must_succeed)."""

    def save(im, fmt, **kw):
        return lambda p: im.save(p, format=fmt, **kw)

    exif = Image.Exif()
    exif[0x0112] = 6
    frames = [Image.new("RGB", (40, 40), c) for c in [(255, 0, 0), (0, 0, 255)]]
    return [
        ("corrupt.png", image_file(tmp_path, "corrupt.png", lambda: b"\x89PNG\r\n\x1a\n" + os.urandom(200)), False),
        ("notes.txt", image_file(tmp_path, "notes.txt", lambda: b"hello, not an image"), False),
        ("empty.jpg", image_file(tmp_path, "empty.jpg", lambda: b""), False),
        ("bomb.png", image_file(tmp_path, "bomb.png", lambda: save(Image.new("1", (10000, 10000)), "PNG")), False),
        (
            "huge.jpg",
            image_file(tmp_path, "huge.jpg", lambda: save(Image.new("RGB", (6000, 4000), (90, 120, 200)), "JPEG")),
            True,
        ),
        ("grey.png", image_file(tmp_path, "grey.png", lambda: save(Image.new("L", (50, 40), 128), "PNG")), True),
        (
            "rgba.png",
            image_file(tmp_path, "rgba.png", lambda: save(Image.new("RGBA", (30, 30), (255, 0, 0, 60)), "PNG")),
            True,
        ),
        (
            "cmyk.jpg",
            image_file(tmp_path, "cmyk.jpg", lambda: save(Image.new("CMYK", (30, 30), (0, 100, 200, 0)), "JPEG")),
            True,
        ),
        (
            "deep.png",
            image_file(tmp_path, "deep.png", lambda: save(Image.fromarray(np.full((30, 30), 40000, np.uint16)), "PNG")),
            True,
        ),
        (
            "palette.gif",
            image_file(
                tmp_path, "palette.gif", lambda: save(Image.new("RGB", (30, 30), (0, 200, 0)).convert("P"), "GIF")
            ),
            True,
        ),
        (
            "anim.gif",
            image_file(tmp_path, "anim.gif", lambda: save(frames[0], "GIF", save_all=True, append_images=frames[1:])),
            True,
        ),
        ("dot.png", image_file(tmp_path, "dot.png", lambda: save(Image.new("RGB", (1, 1), (5, 5, 5)), "PNG")), True),
        (
            "rotated.jpg",
            image_file(
                tmp_path, "rotated.jpg", lambda: save(Image.new("RGB", (64, 32), (200, 10, 10)), "JPEG", exif=exif)
            ),
            True,
        ),
    ]


# ---------------------------------------------------------------- handlers, directly


def view(image=EXAMPLE, **kw):
    return explore.explore_view({"path": image} if isinstance(image, str) else image, **kw)[0]


def test_explain_handler_gives_every_picture():
    v, fresh, ex, state = explore.explore_view({"path": EXAMPLE})
    assert len(v.top5) == 5 and abs(sum(v.top5.values()) - 1) < 0.5
    assert fresh == set(explore_pictures.PICTURE_NAMES)
    for pic in explore_pictures.PICTURE_NAMES:
        p = getattr(v, pic)
        assert isinstance(p, np.ndarray) and p.ndim == 3 and p.shape[2] == 3
    assert "Prediction" in v.summary and "CLS" in v.summary
    # a patch: the token-dependent pictures are drawn again from it, gradient rollout is not
    v2, fresh2, _, _ = explore.explore_view({"path": EXAMPLE}, patch=10, state=state)
    assert fresh2 == {"sees", "rollout", "head_large", "rollout_strip", "heads"}
    assert not np.array_equal(v2.rollout, v.rollout) and v2.class_map is v.class_map
    # /explain returns the same pictures as files, in explore_pictures.ExploreView's field order
    out = explore.explain({"path": EXAMPLE}, patch=10, state=state)
    assert len(out) == len(explore_pictures.OUTPUT_NAMES)
    for name, value in zip(explore_pictures.OUTPUT_NAMES, out):
        if name in explore_pictures.PICTURE_NAMES:
            got = np.asarray(Image.open(value).convert("RGB")).astype(int)
            assert got.shape == getattr(v2, name).shape and np.abs(got - getattr(v2, name)).mean() < 3, name
    assert out[0] == v2.top5 and out[-1] == v2.summary


def test_page_update_sends_only_what_changed_and_says_errors_beside_their_control():
    args = lambda **kw: [
        {"path": EXAMPLE},
        *[
            {
                **dict(
                    fusion="mean",
                    discard=0.0,
                    target="predicted class",  # noqa
                    layer=6,
                    head=1,
                    patch=-1,
                    alpha=0.6,
                    smooth=True,
                    shared=False,
                    method="gradient rollout",
                    labels=None,
                    template=None,
                ),
                **kw,
            }[k]
            for k in explore.OPTIONS
        ],
    ]
    state = Visitor()
    names = explore_pictures.OUTPUT_NAMES
    out = explore.explain_page(args()[0], "cifar10", *args()[1:], state)
    assert all(
        out[names.index(n)] is not None and not skipped(out[names.index(n)]) for n in explore_pictures.PICTURE_NAMES
    )
    out = explore.explain_page(args()[0], "cifar10", *args(layer=3)[1:], state)
    sent = {n for n in explore_pictures.PICTURE_NAMES if not skipped(out[names.index(n)])}
    assert sent == {"head_large"}  # a new layer redraws the layer-and-head view alone
    notes = dict(zip(explore.NOTES, out[len(names) + 1 :]))
    assert skipped(notes.pop("image_note")) and not any(notes.values())  # the image's own note is left as it is
    out = explore.explain_page(args()[0], "cifar10", *args(patch=99)[1:], state)
    notes = dict(zip(explore.NOTES, out[len(names) + 1 :]))
    assert (
        "Token 99 is not in this model" in notes["patch_note"]
        and skipped(notes["image_note"])
        and not notes["target_note"]
    )
    assert all(skipped(o) for o in out[: len(names)])  # the pictures stay as they were
    out = explore.explain_page(args()[0], "cifar10", *args(target="giraffe")[1:], state)
    assert "giraffe" in dict(zip(explore.NOTES, out[len(names) + 1 :]))["target_note"]
    out = explore.explain_page(args()[0], "cifar10", *args()[1:], state)  # after an error: everything again
    assert not any(skipped(out[names.index(n)]) for n in explore_pictures.PICTURE_NAMES)


def test_predict_handler_matches_explain():
    assert explore.predict(EXAMPLE) == pytest.approx(view().top5, abs=1e-4)


@pytest.mark.parametrize("index", range(13))
def test_bad_and_strange_images(tmp_path, index):
    name, path, ok = bad_inputs(tmp_path)[index]
    if ok:
        assert len(view(path).top5) == 5, name
    else:
        with pytest.raises(gr.Error) as e:
            view(path)
        assert "Traceback" not in str(e.value) and len(str(e.value)) > 20, name


def test_bad_options_and_models():
    for kwargs in (
        dict(fusion="median"),
        dict(discard=2.0),
        dict(target="giraffe"),
        dict(model_key="nope"),
        dict(model_key="session"),
        dict(model_key="upload"),
    ):
        with pytest.raises(gr.Error):
            view(**kwargs)
    with pytest.raises(gr.Error):
        view(None)


def test_mnist_model_and_its_classes():
    v = view(gallery.items("mnist")[0][0], model_key="mnist", target="3")
    assert set(v.top5) <= set("0123456789")
    state = Visitor()  # showing a CIFAR-10 example
    updates = switch.controls_for("mnist", state)
    assert updates[0] == "mnist" and updates[1]["choices"][1:] == list("0123456789")
    # the CIFAR-10 image gives way to the MNIST digit in the same place of the gallery, which selects it
    assert updates[7] == gallery.items("mnist")[DEFAULT_EXAMPLE][0]
    assert updates[4]["selected_index"] == DEFAULT_EXAMPLE and not updates[9]
    assert skipped(switch.controls_for("mnist", state)[7])  # already an MNIST digit: kept
    # a model that cannot be had falls back to the shipped CIFAR-10 model, said beside the menu, with a CIFAR image
    back = switch.controls_for("session", state)
    assert back[0] == "cifar10" and "No model trained" in back[9] and "instead" in back[9]
    assert back[7] == gallery.items("cifar10")[DEFAULT_EXAMPLE][0]


def test_a_model_change_keeps_the_choices_the_new_model_has():
    state = Visitor()
    out = switch.controls_for("cifar10", state, "cat", 3, 2, 27)
    assert out[1]["value"] == "cat" and out[2]["value"] == 3 and out[3]["value"] == 2 and out[5]["value"] == 27
    out = switch.controls_for("mnist", state, "cat", 6, 8, 27)  # the last layer stays the last; heads clamped
    assert out[1]["value"] == "predicted class" and "no class 'cat'" in out[9]
    assert out[2]["value"] == menu.resolve_model("mnist").card.config.depth and out[3]["value"] <= out[3]["maximum"]
    assert out[5]["value"] == 27  # patch 27 is on MNIST's grid too
    cfg = menu.resolve_model("mnist").card.config
    out = switch.controls_for("mnist", state, "3", 1, 1, cfg.num_patches + 5)  # off this grid: CLS
    assert out[1]["value"] == "3" and out[2]["value"] == 1 and out[5]["value"] == -1


def test_a_model_change_keeps_an_uploaded_image_that_suits_it(tmp_path):
    state = Visitor()
    path = str(tmp_path / "mine.png")
    Image.new("RGB", (40, 40), (200, 30, 30)).save(path)
    image, gal, state, note, switch_to_photo_model = choices.upload_image(path, "cifar10", state)
    assert image == path and gal["selected_index"] == NONE_SELECTED and state.crossing.example is None and not note
    assert switch_to_photo_model["visible"] is False  # 40 px is no photo: nothing to advise
    assert skipped(switch.controls_for("cifar10", state)[7])  # it suits the model: kept
    to_mnist = switch.controls_for("mnist", state)
    assert to_mnist[7] == gallery.items("mnist")[DEFAULT_EXAMPLE][0]  # a digit in its place, said beside the menu
    assert f"MNIST example {DEFAULT_EXAMPLE + 1} in its place" in to_mnist[9] and "comes back" in to_mnist[9]
    assert to_mnist[4]["selected_index"] == DEFAULT_EXAMPLE  # the stand-in is the example shown: highlighted
    back = switch.controls_for("cifar10", state)
    assert (
        back[7] == path and "back" in back[9] and back[4]["selected_index"] == NONE_SELECTED
    )  # the visitor's own image
    assert skipped(switch.controls_for("cifar10", state)[7])
    bad = str(tmp_path / "bad.png")
    open(bad, "wb").write(b"not a picture")
    out = choices.upload_image(bad, "mnist", state)
    assert skipped(out[0]) and "could not be used" in out[3]


def test_upload_checkpoint(tmp_path, tiny_model):
    from vitviz.models import checkpoint

    checkpoint.save(tmp_path / "mine", tiny_model)
    state = Visitor()
    msg, state, key = menu.upload_checkpoint([str(tmp_path / "mine.safetensors"), str(tmp_path / "mine.json")], state)
    assert key == "upload" and "Loaded" in msg
    assert len(view(model_key="upload", layer=2, head=4, state=state).top5) == 5
    (tmp_path / "evil.json").write_text('{"format": "vitviz-checkpoint", "model": {"depth": "__import__"}}')
    # a refused checkpoint: a sentence for the note beside the upload, and the model menu left alone
    msg, _, dropdown = menu.upload_checkpoint(
        [str(tmp_path / "mine.safetensors"), str(tmp_path / "evil.json")], Visitor()
    )
    assert "could not be loaded" in msg and skipped(dropdown)
    msg, _, dropdown = menu.upload_checkpoint([str(tmp_path / "mine.safetensors")], Visitor())
    assert "two files" in msg and skipped(dropdown)


def test_model_view_and_clicks():
    tiles, large, dist, comps, card, note = model_tab.model_view("cifar10", -1, None)
    assert tiles.ndim == 3 and dist.ndim == 3 and "parameters" in card

    class Evt:
        index = [100, 40]

    assert handlers.token_at("cifar10", None, Evt()) == 1 * 8 + 3

    class OnCls:
        index = [input_view.cls_box(256, 8)[0] + 5, 10]

    assert handlers.token_at("cifar10", None, OnCls()) == -1


def test_train_handler_streams_and_stops_quickly():
    t0 = None
    outs = []
    gen = train_tab.train_run(
        width=32, heads=2, depth=1, epochs=50, time_budget=0, batch_size=16, request=FakeRequest("a")
    )
    for o in gen:
        outs.append(o)
        if len(outs) == 3:
            train_tab.stop_run(FakeRequest("a"))
            t0 = time.perf_counter()
    assert time.perf_counter() - t0 < 60  # a bound against a hang: a run of 50 epochs would take far longer
    status, state = outs[-1][0], outs[-1][6]
    assert "Stopped" in status
    said = speed.chosen("training", torch.device("cpu"), lambda: pytest.fail("not measured by the run")).reason
    assert f"({said})" in outs[0][0]  # the status says which precision the run took, and why
    assert state.models["session"] is not None
    assert len(outs[-1][5]) == 2  # safetensors + json to download
    assert train_tab.stop_run(FakeRequest("a")) == "No run of yours is going."
    model_dd, tabs = train_tab.explore_trained(state)
    assert model_dd["value"] == "session"
    assert len(view(model_key="session", state=state).top5) == 5


def test_epoch_snapshots_can_be_compared():
    state = Visitor()
    for out in train_tab.train_run(
        width=32, heads=2, depth=1, epochs=3, time_budget=0, batch_size=64, state=state, request=FakeRequest("snap")
    ):
        pass
    state, dropdown = out[6], out[7]
    assert sorted(k for k in state.models if k.startswith("session@")) == ["session@1", "session@2", "session@3"]
    assert ("Trained in this session, after epoch 1", "session@1") in dropdown["choices"]
    assert out[8]["value"] == "session"  # the right-hand Compare menu switches to the new model
    first, last = state.models["session@1"], state.models["session@3"]
    assert not torch.equal(first.head.weight, last.head.weight)
    out = compare.compare({"path": EXAMPLE}, "session@1", "session", state=state)
    left, right = out[0], out[len(compare.SIDE)]
    assert len(left) == 5 and len(right) == 5 and out[-2:] == ("", "")


def test_snapshots_are_thinned_to_six():
    kept = {}
    for e in range(1, 21):
        record.keep_snapshot(kept, e, torch.nn.Linear(1, 1))
    assert len(kept) == 6 and min(kept) == 1 and max(kept) == 20


def test_train_handler_rejects_bad_settings():
    for kw in (
        dict(patch=5),
        dict(width=100, heads=3),
        dict(lr=-1),
        dict(dataset="imagenet"),
        dict(subset=3),
        dict(batch_size=2048),
    ):
        with pytest.raises(gr.Error):
            next(train_tab.train_run(request=FakeRequest("b"), **kw))


def test_the_train_button_says_a_refusal_in_the_status_and_leaves_the_menus():
    out = next(train_tab.train_page(patch=5, request=FakeRequest("page")))
    assert "does not divide" in out[0] and out[0].startswith("⚠️")
    assert all(skipped(o) for o in out[1:6]) and skipped(out[7]) and skipped(out[8])  # Compare menus untouched


def test_training_without_data_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("VITVIZ_DATA", str(tmp_path / "missing"))
    monkeypatch.setattr(quick, "_datasets", {})
    with pytest.raises(gr.Error, match="not available"):
        next(train_tab.train_run(request=FakeRequest("c")))


def test_ten_start_stop_cycles_leave_nothing_behind():
    from vitviz.models.vit import ViT

    def count_models():
        gc.collect()
        return sum(isinstance(o, ViT) for o in gc.get_objects())

    state = Visitor()
    view()  # shipped models loaded once
    threads0, models0 = threading.active_count(), count_models()
    for i in range(10):
        gen = train_tab.train_run(
            width=32, heads=2, depth=1, epochs=50, batch_size=16, state=state, request=FakeRequest(f"cycle{i}")
        )
        for k, o in enumerate(gen):
            if k == 1:
                train_tab.stop_run(FakeRequest(f"cycle{i}"))
        state = o[6]
    assert threading.active_count() <= threads0
    assert len(stops.STOPS) == 0
    assert count_models() <= models0 + 1  # only the last session model is kept


# ---------------------------------------------------------------- through gradio_client


@pytest.fixture(scope="module")
def client():
    from gradio_client import Client

    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield Client(url, verbose=False)
    demo.close()


def test_api_predict_and_explain(client):
    from gradio_client import handle_file

    lab = client.predict(handle_file(EXAMPLE), api_name="/predict")
    assert len(lab["confidences"]) == 5
    names = explore_pictures.OUTPUT_NAMES
    out = client.predict(handle_file(EXAMPLE), api_name="/explain")
    assert len(out) == len(names) and all(os.path.exists(out[names.index(n)]) for n in explore_pictures.PICTURE_NAMES)
    sees = Image.open(out[names.index("sees")])
    assert sees.size[1] == 256 and sees.size[0] > 256  # the grid, and the CLS tile beside it
    out2 = client.predict(
        handle_file(EXAMPLE), model_key="cifar10", fusion="min", discard=0.3, patch=12, api_name="/explain"
    )
    assert "patch 12" in out2[names.index("summary")]
    assert Image.open(out2[names.index("rollout")]).width == Image.open(out[names.index("rollout")]).width


def test_api_bad_inputs_get_messages_and_the_app_stays_up(client, tmp_path):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    for name, path, ok in bad_inputs(tmp_path):
        if name in ("huge.jpg",):  # covered by the handler test; slow to upload
            continue
        if ok:
            assert len(client.predict(handle_file(path), api_name="/predict")["confidences"]) == 5, name
        else:
            with pytest.raises(AppError) as e:
                client.predict(handle_file(path), api_name="/explain")
            assert "could not" in str(e.value) or "too large" in str(e.value), name
        assert len(client.predict(handle_file(EXAMPLE), api_name="/predict")["confidences"]) == 5


def test_api_train_streams_updates(client):
    job = client.submit(width=32, heads=2, depth=1, epochs=2, time_budget=0, batch_size=16, api_name="/train")
    for _ in job:  # iterate the stream as it comes
        pass
    job.result()
    final = job.outputs()[-1]
    assert len(job.outputs()) >= 3
    assert "Finished" in final[0] and "validation accuracy" in final[0]
    assert len(final[5]) == 2
    epochs = [e for out in job.outputs() for e in re.findall(r"epoch ([0-9.]+): validation", str(out[0]))]
    assert epochs and all(re.fullmatch(r"\d+(\.\d)?", e) for e in epochs), epochs  # plain: "epoch 1.2", never 1.2343


def test_a_second_visitor_waits_in_line_and_sees_their_place(small_data):
    """Two page visitors (two sessions, one address, as a class behind one network): the second waits, is told
    its place, and trains once the first has finished."""
    form = ["cifar10", "quick", 1, 2, 32, 4, 50, 3, 16, 0.006, 0, False, 0]
    first = train_tab.train_page(*form, Visitor(), request=FakeRequest("a"))
    assert "Waiting" not in str(next(first)[0])  # the first trains at once
    second = train_tab.train_page(*form, Visitor(), request=FakeRequest("b"))
    got = [next(second)]
    assert "Waiting for the training slot" in got[0][0] and "number 1 in line" in got[0][0]
    third = list(train_tab.train_page(*form, Visitor(), request=FakeRequest("a")))
    assert len(third) == 1 and "one per visitor" in third[0][0]  # the same session again: refused
    fourth = train_tab.train_page(*form, Visitor(), request=FakeRequest("c"))
    assert "number 2 in line" in next(fourth)[0]
    assert train_tab.stop_run(FakeRequest("c")).startswith("Stopping")  # Stop while waiting: leaves the line
    assert "Stopped before it started" in list(fourth)[-1][0]
    for _ in first:  # the first run ends at its 3 s budget
        pass
    got += list(second)
    assert "Finished" in got[-1][0]
    assert train_tab.PLACES.counts() == (0, 0)


def test_api_export_returns_the_zip_and_the_attention(client):
    import zipfile

    from gradio_client import handle_file

    zpath, npath = client.predict(handle_file(EXAMPLE), patch=5, api_name="/export")
    with zipfile.ZipFile(zpath) as z:
        names = set(z.namelist())
        assert names == {f"{n}.png" for n in explanation.EXPORT_NAMES.values()}
        assert Image.open(z.open("input_with_patch_grid.png")).size[1] == 256
    attn = np.load(npath)
    assert attn.shape == (6, 6, 65, 65) and np.allclose(attn.sum(-1), 1.0, atol=1e-4)


def test_api_take_away_and_the_class_map_methods(client):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    picture, top5, curves, maps, summary = client.predict(
        handle_file(EXAMPLE), method="occlusion", k=10, api_name="/take_away"
    )
    assert summary.startswith("**10 of 64 patches hidden.**") and len(top5["confidences"]) == 5
    assert Image.open(picture).size == (256, 256) and Image.open(curves).size[0] > 300
    names = explore_pictures.OUTPUT_NAMES
    out = client.predict(handle_file(EXAMPLE), method="LeGrad", model_key="cifar10/random-head", api_name="/explain")
    assert os.path.exists(out[names.index("class_map")]) and os.path.exists(out[names.index("norms")])
    with pytest.raises(AppError, match="method must be one of"):
        client.predict(handle_file(EXAMPLE), method="saliency", api_name="/explain")
    with pytest.raises(AppError, match="ranking must be one of"):
        client.predict(handle_file(EXAMPLE), method="saliency", api_name="/take_away")


def test_the_quick_run_is_designed_for_its_budget_and_the_form_follows_it():
    cpu = torch.device("cpu")
    short, long = quick.quick_defaults(cpu, 60), quick.quick_defaults(cpu, 600)
    assert short["token_drop"] > 0 and short["token_drop_until"] < 1
    assert not short["augment"] and long["augment"]  # crop and flip only where the run is long enough
    assert quick.quick_defaults(cpu, 60, "mnist")["patch_size"] == 7 and long["patch_size"] == 4
    cfg = quick.run_config(cpu, dataset="mnist", time_budget=60)
    assert (cfg.arch.patch_size, cfg.optim.token_drop, cfg.budget.time_budget) == (7, 0.5, 60)
    assert train_tab.settings("mnist", *[None] * 4, None, None, 60, *[None] * 5)["patch_size"] == 7
    assert [u["value"] for u in train_tab.follow_recipe("mnist", "60")] == [7, False]
    assert [u["value"] for u in train_tab.follow_recipe("cifar10", "a while")] == [4, False]  # the default budget
    assert [u["value"] for u in train_tab.follow_recipe("cifar10", 900)] == [4, True]
    gpu = quick.quick_defaults(torch.device("cuda"), None, "mnist")  # a GPU (ZeroGPU) has its own recipe
    assert gpu["patch_size"] == 4 and gpu["augment"] and gpu["time_budget"] == 60


def test_a_photo_on_the_cifar_model_gets_the_line_and_the_switch_and_nothing_else_does(tmp_path):
    photo, small = str(tmp_path / "photo.jpg"), str(tmp_path / "small.png")
    Image.new("RGB", (640, 480), (120, 170, 230)).save(photo)
    Image.new("RGB", (40, 40), (120, 170, 230)).save(small)
    state = Visitor()
    *_, note, offer = choices.upload_image(photo, "cifar10", state)
    assert "CIFAR-10" in note and "DeiT-S" in note and offer["visible"] is True
    named = dict(zip(switch.CHANGED.names, switch.controls_for("mnist", state)))
    assert named["photo_switch"]["visible"] is False  # the digit model shows a digit in its place instead
    named = dict(zip(switch.CHANGED.names, switch.controls_for("cifar10", state)))
    assert named["photo_switch"]["visible"] is True and "DeiT-S" in named["image_note"]  # the photo is back
    *_, note, offer = choices.upload_image(small, "cifar10", Visitor())
    assert note == "" and offer["visible"] is False
