"""What an agent is to the rest of clawgym: something that works on a task inside a sandbox."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from clawgym.core.records import Task
from clawgym.sandbox.base import Sandbox


@dataclass
class EpisodeContext:
    """Per-episode settings an agent must respect."""

    deadline: float  # time.monotonic() value after which the agent must stop
    sample: int = 0
    max_observation: int = 20_000
    exec_timeout: float = 120.0
    episode_id: str = ""
    attempt: int = 1  # > 1 when the episode is retried after an infrastructure error

    @property
    def trajectory_id(self) -> str:
        """The id of this attempt's model calls (in the gateway's pool): the episode id, marked on retries."""
        return self.episode_id if self.attempt == 1 else f"{self.episode_id}~{self.attempt}"

    def time_left(self) -> float:
        return self.deadline - time.monotonic()


@dataclass
class AgentOutcome:
    transcript: list[dict[str, Any]]
    final_message: str = ""
    # completed | agent_error | timeout | skipped | infra_error | sandbox_lost (the sandbox failed under the
    # agent; the runner tells whether from inside, the agent's failure, or from the infrastructure)
    status: str = "completed"
    error_kind: str | None = None
    error: str | None = None
    tool_calls: int = 0
    tool_errors: int = 0
    model: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)  # chat messages, when a model was used
    tools: list[dict[str, Any]] = field(default_factory=list)  # tool schemas offered to the model
    steps: list[dict[str, Any]] = field(default_factory=list)  # one entry per model call
    usage: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


class Agent(Protocol):
    name: str

    def run(self, task: Task, sandbox: Sandbox, ctx: EpisodeContext) -> AgentOutcome: ...
