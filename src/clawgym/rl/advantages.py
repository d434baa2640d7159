"""Advantage estimators: how the rewards (or returns) of one group become advantages.

A *group* is the k samples of one task (GRPO's group). Notation: a group holds values i = 1..n (rewards r_i, or
the returns of the step credit, see :mod:`clawgym.pool.credit`); ``mean`` and ``std`` are over the group
(``std`` the sample standard deviation, ddof = 1, as ``torch.std`` in verl and TRL); eps = 1e-6.

* ``grpo`` (DeepSeekMath): A_i = (r_i - mean) / (std + eps); 0 when n < 2 or std = 0.
* ``dr-grpo`` (Dr. GRPO, Liu et al. 2025): A_i = r_i - mean. No division by std, which over-weights groups
  whose rewards barely differ (the length normalization Dr. GRPO also removes is the loss's business).
* ``rloo`` (REINFORCE leave-one-out, Ahmadian et al. 2024): A_i = r_i - (sum_{j != i} r_j) / (n - 1)
  = n / (n - 1) * (r_i - mean); 0 when n < 2.
* ``reinforce-pp`` (preset ``reinforce++``; REINFORCE++ with a group baseline, Hu et al. 2025): x_i = r_i - mean,
  then normalized over the whole batch (every value of every group given): A_i = (x_i - mean_B(x)) / (std_B(x) + eps).

An estimator is a function ``(values of one group, eps) -> advantages``, registered with
``@register_advantage(name)``; ``batch=`` adds a second pass over every advantage of the batch (reinforce++'s
normalization). Third parties declare theirs in the ``clawgym.rl_advantages`` entry point group (as verl's
``register_adv_est``, with the group as the unit instead of a token tensor).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from clawgym.core.registry import Registry

EPS = 1e-6

GroupFn = Callable[[Sequence[float], float], list[float]]


@dataclass(frozen=True)
class Advantage:
    """A registered estimator: `group` maps one group's values to advantages; `batch`, if given, maps every
    advantage of the batch (all groups, all steps) to the final ones."""

    group: GroupFn
    batch: GroupFn | None = None

    def __call__(self, values: Sequence[float], eps: float = EPS) -> list[float]:
        return self.group(values, eps)


def _check(name: str, obj: Any) -> None:
    if not isinstance(obj, Advantage) and not callable(obj):
        raise TypeError(f"RL advantage {name!r}: {obj!r} is not a function of (values, eps)")


ADVANTAGES: Registry[Advantage] = Registry("RL advantage", "clawgym.rl_advantages", check=_check)


def register_advantage(name: str, *, batch: GroupFn | None = None) -> Callable[[GroupFn], GroupFn]:
    """Decorator: register a function ``(values of one group, eps) -> advantages`` as the estimator `name`
    (`batch`: see :class:`Advantage`). The function is returned as it is."""

    def deco(fn: GroupFn) -> GroupFn:
        ADVANTAGES.add(name, Advantage(fn, batch))
        return fn

    return deco


def get_advantage(name: str) -> Advantage:
    """The estimator `name` (an entry point may name a plain function: it is the group pass)."""
    obj = ADVANTAGES.get(name)
    return obj if isinstance(obj, Advantage) else Advantage(obj)


def std(values: Sequence[float], mean: float) -> float:
    """The sample standard deviation (ddof = 1; 0 for fewer than two values)."""
    n = len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0


def batch_normalize(values: Sequence[float], eps: float = EPS) -> list[float]:
    """(x - mean) / (std + eps) over the whole batch; 0 everywhere when std = 0 or fewer than two values."""
    n = len(values)
    if n < 2:
        return [0.0] * n
    mean = sum(values) / n
    s = std(values, mean)
    if s < 1e-12:
        return [0.0] * n
    return [(v - mean) / (s + eps) for v in values]


@register_advantage("grpo")
def grpo(values: Sequence[float], eps: float = EPS) -> list[float]:
    n = len(values)
    if n == 0:
        return []
    mean = sum(values) / n
    s = std(values, mean)
    if n < 2 or s < 1e-12:
        return [0.0] * n
    return [(v - mean) / (s + eps) for v in values]


@register_advantage("dr-grpo")
def dr_grpo(values: Sequence[float], eps: float = EPS) -> list[float]:
    mean = sum(values) / len(values) if values else 0.0
    return [v - mean for v in values]


@register_advantage("rloo")
def rloo(values: Sequence[float], eps: float = EPS) -> list[float]:
    n = len(values)
    if n < 2:
        return [0.0] * n
    total = sum(values)
    return [v - (total - v) / (n - 1) for v in values]


# the group mean, then the batch normalization (registry names take no "+": the preset reinforce++ names this one)
register_advantage("reinforce-pp", batch=batch_normalize)(dr_grpo)
