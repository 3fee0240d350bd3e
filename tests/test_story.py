"""The story across tabs, below the browser: Compare's pair and its one class, a link to a view read back,
a run's own model card, epoch points only for ended epochs, and the drawing style (Large type, patch numbers)
reaching the pictures."""

import copy
from pathlib import Path

import gradio as gr
import matplotlib
import numpy as np
from helpers import EXAMPLE, skipped
from PIL import Image

from vitviz.app import link, menu
from vitviz.app.inputs import read_image
from vitviz.app.state import Visitor
from vitviz.app.tabs import compare
from vitviz.data import gallery
from vitviz.models.hub import loaded
from vitviz.pictures import draw, explanation, figures
from vitviz.pictures.panels import TITLE_PX, Scale, colorbar, panel, title_block
from vitviz.pictures.style import LARGE, Style, drawn_with
from vitviz.training import record


class Request:
    def __init__(self, **query):
        self.query_params = query


def test_compare_opens_on_a_pair_that_fits_and_explains_one_class_on_both_sides():
    assert compare.pair_for("cifar10", None) == ("cifar10", "cifar10/random-head")
    assert compare.pair_for("mnist", None) == ("mnist", "mnist/random-head")
    out = dict(zip(compare.API.names, compare.compare(EXAMPLE, "cifar10", "mnist", target="cat")))
    assert out["note_a"] == "" and "no class 'cat'" in out["note_b"]  # the digit model says what it explains
    alone = dict(zip(compare.API.names, compare.compare(EXAMPLE, "cifar10", "cifar10", target="cat")))
    assert np.array_equal(alone["class_map_a"], out["class_map_a"])  # a side does not depend on the other
    predicted = dict(zip(compare.API.names, compare.compare(EXAMPLE, "cifar10", "cifar10")))
    assert not np.array_equal(predicted["class_map_a"], out["class_map_a"])  # 'cat' is not the prediction here
    # each side's pictures name their model: the left's picture is the bare one under a line naming it
    model = menu.resolve_model("cifar10")
    ex = explanation.analyse(model, model.pixels(read_image(EXAMPLE)))
    bare, _ = compare.explore_pictures.render_explore(model, ex, compare.explore_pictures.Options(), compact=True)
    named = predicted["rollout_a"]
    title = title_block(model.card.title, named.shape[1])
    assert np.array_equal(named[: title.shape[0]], title) and np.array_equal(named[title.shape[0] :], bare.rollout)
    choices = compare.class_choices("cifar10", "mnist", None)["choices"]
    assert choices[0] == "predicted class" and "cat" in choices and "7" in choices  # both sides' classes


def test_a_link_is_read_back_as_it_was_written_and_refuses_strange_values(tmp_path):
    v = Visitor()
    v.crossing.new_image("cifar10", 7)
    query = link.view_query("mnist", "4", "LeGrad", 2, 3, 17, "max", 0.25, None, v)["value"]
    params = dict(p.split("=", 1) for p in query[1:].split("&"))
    wanted, note, image = link.from_link(Request(**{k: v.replace("%3A", ":") for k, v in params.items()}), v)
    assert wanted == {"model": "mnist", "class": "4", "method": "LeGrad", "layer": 2, "head": 3, "token": 17,
                      "fusion": "max", "discard": 0.25}  # fmt: skip
    assert image == gallery.items("cifar10")[7][0] and note == ""
    wanted, note, image = link.from_link(Request(layer="x", method="saliency", discard="5"), v)
    assert wanted == {} and "layer" in note and "method" in note and "discard" in note
    # a link can name only a file this server keeps (Gradio's own folder), never another file on it
    for name in ("/etc/passwd", "../../etc/passwd", "x/../../../etc/hosts"):
        _, note, image = link.from_link(Request(image=name), v)
        assert image is None and "no longer kept" in note, name
    kept = Path(gr.utils.get_upload_folder()) / "abc123" / "mine.png"
    kept.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8)).save(kept)
    try:
        mine = Visitor()
        mine.crossing.new_image("cifar10", None, own=str(kept))  # the visitor's upload is shown
        query = link.view_query("cifar10", "", "LeGrad", 6, 1, -1, "mean", 0, str(kept), mine)["value"]
        assert "image=abc123%2Fmine.png" in query and "tmp" not in query  # its name there, not a server path
        assert link.from_link(Request(image="abc123/mine.png"), v)[2] == str(kept.resolve())
    finally:
        kept.unlink()
    assert link.from_link(None, v) == ({}, "", None)  # a plain visit asks nothing
    out = link.opened("cifar10", v, Request(model="mnist", token="5", fusion="min"))
    fitted = dict(zip(link.OPENED, out))
    assert fitted["wanted"] == {"model": "mnist", "token": 5} and fitted["fusion"] == "min"
    assert skipped(fitted["method"]) and skipped(fitted["image"])
    changed = link.fit(fitted["wanted"], Visitor(), "predicted class", 6, 1, -1)
    assert changed[0] == "mnist" and changed[5]["value"] == 5  # the link's model and token, fitted to it


def test_a_run_made_here_carries_its_own_record():
    from vitviz.training.config import TrainConfig

    cfg = TrainConfig.parse(dataset="mnist", preset="tiny", epochs=2)
    model = copy.deepcopy(loaded(menu.resolve_model("mnist")).module)
    history = [
        {"epoch": 1.0, "step": 10, "val_acc": 0.5, "val_loss": 1.4, "elapsed": 9.0},
        {"epoch": 1.5, "step": 15, "val_acc": 0.61, "val_loss": 1.2, "elapsed": 14.0},
    ]
    final = record.run_record(model, cfg, history, 15, 14.2)
    card = final.card
    assert card.name.startswith("Your MNIST ViT (trained here") and card.metrics["val_acc"] == 0.61
    assert card.train["dataset"] == "mnist" and len(card.history) == 2
    text = explanation.model_card(loaded(final))
    assert "Your MNIST ViT" in text and "15 steps" in text and "14 s of training" in text and "61.00%" in text
    snap = record.run_record(copy.deepcopy(model), cfg, history[:1], None, None)
    assert "after epoch 1" in snap.card.name and snap.card.metrics["val_acc"] == 0.5


def test_only_ended_epochs_get_points_and_the_train_point_sits_on_its_steps():
    steps = [(e / 10, 2.3 - e / 20) for e in range(1, 16)]
    history = [
        {"epoch": 1.0, "train_loss": 2.0, "val_loss": 1.9, "train_acc": 0.3, "val_acc": 0.35},
        {"epoch": 1.5, "train_loss": 1.8, "val_loss": 1.7, "train_acc": 0.4, "val_acc": 0.45},  # stopped here
    ]
    fig = figures.curves_figure(history, steps, stopped=True)
    loss = fig.axes[0]
    lines = {line.get_label(): line for line in loss.get_lines()}
    assert list(lines["train loss (epoch mean)"].get_xdata()) == [0.5]  # the first epoch's middle
    assert list(lines["validation loss (epoch end)"].get_xdata()) == [1.0]
    assert list(lines["validation where you stopped"].get_xdata()) == [1.5]  # not drawn as an epoch
    ended = figures.curves_figure(history, steps)  # the same run ended by its time budget: no stop is claimed
    labels = {line.get_label() for line in ended.axes[0].get_lines()}
    assert "validation at the run's end" in labels and "validation where you stopped" not in labels
    early = figures.curves_figure([{**history[0], "epoch": 0.17}], steps[:2])
    assert "train loss (epoch mean)" not in {line.get_label() for line in early.axes[0].get_lines()}
    one = figures.curves_figure([], [(0.0275, 2.3)])  # the first step alone: an axis from 0, a few ticks
    for ax in (one.axes[0],):
        lo, hi = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert lo == 0 and hi >= 0.05 and 2 <= len(ticks) <= 6 and len({f"{t:g}" for t in ticks}) == len(ticks)


def test_large_type_draws_the_pictures_text_larger_and_patch_numbers_fit_a_corner():
    img = np.full((64, 400, 3), 255, np.uint8)
    scale = Scale("attention weight", 0.0, 0.5)
    normal = panel(img, "Attention rollout from CLS", scale)
    with drawn_with(Style.of(large=True)):
        large = panel(img, "Attention rollout from CLS", scale)
        fig = figures.curves_figure([], [(0.1, 2.0)])
        figures.figure_to_array(fig)

    def ink(block: np.ndarray) -> int:  # how tall the drawn letters are, top of the tallest to the lowest
        rows = np.nonzero((block < 120).all(-1).any(1))[0]
        return int(rows[-1] - rows[0] + 1)

    t_normal, t_large = title_block("Attention rollout", 400), None
    with drawn_with(Style.of(large=True)):
        t_large = title_block("Attention rollout", 400)
    assert ink(t_large) >= 1.4 * ink(t_normal)  # the title's letters half as large again
    bar_normal = colorbar(320, scale)[16:]  # the colour bar's numbers and caption, under its gradient
    with drawn_with(Style.of(large=True)):
        bar_large = colorbar(320, scale)[24:]
    assert ink(bar_large) >= 1.3 * ink(bar_normal) and large.shape[0] > normal.shape[0]  # two lines, one gap
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]
    assert min(sizes) >= LARGE * 7  # every text of the figure enlarged (the smallest was 8 pt)
    assert TITLE_PX * LARGE <= 23
    for side, grid in ((256, 8), (224, 7), (448, 16), (224, 14)):
        step = side / grid
        size = draw.number_size(step, str(grid * grid - 1))
        if size is not None:
            w = draw.font(size).getlength(str(grid * grid - 1)) + 3
            assert w <= step / 2 and size + 3 <= step / 2  # at most a corner of its patch
        with drawn_with(Style.of(large=True)):
            big = draw.number_size(step, str(grid * grid - 1))
        if big is not None:  # Large type: larger, within three quarters of the patch
            assert big >= (size or 0) and draw.font(big).getlength(str(grid * grid - 1)) + 3 <= 0.75 * step
    normal_numbers = draw.number_size(32, "63")  # the shipped model's grid (8 x 8 on 256 px)
    with drawn_with(Style.of(large=True)):  # read from a back row: half as large again
        assert draw.number_size(32, "63") >= 1.4 * normal_numbers
    grid_on = np.asarray(draw.draw_grid(np.zeros((256, 256, 3), np.uint8), 8))
    with drawn_with(Style.of(numbers=False)):
        grid_off = np.asarray(draw.draw_grid(np.zeros((256, 256, 3), np.uint8), 8))
    assert (grid_on > 128).sum() > (grid_off > 128).sum()  # the numbers are white strokes: gone when off
    lines_only = np.asarray(draw.draw_grid(np.zeros((256, 256, 3), np.uint8), 8, numbers=False))
    assert np.array_equal(grid_off, lines_only)


def test_the_components_are_labelled_with_their_share_of_the_variance():
    model = menu.resolve_model("cifar10")
    images = [model.pixels(Image.open(p)) for p, _ in gallery.items("cifar10")[:4]]
    s = explanation.summarise_model(model, images)
    shares = [100 * float(v) for v in s.variance]
    assert sum(shares) <= 100 + 1e-6 and shares == sorted(shares, reverse=True)
    picture = explanation.components_picture(s)
    bare = draw.components_image(s.components, tile_size=64)
    assert picture.shape[0] > bare.shape[0] + 2 * 14  # a label row over each row of components, and a note
    with drawn_with(Style.of(large=True)):
        assert explanation.components_picture(s).shape[0] > picture.shape[0]  # Large type reaches its labels


def test_an_own_image_gone_from_the_server_gives_way_to_an_example_said_beside_the_menu(tmp_path):
    from vitviz.app import choices, switch

    path = tmp_path / "mine.png"
    Image.new("RGB", (40, 40), (20, 200, 30)).save(path)
    v = choices.upload_image(str(path), "cifar10", Visitor())[2]
    assert switch.controls_for("mnist", v)[7] == gallery.items("mnist")[3][0]  # a digit stands in
    path.unlink()  # the server let the upload go
    back = switch.controls_for("cifar10", v)
    assert back[7] == gallery.items("cifar10")[3][0] and "no longer kept" in back[9]
    assert v.crossing.example == 3 and v.crossing.own is None and not v.crossing.stand_in
    assert skipped(switch.controls_for("cifar10", v)[7])  # and nothing more changes
