#!/usr/bin/env python3
"""Which server precision serves a batch of agent requests with a LoRA adapter fastest on this CPU?

The load of the RL experiment's rollouts and evaluations (benchmarks/learning/rl.py): 13 requests at once, each
~1,200 prompt tokens of which the first 800 are shared (the agent's system prompt and tools), 128 new tokens each,
every request through the same adapter (the SFT student's, ``runs/learning/sft/final`` by default, else a fresh
rank-32 adapter). For each precision (bf16, q4, fp32) and thread count (1, 2): the engine (clawgym.serve.engine
.BatchEngine) in this process, tokens per second over the whole batch; q4 without the adapter too. Prints JSON
(commit, command, settings); ``--save`` also writes benchmarks/perf/results_serve_adapter_batch.json.

Why: the q4 kernel decodes one sequence 1.47x faster than llama.cpp (results_serve_single.json), which says
nothing about a batch with an adapter, where the int4 products are shared by fewer rows and the adapter's terms
run beside them."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGS = [("bf16", 1, True), ("q4", 1, True), ("fp32", 1, True), ("bf16", 2, True), ("q4", 2, True),
           ("fp32", 2, True), ("q4", 1, False)]


def one(precision: str, threads: int, adapter: str | None, requests: int, max_tokens: int) -> dict:
    """One configuration, in a child process (torch's thread count is per process)."""
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import serve_adapter_batch as b; "
            f"print(json.dumps(b.measure({precision!r}, {threads}, {adapter!r}, {requests}, {max_tokens})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(precision: str, threads: int, adapter: str | None, requests: int, max_tokens: int) -> dict:
    import serve  # benchmarks/perf/serve.py: the same submit-all-and-wait loop
    from transformers import AutoTokenizer

    from clawgym.serve.engine import BatchEngine
    from clawgym.serve.models import resolve_model_dir

    model_dir = resolve_model_dir("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    head = tok("You are an agent. " * 200)["input_ids"][:800]
    prompts = [head + tok(f"Task {i}: " + "summarize the file data.csv by column value and write out.md " * 30)
               ["input_ids"][:400] for i in range(requests)]
    engine = BatchEngine(model_dir, max_batch=16, precision=precision, threads=threads)
    if adapter:
        engine.load_adapter("policy", adapter)
    try:
        seconds, outs = serve.run(engine, prompts, max_tokens, adapter="policy" if adapter else None)
    finally:
        engine.close()
    tokens = sum(map(len, outs))
    return {"precision": precision, "threads": threads, "adapter": bool(adapter), "seconds": round(seconds, 1),
            "tokens": tokens, "tokens_per_s": round(tokens / seconds, 1)}


def _fresh_adapter(path: Path) -> str:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from clawgym.serve.models import resolve_model_dir

    model = AutoModelForCausalLM.from_pretrained(str(resolve_model_dir("smollm2-135m")))
    get_peft_model(model, LoraConfig(r=32, lora_alpha=64, task_type="CAUSAL_LM", target_modules=[
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])).save_pretrained(str(path))
    return str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--adapter", type=Path, default=REPO / "runs" / "learning" / "sft" / "final")
    ap.add_argument("--requests", type=int, default=13)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args(argv)
    from clawgym.rollout.provenance import source_revision

    adapter = str(args.adapter) if (args.adapter / "adapter_config.json").exists() else \
        _fresh_adapter(REPO / "runs" / "bench-adapter")
    load = os.getloadavg()
    rows = [one(p, t, adapter if a else None, args.requests, args.max_tokens) for p, t, a in CONFIGS]
    res = {"benchmark": "serve_adapter_batch", "date": time.strftime("%Y-%m-%d"), "source": source_revision(),
           "command": "python benchmarks/perf/serve_adapter_batch.py " + " ".join(argv or sys.argv[1:]),
           "settings": {"adapter": adapter, "requests": args.requests, "prompt_tokens": 1200, "shared_prefix": 800,
                        "max_tokens": args.max_tokens, "cpus": os.cpu_count()},
           "load_average_at_start": [round(x, 2) for x in load], "runs": rows}
    text = json.dumps(res, indent=2)
    if args.save:
        (REPO / "benchmarks" / "perf" / "results_serve_adapter_batch.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
