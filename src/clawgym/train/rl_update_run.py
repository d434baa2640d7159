"""One RL update from a saved batch, in one process or several (`clawgym train rl-update`).

The batch is what `clawgym train rl` trains on and keeps (`OUT/batches/v<N>.jsonl`, the rows of `clawgym pool
export --format rl`), or any JSONL / JSON list of such rows. The policy is loaded as `train rl` loads it (a fresh
LoRA adapter drawn with `seed`, or `adapter`'s with its optimizer state, or every weight with `full`), updated
once by :func:`clawgym.train.rl_update.rl_update`, and the update's statistics written to `OUT/metrics.json`;
with `save`, the adapter too (`OUT/adapter/`, peft format with the optimizer's state; `OUT/weights/` with
`full`).

Under `torchrun` (``python -m torch.distributed.run --nproc_per_node N -m clawgym train rl-update ...``) every
process loads the same batch and policy (rank 0's trainable weights are broadcast), runs its share of each
mini-batch and takes the same summed-gradient step: the result is the single-process update of the same batch.
Only rank 0 writes. The process group is gloo on CPUs and NCCL on CUDA GPUs (one GPU per process, the process's
``LOCAL_RANK``). With `fsdp` the policy is sharded across the processes (:func:`clawgym.train.rl_update.shard_policy`)
and what is saved is gathered to rank 0 first (:func:`clawgym.train.rl_update.gather_state`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from clawgym.core.atomic import write_text
from clawgym.train.rl_loop import RLError, RLOptions, train_device


def read_batch(path: Path) -> list[dict[str, Any]]:
    """The rows of a batch file: JSONL (one row a line) or one JSON list; each row needs prompt_ids,
    response_ids and advantage."""
    if not path.is_file():
        raise RLError(f"{path}: no such batch file")
    text = path.read_text(encoding="utf-8")
    try:
        rows = json.loads(text) if text.lstrip().startswith("[") else [
            json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise RLError(f"{path}: not JSON / JSONL rows ({exc})") from None
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or not all(k in r for k in ("prompt_ids", "response_ids", "advantage")):
            raise RLError(f"{path}: row {i + 1} lacks prompt_ids, response_ids or advantage")
        if r["advantage"] is None:
            raise RLError(f"{path}: row {i + 1}: advantage is null (a `pool export --credit gae` row: its advantage "
                          "needs the policy's values; train on it with `train rl --credit gae`, or export another credit)")
    if not rows:
        raise RLError(f"{path}: no rows")
    return rows


def start_processes(device: str, timeout_s: float = 1800.0) -> tuple[bool, str]:
    """Join the process group `torchrun` describes (WORLD_SIZE > 1 in the environment) unless one is already
    initialized; returns (whether it was started here, the device of this process: with CUDA, its LOCAL_RANK's
    GPU). `timeout_s`: how long a collective may wait for the other processes (in `train rl` the others wait
    through rank 0's whole rollout)."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return False, device
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.startswith("cuda"):
        if torch.cuda.device_count() <= local:
            raise RLError(f"process {local} of the update has no GPU of its own (torch sees "
                          f"{torch.cuda.device_count()}); run at most that many processes per node or use --device cpu")
        device = f"cuda:{local}"
        torch.cuda.set_device(local)
    dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(seconds=timeout_s))
    return True, device


def run_update(batch: Path, out: Path, opts: RLOptions, *, adapter: Path | None = None,
               save: bool = True) -> dict[str, Any]:
    """Update the policy of `opts` (from `adapter` when given) once on the rows of `batch`; write
    `out/metrics.json` (and the adapter with `save`) from rank 0; return the metrics (in every process)."""
    import torch
    import torch.distributed as dist

    from clawgym.core.precision import resolve_precision
    from clawgym.train.rl_loop import (
        _check_update_options,
        _reference_model,
        _save_adapter,
        _trainable_model,
    )
    from clawgym.train.rl_objective import ObjectiveConfig
    from clawgym.train.rl_schedule import LRSchedule
    from clawgym.train.rl_update import (
        broadcast_trainable,
        gather_state,
        process_world,
        rl_update,
        shard_policy,
    )

    _check_update_options(opts)
    rows = read_batch(batch)
    if adapter is not None and not adapter.is_dir():
        raise RLError(f"--adapter {adapter}: no such directory")
    started, device = start_processes(train_device(opts.device))
    try:
        rank, world = process_world()
        torch.manual_seed(opts.seed)
        tok, model, opt = _trainable_model(opts, adapter, device)
        broadcast_trainable(model)
        ref_model = _reference_model(opts, None, device)  # the base model, as in `train rl`
        if opts.fsdp:
            opt = shard_policy(model, opt, ref_model)
        cfg = ObjectiveConfig(algo=opts.algo, clip_low=opts.clip, clip_high=opts.clip, kl_coef=opts.kl_coef,
                              max_response_len=opts.max_tokens)
        schedule = LRSchedule(opts.lr, opts.lr_schedule, opts.warmup_steps,
                              max(1, max(1, opts.epochs) * opts.mini_batches))
        upd = rl_update(model, opt, rows, cfg, epochs=opts.epochs, micro_batch_tokens=opts.micro_batch_tokens,
                        pad_id=tok.pad_token_id or 0, ref_model=ref_model,
                        precision=resolve_precision(opts.train_precision), share_prefixes=opts.share_prefixes,
                        mini_batches=opts.mini_batches, lr_schedule=schedule, max_grad_norm=opts.max_grad_norm,
                        gradient_checkpointing=opts.gradient_checkpointing)
        metrics = {"batch": str(batch), "processes": world, "device": device, "stats": upd.stats,
                   "steps": upd.steps, "epochs": upd.epochs}
        # sharded: the weights to save gathered to rank 0 (every process takes part)
        gathered = gather_state(model, None if opts.full else opt, trainable_only=not opts.full) \
            if opts.fsdp and save else None
        if rank == 0:
            out.mkdir(parents=True, exist_ok=True)
            if save and opts.full:
                model.save_pretrained(str(out / "weights"), **({"state_dict": gathered[0]} if gathered else {}))
                tok.save_pretrained(str(out / "weights"))
            elif save:
                _save_adapter(model, opt, out / "adapter", gathered)
            write_text(out / "metrics.json", json.dumps(metrics, indent=2) + "\n")
        if world > 1:
            dist.barrier()  # the others return once rank 0's files are in place
        return metrics
    finally:
        if started:
            dist.destroy_process_group()
