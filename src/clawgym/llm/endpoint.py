"""Where a model is reached: a given base URL, or the embedded server started for the duration of a command."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clawgym.llm.models import is_local_model


@contextmanager
def model_endpoint(model: str, base_url: str | None = None, *, log_path: Path | None = None,
                   max_batch: int = 16, on_start=None, precision: str = "fp32") -> Iterator[str]:
    """Yield the base URL to use for `model`.

    With a base URL (argument or `$OPENAI_BASE_URL`), that. Otherwise, when `model` is an embedded model name or
    a local model directory, start `clawgym serve` on a free port of 127.0.0.1 (weights in `precision`) and stop
    it on exit.
    """
    url = base_url or os.environ.get("OPENAI_BASE_URL")
    if url:
        yield url
        return
    if not is_local_model(model):
        from clawgym.llm.client import LLMError

        raise LLMError(f"model {model!r} is not a local model; give --base-url (or set OPENAI_BASE_URL)", "config", False)
    from clawgym.serve.server import ServerProcess

    server = ServerProcess(model, max_batch=max_batch, log_path=log_path, precision=precision)
    if on_start:
        on_start(server)
    with server:
        yield server.base_url
