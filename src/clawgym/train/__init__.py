"""Training on verifier-filtered trajectories: `filter` (trajectories -> SFT conversations), `openai_messages`
(trajectories in and out as OpenAI messages + tools), `masks` (the server's rendering -> token ids and
assistant-only labels, verified), `sft` (trl + peft training, export to a servable model directory), `attention`
(padding-free attention without flash-attn), `rl_objective` and `rl_update` (the clipped policy-gradient loss on
the pool's step rows, and one LoRA update from them).

Names are imported lazily, so that `import clawgym.train.filter` (the `clawgym filter` command) stays light;
torch, transformers and trl are loaded only by the functions that train.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "FilterOptions": "filter", "FilterReport": "filter", "filter_to_file": "filter",
    "filter_trajectories": "filter", "read_sft_records": "filter", "transcript_to_messages": "filter",
    "MaskError": "masks", "TokenizedExample": "masks", "tokenize_conversation": "masks", "tokenize_record": "masks",
    "DataStats": "sft", "SFTOptions": "sft", "SFTResult": "sft", "TrainError": "sft", "build_examples": "sft",
    "export_model": "sft", "train_sft": "sft",
    "read_openai_messages": "openai_messages", "to_openai_messages": "openai_messages",
    "ObjectiveConfig": "rl_objective", "TokenBatch": "rl_objective", "build_batch": "rl_objective",
    "policy_loss": "rl_objective", "token_logps": "rl_objective", "UpdateResult": "rl_update",
    "rl_update": "rl_update",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(importlib.import_module(f"clawgym.train.{_NAMES[name]}"), name)
    raise AttributeError(f"module 'clawgym.train' has no attribute {name!r}")
