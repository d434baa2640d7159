"""What every clawgym HTTP server checks before it looks at a request: the bearer token and the size of the body.

Shared by the gateway (:mod:`clawgym.gateway.app`, a bare ASGI app) and the embedded model server
(:mod:`clawgym.serve.app`, FastAPI, through :class:`BodyLimitMiddleware`), so both answer alike:

- the token is compared in constant time (:func:`hmac.compare_digest`), the `Bearer` scheme matched
  case-insensitively (RFC 7235), and any other shape of `Authorization` header is a 401;
- a body larger than the limit is a 413 with an OpenAI-style JSON error that states the limit. It is refused
  as soon as `Content-Length` announces too much, or, without one (chunked), as soon as the bytes read pass the
  limit: never more than the limit (plus one ASGI chunk) is held in memory, and nothing of it reaches the app.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

# A long agent conversation is a few MB of JSON (a 1M-token context is ~4-5 MB of escaped text, plus the tool
# schemas); 16 MiB leaves room for that and some inline images, and refuses the 100 MB bodies an attacker sends.
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024


class BodyTooLarge(Exception):
    def __init__(self, limit: int, size: int | None = None):
        self.limit, self.size = limit, size
        got = f" ({size} bytes announced)" if size is not None else ""
        super().__init__(f"the request body is larger than the limit of {limit} bytes ({_mib(limit)}){got}")


class ClientDisconnected(Exception):
    """The client went away before its whole body arrived."""


def _mib(n: int) -> str:
    return f"{n / 1048576:g} MiB"


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header value, the scheme in any case (`bearer`, `BEARER`);
    None when the header is missing or has any other shape (another scheme, no token, more than one word)."""
    if not authorization:
        return None
    scheme, sep, rest = authorization.strip().partition(" ")
    token = rest.strip(" ")
    if not sep or scheme.lower() != "bearer" or not token or any(c.isspace() for c in token):
        return None
    return token


def token_ok(authorization: str | None, expected: str) -> bool:
    """Whether an `Authorization` header value carries `expected` as a bearer token, compared in constant time
    (the time taken does not depend on how much of the token a guess got right)."""
    given = bearer_token(authorization)
    if given is None:
        return False
    # bytes, not str: compare_digest refuses non-ASCII str, and a header may carry any latin-1 byte
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def declared_length(headers: Any) -> int | None:
    """The Content-Length of ASGI `headers` (a list of (name, value) byte pairs), or None when absent or invalid."""
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def read_body(scope: dict, receive: Any, limit: int | None) -> bytes:
    """The whole body of an ASGI HTTP request, or :class:`BodyTooLarge` as soon as it is known to exceed `limit`
    bytes (from Content-Length before reading anything, else while reading). `limit=None`: no limit.
    :class:`ClientDisconnected` when the client leaves before the end of its body."""
    if limit is not None:
        declared = declared_length(scope.get("headers") or [])
        if declared is not None and declared > limit:
            raise BodyTooLarge(limit, declared)
    chunks: list[bytes] = []
    size = 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise ClientDisconnected
        chunk = msg.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
        if not msg.get("more_body"):
            return b"".join(chunks)


def error_body(status: int, message: str, kind: str = "invalid_request_error") -> bytes:
    """An OpenAI-style JSON error."""
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": status}}).encode()


def too_large_body(exc: BodyTooLarge) -> bytes:
    return error_body(413, str(exc))


async def send_json(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """ASGI middleware: a request whose body exceeds `max_body_bytes` is answered 413 before the app sees it.

    The body (at most the limit) is read first and handed to the app as one message; what the app receives after
    it (the client's disconnect, which a streaming response waits for) comes from the server as usual."""

    def __init__(self, app: Any, max_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES):
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.max_body_bytes is None:
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(scope, receive, self.max_body_bytes)
        except BodyTooLarge as exc:
            await send_json(send, 413, too_large_body(exc))
            return
        except ClientDisconnected:
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
