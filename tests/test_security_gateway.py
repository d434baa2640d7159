"""Attacks on the HTTP servers (the gateway, the embedded model server), over real HTTP on 127.0.0.1 or the
gateway's real unix socket: oversized request bodies (announced by Content-Length, or streamed chunked without
one), the bearer token (its comparison, the scheme's case, malformed Authorization headers), and a rollout's
gateway attacked from its sandboxes (another trajectory's route, calls naming no trajectory, the upstream's admin
routes, wrong-typed request fields, idle connections by the thousand)."""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets
import socket
import threading
import time
from contextlib import contextmanager
from types import SimpleNamespace

import httpx
import pytest

from clawgym.gateway import GatewayThread
from clawgym.pool.store import Pool
from clawgym.serve import free_port
from scripted_llm import Fault, ScriptedLLM, Turn

KEY = "security probe"
TOKEN = "s3cret-Token"
MB = 1024 * 1024


@pytest.fixture
def upstream():
    with ScriptedLLM({KEY: [Turn("ok")] * 50}) as up:
        yield up


def _chat_body(model: str, filler: int = 0) -> dict:
    """A chat request whose conversation carries `filler` bytes of tool output (a long agent session)."""
    msgs = [{"role": "user", "content": KEY}]
    if filler:
        msgs += [{"role": "assistant", "content": "", "tool_calls": [
                     {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "x" * filler}]
    return {"model": model, "messages": msgs}


def _limit_in(error: dict) -> int:
    """The limit in bytes that a 413's OpenAI-style error states."""
    assert set(error) >= {"message", "type", "code"}, error
    m = re.search(r"limit of (\d+) bytes", error["message"])
    assert m, error["message"]
    return int(m.group(1))


def _raw_request(port: int, head: str, body_parts: list[bytes] = (), timeout: float = 15.0) -> tuple[int, bytes]:
    """Send a request head (and some body) on a raw socket WITHOUT finishing the body, and read the answer: a
    server that waits for the rest of the body before deciding times out here."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head.encode("latin-1"))
        for part in body_parts:
            s.sendall(part)
        data = b""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in data and time.monotonic() < deadline:
            try:
                got = s.recv(65536)
            except TimeoutError:
                break
            if not got:
                break
            data += got
        head_end = data.find(b"\r\n\r\n")
        assert head_end > 0, f"no answer before the body was complete (got {data[:200]!r})"
        status = int(data.split(b" ", 2)[1])
        length = int(re.search(rb"(?i)content-length: *(\d+)", data[:head_end]).group(1))
        while len(data) < head_end + 4 + length and time.monotonic() < deadline:
            got = s.recv(65536)
            if not got:
                break
            data += got
        return status, data[head_end + 4:head_end + 4 + length]


# -- body size ---------------------------------------------------------------------------------------------------


def test_gateway_refuses_100mb_body_with_413(upstream, tmp_path):
    """A 100 MB chat request (valid JSON, so today it is forwarded and stored whole) is refused with a 413 that
    states the limit, at the default limit; nothing reaches the pool or the upstream, and the gateway still
    serves the next request."""
    body = json.dumps(_chat_body(upstream.model, filler=100 * MB)).encode()
    assert len(body) > 100 * MB
    with Pool(tmp_path / "pool") as pool, GatewayThread(upstream.base_url, pool) as gw:
        r = httpx.post(f"{gw.url_for('t-big')}/chat/completions", content=body,
                       headers={"Content-Type": "application/json"}, timeout=120)
        del body
        assert r.status_code == 413, r.text[:300]
        limit = _limit_in(r.json()["error"])
        assert r.json()["error"]["code"] == 413
        assert 4 * MB <= limit < 100 * MB  # a long conversation fits, 100 MB does not
        assert upstream.requests == []
        assert pool.steps() == []
        assert gw.gateway.stats["body_refused"] == 1
        ok = httpx.post(f"{gw.url_for('t-small')}/chat/completions", json=_chat_body(upstream.model), timeout=30)
        assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "ok"
        assert [s.trajectory_id for s in pool.steps()] == ["t-small"]


def test_gateway_refuses_oversize_content_length_before_reading_the_body(upstream, tmp_path):
    """A Content-Length of 100 MB is refused at once, from the header: the gateway does not wait for (or
    buffer) the 100 MB first. Today it waits for the body, which never comes."""
    with Pool(tmp_path / "pool") as pool, GatewayThread(upstream.base_url, pool) as gw:
        head = (f"POST /t/t-cl/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Type: application/json\r\nContent-Length: {100 * MB}\r\n\r\n")
        status, payload = _raw_request(gw.port, head, [b'{"model": "m", "messages": ['])
        assert status == 413
        assert _limit_in(json.loads(payload)["error"]) < 100 * MB
        assert upstream.requests == [] and pool.steps() == []


def test_gateway_refuses_chunked_body_while_reading_without_buffering_it_all(upstream, tmp_path):
    """Without a Content-Length (chunked), the gateway stops at the limit: it answers 413 after limit+ bytes,
    although the client has not finished its body (and would go on to send 100 MB)."""
    limit = 256 * 1024
    with Pool(tmp_path / "pool") as pool, GatewayThread(upstream.base_url, pool, max_body_bytes=limit) as gw:
        head = ("POST /t/t-chunked/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"a" * 65536
        parts = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 6  # 384 KiB of the body, never the final 0-chunk
        status, payload = _raw_request(gw.port, head, parts)
        assert status == 413
        assert _limit_in(json.loads(payload)["error"]) == limit
        assert upstream.requests == [] and pool.steps() == []


def test_gateway_body_limit_is_configurable_and_long_conversations_pass(upstream, tmp_path):
    """A 4 MB conversation (legitimate) passes at the default limit and is stored; the same request is a 413
    under a 1 MiB limit; the limit covers passthrough routes as well."""
    body = _chat_body(upstream.model, filler=4 * MB)
    with Pool(tmp_path / "pool") as pool, GatewayThread(upstream.base_url, pool) as gw:
        r = httpx.post(f"{gw.url_for('t-long')}/chat/completions", json=body, timeout=60)
        assert r.status_code == 200, r.text[:300]
        (step,) = pool.steps(trajectory_id="t-long")
        assert len(step.request["messages"][-1]["content"]) == 4 * MB
    with Pool(tmp_path / "pool2") as pool, GatewayThread(upstream.base_url, pool, max_body_bytes=MB) as gw:
        r = httpx.post(f"{gw.url_for('t-long')}/chat/completions", json=body, timeout=60)
        assert r.status_code == 413 and _limit_in(r.json()["error"]) == MB
        r = httpx.post(f"{gw.base_url}/completions", json={"prompt": "x" * (2 * MB)}, timeout=60)
        assert r.status_code == 413
        assert pool.steps() == []
    assert len(upstream.requests) == 1


def test_gateway_cli_has_a_body_limit_option():
    from typer.testing import CliRunner

    from clawgym.cli.app import app

    out = CliRunner().invoke(app, ["gateway", "--help"], env={"COLUMNS": "200"}).output
    assert "--max-body-mb" in out


# -- bearer token ----------------------------------------------------------------------------------------------


@pytest.fixture
def guarded(upstream, tmp_path):
    with Pool(tmp_path / "pool") as pool, GatewayThread(upstream.base_url, pool, token=TOKEN) as gw:
        yield gw, f"{gw.base_url}/chat/completions", _chat_body(upstream.model)


def test_gateway_accepts_bearer_scheme_case_insensitively(guarded):
    """RFC 7235: the auth scheme is case-insensitive; `bearer X` and `BEARER X` are the same credentials."""
    gw, url, body = guarded
    for header in (f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER {TOKEN}", f"BeArEr {TOKEN}", f"Bearer  {TOKEN}"):
        r = httpx.post(url, json=body, headers={"Authorization": header})
        assert r.status_code == 200, (header, r.text)


def test_gateway_rejects_malformed_or_wrong_authorization_with_401(guarded):
    """Every other shape is a 401 (never a 500, never a pass): no scheme, another scheme, no token, extra words,
    a prefix or extension of the token, the token in another case, bytes that are not ASCII."""
    gw, url, body = guarded
    bad: list[bytes | None] = [None, b"", TOKEN.encode(), b"Bearer", b"Bearer" + TOKEN.encode(),
                               b"Basic " + TOKEN.encode(), b"Token " + TOKEN.encode(),
                               b"Bearer " + TOKEN.encode() + b" extra", b"Bearer " + TOKEN[:-1].encode(),
                               b"Bearer " + TOKEN.encode() + b"X", b"Bearer " + TOKEN.upper().encode(),
                               b"Bearer " + TOKEN.encode().replace(b"3", b"\xe9"), b"Bearer \xe9\xff"]
    for header in bad:
        r = httpx.post(url, json=body, headers={} if header is None else {"Authorization": header})
        assert r.status_code == 401, (header, r.status_code, r.text)
        assert r.headers.get("www-authenticate", "").lower().startswith("bearer"), header
    assert httpx.get(f"{gw.base_url}/models", headers={"Authorization": "Basic x"}).status_code == 401


def test_gateway_token_compare_is_constant_time(guarded, monkeypatch):
    """The token is checked with hmac.compare_digest (constant time), and its verdict is the one that counts:
    an `==` on the token (whose time leaks how many leading characters a guess got right) is not used."""
    gw, url, body = guarded
    calls: list[tuple] = []
    verdict: dict[str, bool | None] = {"forced": None}
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b) if verdict["forced"] is None else verdict["forced"]

    monkeypatch.setattr(hmac, "compare_digest", spy)
    monkeypatch.setattr(secrets, "compare_digest", spy)

    def status(token: str) -> int:
        return httpx.post(url, json=body, headers={"Authorization": f"bearer {token}"}).status_code

    wrong = "x" * len(TOKEN)
    assert (status(TOKEN), status(wrong)) == (200, 401)
    as_bytes = {(bytes(a, "utf-8") if isinstance(a, str) else a, bytes(b, "utf-8") if isinstance(b, str) else b)
                for a, b in calls}
    assert {(TOKEN.encode(), TOKEN.encode()), (wrong.encode(), TOKEN.encode())} <= as_bytes | {
        (b, a) for a, b in as_bytes}
    verdict["forced"] = True  # compare_digest decides: a wrong token it accepts passes ...
    assert status(wrong) == 200
    verdict["forced"] = False  # ... and the right token it refuses does not
    assert status(TOKEN) == 401


# -- the embedded model server -------------------------------------------------------------------------------------


class _FakeTokenizer:
    chat_template = ""

    def __init__(self):
        self.rendered = 0

    def apply_chat_template(self, messages, **kw):
        self.rendered += 1
        return [1, 2, 3]


@contextmanager
def _serve_app(app):
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def fake_serve():
    """`clawgym serve`'s app (create_app, the real FastAPI app and middleware) over an engine that records what
    reaches it instead of generating."""
    from clawgym.serve.app import create_app
    from clawgym.serve.engine import EngineError

    submitted: list = []

    def submit(req):
        submitted.append(req)
        raise EngineError("fake engine: reached")

    engine = SimpleNamespace(tokenizer=_FakeTokenizer(), submit=submit, busy=False, precision="fp32", threads=1,
                             stats={}, context_length=8192, adapter_status=dict, adapters=list,
                             has_adapter=lambda name: False, decode={"path": "fake", "q4_matrices": 0},
                             weights={"path": "fake", "version": 0})
    with _serve_app(create_app(engine, "fake")) as port:
        yield port, engine, submitted


def test_serve_refuses_100mb_body_with_413(fake_serve):
    """The embedded server refuses a 100 MB chat request with a 413 stating the limit, without parsing or
    rendering it; a normal request still reaches the engine."""
    port, engine, submitted = fake_serve
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    body = json.dumps(_chat_body("fake", filler=100 * MB)).encode()
    r = httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=120)
    del body
    assert r.status_code == 413, r.text[:300]
    assert 4 * MB <= _limit_in(r.json()["error"]) < 100 * MB
    assert engine.tokenizer.rendered == 0 and submitted == []
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {100 * MB}\r\n\r\n")
    status, payload = _raw_request(port, head, [b"{"])
    assert status == 413 and _limit_in(json.loads(payload)["error"]) < 100 * MB
    r = httpx.post(url, json=_chat_body("fake", filler=4 * MB), timeout=60)
    assert r.status_code == 400 and "fake engine: reached" in r.text
    assert engine.tokenizer.rendered == 1 and len(submitted) == 1
    assert httpx.get(f"http://127.0.0.1:{port}/health").json()["status"] == "ok"


# -- a rollout's gateway: no sandbox is trusted ---------------------------------------------------------------------
# The gateway of a rollout serves every sandbox on one unix socket (bound into all of them) and forwards with the
# host's upstream key. The attacks below came from one sandbox against another sandbox's trajectory, the budget,
# the upstream and the host process.

SECRET = "rollout-route-secret"
UPSTREAM_KEY = "host-upstream-key"


def _rollout_gateway(upstream_url: str, pool, sock_dir, **kw) -> GatewayThread:
    """The gateway as a rollout runs it (clawgym.rollout.setup): a route secret, the unix socket for sandboxes."""
    return GatewayThread(upstream_url, pool, uds=sock_dir / "gw.sock", route_secret=SECRET, **kw)


@pytest.fixture
def sock_dir():
    """A short directory for the gateway's socket (unix socket paths are limited to 108 bytes)."""
    import shutil
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp(prefix="clawgym-gw-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _sandbox_client(gw: GatewayThread) -> httpx.Client:
    """HTTP over the gateway's unix socket: what a sandbox's relay reaches."""
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(gw.uds)), base_url="http://gateway", timeout=30)


def _path(url: str) -> str:
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def _bearer(key: str | None) -> dict:
    return {} if key is None else {"Authorization": f"Bearer {key}"}


def _raw_uds(path: str, method: str, target: str, headers: dict) -> tuple[int, dict]:
    """One request sent byte for byte on a unix socket (an HTTP client would resolve `..` before sending it):
    (status, JSON body)."""
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(15)
        s.connect(path)
        s.sendall(f"{method} {target} HTTP/1.1\r\nHost: gateway\r\n{head}Content-Length: 0\r\n"
                  f"Connection: close\r\n\r\n".encode("latin-1"))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head_end = data.index(b"\r\n\r\n")
    return int(data.split(b" ", 2)[1]), json.loads(data[head_end + 4:])


def test_sandbox_cannot_write_steps_into_another_trajectorys_route(upstream, tmp_path, sock_dir):
    """Attack: from one sandbox, 3 calls on another trajectory's route (`victim#0`) were recorded as its steps and
    spent its budget (3 calls), so the victim's own first call was refused 400 budget_exceeded. Each route now needs
    its own key: without it (no key, a made-up one, the attacker's own, the victim's key for another group) the
    call is a 401 that neither reaches the model nor counts; ids in headers or the model name do not move the
    attacker's own calls either; the victim's call goes through as its first step."""
    from clawgym.gateway import Budget

    body = _chat_body(upstream.model)
    with Pool(tmp_path / "pool") as pool, \
            _rollout_gateway(upstream.base_url, pool, sock_dir, budget=Budget(max_steps=3)) as gw, \
            _sandbox_client(gw) as sandbox:
        victim = _path(gw.url_for("victim#0", "task-a")) + "/chat/completions"
        mine = _path(gw.url_for("attacker#0", "task-a")) + "/chat/completions"
        own_key = gw.key_for("attacker#0", "task-a")
        for key in (None, "clawgym", "x" * 40, own_key, gw.key_for("victim#0", "task-b"), gw.key_for("victim#0")):
            for _ in range(3):
                r = sandbox.post(victim, json=body, headers=_bearer(key))
                assert r.status_code == 401, (key, r.status_code, r.text[:200])
                assert r.json()["error"]["type"] == "authentication_error"
        r = sandbox.post(mine, json={**body, "model": f"{upstream.model}__victim#0__task-a"},
                         headers={**_bearer(own_key), "X-Clawgym-Trajectory": "victim#0", "X-Clawgym-Group": "task-a"})
        assert r.status_code == 200, r.text[:300]
        assert len(upstream.requests) == 1
        r = sandbox.post(victim, json=body, headers=_bearer(gw.key_for("victim#0", "task-a")))
        assert r.status_code == 200, r.text[:300]
        assert r.json()["choices"][0]["message"]["content"] == "ok"
        assert gw.gateway.budgets.spend("victim#0")["steps"] == 1
        steps = pool.steps()
    assert sorted((s.trajectory_id, s.group_id, s.step_index) for s in steps) == [
        ("attacker#0", "task-a", 0), ("victim#0", "task-a", 0)]


def test_rollout_agents_get_only_their_own_routes_key(tmp_path):
    """Where the keys go: the built-in agent sends its route's key on each call, and OpenClaw's openclaw.json
    holds its route's key, never the rollout's secret (which would open every route)."""
    from clawgym.agent.openclaw.agent import OpenClawAgent, OpenClawSettings
    from clawgym.gateway import route_key, trajectory_key

    route = "/t/task%231%230/g/task%231/v1"
    key = route_key(SECRET, route)
    assert key == trajectory_key(SECRET, "task#1#0", "task#1") == route_key(SECRET, f"http://127.0.0.1:9{route}")
    assert key != trajectory_key(SECRET, "task#1#0", "task#2") and key != trajectory_key("other", "task#1#0", "task#1")
    assert SECRET not in key

    state = tmp_path / "state"
    state.mkdir()
    sandbox = SimpleNamespace(mounts={"/clawgym/state": state}, workdir="/workspace",
                              exec=lambda *a, **k: SimpleNamespace(exit_code=0, timed_out=False, limit=None))
    ctx = SimpleNamespace(trajectory_id="task#1#0", time_left=lambda: 0.0)
    agent = OpenClawAgent(OpenClawSettings(model="m", api_key=SECRET), route=lambda task, c: route)
    agent.run(SimpleNamespace(instruction="do it", sessions=[]), sandbox, ctx)
    written = (state / "openclaw.json").read_text()
    assert json.loads(written)["models"]["providers"]["clawgym"]["apiKey"] == key
    assert SECRET not in written


def test_calls_without_a_trajectory_cannot_escape_the_budget(upstream, tmp_path, sock_dir):
    """Attack: chat calls naming no trajectory were recorded under `_unassigned` and never budgeted: 5 went
    through a limit of 3. A rollout's gateway refuses a call without a trajectory route (403, whatever headers or
    model name it carries); a standalone gateway counts such calls as one trajectory of their own."""
    from clawgym.gateway import Budget

    body = _chat_body(upstream.model)
    with Pool(tmp_path / "pool") as pool, \
            _rollout_gateway(upstream.base_url, pool, sock_dir, budget=Budget(max_steps=3)) as gw, \
            _sandbox_client(gw) as sandbox:
        for headers, model in (({}, upstream.model), ({"X-Clawgym-Trajectory": "t#0"}, upstream.model),
                               ({}, f"{upstream.model}__t#0__g"), (_bearer(gw.key_for("t#0")), upstream.model)):
            r = sandbox.post("/v1/chat/completions", json={**body, "model": model}, headers=headers)
            assert r.status_code == 403, (headers, model, r.text[:200])
            assert r.json()["error"]["type"] == "trajectory_route_required"
            assert "/t/<trajectory>" in r.json()["error"]["message"]
        assert sandbox.get("/v1/models").status_code == 403
        assert upstream.requests == [] and pool.steps() == []
    with Pool(tmp_path / "pool2") as pool, GatewayThread(upstream.base_url, pool, budget=Budget(max_steps=3)) as gw:
        codes = [httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=30) for _ in range(5)]
        assert [r.status_code for r in codes] == [200, 200, 200, 400, 400]
        assert codes[-1].json()["error"]["type"] == "budget_exceeded"
        assert gw.gateway.budgets.spend("_unassigned")["steps"] == 3
        assert len(upstream.requests) == 3 and len(pool.steps(trajectory_id="_unassigned")) == 3


def test_gateway_cli_has_budget_options():
    from typer.testing import CliRunner

    from clawgym.cli.app import app

    out = CliRunner().invoke(app, ["gateway", "--help"], env={"COLUMNS": "200"}).output
    assert "--budget-steps" in out and "--budget-tokens" in out and "--budget-wall-s" in out


class CountingUpstream:
    """A real HTTP server on 127.0.0.1 that records every request reaching it (method, path, Authorization) and
    answers each like an OpenAI-compatible server would."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self
        self.seen: list[tuple[str, str, str | None]] = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                outer.seen.append((self.command, self.path, self.headers.get("Authorization")))
                if self.path.endswith("/chat/completions"):
                    data = {"id": "c1", "object": "chat.completion", "model": "m", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
                elif self.path.endswith("/models"):
                    data = {"object": "list", "data": [{"id": "m", "object": "model"}]}
                else:
                    data = {"ok": True, "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
                payload = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def test_sandbox_cannot_reach_upstream_admin_routes_with_the_hosts_key(tmp_path, sock_dir):
    """Attack: every `/v1/*` route was forwarded upstream with the host's API key, so a sandbox loaded and
    unloaded LoRA adapters and listed and deleted the upstream's files. Only chat/completions, completions,
    responses (POST) and models (GET) are forwarded now, even for a caller with a valid route key; anything else is
    a 404 (or a 405 with `Allow`) in OpenAI's error format, and never reaches the upstream with or without the key.
    Path tricks (dot segments, encoded slashes, trailing slashes) change nothing."""
    up = CountingUpstream()
    try:
        with Pool(tmp_path / "pool") as pool, \
                _rollout_gateway(up.base_url, pool, sock_dir, upstream_key=UPSTREAM_KEY) as gw, \
                _sandbox_client(gw) as sandbox:
            base = _path(gw.url_for("t#0", "g"))
            auth = _bearer(gw.key_for("t#0", "g"))
            refused = [("POST", "/load_lora_adapter", 404), ("POST", "/unload_lora_adapter", 404),
                       ("GET", "/files", 404), ("DELETE", "/files/file-1", 404), ("POST", "/files", 404),
                       ("POST", "/fine_tuning/jobs", 404), ("POST", "/embeddings", 404), ("GET", "/batches", 404),
                       ("GET", "/responses/resp_1", 404), ("DELETE", "/models/m", 405), ("POST", "/models", 405),
                       ("GET", "/chat/completions", 405), ("DELETE", "/chat/completions", 405),
                       ("POST", "/chat/completions/", 404)]
            for method, route, status in refused:
                r = sandbox.request(method, base + route, headers={**auth, "Content-Type": "application/json"},
                                    content=b'{"lora_name": "x", "lora_path": "/tmp/x"}' if method == "POST" else None)
                assert r.status_code == status, (method, route, r.status_code, r.text[:200])
                err = r.json()["error"]
                assert set(err) >= {"message", "type", "param", "code"} and err["code"] == status, err
                if status == 405:
                    assert method not in r.headers["allow"]
            tricks = [("GET", "/models/.."), ("GET", "/models/%2e%2e/files"), ("GET", "/models/..%2Ffiles"),
                      ("GET", "/models/a/./b"), ("POST", "/chat%2Fcompletions"),
                      ("POST", "/chat/completions/../../files"), ("GET", "/models/../files")]
            for method, route in tricks:
                status, payload = _raw_uds(str(gw.uds), method, base + route, auth)
                assert status == 404 and payload["error"]["code"] == 404, (method, route, status, payload)
            assert up.seen == []  # nothing reached the upstream, so the host's key went nowhere
            assert sandbox.get(base + "/models", headers=auth).json()["data"][0]["id"] == "m"
            assert sandbox.get(base + "/models/org/m", headers=auth).status_code == 200
            r = sandbox.post(base + "/chat/completions", headers=auth, json={"model": "m", "messages": []})
            assert r.status_code == 200
            for route in ("/completions", "/responses"):
                assert sandbox.post(base + route, headers=auth, json={"model": "m", "prompt": "x"}).status_code == 200
        assert [(m, p) for m, p, _ in up.seen] == [("GET", "/v1/models"), ("GET", "/v1/models/org/m"),
                                                   ("POST", "/v1/chat/completions"), ("POST", "/v1/completions"),
                                                   ("POST", "/v1/responses")]
        assert {a for _, _, a in up.seen} == {f"Bearer {UPSTREAM_KEY}"}
    finally:
        up.close()


def test_wrong_typed_request_fields_are_400_not_500(upstream, tmp_path, caplog):
    """Attack: `"stream_options": "x"` in a chat request was a 500 with a traceback in the gateway's log. Every
    field the gateway reads is checked: a wrong type is a 400 in OpenAI's format naming the field, nothing is
    forwarded or stored, nothing is logged as an error, and null still means absent."""
    import logging

    body = _chat_body(upstream.model)
    bad = {"stream_options": "x", "model": 5, "messages": {"role": "user"}, "tools": "ls", "stream": "yes",
           "return_token_ids": "yes", "logprobs": 1}
    caplog.set_level(logging.ERROR)
    with Pool(tmp_path / "pool") as pool, GatewayThread(upstream.base_url, pool) as gw:
        url = f"{gw.url_for('t-types')}/chat/completions"
        cases = [({**body, k: v}, k) for k, v in bad.items()]
        cases += [({**body, "messages": ["hi"]}, "messages.0"), ({**body, "tools": [3]}, "tools.0"),
                  ({**body, "stream": True, "stream_options": {"include_usage": "yes"}},
                   "stream_options.include_usage"),
                  ({**body, "model": f"{upstream.model}__t", "stream_options": ["x"]}, "stream_options")]
        for sent, param in cases:
            r = httpx.post(url, json=sent, timeout=30)
            assert r.status_code == 400, (param, r.status_code, r.text[:300])
            err = r.json()["error"]
            assert err["param"] == param and err["type"] == "invalid_request_error" and param.split(".")[0] in err["message"]
        assert upstream.requests == [] and pool.steps() == []
        ok = httpx.post(url, json={**body, "stream_options": None, "tools": None, "stream": False}, timeout=30)
        assert ok.status_code == 200, ok.text[:300]
        assert gw.gateway.stats["invalid_requests"] == len(cases)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text[-2000:]


# A sandboxed process that opens N connections to the gateway's socket and holds them, idle, until killed.
HOLD_IDLE = r"""
import resource, socket, sys, time
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
path, n = sys.argv[1], int(sys.argv[2])
held, deadline = [], time.monotonic() + 20
while len(held) < n and time.monotonic() < deadline:
    s = socket.socket(socket.AF_UNIX)
    s.setblocking(False)
    try:
        s.connect(path)
        held.append(s)
    except BlockingIOError:  # the listen queue is full: the gateway has not accepted enough yet
        s.close()
        time.sleep(0.001)
print("held", len(held), flush=True)
time.sleep(600)
"""

# A sandboxed agent's model call over the gateway's socket: prints the status and the answer.
ONE_CALL = r"""
import http.client, socket, sys
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        self.sock.connect(sys.argv[1])
c = Unix("gateway")
c.request("POST", sys.argv[2], body=sys.argv[4], headers={"Authorization": "Bearer " + sys.argv[3],
                                                          "Content-Type": "application/json"})
r = c.getresponse()
print(r.status, r.read().decode())
"""


@contextmanager
def _few_free_descriptors(free: int = 800):
    """This process's RLIMIT_NOFILE soft limit lowered to leave it `free` descriptors for a while (the attack then
    needs 3,000 connections, not 20,000)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(len(os.listdir("/proc/self/fd")) + free, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _sandbox_with_socket(backend, sock_dir):
    from clawgym.agent.openclaw import GATEWAY_MOUNT
    from clawgym.core.records import WorkspaceSpec
    from clawgym.sandbox.base import Mount, SandboxLimits

    return backend.start(WorkspaceSpec(mount_dir="/workspace"), limits=SandboxLimits(),
                         mounts=[Mount(target=GATEWAY_MOUNT, source=sock_dir)])


def _wait_for_line(sandbox, path: str, within: float = 60) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        out = sandbox.exec(["cat", path], timeout=10).stdout.strip()
        if out:
            return out
        time.sleep(0.2)
    raise AssertionError(f"nothing in {path} after {within} s")


def test_idle_connections_from_one_sandbox_cannot_exhaust_the_hosts_file_descriptors(bwrap_backend, upstream,
                                                                                     tmp_path, sock_dir):
    """Attack: 20,000 idle connections from one sandboxed process to the gateway's socket used up the host
    process's file descriptors (`Errno 24`): the gateway's accept failed, and the host could open nothing (the
    sandboxes' channels failed). Here the host process has 800 descriptors left and one bwrap sandbox opens
    3,000 idle connections: the gateway holds at most its per-sandbox limit of them (the rest closed at once, the held
    ones after the idle timeout), another sandbox's trajectory gets its answer meanwhile, and the host process
    still opens 300 files."""
    from clawgym.agent.openclaw import GATEWAY_MOUNT
    from clawgym.gateway import ConnectionLimits

    limits = ConnectionLimits(per_peer=16, total=256, idle_s=2.0)
    sock = f"{GATEWAY_MOUNT}/gw.sock"
    with _few_free_descriptors(), Pool(tmp_path / "pool") as pool, \
            _rollout_gateway(upstream.base_url, pool, sock_dir, connections=limits) as gw:
        attacker = _sandbox_with_socket(bwrap_backend, sock_dir)
        victim = _sandbox_with_socket(bwrap_backend, sock_dir)
        try:
            attacker.exec(["sh", "-c", f"python3 -c '{HOLD_IDLE}' {sock} 3000 >held.txt 2>&1 &"], timeout=30)
            held = _wait_for_line(attacker, "held.txt")
            assert held.startswith("held ") and int(held.split()[1]) >= 2000, held  # the attack took place
            guard = gw.gateway.connections
            assert guard.open <= limits.per_peer and guard.stats["refused_peer"] >= 2000 - limits.per_peer
            route = _path(gw.url_for("victim#0", "g")) + "/chat/completions"
            res = victim.exec(["python3", "-c", ONE_CALL, sock, route, gw.key_for("victim#0", "g"),
                               json.dumps(_chat_body(upstream.model))], timeout=60)
            status, _, answer = res.stdout.strip().partition(" ")
            assert status == "200" and json.loads(answer)["choices"][0]["message"]["content"] == "ok", res
            files = [open(tmp_path / f"f{i}", "w") for i in range(300)]  # noqa: SIM115 - held open on purpose
            for f in files:
                f.close()
            # the connections the attacker still holds are idle: closed after idle_s
            deadline = time.monotonic() + 10 * limits.idle_s
            while guard.open and time.monotonic() < deadline:
                time.sleep(0.1)
            assert guard.open == 0 and guard.stats["idle_closed"] >= limits.per_peer
        finally:
            attacker.stop()
            victim.stop()
        assert [s.trajectory_id for s in pool.steps()] == ["victim#0"]


def test_idle_connections_from_one_sandbox_cannot_exhaust_a_cluster_workers_relay(bwrap_backend, upstream,
                                                                                  tmp_path):
    """The same attack on a cluster node: there the sandboxes' socket is the worker's relay to the driver's TCP
    gateway (clawgym.agent.openclaw.remote), and each connection a sandbox opens costs the worker two
    descriptors. The relay holds each sandbox to its per-sandbox limit, closes what the gateway closes as idle, and
    another sandbox's call, with the key the worker derived from the gateway's token, goes through."""
    from clawgym.agent.openclaw import GATEWAY_MOUNT
    from clawgym.agent.openclaw.remote import NodeRelay
    from clawgym.gateway import ConnectionLimits, route_key

    token = "cluster-gateway-token"
    limits = ConnectionLimits(per_peer=16, total=256, idle_s=2.0)
    sock = f"{GATEWAY_MOUNT}/gw.sock"
    with _few_free_descriptors(), Pool(tmp_path / "pool") as pool, \
            GatewayThread(upstream.base_url, pool, token=token, route_secret=token, connections=limits) as gw:
        relay = NodeRelay("127.0.0.1", gw.port, limits)
        attacker = _sandbox_with_socket(bwrap_backend, relay.dir)
        victim = _sandbox_with_socket(bwrap_backend, relay.dir)
        try:
            attacker.exec(["sh", "-c", f"python3 -c '{HOLD_IDLE}' {sock} 3000 >held.txt 2>&1 &"], timeout=30)
            held = _wait_for_line(attacker, "held.txt")
            assert held.startswith("held ") and int(held.split()[1]) >= 2000, held
            assert relay.guard.open <= limits.per_peer and relay.guard.stats["refused_peer"] >= 2000 - limits.per_peer
            route = _path(gw.url_for("victim#0", "g"))
            res = victim.exec(["python3", "-c", ONE_CALL, sock, route + "/chat/completions", route_key(token, route),
                               json.dumps(_chat_body(upstream.model))], timeout=60)
            assert res.stdout.startswith("200 "), res
            files = [open(tmp_path / f"f{i}", "w") for i in range(300)]  # noqa: SIM115 - held open on purpose
            for f in files:
                f.close()
            deadline = time.monotonic() + 10 * limits.idle_s
            while relay.guard.open and time.monotonic() < deadline:
                time.sleep(0.1)
            assert relay.guard.open == 0
        finally:
            attacker.stop()
            victim.stop()
        assert [s.trajectory_id for s in pool.steps()] == ["victim#0"]


def test_idle_timeout_spares_a_call_the_gateway_is_answering(tmp_path, sock_dir):
    """The idle timeout ends connections whose client owes the next bytes, never one whose answer is on its way:
    a model call that takes 3 s gets its answer under a 1 s idle timeout, streamed or not, on the socket and over
    TCP."""
    from clawgym.gateway import ConnectionLimits

    slow = "a slow model"
    body = {"model": "scripted-model", "messages": [{"role": "user", "content": slow}]}
    with ScriptedLLM({slow: [Turn("late but fine")]}, faults={slow: Fault(delay_s=3.0)}) as up, \
            Pool(tmp_path / "pool") as pool, \
            _rollout_gateway(up.base_url, pool, sock_dir, connections=ConnectionLimits(idle_s=1.0)) as gw, \
            _sandbox_client(gw) as sandbox, httpx.Client(timeout=30) as host:
        route = gw.url_for("t#0", "g")
        auth = _bearer(gw.key_for("t#0", "g"))
        r = sandbox.post(_path(route) + "/chat/completions", json=body, headers=auth)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "late but fine"
        r = sandbox.post(_path(route) + "/chat/completions", json={**body, "stream": True}, headers=auth)
        chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
        assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == \
            "late but fine" and r.text.rstrip().endswith("data: [DONE]")
        r = host.post(route + "/chat/completions", json=body, headers=auth)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "late but fine"
        assert len(pool.steps(trajectory_id="t#0")) == 3
