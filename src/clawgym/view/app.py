"""The viewer's web app: a JSON API over the catalog of sources, the page (plain HTML/CSS/JS shipped in
``clawgym/view/static``) and a server-sent event stream that tells the page when a run or pool changed.

Security, since run and pool content is hostile (an agent wrote it) and the page may be reachable:

* bound to loopback, requests must name a loopback ``Host`` (no DNS rebinding); bound elsewhere, every request
  needs the token: ``Authorization: Bearer`` (compared in constant time by :mod:`clawgym.httpguard`), or the
  cookie the page gets from opening ``/?token=...`` once;
* writes (curation, export) are POSTs with a JSON body and the header ``X-Clawgym-View``, which a cross-site form
  cannot send without a CORS preflight this app never answers; bodies are capped by
  :class:`clawgym.httpguard.BodyLimitMiddleware`;
* the page renders data with ``textContent`` only, under a Content-Security-Policy that allows no inline script;
  workspace files are returned as JSON strings, never served as documents; exports are written only into the
  viewer's export directory under a plain file name.

Errors the user can fix (a missing run, a bad line, a pool without index) are answered as
``{"error": "one line"}`` with 4xx; anything else as a one-line 500, never a stack trace.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response, StreamingResponse

from clawgym import httpguard
from clawgym.core.errors import ClawgymError
from clawgym.pool import PoolError
from clawgym.pool.credit import ALGOS, CREDITS
from clawgym.rollout.summary import Price, summarize_digests
from clawgym.view.sources import Catalog, PoolSource, RLSource, RunSource, ViewSourceError
from clawgym.view.workspace import WorkspaceViewError, list_files, read_file, snapshot_path

log = logging.getLogger("clawgym.view")

STATIC = Path(__file__).with_name("static")
COOKIE = "clawgym_view_token"
MAX_BODY_BYTES = 256 * 1024
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_EXPORT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}\.jsonl$")


class ViewError(ClawgymError):
    """A request the viewer refuses (bad parameter), answered 400 with one line."""


def _err(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _float(v: str | None, name: str) -> float | None:
    if v in (None, ""):
        return None
    try:
        return float(v)  # type: ignore[arg-type]
    except ValueError:
        raise ViewError(f"{name}: not a number: {v!r}") from None


def _bool(v: str | None) -> bool | None:
    return None if v in (None, "") else v in ("1", "true", "yes")


def _int(v: str | None, default: int, lo: int, hi: int) -> int:
    try:
        return max(lo, min(hi, int(v))) if v not in (None, "") else default  # type: ignore[arg-type]
    except ValueError:
        return default


def create_app(paths: list[str], *, token: str | None = None, host: str = "127.0.0.1",
               prices: dict[str, Price] | None = None, export_dir: Path | None = None,
               poll_s: float = 0.5) -> FastAPI:
    """The viewer over `paths` (run directories, pools, eval runs, train rl outputs); see the module docstring."""
    catalog = Catalog()
    for p in paths:
        catalog.add(p)
    exports = Path(export_dir) if export_dir is not None else Path.cwd() / "exports"
    loopback_only = host in LOOPBACK and not token

    app = FastAPI(title="clawgym view", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.catalog = catalog

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.error("view: %s %s failed", request.method, request.url.path, exc_info=exc)
        return _err(500, f"internal error: {type(exc).__name__}: {str(exc)[:300]}")

    @app.exception_handler(ClawgymError)
    async def _clawgym_error(request: Request, exc: ClawgymError) -> JSONResponse:
        status = 404 if isinstance(exc, (ViewSourceError, PoolError)) and "no " in str(exc)[:40] else 400
        return _err(status, str(exc))

    # ------------------------------------------------------------------------------------------ page

    @app.get("/")
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/static/{name}")
    def static(name: str) -> Response:
        files = {"app.js": "text/javascript", "style.css": "text/css"}
        if name not in files:
            return _err(404, f"no static file {name!r}")
        return FileResponse(STATIC / name, media_type=files[name])

    # ------------------------------------------------------------------------------------------ sources

    def _source_row(s: Any) -> dict[str, Any]:
        row: dict[str, Any] = {"id": s.id, "kind": s.kind, "label": s.label, "path": str(s.path)}
        if isinstance(s, RunSource):
            row["pool_id"] = s.pool_id
            row["has_report"] = (s.path / "report.json").is_file()
            row["exists"] = s.path.is_dir()
        elif isinstance(s, RLSource):
            row["pool_id"], row["run_ids"] = s.pool_id, s.run_ids
        return row

    @app.get("/api/sources")
    def sources() -> dict[str, Any]:
        return {"sources": [_source_row(s) for s in catalog.sources.values()], "prices": bool(prices)}

    def _run_summary(s: RunSource) -> dict[str, Any]:
        if not s.path.is_dir():
            return {"id": s.id, "label": s.label, "error": f"{s.label}: the run directory is missing",
                    "summaries": [], "bad_lines": [], "episodes": 0}
        s.log.refresh()
        latest = s.log.latest()
        sums = summarize_digests([e.digest for e in latest], run=s.label, prices=prices)
        info = s.info()
        return {"id": s.id, "label": s.label, "summaries": [x.as_dict() for x in sums], "bad_lines": s.log.bad[:50],
                "n_bad": len(s.log.bad), "episodes": len(latest), "pool_id": s.pool_id,
                "has_report": (s.path / "report.json").is_file(),
                "settings": {k: info.get(k) for k in ("agent", "model", "sandbox", "samples", "tasks", "updated_at")
                             if k in info},
                "started": s.log.path.exists()}

    @app.get("/api/runs")
    def runs() -> dict[str, Any]:
        return {"runs": [_run_summary(s) for s in catalog.sources.values() if isinstance(s, RunSource)]}

    @app.get("/api/run/{sid}")
    def run(sid: str) -> dict[str, Any]:
        return _run_summary(catalog.run(sid))

    @app.get("/api/run/{sid}/trajectories")
    def run_trajectories(sid: str, request: Request) -> dict[str, Any]:
        s = catalog.run(sid)
        if not s.path.is_dir():
            raise ViewSourceError(f"{s.label}: the run directory is missing")
        s.log.refresh()
        q = request.query_params
        tasks = s.tasks()
        rows = [e.row() for e in s.log.latest()]
        for r in rows:
            meta = tasks.get(r["task_id"]) or {}
            r["category"] = meta.get("category") or ""
            r["operations"] = meta.get("operations") or []
        lo, hi = _float(q.get("min_reward"), "min_reward"), _float(q.get("max_reward"), "max_reward")
        text = (q.get("q") or "").lower()
        passed = _bool(q.get("passed"))

        def keep(r: dict[str, Any]) -> bool:
            return ((not q.get("task") or r["task_id"] == q["task"]) and (not q.get("status") or r["status"] == q["status"])
                    and (not q.get("category") or r["category"] == q["category"])
                    and (not q.get("operation") or q["operation"] in r["operations"])
                    and (lo is None or (r["score"] is not None and r["score"] >= lo))
                    and (hi is None or (r["score"] is not None and r["score"] <= hi))
                    and (passed is None or r["passed"] == passed)
                    and (not text or text in r["id"].lower()))

        rows = [r for r in rows if keep(r)]
        key = q.get("sort") or "id"
        if key not in ("id", "task_id", "status", "score", "rounds", "tokens", "tool_calls", "tool_types",
                       "duration_s", "category", "started_at"):
            key = "id"
        desc = q.get("order") == "desc"
        present = [r for r in rows if r[key] is not None]
        missing = [r for r in rows if r[key] is None]
        present.sort(key=lambda r: (r[key], r["id"]), reverse=desc)
        rows = present + missing
        offset, limit = _int(q.get("offset"), 0, 0, 10**9), _int(q.get("limit"), 50, 1, 500)
        facets = {"status": sorted({e.digest.status for e in s.log.latest()}),
                  "category": sorted({(tasks.get(e.task_id) or {}).get("category") or "" for e in s.log.latest()}
                                     - {""}),
                  "operation": sorted({op for t in tasks.values() for op in t.get("operations") or []})}
        return {"total": len(rows), "offset": offset, "limit": limit, "items": rows[offset:offset + limit],
                "facets": facets, "started": s.log.path.exists(), "bad_lines": s.log.bad[:20]}

    def _episode(s: RunSource, trajectory_id: str) -> tuple[Any, Any]:
        """The index entry and the whole record of one episode of a run (the latest record of that id)."""
        s.log.refresh()
        entry = s.log.get(trajectory_id)
        if entry is None:
            raise ViewSourceError(f"no trajectory {trajectory_id!r} in {s.label}")
        return entry, s.log.read(entry)

    @app.get("/api/run/{sid}/trajectory")
    def run_trajectory(sid: str, id: str) -> dict[str, Any]:
        from clawgym.view.turns import episode_turns

        s = catalog.run(sid)
        entry, t = _episode(s, id)
        out: dict[str, Any] = {
            "id": t.id, "task_id": t.task_id, "sample": t.sample, "agent": t.agent, "model": t.model,
            "status": t.status, "error": t.error.model_dump() if t.error else None,
            "verdict": t.verdict.model_dump() if t.verdict else None, "final_message": t.final_message,
            "usage": t.usage, "duration_s": t.duration_s, "started_at": t.started_at, "attempts": t.attempts,
            "tool_calls": t.tool_calls, "tool_errors": t.tool_errors, "row": entry.row(),
            "task": s.tasks().get(t.task_id), "turns": episode_turns(t.messages, t.transcript),
            "pool_id": s.pool_id, "in_pool": False, "files": None, "files_error": None,
        }
        if s.pool_id:
            pool = catalog.pool(s.pool_id).view
            try:
                out["in_pool"] = bool(pool.pool().trajectories(trajectory_id=t.id))
            except ClawgymError:
                pass
        try:
            out["files"] = list_files(snapshot_path(s.path, t.workspace_snapshot))
        except WorkspaceViewError as exc:
            out["files_error"] = str(exc)
        return out

    @app.get("/api/run/{sid}/file")
    def run_file(sid: str, id: str, path: str) -> dict[str, Any]:
        s = catalog.run(sid)
        _, t = _episode(s, id)
        return {"path": path, **read_file(snapshot_path(s.path, t.workspace_snapshot), path)}

    @app.get("/api/run/{sid}/report")
    def run_report(sid: str) -> dict[str, Any]:
        s = catalog.run(sid)
        rep = s.report()
        if rep is None:
            raise ViewSourceError(f"no report.json in {s.label}")
        return rep

    @app.get("/api/compare")
    def compare(a: str, b: str, task: str | None = None) -> dict[str, Any]:
        """Per task (or only `task`), the episodes of run a and of run b with their scores."""
        ra, rb = catalog.run(a), catalog.run(b)
        by_task: dict[str, dict[str, Any]] = {}
        for side, s in (("a", ra), ("b", rb)):
            s.log.refresh()
            for e in s.log.latest():
                if task is not None and e.task_id != task:
                    continue
                cell = by_task.setdefault(e.task_id, {"task_id": e.task_id, "a": [], "b": []})
                cell[side].append({"id": e.id, "score": e.digest.score, "status": e.digest.status,
                                   "rounds": e.digest.rounds, "tool_calls": e.digest.tool_calls})

        def mean(xs: list[dict]) -> float | None:
            v = [x["score"] for x in xs if x["score"] is not None]
            return sum(v) / len(v) if v else None

        rows = []
        for task_id in sorted(by_task):
            cell = by_task[task_id]
            cell["mean_a"], cell["mean_b"] = mean(cell["a"]), mean(cell["b"])
            rows.append(cell)
        return {"a": _source_row(ra), "b": _source_row(rb), "tasks": rows}

    # ------------------------------------------------------------------------------------------ pools

    @app.get("/api/pool/{sid}")
    def pool_overview(sid: str) -> dict[str, Any]:
        s = catalog.pool(sid)
        ov = s.view.overview()
        return {"id": s.id, "label": s.label, **ov,
                "groups": {"total": ov["stats"]["groups"], "ready": ov["stats"]["ready_groups"], "items": []}}

    @app.get("/api/pool/{sid}/trajectories")
    def pool_trajectories(sid: str, request: Request) -> dict[str, Any]:
        q = request.query_params
        return catalog.pool(sid).view.trajectories(
            group=q.get("group") or None, task=q.get("task") or None, status=q.get("status") or None,
            quality=q.get("quality") or None, trainable=_bool(q.get("trainable")), tag=q.get("tag") or None,
            policy=q.get("policy") or None, min_reward=_float(q.get("min_reward"), "min_reward"),
            max_reward=_float(q.get("max_reward"), "max_reward"), ended=_bool(q.get("ended")),
            curated=_bool(q.get("curated")), q=q.get("q") or None, sort=q.get("sort") or "id",
            desc=q.get("order") == "desc", offset=_int(q.get("offset"), 0, 0, 10**9),
            limit=_int(q.get("limit"), 50, 1, 500))

    @app.get("/api/pool/{sid}/groups")
    def pool_groups(sid: str, request: Request) -> dict[str, Any]:
        q = request.query_params
        return catalog.pool(sid).view.groups(_int(q.get("offset"), 0, 0, 10**9), _int(q.get("limit"), 50, 1, 500),
                                             _bool(q.get("ready")))

    @app.get("/api/pool/{sid}/trajectory")
    def pool_trajectory(sid: str, id: str) -> dict[str, Any]:
        return catalog.pool(sid).view.trajectory(id)

    @app.get("/api/pool/{sid}/tokens")
    def pool_tokens(sid: str, step: str) -> dict[str, Any]:
        return catalog.pool(sid).view.tokens(step)

    async def _json_body(request: Request) -> dict[str, Any]:
        if not (request.headers.get("content-type") or "").startswith("application/json"):
            raise ViewError("send a JSON body (Content-Type: application/json)")
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            raise ViewError(f"body: not valid JSON ({exc})") from None
        if not isinstance(body, dict):
            raise ViewError("body: expected a JSON object")
        return body

    def _str_list(body: dict, key: str) -> list[str]:
        v = body.get(key) or []
        if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
            raise ViewError(f"{key}: expected a list of non-empty strings")
        return [x.strip() for x in v]

    def _opt_str(body: dict, key: str) -> str | None:
        v = body.get(key)
        if v is not None and not isinstance(v, str):
            raise ViewError(f"{key}: expected a string")
        return v

    @app.post("/api/pool/{sid}/curate")
    async def pool_curate(sid: str, request: Request) -> dict[str, Any]:
        body = await _json_body(request)
        trainable = body.get("trainable")
        if trainable is not None and not isinstance(trainable, bool):
            raise ViewError("trainable: expected true, false or null")
        s = catalog.pool(sid)
        event = await asyncio.to_thread(
            s.view.curate, trajectory_id=_opt_str(body, "trajectory_id"), step_id=_opt_str(body, "step_id"),
            quality=_opt_str(body, "quality"), trainable=trainable, add_tags=_str_list(body, "add_tags"),
            remove_tags=_str_list(body, "remove_tags"), note=_opt_str(body, "note") or None)
        return {"event": event}

    @app.post("/api/pool/{sid}/export")
    async def pool_export(sid: str, request: Request) -> dict[str, Any]:
        body = await _json_body(request)
        fmt = body.get("format")
        if fmt not in ("sft", "rl"):
            raise ViewError("format: choose sft or rl")
        algo, credit = body.get("algo") or "grpo", body.get("credit") or "outcome"
        if algo not in ALGOS:
            raise ViewError(f"algo: choose one of {', '.join(ALGOS)}")
        if credit not in CREDITS:
            raise ViewError(f"credit: choose one of {', '.join(CREDITS)}")
        gamma = _float(str(body.get("gamma", 1.0)), "gamma")
        if gamma is None or not 0 <= gamma <= 1:
            raise ViewError("gamma: a number in [0, 1]")
        min_reward = body.get("min_reward")
        if min_reward is not None and (isinstance(min_reward, bool) or not isinstance(min_reward, (int, float))):
            raise ViewError("min_reward: expected a number or null")
        drop = [q for q in _str_list(body, "drop_quality") if q.lower() != "none"] if "drop_quality" in body \
            else ["bad"]
        output = None
        name = _opt_str(body, "output")
        if name:
            if not _EXPORT_NAME.match(name):
                raise ViewError("output: a plain file name ending in .jsonl (letters, digits, . _ -), written to "
                                "the viewer's export directory")
            exports.mkdir(parents=True, exist_ok=True)
            output = exports / name
        s = catalog.pool(sid)
        report = await asyncio.to_thread(
            s.view.export, fmt, output, min_reward=min_reward, ready_only=bool(body.get("ready_only")),
            drop_quality=drop, algo=algo, credit=credit, gamma=gamma)
        return report

    # ------------------------------------------------------------------------------------------ RL

    @app.get("/api/rl/{sid}")
    def rl(sid: str) -> dict[str, Any]:
        s = catalog.get(sid)
        if not isinstance(s, RLSource):
            raise ViewSourceError(f"{sid} is not a train rl output")
        out = {"id": s.id, "label": s.label, **s.data(), "pool_id": s.pool_id, "run_ids": s.run_ids,
               "policy_versions": []}
        if s.pool_id:
            try:
                out["policy_versions"] = catalog.pool(s.pool_id).view.policy_versions()
            except ClawgymError as exc:
                out["errors"].append(str(exc))
        return out

    # ------------------------------------------------------------------------------------------ live

    def _signature(s: Any) -> Any:
        if isinstance(s, RunSource):
            try:
                st = s.log.path.stat()
                return (st.st_ino, st.st_size)
            except OSError:
                return None
        if isinstance(s, PoolSource):
            return s.view.signature()
        if isinstance(s, RLSource):
            sig = []
            for n in ("metrics.jsonl", "state.json"):
                try:
                    sig.append((s.path / n).stat().st_mtime_ns)
                except OSError:
                    sig.append(None)
            return tuple(sig)
        return None

    @app.get("/api/live")
    async def live(request: Request) -> StreamingResponse:
        async def stream():
            last = {sid: _signature(s) for sid, s in catalog.sources.items()}
            yield "retry: 2000\n\n"
            idle = 0.0
            while not await request.is_disconnected():
                await asyncio.sleep(poll_s)
                idle += poll_s
                changed = []
                for sid, s in catalog.sources.items():
                    sig = await asyncio.to_thread(_signature, s)
                    if sig != last.get(sid):
                        last[sid] = sig
                        changed.append(sid)
                if changed:
                    idle = 0.0
                    yield f"event: change\ndata: {json.dumps({'sources': changed})}\n\n"
                elif idle >= 15:
                    idle = 0.0
                    yield ": ping\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    wrapped = httpguard.BodyLimitMiddleware(Guard(app, token, loopback_only), MAX_BODY_BYTES)
    wrapped.catalog = catalog  # type: ignore[attr-defined]  (closed by the server when it stops)
    return wrapped  # type: ignore[return-value]


class Guard:
    """ASGI middleware (not Starlette's BaseHTTPMiddleware, which breaks server-sent event streams): the Host or
    token check, the header that write requests need, and security headers on every response."""

    def __init__(self, app: Any, token: str | None, loopback_only: bool):
        self.app, self.token, self.loopback_only = app, token, loopback_only

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        extra = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                 (b"referrer-policy", b"no-referrer"), (b"cache-control", b"no-store")]

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                names = {n.lower() for n, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *[(n, v) for n, v in extra if n not in names]]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _refusal(self, request: Request) -> Response | None:
        if self.loopback_only:
            host = request.headers.get("host") or ""
            name = "[::1]" if host.startswith("[::1]") else host.rsplit(":", 1)[0]
            if name not in LOOPBACK:
                return _err(403, "the viewer answers only to a loopback Host (127.0.0.1, localhost)")
        elif self.token:
            token = self.token
            given = request.query_params.get("token")
            if given is not None and request.url.path == "/" and hmac.compare_digest(given.encode(), token.encode()):
                resp = RedirectResponse("/", status_code=303)
                resp.set_cookie(COOKIE, token, httponly=True, samesite="strict")
                return resp
            cookie = request.cookies.get(COOKIE)
            ok = httpguard.token_ok(request.headers.get("authorization"), token) or (
                cookie is not None and hmac.compare_digest(cookie.encode(), token.encode()))
            if not ok:
                return _err(401, "missing or wrong token: open the URL `clawgym view` printed (with ?token=...)")
        if request.method == "POST" and request.headers.get("x-clawgym-view") != "1":
            return _err(403, "write requests need the X-Clawgym-View header")
        return None
