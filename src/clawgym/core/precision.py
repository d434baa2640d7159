"""Which float precision to run a model in: bf16 where the hardware computes it natively, fp32 elsewhere.

Shared by training (autocast) and the embedded server (weights loaded in that dtype), so both make the same choice.
"""

from __future__ import annotations

PRECISIONS = ("auto", "fp32", "bf16")
# the embedded server also decodes with the weights as a GGUF file stores them (clawgym.serve.fast_decode)
SERVER_PRECISIONS = (*PRECISIONS, "q4")


def resolve_precision(precision: str) -> str:
    """`auto` becomes bf16 on a GPU that supports it and on CPUs with AMX or AVX512-BF16 (where bf16 matmuls run
    several times faster than fp32), fp32 otherwise; `fp32` and `bf16` are returned as they are."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; use {', '.join(PRECISIONS)}")
    if precision != "auto":
        return precision
    if torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    try:
        fast = torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported()
    except AttributeError:
        fast = False
    return "bf16" if fast else "fp32"
