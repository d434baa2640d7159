"""The gateway: an OpenAI-compatible proxy that records every model call as a step in a data pool.

Agents reach it at a base URL that names their trajectory and GRPO group, `/t/{trajectory}/g/{group}/v1`.

Two modes, because the callers differ in whom they can be trusted with:

- **Standalone** (`clawgym gateway`, or no `route_secret`): the callers are the user's own agents. The ids may
  also come at plain `/v1`, in the model name (`model__trajectory` or `model__trajectory__group`, as ClawGym's
  proxy does for agents that cannot change the URL path) or in `X-Clawgym-Trajectory` / `X-Clawgym-Group`
  headers; a call with no id at all is recorded under `_unassigned`, and the budget counts such calls as one
  trajectory of their own (a budget is a cap on everything that goes through, not only on the calls that name a
  trajectory). With a `token`, every call needs it.
- **Rollout** (`route_secret` set; what `clawgym rollout`/`eval`/`train rl` run): the callers are agents in
  sandboxes that must not be trusted with each other's trajectories. A call is taken only on a trajectory route
  and only with that route's key, `trajectory_key(route_secret, trajectory, group)` (see
  clawgym.gateway.routes), which only the episode's own agent is given; the gateway's `token`, held by the
  host's and the workers' processes and never by a sandbox, is also good for any route. Without a route a call
  is a 403 (`trajectory_route_required`), with a missing or wrong key a 401; the ids come from the route alone
  (headers and model names are not read for them), so no sandbox can write steps into another trajectory,
  spend its budget, or escape the budget by naming no trajectory.

`POST .../chat/completions` is forwarded to the upstream with `return_token_ids` and `logprobs` added, so the
step stores the engine's own token ids; the agent gets the upstream's answer with those added fields removed
again (unless it asked for them), streamed chunk by chunk when it streams. An upstream that refuses the fields
(OpenAI does) is asked again without them, once, and from then on the gateway re-tokenizes with the model's
chat template (when it has a tokenizer) and marks the step `token_source: retokenized`. A chat request whose
fields the gateway reads have the wrong type (`stream_options: "x"`, `messages: {}`) is a 400 naming the field.

Only the routes an agent needs are forwarded, with the host's upstream key: `POST completions` and `POST
responses` as they are (not recorded as steps, but counted against the budget), `GET models`. Any other route
(`load_lora_adapter`, `files`, ...) is a 404 and another method on an allowed route a 405, both OpenAI-style
errors that never reach the upstream (see clawgym.gateway.routes).

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

Tokens and keys are compared in constant time, the `Bearer` scheme in any case; a request body over
`max_body_bytes` (16 MiB by default) is refused with a 413 while it is being read, before anything of it is stored
or forwarded (see clawgym.httpguard). The server's connection limits (per sandbox, in all, idle) are in
clawgym.gateway.connections.

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
from clawgym.gateway.routes import ALLOWED, Route, allowed_methods, parse_route, trajectory_key, upstream_path
from clawgym.gateway.sampling import SamplingOverride
from clawgym.llm.endpoint import openai_base_url
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
            except BaseException as exc:  # noqa: BLE001 (the agent must hear that its step was not kept, whatever failed)
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
        route_secret: str | bytes | None = None,
    ):
        """`budget`: per-trajectory limits (model calls, tokens, wall time); a trajectory past them has its
        calls refused (see clawgym.gateway.budget); calls without a trajectory id share one of their own.
        `max_body_bytes`: larger request bodies are answered 413, neither stored nor forwarded (None: no limit).
        `sampling`: parameters set on every forwarded chat request, over the agent's (see the module docstring).
        `reader_token`: enables `GET /clawgym/trajectory/<id>` for callers with this token (not the agents').
        `route_secret`: the gateway serves a rollout: every call must go to a trajectory route with that route's
        key (`trajectory_key(route_secret, trajectory, group)`) or the gateway's `token` (see the module docstring)."""
        self.upstream = openai_base_url(upstream)  # the one rule of every client: a bare host:port gets /v1
        self.pool = pool
        self.token = token
        self.reader_token = reader_token
        self.route_secret = route_secret
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
                      "body_refused": 0, "not_recorded": 0, "route_refused": 0, "api_refused": 0,
                      "invalid_requests": 0}
        self.connections: Any = None  # the server's ConnectionGuard, when it has one (its counts go in /health)

    # -- plumbing -------------------------------------------------------------------------------------------
    def session(self) -> aiohttp.ClientSession:
        # aiohttp rather than httpx for the upstream: httpx's connection pool scans every connection on every
        # request and capped the gateway at a few hundred requests/s (profiled); aiohttp's does not.
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=1024, limit_per_host=1024, ttl_dns_cache=300),
                timeout=aiohttp.ClientTimeout(total=self.timeout, connect=30.0),
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    def _upstream_auth(self) -> dict[str, str]:
        """The host's upstream key, as a header: added per request, and only to the allowed routes (see
        clawgym.gateway.routes), never as a default of the session."""
        return {"Authorization": f"Bearer {self.upstream_key}"} if self.upstream_key else {}

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
            conns = {} if self.connections is None else {"connections": {"open": self.connections.open,
                                                                         **self.connections.stats}}
            await _respond(send, 200, dumps({"status": "ok", "upstream": self.upstream, **self.stats, **conns}))
            return
        if path.startswith(TRAJECTORY_PATH) and self.reader_token:  # the reader's token, never the agents'
            if method != "GET" or not httpguard.token_ok(headers.get("authorization"), self.reader_token):
                await _respond(send, 401, dumps({"error": {"message": "missing or wrong reader token", "code": 401}}),
                               extra=[(b"www-authenticate", b"Bearer")])
                return
            await self._trajectory(unquote(path[len(TRAJECTORY_PATH):]), send)
            return
        route = parse_route(scope.get("raw_path") or path)
        if route.api is None:
            await _respond(send, 404, _error(404, f"no route for {path}", "not_found"))
            return
        refused = self._authorize(route, headers.get("authorization"))
        if refused is not None:
            await _respond(send, *refused)
            return
        methods = allowed_methods(route.api)
        if methods is None or method not in methods:
            await self._refuse_api(route.api, method, methods, send)
            return
        try:
            body = await httpguard.read_body(scope, receive, self.max_body_bytes)
        except httpguard.BodyTooLarge as exc:
            self.stats["body_refused"] += 1
            await _respond(send, 413, httpguard.too_large_body(exc))
            return
        except httpguard.ClientDisconnected:
            return
        trajectory, group = route.trajectory, route.group
        if self.route_secret is None:  # standalone: ids may also ride in headers (or, for chat, the model name)
            trajectory = trajectory or headers.get("x-clawgym-trajectory") or None
            group = group or headers.get("x-clawgym-group") or None
        if route.api == ("chat", "completions"):
            await self._chat(body, trajectory, group, send)
        else:
            await self._passthrough(method, route.api, scope.get("query_string", b""), body, headers,
                                    trajectory or UNASSIGNED, send)

    def route_key(self, trajectory: str, group: str | None = None) -> str | None:
        """The key an agent must send on the route of (`trajectory`, `group`); None when routes need no key."""
        return None if self.route_secret is None else trajectory_key(self.route_secret, trajectory, group)

    def _authorize(self, route: Route, authorization: str | None) -> tuple[int, bytes, str, list] | None:
        """None when the caller may use `route`, else the refusal to answer (status, body, type, headers).

        Standalone: the gateway's token, when it has one. A rollout (`route_secret` set): a trajectory route
        only, with that route's key, or the gateway's own token (which the host's and the workers' processes hold,
        never a sandbox)."""
        challenge = [(b"www-authenticate", b"Bearer")]
        if self.route_secret is None:
            if self.token and not httpguard.token_ok(authorization, self.token):
                return 401, _error(401, "missing or wrong bearer token", "authentication_error"), "application/json", \
                    challenge
            return None
        if route.trajectory is None:
            self.stats["route_refused"] += 1
            return 403, _error(403, "this gateway serves a rollout: model calls must go to a trajectory route, "
                                    "/t/<trajectory>/g/<group>/v1, with that trajectory's key",
                               "trajectory_route_required"), "application/json", []
        key = trajectory_key(self.route_secret, route.trajectory, route.group)
        if httpguard.token_ok(authorization, key) or (self.token and httpguard.token_ok(authorization, self.token)):
            return None
        self.stats["route_refused"] += 1
        return 401, _error(401, f"missing or wrong key for the route of trajectory {route.trajectory!r}",
                           "authentication_error"), "application/json", challenge

    async def _refuse_api(self, api: tuple[str, ...], method: str, methods: tuple[str, ...] | None,
                          send: Any) -> None:
        """A 404 for a route the gateway does not serve, a 405 for another method on one it serves: neither
        reaches the upstream (which would get it with the host's key)."""
        self.stats["api_refused"] += 1
        where = "/v1" + upstream_path(api) if api else "/v1"
        if methods is None:
            allowed = ", ".join(f"{' '.join(m)} /v1{upstream_path(a)}" for a, m in ALLOWED.items())
            await _respond(send, 404, _error(404, f"the gateway does not serve {where} (it serves {allowed})",
                                             "not_found"))
            return
        await _respond(send, 405, _error(405, f"{method} is not allowed on {where} (only {', '.join(methods)})",
                                         "method_not_allowed"), extra=[(b"allow", ", ".join(methods).encode())])

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

    async def _passthrough(self, method: str, api: tuple[str, ...], query: bytes, body: bytes, headers: dict,
                           trajectory: str, send: Any) -> None:
        """An allowed route other than chat (completions, responses, models), forwarded as it is and not recorded
        as a step; a POST is a model call, so it is admitted against (and charged to) the trajectory's budget."""
        call = method == "POST"
        if call and self.budgets.budget:
            refused = self.budgets.admit(trajectory)
            if refused is not None:
                self.stats["budget_refused"] += 1
                await _respond(send, 400, _error(400, refused, BUDGET_ERROR_TYPE, code=BUDGET_ERROR_TYPE))
                return
        url = self.upstream + upstream_path(api) + (("?" + query.decode("latin-1")) if query else "")
        fwd = {k: v for k, v in headers.items() if k in ("content-type", "accept")}
        try:
            async with self.session().request(method, url, data=body or None,
                                              headers={**fwd, **self._upstream_auth()}) as r:
                content = await r.read()
                await _respond(send, r.status, content, r.headers.get("content-type", "application/json"))
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            await _respond(send, 502, _error(502, f"upstream unreachable: {exc!r}", "upstream_error"))
            return
        if call and self.budgets.budget and r.status == 200:
            self.budgets.charge(trajectory, _usage_of(content))

    async def _chat(self, raw: bytes, trajectory: str | None, group: str | None, send: Any) -> None:
        self.stats["requests"] += 1
        try:
            body = loads(raw)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            await _respond(send, 400, _error(400, "the request body is not a JSON object"))
            return
        invalid = chat_body_error(body)
        if invalid is not None:
            self.stats["invalid_requests"] += 1
            await _respond(send, 400, _error(400, invalid[1], param=invalid[0]))
            return
        model = body.get("model") or ""
        if "__" in model and self.route_secret is None:
            # ClawGym's convention (standalone only): the trajectory (and group) ride in the model name
            parts = model.split("__")
            model, trajectory = parts[0], trajectory or parts[1] or None
            if len(parts) > 2:
                group = group or parts[2] or None
            body["model"] = model
        trajectory = trajectory or UNASSIGNED  # (a rollout's gateway has refused calls without a trajectory)
        group = group or trajectory
        if self.budgets.budget:  # unassigned calls too: they share a budget of their own, `_unassigned`
            refused = self.budgets.admit(trajectory)
            if refused is not None:
                self.stats["budget_refused"] += 1
                await _respond(send, 400, _error(400, refused, BUDGET_ERROR_TYPE, code=BUDGET_ERROR_TYPE))
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
                                      headers={"Content-Type": "application/json", **self._upstream_auth()})
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
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except ValueError:
            await self._record_error(meta, "upstream body is not a JSON object")
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
                if not isinstance(chunk, dict):
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
            await self._break_stream(meta, f"upstream stream broke: {type(exc).__name__}: {exc}", send)
            return
        finally:
            r.release()
        if asm.finish_reason is None:
            # an upstream that closed its stream cleanly but never finished the answer (or sent nothing): a
            # failed call, never a completed step with whatever text came before
            await self._break_stream(meta, "upstream stream ended without a finish reason"
                                     + ("" if done_seen else " or [DONE]"), send)
            return
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
        """One step per choice (a request with n > 1 is n samples of the same prompt: each is a step of the
        trajectory, the first at the index reserved for the call, the others at the next ones); the budget is
        charged once, with the response's usage."""
        choices = asm.choices()
        for k, choice in enumerate(choices):
            step_meta = meta if k == 0 else {**meta, "index": self._step_index(meta["trajectory"])}
            await self._record_choice(step_meta, choice, asm.usage, latency, ttft,
                                      {"choice": k, "choices": len(choices)} if len(choices) > 1 else None)
        if self.budgets.budget:
            self.budgets.charge(meta["trajectory"], asm.usage)

    async def _record_choice(self, meta: dict, asm: Assembled, usage: dict, latency: float, ttft: float | None,
                             of_n: dict | None) -> None:
        response = asm.response_record()
        if of_n is not None:
            response["choice"] = of_n
        prompt_ids, response_ids, check = asm.prompt_ids, asm.response_ids, {}
        source = "upstream" if prompt_ids is not None and response_ids is not None else "none"
        if source == "upstream":
            check = {"prompt_tokens_reported": usage.get("prompt_tokens"), "prompt_ids": len(prompt_ids),
                     "completion_tokens_reported": usage.get("completion_tokens"),
                     "response_ids": len(response_ids)}
            check["match"] = (check["prompt_tokens_reported"] in (None, len(prompt_ids))
                              and (of_n is not None or check["completion_tokens_reported"] in (None, len(response_ids))))
        elif self.tokenizer is not None:
            req = meta["request"]
            prompt_ids, response_ids, check = await asyncio.to_thread(
                retokenize, self.tokenizer, req["messages"], req["tools"], response,
                usage if of_n is None else {"prompt_tokens": usage.get("prompt_tokens")})
            source = "retokenized"
            self.stats["retokenized"] += 1
        step = self._make_step(
            meta, response=response, prompt_ids=prompt_ids, response_ids=response_ids,
            logprobs=asm.logprobs if source == "upstream" else None, token_source=source, token_check=check,
            usage=usage, timings={"started_at": meta["started"], "latency_s": round(latency, 6),
                                  "ttft_s": None if ttft is None else round(ttft, 6)},
        )
        await self._writer.submit(step)
        self.stats["steps"] += 1

    async def _record_error(self, meta: dict, message: str) -> None:
        self.stats["upstream_errors"] += 1
        step = self._make_step(
            meta, response={"id": None, "content": None, "reasoning": None, "tool_calls": [], "finish_reason": None},
            token_source="none", status="error", error=message,
            timings={"started_at": meta["started"], "latency_s": round(time.monotonic() - meta["t0"], 6)},
        )
        try:
            await self._writer.submit(step)
        except Exception:  # noqa: BLE001, S110 (a step not kept must not hide the upstream error the client is told)
            pass

    async def _break_stream(self, meta: dict, message: str, send: Any) -> None:
        """End a stream that has started but failed: recorded as an error step, and told to the client as an
        OpenAI error event with no [DONE] after it (the openai client raises on it; others see the stream end
        without [DONE] or a finish reason), so that no client takes the partial answer for a finished one."""
        await self._record_error(meta, message)
        event = dumps({"error": {"message": message, "type": "upstream_error", "code": 502}})
        await send({"type": "http.response.body", "body": b"data: " + event + b"\n\n", "more_body": False})

    async def _fail(self, meta: dict, message: str, status: int, send: Any) -> None:
        await self._record_error(meta, message)
        await _respond(send, status, dumps({"error": {"message": message, "type": "upstream_error", "code": status}}))


def _error(status: int, message: str, kind: str = "invalid_request_error", *, param: str | None = None,
           code: int | str | None = None) -> bytes:
    """An OpenAI-style error body."""
    return dumps({"error": {"message": message, "type": kind, "param": param,
                            "code": status if code is None else code}})


# the chat request's fields the gateway itself reads: (JSON types allowed, what the error calls them)
_CHAT_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "model": ((str,), "a string"),
    "messages": ((list,), "an array of message objects"),
    "tools": ((list,), "an array of tool objects"),
    "stream": ((bool,), "a boolean"),
    "stream_options": ((dict,), "an object"),
    "return_token_ids": ((bool,), "a boolean"),
    "logprobs": ((bool,), "a boolean"),
}


def chat_body_error(body: dict) -> tuple[str, str] | None:
    """(param, message) when a field of a chat request that the gateway reads has the wrong type (a 400: it is the
    caller's mistake, never the gateway's 500); None when they are all usable. null counts as absent."""
    for name, (types, what) in _CHAT_FIELDS.items():
        value = body.get(name)
        if value is not None and not isinstance(value, types):
            return name, f"'{name}' must be {what}, not {type(value).__name__}: {_short_repr(value)}"
    for name in ("messages", "tools"):
        items = body.get(name) or []
        bad = next((i for i, item in enumerate(items) if not isinstance(item, dict)), None)
        if bad is not None:
            return f"{name}.{bad}", f"'{name}[{bad}]' must be an object, not {type(items[bad]).__name__}"
    include = (body.get("stream_options") or {}).get("include_usage")
    if include is not None and not isinstance(include, bool):
        return "stream_options.include_usage", "'stream_options.include_usage' must be a boolean"
    return None


def _short_repr(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[:n] + "..."


def _usage_of(content: bytes) -> dict:
    """The `usage` of an upstream's JSON answer ({} when it has none or is not JSON)."""
    try:
        data = loads(content)
    except ValueError:
        return {}
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return {}
    return {k: v for k, v in usage.items() if k in ("prompt_tokens", "completion_tokens", "total_tokens",
                                                    "input_tokens", "output_tokens") and isinstance(v, int)}


async def _respond(send: Any, status: int, body: bytes, ctype: str = "application/json",
                   extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode()),
                            *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


def new_token() -> str:
    return secrets.token_urlsafe(24)
