"""Credit assignment: the advantage of each trajectory (outcome credit) or of each step (step credit) of the
groups of the pool, for the RL presets an external trainer or `clawgym train rl` uses.

A *group* is the k samples of one task (GRPO's group). Notation: a group holds trajectories i = 1..n with
rewards r_i; ``mean`` and ``std`` are over the group (``std`` the sample standard deviation, ddof = 1, as
``torch.std`` in verl and TRL); eps = 1e-6.

**Outcome credit** (``credit="outcome"``): one advantage per trajectory, put on every response token of every
step of it.

* ``grpo`` (DeepSeekMath): A_i = (r_i - mean) / (std + eps); 0 when n < 2 or std = 0.
* ``dr-grpo`` (Dr. GRPO, Liu et al. 2025): A_i = r_i - mean. No division by std, which over-weights groups
  whose rewards barely differ (the length normalization Dr. GRPO also removes is the loss's business).
* ``rloo`` (REINFORCE leave-one-out, Ahmadian et al. 2024): A_i = r_i - (sum_{j != i} r_j) / (n - 1)
  = n / (n - 1) * (r_i - mean); 0 when n < 2.
* ``reinforce++`` (REINFORCE++ with a group baseline, Hu et al. 2025): x_i = r_i - mean, then normalized over
  the whole batch (every trajectory of every group given): A_i = (x_i - mean_B(x)) / (std_B(x) + eps).

**Step credit** (``credit="step"``, Agent-R1: each step a transition with its own advantage): trajectory i has
steps t = 0..T_i - 1 with step rewards r_{i,t} (the outcome reward on its last step, 0 before, unless step
rewards are given) and discounted returns G_{i,t} = sum_{k=t}^{T_i-1} gamma^(k-t) r_{i,k}. The returns are
normalized *within the group, step by step*: at step t the preset's formula above is applied to
{G_{i,t} : T_i > t}, the trajectories of the group that reached step t (reinforce++ then normalizes the
baselined returns over every step of the batch). With gamma = 1 and outcome rewards every step of a
trajectory gets the trajectory's return, baselined against the trajectories still running at that step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

ALGOS = ("grpo", "dr-grpo", "rloo", "reinforce++")
CREDITS = ("outcome", "step")
EPS = 1e-6


def _check(algo: str) -> None:
    if algo not in ALGOS:
        raise ValueError(f"unknown RL preset {algo!r}; choose one of {', '.join(ALGOS)}")


def _std(values: Sequence[float], mean: float) -> float:
    n = len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0


def baseline(values: Sequence[float], algo: str, eps: float = EPS) -> list[float]:
    """The preset's per-group advantages of `values` (for reinforce++: only the group-mean part; the batch
    normalization follows in :func:`batch_normalize`)."""
    _check(algo)
    n = len(values)
    if n == 0:
        return []
    mean = sum(values) / n
    if algo == "grpo":
        std = _std(values, mean)
        if n < 2 or std < 1e-12:
            return [0.0] * n
        return [(v - mean) / (std + eps) for v in values]
    if algo == "rloo":
        if n < 2:
            return [0.0] * n
        total = sum(values)
        return [v - (total - v) / (n - 1) for v in values]
    return [v - mean for v in values]  # dr-grpo, and reinforce++ before its batch normalization


def batch_normalize(values: Sequence[float], eps: float = EPS) -> list[float]:
    """(x - mean) / (std + eps) over the whole batch; 0 everywhere when std = 0 or fewer than two values."""
    n = len(values)
    if n < 2:
        return [0.0] * n
    mean = sum(values) / n
    std = _std(values, mean)
    if std < 1e-12:
        return [0.0] * n
    return [(v - mean) / (std + eps) for v in values]


def outcome_advantages(groups: Mapping[str, Mapping[str, float]], algo: str = "grpo",
                       eps: float = EPS) -> dict[str, float]:
    """Trajectory id -> advantage, for groups given as {group id: {trajectory id: reward}}."""
    _check(algo)
    out: dict[str, float] = {}
    for rewards in groups.values():
        ids = list(rewards)
        out.update(zip(ids, baseline([rewards[i] for i in ids], algo, eps), strict=True))
    if algo == "reinforce++" and out:
        ids = list(out)
        out = dict(zip(ids, batch_normalize([out[i] for i in ids], eps), strict=True))
    return out


def discounted_returns(rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """G_t = sum_{k >= t} gamma^(k - t) r_k."""
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def outcome_step_rewards(n_steps: int, reward: float) -> list[float]:
    """Step rewards of a trajectory scored only at its end: 0 on every step, the reward on the last."""
    return [0.0] * (n_steps - 1) + [reward] if n_steps > 0 else []


def step_advantages(groups: Mapping[str, Mapping[str, Sequence[float]]], algo: str = "grpo",
                    gamma: float = 1.0, eps: float = EPS) -> dict[str, list[float]]:
    """Trajectory id -> one advantage per step, for groups given as {group id: {trajectory id: step rewards}}
    (see the module docstring)."""
    _check(algo)
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    out: dict[str, list[float]] = {}
    for trajs in groups.values():
        returns = {tid: discounted_returns(r, gamma) for tid, r in trajs.items()}
        adv = {tid: [0.0] * len(g) for tid, g in returns.items()}
        longest = max((len(g) for g in returns.values()), default=0)
        for t in range(longest):
            alive = [tid for tid, g in returns.items() if len(g) > t]
            for tid, a in zip(alive, baseline([returns[tid][t] for tid in alive], algo, eps), strict=True):
                adv[tid][t] = a
        out.update(adv)
    if algo == "reinforce++" and out:
        flat = [(tid, t) for tid, a in out.items() for t in range(len(a))]
        normed = batch_normalize([out[tid][t] for tid, t in flat], eps)
        for (tid, t), v in zip(flat, normed, strict=True):
            out[tid][t] = v
    return out
