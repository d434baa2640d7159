"""The dtype a model's weights load in for training (`train sft --dtype`), and what the optimizer then updates.

* ``fp32``: weights, gradients and optimizer state in fp32 (bf16 compute only through `--precision bf16`
  autocast). The memory of full fine-tuning is about 16 bytes a parameter: an 8B model does not fit one GPU.
* ``bf16``: the weights load in bf16 (2 bytes a parameter, half the activations), and
  - with LoRA (the default) the frozen base stays bf16 while peft keeps the adapter's weights in fp32
    (`autocast_adapter_dtype`): the trained weights, their gradients and AdamW's state are fp32 -- the fp32
    master weights of mixed precision, for the only weights the optimizer touches;
  - with `--full` every weight, its gradient and AdamW's state are bf16 (pure bf16 training: no fp32 master
    copy; small updates can round away). For fp32 master weights with bf16 compute run under DeepSpeed
    (`accelerate launch` with a ZeRO config: ZeRO keeps fp32 master weights and optimizer state, sharded) or
    FSDP with a bf16 `mixed_precision` policy, or load fp32 and autocast (`--dtype fp32 --precision bf16`).
* ``auto``: with LoRA, bf16 on a CUDA device that supports it, else fp32 (on a CPU bf16 only when asked); with
  `--full`, fp32 (fp32 master weights, bf16 compute through `--precision auto`): pure bf16 only when asked.
"""

from __future__ import annotations

from typing import Any

from clawgym.core.errors import ClawgymError

DTYPES = ("auto", "bf16", "fp32")


def check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ClawgymError(f"--dtype {dtype!r}: use {', '.join(DTYPES)}")


def resolve_dtype(dtype: str, full: bool = False) -> str:
    """`auto` -> bf16 on a CUDA device with bf16 support when the trained weights stay fp32 (LoRA), else fp32;
    `bf16` / `fp32` as they are."""
    import torch

    check_dtype(dtype)
    if dtype != "auto":
        return dtype
    return "bf16" if not full and torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "fp32"


def torch_dtype(name: str) -> Any:
    import torch

    return torch.bfloat16 if name == "bf16" else torch.float32


def master_weights(dtype: str, full: bool) -> str:
    """In words, the dtype of the weights the optimizer updates (recorded in train.json)."""
    if dtype == "fp32":
        return "fp32"
    return "bf16 (every weight; no fp32 master copy)" if full else "fp32 (the LoRA adapter; the frozen base is bf16)"
