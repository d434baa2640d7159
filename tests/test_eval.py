"""`clawgym eval`: suites, the report's metrics, and end-to-end runs on real task data in real sandboxes."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from clawgym.core.records import Trajectory, Verdict
from clawgym.evaluation import build_report, load_suite, pass_at_k, run_eval
from clawgym.evaluation.suites import SuiteError
from clawgym.rollout import RolloutOptions
from clawgym.rollout.setup import AgentSpec

REPO = Path(__file__).resolve().parents[1]


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(5, 0, 1) == 0.0 and pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(3, 1, 3) == 1.0


def _traj(task: str, sample: int, score: float | None, status: str = "completed") -> Trajectory:
    verdict = None if score is None else Verdict(status="scored", score=score, passed=score >= 1.0)
    if status == "infra_error":
        verdict = Verdict(status="infra_error")
    return Trajectory(id=f"{task}#{sample}", task_id=task, sample=sample, agent="a", sandbox="bwrap", status=status,
                      verdict=verdict, started_at="2026-01-01T00:00:00Z", duration_s=1.0)


def test_report_metrics_by_hand():
    from clawgym.core.records import Task

    v = {"code": {"kind": "shell", "entry": "echo 1"}}
    tasks = [Task(id="a", instruction="x", category="C1", verifier=v), Task(id="b", instruction="x", category="C2", verifier=v)]
    trajs = [_traj("a", 0, 1.0), _traj("a", 1, 0.5), _traj("b", 0, 0.0), _traj("b", 1, None, "infra_error")]
    r = build_report("s", tasks, trajs, 2, {"agent": "a"})
    o = r["overall"]
    assert o["scored"] == 3 and o["infra_errors"] == 1
    assert o["mean_score"] == pytest.approx(0.5) and o["pass_rate"] == pytest.approx(1 / 3)
    # task a: n=2, c=1 -> pass@1 .5, pass@2 1; task b: n=1, c=0 -> pass@1 0 (pass@2 undefined with one sample)
    assert o["pass_at"] == {"pass@1": pytest.approx(0.25), "pass@2": pytest.approx(1.0)}
    # run 0: a=1.0, b=0.0 -> 0.5; run 1: a=0.5 -> 0.5
    assert o["run_means"] == [pytest.approx(0.5), pytest.approx(0.5)] and o["std_over_runs"] == 0.0
    assert [c["name"] for c in r["categories"]] == ["C1", "C2"] and r["infra_errors"][0]["id"] == "b#1"


def test_unknown_suite_is_a_clear_error():
    with pytest.raises(SuiteError, match="unknown benchmark"):
        load_suite("no-such-bench")


def test_eval_oracle_on_the_examples_writes_the_report(bwrap_backend, tmp_path):
    suite = load_suite(str(REPO / "examples" / "tasks.jsonl"))
    report = run_eval(suite, AgentSpec(name="oracle"), bwrap_backend, tmp_path / "run", RolloutOptions(samples=2, jobs=4))
    o = report["overall"]
    assert o["scored"] == 2 * len(suite.tasks) and o["mean_score"] == 1.0 and o["pass_at"]["pass@2"] == 1.0
    assert report["settings"]["versions"]["clawgym"] and report["settings"]["samples"] == 2
    prov = json.loads((tmp_path / "run" / "run.json").read_text())["provenance"]  # the suite's file, digested
    assert prov["tasks_file"] == str(REPO / "examples" / "tasks.jsonl")
    assert prov["tasks_sha256"] == hashlib.sha256((REPO / "examples" / "tasks.jsonl").read_bytes()).hexdigest()
    assert prov["checklib"]["version"] >= 1 and prov["packages"]["clawgym"]
    for name in ("report.json", "report.md", "report.png"):
        assert (tmp_path / "run" / name).stat().st_size > 0
    assert "| overall |" in (tmp_path / "run" / "report.md").read_text()


def test_eval_cli_on_pinchbench_with_noop(datasets, bwrap_backend, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "clawgym.cli.app", "eval", "--bench", f"pinchbench-offline:{datasets / 'pinchbench-v1'}",
         "--agent", "noop", "--sandbox", "bwrap", "-j", "4", "-o", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    o = report["overall"]
    assert o["tasks"] == 17 and o["infra_errors"] == 0
    assert o["mean_score"] == 0.0  # doing nothing earns nothing on the code checks
    assert any("needs the network" in n for n in report["settings"]["suite_notes"])
    prov = json.loads((out / "run.json").read_text())["provenance"]
    assert "tasks_sha256" not in prov and "tasks_file" not in prov  # a folder import: no one tasks file
    assert prov["packages"]["python"] and prov["checklib"]["sha256"]


def test_eval_with_a_judge_rescores_the_hybrid_tasks(bwrap_backend, tmp_path):
    from clawgym.llm import LLMClient
    from clawgym.verify import Judge
    from scripted_llm import ScriptedLLM

    suite = load_suite(str(REPO / "examples" / "tasks.jsonl"))
    hybrid = {t.id for t in suite.tasks if t.verifier.rubric is not None}
    assert hybrid, "the examples must hold hybrid tasks"
    with ScriptedLLM(responder=lambda body: '{"score": 0.5, "reason": "half of it"}') as llm:
        judge = Judge(LLMClient(llm.model, llm.base_url), cache_dir=tmp_path / "cache")
        report = run_eval(suite, AgentSpec(name="oracle"), bwrap_backend, tmp_path / "run", RolloutOptions(jobs=4),
                          judge=judge)
        assert llm.requests  # the judge was asked
    assert report["settings"]["judge"]["episodes_judged"] == len(hybrid)
    verdicts = {json.loads(x)["task_id"]: json.loads(x)["verdict"] for x in
                (tmp_path / "run" / "verdicts.jsonl").read_text().splitlines()}
    for tid in hybrid:
        v = verdicts[tid]
        wc, wr = v["weights"]
        assert v["rubric_score"] == 0.5 and v["score"] == pytest.approx(wc * 1.0 + wr * 0.5)
    # code-only tasks keep 1.0; the hybrid ones now carry the judged rubric: the mean drops accordingly
    assert report["overall"]["mean_score"] < 1.0


def test_eval_cli_episode_timeout_overrides_the_tasks_limit(bwrap_backend, tmp_path):
    """A reference that needs 2 s fails under the task's own 1 s limit and passes under --episode-timeout 60."""
    first = json.loads((REPO / "examples" / "tasks.jsonl").read_text().splitlines()[0])
    first["timeout_seconds"] = 1.0
    first["reference"]["steps"].insert(0, {"name": "exec", "arguments": {"command": "sleep 2"}})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(first) + "\n")
    scores = {}
    for name, extra in (("own", []), ("raised", ["--episode-timeout", "60"])):
        out = tmp_path / name
        done = subprocess.run(
            [sys.executable, "-m", "clawgym.cli.app", "eval", "--bench", str(tasks), "--agent", "oracle",
             "--sandbox", "bwrap", "-o", str(out), *extra],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        traj = json.loads((out / "trajectories.jsonl").read_text().splitlines()[-1])
        scores[name] = (traj["status"], (traj["verdict"] or {}).get("score"))
    assert scores["own"][0] == "timeout" and scores["own"][1] != 1.0
    assert scores["raised"] == ("completed", 1.0)


def test_rollout_options_episode_timeout_replaces_the_tasks_limit(bwrap_backend, tmp_path):
    """The library form of --episode-timeout: the runner reads RolloutOptions.episode_timeout; the tasks stay
    as they are."""
    from clawgym.agent.baselines import OracleAgent
    from clawgym.core.records import Task
    from clawgym.rollout import run_rollout

    first = json.loads((REPO / "examples" / "tasks.jsonl").read_text().splitlines()[0])
    first["timeout_seconds"] = 1.0
    first["reference"]["steps"].insert(0, {"name": "exec", "arguments": {"command": "sleep 2"}})
    task = Task.model_validate(first)
    got = {}
    for limit in (None, 60.0):
        report = run_rollout([task], OracleAgent, bwrap_backend, tmp_path / str(limit),
                             RolloutOptions(episode_timeout=limit, infra_retries=0))
        (t,) = report.ran
        got[limit] = (t.status, t.verdict.score if t.verdict else None)
    assert got[None][0] == "timeout" and got[None][1] != 1.0
    assert got[60.0] == ("completed", 1.0)
    assert task.timeout_seconds == 1.0


def test_eval_with_a_judge_writes_the_judged_verdicts_into_trajectories(bwrap_backend, tmp_path):
    """trajectories.jsonl said "no judge configured" of episodes the report gave as judged (issue #34)."""
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Trajectory
    from clawgym.llm import LLMClient
    from clawgym.verify import Judge
    from scripted_llm import ScriptedLLM

    suite = load_suite(str(REPO / "examples" / "tasks.jsonl"))
    hybrid = {t.id for t in suite.tasks if t.verifier.rubric is not None}
    with ScriptedLLM(responder=lambda body: '{"score": 0.5, "reason": "half of it"}') as llm:
        judge = Judge(LLMClient(llm.model, llm.base_url), cache_dir=tmp_path / "cache")
        run_eval(suite, AgentSpec(name="oracle"), bwrap_backend, tmp_path / "run", RolloutOptions(jobs=4), judge=judge)
    latest = {t.id: t for t in read_records(tmp_path / "run" / "trajectories.jsonl", Trajectory)}
    for t in latest.values():
        if t.task_id in hybrid:
            assert t.verdict.rubric_score == 0.5, t.verdict
            assert not any("no judge" in n for n in t.verdict.notes), t.verdict.notes
