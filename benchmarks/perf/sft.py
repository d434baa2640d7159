#!/usr/bin/env python3
"""SFT throughput benchmark: the project's batching against trl's default padded batching, same data, same run.

Prints ONE JSON object on stdout (progress goes to stderr). Both configurations train SmolLM2-135M-Instruct with
the same LoRA adapter (r=16 on every linear layer), learning rate, precision, seed and data, through trl's
SFTTrainer (`clawgym.train.sft.train_examples`):

* ``project``: `clawgym train sft`'s defaults -- sequences packed best-fit-decreasing into rows of
  ``batch_tokens`` tokens, trl's padding-free collator, attention run causally per sequence
  (``clawgym_sdpa_varlen``; flash-attn's varlen kernel on a GPU that has it), the LM head only on trained positions.
* ``trl_default_padded``: trl's defaults for the same trainer -- ``per_device_train_batch_size=8`` random
  sequences padded to the longest of the batch, SDPA with a padding mask, trl's own loss (its fused LM head).
* ``padded_compact`` (with ``--ablation``): trl's padded batching with the project's loss, to separate what
  the batching gains from what the loss head gains.

Throughput is real tokens (padding excluded) per second of ``trainer.train()``. The project's rows hold on
average as many real tokens per step as a padded batch of 8 (``batch_tokens`` = 8 x mean length, at least the
longest sequence), so both runs see the same data per step. The trainers run in turns, one optimizer step each
(A, B, A, B, ...), so that both see the same load of a shared host; the first step of each is not timed.
Figures from process CPU time are reported alongside. On a shared host whose load drifts, the headline is the
median over rounds of (project step tokens/s) / (trl step tokens/s) for the two steps run back to back
(``ratio_paired_median``, which ``meets_target`` checks); ``ratio_tokens_per_s`` is over the whole run.

Data: ``clawgym synth persona -n 40 --seed 1`` tasks (plus examples/tasks.jsonl), replayed by the oracle agent in
bwrap sandboxes, filtered (`clawgym filter`) and tokenized with the server's rendering. Their conversations are
1,500-16,000 tokens (the system prompt with the tool schemas alone is ~880; tool results), cut at ``--max-len``. On a 2-core CPU a 135M model trains at
about a hundred tokens/s, so by default every conversation is cut to a window of ``--scale`` (1/16) of its length (its
last tokens, which hold its final assistant turns; ``--max-len`` is scaled the same way): the distribution of
lengths -- what batching acts on -- keeps its shape while a step takes seconds instead of minutes. In short
windows attention is a negligible share of a step; at full length it grows quadratically and a padded batch
pays it for its padding too (batch x longest^2 against the sum of len^2), so short windows understate the gain.
``--scale 1`` measures the conversations as they are (use it on a GPU).

    python benchmarks/perf/sft.py                 # full: 24 steps per configuration (~20 min here)
    python benchmarks/perf/sft.py --quick         # smoke: 6 steps each, ~5 min (also CLAWGYM_BENCH_QUICK=1)
    python benchmarks/perf/sft.py --quick --ablation   # + padded_compact
    python benchmarks/perf/sft.py --scale 1 --steps 40 --out /tmp/sft.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "tasks.jsonl"
TARGET_RATIO = 1.5
TRL_DEFAULT_BATCH = 8  # SFTConfig's per_device_train_batch_size
WARMUP = 1  # untimed first steps of each configuration (allocations, lazy initialisation)


def log(msg: str) -> None:
    print(f"[bench sft {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _run(cmd: list[str]) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr[-2000:]}")


def make_data(work: Path, n_tasks: int, seed: int, sandbox: str) -> list[dict]:
    """Oracle conversations of synthesized tasks and the examples, as `clawgym filter` writes them."""
    from clawgym.train.filter import FilterOptions, filter_trajectories

    tasks = work / "tasks.jsonl"
    clawgym = [sys.executable, "-m", "clawgym"]
    t0 = time.monotonic()
    _run(clawgym + ["synth", "persona", "-n", str(n_tasks), "--seed", str(seed), "-o", str(tasks), "--sandbox", sandbox])
    runs = []
    for name, path in (("synth", tasks), ("examples", EXAMPLES)):
        run = work / f"oracle-{name}"
        _run(clawgym + ["rollout", str(path), "--agent", "oracle", "--sandbox", sandbox, "-j", "2", "-o", str(run),
                        "--no-keep-workspaces"])
        runs.append(run)
    records, rep = filter_trajectories(runs, FilterOptions(min_score=1.0))
    log(f"data: {rep.kept} oracle conversations ({dict(rep.dropped) or 'none dropped'}) in {time.monotonic() - t0:.0f} s")
    return records


def windows(examples, scale: float, max_len: int):
    """Each example cut to its last ceil(len * scale) tokens (at most max_len), labels alongside."""
    from clawgym.train.masks import IGNORE, TokenizedExample

    out = []
    for ex in examples:
        n = min(max_len, max(16, math.ceil(len(ex) * scale)))
        ids, labels = ex.input_ids[-n:], ex.labels[-n:]
        labels = [IGNORE] + labels[1:]  # the window's first token has nothing before it
        if any(x != IGNORE for x in labels):
            out.append(TokenizedExample(ids, labels, ex.record))
    return out


def _lengths(examples) -> dict:
    lens = sorted(len(e) for e in examples)
    return {"n": len(lens), "mean": round(statistics.mean(lens), 1), "p50": lens[len(lens) // 2], "min": lens[0],
            "max": lens[-1], "tokens": sum(lens)}


class Baton:
    """Lets the trainers, each in its own thread, run one optimizer step at a time in turn (A, B, A, B, ...), so
    that every configuration sees the same load of a shared host."""

    def __init__(self, names: list[str]):
        self.order = list(names)
        self.turn = self.order[0]
        self.done: set[str] = set()
        self.cond = threading.Condition()

    def wait(self, name: str) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.turn == name)

    def pass_on(self, name: str, finished: bool = False) -> None:
        with self.cond:
            if finished:
                self.done.add(name)
            if self.turn != name:
                return
            i = self.order.index(name)
            for k in range(1, len(self.order) + 1):
                nxt = self.order[(i + k) % len(self.order)]
                if nxt not in self.done:
                    self.turn = nxt
                    break
            self.cond.notify_all()


def _step_timer(name: str, baton: Baton, ref: dict):
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.steps: list[dict] = []
            self.t0 = self.c0 = 0.0
            self.tok0 = self.comp0 = 0

        def on_step_begin(self, args, state, control, **kw):
            baton.wait(name)
            counts = ref["trainer"].counts
            self.tok0, self.comp0 = counts["tokens"], counts["computed"]
            self.t0, self.c0 = time.perf_counter(), time.process_time()

        def on_step_end(self, args, state, control, **kw):
            dt, dc = time.perf_counter() - self.t0, time.process_time() - self.c0
            counts = ref["trainer"].counts
            self.steps.append({"seconds": dt, "cpu_seconds": dc, "real_tokens": counts["tokens"] - self.tok0,
                               "computed_tokens": counts["computed"] - self.comp0})
            baton.pass_on(name)

        def on_train_end(self, args, state, control, **kw):
            baton.pass_on(name, finished=True)

    return StepTimer()


def _summary(steps: list[dict], res, warmup: int) -> dict:
    timed = steps[warmup:]
    real = sum(s["real_tokens"] for s in timed)
    comp = sum(s["computed_tokens"] for s in timed)
    secs = sum(s["seconds"] for s in timed)
    cpu = sum(s["cpu_seconds"] for s in timed)
    return {
        "steps": len(steps), "timed_steps": len(timed), "real_tokens": real, "computed_tokens": comp,
        "padding_fraction": round(1 - real / comp, 4) if comp else 0.0, "seconds": round(secs, 3),
        "cpu_seconds": round(cpu, 3), "tokens_per_s": round(real / secs, 2) if secs else 0.0,
        "tokens_per_cpu_s": round(real / cpu, 2) if cpu else 0.0,
        "median_step_tokens_per_s": round(statistics.median(s["real_tokens"] / s["seconds"] for s in timed), 2)
        if timed else 0.0,
        "step_seconds": [round(s["seconds"], 3) for s in steps],
        "losses": [round(r["loss"], 4) for r in res.log],
    }


def _paired_ratios(ours: list[dict], base: list[dict], warmup: int) -> list[float]:
    """Step k of one configuration against step k of the other, which ran right after it: tokens/s over tokens/s.
    Their median is the figure least moved by a host whose load drifts during the run."""
    out = []
    for a, b in zip(ours[warmup:], base[warmup:], strict=False):
        if a["seconds"] > 0 and b["seconds"] > 0 and b["real_tokens"] > 0:
            out.append((a["real_tokens"] / a["seconds"]) / (b["real_tokens"] / b["seconds"]))
    return out


def run_interleaved(configs: dict, data, work: Path, warmup: int) -> dict:
    """Build every trainer, then train them in threads taking turns step by step."""
    from clawgym.train.sft import prepare_training, run_training

    baton = Baton(list(configs))
    timers, preps, results, errors = {}, {}, {}, {}
    for name, (opts, compact) in configs.items():
        ref: dict = {}
        timers[name] = _step_timer(name, baton, ref)
        preps[name] = prepare_training(data, work / f"run-{name}", opts, show_progress=False, compact_loss=compact,
                                       callbacks=[timers[name]])
        ref["trainer"] = preps[name].trainer

    def go(name: str) -> None:
        try:
            results[name] = run_training(preps[name])
        except BaseException as exc:  # noqa: BLE001 - reported below; the others must not wait for this one
            errors[name] = exc
            baton.pass_on(name, finished=True)

    threads = [threading.Thread(target=go, args=(n,), name=f"bench-{n}", daemon=True) for n in configs]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(timeout=1.0)  # wakes up for signals (SIGTERM -> SystemExit -> the work dir is removed)
    if errors:
        name, exc = next(iter(errors.items()))
        raise RuntimeError(f"{name} failed: {exc!r}") from exc
    out = {}
    for name in configs:
        out[name] = _summary(timers[name].steps, results[name], warmup)
        o = out[name]
        log(f"{name}: {o['timed_steps']} timed steps, {o['real_tokens']} real tokens ({o['computed_tokens']} "
            f"computed) in {o['seconds']:.1f} s = {o['tokens_per_s']:.0f} tokens/s; "
            f"loss {o['losses'][0]:.3f} -> {o['losses'][-1]:.3f}")
    return out, timers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run (also CLAWGYM_BENCH_QUICK=1)")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tasks", type=int, default=40, help="synthesized tasks (clawgym synth persona -n)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=float, default=None, help="window of each conversation (default 1/16)")
    ap.add_argument("--steps", type=int, default=None, help="optimizer steps per configuration (default 24, quick 6)")
    ap.add_argument("--max-len", type=int, default=8192, help="max tokens per conversation before scaling")
    ap.add_argument("--precision", default="auto", help="auto | fp32 | bf16")
    ap.add_argument("--sandbox", default="bwrap")
    ap.add_argument("--grad-checkpointing", action="store_true",
                    help="activation checkpointing in every configuration (trl's default; needed for --scale >= 1/8 "
                         "in 24 GB: padded batches and trl's LM head over every position take the memory)")
    ap.add_argument("--ablation", action="store_true",
                    help="also run padded_compact (trl's padded batching with the project's loss)")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args()
    quick = args.quick or os.environ.get("CLAWGYM_BENCH_QUICK") == "1"
    scale = args.scale if args.scale is not None else 1 / 16
    steps = args.steps if args.steps is not None else (6 if quick else 24)
    ablation = args.ablation

    import torch
    from transformers import AutoTokenizer

    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.sft import SFTOptions, build_examples, resolve_attention, resolve_precision

    def _terminate(signum, frame):  # noqa: ARG001
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _terminate)
    load0 = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="clawgym-bench-sft-"))
    try:
        records = make_data(work, args.tasks, args.seed, args.sandbox)
        model_dir = resolve_model_dir(args.model)
        tok = AutoTokenizer.from_pretrained(str(model_dir))
        full, stats = build_examples(records, tok, args.max_len, verify="sample")
        max_len = max(16, math.ceil(args.max_len * scale))
        data = windows(full, scale, max_len)
        random.Random(args.seed).shuffle(data)
        lens = _lengths(data)
        batch_tokens = max(max(len(e) for e in data), round(TRL_DEFAULT_BATCH * lens["mean"]))
        log(f"{len(data)} sequences (scale {scale:g}): mean {lens['mean']} tokens, max {lens['max']}; "
            f"packed rows of {batch_tokens} tokens vs padded batches of {TRL_DEFAULT_BATCH}")
        common = dict(model=args.model, max_steps=steps, max_len=max_len, lr=2e-4, lora_r=16, seed=args.seed,
                      precision=args.precision, gradient_checkpointing=args.grad_checkpointing, save_steps=0, logging_steps=1,
                      warmup_ratio=0.0, verify="none")
        configs = {
            "project": (SFTOptions(batching="packed", batch_tokens=batch_tokens, **common), True),
            "trl_default_padded": (SFTOptions(batching="padded", batch_size=TRL_DEFAULT_BATCH, **common), False),
        }
        if ablation:
            configs["padded_compact"] = (SFTOptions(batching="padded", batch_size=TRL_DEFAULT_BATCH, **common), True)
        log(f"training {', '.join(configs)}: {steps} steps each, in turns (the first {WARMUP} of each untimed)")
        results, timers = run_interleaved(configs, data, work, WARMUP)
        ours, base = results["project"], results["trl_default_padded"]
        paired = _paired_ratios(timers["project"].steps, timers["trl_default_padded"].steps, WARMUP)
        ratio = round(ours["tokens_per_s"] / base["tokens_per_s"], 3) if base["tokens_per_s"] else None
        ratio_cpu = round(ours["tokens_per_cpu_s"] / base["tokens_per_cpu_s"], 3) if base["tokens_per_cpu_s"] else None
        ratio_median = (round(ours["median_step_tokens_per_s"] / base["median_step_tokens_per_s"], 3)
                        if base["median_step_tokens_per_s"] else None)
        out = {
            "benchmark": "sft",
            "quick": quick,
            "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "host": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "platform": platform.platform(),
                     "cuda": torch.cuda.is_available(), "loadavg_before": [round(x, 2) for x in load0],
                     "loadavg_after": [round(x, 2) for x in os.getloadavg()]},
            "model": args.model, "adapter": "LoRA r=16, alpha=32, all linear layers",
            "precision": resolve_precision(args.precision),
            "attention": {"project": resolve_attention("auto", "packed"), "trl_default_padded": "sdpa"},
            "data": {"conversations": len(records), "full_lengths": _lengths(full),
                     "trained_fraction": round(stats.trained_tokens / stats.tokens, 4), "scale": scale,
                     "max_len": max_len, "sequences": lens},
            "batching": {"project": f"packed rows of {batch_tokens} tokens (bfd), padding-free",
                         "trl_default_padded": f"{TRL_DEFAULT_BATCH} random sequences padded to the longest"},
            "steps_per_config": steps,
            "gradient_checkpointing": args.grad_checkpointing,
            "configs": results,
            "ratio_tokens_per_s": ratio,
            "ratio_tokens_per_cpu_s": ratio_cpu,
            "ratio_median_step": ratio_median,
            "ratio_paired_median": round(statistics.median(paired), 3) if paired else None,
            "ratio_paired": [round(x, 3) for x in paired],
            "ratio_batching_only": (round(ours["tokens_per_s"] / results["padded_compact"]["tokens_per_s"], 3)
                                    if ablation and results["padded_compact"]["tokens_per_s"] else None),
            "target": {"ratio_tokens_per_s": TARGET_RATIO},
            "meets_target": bool(paired and statistics.median(paired) >= TARGET_RATIO),
            "meets_target_over_run": bool(ratio is not None and ratio >= TARGET_RATIO),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    log(f"project {ours['tokens_per_s']:.0f} tokens/s vs trl default {base['tokens_per_s']:.0f} tokens/s: "
        f"x{ratio} over the run, x{out['ratio_paired_median']} step for step (target x{TARGET_RATIO})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
