"""The training places: slots, a bounded line, one place per visitor, places given back."""

import threading

import pytest

from vitviz.app.serving.places import Places, Refused


def test_slots_then_a_bounded_line_first_come_first_served():
    p = Places(slots=1, queue=2)
    a = p.enter("a")
    b, c = p.enter("b"), p.enter("c")
    assert (a.ahead(), b.ahead(), c.ahead()) == (0, 1, 2) and p.counts() == (1, 2)
    with pytest.raises(Refused, match="queue is full: 1 run"):
        p.enter("d")
    assert a.wait(0) and not b.wait(0.01)
    a.leave()
    assert b.wait(0) and not c.wait(0) and c.ahead() == 1
    d = p.enter("d")
    assert p.counts() == (1, 2) and d.ahead() == 2


def test_one_place_per_session_and_per_api_address():
    p = Places(slots=1, queue=4)
    p.enter("s1", None)
    with pytest.raises(Refused, match="one per visitor"):
        p.enter("s1")
    api = p.enter("s2", "1.2.3.4")
    with pytest.raises(Refused, match="one per visitor"):
        p.enter("s3", "1.2.3.4")  # another client, the same caller
    p.enter("s4", "5.6.7.8")
    api.leave()
    p.enter("s5", "1.2.3.4")  # its place was given back


def test_a_waiting_place_starts_when_the_run_before_it_ends():
    p = Places(slots=1, queue=1)
    a, b = p.enter("a"), p.enter("b")
    started = threading.Event()

    def waiter():
        if b.wait(10):
            started.set()

    t = threading.Thread(target=waiter)
    t.start()
    assert not started.wait(0.2)
    a.leave()
    t.join(10)
    assert started.is_set()
