#!/usr/bin/env python3
"""The cost of step-wise SFT against whole sequences (#36), on the learning experiment's trajectories.

The same SFT records (default: ``runs/demo/sft.jsonl``, the conversations `make demo` keeps with `clawgym filter`,
the learning experiment's pipeline at demo size) are trained three ways, each in a process of its own (so that its
peak resident memory, ``ru_maxrss``, is its own):

* ``whole``: `--max-len` above the longest trajectory: one sequence per trajectory, loss on every assistant turn;
* ``windowed``: `--max-len` below the shortest trajectory, so that every one is windowed
  (:mod:`clawgym.train.windows`: its longest prefix that fits, then one window per later assistant turn; a turn
  that fits no window is dropped and counted);
* ``steps``: every assistant turn (model call) its own sequence in its full context, loss on that turn only (what
  training on each step's prompt + response costs, e.g. pool step records one at a time):
  :func:`clawgym.train.windows.turn_window` without a length limit.

For each: sequences, the tokens computed for one epoch (forward tokens), the trained tokens, their ratio, and the
dropped turns, all exact; then ``--steps`` optimizer steps of packed rows of ``--batch-tokens`` (SmolLM2-135M, LoRA
r=16, fp32, ``--threads`` threads), the steps after the first timed: seconds, tokens/s, and the epoch's estimated
seconds (its computed tokens / tokens/s). The machine's load average is sampled during the run. Prints ONE
JSON object on stdout (progress on stderr) and, with ``--save``, writes it to
benchmarks/perf/results_sft_stepwise.json.

    python benchmarks/perf/sft_stepwise.py --save        # ~10 min on 2 loaded cores
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODES = ("whole", "windowed", "steps")
OUT = REPO / "benchmarks" / "perf" / "results_sft_stepwise.json"


def log(msg: str) -> None:
    print(f"[sft_stepwise] {msg}", file=sys.stderr, flush=True)


def read_records(path: Path) -> list[dict]:
    from clawgym.train.filter import read_sft_records

    return read_sft_records(path)


def whole_lengths(records: list[dict], tok) -> list[int]:
    from clawgym.train.masks import conversation_tokens

    return [conversation_tokens(tok, r["messages"], r.get("tools")) for r in records]


def windowed_max_len(lengths: list[int]) -> int:
    """The largest multiple of 128 below the shortest trajectory: every trajectory is windowed."""
    return max(128, (min(lengths) - 1) // 128 * 128)


def step_examples(records: list[dict], tok):
    """One example per assistant turn: the conversation up to and with it, loss on that turn only."""
    from clawgym.train.sft import DataStats
    from clawgym.train.windows import turn_window

    out = []
    for i, rec in enumerate(records):
        msgs, tools = rec["messages"], rec.get("tools")
        name = rec.get("trajectory_id", f"#{i}")
        for t, m in enumerate(msgs):
            if m.get("role") == "assistant":
                ex = turn_window(tok, msgs, tools, t, 10**9, name)
                if ex is None or "(window, 0 messages left out)" not in ex.record:  # the whole context, nothing cut
                    raise RuntimeError(f"{name} turn {t}: no step example in its full context")
                out.append(ex)
    stats = DataStats(records=len(records), examples=len(out), tokens=sum(len(e) for e in out),
                      trained_tokens=sum(e.trained_tokens for e in out), max_len_seen=max(len(e) for e in out))
    return out, stats


def child(args: argparse.Namespace) -> None:
    import torch
    from transformers import AutoTokenizer

    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.sft import SFTOptions, build_examples, train_examples

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(resolve_model_dir(args.model)))
    records = read_records(args.data)
    if args.child == "steps":
        examples, stats = step_examples(records, tok)
    else:
        examples, stats = build_examples(records, tok, args.max_len, verify="none")
    opts = SFTOptions(model=args.model, max_steps=args.steps, max_len=args.max_len, batch_tokens=args.batch_tokens,
                      save_steps=0, warmup_ratio=0.0, dtype="fp32", precision="fp32", gradient_checkpointing=False,
                      threads=args.threads, seed=0)
    with tempfile.TemporaryDirectory() as work:
        res = train_examples(examples, Path(work) / "run", opts, stats=stats, show_progress=False)
    last = res.log[-1]
    first = res.log[0] if len(res.log) > 1 else {"time": 0.0, "computed_tokens": 0, "trained_tokens": 0}
    secs = last["time"] - first["time"]  # the first step (warm-up) is not timed when there are more
    computed, trained = last["computed_tokens"] - first["computed_tokens"], last["trained_tokens"] - first["trained_tokens"]
    out = {
        "max_len": args.max_len,
        "epoch": {"sequences": stats.examples, "computed_tokens": stats.tokens, "trained_tokens": stats.trained_tokens,
                  "computed_per_trained": round(stats.tokens / stats.trained_tokens, 3),
                  "longest_sequence": stats.max_len_seen, "truncated": stats.truncated, "windows": stats.windows,
                  "dropped_turns": stats.dropped_turns, "dropped_tokens": stats.dropped_tokens},
        "run": {"optimizer_steps": res.steps, "timed_steps": res.steps - (len(res.log) > 1),
                "computed_tokens_timed": computed, "trained_tokens_timed": trained, "seconds_timed": round(secs, 2),
                "tokens_per_s": round(computed / secs, 2), "trained_tokens_per_s": round(trained / secs, 3),
                "losses": [round(r["loss"], 4) for r in res.log]},
        "epoch_seconds_estimate": round(stats.tokens / (computed / secs), 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(out))


def _commit() -> str | None:
    from clawgym.rollout.provenance import source_revision

    return (source_revision() or {}).get("git_commit")


class LoadSampler(threading.Thread):
    """The 1-minute load average every `period` seconds while the benchmark runs."""

    def __init__(self, period: float = 5.0):
        super().__init__(daemon=True)
        self.period, self.samples, self.stop = period, [os.getloadavg()[0]], threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.period):
            self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict:
        s = self.samples
        return {"samples": len(s), "min": round(min(s), 2), "mean": round(sum(s) / len(s), 2), "max": round(max(s), 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=REPO / "runs" / "demo" / "sft.jsonl",
                    help="SFT records (clawgym filter); default: the demo's (make demo)")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--steps", type=int, default=4, help="optimizer steps trained in each mode (the first untimed)")
    ap.add_argument("--batch-tokens", type=int, default=None, help="default: the longest trajectory, rounded up to 256")
    ap.add_argument("--windowed-max-len", type=int, default=None,
                    help="default: the largest multiple of 128 below the shortest trajectory")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--save", action="store_true", help=f"write the JSON to {OUT.relative_to(REPO)}")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--max-len", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.data.is_file():
        print(f"error: {args.data}: no such file (make demo writes runs/demo/sft.jsonl)", file=sys.stderr)
        return 2
    if args.child:
        child(args)
        return 0

    from transformers import AutoTokenizer

    from clawgym.llm.models import resolve_model_dir

    tok = AutoTokenizer.from_pretrained(str(resolve_model_dir(args.model)))
    records = read_records(args.data)
    lengths = whole_lengths(records, tok)
    whole_len = -(-max(lengths) // 256) * 256
    batch_tokens = args.batch_tokens or whole_len
    max_lens = {"whole": whole_len, "windowed": args.windowed_max_len or windowed_max_len(lengths),
                "steps": whole_len}
    sampler = LoadSampler()
    sampler.start()
    t_all = time.monotonic()
    results = {}
    for name in args.modes.split(","):
        cmd = [sys.executable, __file__, "--child", name, "--data", str(args.data), "--model", args.model,
               "--steps", str(args.steps), "--max-len", str(max_lens[name]), "--batch-tokens", str(batch_tokens),
               "--threads", str(args.threads)]
        log(f"{name}: {' '.join(cmd[2:])}")
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": str(args.threads)})
        if p.returncode != 0:
            results[name] = {"error": p.stderr[-2000:], "returncode": p.returncode}
            log(f"{name}: failed ({p.returncode})")
            continue
        results[name] = json.loads(p.stdout.strip().splitlines()[-1])
        results[name]["wall_s"] = round(time.monotonic() - t0, 1)
        r = results[name]
        log(f"{name}: {r['epoch']['sequences']} sequences, {r['epoch']['computed_tokens']} computed / "
            f"{r['epoch']['trained_tokens']} trained tokens; {r['run']['tokens_per_s']} tokens/s")
    sampler.stop.set()
    sampler.join()
    ok = [m for m in results if "error" not in results[m]]
    comparison = {}
    if "whole" in ok:
        base = results["whole"]["epoch"]
        for m in ok:
            e = results[m]["epoch"]
            comparison[m] = {"computed_tokens_vs_whole": round(e["computed_tokens"] / base["computed_tokens"], 3),
                             "trained_tokens_vs_whole": round(e["trained_tokens"] / base["trained_tokens"], 3),
                             "epoch_seconds_vs_whole": round(results[m]["epoch_seconds_estimate"]
                                                             / results["whole"]["epoch_seconds_estimate"], 3)}
    report = {
        "benchmark": "sft_stepwise", "commit": _commit(),
        "command": " ".join([str(Path(sys.argv[0])), *sys.argv[1:]]),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_avg_1m": sampler.summary()},
        "settings": {"data": str(args.data), "data_sha256": hashlib.sha256(args.data.read_bytes()).hexdigest(),
                     "records": len(records), "trajectory_tokens": {"min": min(lengths), "max": max(lengths),
                                                                    "total": sum(lengths)},
                     "model": args.model, "adapter": "LoRA r=16, every linear layer", "dtype": "fp32",
                     "precision": "fp32", "gradient_checkpointing": False, "optimizer_steps": args.steps,
                     "batch_tokens": batch_tokens, "batching": "packed", "max_len": max_lens,
                     "threads": args.threads, "lr": "2e-4 (default)", "seed": 0},
        "wall_s": round(time.monotonic() - t_all, 1),
        "results": results, "comparison": comparison,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.save:
        tmp = OUT.with_suffix(".tmp")
        tmp.write_text(text + "\n")
        tmp.replace(OUT)
    return 0 if len(ok) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
