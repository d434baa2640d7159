"""Record types of the data pool: one `StepRecord` per model call, and the events of the event log.

A step is what a gateway saw of one model call: the request the agent sent, the response, the token ids (the
engine's own when it returns them, else re-tokenized, else none) and timings. Steps are immutable once
appended. What is learnt later -- the trajectory's end, reward and verdict, curation flags -- is written as
events (`events.jsonl`) and attached to steps when they are read back: the fields under "filled by the pool"
below are never stored in a step's line (`append_step` drops them) and are set by `Pool.steps()` /
`Pool.get_step()`.
"""

from __future__ import annotations

import datetime as _dt
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, model_validator

from clawgym.core.records import Record

TokenSource = Literal["upstream", "retokenized", "none"]

# fields of StepRecord computed by the pool from its index and events; never stored in a segment line
DERIVED_FIELDS: frozenset[str] = frozenset(
    {"reward", "verdict", "trajectory_status", "is_last", "trainable", "quality", "tags"}
)

# trajectory end statuses whose steps are not trainable unless curated otherwise (the rollout's infra_error:
# the sandbox or endpoint failed, nothing the model did). Every other status -- "ok", "completed",
# "agent_error", "timeout" -- is a scored sample and trainable by default.
ERROR_STATUSES: frozenset[str] = frozenset({"error", "infra_error"})


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def step_id_for(trajectory_id: str, step_index: int) -> str:
    return f"{trajectory_id}/{step_index}"


class StepRecord(Record):
    """One model call captured by the gateway (Claw-R1 / Agent-R1 step).

    `request`: {"messages": [...], "tools": [...] or None, "params": {other body fields}}.
    `response`: {"content", "reasoning", "tool_calls": [OpenAI tool_call dicts], "finish_reason"}.
    `step_id` defaults to "<trajectory_id>/<step_index>" and must equal it; `created_at` defaults to now (UTC).
    """

    step_id: str = Field(default="", description="'<trajectory_id>/<step_index>'.")
    trajectory_id: str = Field(min_length=1)
    group_id: str = Field(min_length=1, description="The prompt group (GRPO group) of the trajectory.")
    step_index: int = Field(ge=0, description="0-based position of the call in its trajectory.")
    task_id: str | None = None
    model: str
    policy_version: str | None = None
    request: dict[str, Any]
    response: dict[str, Any]
    prompt_ids: list[int] | None = None
    response_ids: list[int] | None = None
    logprobs: list[float] | None = None
    token_source: TokenSource = "none"
    token_check: dict[str, Any] = Field(
        default_factory=dict, description="Reported token counts against the id lists, and whether they match."
    )
    usage: dict[str, Any] = Field(default_factory=dict)
    timings: dict[str, Any] = Field(default_factory=dict, description="started_at (ISO), latency_s, ttft_s.")
    stream: bool = False
    status: Literal["ok", "error"] = "ok"
    error: str | None = None
    created_at: str = Field(default_factory=utc_now, description="ISO 8601 UTC.")

    # ---- filled by the pool when the step is read back (never stored in the step's line)
    reward: float | None = Field(default=None, description="Filled by the pool: the trajectory's reward.")
    verdict: dict[str, Any] | None = Field(default=None, description="Filled by the pool: the trajectory's verdict.")
    trajectory_status: str | None = Field(default=None, description="Filled by the pool: how the trajectory ended.")
    is_last: bool | None = Field(default=None, description="Filled by the pool: last step of an ended trajectory.")
    trainable: bool | None = Field(default=None, description="Filled by the pool: effective curation flag.")
    quality: str | None = Field(default=None, description="Filled by the pool: step quality, else trajectory's.")
    tags: list[str] | None = Field(default=None, description="Filled by the pool: step and trajectory tags.")

    @model_validator(mode="after")
    def _step_id(self) -> StepRecord:
        expected = step_id_for(self.trajectory_id, self.step_index)
        if not self.step_id:
            self.step_id = expected
        elif self.step_id != expected:
            raise ValueError(f"step_id must be '<trajectory_id>/<step_index>' = {expected!r}, got {self.step_id!r}")
        if self.status == "error" and not self.error:
            raise ValueError("a step with status 'error' needs `error`")
        return self

    def stored_json(self) -> str:
        """The line written to a segment: the record without the fields the pool fills."""
        return self.model_dump_json(exclude=set(DERIVED_FIELDS))

    @property
    def progress_reward(self) -> float | None:
        """This step's progress reward (clawgym.verify.progress), carried in its trajectory's verdict under
        "progress" (read back from the pool); None when the trajectory has none."""
        info = (self.verdict or {}).get("progress")
        rewards = info.get("rewards") if isinstance(info, dict) and info.get("credit") == "progress" else None
        if isinstance(rewards, list) and 0 <= self.step_index < len(rewards):
            return float(rewards[self.step_index])
        return None

    @property
    def has_token_ids(self) -> bool:
        return bool(self.prompt_ids) and self.response_ids is not None


# --------------------------------------------------------------------------------------------- events


class GroupExpected(Record):
    """`expect_group`: the group will hold `samples` trajectories (it is ready when that many have ended)."""

    type: Literal["expect_group"] = "expect_group"
    group_id: str = Field(min_length=1)
    samples: int = Field(ge=1)
    at: str = Field(default_factory=utc_now)


class TrajectoryEnd(Record):
    """`trajectory_end`: the trajectory is over; its status, reward and verdict attach to all of its steps."""

    type: Literal["trajectory_end"] = "trajectory_end"
    trajectory_id: str = Field(min_length=1)
    group_id: str = Field(min_length=1)
    task_id: str | None = None
    status: str = Field(min_length=1)
    reward: float | None = None
    verdict: dict[str, Any] | None = None
    ended_at: str = Field(default_factory=utc_now)


class Curation(Record):
    """`curate`: a change of curation flags of one trajectory or one step, by a user or a judge."""

    type: Literal["curate"] = "curate"
    trajectory_id: str | None = None
    step_id: str | None = None
    quality: str | None = Field(default=None, description="Free text ('good', 'bad', 'suspect'); '' clears it.")
    trainable: bool | None = None
    add_tags: list[str] = Field(default_factory=list)
    remove_tags: list[str] = Field(default_factory=list)
    note: str | None = None
    by: str = "user"
    at: str = Field(default_factory=utc_now)

    @model_validator(mode="after")
    def _one_target(self) -> Curation:
        if (self.trajectory_id is None) == (self.step_id is None):
            raise ValueError("a curation targets exactly one of trajectory_id or step_id")
        return self


PoolEvent = Annotated[GroupExpected | TrajectoryEnd | Curation, Field(discriminator="type")]
EVENT_ADAPTER: TypeAdapter[GroupExpected | TrajectoryEnd | Curation] = TypeAdapter(PoolEvent)
