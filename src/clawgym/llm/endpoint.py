"""Where a model is reached: a given base URL, or the embedded server started for the duration of a command."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clawgym.serve.models import is_local_model


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


def openai_base_url(url: str) -> str:
    """The one rule for a base URL, everywhere clawgym calls a model (agents, the gateway's upstream, synthesis,
    the judge): a bare server root (`http://host:8080`, `http://host:8080/`) gets `/v1`, as the OpenAI client,
    vLLM, SGLang, llama.cpp and Ollama expect; any other path is used as given (`.../api/v1`, a gateway route, a
    provider's `/v1beta/openai`), without its trailing slash."""
    from urllib.parse import urlsplit, urlunsplit

    url = url.strip()
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if parts.scheme in ("http", "https") and parts.netloc and not path:
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


def check_endpoint(base_url: str, model: str, api_key: str | None = None, timeout: float = 30.0) -> str:
    """A pre-flight check of a model endpoint before a run starts: `GET /models` must answer with a model list;
    when `model` is not in it (llama.cpp lists its file's path and answers to any name), one tiny chat request
    (one token) must succeed instead. Returns a one-line description of what answered; raises LLMError with a
    one-line reason naming the URL the user gave (never the gateway's)."""
    import httpx

    from clawgym.llm.client import LLMError

    url = openai_base_url(base_url)
    headers = {"Authorization": f"Bearer {api_key or os.environ.get('OPENAI_API_KEY') or 'EMPTY'}"}
    try:
        with httpx.Client(timeout=timeout, headers=headers) as http:
            r = http.get(url + "/models")
            if r.status_code >= 400:
                raise LLMError(f"the model endpoint {url} answered HTTP {r.status_code} to GET /models (is it an "
                               "OpenAI-compatible server, and is the path right? a bare host:port gets /v1)",
                               "preflight", False)
            try:
                served = [str(m.get("id")) for m in r.json().get("data") or [] if isinstance(m, dict)]
            except (ValueError, AttributeError):
                raise LLMError(f"the model endpoint {url} answered GET /models with something that is not an "
                               "OpenAI model list", "preflight", False) from None
            if model in served:
                return f"{url} serves {model!r}"
            r = http.post(url + "/chat/completions", json={
                "model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1})
            if r.status_code >= 400:
                listed = f" (it lists: {', '.join(served[:5])})" if served else ""
                raise LLMError(f"the model endpoint {url} refused a one-token request for {model!r}{listed}: "
                               f"HTTP {r.status_code} {' '.join(r.text[:200].split())}", "preflight", False)
    except httpx.HTTPError as exc:
        raise LLMError(f"cannot reach the model endpoint {url}: {type(exc).__name__}: {exc}", "preflight",
                       False) from None
    return f"{url} answers for {model!r} (not among the models it lists: {', '.join(served[:3]) or 'none'})"
