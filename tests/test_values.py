"""One reader for a value sent from outside (vitviz.runtime.values), used by the page, the API, a link and the
Train form; and a run's settings in four parts (vitviz.training.config)."""

import gradio as gr
import pytest

from vitviz.app import inputs, link
from vitviz.runtime import values
from vitviz.training.config import PART_OF, PARTS, SETTINGS, ConfigError, TrainConfig


@pytest.mark.parametrize(
    "sent,words",
    [
        ("abc", "must be a number between 0 and 0.99, not `abc`"),
        (float("inf"), "must be a finite number"),
        ("nan", "must be a finite number"),
        (True, "written with the digits 0-9"),
        ("٣", "written with the digits 0-9"),
        (1.5, "must be between 0 and 0.99; 1.5 is out of range"),
        (-0.01, "out of range"),
        ([1], "must be a number"),
        (10**400, "must be a number"),
        ("", "needs a value"),
    ],
)
def test_a_strange_value_gets_the_same_sentence_at_every_door(sent, words):
    with pytest.raises(ValueError) as reader:
        values.number(sent, "The discard ratio", 0, 0.99)
    assert words in str(reader.value)
    with pytest.raises(gr.Error) as page:  # the page and the API (vitviz.app.inputs)
        inputs.number(sent, "The discard ratio", 0, 0.99)
    assert page.value.message == str(reader.value)
    if isinstance(sent, str) and sent:  # a link carries text only, and says nothing but "not used"
        assert link.READ["discard"](sent) is None


def test_numbers_in_range_come_back_as_sent():
    for v in (0, 0.25, "0.5", " 0.75 ", 0.99):
        assert values.number(v, "x", 0, 0.99) == float(v)
    assert values.number("3", "x", 1, 12, whole=True) == 3 and isinstance(values.number(3.0, "x", whole=True), int)
    assert values.number(None, "x", default=7) == 7
    with pytest.raises(ValueError, match="whole number"):
        values.number(2.5, "The batch size", whole=True)
    assert values.flag("Yes", "x") is True and values.flag(0, "x") is False
    with pytest.raises(ValueError, match="true or false"):
        values.flag("maybe", "Augmentation")


def test_a_link_reads_its_numbers_with_the_same_reader():
    assert link.READ["layer"]("3") == 3 and link.READ["token"]("-2") == -2 and link.READ["discard"]("0.5") == 0.5
    for bad in ("0", "2.5", "1e3", "٣", "3; drop", "99999999"):
        assert link.READ["layer"](bad) is None, bad


def test_the_train_form_refuses_with_the_readers_sentence():
    with pytest.raises(ConfigError) as e:
        TrainConfig.parse(lr="abc")
    with pytest.raises(ValueError) as reader:
        values.number("abc", "The learning rate", span="at most 1")
    assert str(e.value) == str(reader.value)
    with pytest.raises(ConfigError, match="The depth must be from 1 to 12; 13 is out of range"):
        TrainConfig.parse(depth=13)
    with pytest.raises(ConfigError, match="no training setting called"):
        TrainConfig.parse(learning_rate=1)


def test_every_setting_lives_in_one_part_and_comes_back_flat():
    names = [f for kind in PARTS.values() for f in kind.__dataclass_fields__]
    assert len(names) == len(set(names)) == len(SETTINGS) == len(PART_OF)
    cfg = TrainConfig.parse(depth="3", lr="0.01", batch_size=64, log_every=5, augment="no", dataset="mnist")
    assert (cfg.arch.depth, cfg.optim.lr, cfg.budget.batch_size, cfg.report.log_every) == (3, 0.01, 64, 5)
    assert cfg.optim.augment is False and cfg.budget.dataset == "mnist"
    assert TrainConfig.of(**cfg.settings()) == cfg  # a checkpoint's flat record gives the same run back
    other = cfg.but(lr=0.5, depth=4)
    assert (other.optim.lr, other.arch.depth, cfg.optim.lr, cfg.arch.depth) == (0.5, 4, 0.01, 3)
    assert other.budget == cfg.budget and other.report == cfg.report
    for name, v in cfg.settings().items():  # each part holds exactly its own names
        assert getattr(getattr(cfg, PART_OF[name]), name) == v
