"""Credit assignment: the advantage of each trajectory (outcome credit) or of each step (step credit) of the
groups of the pool, for the RL presets an external trainer or `clawgym train rl` uses.

A *group* is the k samples of one task (GRPO's group). Notation: a group holds trajectories i = 1..n with
rewards r_i; ``mean`` and ``std`` are over the group (``std`` the sample standard deviation, ddof = 1, as
``torch.std`` in verl and TRL); eps = 1e-6.

**Outcome credit** (``credit="outcome"``): one advantage per trajectory, put on every response token of every
step of it.

The advantage of a group's rewards is the preset's estimator (:mod:`clawgym.rl.advantages`: grpo, dr-grpo,
rloo, reinforce++, or a registered third-party one; :func:`clawgym.rl.resolve_preset` maps ``algo`` to it); an
estimator with a batch pass (reinforce++) then normalizes over every trajectory of every group given.

**Step credit** (``credit="step"``, Agent-R1: each step a transition with its own advantage): trajectory i has
steps t = 0..T_i - 1 with step rewards r_{i,t} (the outcome reward on its last step, 0 before, unless step
rewards are given) and discounted returns G_{i,t} = sum_{k=t}^{T_i-1} gamma^(k-t) r_{i,k}. The returns are
normalized *within the group, step by step*: at step t the preset's estimator is applied to
{G_{i,t} : T_i > t}, the trajectories of the group that reached step t (an estimator's batch pass, reinforce++'s,
then runs over every step of the batch). With gamma = 1 and outcome rewards every step of a
trajectory gets the trajectory's return, baselined against the trajectories still running at that step.

**Progress credit** (``credit="progress"``): step credit whose step rewards are the trajectory's progress
rewards (:mod:`clawgym.verify.progress`: r_t = P(s_{t+1}) - P(s_t), the potential differences of the code score
over the workspace states the steps left), so a step is credited with what it changed. They sum to the outcome
code score on a validated synthesized task, so with gamma = 1 a trajectory's first return is its outcome, as under
step credit. A trajectory without progress rewards (a task whose checks are not data, a workspace past the
snapshot cap, progress not recorded) falls back to its outcome reward on its last step, and is listed.

**GAE** (``credit="gae"``, Agent-R1's step-level GAE with a critic): the step rewards of progress credit (with
the same fallback), and a value V_t of the state before each step (the context the model call saw) from a value
head (:mod:`clawgym.train.value_head`); then per trajectory delta_t = r_t + gamma V_{t+1} - V_t with V_T = 0 (the
episode is over), A_t = delta_t + gamma lam A_{t+1} (:func:`gae`), and the value targets G^lam_t = A_t + V_t.
The values need the policy, so an export with this credit writes each row's ``step_reward`` and leaves its
``advantage`` null; ``clawgym train rl --credit gae`` fills it in before each update (and whitens the batch's
advantages, as verl's GAE does). A step dropped from the export hands its reward to the kept step before it
(:func:`kept_step_rewards`), so no reward vanishes from a return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from clawgym.rl.advantages import EPS, Advantage, batch_normalize, get_advantage
from clawgym.rl.presets import ALGOS, resolve_preset

CREDITS = ("outcome", "step", "progress", "gae")
PROGRESS = "progress"  # the progress credit mode
GAE = "gae"  # step-level GAE with a value head
__all__ = ["ALGOS", "CREDITS", "EPS", "GAE", "PROGRESS", "baseline", "batch_normalize", "discounted_returns",
           "estimator", "gae", "kept_step_rewards", "outcome_advantages", "outcome_step_rewards", "progress_advantages",
           "progress_step_rewards", "step_advantages"]


def estimator(algo: str) -> Advantage:
    """The advantage estimator of the preset (or advantage) `algo`; ValueError when there is none."""
    return get_advantage(resolve_preset(algo).advantage)


def baseline(values: Sequence[float], algo: str, eps: float = EPS) -> list[float]:
    """The preset's per-group advantages of `values` (for reinforce++: only the group-mean part; the batch
    normalization follows in :func:`batch_normalize`)."""
    est = estimator(algo)
    return est(values, eps) if values else []


def outcome_advantages(groups: Mapping[str, Mapping[str, float]], algo: str = "grpo",
                       eps: float = EPS) -> dict[str, float]:
    """Trajectory id -> advantage, for groups given as {group id: {trajectory id: reward}}."""
    est = estimator(algo)
    out: dict[str, float] = {}
    for rewards in groups.values():
        ids = list(rewards)
        out.update(zip(ids, est([rewards[i] for i in ids], eps) if ids else [], strict=True))
    if est.batch is not None and out:
        ids = list(out)
        out = dict(zip(ids, est.batch([out[i] for i in ids], eps), strict=True))
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
    est = estimator(algo)
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    out: dict[str, list[float]] = {}
    for trajs in groups.values():
        returns = {tid: discounted_returns(r, gamma) for tid, r in trajs.items()}
        adv = {tid: [0.0] * len(g) for tid, g in returns.items()}
        longest = max((len(g) for g in returns.values()), default=0)
        for t in range(longest):
            alive = [tid for tid, g in returns.items() if len(g) > t]
            for tid, a in zip(alive, est([returns[tid][t] for tid in alive], eps), strict=True):
                adv[tid][t] = a
        out.update(adv)
    if est.batch is not None and out:
        flat = [(tid, t) for tid, a in out.items() for t in range(len(a))]
        normed = est.batch([out[tid][t] for tid, t in flat], eps)
        for (tid, t), v in zip(flat, normed, strict=True):
            out[tid][t] = v
    return out


def progress_step_rewards(n_steps: int, reward: float,
                          progress: Sequence[float] | None) -> tuple[list[float], bool]:
    """(step rewards, fell back) of a trajectory under progress credit: its progress rewards when it has one per
    step, else its outcome reward on its last step (:func:`outcome_step_rewards`) and True."""
    if progress is not None and len(progress) == n_steps:
        return [float(r) for r in progress], False
    return outcome_step_rewards(n_steps, reward), True


def progress_advantages(groups: Mapping[str, Mapping[str, tuple[int, float, Sequence[float] | None]]],
                        algo: str = "grpo", gamma: float = 1.0,
                        eps: float = EPS) -> tuple[dict[str, list[float]], list[str]]:
    """(trajectory id -> one advantage per step, the trajectories that fell back to outcome credit), for groups
    given as {group id: {trajectory id: (steps, outcome reward, progress rewards or None)}}: step credit over
    the progress rewards (see the module docstring)."""
    fallbacks: list[str] = []
    rewards: dict[str, dict[str, list[float]]] = {}
    for g, trajs in groups.items():
        for tid, (n, reward, progress) in trajs.items():
            rewards.setdefault(g, {})[tid], fell = progress_step_rewards(n, reward, progress)
            if fell:
                fallbacks.append(tid)
    return step_advantages(rewards, algo, gamma, eps), fallbacks


def gae(rewards: Sequence[float], values: Sequence[float], gamma: float = 1.0, lam: float = 1.0,
        gaps: Sequence[int] | None = None) -> tuple[list[float], list[float]]:
    """(advantages, value targets) of one trajectory by GAE(lambda) (Schulman et al. 2016): with V_T = 0 (the
    episode ended), delta_t = r_t + gamma V_{t+1} - V_t and A_t = delta_t + gamma lam A_{t+1}; the targets are
    A_t + V_t (the lambda-returns). lam = 1 gives A_t = G_t - V_t (the discounted return less the value), lam = 0
    the one-step TD error. `gaps`: the steps between each kept step and the next (1 each by default); across a
    gap of d steps (the ones between were dropped, their rewards handed back discounted, :func:`kept_step_rewards`)
    gamma becomes gamma^d."""
    if len(rewards) != len(values):
        raise ValueError(f"{len(rewards)} rewards but {len(values)} values")
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lambda must be in [0, 1], got {gamma} and {lam}")
    gaps = list(gaps) if gaps is not None else [1] * max(0, len(rewards) - 1)
    if len(gaps) != max(0, len(rewards) - 1) or any(d < 1 for d in gaps):
        raise ValueError(f"gaps {gaps}: one positive gap between each two of {len(rewards)} steps")
    adv = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        g = gamma ** gaps[t] if t + 1 < len(rewards) else gamma
        nxt = values[t + 1] if t + 1 < len(values) else 0.0
        running = rewards[t] + g * nxt - values[t] + g * lam * running
        adv[t] = running
    return adv, [a + v for a, v in zip(adv, values, strict=True)]


def kept_step_rewards(rewards: Sequence[float], kept: Sequence[int], gamma: float = 1.0) -> dict[int, float]:
    """Step index -> reward, for the steps `kept` (indices into `rewards`) of one trajectory: each one's own reward
    plus those of the steps after it up to the next kept one, discounted by their distance (a dropped step's reward
    goes to the kept step before it; rewards before the first kept step belong to no trained decision and are left
    out). With the gaps to :func:`gae`, the discounted return from every kept step is unchanged."""
    order = sorted(set(kept))
    out: dict[int, float] = {}
    for i, k in enumerate(order):
        end = order[i + 1] if i + 1 < len(order) else len(rewards)
        out[k] = float(sum(gamma ** (j - k) * rewards[j] for j in range(k, end)))
    return out
