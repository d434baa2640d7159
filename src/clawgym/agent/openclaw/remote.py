"""The OpenClaw agent on a cluster node, its gateway on the driver's host (`clawgym rollout --executor ray`).

A local run binds the gateway's unix socket into every sandbox; the in-sandbox relay forwards OpenClaw's
connections to it. On a node the gateway is another machine's TCP port, so the node's worker process offers a
unix socket of its own (:class:`NodeRelay`) that forwards every connection, byte for byte, to the driver's
gateway; the sandbox sees the same mount, the same socket name and the same relay as in a local run, and still
has no network. Nothing is added to or taken from the requests: OpenClaw sends the key of its own trajectory
route as its provider key, derived by the worker from the gateway's token (clawgym.gateway.routes), so the
gateway records the same steps as for a local run and takes no call of one sandbox on another's route. Like the
gateway's own socket, the relay's holds each sandbox to a few connections (clawgym.gateway.connections), so no
sandbox can use up the worker's file descriptors.

What a local episode reads from the driver's pool and budget book (the gateway's steps of its trajectory, what
the budget says it spent) a remote episode asks the gateway for (:class:`GatewayReader`,
`GET /clawgym/trajectory/<id>`) with a second token, the reader's, which only the worker process holds: OpenClaw
in the sandbox has only its route's key, which that endpoint refuses, so it cannot read other trajectories' calls.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from clawgym.agent.openclaw.config import SOCKET_NAME
from clawgym.core.errors import ClawgymError
from clawgym.gateway.connections import ConnectionGuard, ConnectionLimits

_RELAYS: dict[str, NodeRelay] = {}
_LOCK = threading.Lock()


class NodeRelay:
    """A unix socket on this node (in a private directory, bound read-only into sandboxes as the gateway's
    socket directory) whose connections are piped to the TCP gateway at `host:port`. One per worker process
    and gateway (:func:`node_relay`), serving on a daemon thread for the process's life."""

    def __init__(self, host: str, port: int, limits: ConnectionLimits | None = None):
        self.host, self.port = host, port
        self.guard = ConnectionGuard(limits)  # used on the relay's event loop only
        self.dir = Path(tempfile.mkdtemp(prefix="clawgym-gw-"))  # short: unix socket paths are limited to 108 bytes
        self.dir.chmod(0o755)
        self.path = self.dir / SOCKET_NAME
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        threading.Thread(target=self._serve, name="clawgym-node-relay", daemon=True).start()
        if not self._ready.wait(30) or self._error is not None:
            raise ClawgymError(f"the node's gateway relay did not start: {self._error}")
        atexit.register(shutil.rmtree, self.dir, True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            try:
                server = await asyncio.start_unix_server(self._handle, path=str(self.path),
                                                         backlog=self.guard.limits.backlog())
                os.chmod(self.path, 0o666)  # any uid in a sandbox may connect; the directory bounds who sees it
            except BaseException as exc:  # noqa: BLE001 - reported to the constructor
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            async with server:
                await server.serve_forever()

        self._loop.run_until_complete(main())

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        admitted, peer = self.guard.admit(writer.get_extra_info("socket"))
        if not admitted:
            writer.transport.abort()
            return
        try:
            await self._pipe(reader, writer)
        finally:
            self.guard.release(peer)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward one sandbox connection to the gateway, byte for byte, until the gateway's side ends (an answer
        complete, or the gateway closing an idle connection): then the sandbox's side is closed too, so an idle
        sandbox connection lasts no longer here than the gateway lets it."""
        try:
            up_r, up_w = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while True:
                data = await src.read(65536)
                if not data:
                    if dst.can_write_eof():
                        dst.write_eof()
                    return
                dst.write(data)
                await dst.drain()

        to_gateway = asyncio.ensure_future(pipe(reader, up_w))  # may end first: a client that half-closes
        try:
            await pipe(up_r, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            to_gateway.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await to_gateway
            for w in (writer, up_w):
                with contextlib.suppress(Exception):
                    w.close()


def node_relay(gateway: str) -> NodeRelay:
    """This process's relay to the gateway at `gateway` (http://HOST:PORT), started on first use."""
    with _LOCK:
        relay = _RELAYS.get(gateway)
        if relay is None:
            u = urlsplit(gateway)
            if not u.hostname or not u.port:
                raise ClawgymError(f"not a gateway address: {gateway!r}")
            relay = _RELAYS[gateway] = NodeRelay(u.hostname, u.port)
        return relay


class GatewayReader:
    """A trajectory's steps and budget spend, asked of the gateway over the network (with its reader token)."""

    def __init__(self, gateway: str, token: str | None, id_prefix: str = "", timeout: float = 120.0):
        self.gateway = gateway.rstrip("/")
        self.token = token
        self.id_prefix = id_prefix
        self.timeout = timeout

    def _get(self, trajectory_id: str) -> dict[str, Any]:
        req = urllib.request.Request(f"{self.gateway}/clawgym/trajectory/{quote(self.id_prefix + trajectory_id, safe='')}")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, timeout=self.timeout) as r:  # noqa: S310 - the run's own gateway
            return json.loads(r.read())

    def steps(self, trajectory_id: str) -> list[Any]:
        from clawgym.pool.records import StepRecord

        return [StepRecord.model_validate(s) for s in self._get(trajectory_id)["steps"]]

    def spend(self, trajectory_id: str) -> dict[str, Any]:
        return self._get(trajectory_id)["spend"]
