"""Rollouts on the real third-party task data, in real sandboxes; resume; bad input."""

from __future__ import annotations

import json

import pytest

from clawgym.agent import get_agent
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task, Trajectory
from clawgym.importers import import_clawgym, import_pinchbench
from clawgym.rollout import RolloutOptions, run_rollout, summarize
from clawgym.workspace import extract_snapshot


@pytest.fixture(scope="module")
def clawgym_tasks(datasets):
    result = import_clawgym(datasets / "clawgym-train-sample")
    assert len(result.tasks) == 30 and not result.failures
    return result.tasks


def _check_noop_run(trajs: list[Trajectory], n: int) -> None:
    assert len(trajs) == n
    for t in trajs:
        assert t.status == "completed", (t.id, t.error)
        assert t.verdict is not None and t.verdict.status == "scored", (t.id, t.verdict)
        assert 0.0 <= t.verdict.score <= 1.0
        assert t.verdict.checks, f"{t.id}: no named sub-scores from check.py"
        assert t.transcript[0]["type"] == "session"


def test_all_clawgym_tasks_score_under_noop_in_bwrap(clawgym_tasks, bwrap_backend, tmp_path):
    report = run_rollout(clawgym_tasks, lambda: get_agent("noop"), bwrap_backend, tmp_path / "run",
                         RolloutOptions(jobs=4))
    _check_noop_run(report.ran, 30)
    # doing nothing earns nothing on these tasks
    assert all(t.verdict.score == 0.0 for t in report.ran)
    # the final workspaces are kept, without the checker (taken before it was copied in)
    t = next(t for t in report.ran if t.task_id == "task_0076")
    archive = tmp_path / "run" / t.workspace_snapshot
    assert archive.name.endswith(".tar.gz")
    ws = extract_snapshot(archive, tmp_path / "ws")
    assert (ws / "input" / "cii_targets.json").exists() and not (ws / "reward").exists()


def test_all_clawgym_tasks_score_under_noop_in_docker(clawgym_tasks, docker_backend, tmp_path):
    report = run_rollout(clawgym_tasks, lambda: get_agent("noop"), docker_backend, tmp_path / "run",
                         RolloutOptions(jobs=4, keep_workspaces=False))
    _check_noop_run(report.ran, 30)


def test_pinchbench_tasks_run_under_noop(datasets, bwrap_backend, tmp_path):
    result = import_pinchbench(datasets / "pinchbench-v1")
    report = run_rollout(result.tasks, lambda: get_agent("noop"), bwrap_backend, tmp_path / "run",
                         RolloutOptions(jobs=4, keep_workspaces=False))
    by_id = {t.task_id: t for t in report.ran}
    assert len(by_id) == len(result.tasks) == 22
    for t in report.ran:
        assert t.status == "completed"
        grading = next(x for x in result.tasks if x.id == t.task_id).metadata["grading_type"]
        expected = "unscored" if grading == "llm_judge" else "scored"
        assert t.verdict.status == expected, (t.task_id, t.verdict)
    # PinchBench checks walk the OpenClaw transcript: the sanity task wants an assistant reply, noop gives none
    assert by_id["task_00_sanity"].verdict.score == 0.0


def test_resume_skips_finished_episodes_and_retries_infra_errors(clawgym_tasks, bwrap_backend, tmp_path):
    tasks = clawgym_tasks[:3]
    run_dir = tmp_path / "run"
    first = run_rollout(tasks, lambda: get_agent("noop"), bwrap_backend, run_dir, RolloutOptions(samples=2))
    assert len(first.ran) == 6
    # turn one episode into an infrastructure error, as if its sandbox had died
    path = run_dir / "trajectories.jsonl"
    lines = path.read_text().splitlines()
    bad = json.loads(lines[0])
    bad["status"] = "infra_error"
    path.write_text("\n".join(lines + [json.dumps(bad)]) + "\n")
    again = run_rollout(tasks, lambda: get_agent("noop"), bwrap_backend, run_dir, RolloutOptions(samples=2))
    assert again.skipped == 5
    assert [t.id for t in again.ran] == [bad["id"]]
    assert len(again.all) == 6
    third = run_rollout(tasks, lambda: get_agent("noop"), bwrap_backend, run_dir, RolloutOptions(samples=2))
    assert third.ran == [] and third.skipped == 6


def test_sandbox_start_failure_is_an_infra_error_not_a_score(bwrap_backend, tmp_path):
    task = Task.model_validate({
        "id": "bad-mount", "instruction": "x",
        "workspace": {"mount_dir": "/srv/somewhere"},  # under the image's read-only /srv (/usr is refused at load)
        "verifier": {"code": {"kind": "python", "source": "def grade(t, w): return {'a': 1}"}},
    })
    report = run_rollout([task], lambda: get_agent("noop"), bwrap_backend, tmp_path / "run")
    (t,) = report.ran
    assert t.status == "infra_error" and t.error.kind == "sandbox_start"
    assert t.verdict.status == "infra_error"
    (s,) = summarize(report.all)
    assert s.infra_errors == 1 and s.scored == 0 and s.mean_score is None


def test_missing_asset_is_reported_per_task(bwrap_backend, tmp_path):
    good = Task.model_validate({
        "id": "good", "instruction": "x",
        "verifier": {"code": {"kind": "python", "source": "def grade(t, w): return {'a': 0}"}},
    })
    bad = good.model_copy(update={"id": "bad"})
    bad.workspace.files = []
    bad = Task.model_validate({**json.loads(bad.model_dump_json()),
                               "workspace": {"files": [{"path": "a.pdf", "source": "missing.pdf"}],
                                             "assets_dir": "."}})
    report = run_rollout([good, bad], lambda: get_agent("noop"), bwrap_backend, tmp_path / "run",
                         RolloutOptions(base_dir=tmp_path))
    by_id = {t.task_id: t for t in report.ran}
    assert by_id["good"].status == "completed"
    assert by_id["bad"].status == "infra_error" and "missing.pdf" in by_id["bad"].error.message
    assert len(read_records(tmp_path / "run" / "trajectories.jsonl", Trajectory)) == 2


def test_oracle_without_reference_is_skipped(clawgym_tasks, bwrap_backend, tmp_path):
    report = run_rollout(clawgym_tasks[:1], lambda: get_agent("oracle"), bwrap_backend, tmp_path / "run")
    (t,) = report.ran
    assert t.status == "skipped" and t.error.kind == "no_reference"


def test_summary_keeps_a_base_model_and_its_student_apart():
    def traj(i: int, model: str, score: float) -> Trajectory:
        return Trajectory.model_validate({
            "id": f"t{i}#0", "task_id": f"t{i}", "agent": "llm", "model": model, "sandbox": "bwrap",
            "status": "completed", "started_at": "2026-11-22T00:00:00Z", "duration_s": 1.0,
            "verdict": {"status": "scored", "score": score, "passed": score == 1.0},
        })

    trajs = [traj(1, "smollm2-135m", 0.0), traj(2, "smollm2-135m", 0.5), traj(1, "runs/x/student", 1.0)]
    base, student = summarize(trajs, run="runs/x")
    assert (base.model, base.episodes, base.mean_score) == ("smollm2-135m", 2, 0.25)
    assert (student.model, student.episodes, student.mean_score, student.pass_rate) == ("runs/x/student", 1, 1.0, 1.0)
    assert base.as_dict()["run"] == "runs/x" and student.as_dict()["model"] == "runs/x/student"
