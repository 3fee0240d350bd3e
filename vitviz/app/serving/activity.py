"""How many visitor requests (other than training) are using the machine now.

The Explore, Step by step, Take patches away and Compare handlers run inside `with ACTIVITY:`; a training run's status
asks `ACTIVITY.recent()` to tell its visitor when they share the cores with others.
"""

from __future__ import annotations

import threading
import time


class Activity:
    def __init__(self, window: float = 5.0):
        self.window = window
        self._active = 0
        self._ended: list[float] = []
        self._lock = threading.Lock()

    def __enter__(self):
        with self._lock:
            self._active += 1
        return self

    def __exit__(self, *exc):
        now = time.monotonic()
        with self._lock:
            self._active -= 1
            self._ended = [t for t in self._ended if now - t < self.window] + [now]

    def recent(self) -> int:
        """Requests running now or finished within the last `window` seconds."""
        now = time.monotonic()
        with self._lock:
            self._ended = [t for t in self._ended if now - t < self.window]
            return self._active + len(self._ended)


ACTIVITY = Activity()
