#!/usr/bin/env python3
"""What `--credit gae` adds to an RL iteration: the value pass and the value head's fit, per episode, against the
update of the same batch in the same run.

Input: a batch `train rl` trained on (``OUT/batches/v<N>.jsonl``; by default the RL experiment's first iteration,
``runs/learning-rl2/outcome_seed1/batches/v0.jsonl``: 8 tasks x 8 samples by the SFT student) and the policy's
adapter (``runs/learning/sft/final``). The rows get the step rewards of outcome credit (the reward on each
trajectory's last row: the value pass and the fit cost the same whatever the rewards). Timed, one after the
other in this process with the threads torch is given: :func:`clawgym.train.value_head.fill_gae` (one forward
pass per trajectory without the LM head, the samples' shared prefixes run once, then 200 full-batch Adam steps of the head), and
:func:`clawgym.train.rl_update.rl_update` on the same rows with the experiment's settings (4 mini-batches, bf16
forward passes, prefix sharing). Prints JSON (commit, command, settings); ``--save`` writes
benchmarks/perf/results_gae_cost.json. The progress rewards GAE runs on have their own cost
(results_progress.json). ``CLAWGYM_BENCH_QUICK=1``: the first 4 trajectories only, not saved."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=Path, default=REPO / "runs/learning-rl2/outcome_seed1/batches/v0.jsonl")
    ap.add_argument("--adapter", type=Path, default=REPO / "runs/learning/sft/final")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mini-batches", type=int, default=4)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args(argv)
    missing = (f"{args.batch}: no such batch (run benchmarks/learning/rl.py first, or give --batch)"
               if not args.batch.is_file() else f"{args.adapter}: no LoRA adapter there (give --adapter)"
               if not (args.adapter / "adapter_config.json").is_file() else None)
    if missing:  # reported, not a failure (as run_all.py expects of a benchmark that cannot run here)
        print(json.dumps({"benchmark": "gae_cost", "available": False, "reason": missing}))
        return 0
    quick = os.environ.get("CLAWGYM_BENCH_QUICK") == "1"

    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from clawgym.llm.models import resolve_model_dir
    from clawgym.rollout.provenance import source_revision
    from clawgym.train.rl_objective import ObjectiveConfig
    from clawgym.train.rl_update import rl_update
    from clawgym.train.value_head import ValueHead, fill_gae

    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    rows = [json.loads(line) for line in args.batch.read_text().splitlines() if line.strip()]
    if quick:  # smoke run: the first 4 trajectories' rows
        keep = list(dict.fromkeys(r["trajectory_id"] for r in rows))[:4]
        rows = [r for r in rows if r["trajectory_id"] in keep]
    for r in rows:
        r["step_reward"] = float(r["reward"]) if r.get("is_last") else 0.0
    episodes = len({r["trajectory_id"] for r in rows})
    base = AutoModelForCausalLM.from_pretrained(str(resolve_model_dir("smollm2-135m")), dtype=torch.float32)
    model = PeftModel.from_pretrained(base, str(args.adapter), is_trainable=True)
    head = ValueHead(model.config.hidden_size)
    t0 = time.perf_counter()
    stats = fill_gae(rows, model, head, gamma=1.0, lam=0.95, precision="bf16")
    t_gae = time.perf_counter() - t0
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
    t1 = time.perf_counter()
    upd = rl_update(model, opt, rows, ObjectiveConfig(), mini_batches=args.mini_batches, precision="bf16",
                    micro_batch_tokens=4096)
    t_update = time.perf_counter() - t1
    prompt_tokens = sum(len(r["prompt_ids"]) for r in rows)
    res = {
        "benchmark": "gae_cost", "date": time.strftime("%Y-%m-%d"), "source": source_revision(),
        "command": "python benchmarks/perf/gae_cost.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "settings": {"batch": str(args.batch.relative_to(REPO) if args.batch.is_relative_to(REPO) else args.batch),
                     "adapter": str(args.adapter), "threads": args.threads, "mini_batches": args.mini_batches,
                     "precision": "bf16", "value_steps": 200, "gae_lambda": 0.95, "cpus": os.cpu_count(),
                     "quick": quick},
        "load_average_at_start": [round(x, 2) for x in load],
        "batch": {"rows": len(rows), "episodes": episodes, "prompt_tokens": prompt_tokens},
        "gae": {"seconds": round(t_gae, 2), "value_pass_s": stats["value_pass_s"], "value_fit_s": stats["value_fit_s"],
                "per_episode_s": round(t_gae / episodes, 3), "value_loss_before": stats["value_loss_before"],
                "value_loss_after": stats["value_loss_after"]},
        "update": {"seconds": round(t_update, 2), "optimizer_steps": upd.stats.get("optimizer_steps"),
                   "computed_tokens": upd.stats.get("computed_tokens"),
                   "per_episode_s": round(t_update / episodes, 3)},
        # the update runs only rows with a learning signal (none: it is skipped, and the ratio says nothing)
        "gae_over_update": round(t_gae / t_update, 3) if upd.stats.get("optimizer_steps") else None,
    }
    text = json.dumps(res, indent=2)
    if args.save and not quick:
        (REPO / "benchmarks" / "perf" / "results_gae_cost.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
