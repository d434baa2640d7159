#!/usr/bin/env python3
"""The RL update's speed: rows run one by one against the shared-prefix tree, and fp32 against mixed precision
(bf16 autocast), on one real batch of `clawgym train rl`.

Prints ONE JSON object on stdout (progress on stderr). The batch is the rows an iteration trained on
(``OUT/batches/v<N>.jsonl`` of a `train rl` run: the engine's token ids, advantages and logprobs); the policy
is the model that run started from with a fresh LoRA adapter of the run's shape (r=16 on every linear layer).
Each variant (``--variants``: `rows` = fp32 with every row run by itself, `tree` = fp32 with the tokens rows
share run once, `bf16-tree` = the tree under bf16 autocast, `bf16` = rows under bf16) runs
:func:`clawgym.train.rl_update.rl_update` on the whole batch with an optimizer whose step changes nothing (SGD,
lr 0), so every round sees the same weights; the variants take turns so that all see the same load of a shared
host, and the first round of each is a warm-up. Reported per variant: seconds per update (median), trained
tokens/s, the sequence tokens and the tokens actually computed, the loss, its speed-up against the first variant,
and the cosine between its gradient and the first variant's and the relative loss difference.

    python benchmarks/perf/rl_update.py --batch runs/learning-rl/seed_1/batches/v0.jsonl \\
        --model runs/learning/student --limit 24 --rounds 2 --variants rows tree bf16-tree --save
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


# name -> (precision, share_prefixes)
VARIANTS = {"rows": ("fp32", False), "tree": ("fp32", True), "bf16": ("bf16", False), "bf16-tree": ("bf16", True)}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=Path, required=True, help="A train rl batch (OUT/batches/v<N>.jsonl).")
    ap.add_argument("--model", default="smollm2-135m", help="The policy's base: an embedded name or a directory.")
    ap.add_argument("--limit", type=int, default=None, help="Only the batch's first N rows (a shorter run).")
    ap.add_argument("--rounds", type=int, default=3, help="Timed rounds per precision (after one warm-up).")
    ap.add_argument("--micro-batch-tokens", type=int, default=4096, help="As train rl's default.")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--variants", nargs="+", default=["rows", "tree"], choices=sorted(VARIANTS),
                    help="The first is the baseline of the speed-ups and gradient comparisons.")
    ap.add_argument("--save", action="store_true", help="Also write the JSON to --out.")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "perf" / "results_rl_update.json")
    args = ap.parse_args(argv)

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from clawgym.core.atomic import write_text
    from clawgym.core.precision import resolve_precision
    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.rl_objective import ObjectiveConfig
    from clawgym.train.rl_update import rl_update

    if args.threads:
        torch.set_num_threads(args.threads)
    rows = [json.loads(line) for line in args.batch.read_text().splitlines() if line.strip()][: args.limit]
    path = resolve_model_dir(args.model)
    tok = AutoTokenizer.from_pretrained(str(path))
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                                            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                            "up_proj", "down_proj"]))
    # B starts at 0 in a fresh adapter, which would leave A without a gradient: give B small values so both have one
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 1e-3)
    params = [p for p in model.parameters() if p.requires_grad]
    frozen = torch.optim.SGD(params, lr=0.0)
    cfg = ObjectiveConfig("grpo")
    variants = list(dict.fromkeys(args.variants))
    baseline = variants[0]
    times: dict[str, list[float]] = {v: [] for v in variants}
    stats: dict[str, dict] = {}
    grads: dict[str, torch.Tensor] = {}
    for rnd in range(args.rounds + 1):
        for v in variants:
            precision, share = VARIANTS[v]
            t0 = time.perf_counter()
            res = rl_update(model, frozen, rows, cfg, micro_batch_tokens=args.micro_batch_tokens,
                            pad_id=tok.pad_token_id or 0, precision=precision, max_grad_norm=None,
                            share_prefixes=share)
            dt = time.perf_counter() - t0
            log(f"round {rnd} {v}: {dt:.1f} s, loss {res.stats.get('loss', 0):.5f}, "
                f"{res.stats.get('computed_tokens')} tokens computed")
            if rnd > 0:
                times[v].append(dt)
            stats[v] = res.stats
            grads[v] = torch.cat([p.grad.flatten() for p in params if p.grad is not None])
    out = {
        "benchmark": "rl_update",
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_avg": os.getloadavg(),
        "native_bf16": resolve_precision("auto") == "bf16",
        "batch": str(args.batch), "model": str(args.model), "rows": len(rows),
        "rows_run": stats[baseline].get("rows_run"), "packed_rows": stats[baseline].get("packed_rows"),
        "sequence_tokens": stats[baseline].get("sequence_tokens"), "trained_tokens": stats[baseline].get("tokens"),
        "micro_batch_tokens": args.micro_batch_tokens, "baseline": baseline,
        "results": {},
    }
    for v in variants:
        med = statistics.median(times[v])
        lv, lb = stats[v]["loss"], stats[baseline]["loss"]
        out["results"][v] = {
            "precision": VARIANTS[v][0], "share_prefixes": VARIANTS[v][1],
            "update_s_median": round(med, 2), "update_s": [round(t, 2) for t in times[v]],
            "computed_tokens": stats[v].get("computed_tokens"),
            "trained_tokens_per_s": round(stats[v]["tokens"] / med, 1),
            "sequence_tokens_per_s": round(stats[v]["sequence_tokens"] / med, 1),
            "speedup": round(statistics.median(times[baseline]) / med, 2),
            "loss": lv, "loss_rel_diff": round(abs(lv - lb) / max(abs(lb), 1e-12), 6),
            "grad_cosine": round(float(torch.nn.functional.cosine_similarity(grads[baseline].double(), grads[v].double(), dim=0)), 6),
            "engine_logprob_gap_mean": stats[v].get("engine_logprob_gap_mean")}
    text = json.dumps(out, indent=2)
    if args.save:
        write_text(args.out, text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
