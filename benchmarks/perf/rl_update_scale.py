#!/usr/bin/env python3
"""The RL update's tokens/s and peak memory with the weights in fp32 or bf16 (`train rl --dtype`), with and
without gradient checkpointing (`--gradient-checkpointing`), in the same run (issue #36).

Prints ONE JSON object on stdout (progress on stderr). `fp32` is the update as it was before #36 (fp32 weights,
no checkpointing; with the default options the update is the old one, see tests/test_rl_scale.py). Each variant
runs in a process of its own (a fresh process per round; one short update first, untimed), its peak RSS over
the update measured from the loaded model (VmHWM after resetting it through /proc/self/clear_refs); the
variants take turns so that all see the same load of a shared host. The
batch: `--batch` (a `train rl` OUT/batches/v<N>.jsonl) or, by default, `--groups` GRPO groups of `--samples`
rows whose prompts and responses are real text (this repository's docs) tokenized by the model's tokenizer,
advantages +1 / -0.6. The policy is the model with a fresh LoRA adapter of `train rl`'s shape (r=16 on every linear
layer, B drawn small so that every adapter weight has a gradient); the optimizer is SGD with lr 0, so every
round sees the same weights. Reported per variant: seconds per update (median), trained and computed tokens/s,
RSS with the model loaded, the peak over the update and its rise, the peak while loading, the loss, and the
gradient's cosine with the baseline's.

    python benchmarks/perf/rl_update_scale.py --rounds 2 --save
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# name -> (dtype, gradient checkpointing)
VARIANTS = {"fp32": ("fp32", False), "fp32-gc": ("fp32", True), "bf16": ("bf16", False), "bf16-gc": ("bf16", True)}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _status_mb(key: str) -> float:
    """VmRSS (now) or VmHWM (the peak since the last reset) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {key} in /proc/self/status")


def _reset_peak() -> None:
    """Make VmHWM the current RSS (Linux: `5` to /proc/self/clear_refs), so the next peak is the update's own."""
    Path("/proc/self/clear_refs").write_text("5")


def text_batch(tok, groups: int, samples: int, prompt_tokens: int, response_tokens: int) -> list[dict]:
    """`groups` prompts of `prompt_tokens` tokens of real text, each with `samples` responses of
    `response_tokens` tokens (other passages of the text), advantages alternating +1 / -0.6."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").glob("*.md")))
    ids = tok.encode(text, add_special_tokens=False)
    need = groups * (prompt_tokens + samples * response_tokens)
    ids = (ids * (need // max(len(ids), 1) + 1))[:need]
    rows, at = [], 0
    for g in range(groups):
        prompt = ids[at:at + prompt_tokens]
        at += prompt_tokens
        for s in range(samples):
            rows.append({"prompt_ids": prompt, "response_ids": ids[at:at + response_tokens],
                         "advantage": 1.0 if s % 2 == 0 else -0.6, "group_id": f"g{g}"})
            at += response_tokens
    return rows


def child(args: argparse.Namespace) -> int:
    """One update of one variant in this process; its numbers as JSON on stdout."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.dtypes import torch_dtype
    from clawgym.train.rl_objective import ObjectiveConfig
    from clawgym.train.rl_update import rl_update

    if args.threads:
        torch.set_num_threads(args.threads)
    dtype, gc = VARIANTS[args.child]
    path = resolve_model_dir(args.model)
    tok = AutoTokenizer.from_pretrained(str(path))
    if args.batch:
        rows = [json.loads(line) for line in args.batch.read_text().splitlines() if line.strip()][: args.limit]
    else:
        rows = text_batch(tok, args.groups, args.samples, args.prompt_tokens, args.response_tokens)
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype(dtype))
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                                            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                            "up_proj", "down_proj"]))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 1e-3)
    params = [p for p in model.parameters() if p.requires_grad]
    frozen = torch.optim.SGD(params, lr=0.0)
    cfg = ObjectiveConfig("grpo")
    kw = {"micro_batch_tokens": args.micro_batch_tokens, "pad_id": tok.pad_token_id or 0, "max_grad_norm": None,
          "share_prefixes": not args.no_share_prefixes, "gradient_checkpointing": gc}
    # a warm-up on one short row: lazy imports and first-call kernel setup out of the timing
    rl_update(model, frozen, [{**rows[0], "prompt_ids": rows[0]["prompt_ids"][:8],
                               "response_ids": rows[0]["response_ids"][:4]}], cfg, **kw)
    load_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    _reset_peak()
    loaded = _status_mb("VmRSS")
    t0 = time.perf_counter()
    res = rl_update(model, frozen, rows, cfg, **kw)
    dt = time.perf_counter() - t0
    peak = _status_mb("VmHWM")
    if args.grad:
        torch.save(torch.cat([p.grad.flatten().float() for p in params if p.grad is not None]), args.grad)
    print(json.dumps({"update_s": dt, "loaded_rss_mb": loaded, "peak_rss_mb": peak, "load_peak_rss_mb": load_peak,
                      "stats": res.stats,
                      "weights_dtype": str(next(p for p in model.parameters() if not p.requires_grad).dtype),
                      "adapter_dtype": str(params[0].dtype)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=Path, default=None, help="A train rl batch (OUT/batches/v<N>.jsonl); default: "
                    "a batch of the repository's docs text (see --groups).")
    ap.add_argument("--limit", type=int, default=None, help="Only the batch's first N rows.")
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--response-tokens", type=int, default=64)
    ap.add_argument("--model", default="smollm2-135m", help="The policy's base: an embedded name or a directory.")
    ap.add_argument("--rounds", type=int, default=2, help="Timed rounds per variant (each in a fresh process).")
    ap.add_argument("--micro-batch-tokens", type=int, default=4096, help="As train rl's default.")
    ap.add_argument("--no-share-prefixes", action="store_true", help="Run every row by itself (no prefix tree).")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                    help="The first is the baseline of the speed-ups, memory and gradient comparisons.")
    ap.add_argument("--save", action="store_true", help="Also write the JSON to --out.")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "perf" / "results_rl_update_scale.json")
    ap.add_argument("--child", choices=list(VARIANTS), help=argparse.SUPPRESS)
    ap.add_argument("--grad", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)

    import torch

    variants = list(dict.fromkeys(args.variants))
    baseline = variants[0]
    passed = [a for a in (argv if argv is not None else sys.argv[1:]) if a not in ("--save",)]
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    grads: dict[str, torch.Tensor] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for v in variants:
                grad = Path(tmp) / f"{v}.pt"
                cmd = [sys.executable, __file__, *passed, "--child", v, "--grad", str(grad)]
                out = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    sys.stderr.write(out.stderr[-3000:])
                    return 1
                r = json.loads(out.stdout.strip().splitlines()[-1])
                log(f"round {rnd} {v}: {r['update_s']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB "
                    f"(loaded {r['loaded_rss_mb']:.0f}), loss {r['stats'].get('loss', 0):.5f}")
                runs[v].append(r)
                grads[v] = torch.load(grad)
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=False).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "src"], capture_output=True,
                                    text=True, check=False).stdout.strip())
    except OSError:
        commit, dirty = "", False
    first = runs[baseline][0]["stats"]
    result = {
        "benchmark": "rl_update_scale",
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit, "uncommitted_changes_in_src": dirty,
        "command": "python benchmarks/perf/rl_update_scale.py " + " ".join(passed),
        "cpus": os.cpu_count(), "torch_threads": args.threads or torch.get_num_threads(),
        "load_avg": os.getloadavg(),
        "settings": {"model": args.model, "batch": str(args.batch) if args.batch else "docs text",
                     "groups": args.groups, "samples": args.samples, "prompt_tokens": args.prompt_tokens,
                     "response_tokens": args.response_tokens, "micro_batch_tokens": args.micro_batch_tokens,
                     "share_prefixes": not args.no_share_prefixes, "rounds": args.rounds, "lora": "r=16, all linear",
                     "optimizer": "SGD lr 0 (every round the same weights)"},
        "rows": first.get("rows"), "trained_tokens": first.get("tokens"),
        "sequence_tokens": first.get("sequence_tokens"), "computed_tokens": first.get("computed_tokens"),
        "baseline": baseline, "results": {},
    }
    base_s = statistics.median(r["update_s"] for r in runs[baseline])
    base_peak = statistics.median(r["peak_rss_mb"] - r["loaded_rss_mb"] for r in runs[baseline])
    for v in variants:
        med = statistics.median(r["update_s"] for r in runs[v])
        rise = statistics.median(r["peak_rss_mb"] - r["loaded_rss_mb"] for r in runs[v])
        st = runs[v][0]["stats"]
        lb = first["loss"]
        result["results"][v] = {
            "dtype": VARIANTS[v][0], "gradient_checkpointing": VARIANTS[v][1],
            "weights_dtype": runs[v][0]["weights_dtype"], "adapter_dtype": runs[v][0]["adapter_dtype"],
            "update_s_median": round(med, 2), "update_s": [round(r["update_s"], 2) for r in runs[v]],
            "trained_tokens_per_s": round(st["tokens"] / med, 1),
            "computed_tokens_per_s": round(st["computed_tokens"] / med, 1),
            "speedup": round(base_s / med, 2),
            "peak_rss_mb": round(statistics.median(r["peak_rss_mb"] for r in runs[v]), 1),
            "loaded_rss_mb": round(statistics.median(r["loaded_rss_mb"] for r in runs[v]), 1),
            "load_peak_rss_mb": round(statistics.median(r["load_peak_rss_mb"] for r in runs[v]), 1),
            "update_rss_rise_mb": round(rise, 1),
            "update_rss_rise_vs_baseline": round(rise / base_peak, 3) if base_peak > 0 else None,
            "loss": st["loss"], "loss_rel_diff": round(abs(st["loss"] - lb) / max(abs(lb), 1e-12), 6),
            "grad_cosine": round(float(torch.nn.functional.cosine_similarity(
                grads[baseline].double(), grads[v].double(), dim=0)), 6),
        }
    text = json.dumps(result, indent=2)
    if args.save:
        from clawgym.core.atomic import write_text

        write_text(args.out, text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
