"""The demo's example tasks: generated reproducibly, and their verifiers are sound in real sandboxes.

Soundness is shown with the two baselines: the `oracle` (replaying each reference solution through the agent's
tools) must score 1.0 and the `noop` (doing nothing) must score 0.0, on every example, in the bwrap sandbox and
for the oracle in Docker too. A half-done solution must land strictly in between, on the check that names what
is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from clawgym.agent.baselines import NoopAgent, OracleAgent
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task, ToolCall
from clawgym.rollout import RolloutOptions, run_rollout

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "make_examples.py"
TASKS_FILE = REPO / "examples" / "tasks.jsonl"
CATEGORIES = {
    "Productivity & Collaboration", "Systems & Automation", "Analysis & Reasoning", "Content & Domain",
    "Planning & Knowledge", "Software Development",
}
GIT_TASK = "example-git-bugfix"


def load_tasks() -> list[Task]:
    return read_records(TASKS_FILE, Task)


def run(tasks: list[Task], agent: type, backend, run_dir: Path) -> dict:
    report = run_rollout(tasks, agent, backend, run_dir, RolloutOptions(jobs=4))
    assert len(report.ran) == len(tasks)
    return {t.task_id: t for t in report.ran}


def explain(traj) -> str:
    v = traj.verdict
    return f"{traj.task_id}: {traj.status} {v.status} score={v.score} checks={v.checks} error={v.error}\n{v.output_tail}"


# --------------------------------------------------------------------------------------------- the file


def test_tasks_file_is_exactly_what_the_script_writes(tmp_path):
    out = tmp_path / "tasks.jsonl"
    for seed in ("0", "12345"):  # a different hash seed must not change a byte
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, str(SCRIPT), "-o", str(out)], check=True, env=env, capture_output=True)
        assert out.read_bytes() == TASKS_FILE.read_bytes(), "examples/tasks.jsonl is stale: rerun make_examples.py"


def test_examples_are_varied_and_complete():
    tasks = load_tasks()
    assert 6 <= len(tasks) <= 12
    assert len({t.id for t in tasks}) == len(tasks)
    assert {t.category for t in tasks} == CATEGORIES
    generators: set[str] = set()
    for t in tasks:
        assert t.id.startswith("example-") and t.source == "example"
        assert t.subcategory and t.operations and t.persona and t.instruction
        assert t.verifier.code is not None
        assert t.reference is not None and 3 <= len(t.reference.steps) <= 10, t.id
        assert {s.name for s in t.reference.steps} <= {"read", "write", "edit", "exec", "ls"}
        assert t.reference.final_message
        generators |= {f.generate.kind for f in t.workspace.files if f.generate is not None}
    assert generators == {"csv", "json", "yaml", "xlsx", "ics", "eml", "sqlite", "git"}
    assert sum(t.verifier.rubric is not None and len(t.verifier.rubric.rules) == 2 for t in tasks) >= 2
    shell = [t for t in tasks if t.verifier.code.kind == "shell"]
    assert [t.id for t in shell] == [GIT_TASK]
    assert shell[0].verifier.code.files and shell[0].verifier.code.subscores_entry


# --------------------------------------------------------------------------------------------- graders alone


def test_every_grader_survives_an_empty_workspace(tmp_path):
    """Missing files score 0 and never crash the grader (run here on the host, no sandbox needed)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    for t in load_tasks():
        check = t.verifier.code
        if check.kind == "python":
            ns: dict = {"__name__": "grader"}
            exec(compile(check.source, f"{t.id}/grade.py", "exec"), ns)
            scores = ns["grade"]([], str(empty))
            assert scores and all(v == 0.0 for v in scores.values()), (t.id, scores)
        else:
            ws = tmp_path / t.id
            for f in check.files:
                (ws / f.path).parent.mkdir(parents=True, exist_ok=True)
                (ws / f.path).write_text(f.content)
            outputs = []
            for cmd in (check.entry, check.subscores_entry):
                proc = subprocess.run(
                    cmd.replace("python3", sys.executable, 1), shell=True, cwd=ws, capture_output=True, text=True,
                    env=dict(os.environ, WORKSPACE=str(ws)), timeout=120,
                )
                assert proc.returncode == 0, proc.stderr
                outputs.append(proc.stdout.strip().splitlines())
            assert float(outputs[0][-1]) == 0.0, (t.id, outputs[0])
            subscores = json.loads(outputs[1][-1])
            assert subscores and all(v == 0.0 for v in subscores.values()), (t.id, subscores)


# --------------------------------------------------------------------------------------------- sandboxes


@pytest.mark.bwrap
def test_oracle_scores_one_and_noop_zero_on_bwrap(bwrap_backend, tmp_path):
    tasks = load_tasks()
    oracle = run(tasks, OracleAgent, bwrap_backend, tmp_path / "oracle")
    noop = run(tasks, NoopAgent, bwrap_backend, tmp_path / "noop")
    for t in tasks:
        o, n = oracle[t.id], noop[t.id]
        assert o.status == "completed" and o.verdict.status == "scored", explain(o)
        assert o.verdict.score == 1.0 and o.verdict.passed, explain(o)
        assert o.verdict.checks and all(v == 1.0 for v in o.verdict.checks.values()), explain(o)
        assert n.verdict.status in ("scored", "checker_failed"), explain(n)
        assert n.verdict.score == 0.0 and not n.verdict.passed, explain(n)


def _drop(pred: Callable[[ToolCall], bool]) -> Callable[[list[ToolCall]], list[ToolCall]]:
    return lambda steps: [s for s in steps if not pred(s)]


def _rewrite(path: str, fn: Callable[[str], str]) -> Callable[[list[ToolCall]], list[ToolCall]]:
    def apply(steps: list[ToolCall]) -> list[ToolCall]:
        out = []
        for s in steps:
            if s.name == "write" and s.arguments["path"] == path:
                new = fn(s.arguments["content"])
                assert new != s.arguments["content"]
                s = ToolCall(name="write", arguments={**s.arguments, "content": new})
            out.append(s)
        return out
    return apply


def _writes(path: str) -> Callable[[ToolCall], bool]:
    return lambda s: s.name == "write" and s.arguments.get("path") == path


def _wrong_top_customer(content: str) -> str:
    data = json.loads(content)
    data["top_customer"] = "Nobody"
    return json.dumps(data)


# task id -> (how to spoil the reference, the check that must then fall below 1)
HALF_DONE = {
    "example-expense-cleanup": (
        _rewrite("expenses/q1_summary.csv", lambda c: c[: c.index("TOTAL,")]), "summary_order_and_total_row"),
    "example-meeting-scheduling": (_drop(_writes("outbox/reply-to-elena.txt")), "reply_proposes_slot"),
    "example-inbox-triage": (_drop(_writes("triage/summary.md")), "summary_has_sections"),
    GIT_TASK: (_drop(lambda s: s.name == "exec" and "commit" in s.arguments["command"]), "new_commit_with_fix"),
    "example-shop-orders-sql": (_rewrite("answers.json", _wrong_top_customer), "top_customer"),
    "example-config-migration": (
        _drop(_writes("services/billing-api/reports/errors.json")), "report_top_endpoints"),
    "example-gradebook-export": (
        _rewrite("exports/period3_grades.csv", lambda c: c.replace(",D\n", ",C\n", 1)), "letter_correct"),
    "example-notes-organize": (_drop(_writes("notes/index.md")), "index_links_every_note"),
}


@pytest.mark.bwrap
def test_half_done_solutions_get_partial_credit_on_bwrap(bwrap_backend, tmp_path):
    tasks = load_tasks()
    assert set(HALF_DONE) == {t.id for t in tasks}
    spoiled = []
    for t in tasks:
        spoil, _ = HALF_DONE[t.id]
        copy = t.model_copy(deep=True)
        copy.reference.steps = spoil(copy.reference.steps)
        spoiled.append(copy)
    results = run(spoiled, OracleAgent, bwrap_backend, tmp_path / "half")
    for t in tasks:
        r = results[t.id]
        culprit = HALF_DONE[t.id][1]
        assert r.verdict.status == "scored", explain(r)
        assert 0.0 < r.verdict.score < 1.0 and not r.verdict.passed, explain(r)
        assert r.verdict.checks[culprit] < 1.0, explain(r)


@pytest.mark.docker
def test_oracle_scores_one_on_docker(docker_backend, tmp_path):
    tasks = load_tasks()
    assert GIT_TASK in {t.id for t in tasks}  # the git repository and the shell check
    oracle = run(tasks, OracleAgent, docker_backend, tmp_path / "oracle")
    for t in tasks:
        o = oracle[t.id]
        assert o.sandbox == "docker"
        assert o.status == "completed" and o.verdict.status == "scored", explain(o)
        assert o.verdict.score == 1.0 and o.verdict.passed, explain(o)
    assert set(oracle[GIT_TASK].verdict.checks) == {
        "tests_pass", "new_commit_with_fix", "tests_untouched", "working_tree_clean",
    }
