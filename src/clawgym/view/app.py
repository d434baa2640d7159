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
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response, StreamingResponse

from clawgym import httpguard
from clawgym.core.errors import ClawgymError
from clawgym.pool import PoolError
from clawgym.rollout.summary import Price
from clawgym.view.params import ViewError
from clawgym.view.params import err as _err
from clawgym.view.pool_routes import add_pool_routes
from clawgym.view.run_routes import add_run_routes
from clawgym.view.sources import Catalog, PoolSource, RLSource, RunSource, ViewSourceError

__all__ = ["CSP", "Guard", "ViewError", "create_app"]

log = logging.getLogger("clawgym.view")

STATIC = Path(__file__).with_name("static")
COOKIE = "clawgym_view_token"
MAX_BODY_BYTES = 256 * 1024
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def create_app(paths: list[str], *, token: str | None = None, host: str = "127.0.0.1",
               prices: dict[str, Price] | None = None, export_dir: Path | None = None,
               poll_s: float = 0.5) -> FastAPI:
    """The viewer over `paths` (run directories, pools, eval runs, train rl outputs); see the module docstring.
    The routes come in groups: the page, runs (:mod:`clawgym.view.run_routes`), pools
    (:mod:`clawgym.view.pool_routes`), RL outputs and the live stream."""
    catalog = Catalog()
    for p in paths:
        catalog.add(p)
    exports = Path(export_dir) if export_dir is not None else Path.cwd() / "exports"
    loopback_only = host in LOOPBACK and not token

    app = FastAPI(title="clawgym view", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.catalog = catalog
    _add_error_handlers(app)
    _add_page_routes(app)
    add_run_routes(app, catalog, prices)
    add_pool_routes(app, catalog, exports)
    _add_rl_routes(app, catalog)
    _add_live_route(app, catalog, poll_s)
    wrapped = httpguard.BodyLimitMiddleware(Guard(app, token, loopback_only), MAX_BODY_BYTES)
    wrapped.catalog = catalog  # type: ignore[attr-defined]  (closed by the server when it stops)
    return wrapped  # type: ignore[return-value]


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.error("view: %s %s failed", request.method, request.url.path, exc_info=exc)
        return _err(500, f"internal error: {type(exc).__name__}: {str(exc)[:300]}")

    @app.exception_handler(ClawgymError)
    async def _clawgym_error(request: Request, exc: ClawgymError) -> JSONResponse:
        status = 404 if isinstance(exc, (ViewSourceError, PoolError)) and "no " in str(exc)[:40] else 400
        return _err(status, str(exc))


def _add_page_routes(app: FastAPI) -> None:
    @app.get("/")
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/static/{name}")
    def static(name: str) -> Response:
        files = {"app.js": "text/javascript", "style.css": "text/css"}
        if name not in files:
            return _err(404, f"no static file {name!r}")
        return FileResponse(STATIC / name, media_type=files[name])


def _add_rl_routes(app: FastAPI, catalog: Catalog) -> None:
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


def _signature(s: Any) -> Any:
    """What changes when a source changes: a run's log (inode, size), a pool's files, an RL output's metrics."""
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


async def _changes(request: Request, catalog: Catalog, poll_s: float):
    """The server-sent events of the live stream: `change` with the sources that changed, a ping when idle."""
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


def _add_live_route(app: FastAPI, catalog: Catalog, poll_s: float) -> None:
    @app.get("/api/live")
    async def live(request: Request) -> StreamingResponse:
        return StreamingResponse(_changes(request, catalog, poll_s), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


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
