"""The OpenAI-compatible HTTP server around :class:`BatchEngine` (FastAPI).

`POST /v1/chat/completions` (streaming and not, `tools`, `logprobs`/`top_logprobs`, vLLM's `return_token_ids`),
`GET /v1/models`, `GET /health`. Field names follow OpenAI and, for token ids, vLLM: `prompt_token_ids` at the
top level and `token_ids` per choice (per chunk when streaming), so a gateway can record exactly what the
engine saw and produced.

LoRA adapters, with vLLM's routes, bodies and status codes (so a trainer publishing policy versions works the
same against `vllm serve --enable-lora` with `VLLM_ALLOW_RUNTIME_LORA_UPDATING=1`):

- `POST /v1/load_lora_adapter` `{"lora_name", "lora_path", "load_inplace"?}`: 200 and the plain text
  ``Success: LoRA adapter 'NAME' added successfully.``; 400 when a field is missing, the name is already loaded
  (without `load_inplace`), is the base model's, or the adapter does not fit the model; 404 when there is no
  adapter at the path.
- `POST /v1/unload_lora_adapter` `{"lora_name", "lora_int_id"?}`: 200 ``Success: LoRA adapter 'NAME' removed
  successfully.``; 400 without a name; 404 when the name is not loaded. Requests already running with it finish
  with it (see `clawgym.serve.engine`).
- A chat request whose `model` is an adapter's name is generated with it (and answers with that `model`);
  the base model's name, or no `model`, is the base model; any other name is a 404, as in vLLM.
- `GET /v1/models` lists each adapter after the base model, with `parent` (the base model) and `root` (its
  path); `GET /health` adds `adapters` (name, path, id, when loaded, load time, requests running),
  `unloading_adapters` and `policy_version` (the adapter loaded last; null with the base model only).

Full weights, with SGLang's route and body: `POST /update_weights_from_disk` `{"model_path"}` replaces the base
model's weights from a model directory of the same architecture once the running requests are done (see
`clawgym.serve.engine`): 200 `{"success": true, "message", "weights_version"}`; 400 `{"success": false,
"message"}` when the directory, a tensor or a shape does not fit (nothing is changed then). `/health` reports
`weights` (the directory and how many swaps).

The same with vLLM's routes (its dev mode, `VLLM_SERVER_DEV_MODE=1`): `POST /collective_rpc` `{"method":
"reload_weights", "kwargs": {"weights_path"}}` -> `{"results": [...]}` (only that method), and `POST /pause`,
`/resume`, `/reset_prefix_cache`, which a weight update here does not need (the swap waits for the running
requests and drops the prefix cache) and are answered at once.

Errors have OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, as vLLM's.

A request body over `max_body_bytes` (16 MiB by default) is answered 413 while it is read, before it is parsed
(clawgym.httpguard.BodyLimitMiddleware, shared with the gateway). The server has no token: it binds loopback
unless told otherwise.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from clawgym.httpguard import DEFAULT_MAX_BODY_BYTES, BodyLimitMiddleware
from clawgym.serve.chat_format import parse_output, render_prompt, safe_content_prefix
from clawgym.serve.engine import BatchEngine, EngineError, GenerationRequest, SamplingParams, TokenEvent
from clawgym.serve.lora import AdapterError

DEFAULT_MAX_TOKENS = 1024


def _error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None) -> JSONResponse:
    return JSONResponse(status_code=status,
                        content={"error": {"message": message, "type": kind, "param": param, "code": status}})


def _adapter_error(exc: AdapterError) -> JSONResponse:
    return _error(exc.status, str(exc), exc.kind)


async def _json_object(request: Request) -> dict | JSONResponse:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _error(400, "the request body is not valid JSON")
    if not isinstance(body, dict):
        return _error(400, "the request body must be a JSON object")
    return body


class _Incremental:
    """Detokenizes generated ids as they come, never emitting half a UTF-8 character."""

    def __init__(self, tokenizer: Any, stop: list[str]):
        self.tokenizer = tokenizer
        self.stop = [s for s in stop if s]
        self.ids: list[int] = []
        self.text = ""
        self.stopped = False

    def add(self, token_id: int) -> None:
        self.ids.append(token_id)
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if text.endswith("\ufffd"):
            return
        for s in self.stop:
            i = text.find(s)
            if i >= 0:
                text, self.stopped = text[:i], True
        self.text = text


def _logprob_entry(tokenizer: Any, token_id: int, logprob: float | None, top: list[tuple[int, float]] | None) -> dict:
    tok = tokenizer.decode([token_id], skip_special_tokens=False)
    return {
        "token": tok, "logprob": logprob, "bytes": list(tok.encode("utf-8")),
        "top_logprobs": [
            {"token": (t := tokenizer.decode([i], skip_special_tokens=False)), "logprob": lp, "bytes": list(t.encode("utf-8"))}
            for i, lp in (top or [])
        ],
    }


class TokenLog:
    """The server's own record of the ids it took in and generated, one JSON line per completed request
    (`--token-log`): what a gateway's captured ids can be checked against."""

    def __init__(self, path: Path | None):
        self._fh = open(path, "a", encoding="utf-8") if path else None
        self._lock = threading.Lock()

    def write(self, rid: str, prompt_ids: list[int], token_ids: list[int], finish: str | None,
              model: str | None = None) -> None:
        if self._fh is None:
            return
        line = json.dumps({"id": rid, "model": model, "prompt_token_ids": prompt_ids, "token_ids": token_ids,
                           "finish_reason": finish})
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()


def _weight_routes(app: FastAPI, engine: BatchEngine) -> None:
    """The routes that replace the base model's weights: SGLang's and vLLM's (see the module docstring)."""

    @app.post("/update_weights_from_disk")
    async def update_weights_from_disk(request: Request):
        """SGLang's route and body for full weights: `{"model_path"}` -> `{"success", "message"}`."""
        body = await _json_object(request)
        if isinstance(body, JSONResponse):
            return body
        path = body.get("model_path")
        if not path or not isinstance(path, str):
            return JSONResponse({"success": False, "message": "'model_path' must be provided."}, status_code=400)
        try:
            weights = await asyncio.to_thread(engine.load_weights, path)
        except EngineError as exc:
            return JSONResponse({"success": False, "message": str(exc)}, status_code=400)
        return {"success": True, "message": f"Succeeded to update model weights from {path}.",
                "weights_version": weights["version"]}

    @app.post("/collective_rpc")
    async def collective_rpc(request: Request):
        """vLLM's route for full weights (its dev mode, `VLLM_SERVER_DEV_MODE=1`): `{"method": "reload_weights",
        "kwargs": {"weights_path"}}` -> `{"results": [...]}`, one result per worker (here one). Only that method is
        served; anything else is answered 400."""
        body = await _json_object(request)
        if isinstance(body, JSONResponse):
            return body
        kwargs = body.get("kwargs") or {}
        if body.get("method") != "reload_weights" or not isinstance(kwargs, dict):
            return _error(400, f"this server runs only the method 'reload_weights', not {body.get('method')!r}")
        path = kwargs.get("weights_path")
        if not path or not isinstance(path, str):
            return _error(400, "reload_weights needs kwargs.weights_path (a model directory)")
        try:
            weights = await asyncio.to_thread(engine.load_weights, path)
        except EngineError as exc:
            return _error(400, str(exc))
        return {"results": [{"weights_version": weights["version"]}]}

    @app.post("/pause")
    async def pause():
        """vLLM's pause around a weight update: a no-op here, where a swap waits for the running requests."""
        return {"status": "paused"}

    @app.post("/resume")
    async def resume():
        return {"status": "resumed"}

    @app.post("/reset_prefix_cache")
    async def reset_prefix_cache():
        """vLLM's route: the prefix cache is already dropped with every weight swap here (see the engine)."""
        return PlainTextResponse("OK")


def create_app(engine: BatchEngine, served_name: str, token_log: Path | None = None,  # noqa: C901 (the routes are closures over the engine: their branches count here)
               max_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """`max_body_bytes`: larger request bodies are answered 413 and never parsed (None: no limit)."""
    app = FastAPI(title="clawgym serve", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=max_body_bytes)
    created = int(time.time())
    tokenizer = engine.tokenizer
    tlog = TokenLog(token_log)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "model": served_name, "busy": engine.busy, "precision": engine.precision, "decode": engine.decode,
                "weights": engine.weights,
                "threads": engine.threads, **engine.stats, **engine.adapter_status()}

    @app.get("/v1/models")
    async def models() -> dict:
        data = [{"id": served_name, "object": "model", "created": created, "owned_by": "clawgym",
                 "root": str(engine.model_dir), "parent": None, "max_model_len": engine.context_length}]
        data += [{"id": a.name, "object": "model", "created": int(a.loaded_at), "owned_by": "clawgym",
                  "root": a.path, "parent": served_name, "max_model_len": engine.context_length}
                 for a in engine.adapters()]
        return {"object": "list", "data": data}

    @app.post("/v1/load_lora_adapter")
    async def load_lora_adapter(request: Request):
        body = await _json_object(request)
        if isinstance(body, JSONResponse):
            return body
        name, path = body.get("lora_name"), body.get("lora_path")
        if not name or not path or not isinstance(name, str) or not isinstance(path, str):
            return _error(400, "Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput")
        if name == served_name:
            return _error(400, f"'{name}' is the base model's name", "InvalidUserInput")
        try:
            # the files are read in a worker thread; the weights go in between two of the engine's steps
            await asyncio.to_thread(engine.load_adapter, name, path, bool(body.get("load_inplace")))
        except AdapterError as exc:
            return _adapter_error(exc)
        return PlainTextResponse(f"Success: LoRA adapter '{name}' added successfully.")

    @app.post("/v1/unload_lora_adapter")
    async def unload_lora_adapter(request: Request):
        body = await _json_object(request)
        if isinstance(body, JSONResponse):
            return body
        name = body.get("lora_name")
        if not name or not isinstance(name, str):
            return _error(400, "'lora_name' needs to be provided to unload a LoRA adapter.", "InvalidUserInput")
        try:
            engine.unload_adapter(name)
        except AdapterError as exc:
            return _adapter_error(exc)
        return PlainTextResponse(f"Success: LoRA adapter '{name}' removed successfully.")

    _weight_routes(app, engine)

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await _json_object(request)
        if isinstance(body, JSONResponse):
            return body
        model = body.get("model") or None
        if model == served_name:
            model = None
        elif model is not None and (not isinstance(model, str) or not engine.has_adapter(model)):
            return _error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "'messages' must be a non-empty list")
        if int(body.get("n") or 1) != 1:
            return _error(400, "only n=1 is supported")
        tools = body.get("tools") or None
        refused = unsupported_fields(body)
        if refused is not None:
            return _error(400, refused[1], "invalid_request_error", refused[0])
        if body.get("tool_choice") == "none":
            tools = None
        stop = body.get("stop") or []
        if isinstance(stop, str):
            stop = [stop]
        try:
            params = SamplingParams(
                max_tokens=int(body.get("max_completion_tokens") or body.get("max_tokens") or DEFAULT_MAX_TOKENS),
                temperature=float(body["temperature"]) if body.get("temperature") is not None else 0.0,
                top_p=float(body["top_p"]) if body.get("top_p") is not None else 1.0,
                stop=list(stop), logprobs=bool(body.get("logprobs")),
                top_logprobs=int(body.get("top_logprobs") or 0), seed=body.get("seed"),
            )
            prompt_ids = render_prompt(tokenizer, body["messages"], tools)
        except (TypeError, ValueError, KeyError) as exc:
            return _error(400, f"bad request: {exc}")
        if params.top_logprobs:
            params.logprobs = True
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[TokenEvent] = asyncio.Queue()
        req = GenerationRequest(prompt_ids, params, lambda ev: loop.call_soon_threadsafe(events.put_nowait, ev),
                                adapter=model)
        try:
            engine.submit(req)
        except AdapterError as exc:  # unloaded since the check above
            return _error(exc.status, str(exc), exc.kind, "model")
        except EngineError as exc:
            return _error(400, str(exc))
        rid = "chatcmpl-" + uuid.uuid4().hex
        want_ids = bool(body.get("return_token_ids"))
        name = model or served_name
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                _stream(req, events, rid, name, tools is not None, want_ids, include_usage, tokenizer, tlog),
                media_type="text/event-stream",
            )
        return await _complete(req, events, rid, name, tools is not None, want_ids, tokenizer, tlog)

    return app


async def _complete(req, events, rid, model, tools_offered, want_ids, tokenizer, tlog) -> JSONResponse:
    inc = _Incremental(tokenizer, req.params.stop)
    ids: list[int] = []
    lps: list[dict] = []
    try:
        while True:
            ev = await events.get()
            if ev.token_id is not None:
                ids.append(ev.token_id)
                inc.add(ev.token_id)
                if req.params.logprobs:
                    lps.append(_logprob_entry(tokenizer, ev.token_id, ev.logprob, ev.top_logprobs))
            if ev.finish_reason:
                break
    except asyncio.CancelledError:
        req.cancelled = True
        raise
    if ev.finish_reason == "error":
        return _error(500, f"generation failed: {ev.error}", "server_error")
    tlog.write(rid, req.prompt_ids, ids, ev.finish_reason, model)
    text = tokenizer.decode(ids, skip_special_tokens=True) if not inc.stopped else inc.text
    parsed = parse_output(text, tools_offered)
    finish = _finish(parsed.tool_calls, ev.finish_reason)
    message: dict[str, Any] = {"role": "assistant", "content": parsed.content or (None if parsed.tool_calls else "")}
    if parsed.tool_calls:
        message["tool_calls"] = parsed.tool_calls
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish,
                              "logprobs": {"content": lps} if req.params.logprobs else None}
    out: dict[str, Any] = {
        "id": rid, "object": "chat.completion", "created": int(time.time()), "model": model, "choices": [choice],
        "usage": {"prompt_tokens": len(req.prompt_ids), "completion_tokens": len(ids),
                  "total_tokens": len(req.prompt_ids) + len(ids)},
    }
    if want_ids:
        out["prompt_token_ids"] = list(req.prompt_ids)
        choice["token_ids"] = ids
    return JSONResponse(out)


def _finish(tool_calls: list, engine_finish: str | None) -> str | None:
    """OpenAI's and vLLM's finish reason: "length" whenever generation was cut at the token limit (also in the
    middle of a call's arguments, which then cannot be trusted), "tool_calls" when it stopped after calls."""
    if engine_finish == "length":
        return "length"
    return "tool_calls" if tool_calls else engine_finish


# What this server does not do, refused with a 400 rather than silently ignored (an agent asking for a forced
# tool call or a JSON-only answer would otherwise get free text and never know).
def unsupported_fields(body: dict) -> tuple[str, str] | None:
    """(param, message) for a request field this server cannot honour; None when it can serve the request."""
    choice = body.get("tool_choice")
    if choice is not None and choice not in ("auto", "none"):
        shown = choice if isinstance(choice, str) else json.dumps(choice)[:100]
        return "tool_choice", (f"tool_choice {shown!s} is not supported by this server (it lets the model choose: "
                               "'auto', or 'none')")
    fmt = body.get("response_format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        return "response_format", "response_format is not supported by this server (only {'type': 'text'})"
    return None


def _sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


async def _stream(req, events, rid, model, tools_offered, want_ids, include_usage, tokenizer, tlog) -> AsyncIterator[str]:  # noqa: C901 (one streamed answer, chunk by chunk)
    created = int(time.time())

    def chunk(delta: dict, finish: str | None = None, **extra: Any) -> dict:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, **extra}
        return {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [choice]}

    inc = _Incremental(tokenizer, req.params.stop)
    sent = 0
    ids: list[int] = []
    first = chunk({"role": "assistant", "content": ""})
    if want_ids:
        first["prompt_token_ids"] = list(req.prompt_ids)
    try:
        yield _sse(first)
        while True:
            ev = await events.get()
            new_ids, lps = [], []
            if ev.token_id is not None:
                ids.append(ev.token_id)
                new_ids.append(ev.token_id)
                if not inc.stopped:
                    inc.add(ev.token_id)
                if req.params.logprobs:
                    lps.append(_logprob_entry(tokenizer, ev.token_id, ev.logprob, ev.top_logprobs))
            # Collect whatever else is already queued into the same chunk.
            while not ev.finish_reason and not events.empty():
                ev = events.get_nowait()
                if ev.token_id is not None:
                    ids.append(ev.token_id)
                    new_ids.append(ev.token_id)
                    if not inc.stopped:
                        inc.add(ev.token_id)
                    if req.params.logprobs:
                        lps.append(_logprob_entry(tokenizer, ev.token_id, ev.logprob, ev.top_logprobs))
            safe = safe_content_prefix(inc.text) if tools_offered else len(inc.text)
            extra: dict[str, Any] = {}
            if want_ids and new_ids:
                extra["token_ids"] = new_ids
            if lps:
                extra["logprobs"] = {"content": lps}
            if safe > sent or extra:
                yield _sse(chunk({"content": inc.text[sent:safe]} if safe > sent else {}, **extra))
                sent = max(sent, safe)
            if ev.finish_reason:
                break
        if ev.finish_reason == "error":
            yield _sse({"error": {"message": f"generation failed: {ev.error}", "type": "server_error", "code": 500}})
            yield "data: [DONE]\n\n"
            return
        tlog.write(rid, req.prompt_ids, ids, ev.finish_reason, model)
        parsed = parse_output(inc.text, tools_offered)
        if parsed.tool_calls:
            if len(parsed.content) > sent:
                yield _sse(chunk({"content": parsed.content[sent:]}))
            for i, call in enumerate(parsed.tool_calls):
                fn = call["function"]
                yield _sse(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                  "function": {"name": fn["name"], "arguments": ""}}]}))
                yield _sse(chunk({"tool_calls": [{"index": i, "function": {"arguments": fn["arguments"]}}]}))
            finish = _finish(parsed.tool_calls, ev.finish_reason)
        else:
            if len(inc.text) > sent:
                yield _sse(chunk({"content": inc.text[sent:]}))
            finish = ev.finish_reason
        yield _sse(chunk({}, finish))
        if include_usage:
            usage = {"prompt_tokens": len(req.prompt_ids), "completion_tokens": len(ids),
                     "total_tokens": len(req.prompt_ids) + len(ids)}
            yield _sse({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                        "choices": [], "usage": usage})
        yield "data: [DONE]\n\n"
    except (asyncio.CancelledError, GeneratorExit):
        req.cancelled = True  # the client went away: stop generating for it
        raise
