"""Per-run sampling overrides the gateway imposes on every chat request it forwards.

A black-box agent (OpenClaw) chooses its own request parameters: it may send no temperature at all (the
embedded server then decodes greedily) or one of its own. An RL run needs its rollouts sampled at the run's
temperature, and repeatably, whatever the agent asked; the gateway, which sees every call, is where that is
enforced. Only the fields that are set are touched; with no override the body is forwarded as the agent sent it.

The seed of a call is derived from the run's seed, the trajectory id and the step index, so every call of every
trajectory gets its own seed (two samples of one task never share a sampling stream), and the same run gives the
same seeds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

SEED_MASK = 0x7FFFFFFF  # 31 bits: a seed every engine takes (OpenAI, vLLM, torch generators)


@dataclass(frozen=True)
class SamplingOverride:
    """What the gateway sets on each forwarded chat request; None leaves the agent's value (or its absence)."""

    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None  # the run's seed; each call gets `call_seed(seed, trajectory, step index)`

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.temperature, self.top_p, self.seed))

    def fields(self, trajectory: str, index: int) -> dict[str, Any]:
        """The body fields to set for call `index` of `trajectory`."""
        out: dict[str, Any] = {}
        if self.temperature is not None:
            out["temperature"] = float(self.temperature)
        if self.top_p is not None:
            out["top_p"] = float(self.top_p)
        if self.seed is not None:
            out["seed"] = call_seed(self.seed, trajectory, index)
        return out


def call_seed(seed: int, trajectory: str, index: int) -> int:
    """A stable 31-bit seed for one call (not Python's hash(), which is salted per process)."""
    digest = hashlib.blake2b(f"{seed}\x00{trajectory}\x00{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & SEED_MASK
