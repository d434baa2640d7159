"""The one LLM client of the project, on the `openai` package, for every model call clawgym makes.

It works unchanged against OpenAI, vLLM, SGLang, Ollama and the embedded server: plain chat completions with
native `tools`. It adds what a rollout of thousands of episodes needs: a concurrency limit shared by all
threads, per-call timeouts, retries with exponential backoff and jitter on 429 / 5xx / connection errors and
timeouts (honouring `Retry-After`), and usage accounting (requests, tokens, retries, failures, latency).

Configuration: `model`, `base_url` (else `$OPENAI_BASE_URL`), `api_key` (else `$OPENAI_API_KEY`, else "EMPTY",
which local servers accept).
"""

from __future__ import annotations

import copy
import json
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

from clawgym.core.errors import ClawgymError
from clawgym.llm.endpoint import openai_base_url

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class LLMError(ClawgymError):
    """A model call that failed for good. `retryable` says whether the endpoint (not the request) was at fault:
    such failures are infrastructure errors of an episode, never the model's."""

    def __init__(self, message: str, kind: str, retryable: bool, status: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable
        self.status = status


@dataclass
class Usage:
    requests: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "total_tokens": self.prompt_tokens + self.completion_tokens}


@dataclass
class ChatResult:
    """One completion, flattened to what an agent needs, with the raw response kept for recording."""

    content: str
    tool_calls: list[dict[str, Any]]  # OpenAI shape: {id, type, function: {name, arguments (str)}}
    finish_reason: str | None
    usage: dict[str, int]
    latency_s: float
    model: str
    reasoning: str | None = None
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    attempts: int = 1
    raw: dict[str, Any] = field(default_factory=dict)

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation."""
        # content "" (never null) beside tool calls: both are valid OpenAI, but llama.cpp's server answers 500 to
        # a null content, so the one every engine takes is sent
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        return msg


class LLMClient:
    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        max_concurrency: int = 16,
        timeout: float = 300.0,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        stream: bool = False,
        extra_body: dict[str, Any] | None = None,
    ):
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise LLMError("no model endpoint: give --base-url or set OPENAI_BASE_URL", "config", False)
        base_url = openai_base_url(base_url)
        self.model = model
        self.base_url = base_url
        self.endpoint = base_url  # what errors name: the user's endpoint, also when calls go through the gateway
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.stream = stream
        self.extra_body = dict(extra_body or {})
        # Retries are ours (counted, logged, bounded by the caller's deadline), not the SDK's.
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            max_retries=0, timeout=timeout,
            http_client=httpx.Client(limits=httpx.Limits(max_connections=max_concurrency * 2)),
        )
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self.usage = Usage()

    def close(self) -> None:
        self._client.close()

    def routed(self, base_url: str) -> LLMClient:
        """This client, sending to another base URL (e.g. the gateway's per-trajectory URL), sharing the
        connection pool, the concurrency limit and the usage accounting."""
        view = copy.copy(self)
        view.base_url = base_url
        view._client = self._client.with_options(base_url=base_url)
        return view

    # -- one call -------------------------------------------------------------------------------------------
    def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        deadline: float | None = None,
        **params: Any,
    ) -> ChatResult:
        """One chat completion with retries. `deadline` (time.monotonic()) bounds the whole call, retries
        included. Raises LLMError when it fails for good."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, **params}
        if tools:
            kwargs["tools"] = tools
            # said explicitly: "auto" is OpenAI's default, but llama.cpp's server puts the tools in the prompt only
            # when tool_choice is sent, and without it the model never sees them
            kwargs.setdefault("tool_choice", "auto")
        extra = {**self.extra_body, **kwargs.pop("extra_body", {})}
        if extra:
            kwargs["extra_body"] = extra
        attempt = 0
        while True:
            attempt += 1
            timeout = self.timeout
            if deadline is not None:
                timeout = min(timeout, deadline - time.monotonic())
                if timeout <= 0:
                    raise LLMError("the episode's time ran out waiting for the model", "deadline", False)
            t0 = time.monotonic()
            try:
                with self._slots:
                    result = self._call(kwargs, timeout)
            except LLMError as exc:
                with self._lock:
                    self.usage.failures += 1
                delay = self._backoff(attempt, getattr(exc, "retry_after", None))
                if not exc.retryable or attempt > self.max_retries or (
                    deadline is not None and time.monotonic() + delay >= deadline
                ):
                    exc.args = (f"{exc} (after {attempt} attempt{'s' * (attempt > 1)})",)
                    raise
                with self._lock:
                    self.usage.retries += 1
                time.sleep(delay)
                continue
            result.latency_s = time.monotonic() - t0
            result.attempts = attempt
            with self._lock:
                self.usage.requests += 1
                self.usage.prompt_tokens += result.usage.get("prompt_tokens", 0)
                self.usage.completion_tokens += result.usage.get("completion_tokens", 0)
                self.usage.latency_s += result.latency_s
            return result

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.backoff_max)
        return min(self.backoff_base * 2 ** (attempt - 1), self.backoff_max) * (0.5 + random.random() / 2)

    def _call(self, kwargs: dict[str, Any], timeout: float) -> ChatResult:
        try:
            if self.stream:
                return self._call_stream(kwargs, timeout)
            resp = self._client.chat.completions.create(**kwargs, timeout=timeout)
            return _from_response(resp)
        except openai.APIStatusError as exc:
            err = LLMError(f"HTTP {exc.status_code} from {self.endpoint}: {_short(exc.message)}", "http_status",
                           exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500, exc.status_code)
            ra = exc.response.headers.get("retry-after") if exc.response is not None else None
            try:
                err.retry_after = float(ra) if ra else None  # type: ignore[attr-defined]
            except ValueError:
                pass
            raise err from None
        except openai.APITimeoutError:
            raise LLMError(f"no answer from {self.endpoint} within {timeout:.0f} s", "timeout", True) from None
        except openai.APIConnectionError as exc:
            raise LLMError(f"connection to {self.endpoint} failed: {_short(str(exc.__cause__ or exc))}",
                           "connection", True) from None
        except openai.APIError as exc:  # an error event inside a stream (the gateway's, when its upstream broke)
            raise LLMError(f"the stream from {self.endpoint} failed: {_short(str(exc))}", "stream_broken",
                           True) from None
        except (httpx.TransportError, httpx.StreamError) as exc:  # a stream cut mid-body
            raise LLMError(f"the stream from {self.endpoint} broke: {type(exc).__name__}: {_short(str(exc))}",
                           "stream_broken", True) from None
        except (openai.APIResponseValidationError, json.JSONDecodeError, ValueError, KeyError, TypeError,
                AttributeError, IndexError) as exc:
            raise LLMError(f"malformed response from {self.endpoint}: {type(exc).__name__}: {_short(str(exc))}",
                           "bad_response", True) from None

    def _call_stream(self, kwargs: dict[str, Any], timeout: float) -> ChatResult:
        stream = self._client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}, timeout=timeout
        )
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish = None
        deltas = 0  # chunks that carried generated text or a tool-call piece (a token each, on most engines)
        usage: dict[str, int] = {}
        model = kwargs["model"]
        prompt_ids: list[int] | None = None
        token_ids: list[int] = []
        for chunk in stream:
            data = chunk.model_dump()
            model = data.get("model") or model
            if data.get("usage"):
                usage = {k: v for k, v in data["usage"].items() if isinstance(v, int)}
            if data.get("prompt_token_ids"):
                prompt_ids = list(data["prompt_token_ids"])
            for ch in data.get("choices") or []:
                if ch.get("index", 0) != 0:  # n > 1: the agent continues with the first choice (the gateway keeps all)
                    continue
                delta = ch.get("delta") or {}
                if delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"):
                    deltas += 1
                if delta.get("content"):
                    content.append(delta["content"])
                if delta.get("reasoning_content"):
                    reasoning.append(delta["reasoning_content"])
                for tc in delta.get("tool_calls") or []:
                    slot = calls.setdefault(tc.get("index", len(calls)), {
                        "id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                    if tc.get("id"):
                        slot["id"] = tc["id"]
                    fn = tc.get("function") or {}
                    if fn.get("name"):
                        slot["function"]["name"] += fn["name"]
                    if fn.get("arguments"):
                        slot["function"]["arguments"] += fn["arguments"]
                token_ids += ch.get("token_ids") or []
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
        if finish is None:
            # a stream that ends without a finish reason was cut (or was empty): never a finished answer, whatever
            # closed it, so the episode is redone rather than trained on
            raise LLMError(f"the stream from {self.endpoint} ended without a finish reason after {deltas} chunks "
                           "of output (cut short or empty)", "stream_broken", True)
        if not usage.get("completion_tokens"):
            # an engine that sends no usage chunk (llama.cpp): count what was generated, so token budgets still act
            usage = {**usage, "completion_tokens": len(token_ids) or deltas, "usage_estimated": 1}
        tool_calls = [calls[i] for i in sorted(calls)]
        for i, tc in enumerate(tool_calls):
            tc["id"] = tc["id"] or f"call_{i}"
        return ChatResult(
            content="".join(content), tool_calls=tool_calls, finish_reason=finish, usage=usage, latency_s=0.0,
            model=model, reasoning="".join(reasoning) or None, prompt_token_ids=prompt_ids,
            token_ids=token_ids or None,
        )


def _short(text: str, n: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "..."


def _from_response(resp: Any) -> ChatResult:
    data = resp.model_dump() if hasattr(resp, "model_dump") else dict(resp)
    choices = data.get("choices")
    if not choices:
        raise ValueError("the response has no choices")
    ch = choices[0]
    msg = ch.get("message")
    if not isinstance(msg, dict):
        raise ValueError("the first choice has no message")
    tool_calls = []
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc.get("function") or {}
        args = fn.get("arguments")
        tool_calls.append({
            "id": tc.get("id") or f"call_{i}", "type": "function",
            "function": {"name": fn.get("name") or "", "arguments": args if isinstance(args, str) else json.dumps(args)},
        })
    usage = {k: v for k, v in (data.get("usage") or {}).items() if isinstance(v, int)}
    lp = ch.get("logprobs") or {}
    logprobs = [e.get("logprob") for e in (lp.get("content") or [])] if isinstance(lp, dict) else None
    return ChatResult(
        content=msg.get("content") or "", tool_calls=tool_calls, finish_reason=ch.get("finish_reason"), usage=usage,
        latency_s=0.0, model=data.get("model") or "", reasoning=msg.get("reasoning_content") or msg.get("reasoning"),
        prompt_token_ids=data.get("prompt_token_ids"), token_ids=ch.get("token_ids"), logprobs=logprobs or None,
        raw=data,
    )
