"""Local models by name (the embedded default, any Hugging Face model directory): re-exported from
:mod:`clawgym.serve.models`, where they live with the server that loads them (llm is above serve: its
`model_endpoint` starts that server for a local model)."""

from clawgym.serve.models import (
    DEFAULT_MODEL,
    EMBEDDED,
    EmbeddedModel,
    ModelError,
    _package_dir,
    cache_root,
    is_hf_model_dir,
    is_local_model,
    prepare_embedded,
    resolve_model_dir,
)

__all__ = [
    "DEFAULT_MODEL", "EMBEDDED", "EmbeddedModel", "ModelError", "_package_dir", "cache_root", "is_hf_model_dir",
    "is_local_model", "prepare_embedded", "resolve_model_dir",
]
