"""One policy update from a batch of the pool's step rows (see :mod:`clawgym.train.rl_objective`).

The policy is a causal LM, usually a peft LoRA model; its reference for the KL term is the same model with the
adapter disabled, so no second copy of the weights is held. Rows are packed into micro-batches of at most
`micro_batch_tokens` (padded) tokens; gradients are accumulated over a mini-batch, weighted by each
micro-batch's share of its response tokens, and the optimizer steps once per mini-batch: `mini_batches` steps
per pass, `epochs` passes (PPO's inner loop). With the defaults (one mini-batch, one epoch) that is one step on
the whole batch.

Before the first step, the logprobs the trainer computes for each row's own response ids are compared with the
engine's (the rollout/training mismatch); rows without engine logprobs take the trainer's as their behaviour
policy.

What makes an update cheap without changing it (each exact, each tested against the plain computation):

- Steps of one trajectory are packed into one row when each model call's prompt is the previous call's prompt
  and response followed by what came back (:func:`merge_continuations`): the conversation is run once instead of
  once per step, so a 4-call episode costs about one long forward pass instead of four. The logprob of every
  token is the same either way (a causal model), and the loss keeps each step a sequence of its own.
- Steps whose every advantage is 0 (a GRPO group whose samples all got the same reward) add nothing to the
  policy-gradient loss or its gradient; without a KL term they are not run at all. They still count in the
  loss's denominators.
- With one epoch, one mini-batch, engine logprobs on every row and no dropout, the no-gradient pass before
  the update is skipped: the gradient pass's own logprobs are the policy's at the start of the update.
- Tokens that several rows of a micro-batch share (the samples of a group start from the same prompt) are run
  once (`share_prefixes`, :mod:`clawgym.train.prefix_tree`): the micro-batch is one prefix tree whose attention
  gives each token exactly the context it has in its rows. Micro-batches are then filled by the tree's size, rows
  in token order so that rows with a common prefix land together.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from clawgym.train.prefix_tree import Trie, tree_attention
from clawgym.train.rl_objective import (
    Norm,
    ObjectiveConfig,
    TokenBatch,
    build_batch,
    policy_loss,
    token_logps,
)
from clawgym.train.rl_schedule import LRSchedule


@dataclass
class UpdateResult:
    stats: dict[str, float] = field(default_factory=dict)
    epochs: list[dict[str, float]] = field(default_factory=list)  # each pass over the batch
    steps: list[dict[str, float]] = field(default_factory=list)  # each optimizer step (epoch, mini_batch, lr, ...)


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


def tree_micro_batches(rows: list[dict[str, Any]], max_tokens: int) -> list[list[dict[str, Any]]]:
    """Rows in token order (common prefixes next to each other) grouped so that each group's prefix tree holds
    at most `max_tokens` distinct prefix tokens (a row with more new tokens than that is a batch of its own)."""
    def seq(r: dict[str, Any]) -> list[int]:
        return list(r["prompt_ids"]) + list(r["response_ids"])

    out: list[list[dict[str, Any]]] = []
    cur: list[dict[str, Any]] = []
    trie = Trie()
    for r in sorted(rows, key=seq):
        s = seq(r)
        if cur and trie.nodes + len(s) - trie.shared(s) > max_tokens:
            out.append(cur)
            cur, trie = [], Trie()
        trie.insert(s)
        cur.append(r)
    if cur:
        out.append(cur)
    return out


def _advantages(r: dict[str, Any]) -> list[float]:
    a = r["advantage"]
    return [float(x) for x in a] if isinstance(a, (list, tuple)) else [float(a)] * len(r["response_ids"])


def _as_packed(r: dict[str, Any]) -> dict[str, Any]:
    """A row in the packed form (explicit mask, per-token advantages and step weights)."""
    n = len(r["response_ids"])
    mask = list(r.get("response_mask") or [1] * n)
    trained = sum(mask) or 1
    return {**r, "response_mask": mask, "advantage": _advantages(r),
            "logprobs": list(r["logprobs"]) if r.get("logprobs") is not None else None,
            "step_weights": r.get("step_weights") or [m / trained for m in mask], "steps": r.get("steps", 1)}


def merge_continuations(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pack the steps of each trajectory into as few rows as the token ids allow: a step whose prompt starts
    with the previous step's prompt + response (the next call of the same conversation) joins its row, the
    tokens in between (the tool results) untrained. Steps of different policy versions, or one with the
    engine's logprobs and one without, are not packed together. Rows without a trajectory id stay as they are."""
    out: list[dict[str, Any]] = []
    by_traj: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        tid = r.get("trajectory_id")
        if tid is None:
            out.append(r)
        else:
            by_traj.setdefault(tid, []).append(r)
    for steps in by_traj.values():
        steps.sort(key=lambda r: r.get("step_index", 0))
        cur: dict[str, Any] | None = None
        for r in steps:
            if cur is not None:
                seq_len = len(cur["prompt_ids"]) + len(cur["response_ids"])
                p = r["prompt_ids"]
                if (len(p) >= seq_len and p[:len(cur["prompt_ids"])] == cur["prompt_ids"]
                        and p[len(cur["prompt_ids"]):seq_len] == cur["response_ids"]
                        and r.get("policy_version") == cur.get("policy_version")
                        and (r.get("logprobs") is None) == (cur["logprobs"] is None)):
                    nxt = _as_packed(r)
                    gap = p[seq_len:]
                    z = [0] * len(gap)
                    cur = {**cur,
                           "response_ids": cur["response_ids"] + gap + nxt["response_ids"],
                           "response_mask": cur["response_mask"] + z + nxt["response_mask"],
                           "advantage": cur["advantage"] + [0.0] * len(gap) + nxt["advantage"],
                           "logprobs": None if cur["logprobs"] is None else cur["logprobs"] + [0.0] * len(gap)
                           + nxt["logprobs"],
                           "step_weights": cur["step_weights"] + [0.0] * len(gap) + nxt["step_weights"],
                           "steps": cur["steps"] + nxt["steps"], "is_last": r.get("is_last"),
                           "step_ids": cur.get("step_ids", [cur.get("step_id")]) + [r.get("step_id")]}
                    continue
                out.append(cur)
            cur = _as_packed(r)
        if cur is not None:
            out.append(cur)
    return out


def _has_signal(r: dict[str, Any]) -> bool:
    mask = r.get("response_mask") or [1] * len(r["response_ids"])
    return any(a != 0.0 and m for a, m in zip(_advantages(r), mask, strict=True))


def _dropout(model: Any) -> bool:
    return any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules())


def _reference(model: Any):
    """The model with its adapter disabled (the initial policy), when it is a peft model."""
    disable = getattr(model, "disable_adapter", None)
    return disable() if disable is not None else contextlib.nullcontext()


def _autocast(device: torch.device, precision: str):
    """bf16 autocast of the forward passes (mixed precision: the trained weights, their gradients, Adam's state,
    the log-softmax and the loss stay fp32); `fp32` runs everything in fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


@dataclass
class _MiniBatch:
    """One optimizer step's share of the batch: its micro-batches (each with the start and reference logprobs
    computed before the first step) and the denominators of its loss."""

    norm: Norm
    batches: list[tuple[TokenBatch, torch.Tensor | None, torch.Tensor | None]] = field(default_factory=list)

    @property
    def tokens(self) -> float:
        return sum(float(b.response_mask.sum()) for b, _, _ in self.batches)


def _norm(rows: list[dict[str, Any]]) -> Norm:
    return Norm(steps=float(sum(r.get("steps", 1) for r in rows)),
                tokens=float(sum(sum(r.get("response_mask") or [1] * len(r["response_ids"])) for r in rows)))


def split_mini_batches(rows: list[dict[str, Any]], n: int) -> list[list[dict[str, Any]]]:
    """`rows` cut into at most `n` parts of about equal response tokens, none empty. With `n` > 1 the rows are
    first put in token order and cut where the prompt changes (between GRPO groups) when there are enough such
    places, so that a group's samples stay in one part and share their prefix in its micro-batches; the same
    parts every epoch (deterministic, no shuffle)."""
    if n <= 1 or len(rows) <= 1:
        return [list(rows)]
    order = sorted(rows, key=lambda r: list(r["prompt_ids"]) + list(r["response_ids"]))
    cum = [0.0]
    for r in order:
        cum.append(cum[-1] + sum(r.get("response_mask") or [1] * len(r["response_ids"])))
    boundaries = [i for i in range(1, len(order)) if order[i]["prompt_ids"] != order[i - 1]["prompt_ids"]]
    cuts = boundaries if len(boundaries) >= n - 1 else list(range(1, len(order)))
    chosen: list[int] = []
    for k in range(1, n):
        target = cum[-1] * k / n
        left = [c for c in cuts if c > (chosen[-1] if chosen else 0)]
        if not left:
            break
        chosen.append(min(left, key=lambda c: abs(cum[c] - target)))
    edges = [0, *chosen, len(order)]
    return [order[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]


@contextlib.contextmanager
def _checkpointing(model: Any, on: bool):
    """Gradient checkpointing (transformers' own, non-reentrant) for the duration, when asked and not already on:
    each layer's activations are recomputed in the backward pass instead of held."""
    if not on:
        yield
        return
    new = hasattr(model, "activation_checkpointing_enable")  # transformers 5's name; `gradient_...` before it
    already = model.is_activation_checkpointing if new else model.is_gradient_checkpointing
    if already:
        yield
        return
    if new:
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    try:
        yield
    finally:
        if new:
            model.activation_checkpointing_disable()
        else:
            model.gradient_checkpointing_disable()


def _prepare(model: Any, ref_model: Any, parts: list[list[dict[str, Any]]], runs: list[list[dict[str, Any]]], *,
             need_start: bool, want_ref: bool, micro_batch_tokens: int, pad_id: int, share_prefixes: bool,
             device: torch.device, precision: str) -> list[_MiniBatch]:
    """The mini-batches' micro-batches on `device`, with the policy's logprobs before the first step (when
    needed) and the reference's (with a KL term): the no-gradient pass before the update."""
    minis: list[_MiniBatch] = []
    with torch.no_grad(), _autocast(device, precision):
        grouping = tree_micro_batches if share_prefixes else micro_batches
        for part, run in zip(parts, runs, strict=True):
            if not run:  # a part without signal and no KL term: no gradient, no step
                continue
            mini = _MiniBatch(norm=_norm(part))
            for group in grouping(run, micro_batch_tokens):
                b = build_batch(group, pad_id, tree=share_prefixes).to(device)
                start = token_logps(model, b)[0] if need_start else None
                ref = None
                if want_ref and ref_model is not None:  # a separate initial policy (full fine-tuning)
                    ref, _ = token_logps(ref_model, b)
                elif want_ref:
                    with _reference(model):
                        ref, _ = token_logps(model, b)
                mini.batches.append((b, start, ref))
            minis.append(mini)
    return minis


def _accumulate(model: Any, mini: _MiniBatch, cfg: ObjectiveConfig, *, device: torch.device, precision: str,
                checkpointing: bool, measure_gap: Any) -> dict[str, float]:
    """The gradient of one mini-batch, accumulated over its micro-batches; its statistics. `measure_gap`: called
    with each micro-batch's logprobs when they are the policy's before any step (None: they are not)."""
    st_step: dict[str, float] = {}
    for b, start, ref in mini.batches:
        # with checkpointing the backward pass reruns the forward: the tree's attention must hold there too
        tree_ctx = tree_attention(model, b.tree) if checkpointing and b.tree is not None else contextlib.nullcontext()
        with tree_ctx:
            with _autocast(device, precision):
                logps, ent = token_logps(model, b, with_entropy=True)
            if start is None and measure_gap is not None:  # no update yet: these are the start logprobs
                measure_gap(b, logps.detach())
            loss, st = policy_loss(logps, b, cfg, ref_logps=ref, entropy=ent, start_logps=start, norm=mini.norm)
            loss.backward()
        share = float(b.response_mask.sum()) / max(mini.tokens, 1.0)
        st_step["loss"] = st_step.get("loss", 0.0) + st["loss"]  # the parts of the mini-batch's loss (see Norm)
        for k in ("ratio_mean", "clip_fraction", "kl", "kl_old", "entropy"):
            st_step[k] = st_step.get(k, 0.0) + st[k] * share
        st_step["ratio_max"] = max(st_step.get("ratio_max", 0.0), st["ratio_max"])
    return st_step


def rl_update(model: Any, optimizer: torch.optim.Optimizer, rows: list[dict[str, Any]],
              cfg: ObjectiveConfig | None = None, *, epochs: int = 1, micro_batch_tokens: int = 8192,
              pad_id: int = 0, max_grad_norm: float | None = 1.0, ref_model: Any = None,
              precision: str = "fp32", share_prefixes: bool = True, mini_batches: int = 1,
              lr_schedule: LRSchedule | None = None, first_step: int = 0,
              gradient_checkpointing: bool = False) -> UpdateResult:
    """Update `model` on `rows`; return the statistics of the update (those of the first epoch's forward pass
    for the mismatch, the last epoch's for the rest; :attr:`UpdateResult.steps` has each optimizer step's).
    `ref_model`: the initial policy of the KL term when `model` is not a peft model whose adapter can be
    disabled. `precision`: fp32, or bf16 for the forward passes under autocast (see :func:`_autocast`).
    `share_prefixes`: run the tokens rows share once (see the module's notes); the same loss and gradient
    either way.

    At scale (PPO's inner loop): `epochs` passes over the batch, each of `mini_batches` optimizer steps on a part
    of it (:func:`split_mini_batches`; each part's loss normalized by its own steps and tokens), each part run as
    micro-batches of at most `micro_batch_tokens` whose gradients accumulate. The old policy of rows without
    engine logprobs is the policy before the first step (computed once, up front), so every step after the
    first sees ratios away from 1 and the clip acts. `lr_schedule`: the learning rate of each step, the first of
    this update being the run's step `first_step`; `max_grad_norm`: the gradient norm each step is clipped to;
    `gradient_checkpointing`: recompute activations in the backward pass (less memory, the same gradient)."""
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"update precision {precision!r}: fp32 or bf16")
    if mini_batches < 1 or epochs < 0:
        raise ValueError(f"mini_batches {mini_batches} (>= 1), epochs {epochs} (>= 1)")
    cfg = cfg or ObjectiveConfig()
    if not rows:
        return UpdateResult(stats={"tokens": 0})
    t0 = time.monotonic()
    packed = merge_continuations(rows)
    want_ref = cfg.kl_coef > 0
    parts = split_mini_batches(packed, mini_batches)
    runs = [p if want_ref else [r for r in p if _has_signal(r)] for p in parts]
    if not any(runs):  # every advantage 0 (all samples of each group rewarded alike): nothing to learn, nothing changes
        return UpdateResult(stats={"tokens": 0, "rows": len(rows), "packed_rows": len(packed), "rows_run": 0,
                                   "loss": 0.0, "kl": 0.0, "clip_fraction": 0.0, "ratio_mean": 1.0,
                                   "ratio_max": 1.0, "skipped": "no learning signal", "optimizer_steps": 0,
                                   "update_s": round(time.monotonic() - t0, 3)})
    n_parts = sum(1 for r in runs if r)
    need_start = epochs > 1 or n_parts > 1 or any(r.get("logprobs") is None for run in runs for r in run) \
        or _dropout(model)
    device = next(model.parameters()).device  # rows are built on the CPU, then go where the policy is
    model.eval()
    minis = _prepare(model, ref_model, parts, runs, need_start=need_start, want_ref=want_ref,
                     micro_batch_tokens=micro_batch_tokens, pad_id=pad_id, share_prefixes=share_prefixes,
                     device=device, precision=precision)
    batches = [x for m in minis for x in m.batches]
    total_tokens = sum(m.tokens for m in minis)
    result = UpdateResult()
    gap = {"sum": 0.0, "n": 0, "max": 0.0}

    def measure_gap(b: TokenBatch, start: torch.Tensor) -> None:
        on = (b.has_old_logps[:, None] * b.response_mask).bool()
        if on.any():
            g = (start - b.old_logps)[on].abs()
            gap["sum"] += float(g.sum())
            gap["n"] += g.numel()
            gap["max"] = max(gap["max"], float(g.max()))

    for b, start, _ in batches:
        if start is not None:
            measure_gap(b, start)
    step = first_step
    model.train()
    with _checkpointing(model, gradient_checkpointing):
        for epoch in range(max(1, epochs)):
            agg: dict[str, float] = {}
            for i, mini in enumerate(minis):
                optimizer.zero_grad(set_to_none=True)
                st_step = _accumulate(model, mini, cfg, device=device, precision=precision,
                                      checkpointing=gradient_checkpointing,
                                      measure_gap=measure_gap if epoch == 0 else None)
                if max_grad_norm is not None:
                    params = [p for p in model.parameters() if p.requires_grad]
                    st_step["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
                if lr_schedule is not None and not lr_schedule.inert:
                    lr_schedule.apply(optimizer, step)
                st_step["lr"] = float(optimizer.param_groups[0]["lr"])
                optimizer.step()
                result.steps.append({"step": step, "epoch": epoch, "mini_batch": i, **st_step})
                step += 1
                # the pass: each mini-batch's statistics weighted by its share of the tokens (one: its own)
                w = mini.tokens / max(total_tokens, 1.0)
                for k in ("loss", "ratio_mean", "clip_fraction", "kl", "kl_old", "entropy"):
                    agg[k] = agg.get(k, 0.0) + st_step[k] * w
                agg["ratio_max"] = max(agg.get("ratio_max", 0.0), st_step["ratio_max"])
                if "grad_norm" in st_step:
                    agg["grad_norm"] = agg.get("grad_norm", 0.0) + st_step["grad_norm"] / len(minis)
                agg["lr"] = st_step["lr"]
            result.epochs.append(agg)
    model.eval()
    result.stats = {**result.epochs[-1], "tokens": int(total_tokens), "rows": len(rows), "packed_rows": len(packed),
                    "rows_run": sum(len(r) for r in runs),
                    "sequence_tokens": int(sum(int(b.attention_mask.sum()) for b, _, _ in batches)),
                    "computed_tokens": int(sum(b.computed_tokens for b, _, _ in batches)),
                    "micro_batches": len(batches), "mini_batches": len(minis),
                    "optimizer_steps": len(result.steps), "update_s": round(time.monotonic() - t0, 3)}
    if gap["n"]:
        result.stats["engine_logprob_gap_mean"] = gap["sum"] / gap["n"]
        result.stats["engine_logprob_gap_max"] = gap["max"]
    return result
