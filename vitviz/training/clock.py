"""A run's clock: how long it has trained, whether its next step still fits its budget, and how many held-out
images its validations may take so that it ends within seconds of that budget, whatever its size.

Measured on 2 CPU cores at the Train tab's heaviest admitted shape (width 384, depth 12, patch 2), a 30 s
run of an earlier version of this change took 73 s: a step begun just before the budget ran out, then a
long validation. Now a timed run takes no step that would end past its budget (the run's end counted in:
as long as its last epoch's end took), and validates on as many images as a forward pass gets through in
a share of the budget, at the speed the run trained (`python benchmarks/run_memory.py` prints a run's
wall time against its budget).
"""

from __future__ import annotations

import time

from vitviz.training.config import TrainConfig

FORWARD_SPEEDUP = 3  # a forward pass costs about a third of a training step's forward and backward


class RunClock:
    def __init__(self, cfg: TrainConfig, step: int, batch: int, elapsed_before: float = 0.0):
        self.cfg, self.batch, self.before = cfg, batch, elapsed_before
        self.first_step = step  # where this session of the run began (a resumed run has steps before it)
        self.t0 = time.perf_counter() - elapsed_before
        self.step_s = 0.0  # a training step's time, lately
        self.end_s = 0.0  # the last epoch end's time (validation, checkpoint, snapshot): a run's end costs as much

    def elapsed(self) -> float:
        """Seconds the run has trained, its sessions before this one included."""
        return time.perf_counter() - self.t0

    def over(self) -> bool:
        """Whether a timed run's next step, and the end of the run after it, would end past its budget."""
        return (
            self.cfg.budget.time_budget > 0 and self.elapsed() + self.step_s + self.end_s >= self.cfg.budget.time_budget
        )

    def stepped(self, seconds: float) -> None:
        self.step_s = seconds if self.step_s == 0 else 0.8 * self.step_s + 0.2 * seconds

    def ended_epoch(self, seconds: float) -> None:
        self.end_s = seconds

    def validation_cap(self, step: int, share: float = 0.1) -> int:
        """A timed run's validation images: as many as a forward pass gets through in `share` of the budget (2 s
        at least), at the speed this run has trained (16 at least); 0 (all of them) for a run without a budget."""
        images, seconds = (step - self.first_step) * self.batch, self.elapsed() - self.before
        if self.cfg.budget.time_budget <= 0 or images <= 0:
            return 0
        rate = FORWARD_SPEEDUP * images / max(seconds, 1e-3)
        return max(16, int(rate * max(2.0, share * self.cfg.budget.time_budget)))
