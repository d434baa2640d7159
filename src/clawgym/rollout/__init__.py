"""Rollouts: many sandboxed episodes, concurrently, resumable; the executor seam (:mod:`clawgym.rollout.executor`:
where attempts and handed-over work run, executors found by name in a registry, entry point group
``clawgym.executors``). Nothing here imports cluster (the `ray` executor is a lazy registry entry) or train."""

from clawgym.rollout.runner import (
    TRAJECTORIES,
    RolloutOptions,
    RolloutReport,
    episode_id,
    load_done,
    run_episode,
    run_rollout,
)
from clawgym.rollout.summary import Summary, render_table, summarize

__all__ = [
    "TRAJECTORIES", "RolloutOptions", "RolloutReport", "Summary", "episode_id", "load_done", "render_table",
    "run_episode", "run_rollout", "summarize",
]
