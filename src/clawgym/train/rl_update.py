"""One policy update from a batch of the pool's step rows (see :mod:`clawgym.train.rl_objective`).

The policy is a causal LM, usually a peft LoRA model; its reference for the KL term is the same model with the
adapter disabled, so no second copy of the weights is held. Rows are packed into micro-batches of at most
`micro_batch_tokens` (padded) tokens; gradients are accumulated over the whole batch, weighted by each
micro-batch's share of the response tokens, and the optimizer steps once per epoch over the batch.

Before the first step, the logprobs the trainer computes for each row's own response ids are compared with the
engine's (the rollout/training mismatch); rows without engine logprobs take the trainer's as their behaviour
policy.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from clawgym.train.rl_objective import ObjectiveConfig, TokenBatch, build_batch, policy_loss, token_logps


@dataclass
class UpdateResult:
    stats: dict[str, float] = field(default_factory=dict)
    epochs: list[dict[str, float]] = field(default_factory=list)


def micro_batches(rows: list[dict[str, Any]], max_tokens: int) -> list[list[dict[str, Any]]]:
    """Rows grouped (longest first) so that rows x longest length stays within `max_tokens` (a row longer than
    that is a batch of its own)."""
    order = sorted(rows, key=lambda r: -(len(r["prompt_ids"]) + len(r["response_ids"])))
    out: list[list[dict[str, Any]]] = []
    cur: list[dict[str, Any]] = []
    width = 0
    for r in order:
        n = len(r["prompt_ids"]) + len(r["response_ids"])
        w = max(width, n)
        if cur and w * (len(cur) + 1) > max_tokens:
            out.append(cur)
            cur, w = [], n
        cur.append(r)
        width = w
    if cur:
        out.append(cur)
    return out


def _reference(model: Any):
    """The model with its adapter disabled (the initial policy), when it is a peft model."""
    disable = getattr(model, "disable_adapter", None)
    return disable() if disable is not None else contextlib.nullcontext()


def rl_update(model: Any, optimizer: torch.optim.Optimizer, rows: list[dict[str, Any]],
              cfg: ObjectiveConfig | None = None, *, epochs: int = 1, micro_batch_tokens: int = 8192,
              pad_id: int = 0, max_grad_norm: float | None = 1.0) -> UpdateResult:
    """Update `model` on `rows`; return the statistics of the update (those of the first epoch's forward pass
    for the mismatch, the last epoch's for the rest)."""
    cfg = cfg or ObjectiveConfig()
    if not rows:
        return UpdateResult(stats={"tokens": 0})
    t0 = time.monotonic()
    batches: list[tuple[TokenBatch, torch.Tensor, torch.Tensor | None]] = []
    want_ref = cfg.kl_coef > 0
    model.eval()
    with torch.no_grad():
        for group in micro_batches(rows, micro_batch_tokens):
            b = build_batch(group, pad_id)
            start, _ = token_logps(model, b)
            ref = None
            if want_ref:
                with _reference(model):
                    ref, _ = token_logps(model, b)
            batches.append((b, start, ref))
    total_tokens = sum(float(b.response_mask.sum()) for b, _, _ in batches)
    result = UpdateResult()
    gap_sum = gap_n = 0.0
    gap_max = 0.0
    for b, start, _ in batches:
        on = (b.has_old_logps[:, None] * b.response_mask).bool()
        if on.any():
            gap = (start - b.old_logps)[on].abs()
            gap_sum += float(gap.sum())
            gap_n += gap.numel()
            gap_max = max(gap_max, float(gap.max()))
    model.train()
    for _ in range(max(1, epochs)):
        optimizer.zero_grad(set_to_none=True)
        agg: dict[str, float] = {}
        for b, start, ref in batches:
            logps, ent = token_logps(model, b, with_entropy=True)
            loss, st = policy_loss(logps, b, cfg, ref_logps=ref, entropy=ent, start_logps=start)
            share = float(b.response_mask.sum()) / max(total_tokens, 1.0)
            (loss * share).backward()
            for k in ("loss", "ratio_mean", "clip_fraction", "kl", "entropy"):
                agg[k] = agg.get(k, 0.0) + st[k] * share
            agg["ratio_max"] = max(agg.get("ratio_max", 0.0), st["ratio_max"])
        if max_grad_norm is not None:
            params = [p for p in model.parameters() if p.requires_grad]
            agg["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
        optimizer.step()
        result.epochs.append(agg)
    model.eval()
    result.stats = {**result.epochs[-1], "tokens": int(total_tokens), "rows": len(rows),
                    "micro_batches": len(batches), "update_s": round(time.monotonic() - t0, 3)}
    if gap_n:
        result.stats["engine_logprob_gap_mean"] = gap_sum / gap_n
        result.stats["engine_logprob_gap_max"] = gap_max
    return result
