#!/usr/bin/env python3
"""Embedded server throughput on an agent-shaped load: many concurrent requests with long prompts that share a
system prompt, each generating a short answer (what `eval` and the learning experiment send it).

Three engines run the same requests in the same process, one after another:

- ``baseline``: the engine with transformers' plain `DynamicCache`, which concatenates the whole key/value cache
  anew for every generated token (what the engine did before; fp32);
- ``fp32``: the engine as shipped, whose cache grows in place (same tokens as the baseline, checked here);
- ``bf16``: the same with bfloat16 weights (`--precision bf16`), where the CPU has native bf16.

It prints JSON with the seconds and generated tokens/s of each, their speed-up over the baseline (target for the
shipped fp32 engine: >= 1.2x), and whether fp32 gave the baseline's tokens exactly.

    python benchmarks/perf/serve.py                 # 13 requests, 1,500-4,000-token prompts, 100 new tokens each
    python benchmarks/perf/serve.py --quick         # 4 requests, short prompts (smoke run)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time

TARGET = 1.2


def run(engine, prompts: list[list[int]], max_tokens: int) -> tuple[float, list[list[int]]]:
    from clawgym.serve.engine import GenerationRequest, SamplingParams

    outs: list[list[int]] = [[] for _ in prompts]
    finished = threading.Semaphore(0)

    def emitter(i: int):
        def emit(ev) -> None:
            if ev.finish_reason:
                finished.release()
            elif ev.token_id is not None:
                outs[i].append(ev.token_id)
        return emit

    t0 = time.perf_counter()
    for i, p in enumerate(prompts):
        engine.submit(GenerationRequest(list(p), SamplingParams(max_tokens=max_tokens), emitter(i)))
    for _ in prompts:
        finished.acquire()
    return time.perf_counter() - t0, outs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", default=os.environ.get("CLAWGYM_BENCH_QUICK") == "1")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--max-tokens", type=int, default=None)
    args = ap.parse_args()
    n = args.requests or (4 if args.quick else 13)
    max_tokens = args.max_tokens or (24 if args.quick else 100)
    shared, lo, hi = (200, 100, 300) if args.quick else (1500, 1500, 2500)

    from transformers import DynamicCache

    from clawgym.core.precision import resolve_precision
    from clawgym.llm.models import resolve_model_dir
    from clawgym.serve.engine import BatchEngine

    class ConcatenatingEngine(BatchEngine):
        """The engine with transformers' own cache: every decoding step copies the whole cache."""

        def _new_cache(self, kv):
            return DynamicCache(ddp_cache_data=kv)

    model_dir = resolve_model_dir(args.model)
    rng = random.Random(0)
    system = [rng.randrange(100, 40000) for _ in range(shared)]
    prompts = [system + [rng.randrange(100, 40000) for _ in range(rng.randrange(lo, hi))] for _ in range(n)]
    result: dict = {"benchmark": "serve", "model": args.model, "requests": n, "max_tokens": max_tokens,
                    "prompt_tokens": sum(map(len, prompts)), "target_speedup_fp32": TARGET}
    engines = [("baseline", ConcatenatingEngine, "fp32"), ("fp32", BatchEngine, "fp32")]
    if resolve_precision("auto") == "bf16":
        engines.append(("bf16", BatchEngine, "bf16"))
    else:
        result["bf16"] = {"available": False, "reason": "no native bf16 on this CPU (AMX or AVX512-BF16)"}
    tokens = {}
    for name, cls, precision in engines:
        # the prefix cache is off so that every engine prefills the same tokens
        engine = cls(model_dir, max_batch=16, precision=precision, prefix_cache_tokens=0)
        try:
            seconds, outs = run(engine, prompts, max_tokens)
        finally:
            engine.close()
        generated = sum(map(len, outs))
        tokens[name] = outs
        result[name] = {"seconds": round(seconds, 2), "generated_tokens": generated,
                        "generated_tokens_per_s": round(generated / seconds, 2)}
        print(f"{name}: {seconds:.1f} s", file=sys.stderr, flush=True)
    base = result["baseline"]["seconds"]
    for name in ("fp32", "bf16"):
        if "seconds" in result.get(name, {}):
            result[name]["speedup"] = round(base / result[name]["seconds"], 2)
    result["fp32_tokens_equal_baseline"] = tokens["fp32"] == tokens["baseline"]
    result["meets_target"] = result["fp32"]["speedup"] >= TARGET and result["fp32_tokens_equal_baseline"]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
