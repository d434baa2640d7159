"""Rollouts: many sandboxed episodes, concurrently, resumable."""

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
