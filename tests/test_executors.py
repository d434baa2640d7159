"""The executor registry (`clawgym.rollout.executor.EXECUTORS`, entry point group `clawgym.executors`) and the
work an executor is handed, on real parts: a third-party executor shipped as its own distribution (nothing in
clawgym edited or imported for it) found by name, running real oracle rollouts of the example tasks in bwrap
sandboxes on its own threads, from the library and from `clawgym rollout --executor`, and running synthesis's
validation workers, giving the same file as the local pool. The Ray executor's own tests are in test_ray.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from clawgym.agent import get_agent
from clawgym.core.errors import ClawgymError
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task, Trajectory
from clawgym.rollout import RolloutOptions, run_rollout
from clawgym.rollout.executor import EXECUTORS, LocalExecutor, load_work, make_executor, work_spec
from conftest import REPO
from plugin_dist import install_dist

EXAMPLES = REPO / "examples" / "tasks.jsonl"
DIST = "clawgym_threads_executor"

PLUGIN = '''
"""An executor from another distribution: episode attempts on a thread pool of its own, each attempt's node
named after the thread that ran it; synthesis workers from the default pool, each pool it made recorded."""

import threading
from concurrent.futures import ThreadPoolExecutor

from clawgym.rollout.executor import Attempt, Executor, work_spec

SUBMITTED = []
POOLS = []


class ThreadsExecutor(Executor):
    name = "threads"

    def __init__(self, jobs=1):
        self.jobs = max(1, jobs)
        self._pool = None
        self._run = None

    def begin(self, run):
        self._run = run
        self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="plugin-thread")
        return {"name": self.name, "threads": self.jobs}

    def capacity(self):
        return self.jobs

    def submit(self, task, sample, attempt):
        from clawgym.rollout.runner import run_episode

        run = self._run
        SUBMITTED.append((task.id, sample, attempt))

        def one():
            traj = run_episode(task, sample, run.agent_factory(), run.backend, run.options, run.run_dir, run.log,
                               run.live, attempt)
            return Attempt(traj, node=threading.current_thread().name)

        return self._pool.submit(one)

    def interrupt(self):
        self._run.live.stop_all()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def end(self, wait):
        self._pool.shutdown(wait=wait)

    def worker_pool(self, init, initargs=(), stop=None, *, jobs=1):
        POOLS.append((work_spec(init), work_spec(stop) if stop else None, jobs))
        return super().worker_pool(init, initargs, stop, jobs=jobs)
'''


@pytest.fixture
def third_party(tmp_path, monkeypatch):
    # imported before install_dist swaps sys.modules for a copy: what is imported for the first time into the copy
    # is missing from the interpreter's own table, where numpy's C extension (openpyxl, used by the grading, pulls
    # it in) and pickle (shipping synthesis's work to its worker processes by name) look modules up
    import openpyxl  # noqa: F401

    import clawgym.synth.pipeline  # noqa: F401

    site = install_dist(tmp_path / "site", monkeypatch, DIST, {DIST: PLUGIN},
                        {"clawgym.executors": {"threads": f"{DIST}:ThreadsExecutor"}})
    yield site
    EXECUTORS.remove("threads")


def test_builtin_executors_are_named_without_importing_ray():
    code = ("import sys; from clawgym.rollout.executor import EXECUTORS, make_executor; "
            "print(EXECUTORS.names(), type(make_executor('local', jobs=3)).__name__, 'ray' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["['local',", "'ray']", "LocalExecutor", "False"]


def test_executor_errors_are_one_line_usage_errors():
    with pytest.raises(ClawgymError, match=r"^--executor: unknown 'spark'; choose local or ray$"):
        make_executor("spark")
    with pytest.raises(ClawgymError, match=r"^--ray-address needs --executor ray$"):
        make_executor("local", ray_address="127.0.0.1:1")
    with pytest.raises(TypeError, match="subclass of clawgym.rollout.executor.Executor"):
        EXECUTORS.add("bad", object)


def test_work_is_named_by_an_importable_function():
    from clawgym.synth import pipeline

    assert work_spec(pipeline.work) == "clawgym.synth.pipeline:work"
    assert load_work("clawgym.synth.pipeline:work") is pipeline.work
    assert work_spec("clawgym.synth.pipeline:_init_worker") == "clawgym.synth.pipeline:_init_worker"
    with pytest.raises(TypeError, match="importable function"):
        work_spec(lambda: 1)
    with pytest.raises(TypeError, match="importable by its name"):
        work_spec(LocalExecutor(1).capacity)  # a bound method has no importable name of its own
    with pytest.raises(TypeError, match="module:function"):
        work_spec("clawgym.synth.pipeline.work")


def test_third_party_executor_runs_real_oracle_episodes(third_party, bwrap_backend, tmp_path):
    assert DIST not in sys.modules  # listing names imports nothing
    assert EXECUTORS.names() == ["local", "ray", "threads"] and DIST not in sys.modules
    tasks = list(read_records(EXAMPLES, Task))
    with make_executor("threads", jobs=2, sandbox="bwrap") as ex:
        assert type(ex).__module__ == DIST
        report = run_rollout(tasks, lambda: get_agent("oracle"), bwrap_backend, tmp_path / "run",
                             RolloutOptions(jobs=2, executor=ex))
    assert len(report.ran) == len(tasks) >= 8
    for t in report.ran:
        assert t.sandbox == "bwrap" and t.status == "completed", (t.task_id, t.error)
        assert t.verdict.status == "scored" and t.verdict.score == 1.0, (t.task_id, t.verdict)
    assert sorted(s[0] for s in sys.modules[DIST].SUBMITTED) == sorted(t.id for t in tasks)
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["executor"] == {"name": "threads", "threads": 2}
    assert sorted(info["episode_nodes"]) == sorted(t.id for t in report.ran)
    assert all(n.startswith("plugin-thread") for n in info["episode_nodes"].values())


def test_rollout_command_takes_a_third_party_executor(third_party, bwrap_backend, tmp_path):
    path = os.pathsep.join([str(third_party), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-m", "clawgym", "rollout", str(EXAMPLES), "--agent", "oracle", "--sandbox",
                        "bwrap", "--executor", "threads", "-j", "2", "-o", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": path})
    assert r.returncode == 0, r.stderr[-2000:]
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["executor"] == {"name": "threads", "threads": 2}
    trajs = read_records(tmp_path / "run" / "trajectories.jsonl", Trajectory)
    assert len(trajs) >= 8 and all(t.verdict.score == 1.0 for t in trajs), [(t.id, t.verdict) for t in trajs]


def test_third_party_executor_runs_synthesis_workers(third_party, bwrap_backend, tmp_path):
    """Synthesis hands its validation workers to the executor (init, work per chunk, stop) by importable name:
    the file is the same bytes as the local process pool's."""
    from clawgym.synth.pipeline import synthesize

    local, plugin = tmp_path / "local.jsonl", tmp_path / "plugin.jsonl"
    synthesize(6, 5, local, jobs=2)
    with make_executor("threads", jobs=2) as ex:
        report = synthesize(6, 5, plugin, jobs=2, executor=ex)
    assert report.written == 6 and plugin.read_bytes() == local.read_bytes()
    assert sys.modules[DIST].POOLS == [("clawgym.synth.pipeline:_init_worker",
                                        "clawgym.synth.pipeline:_stop_everything", 2)]


def test_llm_synthesis_validates_through_a_third_party_executor(third_party, bwrap_backend, tmp_path):
    """The LLM route hands each candidate's sandbox validation to the executor (`sandbox_calls`; the default runs
    it here with a backend of its own): the same files as without an executor, the yield report saying where."""
    from scripted_llm import ScriptedLLM
    from test_ray import _SynthResponder

    path = os.pathsep.join([str(third_party), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    files = {}
    with ScriptedLLM({}, responder=_SynthResponder()) as llm:
        for name, extra in (("local", []), ("threads", ["--executor", "threads"])):
            out = tmp_path / f"{name}.jsonl"
            r = subprocess.run([sys.executable, "-m", "clawgym", "synth", "persona", "--generator", "llm", "-n", "6",
                                "--seed", "3", "--model", "scripted-model", "--base-url", llm.base_url,
                                "--max-repairs", "1", "--no-dedup", "--sandbox", "bwrap", "-j", "2", *extra,
                                "-o", str(out)], capture_output=True, text=True, timeout=900,
                               env={**os.environ, "PYTHONPATH": path})
            assert r.returncode == 0, r.stderr[-3000:]
            files[name] = (out.read_bytes(), out.with_name(out.name + ".rejected.jsonl").read_bytes(),
                           json.loads(out.with_name(out.name + ".yield.json").read_text()))
    (kept, rejected, rep), (kept_t, rejected_t, rep_t) = files["local"], files["threads"]
    assert kept_t == kept and rejected_t == rejected and rep_t["kept"] == rep["kept"] == 4
    assert "executor" not in rep
    # 4 kept + 2 hopeless (2 rounds each) + 2 repaired (2 rounds each) = 10 validations
    assert rep_t["executor"] == {"name": "threads", "validations_by_node": {socket.gethostname(): 10}, "lost": []}
