"""What the gateway takes from whom: the trajectory route of a request path, the per-trajectory keys of a
rollout, and the upstream routes an agent may reach at all.

**Trajectory keys.** In a rollout every sandbox can reach the gateway (its socket is bound into all of them), so
a route alone proves nothing: any sandbox could write steps into, and spend the budget of, another trajectory's
route. Each route therefore has a key, `trajectory_key(secret, trajectory, group)`: an HMAC of the route's ids
under a secret that only the host process (and, on a cluster, the trusted worker processes) holds. An episode's
agent gets the key of its own route and nothing else; the gateway recomputes the key from the route of each
request and compares it in constant time. Keys are derived, not issued, so the gateway keeps no table of them,
a retried attempt (`<id>~2`) needs no registration, and a worker on another node derives the keys of its episodes
from the secret it already holds.

**Allowed routes.** The gateway forwards with the host's upstream key, so it forwards only what an agent needs:
`POST chat/completions`, `POST completions`, `POST responses`, `GET models` (and `GET models/<id>`). Everything
else (LoRA loading, files, fine-tuning, batches, deleting models) is a 404, or a 405 for a known route with
another method, and never reaches the upstream.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import NamedTuple
from urllib.parse import quote, unquote_to_bytes

KEY_PREFIX = "cgt-"  # marks a trajectory key (in logs and configs) apart from the gateway's own token

# upstream route (path components after /v1) -> the methods an agent may use on it
ALLOWED: dict[tuple[str, ...], tuple[str, ...]] = {
    ("chat", "completions"): ("POST",),
    ("completions",): ("POST",),
    ("responses",): ("POST",),
    ("models",): ("GET",),
}


class Route(NamedTuple):
    """A request path taken apart: `/t/<trajectory>[/g/<group>]/v1/<api...>` or `/v1/<api...>`."""

    trajectory: str | None  # None: no trajectory in the path (or an empty one)
    group: str | None
    api: tuple[str, ...] | None  # the components after /v1 (() for /v1 itself); None: not an API path


def parse_route(path: str | bytes) -> Route:
    """The route of a request path. Give the raw path (ASGI `raw_path`, still percent-encoded) where there is one:
    each component is decoded exactly once, so an id holding `%` or `/` (quoted by `GatewayThread.url_for`) is
    read back as it was written."""
    raw = path if isinstance(path, bytes) else path.encode("utf-8")
    parts = [unquote_to_bytes(p).decode("utf-8", "replace") for p in raw.split(b"/")]
    if not parts or parts[0] != "":
        return Route(None, None, None)
    parts = parts[1:]
    trajectory = group = None
    if parts[:1] == ["t"]:
        if len(parts) < 2:
            return Route(None, None, None)
        trajectory, parts = parts[1] or None, parts[2:]
        if parts[:1] == ["g"] and len(parts) >= 2:
            group, parts = parts[1] or None, parts[2:]
    if parts[:1] != ["v1"]:
        return Route(trajectory, group, None)
    api = tuple(parts[1:])
    return Route(trajectory, group, () if api == ("",) else api)


def trajectory_key(secret: str | bytes, trajectory: str, group: str | None) -> str:
    """The bearer key of the route of (`trajectory`, `group`) under `secret` (HMAC-SHA256, URL-safe text)."""
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    message = json.dumps(["clawgym-route", trajectory, group or ""]).encode("utf-8")  # unambiguous, unlike a join
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return KEY_PREFIX + base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def route_key(secret: str | bytes, route_path: str) -> str:
    """The key of a route path as `GatewayThread.url_for` builds it (`/t/<trajectory>/g/<group>/v1`, or a URL
    ending so): what a black-box agent configured with that base URL must send."""
    path = route_path.split("://", 1)[-1]
    path = path[path.index("/"):] if "/" in path else "/"
    r = parse_route(path)
    if r.trajectory is None:
        raise ValueError(f"not a trajectory route: {route_path!r}")
    return trajectory_key(secret, r.trajectory, r.group)


def allowed_methods(api: tuple[str, ...]) -> tuple[str, ...] | None:
    """The methods an agent may use on the upstream route `api` (components after /v1); None: not a route the
    gateway serves."""
    if len(api) >= 2 and api[0] == "models" and all(_plain(p) for p in api[1:]):
        return ("GET",)  # one model: `models/<id>`, the id possibly holding slashes (`org/name`)
    return ALLOWED.get(api)


def _plain(component: str) -> bool:
    """A path component that stays one component on its way upstream: not empty, no dot segment (which the
    upstream's URL handling would resolve: `models/..` is `/v1/`), no `/` (a decoded `%2F`)."""
    return component not in ("", ".", "..") and "/" not in component


def upstream_path(api: tuple[str, ...]) -> str:
    """The path (after the upstream's /v1) of an allowed route, each component quoted again."""
    return "/" + "/".join(quote(p, safe="") for p in api)
