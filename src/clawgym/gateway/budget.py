"""Per-trajectory budgets the gateway enforces: model calls, tokens and wall time of one trajectory.

A black-box agent (OpenClaw) has no loop breaker of its own: a model that keeps calling tools would run until
the episode's wall-time limit. The gateway sees every call, so it is where a runaway trajectory is ended: once
a trajectory has used its budget, its next call is refused with HTTP 400 and an error of type
`budget_exceeded` (a 400 makes OpenAI-compatible agents give up at once; a 429 or 5xx would make them retry).
The refused call is not a step (it never reached the model); the trajectory's spend says which limit ended it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass

BUDGET_ERROR_TYPE = "budget_exceeded"


@dataclass(frozen=True)
class Budget:
    """Limits of one trajectory; None means unlimited."""

    max_steps: int | None = None  # model calls let through
    max_tokens: int | None = None  # prompt + completion tokens over the trajectory (as the upstream reports them)
    max_wall_s: float | None = None  # seconds since the trajectory's first call

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.max_steps, self.max_tokens, self.max_wall_s))


@dataclass
class Spend:
    steps: int = 0
    tokens: int = 0
    first_call: float | None = None  # time.monotonic() of the first call
    refused: int = 0
    exceeded: str | None = None  # steps | tokens | wall_time: the limit that refused a call
    message: str | None = None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["wall_s"] = None if self.first_call is None else round(time.monotonic() - self.first_call, 3)
        del d["first_call"]
        return d


class BudgetBook:
    """What each trajectory has spent, and whether its next call may go through. Thread-safe."""

    def __init__(self, budget: Budget | None = None):
        self.budget = budget or Budget()
        self._spend: dict[str, Spend] = {}
        self._lock = threading.Lock()

    def admit(self, trajectory: str) -> str | None:
        """Count a call of `trajectory`; None when it may go through, else why not (the call is refused)."""
        b = self.budget
        now = time.monotonic()
        with self._lock:
            s = self._spend.setdefault(trajectory, Spend())
            if s.first_call is None:
                s.first_call = now
            why = None
            if b.max_steps is not None and s.steps >= b.max_steps:
                why = "steps", f"{s.steps} model calls (limit {b.max_steps})"
            elif b.max_tokens is not None and s.tokens >= b.max_tokens:
                why = "tokens", f"{s.tokens} tokens (limit {b.max_tokens})"
            elif b.max_wall_s is not None and now - s.first_call >= b.max_wall_s:
                why = "wall_time", f"{now - s.first_call:.1f} s since its first call (limit {b.max_wall_s:g} s)"
            if why is None:
                s.steps += 1
                return None
            s.refused += 1
            s.exceeded = s.exceeded or why[0]
            s.message = s.message or f"the trajectory's budget is used up: {why[1]}"
            return f"clawgym gateway: trajectory {trajectory!r} stopped: {why[1]}"

    def charge(self, trajectory: str, usage: dict) -> None:
        tokens = usage.get("total_tokens")
        if tokens is None:
            tokens = (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
        with self._lock:
            self._spend.setdefault(trajectory, Spend()).tokens += int(tokens or 0)

    def spend(self, trajectory: str) -> dict:
        with self._lock:
            return (self._spend.get(trajectory) or Spend()).as_dict()
