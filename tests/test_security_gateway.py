"""Attacks on the HTTP servers (the gateway, the embedded model server), over real HTTP on 127.0.0.1: oversized
request bodies (announced by Content-Length, or streamed chunked without one), and the bearer token (its
comparison, the scheme's case, malformed Authorization headers)."""

from __future__ import annotations

import hmac
import json
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
from scripted_llm import ScriptedLLM, Turn

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
        r = httpx.post(f"{gw.base_url}/embeddings", json={"input": "x" * (2 * MB)}, timeout=60)
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
