"""bf16 or fp32 chosen by measuring (vitviz.runtime.speed): the rule on given timings, the real measurement on
this machine, the choice kept for the process, and where the choice is used (training, occlusion)."""

import threading
import time

import pytest
import torch

from vitviz.explain import interpret
from vitviz.models.fast_paths import attend
from vitviz.models.vit import ViT, make_config
from vitviz.runtime import speed
from vitviz.runtime.device import Precision, attention_path
from vitviz.training.precision import measure

CPU = torch.device("cpu")


@pytest.fixture
def clock(monkeypatch):
    """race as the values the timed functions return: the tests give the timings."""
    monkeypatch.setattr(speed, "race", lambda contenders, rounds=3: {k: fn() for k, fn in contenders.items()})
    monkeypatch.delenv("VITVIZ_BF16", raising=False)
    return monkeypatch


def passes_taking(fp32_s, bf16_s):
    return lambda choice: bf16_s if choice.bf16 else fp32_s


def test_bf16_is_chosen_where_it_is_faster_and_attention_by_its_fastest_path(clock):
    clock.setattr(speed, "matmul_gain", lambda device: 4.0)
    slow_fused_bf16 = {"fp32": 0.1, "bf16": 0.3, "matmuls": 0.2}.get
    c = speed.decide(CPU, passes_taking(1.0, 0.4), attention=slow_fused_bf16)
    assert c.bf16 and c.attention == "fp32"
    assert c.speedup == pytest.approx(2.5)
    assert c.reason == "bf16: 2.5x faster here; attention by the fused kernel in fp32"
    c = speed.decide(CPU, passes_taking(1.0, 0.4), attention={"fp32": 0.1, "bf16": 0.3, "matmuls": 0.04}.get)
    assert c.attention == "matmuls"
    assert c.reason == "bf16: 2.5x faster here; attention by bf16 matmuls, 2.5x the fp32 kernel's speed"
    tried = []
    speed.decide(CPU, lambda choice: tried.append(choice.attention) or 1.0, attention=slow_fused_bf16)
    assert tried == ["fp32", "fp32"]  # the whole passes run attention by the path chosen for it


def test_fp32_where_bf16_is_slow_without_running_a_step_in_bf16(clock):
    clock.setattr(speed, "matmul_gain", lambda device: 0.0125)  # an AVX2-only CPU: bf16 80x slower

    def never(choice):
        raise AssertionError("a whole step was timed although bf16 matmuls are slow here")

    c = speed.decide(CPU, never)
    assert not c.bf16 and c.speedup == 1.0
    assert c.reason.startswith("fp32: this CPU has no fast bf16")


def test_fp32_where_the_model_is_no_faster_in_bf16(clock):
    clock.setattr(speed, "matmul_gain", lambda device: 3.0)
    c = speed.decide(CPU, passes_taking(1.0, 0.98))
    assert not c.bf16 and c.reason.startswith("fp32: bf16 was no faster here")


def test_vitviz_bf16_0_chooses_fp32_without_measuring(monkeypatch):
    monkeypatch.setenv("VITVIZ_BF16", "0")
    monkeypatch.setattr(speed, "matmul_gain", lambda device: pytest.fail("measured"))
    c = speed.decide(CPU, lambda choice: pytest.fail("measured"))
    assert not c.bf16 and "VITVIZ_BF16=0" in c.reason


def test_the_real_measurement_agrees_with_its_own_timings_and_changes_nothing(tiny):
    """On this machine, whatever it is: the choice follows the timings it reports, and the model's weights,
    gradients and the random generator are as they were."""
    torch.manual_seed(3)
    model = ViT(make_config("tiny", embed_dim=32, depth=2, num_heads=4)).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    c = measure(model, CPU, batch_size=16)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    assert torch.equal(torch.get_rng_state(), rng)
    t = c.timings
    if "bf16" in t:  # the CPU's bf16 matmul was fast enough to time the model in both
        assert t["fp32"] > 0 and t["bf16"] > 0
        assert c.bf16 == (t["fp32"] / t["bf16"] >= speed.MIN_GAIN)
        fastest = min(speed.ATTENTION, key=lambda path: t[f"attention {path}"])
        assert c.attention == (fastest if c.bf16 else "fp32")
    else:
        assert not c.bf16 and c.reason.startswith("fp32")


def test_the_choice_is_measured_once_for_every_thread():
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return speed.fp32("fp32: test")

    got = []
    device = torch.device("meta")  # a key no other test uses
    threads = [threading.Thread(target=lambda: got.append(speed.chosen("test", device, slow))) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=10)
    assert len(calls) == 1 and len(got) == 6 and all(g is got[0] for g in got)


def test_precision_sets_the_attention_path_only_inside_and_only_for_its_thread():
    seen = {}
    for path in speed.ATTENTION:
        p = Precision(CPU, choice=speed.Choice(True, path, 2.0, "bf16: test"))
        with p():
            other: list[str] = []
            th = threading.Thread(target=lambda out=other: out.append(attention_path()))
            th.start()
            th.join(timeout=10)
            seen[path] = (attention_path(), torch.is_autocast_enabled("cpu"), other[0])
        assert attention_path() == "fp32"
    assert seen == {path: (path, True, "fp32") for path in speed.ATTENTION}
    with Precision(CPU, amp=False)():
        assert not torch.is_autocast_enabled("cpu")
    assert Precision(CPU, amp=False).choice.reason == "fp32: mixed precision is off"


@pytest.mark.parametrize("path", list(speed.ATTENTION))
def test_every_attention_path_gives_the_exact_attention_within_bf16_rounding(path):
    """Each path, forward and backward, against softmax(q k^T / sqrt(d)) v computed in fp64."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 17, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    ref = ((q @ k.transpose(-2, -1)) / 8**0.5).softmax(-1) @ v
    (gq,) = torch.autograd.grad(ref.sum(), [q])
    lq, lk, lv = (t.detach().bfloat16().requires_grad_() for t in (q, k, v))
    with Precision(CPU, choice=speed.Choice(True, path, 1.0, ""))():
        out = attend(lq, lk, lv, 8**-0.5)
    (glq,) = torch.autograd.grad(out.float().sum(), [lq])
    assert (out.double() - ref).abs().max() < 0.05
    assert (glq.double() - gq).abs().max() < 0.05


def test_a_model_gives_nearly_the_same_logits_by_every_attention_path(tiny):
    torch.manual_seed(0)
    model = ViT(make_config("tiny", embed_dim=32, depth=2, num_heads=4)).eval()
    torch.nn.init.normal_(model.head.weight, std=0.5)
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        exact = model(x)
        for path in speed.ATTENTION:
            with Precision(CPU, choice=speed.Choice(True, path, 1.0, ""))():
                assert (model(x).float() - exact).abs().max() < 0.1


@pytest.mark.parametrize("bf16", [False, True])
def test_occlusion_baseline_runs_in_the_same_precision_as_the_hidden_patches(tiny_model, bf16, tiny):
    """A patch already at the mean colour hides nothing: its effect is exactly 0 in either precision (a
    baseline in fp32 against occluded passes in bf16 would show about 0.005 there)."""
    x = torch.randn(2, 3, 32, 32)
    x[:, :, :4, :4] = 0  # patch 0 is the mean colour already
    occ = interpret.occlusion(tiny, x, bf16=bf16)
    assert torch.equal(occ[:, 0], torch.zeros(2))
    assert occ.abs().max() > 1e-3  # other patches do matter


def test_a_run_says_which_precision_it_took_and_why(tiny):
    from helpers import synthetic_cifar

    from vitviz.training.loop import TrainConfig, train

    tiny = dict(preset="tiny", embed_dim=32, depth=2, num_heads=2, batch_size=32, val_size=0, epochs=0.1)
    start = next(train(TrainConfig.of(**tiny), data=synthetic_cifar()))
    assert start["precision"] == speed.chosen("training", CPU, lambda: pytest.fail("measured twice")).reason
    assert start["precision"].startswith(("bf16: ", "fp32: "))
    start = next(train(TrainConfig.of(amp=False, **tiny), data=synthetic_cifar()))
    assert start["precision"] == "fp32: mixed precision is off"


@pytest.mark.bf16
def test_on_a_cpu_with_bf16_units_the_model_is_timed_in_both_precisions(tiny):
    """Native bf16 units make the small matmul faster in bf16, so the whole passes are timed in both."""
    model = ViT(make_config("tiny", embed_dim=32, depth=2, num_heads=4)).train()
    c = measure(model, CPU, batch_size=16)
    assert c.timings["matmul_gain"] >= speed.MIN_GAIN
    assert {"fp32", "bf16", "attention fp32", "attention bf16", "attention matmuls"} <= set(c.timings)
