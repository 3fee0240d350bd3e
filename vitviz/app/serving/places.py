"""The training places: who trains now, who waits, and the rule of one place per visitor.

`VITVIZ_TRAIN_SLOTS` runs train at once (default 1) and at most `VITVIZ_TRAIN_QUEUE` visitors
wait behind them (default 4), first come first served. A visitor holds at most one place,
waiting or training: a page visitor is known by their session, an API caller also by their
address, so one anonymous caller cannot take the whole line by opening many clients. A place
is given back when its run ends, fails or is abandoned (the handler's generator is closed).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from vitviz.app.serving import limits


class Refused(Exception):
    """No place: the sentence says why."""


@dataclass(eq=False)
class Place:
    owners: frozenset  # ("session", hash) and, for an API caller, ("address", host)
    places: Places

    def ahead(self) -> int:
        """This place's position among the waiting (1: next to train), 0 once it trains."""
        return self.places.ahead(self)

    def wait(self, timeout: float) -> bool:
        """True once this place may train (within `timeout` seconds), else False."""
        return self.places.wait(self, timeout)

    def leave(self) -> None:
        self.places.leave(self)


class Places:
    def __init__(self, slots: int | None = None, queue: int | None = None):
        self._slots, self._queue = slots, queue
        self._line: list[Place] = []  # training ones first, then the waiting ones in order
        self._cond = threading.Condition()

    @property
    def slots(self) -> int:
        return int(self._slots if self._slots is not None else limits.get("VITVIZ_TRAIN_SLOTS"))

    @property
    def queue(self) -> int:
        return int(self._queue if self._queue is not None else limits.get("VITVIZ_TRAIN_QUEUE"))

    def enter(self, session: str | None, address: str | None = None) -> Place:
        """A place in line for this visitor; Refused with a sentence when they hold one already or the line is
        full."""
        owners = frozenset(o for o in (("session", session), ("address", address)) if o[1])
        with self._cond:
            if any(p.owners & owners for p in self._line):
                raise Refused(
                    "You already have a training run going or waiting (one per visitor): stop it, or "
                    "wait for it to finish, before starting another."
                )
            running = min(len(self._line), self.slots)
            waiting = len(self._line) - running
            if running >= self.slots and waiting >= self.queue:
                raise Refused(
                    f"The training queue is full: {running} run(s) training and {waiting} visitor(s) "
                    "waiting. Please try again in a few minutes."
                )
            place = Place(owners, self)
            self._line.append(place)
            return place

    def ahead(self, place: Place) -> int:
        with self._cond:
            i = self._line.index(place) if place in self._line else 0
            return max(0, i - self.slots + 1)

    def wait(self, place: Place, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: place not in self._line or self._line.index(place) < self.slots, timeout)

    def leave(self, place: Place) -> None:
        with self._cond:
            if place in self._line:
                self._line.remove(place)
            self._cond.notify_all()

    def counts(self) -> tuple[int, int]:
        """(runs training, visitors waiting)."""
        with self._cond:
            running = min(len(self._line), self.slots)
            return running, len(self._line) - running


PLACES = Places()
