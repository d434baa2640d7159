"""The LLM layer: one OpenAI-compatible client for every model call, endpoints (`model_endpoint` starts the
embedded server of :mod:`clawgym.serve` for a local model, so llm sits above serve; the local models themselves
live in :mod:`clawgym.serve.models`, re-exported here), and conversation files checked
(:mod:`clawgym.llm.messages`)."""

from clawgym.llm.client import ChatResult, LLMClient, LLMError, Usage
from clawgym.llm.endpoint import model_endpoint
from clawgym.serve.models import (
    DEFAULT_MODEL,
    EMBEDDED,
    ModelError,
    is_local_model,
    prepare_embedded,
    resolve_model_dir,
)

__all__ = [
    "DEFAULT_MODEL", "EMBEDDED", "ChatResult", "LLMClient", "LLMError", "ModelError", "Usage", "is_local_model",
    "model_endpoint", "prepare_embedded", "resolve_model_dir",
]
