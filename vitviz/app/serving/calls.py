"""How many calls of the agents' tools (vitviz.app.tools) run at once on a shared machine.

The tools answer outside Gradio's queue (its queued path returns an agent only the text of a reply with
several outputs), so they keep their own bound, as the page's events keep theirs in the queue: at most
VITVIZ_TOOL_SLOTS calls at once (default 4, as each of the page's endpoints), and a call that finds them all
taken waits at most VITVIZ_TOOL_WAIT_S seconds (default 60), with at most VITVIZ_QUEUE_SIZE calls waiting;
past either, the caller is told to come back, before anything is computed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import gradio as gr

from vitviz.app.serving import limits


class Slots:
    """The running and waiting tool calls, counted under one lock."""

    def __init__(self):
        self._lock = threading.Condition()
        self.running = 0
        self.waiting = 0

    @contextlib.contextmanager
    def taken(self) -> Iterator[None]:
        """Hold a slot for the duration of the block; a gr.Error with the sentence when none comes in time."""
        most, wait = int(limits.get("VITVIZ_TOOL_SLOTS")), limits.get("VITVIZ_TOOL_WAIT_S")
        with self._lock:
            if self.running >= most and self.waiting >= limits.queue_size():
                raise gr.Error(busy(self.running, self.waiting))
            self.waiting += 1
            try:
                got = self._lock.wait_for(lambda: self.running < most, timeout=wait)
            finally:
                self.waiting -= 1
            if not got:
                raise gr.Error(busy(self.running, self.waiting))
            self.running += 1
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1
                self._lock.notify()


def busy(running: int, waiting: int) -> str:
    return (
        f"The app is busy: {running} tool calls are running and {waiting} are waiting, the most this machine "
        "takes at once. Try again in a minute."
    )


SLOTS = Slots()
