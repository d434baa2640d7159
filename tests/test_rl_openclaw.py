"""`clawgym train rl --agent openclaw` end to end on real parts: the real OpenClaw (unmodified, in bwrap sandboxes,
its calls through the gateway's unix socket), the embedded SmolLM2 server with the real weights, the pool, the
RL export and a LoRA update, v1 published to the server.

Between the gateway and the server sits a recording proxy (a real HTTP hop on 127.0.0.1 that forwards every
byte and keeps the request bodies), so the test sees what the server received: the run's temperature and a
seed per call, whatever OpenClaw asked; the server's token log says what it generated."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time

import pytest

from clawgym.core.records import Task
from conftest import embedded_model_dir, require

GRADE = '''
def grade(transcript, workspace_path):
    said = [e["message"] for e in transcript if e.get("type") == "message" and e["message"].get("role") == "assistant"]
    text = " ".join(p.get("text", "") for m in said for p in (m.get("content") or []) if isinstance(p, dict))
    return {"said_yes": 1.0 if "yes" in text.lower() else 0.0}
'''
TEMPERATURE = 0.9  # not OpenClaw's choice, nor the engine's default (0)


def toy_task(i: int) -> Task:
    return Task.model_validate({
        "id": f"oc-yes-{i}", "instruction": "Is water wet? Reply with one word: Yes or No.", "operations": ["toy"],
        "timeout_seconds": 900, "verifier": {"code": {"kind": "python", "source": GRADE}},
    })


class RecordingProxy:
    """Forwards every request to `upstream` (streamed responses chunk by chunk) and keeps the chat bodies."""

    def __init__(self, upstream: str):
        from clawgym.serve import free_port

        self.upstream = upstream.rstrip("/").removesuffix("/v1")
        self.port = free_port()
        self.chats: list[dict] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _handle(self, request):
        from aiohttp import web

        body = await request.read()
        if request.path.endswith("/chat/completions"):
            self.chats.append(json.loads(body))
        async with self._session.request(request.method, self.upstream + request.path_qs, data=body or None,
                                         headers={"Content-Type": request.headers.get("Content-Type", "application/json")}) as r:
            resp = web.StreamResponse(status=r.status, headers={"Content-Type": r.headers.get("Content-Type", "application/json")})
            await resp.prepare(request)
            try:
                async for chunk in r.content.iter_any():
                    await resp.write(chunk)
                await resp.write_eof()
            except ConnectionResetError:  # the gateway hung up once it had the stream's [DONE]
                pass
            return resp

    async def _start(self) -> None:
        import aiohttp
        from aiohttp import web

        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def _stop(self) -> None:
        await self._runner.cleanup()
        await self._session.close()

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture(scope="module")
def ready():
    from clawgym.agent.openclaw import find_installation

    require(find_installation() is not None, "OpenClaw is not installed (clawgym agents install openclaw)")
    embedded_model_dir("smollm2-135m")


def test_train_rl_refuses_an_unknown_agent(tmp_path):
    from typer.testing import CliRunner

    from clawgym.cli.app import app

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(toy_task(0).model_dump_json() + "\n")
    res = CliRunner().invoke(app, ["train", "rl", str(tasks), "--agent", "claude", "-o", str(tmp_path / "out")])
    assert res.exit_code == 2 and "--agent 'claude': choose llm or openclaw" in res.output


def test_train_rl_with_openclaw_trains_on_its_steps_and_publishes_v1(ready, bwrap_backend, tmp_path):
    from clawgym.pool import Pool
    from clawgym.serve import ServerProcess
    from clawgym.train.rl_update import merge_continuations

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(toy_task(i).model_dump_json() + "\n" for i in range(2)))
    out = tmp_path / "rl"
    token_log = tmp_path / "tokens.jsonl"
    t0 = time.monotonic()
    with ServerProcess("smollm2-135m", log_path=tmp_path / "server.log", token_log=token_log) as server, \
            RecordingProxy(server.base_url) as proxy:
        cmd = [sys.executable, "-m", "clawgym", "train", "rl", str(tasks), "--agent", "openclaw", "-k", "2",
               "--tasks-per-iter", "2", "--iterations", "1", "--max-turns", "1", "--max-tokens", "16",
               "--temperature", str(TEMPERATURE), "--seed", "3", "--sandbox", "bwrap", "-j", "2",
               "--base-url", proxy.base_url, "-o", str(out)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
        chats = list(proxy.chats)
    took = time.monotonic() - t0
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-3000:])

    # v1 published
    assert json.loads((out / "state.json").read_text())["version"] == 1
    assert (out / "adapters" / "v1" / "adapter_config.json").exists()
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 1 and metrics[0]["published"] == 1 and metrics[0]["episodes"] == 4, metrics
    trajs = [json.loads(x) for x in (out / "rollouts" / "v0" / "trajectories.jsonl").read_text().splitlines()]
    assert {t["agent"] for t in trajs} == {"openclaw"} and len(trajs) == 4

    # the pool: OpenClaw's steps under the iteration's prefixed ids and groups, stamped policy version 0
    with Pool(out / "pool") as pool:
        steps = pool.steps()
        ended = pool.trajectories(ended=True)
        groups = pool.groups()
    ok = [s for s in steps if s.status == "ok"]
    assert ok, "no OpenClaw call reached the model"
    pat = re.compile(r"v0\.r1\.oc-yes-[01]#[01]$")
    assert all(pat.match(s.trajectory_id) for s in steps), {s.trajectory_id for s in steps}
    assert {s.group_id for s in steps} <= {"v0.oc-yes-0", "v0.oc-yes-1"}
    assert {s.policy_version for s in steps} == {"0"}
    assert sorted(t["id"] for t in ended) == [f"v0.r1.oc-yes-{i}#{k}" for i in range(2) for k in range(2)]
    assert {g["id"]: (g["expected"], g["n_ended"]) for g in groups} == {"v0.oc-yes-0": (2, 2), "v0.oc-yes-1": (2, 2)}
    # OpenClaw's own transcript joined to those steps (the agent found its steps under the prefixed id)
    assert sum(t["metadata"]["openclaw"]["step_join"]["steps"] for t in trajs) == len(steps)

    # what the server received: every call at the run's temperature with its own seed, token fields asked for
    assert len(chats) == len(steps)
    assert all(c["temperature"] == TEMPERATURE and c["return_token_ids"] and c["logprobs"] for c in chats), \
        [{k: c.get(k) for k in ("temperature", "seed", "return_token_ids", "logprobs")} for c in chats]
    assert len({c["seed"] for c in chats}) == len(chats)
    for s in steps:  # the step: OpenClaw's request as sent, and what the gateway imposed
        assert s.request["params"].get("temperature") != TEMPERATURE
        assert s.request["sampling_override"]["temperature"] == TEMPERATURE
    assert sorted(c["seed"] for c in chats) == sorted(s.request["sampling_override"]["seed"] for s in steps)

    # token-exact: each step holds the ids the engine saw and generated
    logged = {e["id"]: e for e in map(json.loads, token_log.read_text().splitlines())}
    for s in ok:
        assert s.token_source == "upstream"
        engine = logged[s.response["id"]]
        assert (s.prompt_ids, s.response_ids) == (engine["prompt_token_ids"], engine["token_ids"])
        assert len(s.logprobs) == len(s.response_ids)

    # the batch the update trained on: OpenClaw's steps, the engine's ids, the mask on generated tokens only
    rows = [json.loads(x) for x in (out / "batches" / "v0.jsonl").read_text().splitlines()]
    assert rows and {r["step_id"] for r in rows} <= {s.step_id for s in ok}
    by_id = {s.step_id: s for s in ok}
    for r in rows:
        s = by_id[r["step_id"]]
        assert r["policy_version"] == "0" and r["group_id"].startswith("v0.") and r["token_source"] == "upstream"
        assert (r["prompt_ids"], r["response_ids"]) == (s.prompt_ids, s.response_ids)
        assert r["response_mask"] == [1] * len(r["response_ids"])
    for p in merge_continuations(rows):  # as the update packs them: masked tokens = the engine's responses
        trained = [t for t, m in zip(p["response_ids"], p["response_mask"], strict=True) if m]
        ids = p.get("step_ids") or [p["step_id"]]
        assert trained == [t for sid in ids for t in by_id[sid].response_ids]
    rewards = {r["reward"] for r in rows}
    if len(rewards) == 1:  # no signal: the update ran nothing and v1 is the initial adapter
        assert all(r["advantage"] == 0 for r in rows) and metrics[0].get("rows_run", 0) == 0
    print(f"train rl --agent openclaw: {len(steps)} steps, {len(rows)} rows, rewards {sorted(rewards)}, "
          f"{took:.0f} s")
