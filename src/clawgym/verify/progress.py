"""Progress rewards: the code score of every workspace state an episode went through, as step rewards.

A task whose code check is checks as data (kind `checks`) can grade any state of its workspace, not just the
final one. The rollout keeps a snapshot of the workspace after each step that can change it
(:mod:`clawgym.rollout.snapshots`); after the episode, once nothing of the agent's lives on, this module grades
those snapshots in a fresh sandbox and turns the scores into step rewards by potential-based shaping (Ng, Harada
and Russell 1999): with P the code score (the mean of the checks, as the verdict's `code_score`) and s_t the
workspace before step t,

    r_t = P(s_{t+1}) - P(s_t),     sum_t r_t = P(final) - P(untouched workspace),

which is the outcome code score on a validated synthesized task (its untouched workspace scores 0). A step that
undoes a passing check gets a negative reward; a step that changes nothing gets 0.

Where the grading happens, and why there: never while the agent's processes live. :func:`grade_states` restarts
the sandbox it is given (every process ends, fresh namespaces: `Sandbox.restart`), empties its workspace and
imports the snapshots, host directories the agent never had access to, under random names, so that a link the
agent planted cannot name another state. When a check runs a program (`clawgym.checks.program_checks`: the
agent's own code runs during grading), each state is graded alone, after another restart, so that nothing one
state runs can touch another state or outlive it; otherwise one python process grades them all
(`clawgym.verify.code.run_python_batch`, as task validation does).

Tasks whose checks are not data (PinchBench grade() sources, imported shell checkers) have no progress: their
trajectories fall back to outcome credit, and :func:`progress_unavailable` says why.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym.core.records import CheckCall, Task
from clawgym.sandbox.base import Sandbox
from clawgym.verify.code import CodeResult, library_mismatch, run_python_batch

PROGRESS_KEY = "progress"  # the trajectory's metadata key, and the key in the pool's verdict of a trajectory
STEP_KEY = "progress_reward"  # the key of a step's reward in the trajectory's steps


def progress_unavailable(task: Task) -> str | None:
    """Why the states of `task` cannot be graded for progress rewards (None: they can)."""
    code = task.verifier.code
    if code is None:
        return "the task has no code check"
    if code.kind != "checks":
        return f"its code check is a {code.kind} checker, not checks as data"
    if not code.checks:
        return "its code check has no checks"
    why, _ = library_mismatch(code)
    return why


def runs_programs(task: Task) -> bool:
    """Whether a check of `task` runs a program (of the workspace's: the agent's code) while it grades."""
    from clawgym.checks import program_checks

    programs = set(program_checks())

    def uses(call: CheckCall) -> bool:
        return call.fn in programs or any(uses(p) for p in call.parts)

    return any(uses(c) for c in task.verifier.code.checks) if task.verifier.code else False


def _graders_at(task: Task, workspace: str) -> list[CheckCall]:
    """The task's checks with its mount dir pointed at `workspace` (where one state lies in the grading sandbox),
    as :func:`clawgym.verify.code.grader_of` points it at the sandbox's workdir for the final state."""
    data = json.dumps([c.model_dump(mode="json") for c in task.verifier.code.checks], ensure_ascii=False)
    return [CheckCall.model_validate(c) for c in json.loads(data.replace(task.workspace.mount_dir, workspace))]


def grade_states(task: Task, sandbox: Sandbox, states: Sequence[Path]) -> list[CodeResult]:
    """The code result of each state (a host directory holding a workspace snapshot), graded in `sandbox`
    (restarted first; its workspace is emptied and used for the states, and left empty). Raises SandboxError
    when the sandbox fails."""
    check = task.verifier.code
    assert check is not None
    if not states:
        return []
    timeout = check.timeout_seconds
    results: list[CodeResult] = []
    sandbox.restart()
    sandbox.clear_workspace()
    try:
        if runs_programs(task):
            for i, state in enumerate(states):
                if i:  # nothing the last state's programs started may see this one
                    sandbox.restart()
                    sandbox.clear_workspace()
                sandbox.import_tree(state)
                results += run_python_batch(sandbox, [(_graders_at(task, sandbox.workdir), [], sandbox.workdir)],
                                            timeout)
        else:
            items: list[tuple[str | list[CheckCall], list[dict[str, Any]], str]] = []
            for state in states:
                name = f"s-{secrets.token_hex(12)}"
                sandbox.import_tree(state, name)
                where = f"{sandbox.workdir.rstrip('/')}/{name}"
                items.append((_graders_at(task, where), [], where))
            results = run_python_batch(sandbox, items, timeout + 2.0 * len(items))
    finally:
        sandbox.clear_workspace()
    return results


@dataclass
class Progress:
    """The progress rewards of one trajectory, or why it has none (then its credit falls back to outcome)."""

    rewards: list[float] = field(default_factory=list)  # one per step
    potentials: list[float] = field(default_factory=list)  # P(s_0), then P after each step
    fallback: str | None = None  # why the trajectory has no progress rewards
    states: int = 0  # distinct workspace states graded
    snapshot_bytes: int = 0
    snapshot_s: float = 0.0
    grade_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        if self.fallback is not None:
            return {"credit": "outcome", "fallback": self.fallback, "snapshot_s": round(self.snapshot_s, 4)}
        return {"credit": "progress", "rewards": self.rewards, "potentials": self.potentials, "states": self.states,
                "snapshot_bytes": self.snapshot_bytes, "snapshot_s": round(self.snapshot_s, 4),
                "grade_s": round(self.grade_s, 4)}


def step_rewards(end_states: Sequence[int], potential: Sequence[float], initial: int = 0) -> tuple[list[float],
                                                                                                  list[float]]:
    """(rewards, potentials) of the steps of a trajectory: `end_states[t]` is the state (an index into
    `potential`) the workspace was in when step t ended, `initial` the state before step 0. r_t = P(end of t) -
    P(end of t - 1); the potentials list starts with P(initial)."""
    pots = [potential[initial]] + [potential[s] for s in end_states]
    return [pots[t + 1] - pots[t] for t in range(len(end_states))], pots


def fell_back(metadata: dict[str, Any] | None) -> str | None:
    """Why a trajectory (its metadata, or the pool's verdict dict) fell back to outcome credit; None when it has
    progress rewards or progress was not asked for."""
    info = (metadata or {}).get(PROGRESS_KEY)
    return info.get("fallback") if isinstance(info, dict) else None


def progress_of(metadata: dict[str, Any] | None) -> list[float] | None:
    """A trajectory's progress rewards (its metadata, or the pool's verdict dict), one per step; None without.

    Given the pool's verdict of a judged episode (a `rubric_score` and weights (wc, wr) with wr > 0), the rewards
    are those of its hybrid score: each step's code progress times wc, and wr x the rubric score added to the last
    step (the rubric judges the finished work, not a state). They then sum to wc x (P(final) - P(untouched)) + wr x
    rubric, the hybrid score on a validated synthesized task, as the code rewards sum to its code score."""
    info = (metadata or {}).get(PROGRESS_KEY)
    if not (isinstance(info, dict) and info.get("credit") == "progress" and isinstance(info.get("rewards"), list)):
        return None
    rewards = [float(r) for r in info["rewards"]]
    rubric, weights = (metadata or {}).get("rubric_score"), (metadata or {}).get("weights")
    if rewards and isinstance(rubric, (int, float)) and isinstance(weights, (list, tuple)) and len(weights) == 2:
        wc, wr = float(weights[0]), float(weights[1])
        if wr > 0:
            rewards = [wc * r for r in rewards]
            rewards[-1] += wr * float(rubric)
    return rewards


def fallback_line(trajectories: Sequence[Any], limit: int = 10) -> str | None:
    """One line for a batch report: which trajectories (with `metadata`, as clawgym.core.records.Trajectory) of
    a progress run fell back to outcome credit, and why; None when none did."""
    fell = sorted((t.id, why) for t in trajectories if (why := fell_back(t.metadata)) is not None)
    if not fell:
        return None
    shown = "; ".join(f"{tid} ({why})" for tid, why in fell[:limit])
    more = f"; and {len(fell) - limit} more" if len(fell) > limit else ""
    return f"{len(fell)} of {len(trajectories)} episodes fell back to outcome credit: {shown}{more}"
