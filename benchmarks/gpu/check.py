#!/usr/bin/env python3
"""The Python half of benchmarks/gpu/check.sh: bf16 SFT steps with gradient checkpointing on one CUDA device.

Builds a Qwen3-architecture model from a config (random weights; the default is ~0.6B parameters: 28 layers,
hidden 1024, 16 query / 8 key-value heads of 128, SwiGLU 3072 -- Qwen3-0.6B's shape with SmolLM2's 49,152-token
vocabulary), saves it with SmolLM2's tokenizer, and trains it through `clawgym.train.sft` on synthetic agent
trajectories (long tool results) packed into rows of ``--batch-tokens``:

* ``lora_bf16_gc``: `--dtype bf16 --gradient-checkpointing`, LoRA r=16 on every linear layer;
* ``full_bf16_gc``: the same with every weight trained (bf16 weights and AdamW state).

Prints ONE JSON object: per configuration tokens/s over the steps after the first, and
``torch.cuda.max_memory_allocated``. ``--allow-cpu --tiny`` runs the same code on a CPU with a 2-layer model (a
smoke test of the script, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "perf"))


def build_model(path: Path, tiny: bool) -> int:
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    from clawgym.llm.models import resolve_model_dir

    tok = AutoTokenizer.from_pretrained(str(resolve_model_dir("smollm2-135m")))
    shape = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16) if tiny else \
        dict(num_hidden_layers=28, hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
             num_key_value_heads=8, head_dim=128)
    cfg = Qwen3Config(vocab_size=len(tok), max_position_embeddings=65536, rope_theta=1_000_000.0,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, **shape)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return sum(p.numel() for p in model.parameters())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch-tokens", type=int, default=16384)
    ap.add_argument("--max-len", type=int, default=16384)
    ap.add_argument("--tokens", type=int, default=8000, help="about this many tokens a trajectory")
    ap.add_argument("--records", type=int, default=24)
    ap.add_argument("--configs", default="lora_bf16_gc,full_bf16_gc")
    ap.add_argument("--allow-cpu", action="store_true", help="run on a CPU (a smoke test, with --tiny)")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer model")
    args = ap.parse_args()

    import torch
    from sft_scale import trajectories

    from clawgym.train.sft import SFTOptions, build_examples, train_examples

    cuda = torch.cuda.is_available()
    if not cuda and not args.allow_cpu:
        print("benchmarks/gpu/check.py: no CUDA device visible to torch; nothing measured", file=sys.stderr)
        return 2
    results: dict = {}
    with tempfile.TemporaryDirectory() as work:
        model_dir = Path(work) / "qwen3-random"
        params = build_model(model_dir, args.tiny)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(model_dir))
        examples, stats = build_examples(trajectories(args.records, args.tokens), tok, args.max_len, verify="none")
        for name in args.configs.split(","):
            full = name.startswith("full")
            opts = SFTOptions(model=str(model_dir), full=full, max_steps=args.steps, max_len=args.max_len,
                              batch_tokens=args.batch_tokens, save_steps=0, warmup_ratio=0.0, dtype="bf16",
                              precision="bf16", gradient_checkpointing=True, seed=0)
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            t0 = time.monotonic()
            res = train_examples(examples, Path(work) / name, opts, stats=stats, show_progress=False)
            rows = res.log
            dt = rows[-1]["time"] - rows[0]["time"] if len(rows) > 1 else res.seconds
            dtok = rows[-1]["tokens"] - rows[0]["tokens"] if len(rows) > 1 else res.tokens
            results[name] = {"steps": res.steps, "tokens_per_s": round(dtok / dt, 1) if dt > 0 else None,
                             "peak_cuda_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
                             "first_loss": res.first_loss, "last_loss": res.last_loss,
                             "wall_s": round(time.monotonic() - t0, 1)}
            print(f"[gpu-check] {name}: {results[name]}", file=sys.stderr, flush=True)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = None
    print(json.dumps({
        "benchmark": "gpu_check", "commit": commit, "command": " ".join([sys.argv[0], *sys.argv[1:]]),
        "device": torch.cuda.get_device_name(0) if cuda else platform.processor() or "cpu",
        "torch": torch.__version__, "model": {"architecture": "Qwen3ForCausalLM", "parameters": params,
                                              "tiny": args.tiny},
        "settings": {k: getattr(args, k) for k in ("steps", "batch_tokens", "max_len", "tokens", "records")},
        "data": {"examples": stats.examples, "tokens": stats.tokens, "windows": stats.windows,
                 "dropped_turns": stats.dropped_turns},
        "results": results,
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
