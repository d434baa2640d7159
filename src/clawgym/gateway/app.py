"""The gateway: an OpenAI-compatible proxy that records every model call as a step in a data pool.

Agents reach it at a base URL that names their trajectory and GRPO group, `/t/{trajectory}/g/{group}/v1`, or at
plain `/v1` with the ids in the model name (`model__trajectory` or `model__trajectory__group`, as ClawGym's proxy
does for agents that cannot change the URL path), or in `X-Clawgym-Trajectory` / `X-Clawgym-Group` headers.

`POST .../chat/completions` is forwarded to the upstream with `return_token_ids` and `logprobs` added, so the
step stores the engine's own token ids; the agent gets the upstream's answer with those added fields removed
again (unless it asked for them), streamed chunk by chunk when it streams. An upstream that refuses the fields
(OpenAI does) is asked again without them, once, and from then on the gateway re-tokenizes with the model's
chat template (when it has a tokenizer) and marks the step `token_source: retokenized`. Every other `/v1/*`
request is passed through untouched.

Sampling overrides (`sampling=SamplingOverride(...)`, see clawgym.gateway.sampling): a black-box agent picks its
own request parameters, so a run that needs its own (the rollouts of `clawgym train rl --agent openclaw`: the
run's temperature, a seed per trajectory and call) has the gateway set them on every chat request it forwards,
over whatever the agent sent; only the fields that are set are touched, and the token fields above are added
as always. The step keeps the agent's request as it was (`request.params`) and what the gateway changed in
`request.sampling_override`, so the parameters the engine sampled with are `{**params, **sampling_override}`.
Without an override the body is forwarded as the agent sent it.

A step is written to the pool before the response's last byte (the `[DONE]` of a stream) reaches the agent, so
a response an agent has completely received is never lost, even to `kill -9`. Pool writes go through one writer
thread that commits what has queued up together.

`GET /clawgym/trajectory/<id>` answers one trajectory's steps (as the pool reads them back) and budget spend:
what a black-box agent's episode on another node joins to its own transcript (see clawgym.agent.openclaw.remote).
It exists only when the gateway has a reader token, and answers only that token: never the agents' token, so an
agent cannot read other trajectories' calls (a sibling sample's answers) through it.

Agents authenticate with `Authorization: Bearer TOKEN` when the gateway has a token (compared in constant time,
the scheme in any case); a request body over `max_body_bytes` (16 MiB by default) is refused with a 413 while it
is being read, before anything of it is stored or forwarded (see clawgym.httpguard).

It is a bare ASGI application (no framework routing) and talks to the upstream with aiohttp, because it sits
on the hot path of every model call.
"""

from __future__ import annotations

import asyncio
import queue
import secrets
import threading
import time
from datetime import datetime, timezone
from typing import Any
from urllib.parse import unquote

import aiohttp

from clawgym import httpguard
from clawgym.gateway.budget import BUDGET_ERROR_TYPE, Budget, BudgetBook
from clawgym.gateway.capture import Assembled, dumps, loads, retokenize, strip_added
from clawgym.gateway.sampling import SamplingOverride
from clawgym.pool.store import PoolClosed

UNASSIGNED = "_unassigned"
# GET TRAJECTORY_PATH + <trajectory id, url-quoted>: that trajectory's steps and budget spend (token-guarded)
TRAJECTORY_PATH = "/clawgym/trajectory/"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class PoolWriter:
    """One thread that appends steps to the pool; callers await the write of their own step."""

    def __init__(self, pool: Any):
        self.pool = pool
        self._q: queue.Queue = queue.Queue()
        self.closed = False
        self._thread = threading.Thread(target=self._run, name="clawgym-pool-writer", daemon=True)
        self._thread.start()

    def submit(self, step: Any) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if self.closed:  # nobody would write it: say so now instead of leaving the caller waiting
            fut.set_exception(PoolClosed("the gateway is shutting down: its pool is closed, the step was not kept"))
            return fut
        self._q.put((step, loop, fut))
        return fut

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                self._refuse_rest()
                return
            batch = [item]
            while len(batch) < 512:
                try:
                    nxt = self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._q.put(None)
                    break
                batch.append(nxt)
            error: BaseException | None = None
            try:
                steps = [s for s, _, _ in batch]
                if hasattr(self.pool, "append_steps"):
                    self.pool.append_steps(steps)
                else:
                    for s in steps:
                        self.pool.append_step(s)
            except BaseException as exc:  # the agent must hear that its step was not kept
                error = exc
            for _, loop, fut in batch:
                loop.call_soon_threadsafe(_settle, fut, error)

    def _refuse_rest(self) -> None:
        """Steps submitted while the writer was closing: their callers hear that they were not kept."""
        error = PoolClosed("the gateway is shutting down: its pool is closed, the step was not kept")
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                _, loop, fut = item
                loop.call_soon_threadsafe(_settle, fut, error)

    def close(self) -> None:
        self.closed = True
        self._q.put(None)
        self._thread.join(timeout=30)


CLOSED_BODY = dumps({"error": {"message": "the gateway is shutting down (its pool is closed): the call was not "
                                          "recorded", "type": "gateway_closed", "code": 503}})


def _settle(fut: asyncio.Future, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)


class Gateway:
    def __init__(
        self,
        upstream: str,
        pool: Any,
        *,
        token: str | None = None,
        upstream_key: str | None = None,
        tokenizer: Any = None,
        request_token_ids: bool = True,
        policy_version: str | None = None,
        timeout: float = 900.0,
        budget: Budget | None = None,
        max_body_bytes: int | None = httpguard.DEFAULT_MAX_BODY_BYTES,
        sampling: SamplingOverride | None = None,
        reader_token: str | None = None,
    ):
        """`budget`: per-trajectory limits (model calls, tokens, wall time); a trajectory past them has its
        calls refused (see clawgym.gateway.budget). Calls without a trajectory id are not budgeted.
        `max_body_bytes`: larger request bodies are answered 413, neither stored nor forwarded (None: no limit).
        `sampling`: parameters set on every forwarded chat request, over the agent's (see the module docstring).
        `reader_token`: enables `GET /clawgym/trajectory/<id>` for callers with this token (not the agents')."""
        self.upstream = upstream.rstrip("/")
        if not self.upstream.endswith("/v1"):
            self.upstream += "/v1"
        self.pool = pool
        self.token = token
        self.reader_token = reader_token
        self.upstream_key = upstream_key
        self.tokenizer = tokenizer
        self.upstream_token_ids = request_token_ids  # cleared when the upstream refuses the fields
        self.policy_version = policy_version
        self.timeout = timeout
        self.max_body_bytes = max_body_bytes
        self.sampling = sampling if sampling else None
        self._session: aiohttp.ClientSession | None = None
        self._writer = PoolWriter(pool)
        self._next_index: dict[str, int] = {}
        self._index_lock = threading.Lock()
        self.budgets = BudgetBook(budget)
        self.stats = {"requests": 0, "steps": 0, "upstream_errors": 0, "retokenized": 0, "budget_refused": 0,
                      "body_refused": 0, "not_recorded": 0}

    # -- plumbing -------------------------------------------------------------------------------------------
    def session(self) -> aiohttp.ClientSession:
        # aiohttp rather than httpx for the upstream: httpx's connection pool scans every connection on every
        # request and capped the gateway at a few hundred requests/s (profiled); aiohttp's does not.
        if self._session is None:
            headers = {"Authorization": f"Bearer {self.upstream_key}"} if self.upstream_key else {}
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=1024, limit_per_host=1024, ttl_dns_cache=300),
                timeout=aiohttp.ClientTimeout(total=self.timeout, connect=30.0), headers=headers,
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._writer.close()

    def _step_index(self, trajectory_id: str) -> int:
        with self._index_lock:
            if trajectory_id not in self._next_index:
                self._next_index[trajectory_id] = self.pool.next_step_index(trajectory_id)
            i = self._next_index[trajectory_id]
            self._next_index[trajectory_id] = i + 1
            return i

    # -- ASGI -----------------------------------------------------------------------------------------------
    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await self.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        method: str = scope["method"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if path == "/health":
            await _respond(send, 200, dumps({"status": "ok", "upstream": self.upstream, **self.stats}))
            return
        if path.startswith(TRAJECTORY_PATH) and self.reader_token:  # the reader's token, never the agents'
            if method != "GET" or not httpguard.token_ok(headers.get("authorization"), self.reader_token):
                await _respond(send, 401, dumps({"error": {"message": "missing or wrong reader token", "code": 401}}),
                               extra=[(b"www-authenticate", b"Bearer")])
                return
            await self._trajectory(unquote(path[len(TRAJECTORY_PATH):]), send)
            return
        if self.token and not httpguard.token_ok(headers.get("authorization"), self.token):
            await _respond(send, 401, dumps({"error": {"message": "missing or wrong bearer token", "code": 401}}),
                           extra=[(b"www-authenticate", b"Bearer")])
            return
        trajectory, group, rest = _route(path)
        if rest is None:
            await _respond(send, 404, dumps({"error": {"message": f"no route for {path}", "code": 404}}))
            return
        try:
            body = await httpguard.read_body(scope, receive, self.max_body_bytes)
        except httpguard.BodyTooLarge as exc:
            self.stats["body_refused"] += 1
            await _respond(send, 413, httpguard.too_large_body(exc))
            return
        except httpguard.ClientDisconnected:
            return
        trajectory = trajectory or headers.get("x-clawgym-trajectory")
        group = group or headers.get("x-clawgym-group")
        if method == "POST" and rest == "/chat/completions":
            await self._chat(body, trajectory, group, send)
        else:
            await self._passthrough(method, rest, scope.get("query_string", b""), body, headers, send)

    async def _trajectory(self, trajectory: str, send: Any) -> None:
        """What the gateway holds of one trajectory: its steps as the pool has them and its budget spend (for an
        agent on a remote node: what a local one reads from the pool and the budget book directly)."""
        try:
            steps = await asyncio.to_thread(self.pool.steps, trajectory_id=trajectory)
        except Exception as exc:  # noqa: BLE001 - the caller gets the reason
            await _respond(send, 500, dumps({"error": {"message": f"cannot read the pool: {exc}", "code": 500}}))
            return
        await _respond(send, 200, dumps({"steps": [s.model_dump(mode="json") for s in steps],
                                         "spend": self.budgets.spend(trajectory)}))

    async def _passthrough(self, method: str, rest: str, query: bytes, body: bytes, headers: dict, send: Any) -> None:
        url = self.upstream + rest + (("?" + query.decode()) if query else "")
        fwd = {k: v for k, v in headers.items() if k in ("content-type", "accept")}
        try:
            async with self.session().request(method, url, data=body or None, headers=fwd) as r:
                content = await r.read()
                await _respond(send, r.status, content, r.headers.get("content-type", "application/json"))
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            await _respond(send, 502, dumps({"error": {"message": f"upstream unreachable: {exc!r}", "code": 502}}))

    async def _chat(self, raw: bytes, trajectory: str | None, group: str | None, send: Any) -> None:
        self.stats["requests"] += 1
        try:
            body = loads(raw)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            await _respond(send, 400, dumps({"error": {"message": "the request body is not a JSON object", "code": 400}}))
            return
        model = str(body.get("model") or "")
        if "__" in model:  # ClawGym's convention: the trajectory (and group) ride in the model name
            parts = model.split("__")
            model, trajectory = parts[0], trajectory or parts[1]
            if len(parts) > 2:
                group = group or parts[2]
            body["model"] = model
        trajectory = trajectory or UNASSIGNED
        group = group or trajectory
        if self.budgets.budget and trajectory != UNASSIGNED:
            refused = self.budgets.admit(trajectory)
            if refused is not None:
                self.stats["budget_refused"] += 1
                await _respond(send, 400, dumps({"error": {"message": refused, "type": BUDGET_ERROR_TYPE,
                                                           "code": BUDGET_ERROR_TYPE}}))
                return
        asked = {"return_token_ids": bool(body.get("return_token_ids")), "logprobs": bool(body.get("logprobs"))}
        stream = bool(body.get("stream"))
        asked_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        request_record = {
            "messages": body.get("messages") or [], "tools": body.get("tools"),
            "params": {k: v for k, v in body.items() if k not in ("messages", "tools")},
        }
        try:
            index = self._step_index(trajectory)
        except PoolClosed:
            await _respond(send, 503, CLOSED_BODY)
            return
        started, t0 = _now(), time.monotonic()
        fwd = dict(body)
        if self.sampling is not None:
            override = self.sampling.fields(trajectory, index)
            fwd.update(override)
            request_record["sampling_override"] = override
        if self.upstream_token_ids:
            fwd["return_token_ids"] = True
            fwd["logprobs"] = True
        if stream:
            fwd["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        step_meta = dict(trajectory=trajectory, group=group, index=index, model=model, request=request_record,
                         started=started, t0=t0, stream=stream)
        if stream:
            await self._chat_stream(fwd, asked, asked_usage, step_meta, send)
        else:
            await self._chat_full(fwd, asked, step_meta, send)

    async def _post(self, fwd: dict) -> aiohttp.ClientResponse:
        """POST to the upstream (the caller releases the response); if it refuses the token fields we added,
        once more without them."""
        r = await self.session().post(self.upstream + "/chat/completions", data=dumps(fwd),
                                      headers={"Content-Type": "application/json"})
        if r.status == 400 and fwd.get("return_token_ids") and self.upstream_token_ids:
            text = (await r.read()).decode("utf-8", "replace")
            if "return_token_ids" in text or "logprobs" in text or "nrecognized" in text:
                r.release()
                self.upstream_token_ids = False
                fwd = {k: v for k, v in fwd.items() if k not in ("return_token_ids", "logprobs")}
                return await self._post(fwd)
        return r

    async def _chat_full(self, fwd: dict, asked: dict, meta: dict, send: Any) -> None:
        try:
            r = await self._post(fwd)
            try:
                content = await r.read()
            finally:
                r.release()
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            await self._fail(meta, f"upstream unreachable: {type(exc).__name__}: {exc}", 502, send)
            return
        if r.status != 200:
            await self._record_error(meta, f"upstream HTTP {r.status}: {content[:500]!r}")
            await _respond(send, r.status, content, r.headers.get("content-type", "application/json"))
            return
        try:
            data = loads(content)
        except ValueError:
            await self._record_error(meta, "upstream body is not JSON")
            await _respond(send, 502, dumps({"error": {"message": "the upstream answered with a body that is not JSON",
                                                       "code": 502}}))
            return
        asm = Assembled()
        asm.add_full(data)
        latency = time.monotonic() - meta["t0"]
        try:
            await self._record(meta, asm, latency, None)
        except PoolClosed:
            self.stats["not_recorded"] += 1
            await _respond(send, 503, CLOSED_BODY)  # an answer that is not in the pool must not count
            return
        await _respond(send, 200, dumps(strip_added(data, asked, chunk=False)))

    async def _chat_stream(self, fwd: dict, asked: dict, asked_usage: bool, meta: dict, send: Any) -> None:
        try:
            r = await self._post(fwd)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            await self._fail(meta, f"upstream unreachable: {type(exc).__name__}: {exc}", 502, send)
            return
        if r.status != 200:
            try:
                content = await r.read()
            finally:
                r.release()
            await self._record_error(meta, f"upstream HTTP {r.status}: {content[:500]!r}")
            await _respond(send, r.status, content, r.headers.get("content-type", "application/json"))
            return
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        asm = Assembled()
        ttft = None
        done_seen = False
        try:
            async for raw_line in r.content:
                line = raw_line.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    done_seen = True
                    break
                try:
                    chunk = loads(payload)
                except ValueError:
                    continue
                asm.add_chunk(chunk)
                if ttft is None and any((c.get("delta") or {}).get("content") or (c.get("delta") or {}).get("tool_calls")
                                        for c in chunk.get("choices") or []):
                    ttft = time.monotonic() - meta["t0"]
                if not chunk.get("choices") and chunk.get("usage") and not asked_usage:
                    continue  # the usage chunk we asked for, not the agent
                if not asked_usage:
                    chunk.pop("usage", None)
                await send({"type": "http.response.body", "body": b"data: " + dumps(strip_added(chunk, asked, True))
                            + b"\n\n", "more_body": True})
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            await self._record_error(meta, f"upstream stream broke: {type(exc).__name__}: {exc}")
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        finally:
            r.release()
        latency = time.monotonic() - meta["t0"]
        try:
            await self._record(meta, asm, latency, ttft)
        except PoolClosed:
            # the stream has started: end it without [DONE], so the client sees it cut short
            self.stats["not_recorded"] += 1
            done_seen = False
        finally:
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n" if done_seen else b"",
                        "more_body": False})

    # -- recording ------------------------------------------------------------------------------------------
    def _make_step(self, meta: dict, **fields: Any):
        from clawgym.pool.records import StepRecord

        return StepRecord(
            step_id=f"{meta['trajectory']}/{meta['index']}", trajectory_id=meta["trajectory"], group_id=meta["group"],
            step_index=meta["index"], model=meta["model"], policy_version=self.policy_version,
            request=meta["request"], stream=meta["stream"], created_at=_now(), **fields,
        )

    async def _record(self, meta: dict, asm: Assembled, latency: float, ttft: float | None) -> None:
        response = asm.response_record()
        prompt_ids, response_ids, check = asm.prompt_ids, asm.response_ids, {}
        source = "upstream" if prompt_ids is not None and response_ids is not None else "none"
        if source == "upstream":
            check = {"prompt_tokens_reported": asm.usage.get("prompt_tokens"), "prompt_ids": len(prompt_ids),
                     "completion_tokens_reported": asm.usage.get("completion_tokens"),
                     "response_ids": len(response_ids)}
            check["match"] = (check["prompt_tokens_reported"] in (None, len(prompt_ids))
                              and check["completion_tokens_reported"] in (None, len(response_ids)))
        elif self.tokenizer is not None:
            req = meta["request"]
            prompt_ids, response_ids, check = await asyncio.to_thread(
                retokenize, self.tokenizer, req["messages"], req["tools"], response, asm.usage)
            source = "retokenized"
            self.stats["retokenized"] += 1
        step = self._make_step(
            meta, response=response, prompt_ids=prompt_ids, response_ids=response_ids,
            logprobs=asm.logprobs if source == "upstream" else None, token_source=source, token_check=check,
            usage=asm.usage, timings={"started_at": meta["started"], "latency_s": round(latency, 6),
                                      "ttft_s": None if ttft is None else round(ttft, 6)},
        )
        await self._writer.submit(step)
        self.stats["steps"] += 1
        if self.budgets.budget and meta["trajectory"] != UNASSIGNED:
            self.budgets.charge(meta["trajectory"], asm.usage)

    async def _record_error(self, meta: dict, message: str) -> None:
        self.stats["upstream_errors"] += 1
        step = self._make_step(
            meta, response={"id": None, "content": None, "reasoning": None, "tool_calls": [], "finish_reason": None},
            token_source="none", status="error", error=message,
            timings={"started_at": meta["started"], "latency_s": round(time.monotonic() - meta["t0"], 6)},
        )
        try:
            await self._writer.submit(step)
        except Exception:
            pass

    async def _fail(self, meta: dict, message: str, status: int, send: Any) -> None:
        await self._record_error(meta, message)
        await _respond(send, status, dumps({"error": {"message": message, "type": "upstream_error", "code": status}}))


def _route(path: str) -> tuple[str | None, str | None, str | None]:
    """(trajectory, group, path after /v1) of a request path, or rest=None when it is not an API path."""
    trajectory = group = None
    if path.startswith("/t/"):
        parts = path.split("/")
        # ['', 't', TID, ('g', GID,) 'v1', ...]
        trajectory = unquote(parts[2]) if len(parts) > 2 else None
        i = 3
        if len(parts) > 4 and parts[3] == "g":
            group = unquote(parts[4])
            i = 5
        path = "/" + "/".join(parts[i:])
    if path == "/v1" or path.startswith("/v1/"):
        return trajectory, group, path[3:] or "/"
    return trajectory, group, None


async def _respond(send: Any, status: int, body: bytes, ctype: str = "application/json",
                   extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode()),
                            *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


def new_token() -> str:
    return secrets.token_urlsafe(24)
