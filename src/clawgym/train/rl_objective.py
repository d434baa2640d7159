"""The RL objective on the pool's step rows: a clipped policy-gradient loss over each step's response tokens.

A row is one model call as the engine made it (``clawgym pool export --format rl``): ``prompt_ids`` (the whole
conversation so far, tool results included), ``response_ids`` (what the model generated), ``logprobs`` (the
engine's log-probabilities of those tokens: the behaviour policy) and ``advantage``. The sequence fed to the
policy is ``prompt_ids + response_ids`` exactly as the engine saw and produced them; nothing is re-tokenized.
Only response positions enter the loss (the mask covers ``response_ids`` and nothing else), so no prompt token
and no tool result is ever trained.

Per response token t, with log-probability ``logp`` under the policy being trained, ``logp_old`` the behaviour
policy's (the engine's, when the row has it; else the policy's own at the start of the update) and advantage A:

    ratio = exp(logp - logp_old)
    loss_t = -min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A)  [+ kl_coef * k3(ref, policy)]

with k3 = exp(ref - logp) - (ref - logp) - 1 (Schulman's estimator, as TRL's GRPO) against the initial policy.
This is TRL's GRPO token loss (``GRPOTrainer._compute_loss``); TRL keeps it inside its trainer, which generates
its own completions, so clawgym computes the same formula here on the pool's rows. How the token losses are
aggregated is the preset's loss (:mod:`clawgym.rl.losses`, chosen by :func:`clawgym.rl.resolve_preset`), as in
TRL: ``grpo`` the mean over each sequence's tokens then over sequences, ``dr-grpo`` the sum over all tokens
divided by (sequences x ``max_response_len``), ``rloo`` and ``reinforce++`` the mean over all tokens of the batch.

:func:`policy_loss` also returns the statistics the loop reports: clip fraction, ratio mean and max, KL to the
initial policy (`kl`) and to the old one (`kl_old`), entropy, and the gap between the logprobs the trainer computes and the engine's for the same ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from clawgym.rl.losses import get_loss
from clawgym.rl.presets import resolve_preset
from clawgym.train.prefix_tree import TreeLayout, build_tree, tree_attention


@dataclass
class ObjectiveConfig:
    """How the token losses are formed and aggregated. `algo`: the preset (or advantage) whose loss aggregates
    them; `loss`: a registered loss that replaces it."""

    algo: str = "grpo"
    clip_low: float = 0.2
    clip_high: float = 0.2
    kl_coef: float = 0.0
    max_response_len: int = 1024  # dr-grpo's constant normalizer
    loss: str | None = None

    @property
    def loss_name(self) -> str:
        """The loss that aggregates the token losses (ValueError for an unknown preset)."""
        return self.loss or resolve_preset(self.algo).loss


@dataclass
class TokenBatch:
    """Rows left-padded into tensors (every row ends at the last position, so the logits of the response
    positions are the last ones and only those are computed): ``input_ids`` (B, L), ``attention_mask`` (B, L),
    ``response_mask`` (B, L) with 1 exactly at response positions, and per-position ``old_logps`` /
    ``advantages`` (0 off the response)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor
    old_logps: torch.Tensor
    has_old_logps: torch.Tensor  # (B,) 1 when the row carried the engine's logprobs
    advantages: torch.Tensor
    # per position: 1 / the length of the model call (step) the token belongs to, for the per-sequence mean of
    # `grpo` (a row may hold several steps of one trajectory, see `clawgym.train.rl_update.merge_continuations`)
    step_weights: torch.Tensor | None = None
    steps: int = 0  # model calls (steps) in the batch: the sequences of the per-sequence aggregations
    # the rows as one prefix tree (shared tokens run once, see clawgym.train.prefix_tree); None: run row by row
    tree: TreeLayout | None = None

    def to(self, device: torch.device | str) -> TokenBatch:
        """The same batch on `device` (the policy's: a GPU when the update runs on one)."""
        sw = self.step_weights.to(device) if self.step_weights is not None else None
        tree = self.tree.to(device) if self.tree is not None else None
        return TokenBatch(self.input_ids.to(device), self.attention_mask.to(device), self.response_mask.to(device),
                          self.old_logps.to(device), self.has_old_logps.to(device), self.advantages.to(device),
                          sw, self.steps, tree)

    @property
    def computed_tokens(self) -> int:
        """Tokens a forward pass runs: the tree's nodes, or every row's own tokens."""
        return self.tree.nodes if self.tree is not None else int(self.attention_mask.sum())


@dataclass
class Norm:
    """The denominators of a loss aggregated over a whole update (every micro-batch of it): the steps (sequences)
    and response tokens it holds. Given to :func:`policy_loss`, micro-batch losses simply add up to the loss of
    the whole batch, whatever the micro-batching and however steps are packed into rows."""

    steps: float
    tokens: float


def build_batch(rows: list[dict[str, Any]], pad_id: int = 0, tree: bool = False) -> TokenBatch:
    """Left-padded tensors of `rows` (each with prompt_ids, response_ids, advantage, optional logprobs).

    A row's advantage is a number (on every response token) or a list (one per response token). A row may also
    carry `response_mask` (0 on response positions that are not the model's: the tool results between two steps
    packed into one row), `step_weights` (1 / its step's length on each trained token) and `steps` (how many
    model calls it holds); a plain row is one step, all of whose response tokens are trained. `tree`: also lay
    the rows out as one prefix tree (:func:`clawgym.train.prefix_tree.build_tree`) for :func:`token_logps`."""
    if not rows:
        raise ValueError("an empty batch")
    lengths = [len(r["prompt_ids"]) + len(r["response_ids"]) for r in rows]
    width = max(lengths)
    b = len(rows)
    input_ids = torch.full((b, width), pad_id, dtype=torch.long)
    attention = torch.zeros((b, width), dtype=torch.long)
    resp = torch.zeros((b, width), dtype=torch.float32)
    old = torch.zeros((b, width), dtype=torch.float32)
    adv = torch.zeros((b, width), dtype=torch.float32)
    has_old = torch.zeros(b, dtype=torch.float32)
    step_w = torch.zeros((b, width), dtype=torch.float32)
    steps = 0
    for i, r in enumerate(rows):
        p, a = list(r["prompt_ids"]), list(r["response_ids"])
        if not a:
            raise ValueError(f"row {i}: empty response")
        if not p:
            raise ValueError(f"row {i}: empty prompt (the first response token needs a context)")
        n = len(p) + len(a)
        start = width - n  # left padding
        r0 = width - len(a)  # first response position
        input_ids[i, start:] = torch.tensor(p + a, dtype=torch.long)
        attention[i, start:] = 1
        m = r.get("response_mask")
        if m is not None and len(m) != len(a):
            raise ValueError(f"row {i}: a response_mask of {len(m)} for {len(a)} response tokens")
        resp[i, r0:] = torch.tensor(m, dtype=torch.float32) if m is not None else 1.0
        w = r.get("step_weights")
        if w is not None and len(w) != len(a):
            raise ValueError(f"row {i}: {len(w)} step_weights for {len(a)} response tokens")
        step_w[i, r0:] = torch.tensor(w, dtype=torch.float32) if w is not None else 1.0 / float(resp[i].sum() or 1)
        steps += int(r.get("steps", 1))
        advantage = r["advantage"]
        if isinstance(advantage, (list, tuple)):
            if len(advantage) != len(a):
                raise ValueError(f"row {i}: {len(advantage)} advantages for {len(a)} response tokens")
            adv[i, r0:] = torch.tensor(advantage, dtype=torch.float32)
        else:
            adv[i, r0:] = float(advantage)
        lp = r.get("logprobs")
        if lp is not None:
            if len(lp) != len(a):
                raise ValueError(f"row {i}: {len(lp)} logprobs for {len(a)} response tokens")
            old[i, r0:] = torch.tensor([float(x or 0.0) for x in lp], dtype=torch.float32)
            has_old[i] = 1.0
    layout = None
    if tree:
        layout = build_tree([list(r["prompt_ids"]) + list(r["response_ids"]) for r in rows],
                            [len(r["prompt_ids"]) for r in rows], width)
    return TokenBatch(input_ids, attention, resp, old, has_old, adv * resp, step_w * resp, steps, layout)


def token_logps(model: Any, batch: TokenBatch, with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-position log-probability of each response token under `model` given the tokens before it ((B, L); 0
    off the response), and optionally the entropy of the distribution it was drawn from. Only the logits of the
    last K + 1 positions (K the longest response) are computed: a full (B, L, vocabulary) tensor of a long
    agent prompt would take gigabytes."""
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

    if batch.tree is not None:
        return _tree_logps(model, batch, with_entropy)
    # from the first trained position of the row where it comes earliest (a row's response ends at the end)
    first = (batch.response_mask.cumsum(-1) == 0).sum(-1)
    k = int(batch.input_ids.shape[1] - first.min())
    position_ids = (batch.attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=position_ids,
                   logits_to_keep=k + 1).logits  # (B, k + 1, V)
    logits = logits[:, :-1, :].float()  # position j predicts the token at j + 1: the last k tokens
    lp = selective_log_softmax(logits, batch.input_ids[:, -k:])
    b, width = batch.input_ids.shape
    logps = torch.zeros((b, width), dtype=lp.dtype, device=lp.device)
    logps = torch.cat([logps[:, : width - k], lp], dim=1) * batch.response_mask
    ent = None
    if with_entropy:
        with torch.no_grad():
            e = entropy_from_logits(logits)
        ent = torch.cat([torch.zeros((b, width - k), dtype=e.dtype, device=e.device), e], dim=1) * batch.response_mask
    return logps, ent


def _tree_logps(model: Any, batch: TokenBatch, with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`token_logps` through the batch's prefix tree: one pass over the tree's nodes, the logits of only the
    nodes that predict a response token, then each row's positions gathered from them."""
    from trl.trainer.utils import entropy_from_logits

    tree = batch.tree
    assert tree is not None
    with tree_attention(model, tree):
        logits = model(input_ids=tree.input_ids, position_ids=tree.position_ids,
                       logits_to_keep=tree.keep).logits[0].float()  # (U, V)
    on = tree.source >= 0
    idx = tree.source[on]
    picked = logits[idx, batch.input_ids[on]] - torch.logsumexp(logits, dim=-1)[idx]
    logps = torch.zeros(batch.input_ids.shape, dtype=picked.dtype, device=picked.device).masked_scatter(on, picked)
    logps = logps * batch.response_mask
    ent = None
    if with_entropy:
        with torch.no_grad():
            e = entropy_from_logits(logits)[idx]
        ent = torch.zeros(batch.input_ids.shape, dtype=e.dtype, device=e.device).masked_scatter(on, e)
        ent = ent * batch.response_mask
    return logps, ent


def policy_loss(logps: torch.Tensor, batch: TokenBatch, cfg: ObjectiveConfig,
                ref_logps: torch.Tensor | None = None, entropy: torch.Tensor | None = None,
                start_logps: torch.Tensor | None = None, norm: Norm | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of the module docstring and its statistics. `start_logps`: the policy's own logprobs at the start
    of the update, used as logp_old for rows without engine logprobs. `norm`: the denominators of the whole
    update this batch is a part of (default: this batch's own)."""
    aggregate = get_loss(cfg.loss_name)
    mask = batch.response_mask
    has = batch.has_old_logps[:, None]
    fallback = start_logps if start_logps is not None else logps.detach()
    old = has * batch.old_logps + (1 - has) * fallback
    log_ratio = (logps - old) * mask
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1 - cfg.clip_low, 1 + cfg.clip_high)
    a = batch.advantages
    per_token = -torch.min(ratio * a, clipped * a)
    kl = None
    if ref_logps is not None:
        d = (ref_logps - logps) * mask
        kl = torch.exp(d) - d - 1
        if cfg.kl_coef:
            per_token = per_token + cfg.kl_coef * kl
    n_tokens = mask.sum().clamp(min=1.0)
    steps = float(batch.steps or mask.shape[0])
    norm = norm or Norm(steps=steps, tokens=float(n_tokens))
    loss = aggregate(per_token, batch, norm, cfg)
    with torch.no_grad():
        on = mask.bool()
        r = ratio[on]
        is_clipped = ((ratio < 1 - cfg.clip_low) & (a < 0)) | ((ratio > 1 + cfg.clip_high) & (a > 0))
        stats = {
            "loss": float(loss.detach()),
            "tokens": int(mask.sum()),
            "ratio_mean": float(r.mean()) if r.numel() else 1.0,
            "ratio_max": float(r.max()) if r.numel() else 1.0,
            "clip_fraction": float(is_clipped[on].float().mean()) if r.numel() else 0.0,
            "kl": float((kl * mask).sum() / n_tokens) if kl is not None else 0.0,
            # KL(old || policy), k3 again: how far the policy has moved from the one that sampled the tokens
            "kl_old": float((((ratio - 1) - log_ratio) * mask).sum() / n_tokens),
            "entropy": float((entropy * mask).sum() / n_tokens) if entropy is not None else 0.0,
        }
        engine_rows = (batch.has_old_logps[:, None] * mask).bool()
        if engine_rows.any():
            gap = (logps.detach() - batch.old_logps)[engine_rows].abs()
            stats["engine_logprob_gap_mean"] = float(gap.mean())
            stats["engine_logprob_gap_max"] = float(gap.max())
    return loss, stats
