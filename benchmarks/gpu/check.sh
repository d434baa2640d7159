#!/usr/bin/env bash
# One-GPU check of `train sft` at scale (#36): a small Qwen3-architecture model built from a config (random
# weights, nothing downloaded; SmolLM2's tokenizer), bf16 weights, gradient checkpointing, packed rows of long
# agent trajectories. Prints one JSON object: tokens/s and peak CUDA memory per configuration.
#
#   benchmarks/gpu/check.sh                  # ~2-4 minutes on one H100
#   benchmarks/gpu/check.sh --steps 20 --batch-tokens 32768
#
# Exits 2 with a one-line message when torch sees no CUDA device.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "benchmarks/gpu/check.sh: no CUDA device visible to torch; nothing measured (unmeasured on GPU)" >&2
  exit 2
fi
exec env PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" "$PY" benchmarks/gpu/check.py "$@"
