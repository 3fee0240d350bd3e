"""How fast a live run trains now, against the best seen in this process for the same model and batch.

The machine is shared, and a run's time budget is wall-clock seconds: while other visitors' requests take the
cores, the run makes fewer steps in its budget, and its visitor is told so.
"""

from __future__ import annotations

_BEST_PACE: dict[tuple, float] = {}  # the fastest images/s seen in this process for a model and batch size


class Pace:
    """How fast this run trains now against the best seen here for the same model and batch: the machine is
    shared, and a run's time budget is wall-clock seconds, so while other visitors' requests take the cores
    the run makes fewer steps in its budget. The visitor is told when that happens."""

    def __init__(self, key: tuple = (), window: int = 5, others=None):
        self.recent: list[float] = []
        self.key, self.window = key, window
        self.others = others or (lambda: 0)  # how many other requests share the machine now
        self.best = _BEST_PACE.get(key, 0.0) if key else 0.0

    def _now(self) -> float | None:
        """The speed now: the median of the last `window` reports (None until there are that many)."""
        return sorted(self.recent)[self.window // 2] if len(self.recent) == self.window else None

    def add(self, images_per_s: float) -> None:
        self.recent = (self.recent + [images_per_s])[-self.window :]
        if self._now() is not None:
            self.best = max(self.best, self._now())
            if self.key:
                _BEST_PACE[self.key] = max(_BEST_PACE.get(self.key, 0.0), self.best)

    def share(self) -> float | None:
        """The current speed as a fraction of the best seen."""
        now = self._now()
        return now / self.best if now is not None and self.best else None

    def note(self) -> str:
        s, busy = self.share(), self.others()
        if busy and (s is None or s < 0.9):
            pace = f"training at {100 * s:.0f}% of the best speed seen here for this model; " if s else ""
            return (
                f"  \n**Slowed by other visitors:** {busy} other request(s) share the machine now; {pace}"
                "the time budget is wall-clock time, so this run makes fewer steps."
            )
        if s is not None and s < 0.7:
            return (
                f"  \n**Slowed down:** training at {100 * s:.0f}% of the best speed seen here for this model; "
                "the time budget is wall-clock time, so this run makes fewer steps."
            )
        return ""


def fmt_time(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(max(0, s))
    return f"{s // 60}:{s % 60:02d}"
