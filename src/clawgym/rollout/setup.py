"""Everything an agent needs around a rollout, set up and torn down in one place (used by `clawgym rollout`,
`clawgym eval` and `clawgym train rl`): the agent kind named by the spec opens its session (clawgym.agent.kind):
for the llm agent the model endpoint, the gateway recording every call into `RUN_DIR/pool` and the shared client;
for the OpenClaw agent the same endpoint and gateway (also on a unix socket, with a per-trajectory budget) and the
mounts every sandbox gets; for a third party's kind whatever it brings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clawgym.agent.kind import AgentSession, AgentSpec, get_kind
from clawgym.agent.model_session import rollout_route_secret
from clawgym.core.records import Task
from clawgym.rollout.runner import RolloutOptions

__all__ = ["AgentSession", "AgentSpec", "agent_session", "rollout_route_secret"]


@contextmanager
def agent_session(spec: AgentSpec, run_dir: Path, tasks: list[Task], options: RolloutOptions,
                  announce: Callable[[Any], None] | None = None) -> Iterator[AgentSession]:
    """Yield the agent factory for a rollout into `run_dir` (the kind's session); sets `options.recipe`, and
    `options.on_attempt` and `options.mounts` when the kind needs them."""
    with get_kind(spec.name).session(spec, run_dir, tasks, options, announce) as session:
        yield session
