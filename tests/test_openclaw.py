"""The real OpenClaw (npm `openclaw`, unmodified) run as a black-box agent inside bwrap and Docker sandboxes, its
model calls through the real gateway (unix socket bound into the sandbox + the in-sandbox relay) to a scripted
OpenAI-compatible server or the embedded SmolLM2 server; the real verifier, pool and SQLite transcript.

One rollout (three tasks in parallel, module-scoped) serves the default tests: a task solved with a write tool
call, a network probe run by OpenClaw's own exec tool, and a runaway model stopped by the gateway's budget.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from conftest import datasets_root, require
from scripted_llm import ScriptedLLM, Turn

WRITE = "Create the file greeting.txt holding exactly the line: hello from openclaw"
PROBE = "Find out whether this machine can reach the network, and save what you find in probe.json"
RUNAWAY = "Keep listing the files of the workspace until I tell you to stop"
BUDGET_STEPS = 4

GRADE_WRITE = '''
def grade(transcript, workspace_path):
    import os
    p = os.path.join(workspace_path, "greeting.txt")
    ok = os.path.exists(p) and open(p).read().strip() == "hello from openclaw"
    calls = [c for e in transcript if e.get("type") == "message"
             for c in e["message"].get("content", []) if c.get("type") == "toolCall"]
    used = any(c["name"] == "write" and c["params"]["path"].endswith("greeting.txt") for c in calls)
    return {"file_written": 1.0 if ok else 0.0, "write_call_in_transcript": 1.0 if used else 0.0}
'''

GRADE_PROBE = '''
def grade(transcript, workspace_path):
    import json, os
    p = os.path.join(workspace_path, "probe.json")
    if not os.path.exists(p):
        return {"probe_ran": 0.0}
    r = json.load(open(p))
    outside = [v for k, v in r.items() if k != "relay"]
    return {"probe_ran": 1.0, "no_route_out": 1.0 if outside and all(v != "connected" for v in outside) else 0.0,
            "relay_up": 1.0 if r.get("relay") == "connected" else 0.0}
'''


GRADE_RUNAWAY = '''
def grade(transcript, workspace_path):
    calls = [c for e in transcript if e.get("type") == "message"
             for c in e["message"].get("content", []) if c.get("type") == "toolCall"]
    return {"listed": 1.0 if any(c["name"] == "exec" for c in calls) else 0.0}
'''


def _probe_command(targets: dict[str, tuple[str, int]]) -> str:
    """A python3 one-shot run by OpenClaw's exec tool: try each target, write the outcome to probe.json."""
    code = (
        "import json, socket\n"
        f"targets = {targets!r}\n"
        "out = {}\n"
        "for name, (host, port) in targets.items():\n"
        "    s = socket.socket(); s.settimeout(3)\n"
        "    try:\n"
        "        s.connect((host, port)); out[name] = 'connected'\n"
        "    except OSError as e:\n"
        "        out[name] = type(e).__name__ + ': ' + str(e)\n"
        "    finally:\n"
        "        s.close()\n"
        "json.dump(out, open('probe.json', 'w'), indent=1)\n"
        "print(json.dumps(out))\n"
    )
    return "python3 - <<'EOF'\n" + code + "EOF"


def _host_ip() -> str | None:
    """This host's address on its default route (not loopback), if it has one."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("10.255.255.255", 1))
        ip = s.getsockname()[0]
        return None if ip.startswith("127.") else ip
    except OSError:
        return None
    finally:
        s.close()


def _task(tid: str, instruction: str, grade: str, timeout: float = 420):
    from clawgym.core.records import Task

    spec = {"id": tid, "source": "test", "category": "openclaw", "instruction": instruction,
            "timeout_seconds": timeout, "workspace": {"files": [{"path": "README.md", "content": "notes\n"}]},
            "verifier": {"code": {"kind": "python", "source": grade}}}
    return Task.model_validate(spec)


def _first_user(body: dict) -> str:
    for m in body.get("messages") or []:
        if m.get("role") == "user":
            c = m.get("content")
            return c if isinstance(c, str) else "".join(p.get("text", "") for p in c or [])
    return ""


class Scripts:
    """Scripted turns keyed by the task prompt (OpenClaw prefixes the user message with a timestamp and appends
    runtime context, so the key is looked for inside the first user message)."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[Turn]] = {}

    def __call__(self, body: dict) -> Turn | None:
        first = _first_user(body)
        turn = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
        for key, turns in self.scripts.items():
            if key in first:
                return turns[min(turn, len(turns) - 1)]
        return None


@pytest.fixture(scope="module")
def openclaw():
    from clawgym.agent.openclaw import find_installation

    inst = find_installation()
    require(inst is not None, "OpenClaw is not installed (clawgym agents install openclaw)")
    return inst


def _rollout(tasks, backend, run_dir: Path, base_url: str, model: str = "scripted-model", jobs: int = 3,
             budget_steps: int | None = BUDGET_STEPS, max_tokens: int = 256, hold=None):
    from clawgym.rollout import RolloutOptions, run_rollout
    from clawgym.rollout.setup import AgentSpec, agent_session

    spec = AgentSpec(name="openclaw", model=model, base_url=base_url, max_tokens=max_tokens,
                     settings={"budget_steps": budget_steps,
                               "context_window": 8192 if model != "scripted-model" else 32768})
    options = RolloutOptions(jobs=jobs)
    with agent_session(spec, run_dir, tasks, options) as session:
        if hold is not None:
            hold(session, options)
        report = run_rollout(tasks, session.factory, backend, run_dir, options, settings=session.settings)
    return {t.task_id: t for t in report.ran}


@pytest.fixture(scope="module")
def bwrap_run(openclaw, bwrap_backend, tmp_path_factory):
    """One rollout of the three scripted tasks in bwrap, in parallel."""
    run_dir = tmp_path_factory.mktemp("openclaw-bwrap")
    scripts = Scripts()
    seen: dict = {}
    with ScriptedLLM({}, responder=scripts) as llm:
        llm_port = int(llm.base_url.split(":")[2].split("/")[0])

        def hold(session, options):
            # the probe targets: the host's gateway port and model server port on 127.0.0.1 (in the sandbox that
            # is its own loopback), the host's own address, an outside address; and the relay (the way out)
            from clawgym.agent.openclaw.config import RELAY_PORT

            gw_port = session.gateway.port
            seen["gateway_port"] = gw_port
            targets = {"host_gateway_loopback": ("127.0.0.1", gw_port), "host_model_loopback": ("127.0.0.1", llm_port),
                       "outside": ("1.1.1.1", 80), "relay": ("127.0.0.1", RELAY_PORT)}
            ip = _host_ip()
            if ip:
                targets["host_address"] = (ip, gw_port)
            seen["targets"] = targets
            scripts.scripts[PROBE] = [Turn(tool_calls=[("exec", {"command": _probe_command(targets)})]),
                                      Turn(content="Saved the probe results to probe.json.")]

        scripts.scripts[WRITE] = [Turn(tool_calls=[("write", {"path": "greeting.txt", "content": "hello from openclaw\n"})]),
                                  Turn(content="Wrote greeting.txt.")]
        scripts.scripts[RUNAWAY] = [Turn(tool_calls=[("exec", {"command": "ls -la"})])]  # never a final answer
        tasks = [_task("oc-write", WRITE, GRADE_WRITE), _task("oc-probe", PROBE, GRADE_PROBE), _task("oc-runaway", RUNAWAY, GRADE_RUNAWAY)]
        t0 = time.monotonic()
        trajs = _rollout(tasks, bwrap_backend, run_dir, llm.base_url, hold=hold)
        seen["duration_s"] = time.monotonic() - t0
        seen["requests"] = list(llm.requests)
    return trajs, run_dir, seen


def test_openclaw_in_bwrap_solves_scripted_task(bwrap_run):
    from clawgym.pool.store import Pool

    trajs, run_dir, _ = bwrap_run
    t = trajs["oc-write"]
    assert t.status == "completed", (t.error, t.metadata)
    assert t.agent == "openclaw" and t.sandbox == "bwrap"
    assert t.verdict.status == "scored" and t.verdict.score == 1.0, t.verdict
    assert t.verdict.checks == {"file_written": 1.0, "write_call_in_transcript": 1.0}
    # the transcript is OpenClaw's own (SQLite), converted: session event, string content made a list, params alias
    assert t.transcript[0]["type"] == "session" and t.transcript[0]["cwd"] == "/workspace"
    users = [e for e in t.transcript if e.get("type") == "message" and e["message"]["role"] == "user"]
    assert users[0]["message"]["content"] == [{"type": "text", "text": WRITE}]
    calls = [c for e in t.transcript if e.get("type") == "message" for c in e["message"]["content"]
             if c.get("type") == "toolCall"]
    assert [c["name"] for c in calls] == ["write"] and calls[0]["params"] == calls[0]["arguments"]
    results = [e for e in t.transcript if e.get("type") == "message" and e["message"]["role"] == "toolResult"]
    assert "Successfully wrote" in results[0]["message"]["content"][0]["text"]
    assert t.final_message == "Wrote greeting.txt." and t.tool_calls == 1 and t.tool_errors == 0
    # the gateway's steps are in the pool under the trajectory and task ids, joined to the transcript's messages
    with Pool(run_dir / "pool", create=False) as pool:
        steps = pool.steps(trajectory_id="oc-write#0")
        assert [s.step_id for s in steps] == ["oc-write#0/0", "oc-write#0/1"]
        assert {s.group_id for s in steps} == {"oc-write"}
        assert steps[0].request["params"]["stream"] is True and steps[0].stream
        assert steps[0].response["tool_calls"][0]["function"]["name"] == "write"
        assert steps[-1].is_last and steps[-1].reward == 1.0 and steps[-1].trajectory_status == "completed"
    join = t.metadata["openclaw"]["step_join"]
    assert join == {"steps": 2, "ok_steps": 2, "assistant_messages": 2, "matched": 2, "complete": True}
    ids = {e.get("id") for e in t.transcript}
    assert [s["step_id"] for s in t.steps] == ["oc-write#0/0", "oc-write#0/1"]
    assert all(s["event_id"] in ids for s in t.steps)
    assert t.usage["model_calls"] == 2 and t.usage["total_tokens"] == sum(s.usage["total_tokens"] for s in steps)
    # what OpenClaw sent: its own long system prompt and its tool surface, kept as training messages
    assert t.messages[0]["role"] == "system" and len(t.messages[0]["content"]) > 5000
    assert {tool["function"]["name"] for tool in t.tools} >= {"read", "write", "edit", "exec"}
    assert t.metadata["openclaw"]["runs"][0]["exit_code"] == 0


def test_openclaw_sandbox_has_no_route_to_host_network(bwrap_run):
    trajs, run_dir, seen = bwrap_run
    t = trajs["oc-probe"]
    assert t.status == "completed", (t.error, t.metadata)
    assert t.verdict.checks["probe_ran"] == 1.0
    out = next(e["message"]["content"][0]["text"] for e in t.transcript
               if e.get("type") == "message" and e["message"]["role"] == "toolResult")
    probe = json.loads(out.strip().splitlines()[-1])
    assert probe["relay"] == "connected"  # the only way out: the relay to the gateway's socket
    # the host's gateway and model server listen on the host's 127.0.0.1: not this sandbox's loopback
    assert probe["host_gateway_loopback"].startswith("ConnectionRefusedError"), probe
    assert probe["host_model_loopback"].startswith("ConnectionRefusedError"), probe
    assert probe["outside"] != "connected" and "unreachable" in probe["outside"].lower(), probe
    if "host_address" in probe:
        assert probe["host_address"] != "connected", probe
    assert t.verdict.checks == {"probe_ran": 1.0, "no_route_out": 1.0, "relay_up": 1.0}


def test_runaway_model_is_stopped_by_the_gateway_budget(bwrap_run):
    from clawgym.pool.store import Pool

    trajs, run_dir, _ = bwrap_run
    t = trajs["oc-runaway"]
    assert t.status == "agent_error", (t.status, t.error)
    assert t.error.kind == "budget_steps", t.error
    budget = t.metadata["openclaw"]["budget"]
    assert budget["steps"] == BUDGET_STEPS and budget["refused"] >= 1 and budget["exceeded"] == "steps"
    with Pool(run_dir / "pool", create=False) as pool:
        steps = pool.steps(trajectory_id="oc-runaway#0")
    assert len(steps) == BUDGET_STEPS  # the refused call never reached the model and is not a step
    # OpenClaw really looped: every call but the refused one ran its exec tool
    assert t.tool_calls == BUDGET_STEPS
    # it ended well before the episode's wall time
    assert t.duration_s < 400
    info = json.loads((run_dir / "run.json").read_text())
    assert info["budget"]["max_steps"] == BUDGET_STEPS and info["openclaw"]["version"]


@pytest.mark.slow
def test_openclaw_in_docker_solves_scripted_task(openclaw, docker_backend, tmp_path):
    scripts = Scripts()
    scripts.scripts[WRITE] = [Turn(tool_calls=[("write", {"path": "greeting.txt", "content": "hello from openclaw\n"})]),
                              Turn(content="Wrote greeting.txt.")]
    with ScriptedLLM({}, responder=scripts) as llm:
        trajs = _rollout([_task("oc-write", WRITE, GRADE_WRITE)], docker_backend, tmp_path / "run", llm.base_url, jobs=1)
    t = trajs["oc-write"]
    assert t.sandbox == "docker" and t.status == "completed", (t.error, t.metadata)
    assert t.verdict.score == 1.0 and t.metadata["openclaw"]["step_join"]["complete"]


@pytest.mark.slow
def test_openclaw_against_embedded_smollm2_has_honest_status(openclaw, bwrap_backend, tmp_path):
    """The same episode, the model the embedded SmolLM2 server: whatever the tiny model does, the episode ends
    with a status that says what happened, every call is a token-exact step, and the transcript is OpenClaw's."""
    from clawgym.llm.models import resolve_model_dir
    from clawgym.pool.store import Pool

    try:
        resolve_model_dir("smollm2-135m")
    except Exception as exc:  # noqa: BLE001
        require(False, f"the embedded SmolLM2 model is not available: {exc}")
    task = _task("oc-smol", WRITE, GRADE_WRITE, timeout=600)
    trajs = _rollout([task], bwrap_backend, tmp_path / "run", None, model="smollm2-135m", jobs=1, budget_steps=3,
                     max_tokens=64)
    t = trajs["oc-smol"]
    assert t.status in ("completed", "agent_error", "timeout"), (t.status, t.error)
    if t.status != "completed":
        assert t.error is not None and t.error.kind and t.error.message
    assert t.verdict is not None and t.verdict.status == "scored"
    users = [e for e in t.transcript if e.get("type") == "message" and e["message"]["role"] == "user"]
    assert users and users[0]["message"]["content"][0]["text"] == WRITE
    with Pool(tmp_path / "run" / "pool", create=False) as pool:
        steps = pool.steps(trajectory_id="oc-smol#0")
    ok = [s for s in steps if s.status == "ok"]
    assert ok, "no model call reached the embedded server"
    for s in ok:  # the engine's own token ids, counted as the server counted them
        assert s.token_source == "upstream"
        assert len(s.response_ids) == s.usage["completion_tokens"] and len(s.prompt_ids) == s.usage["prompt_tokens"]
    by_id = {s["step_id"]: s for s in t.steps}
    assert by_id[ok[0].step_id]["token_ids"] == ok[0].response_ids


@pytest.mark.slow
def test_pinchbench_eval_with_openclaw_grades_its_real_transcript(openclaw, bwrap_backend, tmp_path):
    """`clawgym eval` on PinchBench v1 (offline subset) with --agent openclaw: grade() gets OpenClaw's transcript.
    The scripted model answers every task in words (no tools): the sanity task, whose check looks for an
    assistant message in the transcript, passes; the others score what such an answer deserves."""
    from clawgym.evaluation import load_suite, run_eval
    from clawgym.rollout import RolloutOptions
    from clawgym.rollout.setup import AgentSpec

    root = datasets_root() / "pinchbench-v1"
    require(root.is_dir(), f"PinchBench v1 not found at {root}")
    suite = load_suite(f"pinchbench-offline:{root}")
    # their own timeouts (60 s for the sanity task) leave little beyond OpenClaw's start-up on a loaded machine
    suite.tasks = [t.model_copy(update={"timeout_seconds": 600}) for t in suite.tasks
                   if t.id in ("task_00_sanity", "task_09_files")]
    assert len(suite.tasks) == 2
    with ScriptedLLM({}, responder=lambda body: "Hello, I'm ready!") as llm:
        spec = AgentSpec(name="openclaw", model="scripted-model", base_url=llm.base_url, settings={"budget_steps": 4})
        report = run_eval(suite, spec, bwrap_backend, tmp_path / "run", RolloutOptions(jobs=2), chart=False)
    from clawgym.core.jsonl import read_records_lenient
    from clawgym.core.records import Trajectory

    trajs = {t.task_id: t for t in read_records_lenient(tmp_path / "run" / "trajectories.jsonl", Trajectory).records}
    sanity = trajs["task_00_sanity"]
    assert sanity.status == "completed" and sanity.agent == "openclaw", sanity.error
    assert sanity.verdict.checks.get("agent_responded") == 1.0
    assert any(e.get("type") == "message" and e["message"]["role"] == "assistant"
               and e["message"].get("provider") == "clawgym" for e in sanity.transcript)  # OpenClaw's own event
    assert trajs["task_09_files"].status == "completed"
    assert report["overall"]["episodes"] == 2
