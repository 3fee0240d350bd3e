"""Many visitors at once on one shared model: every reply equals the same call made alone.

Every public endpoint's handler runs on several threads at once against the shared models (our ViT, and a
small torchvision ViT put where ViT-B/16 would be), with different images, patches, layers and methods. The
reference for each call is the same call made alone, before the threads start; the pictures are compared
pixel for pixel and the texts letter for letter.
"""

import contextlib
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from helpers import canonical
from PIL import Image

from vitviz.app import menu
from vitviz.app.inputs import PREDICTED
from vitviz.app.serving import shared
from vitviz.app.tabs import compare, explore
from vitviz.app.tabs import model as model_tab
from vitviz.app.tabs import removal as removal_tab
from vitviz.app.tabs import steps as steps_tab
from vitviz.data import gallery
from vitviz.data.datasets import CIFAR10_CLASSES
from vitviz.models.card import ModelCard, describe
from vitviz.models.hub import loaded
from vitviz.models.tv_vit import config_of

IMAGES = [{"path": gallery.items("cifar10")[i][0]} for i in (1, 3, 6)]
DIGIT = {"path": gallery.items("mnist")[2][0]}


def small_torchvision_vit():
    from torchvision.models.vision_transformer import VisionTransformer

    torch.manual_seed(1)
    m = VisionTransformer(
        image_size=32, patch_size=4, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128, num_classes=10
    )
    torch.nn.init.normal_(m.heads.head.weight, std=0.2)  # torchvision zero-inits it: no class map otherwise
    card = ModelCard(
        config=config_of(m),
        classes=tuple(CIFAR10_CLASSES),
        mean=(0.49, 0.48, 0.45),
        std=(0.25, 0.24, 0.26),
        dataset="cifar10",
        kind="torchvision",
        name="small torchvision ViT",
    )
    return describe(m, card).eval()


@pytest.fixture(scope="module")
def shared_torchvision():
    """A small torchvision ViT served under ViT-B/16's key (whose real weights need internet)."""
    old = menu.MODELS._models.get("vit_b_16")
    menu.MODELS._models["vit_b_16"] = loaded(small_torchvision_vit())
    yield "vit_b_16"
    if old is None:
        menu.MODELS._models.pop("vit_b_16", None)
    else:
        menu.MODELS._models["vit_b_16"] = old


def calls(tv_key: str) -> list[tuple[str, callable]]:
    """(name, a call with no arguments) for every endpoint, over both model kinds, images, patches and
    methods. Each call passes no state, as an API caller does."""
    out = []
    for key in ("cifar10", tv_key):
        for i, img in enumerate(IMAGES):
            for method in ("gradient rollout", "LeGrad", "occlusion"):
                patch = (-1, 5, 37)[i]
                out.append(
                    (
                        f"explain {key} {i} {method}",
                        lambda k=key, im=img, m=method, p=patch: explore.explain(
                            im, k, "mean", 0.0, PREDICTED, 2, 2, p, 0.6, True, False, m
                        ),
                    )
                )
            out.append((f"export {key} {i}", lambda k=key, im=img: explore.export(im, k, patch=9)[0]))
            out.append((f"steps {key} {i}", lambda k=key, im=img, p=(-1, 5, 20)[i]: steps_tab.steps_api(im, k, 2, p)))
            out.append(
                (
                    f"take_away {key} {i}",
                    lambda k=key, im=img, m=("LeGrad", "occlusion", "random order")[i]: removal_tab.removal_api(
                        im, k, m, 7
                    ),
                )
            )
            out.append((f"predict {key} {i}", lambda k=key, im=img: explore.predict(im, k)))
        out.append((f"model {key}", lambda k=key: model_tab.model_view(k, 12)))
    out.append(("compare", lambda: compare.compare(IMAGES[0], "cifar10", tv_key, method="LeGrad")))
    out.append(("explain mnist", lambda: explore.explain(DIGIT, "mnist", "max", 0.5, PREDICTED, 3, 4, 10)))
    out.append(("steps mnist", lambda: steps_tab.steps_api(DIGIT, "mnist", 4, 3)))
    return out


@contextlib.contextmanager
def sharing_nothing():
    """Inside: no result is shared between calls (vitviz.app.serving.shared keeps nothing)."""
    bound = shared.SHARED.bound
    shared.SHARED.bound = lambda: 0
    shared.SHARED.clear()
    try:
        yield
    finally:
        shared.SHARED.bound = bound


def run_all(jobs, threads: int, rounds: int, seed: int = 0) -> dict[str, list]:
    """Every job `rounds` times, in a shuffled order, on `threads` threads at once; {name: [canonical reply or
    the exception]}."""
    order = [job for job in jobs for _ in range(rounds)]
    random.Random(seed).shuffle(order)
    start = threading.Barrier(threads)

    def one(job):
        name, fn = job
        try:
            return name, canonical(fn())
        except Exception as e:  # noqa: BLE001 - the test reports every failure, whatever it is
            return name, e

    def first(job):
        try:
            start.wait(timeout=30)
        except threading.BrokenBarrierError:
            pass
        return one(job)

    got: dict[str, list] = {}
    with ThreadPoolExecutor(threads) as pool:
        for name, reply in pool.map(first, order[:threads]):
            got.setdefault(name, []).append(reply)
        for name, reply in pool.map(one, order[threads:]):
            got.setdefault(name, []).append(reply)
    return got


def test_every_endpoint_answers_alone_and_in_a_crowd_the_same(small_data, shared_torchvision):
    torch.set_num_threads(2)
    jobs = calls(shared_torchvision)
    with sharing_nothing():  # each reference computed alone, nothing of another call's results used
        alone = {name: canonical(fn()) for name, fn in jobs}
    shared.SHARED.clear()  # the crowd computes the shared results at once, on several threads
    crowd = run_all(jobs, threads=8, rounds=2)
    errors = {n: r for n, rs in crowd.items() for r in rs if isinstance(r, Exception)}
    assert not errors, f"{len(errors)} calls failed under load, e.g. {next(iter(errors.items()))}"
    different = sorted(n for n, rs in crowd.items() for r in rs if r != alone[n])
    assert not different, f"{len(different)} replies differ from the same call made alone: {different[:5]}"
    assert sum(len(rs) for rs in crowd.values()) == 2 * len(jobs)


def test_a_training_models_snapshot_is_drawn_while_it_trains():
    """Live-run snapshots draw from the training model between steps; an explain on another thread at the
    same moment must neither change its mode nor see its tensors."""
    from vitviz.explain import interpret
    from vitviz.models.hub import loaded
    from vitviz.models.vit import ViT, make_config

    torch.manual_seed(0)
    training = ViT(make_config("tiny", embed_dim=32, depth=2, num_heads=4, dropout=0.1)).train()
    net = ViT(make_config("tiny", embed_dim=32, depth=2, num_heads=4)).eval()
    torch.nn.init.normal_(net.head.weight, std=0.5)
    shared, snapshot = loaded(net), loaded(training)  # records, as the app and the live run hold them
    x = torch.randn(2, 3, 32, 32)
    want = interpret.attention_and_relevance(shared, x)
    stop, seen_modes, replies = threading.Event(), set(), []

    def train_steps():
        opt = torch.optim.SGD(training.parameters(), lr=0.01)
        for _ in range(30):
            seen_modes.add(training.training)
            loss = training(torch.randn(8, 3, 32, 32)).logsumexp(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            interpret.attention_maps(snapshot, x)  # a snapshot between steps, as the live run draws them
        stop.set()

    def explain():
        while not stop.is_set() and len(replies) < 200:
            replies.append(interpret.attention_and_relevance(shared, x))

    t = threading.Thread(target=train_steps)
    e = threading.Thread(target=explain)
    t.start(), e.start()
    t.join(120), e.join(120)
    assert seen_modes == {True} and training.training and not net.training
    assert replies
    for r in replies:
        for k in ("logits", "attn", "grad_rollout", "lens", "norms"):
            assert torch.equal(r[k], want[k]), k


def test_no_hook_is_left_or_used(tiny_model, tiny):
    """The forward returns what the pictures need: no hook is ever registered on a shared model."""
    from vitviz.explain import interpret, methods

    x = torch.randn(1, 3, 32, 32)
    calls_seen = []
    real = torch.nn.Module.register_forward_hook

    def spy(self, *a, **k):
        calls_seen.append(type(self).__name__)
        return real(self, *a, **k)

    torch.nn.Module.register_forward_hook = spy
    try:
        interpret.attention_and_relevance(tiny, x)
        interpret.walk(tiny, x)
        interpret.token_norms(tiny, x)
        for name in methods.METHODS:
            methods.relevance(tiny, x, name)
        interpret.forward_with_attention(loaded(small_torchvision_vit()), x, grad=True)
    finally:
        torch.nn.Module.register_forward_hook = real
    assert calls_seen == []
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in tiny_model.modules())


def test_the_reference_is_not_trivially_equal():
    """The comparison can fail: two different calls give different canonical replies."""
    a = canonical(explore.explain(IMAGES[0], "cifar10", patch=5))
    b = canonical(explore.explain(IMAGES[1], "cifar10", patch=5))
    assert a != b


def test_the_same_picture_answered_at_once_is_never_read_half_written(tmp_path):
    """Two replies holding the same picture go to the same cache file. Gradio's own gr.Image rewrites it in
    place, and a reader between the truncation and the write gets an empty file (seen in CI as
    "cannot identify image file"); vitviz's pictures are written aside and renamed into place."""
    from vitviz.app import widgets

    pic = widgets.pic("p")
    pic.GRADIO_CACHE = str(tmp_path)
    arr = np.random.default_rng(0).integers(0, 255, (448, 448, 3), dtype=np.uint8)

    def writer_and_reader(_):
        bad = 0
        for _ in range(40):
            path = pic.postprocess(arr).path
            try:
                with Image.open(path) as im:
                    bad += not np.array_equal(np.asarray(im.convert("RGB")), arr)
            except OSError:
                bad += 1
        return bad

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(writer_and_reader, range(8))) == 0
    assert [p.suffix for p in tmp_path.rglob("*") if p.is_file()] == [".png"]  # one file, nothing left aside


def test_six_clients_through_the_running_app_get_what_one_gets_alone(small_data):
    """The same through Gradio: six gradio_client clients at once, on every endpoint that draws."""
    from gradio_client import Client, handle_file
    from helpers import free_port

    from vitviz.app import build_demo, launch

    demo = build_demo()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        paths = [im["path"] for im in IMAGES]
        jobs = []
        for i, path in enumerate(paths):
            jobs += [
                (
                    f"explain {i}",
                    "/explain",
                    dict(
                        image=handle_file(path),
                        patch=(3, 30, 60)[i],
                        method=("LeGrad", "gradient rollout", "occlusion")[i],
                    ),
                ),
                (f"steps {i}", "/steps", dict(image=handle_file(path), block=1 + i, patch=i * 7)),
                (f"take_away {i}", "/take_away", dict(image=handle_file(path), k=4 + i)),
                (f"predict {i}", "/predict", dict(image=handle_file(path))),
            ]
        jobs.append(("compare", "/compare", dict(image=handle_file(paths[1]), model_b="cifar10/random-head")))
        jobs.append(("export", "/export", dict(image=handle_file(paths[2]), patch=11)))
        one = Client(url, verbose=False)
        with sharing_nothing():
            alone = {name: canonical(one.predict(api_name=api, **kw)) for name, api, kw in jobs}
        shared.SHARED.clear()
        clients = [Client(url, verbose=False) for _ in range(6)]
        order = [job for job in jobs for _ in range(2)]
        random.Random(1).shuffle(order)

        def client_loop(k: int):
            out = []
            for name, api, kw in order[k::6]:
                try:
                    out.append((name, canonical(clients[k].predict(api_name=api, **kw))))
                except Exception as e:  # noqa: BLE001 - reported below
                    out.append((name, e))
            return out

        with ThreadPoolExecutor(6) as pool:
            replies = [r for rs in pool.map(client_loop, range(6)) for r in rs]
    finally:
        demo.close()
    assert len(replies) == len(order)
    errors = [(n, r) for n, r in replies if isinstance(r, Exception)]
    assert not errors, errors[:3]
    different = [n for n, r in replies if r != alone[n]]
    assert not different, different
