"""Learning-rate schedules: a pure function of the step, so a resumed run needs no state.

- ``cosine`` (stage 1): linear warmup from 0 to the peak over ``warmup_steps``, then cosine
  down to ``min_lr_ratio * peak`` at ``total_steps`` (and held there after).
- ``linear_decay`` (stage 2): from ``start_lr`` (by default the learning rate stored in the
  stage-1 checkpoint) linearly down, reaching exactly zero one step *after* ``total_steps``:
  step ``s`` of ``T`` trains at ``start_lr * (1 - s / (T + 1))``, so the last step still
  trains (at ``start_lr / (T + 1)``) instead of spending a whole batch at lr 0; optional
  warmup (the decay then spans the steps after it the same way).
- ``constant``: warmup then the peak.

``lr_at(step)`` gives the rate used for the update that produces step ``step`` (1-based).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Schedule:
    kind: str
    peak_lr: float
    total_steps: int
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1

    def lr_at(self, step: int) -> float:
        if self.warmup_steps and step <= self.warmup_steps:
            return self.peak_lr * step / self.warmup_steps
        if self.kind == "constant":
            return self.peak_lr
        span = max(1, self.total_steps - self.warmup_steps)
        if self.kind == "cosine":
            frac = min(1.0, (step - self.warmup_steps) / span)
            floor = self.peak_lr * self.min_lr_ratio
            return floor + (self.peak_lr - floor) * 0.5 * (1.0 + math.cos(math.pi * frac))
        if self.kind == "linear_decay":
            # zero at total_steps + 1, a step that is never taken: the last step trains
            return self.peak_lr * max(0.0, 1.0 - (step - self.warmup_steps) / (span + 1))
        raise ValueError(f"unknown schedule kind {self.kind!r}")
