"""The viewer's request parameters: query-string values and JSON bodies read into typed values, or a
:class:`ViewError` (a 400 with one line) naming the parameter."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from clawgym.core.errors import ClawgymError


class ViewError(ClawgymError):
    """A request the viewer refuses (bad parameter), answered 400 with one line."""


def err(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def to_float(v: str | None, name: str) -> float | None:
    if v in (None, ""):
        return None
    try:
        return float(v)  # type: ignore[arg-type]
    except ValueError:
        raise ViewError(f"{name}: not a number: {v!r}") from None


def to_bool(v: str | None) -> bool | None:
    return None if v in (None, "") else v in ("1", "true", "yes")


def to_int(v: str | None, default: int, lo: int, hi: int) -> int:
    try:
        return max(lo, min(hi, int(v))) if v not in (None, "") else default  # type: ignore[arg-type]
    except ValueError:
        return default


def page(q: Any) -> tuple[int, int]:
    """(offset, limit) of a listing: offset >= 0, limit 1..500 (default 50)."""
    return to_int(q.get("offset"), 0, 0, 10**9), to_int(q.get("limit"), 50, 1, 500)


async def json_body(request: Request) -> dict[str, Any]:
    if not (request.headers.get("content-type") or "").startswith("application/json"):
        raise ViewError("send a JSON body (Content-Type: application/json)")
    try:
        body = json.loads(await request.body())
    except ValueError as exc:
        raise ViewError(f"body: not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise ViewError("body: expected a JSON object")
    return body


def str_list(body: dict, key: str) -> list[str]:
    v = body.get(key) or []
    if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
        raise ViewError(f"{key}: expected a list of non-empty strings")
    return [x.strip() for x in v]


def opt_str(body: dict, key: str) -> str | None:
    v = body.get(key)
    if v is not None and not isinstance(v, str):
        raise ViewError(f"{key}: expected a string")
    return v
