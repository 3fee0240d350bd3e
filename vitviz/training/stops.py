"""How a visitor's Stop reaches their run: a threading.Event in this process, or a file that a run in a forked
ZeroGPU worker checks; one stop per visitor's session, cleared when the run ends."""

from __future__ import annotations

import threading

from vitviz.runtime import scratch


class FileStop:
    """A stop flag another process can see: the run's loop checks for a file (on ZeroGPU the run lives in a
    forked worker, where an in-process flag set by the Stop button would never arrive)."""

    def __init__(self):
        self.path = scratch.new_folder("stop") / "stop"

    def set(self) -> None:
        self.path.touch()

    def is_set(self) -> bool:
        return self.path.exists()


class Stops:
    """Per-session stop flags."""

    def __init__(self):
        self._events: dict[str, threading.Event | FileStop] = {}
        self._lock = threading.Lock()

    def new(self, key: str, across_processes: bool = False) -> threading.Event | FileStop:
        with self._lock:
            ev = FileStop() if across_processes else threading.Event()
            self._events[key] = ev
            return ev

    def stop(self, key: str) -> bool:
        with self._lock:
            ev = self._events.get(key)
        if ev is None:
            return False
        ev.set()
        return True

    def stop_all(self) -> int:
        """Stop every run (the server is stopping); how many there were."""
        with self._lock:
            events = list(self._events.values())
        for ev in events:
            ev.set()
        return len(events)

    def clear(self, key: str, ev: threading.Event) -> None:
        with self._lock:
            if self._events.get(key) is ev:
                del self._events[key]

    def __len__(self):
        return len(self._events)


STOPS = Stops()
