"""The Take patches away tab, the class-map methods in Explore and Compare, and the randomised menu."""

import gradio as gr
import numpy as np
import pytest
import torch

from vitviz.app import menu
from vitviz.app.serving import limits
from vitviz.app.state import Visitor
from vitviz.app.tabs import compare, explore
from vitviz.app.tabs import removal as removal_tab
from vitviz.data import gallery
from vitviz.data.images import pixels_to_tensor
from vitviz.explain import methods
from vitviz.pictures import removal

EXAMPLE = {"path": gallery.items("cifar10")[3][0]}


def test_hiding_the_top_k_of_a_map_and_clicking_a_patch():
    v = Visitor()
    rv, v = removal_tab.view(EXAMPLE, "cifar10", "LeGrad", 5, state=v)
    s = v.removal.result
    want = set(s.maps["LeGrad"].argsort(descending=True)[:5].tolist())
    assert rv.hidden == want and rv.summary.startswith("**5 of 64 patches hidden.**")
    model = menu.resolve_model("cifar10")
    mask = torch.zeros(1, 64, dtype=torch.bool)
    mask[0, sorted(want)] = True
    with torch.no_grad():  # the prediction shown is the model's on the image with those patches at 0
        p = model(methods.hide(model, s.x, mask)).softmax(-1)[0]
    assert max(rv.top5.values()) == pytest.approx(float(p.max()), abs=1e-6)
    free, top = min(set(range(64)) - want), min(want)
    rv2, v = removal_tab.view(EXAMPLE, "cifar10", "LeGrad", 5, state=v, toggle=free)
    assert rv2.hidden == want | {free} and rv2.summary.startswith("**6 of 64") and "1 more you clicked" in rv2.summary
    rv3, v = removal_tab.view(EXAMPLE, "cifar10", "LeGrad", 5, state=v, toggle=top)  # one of the top 5 clicked back
    assert rv3.hidden == (want - {top}) | {free} and "1 of the top 5 clicked back" in rv3.summary
    ten = set(s.maps["LeGrad"].argsort(descending=True)[:10].tolist())
    rv4, v = removal_tab.view(EXAMPLE, "cifar10", "LeGrad", 10, state=v)  # the slider moves: the clicks stay on top
    assert rv4.hidden == ten ^ {free, top}
    _, v = removal_tab.view(EXAMPLE, "cifar10", "LeGrad", 5, state=v, toggle=free)
    rv5, v = removal_tab.view(EXAMPLE, "cifar10", "LeGrad", 5, state=v, toggle=top)
    assert rv5.hidden == want  # a second click undoes each
    assert not np.array_equal(rv.picture, rv2.picture)


def test_the_curves_are_the_maps_own_deletion_curves():
    v = Visitor()
    removal_tab.view(EXAMPLE, "cifar10", "occlusion", 0, state=v)
    s = v.removal.result
    model = menu.resolve_model("cifar10")
    t = torch.tensor([s.target])
    for name in ("occlusion", "gradient rollout", methods.RANDOM):
        c = methods.curves(model, s.x, s.maps[name][None], t, removal.STEPS)[0]
        torch.testing.assert_close(s.curves[name], c)
        assert s.auc[name] == pytest.approx(float(methods.auc(c[None])[0]), abs=1e-6)
    assert set(s.auc) == set(methods.METHODS) | {methods.RANDOM}


@pytest.mark.parametrize("large", [False, True])
def test_the_curves_legend_sits_inside_its_figure_clear_of_the_axis_words(large):
    from vitviz.pictures import figures
    from vitviz.pictures.style import Style, drawn_with

    v = Visitor()
    removal_tab.view(EXAMPLE, "cifar10", "LeGrad", 0, state=v)
    with drawn_with(Style.of(large=large)):
        fig = removal.curves_figure(v.removal.result, "a long class name", 0.2, 0.3)
        figures.figure_to_array(fig)  # laid out and drawn at this text size
    renderer = fig.canvas.get_renderer()
    whole = fig.bbox
    legend = fig.legends[0].get_window_extent(renderer)
    ax = fig.axes[0]
    assert whole.x0 <= legend.x0 and legend.x1 <= whole.x1 and whole.y0 <= legend.y0 and legend.y1 <= whole.y1
    for text in (ax.xaxis.label, ax.title, *ax.get_xticklabels()):
        assert not legend.overlaps(text.get_window_extent(renderer)), text.get_text()


def test_bad_input_to_the_tab_gets_a_sentence():
    with pytest.raises(gr.Error, match="The ranking must be one of"):
        removal_tab.removal_api(EXAMPLE, "cifar10", "saliency", 3)
    out = removal_tab.ranked(EXAMPLE, "cifar10", "LeGrad", "lots", None, None, Visitor())
    assert out[-1].startswith("⚠️ The number of patches")
    out = removal_tab.ranked(None, "cifar10", "LeGrad", 3, None, None, Visitor())
    assert out[-1].startswith("⚠️") and "Traceback" not in out[-1]


def test_a_model_over_the_budget_gets_cheap_maps_and_a_sentence(monkeypatch):
    monkeypatch.setenv("VITVIZ_MAX_MAP_GFLOP", "1")  # the shipped model's study takes about 42
    v = Visitor()
    rv, v = removal_tab.view(EXAMPLE, "cifar10", "LeGrad", 3, state=v)
    s = v.removal.result
    assert "occlusion" not in s.maps and not s.curves and len(rv.hidden) == 3
    with pytest.raises(gr.Error, match="VITVIZ_MAX_MAP_GFLOP"):
        removal_tab.view(EXAMPLE, "cifar10", "occlusion", 3, state=Visitor())
    out = explore.explain_page(
        EXAMPLE, "cifar10", "mean", 0.0, "predicted class", 6, 1, -1, 0.6, True, False, "occlusion", Visitor()
    )
    assert "VITVIZ_MAX_MAP_GFLOP" in out[-2]  # said beside the method and class menus
    left = compare.compare(EXAMPLE, "cifar10", "mnist", method="occlusion")
    assert "VITVIZ_MAX_MAP_GFLOP" in left[-2] and left[0] is None  # Compare says it under that side's menu


def test_vit_b_16_occlusion_is_over_the_default_budget():
    from torchvision.models import vit_b_16

    from vitviz.models.tv_vit import config_of

    cfg = config_of(vit_b_16(weights=None))
    gflop = methods.forward_gflop(cfg)
    assert 30 < gflop < 40  # ViT-B/16 is about 17.6 GMAC a 224x224 image
    assert limits.map_cost_note("Occlusion", 197, 197 * gflop)
    assert not limits.map_cost_note(
        "Occlusion", 65, 65 * methods.forward_gflop(menu.resolve_model("cifar10").card.config)
    )


def test_each_class_map_method_draws_its_own_map():
    from PIL import Image

    i = explore.explore_pictures.OUTPUT_NAMES.index("class_map")
    arrays = {}
    for m in methods.CLASS_MAPS:
        v = Visitor()  # its picture files live as long as it does
        arrays[m] = np.asarray(Image.open(explore.explain(EXAMPLE, "cifar10", method=m, state=v)[i]))
    assert len({a.tobytes() for a in arrays.values()}) == 3
    with pytest.raises(gr.Error, match="method"):
        explore.explain(EXAMPLE, "cifar10", method="saliency")
    out = compare.compare(EXAMPLE, "cifar10", "cifar10/random-head", method="LeGrad")
    assert out[-2:] == ("", "") and out[2] is not None


def test_the_randomised_models_are_the_shipped_one_with_random_weights():
    real = menu.resolve_model("cifar10")
    head = menu.resolve_model("cifar10/random-head")
    every = menu.resolve_model("cifar10/random-all")
    assert "head randomised" in head.card.name and not head.card.metrics
    assert not torch.equal(head.head.weight, real.head.weight)
    for (k, a), b in zip(real.module.state_dict().items(), head.module.state_dict().values()):
        if not k.startswith("head."):
            assert torch.equal(a, b), k
    assert all(
        not torch.equal(a, b)
        for k, a, b in zip(
            real.module.state_dict(), real.module.state_dict().values(), every.module.state_dict().values()
        )
        if k.endswith("weight") and "norm" not in k
    )
    x = pixels_to_tensor(np.zeros((32, 32, 3), np.uint8) + 100, real.card.mean, real.card.std)
    r1 = methods.relevance(real, x, "attention rollout")
    torch.testing.assert_close(r1, methods.relevance(head, x, "attention rollout"))
    assert menu.resolve_model("cifar10/random-head") is head  # made once, shared


def test_the_tab_follows_the_image_only_while_it_is_looked_at():
    v = Visitor()
    closed = removal_tab.follow(EXAMPLE, "cifar10", "LeGrad", 3, None, None, v)
    assert closed[0].get("__type__") == "update" and v.removal.result is None  # nothing computed while closed
    opened = removal_tab.open_tab(EXAMPLE, "cifar10", "LeGrad", 3, None, None, v)
    assert isinstance(opened[0], np.ndarray) and v.crossing.looking == "take-away"
    assert "3 of 64 patches hidden" in opened[4]
    menu.look_at("compare")(v)
    assert removal_tab.follow(EXAMPLE, "cifar10", "LeGrad", 3, None, None, v)[0].get("__type__") == "update"
