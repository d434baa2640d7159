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

Several processes (``torchrun``: gloo on CPUs, NCCL on GPUs; see :func:`process_world`): every process holds the
same rows and the same weights; each runs its share of every mini-batch's micro-batches (:func:`assign_micro_batches`),
the gradients are summed over the processes before the clip and the step (:func:`_all_reduce_grads`), so every
process takes the same step, the one a single process takes on the whole batch. The loss's denominators are the
whole mini-batch's (:class:`Norm` from its rows, whoever runs them), so the micro-batch losses of all processes
add up to the single-process loss; the statistics are summed (or maxed) over the processes the same way.

Sharded (``--fsdp``, :func:`shard_policy`): the same deal of micro-batches, but the policy is wrapped with PyTorch
FSDP2 (``fully_shard`` on each decoder layer, then on the whole model), so each process holds a 1/N shard of every
parameter (the frozen base's too), of the gradients and of Adam's state (ZeRO-3's partitioning); a layer's
weights are all-gathered for its forward and backward, its gradients reduce-scattered (summed, not averaged).
Those are collectives, so every process runs the same number of forward and backward passes per optimizer step: a
process dealt fewer micro-batches of a mini-batch runs padding passes (a one-token row, loss times 0: a zero
gradient). The gradient clip takes the global norm over the shards; what is published is gathered to rank 0
(:func:`gather_state`).
"""

from __future__ import annotations

import contextlib
import json
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
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
    # sharded: the full weights (and optimizer state) to publish, gathered to rank 0 by the caller (gather_state)
    published: Any = None


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
    computed before the first step; in several processes, only this process's share of them), the denominators of
    its loss and its trained tokens (both of the whole mini-batch, in every process)."""

    norm: Norm
    tokens: float
    batches: list[tuple[TokenBatch, torch.Tensor | None, torch.Tensor | None]] = field(default_factory=list)
    padding: int = 0  # sharded: passes with zero loss weight, so every process runs as many as the busiest
    pad: TokenBatch | None = None  # the padding passes' batch


def process_world() -> tuple[int, int]:
    """(rank, world size) when torch.distributed is initialized with several processes, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _cost(group: list[dict[str, Any]], tree: bool) -> int:
    """The tokens a micro-batch's forward pass runs: its prefix tree's nodes, or rows x the longest row."""
    seqs = [list(r["prompt_ids"]) + list(r["response_ids"]) for r in group]
    if not tree:
        return len(seqs) * max(map(len, seqs))
    trie = Trie()
    for s in seqs:
        trie.insert(s)
    return trie.nodes


def assign_micro_batches(groups: list[list[dict[str, Any]]], world: int,
                         tree: bool = True) -> list[list[list[dict[str, Any]]]]:
    """One mini-batch's micro-batches dealt to `world` processes: element r holds process r's. With fewer
    micro-batches than processes, the one with the most rows is halved (its rows in order) until there are
    enough or every one is a single row; then the micro-batches go, costliest first, each to the process with
    the least cost so far (lowest rank on a tie). Deterministic: every process computes the same deal from the
    same rows. A process may get none (fewer rows than processes); it still joins the gradient sum."""
    groups = [list(g) for g in groups]
    while len(groups) < world:
        i = max(range(len(groups)), key=lambda j: (len(groups[j]), -j))
        if len(groups[i]) < 2:
            break
        g = groups[i]
        groups[i:i + 1] = [g[:len(g) // 2], g[len(g) // 2:]]
    owned: list[list[int]] = [[] for _ in range(world)]
    load = [0] * world
    costs = [_cost(g, tree) for g in groups]
    for i in sorted(range(len(groups)), key=lambda j: (-costs[j], j)):
        r = min(range(world), key=lambda k: (load[k], k))
        owned[r].append(i)
        load[r] += costs[i]
    return [[groups[i] for i in sorted(mine)] for mine in owned]  # each in the batch's order


def _all_reduce_grads(params: list[torch.nn.Parameter], bucket_elems: int = 1 << 24) -> None:
    """Sum the gradients of `params` over the processes, in place (a parameter without a gradient in one process
    counts as zeros there; one without a gradient in every process keeps none, as in one process, so the
    optimizer skips it alike). Flattened into buckets of at most `bucket_elems` elements per dtype, so a LoRA
    adapter's hundreds of small tensors cost a few collectives."""
    import torch.distributed as dist

    if not params:
        return
    has = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=params[0].device)
    dist.all_reduce(has, op=dist.ReduceOp.MAX)
    params = [p for p, h in zip(params, has.tolist(), strict=True) if h]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    by_dtype: dict[torch.dtype, list[torch.nn.Parameter]] = {}
    for p in params:
        by_dtype.setdefault(p.grad.dtype, []).append(p)
    for group in by_dtype.values():
        start = 0
        while start < len(group):
            bucket, n = [], 0
            while start < len(group) and (not bucket or n + group[start].grad.numel() <= bucket_elems):
                bucket.append(group[start])
                n += group[start].grad.numel()
                start += 1
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            dist.all_reduce(flat)
            offset = 0
            for p in bucket:
                k = p.grad.numel()
                p.grad.copy_(flat[offset:offset + k].view_as(p.grad))
                offset += k


_SUMMED = ("loss", "ratio_mean", "clip_fraction", "kl", "kl_old", "entropy")


def _reduce_stats(st: dict[str, float], device: torch.device) -> dict[str, float]:
    """A step's statistics over the processes: each process's parts of the sums (its micro-batches' losses and
    token-weighted means, weighted by the whole mini-batch's tokens) summed, the ratio's max maxed."""
    import torch.distributed as dist

    t = torch.tensor([st.get(k, 0.0) for k in _SUMMED], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    m = torch.tensor([st.get("ratio_max", 0.0)], dtype=torch.float64, device=device)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    return {**st, **dict(zip(_SUMMED, (float(x) for x in t.tolist()), strict=True)), "ratio_max": float(m)}


def _check_same_inputs(model: Any, rows: list[dict[str, Any]], device: torch.device) -> None:
    """Every process must hold the same rows and start from the same trained weights (else each would step
    differently and the processes drift apart silently): a checksum of each, compared over the processes."""
    import torch.distributed as dist

    digest = zlib.crc32(json.dumps([[r["prompt_ids"], r["response_ids"], r["advantage"], r.get("logprobs"),
                                     r.get("trajectory_id"), r.get("step_index")] for r in rows]).encode())
    with torch.no_grad():
        # a float64 sum of each tensor (no copy of it): different draws of an adapter never sum alike
        # (sharded weights differ per process by design: they were made equal before sharding, shard_policy)
        weights = sum(float(p.detach().sum(dtype=torch.float64)) for p in model.parameters()
                      if p.requires_grad and not _is_dtensor(p))
    t = torch.tensor([digest, weights, -digest, -weights], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if float(t[0]) != -float(t[2]):
        raise ValueError("the processes of the update hold different rows; give every process the same batch")
    if float(t[1]) != -float(t[3]):
        raise ValueError("the processes of the update start from different weights; load the same adapter in each "
                         "or call broadcast_trainable(model) first")


def broadcast_trainable(model: Any) -> None:
    """Rank 0's trainable weights copied to every process (a fresh LoRA adapter is drawn at random in each); a
    no-op in one process."""
    import torch.distributed as dist

    if process_world()[1] == 1:
        return
    if is_sharded(model):
        raise ValueError("broadcast_trainable after shard_policy: broadcast the weights before sharding them")
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                dist.broadcast(p.data, 0)


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
    """The mini-batches' micro-batches on `device` (this process's share of them), with the policy's logprobs
    before the first step (when needed) and the reference's (with a KL term): the no-gradient pass before the
    update."""
    minis: list[_MiniBatch] = []
    rank, world = process_world()
    sharded = is_sharded(model)
    with torch.no_grad(), _autocast(device, precision):
        grouping = tree_micro_batches if share_prefixes else micro_batches
        for part, run in zip(parts, runs, strict=True):
            if not run:  # a part without signal and no KL term: no gradient, no step
                continue
            mini = _MiniBatch(norm=_norm(part), tokens=_norm(run).tokens)
            groups = grouping(run, micro_batch_tokens)
            if world > 1:
                dealt = assign_micro_batches(groups, world, share_prefixes)
                groups = dealt[rank]
                if sharded:  # the same number of passes in every process (FSDP's collectives)
                    mini.padding = max(map(len, dealt)) - len(groups)
            for group in groups:
                b = build_batch(group, pad_id, tree=share_prefixes).to(device)
                mini.batches.append((b, *_start_and_ref(model, ref_model, b, need_start, want_ref)))
            if mini.padding:
                mini.pad = build_batch([_PAD_ROW | {"prompt_ids": [pad_id], "response_ids": [pad_id]}], pad_id,
                                       tree=share_prefixes).to(device)
                for _ in range(mini.padding):  # the no-gradient passes the others run on their micro-batches
                    _start_and_ref(model, ref_model, mini.pad, need_start, want_ref)
            minis.append(mini)
    return minis


_PAD_ROW = {"advantage": 0.0, "response_mask": [1], "steps": 1}


def _start_and_ref(model: Any, ref_model: Any, b: TokenBatch, need_start: bool,
                   want_ref: bool) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The policy's logprobs of `b` before the first step (when needed) and the reference's (with a KL term)."""
    start = token_logps(model, b)[0] if need_start else None
    ref = None
    if want_ref and ref_model is not None:  # a separate initial policy (full fine-tuning)
        ref, _ = token_logps(ref_model, b)
    elif want_ref:
        with _reference(model):
            ref, _ = token_logps(model, b)
    return start, ref


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
        share = float(b.response_mask.sum()) / max(mini.tokens, 1.0)  # of the whole mini-batch (all processes)
        st_step["loss"] = st_step.get("loss", 0.0) + st["loss"]  # the parts of the mini-batch's loss (see Norm)
        for k in ("ratio_mean", "clip_fraction", "kl", "kl_old", "entropy"):
            st_step[k] = st_step.get(k, 0.0) + st[k] * share
        st_step["ratio_max"] = max(st_step.get("ratio_max", 0.0), st["ratio_max"])
    for _ in range(mini.padding):  # sharded: the passes the busiest process runs more (a zero gradient here)
        b = mini.pad
        tree_ctx = tree_attention(model, b.tree) if checkpointing and b.tree is not None else contextlib.nullcontext()
        with tree_ctx:
            with _autocast(device, precision):
                logps, _ = token_logps(model, b)
            (logps.sum() * 0.0).backward()  # through every layer: each one's reduce-scatter runs
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

    In several processes (torch.distributed initialized, world size > 1) every process must be given the same
    `rows` and hold the same weights (checked; see :func:`broadcast_trainable`); each runs its share of the
    micro-batches and the gradients are summed before each step, so every process takes the single-process step
    and returns the same statistics (the whole batch's). The gradients are summed by hand rather than by
    wrapping the model in DDP: the processes may run different numbers of micro-batches (or none) per step, the
    forward passes go through the tree attention, the adapter-disabled reference and checkpointing of the bare
    model, and only the trainable parameters (a LoRA adapter's) are summed, once per step.

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
    world = process_world()[1]
    sharded = is_sharded(model)
    if world > 1:
        _check_same_inputs(model, rows, device)
    _reset_peak_memory(device)
    model.eval()
    minis = _prepare(model, ref_model, parts, runs, need_start=need_start, want_ref=want_ref,
                     micro_batch_tokens=micro_batch_tokens, pad_id=pad_id, share_prefixes=share_prefixes,
                     device=device, precision=precision)
    if sharded:
        # FSDP keeps the root's parameters gathered after a forward (its embedding, often tied to the LM head):
        # shard them again, so that `params` below are the sharded ones the optimizer holds, the memory freed
        _reshard(model, ref_model)
    batches = [x for m in minis for x in m.batches]  # this process's
    total_tokens = sum(m.tokens for m in minis)  # the whole batch's
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
    params = [p for p in model.parameters() if p.requires_grad]
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
                st_step = _step(optimizer, params, st_step, step, world=world, sharded=sharded, device=device,
                                max_grad_norm=max_grad_norm, lr_schedule=lr_schedule)
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
    counts = {"sequence_tokens": sum(int(b.attention_mask.sum()) for b, _, _ in batches),
              "computed_tokens": sum(b.computed_tokens for b, _, _ in batches), "micro_batches": len(batches)}
    if world > 1:  # the whole batch's counts and logprob gap, over the processes
        counts, gap = _reduce_counts(counts, gap, device)
    result.stats = {**result.epochs[-1], "tokens": int(total_tokens), "rows": len(rows), "packed_rows": len(packed),
                    "rows_run": sum(len(r) for r in runs), **counts, "mini_batches": len(minis),
                    "optimizer_steps": len(result.steps), "update_s": round(time.monotonic() - t0, 3)}
    if world > 1:
        result.stats["processes"] = world
    result.stats.update(_memory_stats(model, optimizer, device, sharded))
    if sharded:
        result.stats["padding_passes"] = _reduce_sum(sum(m.padding for m in minis), device)
    if gap["n"]:
        result.stats["engine_logprob_gap_mean"] = gap["sum"] / gap["n"]
        result.stats["engine_logprob_gap_max"] = gap["max"]
    return result


def _step(optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter], st_step: dict[str, float], step: int,
          *, world: int, sharded: bool, device: torch.device, max_grad_norm: float | None,
          lr_schedule: LRSchedule | None) -> dict[str, float]:
    """One optimizer step on the accumulated gradients (summed over the processes first, unless FSDP has already
    reduce-scattered each micro-batch's), clipped; the step's statistics (the whole mini-batch's)."""
    if world > 1:
        if not sharded:
            _all_reduce_grads(params)
        st_step = _reduce_stats(st_step, device)
    if max_grad_norm is not None:
        st_step["grad_norm"] = _clip(params, max_grad_norm)
    if lr_schedule is not None and not lr_schedule.inert:
        lr_schedule.apply(optimizer, step)
    st_step["lr"] = float(optimizer.param_groups[0]["lr"])
    optimizer.step()
    return st_step


def _clip(params: list[torch.nn.Parameter], max_norm: float) -> float:
    """Clip the gradients of `params` to `max_norm` in place; their norm before. Sharded gradients (DTensors) give
    the global norm: each process's part of the sum of squares, summed over the processes."""
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return float(norm.full_tensor() if _is_dtensor(norm) else norm)


def _reduce_sum(n: int, device: torch.device) -> int:
    import torch.distributed as dist

    t = torch.tensor([float(n)], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return int(t)


def _memory_stats(model: Any, optimizer: torch.optim.Optimizer, device: torch.device,
                  sharded: bool) -> dict[str, Any]:
    """Per process (lists in rank order): the parameter, trainable and optimizer-state elements it holds, and its
    peak memory (on a GPU the most torch allocated during the update; on the CPU the process's peak resident size
    during the update where Linux lets it be reset, else since the process started)."""
    params = list(model.parameters())
    local = [sum(_local(p).numel() for p in params), sum(_local(p).numel() for p in params if p.requires_grad),
             sum(_local(v).numel() for st in optimizer.state.values() for v in st.values()
                 if torch.is_tensor(v) and v.dim() > 0)]
    peak, kind = _peak_memory(device)
    rows = [[*map(float, local), peak]]
    rank, world = process_world()
    if world > 1:
        import torch.distributed as dist

        t = torch.zeros((world, 4), dtype=torch.float64, device=device)
        t[rank] = torch.tensor(rows[0], dtype=torch.float64)
        dist.all_reduce(t)
        rows = t.tolist()
    out: dict[str, Any] = {
        "param_numel": sum(p.numel() for p in params),  # the whole model's (a DTensor's numel is its full size)
        "param_numel_local": [int(r[0]) for r in rows], "trainable_numel_local": [int(r[1]) for r in rows],
        "optimizer_state_numel_local": [int(r[2]) for r in rows],
        "peak_memory_mb": [round(r[3], 1) for r in rows], "peak_memory_of": kind}
    if sharded:
        out["fsdp"] = True
    return out


_PEAK_RESET = {"done": False}


def _reset_peak_memory(device: torch.device) -> None:
    """Start measuring the update's peak memory: torch's allocator peak on a GPU; on the CPU the process's peak
    resident size (Linux: writing 5 to /proc/self/clear_refs resets VmHWM; elsewhere it is not reset)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        Path("/proc/self/clear_refs").write_text("5")
        _PEAK_RESET["done"] = True
    except OSError:
        _PEAK_RESET["done"] = False


def _peak_memory(device: torch.device) -> tuple[float, str]:
    """(MiB, what it measures) since :func:`_reset_peak_memory`."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda max allocated during the update"
    if _PEAK_RESET["done"]:
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024, "process peak RSS during the update"
        except OSError:
            pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process peak RSS since it started"


def _is_dtensor(t: Any) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(t, DTensor)


def _local(t: torch.Tensor) -> torch.Tensor:
    """This process's part of `t` (its shard when sharded)."""
    return t.to_local() if _is_dtensor(t) else t


def _reshard(*models: Any) -> None:
    from torch.distributed.fsdp import FSDPModule

    for model in models:
        for m in (model.modules() if model is not None else ()):
            if isinstance(m, FSDPModule):
                m.reshard()


def is_sharded(model: Any) -> bool:
    """Whether `model` was wrapped by :func:`shard_policy` (FSDP2)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _fully_shard(model: Any, device: torch.device) -> None:
    """FSDP2 on each decoder layer (the classes transformers names in `_no_split_modules`), then the whole model;
    gradients summed over the processes, not averaged (the loss is already the whole mini-batch's)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(f"--fsdp: no decoder layer found in {type(base).__name__} (its _no_split_modules: "
                         f"{sorted(names) or 'none'})")
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    for m in model.modules():
        if isinstance(m, FSDPModule):
            # a plain SUM (not NCCL's PREMUL_SUM for the factor, which gloo lacks): divide by 1 after it, a no-op
            m.set_gradient_divide_factor(1.0)
            m.set_force_sum_reduction_for_comms(True)


def shard_policy(model: Any, optimizer: torch.optim.Optimizer, ref_model: Any = None) -> torch.optim.Optimizer:
    """Shard `model` across the processes in place (FSDP2; see the module's notes) and return an optimizer of the
    same kind and settings over the sharded parameters, holding this process's shard of `optimizer`'s state (a
    resumed adapter's Adam moments). `ref_model` (a separate reference of the KL term) is sharded the same way.
    Every process must hold the same weights first (:func:`broadcast_trainable`): each keeps its own part of them.
    The old optimizer must not be used after this."""
    from torch.distributed.tensor import distribute_tensor

    rank, world = process_world()
    if world == 1:
        raise ValueError("--fsdp shards the update across processes: run it under torchrun with 2 or more")
    if is_sharded(model):
        raise ValueError("the policy is already sharded")
    device = next(model.parameters()).device
    name_of = {id(p): n for n, p in model.named_parameters()}
    groups = [([name_of[id(p)] for p in g["params"]], {k: v for k, v in g.items() if k != "params"})
              for g in optimizer.param_groups]
    state = {name_of[id(p)]: st for p, st in optimizer.state.items()}
    optimizer.state.clear()  # the full tensors go once sharded
    _fully_shard(model, device)
    if ref_model is not None:
        _fully_shard(ref_model, device)
    params = dict(model.named_parameters())
    new = type(optimizer)([{**settings, "params": [params[n] for n in names]} for names, settings in groups])
    for n, st in state.items():  # each state tensor shaped like its parameter is sharded like it
        p = params[n]
        new.state[p] = {k: distribute_tensor(v.to(device), p.device_mesh, p.placements)
                        if torch.is_tensor(v) and v.shape == p.shape else v for k, v in st.items()}
    return new


def gather_state(model: Any, optimizer: torch.optim.Optimizer | None, *, trainable_only: bool) -> Any:
    """The full weights of a sharded `model` on rank 0's CPU (a collective: every process calls it; the others
    get None): `(state_dict, optimizer_state)`, the state dict of the trainable parameters only (a LoRA adapter's)
    or of every one, the optimizer's in the form `optimizer.state_dict()` has in one process (None without
    `optimizer`). Each tensor is gathered in turn, so a process holds one whole tensor at a time beside its shard."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    full = StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=trainable_only)
    sd = get_model_state_dict(model, options=full)
    first: dict[int, str] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        if first.setdefault(id(p), n) != n:  # a tied alias (an LM head sharing the embedding): saved once, as in
            sd.pop(n, None)                  # one process (gathered copies no longer share storage to tell by)
    osd = None
    if optimizer is not None:
        fqn = get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True,
                                                                                 cpu_offload=True))
        if fqn:  # keyed by parameter name: back to the optimizer's own numbering, its parameters in order
            index = {n: i for i, n in enumerate(n for g in fqn["param_groups"] for n in g["params"])}
            osd = {"state": {index[n]: st for n, st in fqn["state"].items()},
                   "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in fqn["param_groups"]]}
    return (sd, osd) if process_world()[0] == 0 else None


def _reduce_counts(counts: dict[str, int], gap: dict[str, Any],
                   device: torch.device) -> tuple[dict[str, int], dict[str, Any]]:
    """The token and micro-batch counts and the engine-logprob gap summed (its max maxed) over the processes, and
    the most tokens one process computed."""
    import torch.distributed as dist

    keys = sorted(counts)
    t = torch.tensor([float(counts[k]) for k in keys] + [gap["sum"], float(gap["n"])], dtype=torch.float64,
                     device=device)
    dist.all_reduce(t)
    m = torch.tensor([gap["max"], float(counts["computed_tokens"])], dtype=torch.float64, device=device)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    vals = t.tolist()
    # the busiest process's forward tokens: the update's time is about its share (computed_tokens / it: the speedup)
    return ({**{k: int(v) for k, v in zip(keys, vals, strict=False)}, "computed_tokens_process_max": int(m[1])},
            {"sum": vals[-2], "n": int(vals[-1]), "max": float(m[0])})
