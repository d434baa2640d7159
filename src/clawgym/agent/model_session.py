"""What the sessions of the model-driven agent kinds (llm, openclaw, a third party's) share around a rollout:
where the model runs, the pool the gateway records every call into, and the route secret of its trajectories."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clawgym.agent.kind import AgentSpec, RunOptions
    from clawgym.core.records import Task
    from clawgym.pool.store import Pool


def is_remote(options: RunOptions) -> bool:
    """Whether the episodes run on other workers (an executor other than the local threads)."""
    return options.executor is not None and options.executor.name != "local"


def user_endpoint(spec: AgentSpec) -> bool:
    """Whether the model is served by the user's own endpoint (--base-url or $OPENAI_BASE_URL)."""
    return bool(spec.base_url or os.environ.get("OPENAI_BASE_URL"))


def endpoint_settings(spec: AgentSpec) -> dict[str, str]:
    """What run.json records about where the model ran: a given endpoint, or the embedded server and its precision."""
    if user_endpoint(spec):
        return {"endpoint": "given"}
    return {"endpoint": "embedded", "precision": spec.precision}


def rollout_route_secret(token: str | None) -> str:
    """The secret a rollout's gateway derives each trajectory route's key from (clawgym.gateway.routes).

    Local: a fresh one, held by this process alone. On a cluster: the gateway's token, which the workers already
    hold (clawgym.agent.recipe) and derive their episodes' keys from; their sandboxes get only those keys."""
    return token if token is not None else secrets.token_urlsafe(32)


def start_endpoint(stack: ExitStack, spec: AgentSpec, run_dir: Path,
                   announce: Callable[[Any], None] | None = None) -> str:
    """The model's base URL: the given endpoint, or the embedded server started for a local model (its log in
    RUN_DIR/logs/server.log), stopped when `stack` closes."""
    from clawgym.llm import model_endpoint

    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    return stack.enter_context(model_endpoint(spec.model, spec.base_url, log_path=run_dir / "logs" / "server.log",
                                              on_start=announce, precision=spec.precision))


def open_pool(stack: ExitStack, spec: AgentSpec, run_dir: Path, tasks: list[Task],
              options: RunOptions) -> tuple[Pool, Path]:
    """The pool the gateway records into (`spec.pool_dir`, default RUN_DIR/pool), closed with `stack`, each
    task's group expected with the run's samples (group id `group prefix + task id`)."""
    from clawgym.pool.store import Pool

    pool_dir = spec.pool_dir or run_dir / "pool"
    pool = Pool(pool_dir)
    stack.callback(pool.close)
    for t in tasks:
        pool.expect_group(spec.pool_group_prefix + t.id, options.samples)
    return pool, pool_dir


def end_trajectories(pool: Pool, spec: AgentSpec) -> Callable[[Any], None]:
    """`options.on_attempt` of a recording session: each finished attempt ends its trajectory in the pool with its
    status, reward and verdict (trajectory id `id prefix + episode id`, marked on retries)."""
    pre, gpre = spec.id_prefix, spec.pool_group_prefix

    def on_attempt(t) -> None:
        tid = t.id if t.attempts == 1 else f"{t.id}~{t.attempts}"
        pool.end_trajectory(pre + tid, group_id=gpre + t.task_id, task_id=t.task_id, status=t.status,
                            reward=t.score, verdict=_pool_verdict(t))

    return on_attempt


def _pool_verdict(t) -> dict | None:
    """The verdict the pool keeps for a trajectory: with its progress rewards (or why it has none), which the
    pool's steps read (`StepRecord.progress_reward`) and `--credit progress` uses."""
    if t.verdict is None:
        return None
    progress = t.metadata.get("progress")
    return {**t.verdict.model_dump(), **({"progress": progress} if progress is not None else {})}
