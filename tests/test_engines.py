"""Any OpenAI-compatible engine, faithfully (issue #34): requests every engine takes, streams that break are never
"completed", every choice recorded, and the embedded server refusing what it does not do.

On real parts: the embedded server (the shipped SmolLM2 GGUF) probed with the `openai` client, the gateway in
front of real HTTP upstreams on 127.0.0.1 (one that cuts its stream mid-answer, one that answers with n=2), and
the client against them."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest

from clawgym.gateway import GatewayThread
from clawgym.llm import LLMClient
from clawgym.llm.client import LLMError
from clawgym.pool.store import Pool
from test_serve import COPY_LS, LS_TOOL, server  # noqa: F401  (the module-scoped embedded server fixture)

# -- requests every engine takes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("given, used", [
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"), ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1"),
    ("http://h:1/v1/", "http://h:1/v1"), ("https://api.example.com/api/v1", "https://api.example.com/api/v1"),
    ("https://g.example.com/v1beta/openai/", "https://g.example.com/v1beta/openai"),
    ("http://127.0.0.1:9/t/a%23b/g/x/v1", "http://127.0.0.1:9/t/a%23b/g/x/v1"),
])
def test_base_url_without_v1_is_handled_one_way_everywhere(given, used):
    from clawgym.llm.endpoint import openai_base_url

    assert openai_base_url(given) == used
    assert LLMClient("m", given).base_url == used


def _send_json(h: BaseHTTPRequestHandler, obj: dict) -> None:
    body = json.dumps(obj).encode()
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


class _Upstream:
    """A real HTTP server on 127.0.0.1 that answers chat completions the way a test needs (`mode`), counting
    the requests it got."""

    def __init__(self, mode: str):
        self.mode, self.requests = mode, []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                _send_json(self, {"object": "list", "data": [{"id": "m", "object": "model"}]})

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                outer.requests.append(req)
                outer.answer(self, req)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, h: BaseHTTPRequestHandler, req: dict) -> None:
        chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
        if self.mode in ("cut", "empty", "n2-stream"):
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.end_headers()
            if self.mode == "cut":  # one token, then the connection closes: no finish reason, no [DONE]
                h.wfile.write(b"data: " + json.dumps({**chunk, "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": "I"}, "finish_reason": None}]}).encode()
                    + b"\n\n")
            elif self.mode == "n2-stream":  # two choices, interleaved
                for i, word in [(0, "Red"), (1, "Blue"), (0, " apple"), (1, " sky")]:
                    h.wfile.write(b"data: " + json.dumps({**chunk, "choices": [
                        {"index": i, "delta": {"content": word}, "finish_reason": None}]}).encode() + b"\n\n")
                for i in (0, 1):
                    h.wfile.write(b"data: " + json.dumps({**chunk, "choices": [
                        {"index": i, "delta": {}, "finish_reason": "stop"}]}).encode() + b"\n\n")
                h.wfile.write(b"data: [DONE]\n\n")
            h.wfile.flush()
            h.close_connection = True
            return
        _send_json(h, {"id": "c1", "object": "chat.completion", "model": "m", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Red apple"}, "finish_reason": "stop"},
            {"index": 1, "message": {"role": "assistant", "content": "Blue sky"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}})

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def gateway(tmp_path):
    made = []

    def make(mode: str):
        up = _Upstream(mode)
        pool = Pool(tmp_path / f"pool-{mode}")
        gw = GatewayThread(up.url, pool)
        gw.__enter__()
        made.append((up, pool, gw))
        return up, pool, gw

    yield make
    for up, pool, gw in made:
        gw.__exit__(None, None, None)
        pool.close()
        up.close()


@pytest.mark.parametrize("mode", ["cut", "empty"])
def test_stream_cut_mid_answer_through_the_gateway_is_never_completed(gateway, mode):
    """The gateway logged the break but closed the response cleanly, the client checked neither [DONE] nor a
    finish reason: the partial "I" was recorded as a completed answer. An empty 200 stream was a finished empty
    answer."""
    up, pool, gw = gateway(mode)
    client = LLMClient("m", gw.url_for("victim#0", "victim"), stream=True, max_retries=0)
    with pytest.raises(LLMError) as err:
        client.chat([{"role": "user", "content": "hi"}])
    assert err.value.retryable and err.value.kind == "stream_broken", err.value
    # the openai client itself, through the gateway, raises too (an error event, no [DONE])
    raw = openai.OpenAI(base_url=gw.url_for("other#0", "other"), api_key="x", max_retries=0)
    with pytest.raises(openai.APIError):
        for _ in raw.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True):
            pass
    # and straight at the upstream (no gateway), the client refuses it the same way
    direct = LLMClient("m", up.url, stream=True, max_retries=0)
    with pytest.raises(LLMError):
        direct.chat([{"role": "user", "content": "hi"}])


@pytest.mark.parametrize("stream", [False, True])
def test_n2_through_the_gateway_records_two_steps(gateway, stream):
    """With n=2 the pool kept only choice 0 (non-stream), and interleaved the choices' text when streaming
    ("RedBlue apple sky")."""
    up, pool, gw = gateway("n2-stream" if stream else "n2")
    raw = openai.OpenAI(base_url=gw.url_for("t#0", "t"), api_key="x", max_retries=0)
    if stream:
        got = {0: "", 1: ""}
        for c in raw.chat.completions.create(model="m", messages=[{"role": "user", "content": "two"}], n=2,
                                             stream=True):
            for ch in c.choices:
                got[ch.index] += ch.delta.content or ""
        assert got == {0: "Red apple", 1: "Blue sky"}
    else:
        resp = raw.chat.completions.create(model="m", messages=[{"role": "user", "content": "two"}], n=2)
        assert [c.message.content for c in resp.choices] == ["Red apple", "Blue sky"]
    gw.__exit__(None, None, None)  # flushes the pool's writer
    steps = sorted(pool.steps(trajectory_id="t#0"), key=lambda s: s.step_index)
    assert [s.response["content"] for s in steps] == ["Red apple", "Blue sky"]
    assert [s.step_index for s in steps] == [0, 1]


def test_preflight_names_the_users_url_in_one_line(gateway):
    from clawgym.llm.endpoint import check_endpoint

    with pytest.raises(LLMError) as err:
        check_endpoint("http://127.0.0.1:9", "m", timeout=5)
    assert "http://127.0.0.1:9/v1" in str(err.value) and "\n" not in str(err.value)
    up, _, _ = gateway("n2")
    assert "serves 'm'" in check_endpoint(up.url.removesuffix("/v1"), "m")


def test_agent_sends_tool_choice_and_an_empty_content_beside_tool_calls(gateway):
    """llama.cpp's server puts tools in the prompt only when tool_choice is sent, and answers 500 to an assistant
    message with `content: null` beside its tool calls."""
    up, _, _ = gateway("n2")
    client = LLMClient("m", up.url, max_retries=0)
    res = client.chat([{"role": "user", "content": "hi"}], tools=[LS_TOOL])
    assert up.requests[-1]["tool_choice"] == "auto"
    res.tool_calls = [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    res.content = ""
    assert res.message()["content"] == ""


# -- the embedded server refuses what it does not do ------------------------------------------------------------


@pytest.mark.parametrize("extra, param", [
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tool_choice": {"type": "function", "function": {"name": "ls"}}}, "tool_choice"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}}, "response_format"),
])
def test_embedded_server_refuses_what_it_does_not_do(server, extra, param):  # noqa: F811
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="smollm2-135m", messages=[{"role": "user", "content": "hi"}],
                                       tools=[LS_TOOL], max_tokens=5, **extra)
    assert err.value.status_code == 400 and param in str(err.value)


def test_embedded_server_accepts_auto_none_and_text(server):  # noqa: F811
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    for extra in ({"tool_choice": "auto"}, {"tool_choice": "none"}, {"response_format": {"type": "text"}}):
        r = client.chat.completions.create(model="smollm2-135m", messages=[{"role": "user", "content": "hi"}],
                                           tools=[LS_TOOL], max_tokens=3, **extra)
        assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")


@pytest.mark.parametrize("stream", [False, True])
def test_embedded_server_says_length_when_cut_mid_arguments(server, stream):  # noqa: F811
    """finish_reason was "tool_calls" when generation was cut at max_tokens in the middle of a call's arguments
    (OpenAI and vLLM say "length")."""
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    long_call = COPY_LS.replace('{"path": "."}', '{"path": "' + "a/" * 40 + '"}')
    kw = dict(model="smollm2-135m", messages=[{"role": "user", "content": long_call}], tools=[LS_TOOL],
              max_tokens=14, temperature=0)
    if stream:
        finish = [c.choices[0].finish_reason for c in client.chat.completions.create(**kw, stream=True)
                  if c.choices and c.choices[0].finish_reason]
        assert finish == ["length"]
    else:
        assert client.chat.completions.create(**kw).choices[0].finish_reason == "length"


# -- outages are never a finished run ----------------------------------------------------------------------------


def test_rollout_exits_non_zero_on_infra_errors_and_a_rerun_gets_fresh_trajectory_ids(bwrap_backend, tmp_path):
    """`rollout` exited 0 when every episode was an infra error; a resumed episode reused the old trajectory id
    in the pool (dead error steps beside the real one)."""
    import subprocess
    import sys

    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task, Trajectory
    from conftest import REPO
    from scripted_llm import Fault, ScriptedLLM, turns_from_reference

    task = read_records(REPO / "examples" / "tasks.jsonl", Task)[0]
    run = tmp_path / "run"
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(task.model_dump_json() + "\n")
    cmd = [sys.executable, "-m", "clawgym.cli.app", "rollout", str(tasks_file), "--agent", "llm", "--model",
           "scripted-model", "--sandbox", "bwrap", "--infra-retries", "0", "--request-timeout", "5", "-o", str(run)]
    with ScriptedLLM({task.instruction: turns_from_reference(task)}, {task.instruction: Fault(status=500)}) as llm:
        down = subprocess.run([*cmd, "--base-url", llm.base_url], capture_output=True, text=True, timeout=300)
    assert down.returncode != 0 and "infrastructure error" in down.stderr, (down.returncode, down.stderr[-1500:])
    with ScriptedLLM({task.instruction: turns_from_reference(task)}) as llm:
        up = subprocess.run([*cmd, "--base-url", llm.base_url], capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stderr[-1500:]
    latest = {t.id: t for t in read_records(run / "trajectories.jsonl", Trajectory)}
    (traj,) = latest.values()
    assert traj.status == "completed" and traj.attempts == 2
    pool = Pool(run / "pool")
    try:
        ids = {s.trajectory_id for s in pool.steps()}
    finally:
        pool.close()
    assert f"{traj.id}~2" in ids and traj.id in ids  # the dead attempt kept apart, the redo under a fresh id
    dead = [s for s in pool_steps(run, traj.id)]
    assert dead and all(s.status == "error" for s in dead)


def pool_steps(run, trajectory_id):
    pool = Pool(run / "pool")
    try:
        return pool.steps(trajectory_id=trajectory_id)
    finally:
        pool.close()
