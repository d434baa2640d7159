"""Connection limits of the gateway's listeners, so that no sandbox can exhaust the host process's file
descriptors.

The gateway's unix socket is bound into every sandbox: without limits one sandboxed process could open
connections until the host process runs out of descriptors (`Errno 24`), and then neither the gateway (its
accept fails) nor the rest of the host (the sandboxes' channels, the pool) can open anything. Three bounds:

- **per sandbox**: a peer of the unix socket is identified by its pid namespace (bwrap `--unshare-all` and
  Docker give every sandbox its own; read from `/proc/<pid>/ns/pid` of the pid the kernel reports with
  `SO_PEERCRED`), else by its cgroup, else by its uid. A peer already holding `per_peer` connections has the next
  one closed as soon as it is accepted. TCP peers are not told apart (a sandbox with `--network` shares the
  host's loopback): for them only the total applies;
- **in all**: at most `total` connections at once (by default half the process's `RLIMIT_NOFILE`), and at most
  `backlog` accepted in one go before these checks run;
- **idle**: a connection on which the client owes the next bytes (no request yet, between requests, or a request
  body not finished) and sends none for `idle_s` seconds is closed. A request the gateway is answering (an
  upstream call that takes minutes) is not idle.

The checks run in the accepted connection's protocol (:func:`guarded_protocol`, a subclass of uvicorn's), on the
server's event loop, so they need no lock.
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import struct
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class ConnectionLimits:
    per_peer: int = 32  # connections one sandbox (unix-socket peer) may hold open; OpenClaw's relay uses a few
    total: int | None = None  # connections in all; None: half of RLIMIT_NOFILE's soft limit (at least 64)
    idle_s: float = 30.0  # seconds a connection may stay silent while the client owes the next bytes

    def total_limit(self) -> int:
        if self.total is not None:
            return self.total
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return 4096 if soft == resource.RLIM_INFINITY else max(64, soft // 2)

    def backlog(self) -> int:
        """The listen backlog, which is also how many connections asyncio accepts in one go (before any of them
        is checked): a burst can hold at most this many descriptors beyond the total."""
        return max(16, min(2048, self.total_limit() // 2))


def peer_key(sock: Any) -> Hashable | None:
    """Which sandbox is at the other end of an accepted unix-socket connection; None for other sockets."""
    if sock is None or getattr(sock, "family", None) != socket.AF_UNIX:
        return None
    try:
        pid, uid, _ = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    except OSError:
        return ("unknown",)
    if pid > 0:
        try:
            return ("pidns", os.readlink(f"/proc/{pid}/ns/pid"))
        except OSError:  # gone already, or another user's process (a root container seen by a non-root host)
            pass
        try:
            with open(f"/proc/{pid}/cgroup", "rb") as f:  # world-readable; a container's is its own
                return ("cgroup", f.read(4096))
        except OSError:
            pass
    return ("uid", uid)


class ConnectionGuard:
    """The counts behind :class:`ConnectionLimits`, for one event loop."""

    def __init__(self, limits: ConnectionLimits | None = None):
        self.limits = limits or ConnectionLimits()
        self.total_limit = self.limits.total_limit()
        self.open = 0
        self.by_peer: dict[Hashable, int] = {}
        self.stats = {"refused_peer": 0, "refused_total": 0, "idle_closed": 0}

    def admit(self, sock: Any) -> tuple[bool, Hashable | None]:
        """(admitted, peer key) for a connection just accepted; a refused one is to be closed at once and
        never released."""
        if self.open >= self.total_limit:
            self.stats["refused_total"] += 1
            return False, None
        key = peer_key(sock)
        if key is not None:
            held = self.by_peer.get(key, 0)
            if held >= self.limits.per_peer:
                self.stats["refused_peer"] += 1
                return False, key
            self.by_peer[key] = held + 1
        self.open += 1
        return True, key

    def release(self, key: Hashable | None) -> None:
        self.open -= 1
        if key is not None:
            left = self.by_peer.get(key, 1) - 1
            if left > 0:
                self.by_peer[key] = left
            else:
                self.by_peer.pop(key, None)


def _client_owes_bytes(protocol: Any) -> bool:
    """Whether the client of a uvicorn HTTP protocol is the one to send next: no request under way, or one whose
    body has not all arrived (and whose answer has not started)."""
    cycle = getattr(protocol, "cycle", None)
    if cycle is None or cycle.response_complete:
        return True
    return bool(cycle.more_body) and not cycle.response_started


def guarded_protocol(base: type, guard: ConnectionGuard) -> type:
    """A subclass of the uvicorn HTTP protocol class `base` that applies `guard` to every connection."""

    class Guarded(base):  # type: ignore[misc, valid-type]
        _guard_key: Hashable | None = None
        _guard_admitted = False
        _guard_timer: asyncio.TimerHandle | None = None
        _guard_last = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._guard_admitted, self._guard_key = guard.admit(transport.get_extra_info("socket"))
            if not self._guard_admitted:
                transport.abort()
                return
            self._guard_last = self.loop.time()
            self._guard_arm(guard.limits.idle_s)

        def data_received(self, data: bytes) -> None:
            self._guard_last = self.loop.time()
            super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._guard_admitted:
                self._guard_admitted = False
                guard.release(self._guard_key)
            if self._guard_timer is not None:
                self._guard_timer.cancel()
                self._guard_timer = None
            super().connection_lost(exc)

        def _guard_arm(self, delay: float) -> None:
            self._guard_timer = self.loop.call_later(max(delay, 0.05), self._guard_check)

        def _guard_check(self) -> None:
            self._guard_timer = None
            if not self._guard_admitted:
                return
            now = self.loop.time()
            if not _client_owes_bytes(self):  # answering: the client's silence counts from the answer's end
                self._guard_last = now
                self._guard_arm(min(1.0, guard.limits.idle_s))
                return
            silent = now - self._guard_last
            if silent >= guard.limits.idle_s:
                guard.stats["idle_closed"] += 1
                self.transport.close()
                return
            self._guard_arm(guard.limits.idle_s - silent)

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded
