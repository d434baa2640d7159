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
    python benchmarks/perf/serve.py --part single   # only the single-request comparison below
    python benchmarks/perf/serve.py --part single --save   # -> results_serve_single.json (commit, settings)

Single request (``--part single``, also part of the default run): one chat request at a time, 128 greedy tokens,
on 1 and 2 threads, for the engine's decoding paths -- ``transformers`` (transformers' forward pass per token,
what the engine did before), ``fast_fp32`` (the lean step of ``clawgym.serve.fast_decode``), ``fast_q4``
(``--precision q4`` as shipped: the 4-bit blocks of the GGUF file, one sequence's layers through the compiled
kernel of ``clawgym.serve.q4_kernel``; ``q4_kernel`` says whether it built here) and ``fast_q4_torch`` (the
same with ``CLAWGYM_Q4_KERNEL=0``: torch's int4 kernel, what q4 did before), on 2 threads also
``fast_q4_kernel_1_thread`` (``CLAWGYM_Q4_KERNEL_THREADS=1``: the kernel's products on the engine's thread
alone, torch's small operations on 2) -- and llama.cpp
(``llama-cpp-python`` where it imports, else in ``.ci/run``'s ``.venv-llama``; the JSON records its version and
CPU features) on the very GGUF file the embedded model comes from. Goal: the engine within 2x of llama.cpp (``ratio_to_llama_cpp >= 0.5``). For each engine
path, the logprob gap: the engine's logprobs of its own tokens against the fp32 model's logprobs of the same
tokens (teacher-forced), mean / p99 / max over every generated token.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

TARGET = 1.2
HERE = Path(__file__).resolve().parent


def _environment() -> dict:
    """The run's commit, command and machine (the numbers depend on all three)."""
    import platform

    import torch

    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or None
    dirty = subprocess.run(["git", "-C", str(HERE), "status", "--porcelain", "--", "../../src"],
                           capture_output=True, text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else None
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "git_commit": commit,
            "src_modified": bool(dirty), "command": " ".join(["python", "benchmarks/perf/serve.py", *sys.argv[1:]]),
            "torch": torch.__version__, "cpu": cpu, "cpus": os.cpu_count(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}


def run(engine, prompts: list[list[int]], max_tokens: int,
        adapter: str | None = None) -> tuple[float, list[list[int]]]:
    """Submit every prompt at once (through `adapter` when given); (seconds until the last finished, the tokens)."""
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
        engine.submit(GenerationRequest(list(p), SamplingParams(max_tokens=max_tokens), emitter(i), adapter=adapter))
    for _ in prompts:
        finished.acquire()
    return time.perf_counter() - t0, outs


SINGLE_PROMPTS = [
    "Write a short story about a robot who learns to paint.",
    "Explain what a CSV file is and how to read one in Python.",
    "List five things to pack for a weekend hiking trip, with a reason for each.",
]
SINGLE_TARGET = 0.5  # the engine's tokens/s over llama.cpp's, one request


def _generate_one(engine, prompt: list[int], max_tokens: int) -> tuple[float, list[int], list[float]]:
    from clawgym.serve.engine import GenerationRequest, SamplingParams

    toks: list[int] = []
    lps: list[float] = []
    done = threading.Event()

    def emit(ev) -> None:
        if ev.finish_reason:
            done.set()
        elif ev.token_id is not None:
            toks.append(ev.token_id)
            lps.append(ev.logprob)

    t0 = time.perf_counter()
    engine.submit(GenerationRequest(list(prompt), SamplingParams(max_tokens=max_tokens, logprobs=True), emit))
    done.wait()
    return time.perf_counter() - t0, toks, lps


def _gap(model, prompt: list[int], toks: list[int], lps: list[float]) -> list[float]:
    """|engine logprob - fp32 model logprob| of each generated token (teacher-forced)."""
    import torch

    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([prompt + toks])).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)
    return [abs(float(logp[len(prompt) - 1 + j, t]) - lp) for j, (t, lp) in enumerate(zip(toks, lps, strict=True))]


def _stats(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"n": len(xs), "mean": round(sum(xs) / len(xs), 5), "p99": round(xs[int(0.99 * (len(xs) - 1))], 5),
            "max": round(xs[-1], 5)} if xs else {"n": 0}


def single_request(model_name: str, max_tokens: int, threads: list[int]) -> dict:
    """One request at a time: each engine path against llama.cpp on the same GGUF file (see the module)."""
    import torch
    from transformers import AutoModelForCausalLM

    from clawgym.llm.models import EMBEDDED, _package_dir, resolve_model_dir
    from clawgym.serve.engine import BatchEngine
    from clawgym.serve.fast_decode import q4_supported

    model_dir = resolve_model_dir(model_name)
    out: dict = {"max_tokens": max_tokens, "prompts": len(SINGLE_PROMPTS), "target_ratio_to_llama_cpp": SINGLE_TARGET}
    fp32 = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    # (name, precision, CLAWGYM_FAST_DECODE, CLAWGYM_Q4_KERNEL, CLAWGYM_Q4_KERNEL_THREADS: "" for the engine's)
    paths = [("transformers", "fp32", "0", "1", ""), ("fast_fp32", "fp32", "1", "1", "")]
    if q4_supported():
        paths += [("fast_q4_torch", "q4", "1", "0", ""), ("fast_q4", "q4", "1", "1", ""),
                  ("fast_q4_kernel_1_thread", "q4", "1", "1", "1")]
        out["q4_kernel"] = _q4_kernel_status()
    else:
        out["fast_q4"] = {"available": False, "reason": "no native bf16 on this CPU (AVX512-BF16 or AMX)"}
    for th in threads:
        row: dict = {}
        for name, precision, fast, kernel, kernel_threads in paths:
            if kernel_threads and int(kernel_threads) >= th:
                continue  # the same as fast_q4 on this many threads
            os.environ["CLAWGYM_FAST_DECODE"] = fast
            os.environ["CLAWGYM_Q4_KERNEL"] = kernel
            os.environ["CLAWGYM_Q4_KERNEL_THREADS"] = kernel_threads
            engine = BatchEngine(model_dir, max_batch=1, precision=precision, threads=th, prefix_cache_tokens=0)
            try:
                prompts = [_chat_ids(engine.tokenizer, p) for p in SINGLE_PROMPTS]
                _generate_one(engine, prompts[0], 8)  # warm-up
                seconds, tokens, gaps, outs = 0.0, 0, [], []
                for p in prompts:
                    dt, toks, lps = _generate_one(engine, p, max_tokens)
                    seconds += dt
                    tokens += len(toks)
                    outs.append(toks)
                    if th == threads[0]:
                        torch.set_num_threads(max(threads))
                        gaps += _gap(fp32, p, toks, lps)
                        torch.set_num_threads(th)
            finally:
                engine.close()
                os.environ.pop("CLAWGYM_FAST_DECODE", None)
                os.environ.pop("CLAWGYM_Q4_KERNEL", None)
                os.environ.pop("CLAWGYM_Q4_KERNEL_THREADS", None)
            row[name] = {"tokens": tokens, "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 1)}
            if gaps:
                row[name]["logprob_gap_to_fp32"] = _stats(gaps)
            row[name]["_outs"] = outs
            print(f"single request, {th} thread(s), {name}: {tokens / seconds:.1f} tokens/s", file=sys.stderr,
                  flush=True)
        ref = row["transformers"].pop("_outs")
        for name in row:
            outs = row[name].pop("_outs", None)
            if outs is not None:
                row[name]["greedy_tokens_equal_transformers"] = outs == ref
        spec = EMBEDDED.get(model_name)
        pkg = _package_dir(spec.package) if spec else None
        row["llama_cpp"] = _llama_cpp(pkg / spec.gguf_file if pkg else None, max_tokens, th)
        if "tokens_per_s" in row["llama_cpp"]:
            for name in [n for n, *_ in paths if n in row]:
                row[name]["ratio_to_llama_cpp"] = round(row[name]["tokens_per_s"] / row["llama_cpp"]["tokens_per_s"],
                                                        3)
        out[f"threads_{th}"] = row
    best = [r[n]["ratio_to_llama_cpp"] for r in (out.get(f"threads_{t}", {}) for t in threads)
            for n in ("fast_q4", "fast_fp32") if "ratio_to_llama_cpp" in r.get(n, {})]
    out["meets_target"] = bool(best) and all(
        out[f"threads_{t}"].get("fast_q4", out[f"threads_{t}"]["fast_fp32"]).get("ratio_to_llama_cpp", 0)
        >= SINGLE_TARGET for t in threads)
    return out


def _q4_kernel_status() -> dict:
    """Whether `fast_q4` runs through the compiled kernel of `clawgym.serve.q4_kernel` here (else it is the
    same as `fast_q4_torch`), and the seconds its first build took (0 when it was already in the cache)."""
    from clawgym.serve import q4_kernel

    t0 = time.perf_counter()
    lib = q4_kernel.load()
    return {"available": lib is not None, "load_seconds": round(time.perf_counter() - t0, 2),
            **({"reason": q4_kernel.UNAVAILABLE} if lib is None else {})}


def _chat_ids(tokenizer, text: str) -> list[int]:
    chat = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                         tokenize=False)
    return tokenizer(chat, add_special_tokens=False)["input_ids"]


def _llama_cpp(gguf, max_tokens: int, threads: int) -> dict:
    """llama.cpp's tokens/s on the same prompts (its own chat template rendering of the same text): in this
    process where `llama_cpp` imports, else in the venv `.ci/run` builds it into (`.venv-llama`)."""
    if gguf is None or not gguf.exists():
        return {"available": False, "reason": "no GGUF file for this model"}
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        venv = HERE.parents[1] / ".venv-llama" / "bin" / "python"
        if not venv.exists():
            return {"available": False, "reason": "llama-cpp-python is not installed (pip install llama-cpp-python, "
                                                  "or .ci/run's .venv-llama)"}
        proc = subprocess.run([str(venv), __file__, "--llama-cpp-only", str(gguf), str(max_tokens), str(threads)],
                              capture_output=True, text=True)
        if proc.returncode:
            return {"available": False, "reason": f"{venv}: {proc.stderr.strip()[-300:]}"}
        return {**json.loads(proc.stdout), "python": str(venv.parents[1].name)}
    return _llama_cpp_here(gguf, max_tokens, threads)


def _llama_cpp_here(gguf, max_tokens: int, threads: int) -> dict:
    import llama_cpp
    from llama_cpp import Llama

    llm = Llama(model_path=str(gguf), n_ctx=2048, n_threads=threads, n_threads_batch=threads, verbose=False)
    seconds, tokens = 0.0, 0
    for i, text in enumerate([SINGLE_PROMPTS[0], *SINGLE_PROMPTS]):  # the first: warm-up
        prompt = llm.tokenize(f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n".encode(), special=True)
        llm.reset()
        t0 = time.perf_counter()
        n = 0
        for tok in llm.generate(prompt, temp=0.0, top_k=1):
            if tok == llm.token_eos():
                break
            n += 1
            if n >= (8 if i == 0 else max_tokens):
                break
        if i:
            seconds += time.perf_counter() - t0
            tokens += n
    info = llama_cpp.llama_print_system_info()
    return {"version": llama_cpp.__version__, "gguf": Path(gguf).name, "tokens": tokens, "seconds": round(seconds, 2),
            "tokens_per_s": round(tokens / seconds, 1),
            "system_info": (info.decode() if isinstance(info, bytes) else str(info)).strip()}


def main() -> int:
    if sys.argv[1:2] == ["--llama-cpp-only"]:  # GGUF MAX_TOKENS THREADS: in llama.cpp's own venv (see _llama_cpp)
        gguf, max_tokens, threads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        print(json.dumps(_llama_cpp_here(gguf, max_tokens, threads)))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", default=os.environ.get("CLAWGYM_BENCH_QUICK") == "1")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--part", choices=["all", "batch", "single"], default="all",
                    help="batch: the agent-shaped load; single: one request against llama.cpp; all: both")
    ap.add_argument("--out", default=None, help="Also write the JSON here.")
    ap.add_argument("--save", action="store_true",
                    help="Also write the JSON to benchmarks/perf/results_serve_single.json (--part single) or "
                         "results_serve.json, with the commit and settings of the run.")
    args = ap.parse_args()
    result: dict = {"benchmark": "serve", "model": args.model, "environment": _environment()}
    if args.part in ("all", "single"):
        result["single_request"] = single_request(args.model, 24 if args.quick else 128,
                                                  [1] if args.quick else [1, 2])
    if args.part in ("all", "batch"):
        result["batch"] = batch_load(args)
    text = json.dumps(result, indent=2)
    print(text)
    outs = [args.out] if args.out else []
    if args.save:
        outs.append(str(HERE / ("results_serve_single.json" if args.part == "single" else "results_serve.json")))
    for path in outs:
        from clawgym.core.atomic import write_text

        write_text(path, text + "\n")
    return 0


def batch_load(args) -> dict:
    """The agent-shaped load (see the module)."""
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
    result: dict = {"requests": n, "max_tokens": max_tokens,
                    "prompt_tokens": sum(map(len, prompts)), "target_speedup_fp32": TARGET}
    engines = [("baseline", ConcatenatingEngine, "fp32"), ("fp32", BatchEngine, "fp32")]
    if resolve_precision("auto") == "bf16":
        engines.append(("bf16", BatchEngine, "bf16"))
    from clawgym.serve.fast_decode import q4_supported

    if q4_supported():
        engines.append(("q4", BatchEngine, "q4"))
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
    for name in ("fp32", "bf16", "q4"):
        if "seconds" in result.get(name, {}):
            result[name]["speedup"] = round(base / result[name]["seconds"], 2)
    result["fp32_tokens_equal_baseline"] = tokens["fp32"] == tokens["baseline"]
    result["meets_target"] = result["fp32"]["speedup"] >= TARGET and result["fp32_tokens_equal_baseline"]
    return result


if __name__ == "__main__":
    sys.exit(main())
