#!/usr/bin/env python3
"""What grading in a fresh sandbox costs per episode (issue #32), against the old path, in the same run.

For each backend and task, episodes alternate between the two ways of ending an agent before its checker runs:

* ``kill`` (the path before #32): ``sandbox.kill_processes()`` kills what the agent left in its own pid namespace,
  and the checker runs under the agent's supervisor, in the agent's namespaces;
* ``restart`` (the path now): ``sandbox.restart()`` ends the sandbox's whole process tree (bwrap and its pid
  namespace and cgroup, or the container) and starts a fresh supervisor over the same workspace.

Each episode: start a sandbox on the task's workspace, replay the task's reference solution (the oracle agent, so
the workspace has something to grade), then time the end-of-agent step and the verification (`verify_episode`)
separately. Prints ONE JSON object (progress on stderr) with p50/mean per step, the added cost per episode, the
commit, the command and every setting.

    python benchmarks/perf/grading.py                      # both backends, 20 episodes per path and task
    python benchmarks/perf/grading.py --quick               # smoke run (also: CLAWGYM_BENCH_QUICK=1)
    python benchmarks/perf/grading.py --backends bwrap --n 40 --out benchmarks/perf/results_grading.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from clawgym.agent import get_agent
from clawgym.agent.base import EpisodeContext
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task
from clawgym.sandbox import SandboxUnavailable, get_backend
from clawgym.verify import verify_episode

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "examples" / "tasks.jsonl"
# one task per kind of checker: a PinchBench-style grade() (python), a ClawGym-style shell checker
DEFAULT_TASKS = ("example-expense-cleanup", "example-git-bugfix")


def _episode(backend, task: Task, path: str) -> dict[str, float]:
    sb = backend.start(task.workspace)
    try:
        ctx = EpisodeContext(deadline=time.monotonic() + 300, sample=0, exec_timeout=120, episode_id=task.id + "#0")
        outcome = get_agent("oracle").run(task, sb, ctx)
        t0 = time.perf_counter()
        if path == "restart":
            sb.restart()
        else:
            sb.kill_processes()
        t1 = time.perf_counter()
        verdict = verify_episode(task, sb, outcome.transcript, outcome.final_message)
        t2 = time.perf_counter()
    finally:
        sb.stop()
    if verdict.score != 1.0:
        raise RuntimeError(f"{task.id} on {backend.name} via {path}: the reference scored {verdict.score} "
                           f"({verdict.error})")
    return {"end_agent_ms": (t1 - t0) * 1000, "verify_ms": (t2 - t1) * 1000, "total_ms": (t2 - t0) * 1000}


def _summary(rows: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    return {k: {"p50": round(statistics.median(r[k] for r in rows), 2),
                "mean": round(statistics.fmean(r[k] for r in rows), 2)} for k in rows[0]}


def measure(backend_name: str, tasks: list[Task], n: int) -> dict:
    try:
        backend = get_backend(backend_name)
        ok, why = backend.check()
    except SandboxUnavailable as exc:
        ok, why = False, str(exc)
    if not ok:
        return {"skipped": why}
    out: dict = {}
    for task in tasks:
        rows: dict[str, list[dict[str, float]]] = {"kill": [], "restart": []}
        _episode(backend, task, "restart")  # warm-up (image pages, imports)
        for i in range(n):
            for path in ("kill", "restart") if i % 2 == 0 else ("restart", "kill"):  # alternate: no drift bias
                rows[path].append(_episode(backend, task, path))
            print(f"{backend_name} {task.id}: {i + 1}/{n}", file=sys.stderr)
        res = {path: _summary(r) for path, r in rows.items()}
        res["added_ms_per_episode"] = {
            "p50": round(res["restart"]["total_ms"]["p50"] - res["kill"]["total_ms"]["p50"], 2),
            "mean": round(res["restart"]["total_ms"]["mean"] - res["kill"]["total_ms"]["mean"], 2),
        }
        out[task.id] = {"checker": task.verifier.code.kind if task.verifier.code else None, **res}
    backend.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", nargs="+", default=["bwrap", "docker"])
    ap.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS), help="ids in examples/tasks.jsonl")
    ap.add_argument("--n", type=int, default=20, help="episodes per path, task and backend")
    ap.add_argument("--quick", action="store_true", help="3 episodes per path (also CLAWGYM_BENCH_QUICK=1)")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    opts = ap.parse_args()
    n = 3 if opts.quick or os.environ.get("CLAWGYM_BENCH_QUICK", "") not in ("", "0") else opts.n
    by_id = {t.id: t for t in read_records(TASKS, Task)}
    tasks = [by_id[i] for i in opts.tasks]
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    result = {
        "benchmark": "grading", "what": "end of the agent + verification per episode: kill_processes (before #32) "
        "against restart (a fresh sandbox for the checker), alternating, same run",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "git_commit": commit,
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "settings": {"n": n, "backends": opts.backends, "tasks": opts.tasks},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "backends": {b: measure(b, tasks, n) for b in opts.backends},
    }
    text = json.dumps(result, indent=2)
    print(text)
    if opts.out:
        tmp = opts.out.with_suffix(".tmp")
        tmp.write_text(text + "\n")
        tmp.replace(opts.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
