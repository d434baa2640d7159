"""Loss aggregations: how the per-token losses of a batch become the scalar that is differentiated.

A loss is a function ``(per_token, batch, norm, cfg) -> scalar tensor``: `per_token` (B, L) the token losses of
:func:`clawgym.train.rl_objective.policy_loss` (the clipped policy-gradient term, plus the KL term), `batch` its
:class:`~clawgym.train.rl_objective.TokenBatch` (``response_mask``, ``step_weights``), `norm` the denominators
of the whole update (:class:`~clawgym.train.rl_objective.Norm`: steps and response tokens, so that micro-batch
losses add up to the batch's) and `cfg` the :class:`~clawgym.train.rl_objective.ObjectiveConfig`. Registered
with ``@register_loss(name)``; third parties declare theirs in the ``clawgym.rl_losses`` entry point group (as
verl's ``register_policy_loss`` / ``agg_loss`` modes). As in TRL:

* ``seq-mean-token-mean`` (grpo): the mean over each sequence's (step's) tokens, then over steps;
* ``token-sum-norm`` (dr-grpo): the sum over all tokens divided by (steps x ``max_response_len``), no length bias;
* ``token-mean`` (rloo, reinforce++; TRL's ``bnpo``): the mean over all tokens of the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from clawgym.core.registry import Registry

if TYPE_CHECKING:
    import torch

# (per_token, batch, norm, cfg) -> loss; batch, norm and cfg are clawgym.train.rl_objective's TokenBatch, Norm and
# ObjectiveConfig (typed Any here: this package sits below clawgym.train and imports nothing from it)
LossFn = Callable[["torch.Tensor", Any, Any, Any], "torch.Tensor"]


def _check(name: str, obj: Any) -> None:
    if not callable(obj):
        raise TypeError(f"RL loss {name!r}: {obj!r} is not a function of (per_token, batch, norm, cfg)")


LOSSES: Registry[LossFn] = Registry("RL loss", "clawgym.rl_losses", check=_check)


def register_loss(name: str) -> Callable[[LossFn], LossFn]:
    """Decorator: register a loss aggregation (see the module docstring) under `name`."""
    return LOSSES.register(name)


def get_loss(name: str) -> LossFn:
    return LOSSES.get(name)


@register_loss("seq-mean-token-mean")
def seq_mean_token_mean(per_token: torch.Tensor, batch: Any, norm: Any, cfg: Any) -> torch.Tensor:
    mask = batch.response_mask
    weights = batch.step_weights if batch.step_weights is not None else mask / mask.sum(-1, keepdim=True).clamp(min=1.0)
    return (per_token * weights).sum() / max(norm.steps, 1.0)


@register_loss("token-sum-norm")
def token_sum_norm(per_token: torch.Tensor, batch: Any, norm: Any, cfg: Any) -> torch.Tensor:
    return (per_token * batch.response_mask).sum() / (max(norm.steps, 1.0) * max(1, cfg.max_response_len))


@register_loss("token-mean")
def token_mean(per_token: torch.Tensor, batch: Any, norm: Any, cfg: Any) -> torch.Tensor:
    return (per_token * batch.response_mask).sum() / max(norm.tokens, 1.0)
