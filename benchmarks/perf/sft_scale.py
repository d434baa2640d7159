#!/usr/bin/env python3
"""SFT memory and speed at scale (#36): weights in fp32 against bf16, with and without gradient checkpointing,
same data, same run.

Prints ONE JSON object on stdout (progress on stderr) and writes it to ``--out``. Each configuration trains
SmolLM2-135M-Instruct (LoRA r=16 on every linear layer, or ``--full``) through `clawgym.train.sft` in a process of
its own, so that its peak resident memory (``ru_maxrss``; on a CUDA device also ``torch.cuda.max_memory_allocated``)
is its own:

* ``fp32``: `--dtype fp32 --precision fp32` (weights, activations, gradients fp32);
* ``bf16``: `--dtype bf16 --precision bf16` (weights bf16; the LoRA adapter and its optimizer state fp32);
* each with `--gradient-checkpointing` off and on.

Data: synthetic agent trajectories (a system prompt, a task, read calls answered by long tool results, a final
answer) of about ``--tokens`` tokens each, rendered with the server's chat format; packed into rows of
``--batch-tokens``. Throughput is real tokens per second over the steps after the first (which is not timed).
Configurations run one after another on a shared host: compare them within one run only.

    python benchmarks/perf/sft_scale.py                # 4 steps each (~10 min on 2 loaded cores)
    python benchmarks/perf/sft_scale.py --quick        # 2 steps each, shorter rows
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGS = {"fp32": ("fp32", "fp32", False), "fp32_gc": ("fp32", "fp32", True),
           "bf16": ("bf16", "bf16", False), "bf16_gc": ("bf16", "bf16", True)}


def log(msg: str) -> None:
    print(f"[sft_scale] {msg}", file=sys.stderr, flush=True)


def trajectories(n: int, tokens: int) -> list[dict]:
    """`n` agent conversations of about `tokens` tokens (SmolLM2's tokenizer: ~6.5 tokens a tool-result line)."""
    out = []
    rounds = max(1, tokens // 260)
    for t in range(n):
        msgs = [{"role": "system", "content": "You are a careful file agent. Use the tools."},
                {"role": "user", "content": f"Task {t}: count the lines that mention a deadline."}]
        for k in range(rounds):
            call = {"id": f"c{k}", "type": "function",
                    "function": {"name": "read", "arguments": json.dumps({"path": f"notes/{t}/{k}.md"})}}
            msgs.append({"role": "assistant", "content": f"Reading part {k}.", "tool_calls": [call]})
            msgs.append({"role": "tool", "tool_call_id": f"c{k}",
                         "content": "\n".join(f"- item {t}.{k}.{i}: deadline {i % 7}" for i in range(30))})
        msgs.append({"role": "assistant", "content": f"{rounds * 5} lines mention a deadline."})
        out.append({"trajectory_id": f"syn{t}", "messages": msgs})
    return out


def child(args: argparse.Namespace) -> None:
    import torch
    from transformers import AutoTokenizer

    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.sft import SFTOptions, build_examples, train_examples

    dtype, precision, gc = CONFIGS[args.child]
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(resolve_model_dir(args.model)))
    examples, stats = build_examples(trajectories(args.records, args.tokens), tok, args.max_len, verify="none")
    opts = SFTOptions(model=args.model, full=args.full, max_steps=args.steps, max_len=args.max_len,
                      batch_tokens=args.batch_tokens, save_steps=0, warmup_ratio=0.0, dtype=dtype,
                      precision=precision, gradient_checkpointing=gc, threads=args.threads, seed=0)
    with tempfile.TemporaryDirectory() as work:
        res = train_examples(examples, Path(work) / "run", opts, stats=stats, show_progress=False)
    rows = res.log
    timed = rows[1:] if len(rows) > 1 else rows
    dt = timed[-1]["time"] - (rows[0]["time"] if len(rows) > 1 else 0.0)
    dtok = timed[-1]["tokens"] - (rows[0]["tokens"] if len(rows) > 1 else 0)
    out = {"dtype": dtype, "precision": precision, "gradient_checkpointing": gc, "steps": res.steps,
           "tokens_per_s": round(dtok / dt, 2) if dt > 0 else None, "tokens_timed": dtok, "seconds_timed": round(dt, 2),
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
           "losses": [round(r["loss"], 4) for r in rows], "data": {"examples": stats.examples, "tokens": stats.tokens,
                                                                    "windows": stats.windows}}
    if torch.cuda.is_available():
        out["peak_cuda_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    print(json.dumps(out))


def _commit() -> str | None:
    from clawgym.rollout.provenance import source_revision

    return (source_revision() or {}).get("git_commit")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", default=os.environ.get("CLAWGYM_BENCH_QUICK") == "1")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--full", action="store_true", help="train every weight instead of a LoRA adapter")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--records", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=None, help="about this many tokens a trajectory")
    ap.add_argument("--max-len", type=int, default=None)
    ap.add_argument("--batch-tokens", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "perf" / "results_sft_scale.json")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.steps = args.steps or (2 if args.quick else 4)
    args.tokens = args.tokens or (500 if args.quick else 1000)
    args.max_len = args.max_len or (512 if args.quick else 1024)
    args.batch_tokens = args.batch_tokens or args.max_len
    if args.child:
        child(args)
        return 0
    results = {}
    for name in args.configs.split(","):
        cmd = [sys.executable, __file__, "--child", name, "--model", args.model, "--steps", str(args.steps),
               "--records", str(args.records), "--tokens", str(args.tokens), "--max-len", str(args.max_len),
               "--batch-tokens", str(args.batch_tokens)] + (["--full"] if args.full else []) + \
              (["--threads", str(args.threads)] if args.threads else [])
        log(f"{name}: {' '.join(cmd[2:])}")
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        if p.returncode != 0:
            results[name] = {"error": p.stderr[-2000:], "returncode": p.returncode}
            continue
        results[name] = json.loads(p.stdout.strip().splitlines()[-1])
        results[name]["wall_s"] = round(time.monotonic() - t0, 1)
        log(f"{name}: {results[name]['tokens_per_s']} tokens/s, peak RSS {results[name]['peak_rss_mb']} MB")
    report = {
        "benchmark": "sft_scale", "commit": _commit(), "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(),
                 "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "settings": {k: getattr(args, k) for k in ("model", "full", "steps", "records", "tokens", "max_len",
                                                   "batch_tokens", "threads")},
        "results": results,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(text + "\n")
        tmp.replace(args.out)
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
