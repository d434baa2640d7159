"""Run the gateway: in the foreground (`clawgym gateway`), or on a background thread of this process for the
duration of a rollout (:class:`GatewayThread`)."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from clawgym.core.errors import ClawgymError
from clawgym.gateway.app import Gateway
from clawgym.gateway.budget import Budget
from clawgym.gateway.connections import ConnectionGuard, ConnectionLimits, guarded_protocol
from clawgym.gateway.sampling import SamplingOverride
from clawgym.httpguard import DEFAULT_MAX_BODY_BYTES


class GatewayError(ClawgymError):
    pass


def load_tokenizer(name: str | None) -> Any:
    """The tokenizer used to re-tokenize for upstreams that give no ids: a local model dir or embedded name."""
    if not name:
        return None
    from transformers import AutoTokenizer

    from clawgym.llm.models import resolve_model_dir

    return AutoTokenizer.from_pretrained(str(resolve_model_dir(name)))


def open_pool(pool_dir: Path):
    from clawgym.pool.store import Pool

    return Pool(Path(pool_dir))


def uvicorn_config(gateway: Gateway, host: str, port: int, limits: ConnectionLimits | None,
                   log_level: str = "warning") -> Any:
    """uvicorn's configuration for the gateway, its connections guarded (see clawgym.gateway.connections)."""
    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    limits = limits or ConnectionLimits()
    guard = ConnectionGuard(limits)
    gateway.connections = guard
    return uvicorn.Config(gateway, host=host, port=port, log_level=log_level, access_log=False, lifespan="on",
                          http=guarded_protocol(AutoHTTPProtocol, guard), backlog=limits.backlog())


def run_gateway(upstream: str, pool_dir: Path, host: str = "127.0.0.1", port: int = 8100, token: str | None = None,
                upstream_key: str | None = None, tokenizer: str | None = None, policy_version: str | None = None,
                log_level: str = "warning", max_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES,
                budget: Budget | None = None, connections: ConnectionLimits | None = None) -> None:
    """The standalone gateway (`clawgym gateway`): ids from the route, headers or model name, calls without
    one budgeted together under `_unassigned` (see clawgym.gateway.app)."""
    import uvicorn

    pool = open_pool(pool_dir)
    gw = Gateway(upstream, pool, token=token, upstream_key=upstream_key, tokenizer=load_tokenizer(tokenizer),
                 policy_version=policy_version, max_body_bytes=max_body_bytes, budget=budget)
    try:
        uvicorn.Server(uvicorn_config(gw, host, port, connections, log_level)).run()
    finally:
        pool.close()


class GatewayThread:
    """The gateway on 127.0.0.1 in a background thread; a context manager. `url_for(trajectory, group)` is the
    base URL an agent of that trajectory uses.

    `uds`: also serve on this unix socket (same gateway, same event loop), for agents in sandboxes that have
    no network of their own: the socket is bound into the sandbox and a relay inside forwards to it.
    `sampling`: parameters imposed on every forwarded chat request (see clawgym.gateway.app).
    `route_secret`: a rollout's gateway: each trajectory route needs its key, `key_for(trajectory, group)`, and
    calls without a route are refused (see clawgym.gateway.app).
    `connections`: per-sandbox, total and idle limits of the connections (see clawgym.gateway.connections)."""

    def __init__(self, upstream: str, pool: Any, *, port: int | None = None, upstream_key: str | None = None,
                 tokenizer: Any = None, policy_version: str | None = None, token: str | None = None,
                 budget: Budget | None = None, uds: Path | None = None,
                 max_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES, host: str = "127.0.0.1",
                 sampling: SamplingOverride | None = None, reader_token: str | None = None,
                 route_secret: str | None = None, connections: ConnectionLimits | None = None):
        from clawgym.serve.server import free_port

        if host not in ("127.0.0.1", "localhost", "::1") and not token:
            raise GatewayError(f"a gateway bound to {host} needs a token")
        self.host = host  # where it listens (a cluster's workers on other hosts reach it off loopback, with the token)
        self.port = port or free_port()
        self.uds = Path(uds) if uds is not None else None
        self.gateway = Gateway(upstream, pool, upstream_key=upstream_key, tokenizer=tokenizer,
                               policy_version=policy_version, token=token, budget=budget,
                               max_body_bytes=max_body_bytes, sampling=sampling, reader_token=reader_token,
                               route_secret=route_secret)
        self.connections = connections
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def url_for(self, trajectory: str, group: str | None = None) -> str:
        url = f"http://127.0.0.1:{self.port}/t/{quote(trajectory, safe='')}"
        if group:
            url += f"/g/{quote(group, safe='')}"
        return url + "/v1"

    def key_for(self, trajectory: str, group: str | None = None) -> str | None:
        """The key an agent of `trajectory` sends on the route `url_for(trajectory, group)` gives it (its bearer
        token); None when the gateway needs none."""
        return self.gateway.route_key(trajectory, group)

    def start(self) -> GatewayThread:
        import uvicorn

        config = uvicorn_config(self.gateway, self.host, self.port, self.connections)
        self._server = uvicorn.Server(config)
        sockets = None
        if self.uds is not None:
            tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tcp.bind((self.host, self.port))
            if self.uds.exists():
                self.uds.unlink()
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            unix.bind(str(self.uds))
            os.chmod(self.uds, 0o666)  # any uid in a sandbox may connect; the directory bounds who sees it
            sockets = [tcp, unix]
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve(sockets=sockets)),
                                        name="clawgym-gateway", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise GatewayError(f"the gateway did not start on {self.host}:{self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.uds is not None and self.uds.exists():
            self.uds.unlink()

    def __enter__(self) -> GatewayThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
