"""The learning rate of each optimizer step of `train rl` (`--lr-schedule`, `--warmup-steps`).

An RL run's optimizer steps are known before it starts: iterations x epochs x mini-batches. The schedule is a
pure function of the step's global index, so a resumed run (which counts its steps in `state.json`) continues
the same curve, and nothing of it has to be saved beside the optimizer's state. The shapes are transformers'
(`get_constant_schedule_with_warmup`, `get_linear_schedule_with_warmup`, `get_cosine_schedule_with_warmup`):
a linear warmup to the base learning rate over `warmup_steps`, then constant, a linear decay or a half cosine
towards 0 at `total_steps`. One difference: the warmup's first step has lr / (warmup_steps + 1), not
transformers' 0 (an RL run has few steps; none of them should be a no-op).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

SCHEDULES = ("constant", "linear", "cosine")


@dataclass(frozen=True)
class LRSchedule:
    """`lr` the base learning rate; `kind` one of :data:`SCHEDULES`; `total_steps` the run's optimizer steps."""

    lr: float
    kind: str = "constant"
    warmup_steps: int = 0
    total_steps: int = 1

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise ValueError(f"lr schedule {self.kind!r}: use {', '.join(SCHEDULES)}")
        if self.warmup_steps < 0 or self.total_steps < 1:
            raise ValueError("warmup_steps must be >= 0 and total_steps >= 1")

    @property
    def inert(self) -> bool:
        """A constant learning rate without warmup: the optimizer's own lr is left as it is."""
        return self.kind == "constant" and self.warmup_steps == 0

    def factor(self, step: int) -> float:
        """The multiplier of the base rate at optimizer step `step` (0-based), as transformers computes it."""
        if step < self.warmup_steps:
            return float(step + 1) / float(self.warmup_steps + 1)
        if self.kind == "constant":
            return 1.0
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, float(step - self.warmup_steps) / float(span))
        if self.kind == "linear":
            return max(0.0, 1.0 - progress)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    def lr_at(self, step: int) -> float:
        return self.lr * self.factor(step)

    def apply(self, optimizer: Any, step: int) -> float:
        """Set every parameter group's learning rate for step `step`; returns it."""
        lr = self.lr_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr
