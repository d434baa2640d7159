"""schema_version on Task, Trajectory and Verdict: written on every record, older forms migrated as they are
read, newer ones refused in one line naming the file and line while the other lines are read, unknown fields
still refused, minor additions readable by an older reader, the checked-in task files read in both forms."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from clawgym.core import versions
from clawgym.core.errors import ClawgymError, RecordVersionError
from clawgym.core.jsonl import JsonlAppender, dump_line, read_records, read_records_lenient, write_records
from clawgym.core.records import Task, Trajectory, Verdict
from clawgym.core.schema import record_schema, validate_data
from clawgym.core.versions import SCHEMA_VERSIONS
from clawgym.rollout.runner import TRAJECTORIES, load_done, run_rollout

REPO = Path(__file__).resolve().parents[1]
CHECKED_IN = [REPO / "examples" / "tasks.jsonl", REPO / "benchmarks" / "synth-bench-200" / "tasks.jsonl"]

# today's forms without schema_version: version 1, as every file written before versions holds them
TASK_V1 = {"id": "t1", "instruction": "Write hello.txt", "workspace": {"files": [{"path": "a.txt", "content": "x"}]},
           "verifier": {"code": {"kind": "shell", "entry": "echo 1"}}, "metadata": {"k": [1, 2]}}
VERDICT_V1 = {"status": "scored", "checks": {"a": 1.0}, "code_score": 1.0, "score": 1.0, "passed": True}
TRAJECTORY_V1 = {"id": "t1#0", "task_id": "t1", "agent": "noop", "sandbox": "bwrap", "status": "completed",
                 "started_at": "2026-01-01T00:00:00Z", "duration_s": 1.5, "verdict": VERDICT_V1}


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, *records: dict | str) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_the_current_versions_and_a_migration_for_every_step():
    assert SCHEMA_VERSIONS == {"task": 2, "trajectory": 2, "verdict": 2}
    versions.check_registry()
    assert Task.schema_kind == "task" and Trajectory.schema_kind == "trajectory" and Verdict.schema_kind == "verdict"


def test_a_version_without_its_migration_is_caught(monkeypatch):
    monkeypatch.setitem(SCHEMA_VERSIONS, "task", 3)
    with pytest.raises(RuntimeError, match="Task: no migration from schema_version 2 to 3"):
        versions.check_registry()


def test_every_record_is_written_with_its_schema_version(tmp_path):
    task = Task.model_validate(TASK_V1)
    write_records(tmp_path / "tasks.jsonl", [task])
    with JsonlAppender(tmp_path / TRAJECTORIES) as app:
        app.append(Trajectory.model_validate(TRAJECTORY_V1))
    write_records(tmp_path / "verdicts.jsonl", [Verdict(status="unscored", error="no judge")])

    (t,) = _lines(tmp_path / "tasks.jsonl")
    (tr,) = _lines(tmp_path / TRAJECTORIES)
    (v,) = _lines(tmp_path / "verdicts.jsonl")
    assert t["schema_version"] == 2 and tr["schema_version"] == 2 and v["schema_version"] == 2
    assert tr["verdict"]["schema_version"] == 2  # the nested verdict carries its own
    assert next(iter(t)) == "schema_version"  # first, where `head` shows it
    assert dump_line(task).startswith('{"schema_version":2,"id":"t1",')


def test_records_made_in_code_are_in_the_current_form():
    v = Verdict(status="scored", score=0.5)
    traj = Trajectory(id="a#0", task_id="a", agent="noop", sandbox="local", status="completed", started_at="x",
                      duration_s=0.0, verdict=v)
    assert v.schema_version == 2 and traj.schema_version == 2
    assert traj.model_copy(update={"status": "timeout"}).schema_version == 2


def test_records_without_schema_version_read_as_version_1_and_are_migrated(tmp_path, monkeypatch):
    calls: list[str] = []
    for kind in SCHEMA_VERSIONS:
        step = versions.MIGRATIONS[kind][1]
        monkeypatch.setitem(versions.MIGRATIONS[kind], 1, lambda d, k=kind, s=step: calls.append(k) or s(d))

    current = Task(**{**TASK_V1, "id": "t0"}).model_dump_json()  # made in code: no migration
    tasks = read_records(_write(tmp_path / "tasks.jsonl", TASK_V1, current, {**TASK_V1, "id": "t2"}), Task)
    assert [t.id for t in tasks] == ["t1", "t0", "t2"]
    assert calls == ["task", "task"]  # the two version-1 lines, not the current one
    assert all(t.schema_version == 2 for t in tasks) and tasks[0] == tasks[1].model_copy(update={"id": "t1"})
    assert tasks[0].metadata == {"k": [1, 2]} and tasks[0].workspace.files[0].content == "x"

    calls.clear()
    (traj,) = read_records(_write(tmp_path / TRAJECTORIES, TRAJECTORY_V1), Trajectory)
    assert sorted(calls) == ["trajectory", "verdict"]  # the nested verdict is migrated too
    assert traj.schema_version == 2 and traj.verdict.schema_version == 2 and traj.score == 1.0
    # rewritten, an older file is upgraded
    write_records(tmp_path / "again.jsonl", [traj])
    assert _lines(tmp_path / "again.jsonl")[0] == {**json.loads(traj.model_dump_json()), "schema_version": 2}


def test_migrations_run_one_step_at_a_time_in_order(monkeypatch):
    """A version 3 that renames a field: a version-1 record goes through both steps, a version-2 one through the
    second; the caller's dict is never changed."""

    def topic_to_category(data: dict) -> dict:
        data["category"] = data.pop("topic", "")
        return data

    monkeypatch.setitem(SCHEMA_VERSIONS, "task", 3)
    monkeypatch.setitem(versions.MIGRATIONS["task"], 2, topic_to_category)
    old = {**TASK_V1, "topic": "Planning"}
    assert Task.model_validate(old).category == "Planning" and "topic" in old
    assert Task.model_validate({**old, "schema_version": 2}).category == "Planning"
    new = Task.model_validate({**TASK_V1, "category": "Other", "schema_version": 3})
    assert new.category == "Other" and new.schema_version == 3
    assert Task(**TASK_V1).schema_version == 3  # made in code: the current form


def test_a_newer_record_is_refused_by_file_and_line_and_the_others_are_read(tmp_path):
    p = _write(tmp_path / "tasks.jsonl", TASK_V1, {**TASK_V1, "id": "t2", "schema_version": 3, "new_field": 1},
               {**TASK_V1, "id": "t3", "schema_version": 2})
    read = read_records_lenient(p, Task)
    assert [t.id for t in read.records] == ["t1", "t3"]
    (error,) = read.errors
    assert isinstance(error, RecordVersionError)
    assert str(error) == f"{p}:2: schema_version: Task schema_version 3 is newer than this clawgym reads (2): upgrade clawgym"
    with pytest.raises(RecordVersionError, match=r"tasks.jsonl:2: schema_version: Task schema_version 3"):
        read_records(p, Task)

    newer_verdict = {**TRAJECTORY_V1, "schema_version": 2, "verdict": {**VERDICT_V1, "schema_version": 7}}
    p = _write(tmp_path / TRAJECTORIES, TRAJECTORY_V1, newer_verdict, {**TRAJECTORY_V1, "id": "t1#1"})
    read = read_records_lenient(p, Trajectory)
    assert [t.id for t in read.records] == ["t1#0", "t1#1"]
    assert [str(e) for e in read.errors] == [
        f"{p}:2: verdict.schema_version: Verdict schema_version 7 is newer than this clawgym reads (2): upgrade clawgym"]


@pytest.mark.parametrize("value, shown", [("2", "'2'"), (0, "0"), (True, "True"), (None, "None"), (1.5, "1.5")])
def test_a_schema_version_that_is_not_a_whole_number_is_refused(tmp_path, value, shown):
    p = _write(tmp_path / "verdicts.jsonl", VERDICT_V1, {**VERDICT_V1, "schema_version": value})
    read = read_records_lenient(p, Verdict)
    assert len(read.records) == 1
    assert [str(e) for e in read.errors] == [f"{p}:2: schema_version: must be a whole number of at least 1, got {shown}"]
    assert not isinstance(read.errors[0], RecordVersionError)


def test_unknown_fields_are_still_refused_and_the_message_says_why(tmp_path):
    p = _write(tmp_path / "tasks.jsonl", {**TASK_V1, "instrucion": "typo"}, {**TASK_V1, "id": "t2"})
    read = read_records_lenient(p, Task)
    assert [t.id for t in read.records] == ["t2"]
    assert [str(e) for e in read.errors] == [
        f"{p}:1: instrucion: Extra inputs are not permitted (a typo, or a field of a newer clawgym: this one reads "
        "Task schema_version 2)"]
    with pytest.raises(ValueError, match="Extra inputs"):
        Task.model_validate({**TASK_V1, "schema_version": 2, "instrucion": "typo"})


class _NewerTask(Task):
    """Task as a newer clawgym might define it: a minor addition (an optional field, default = old meaning)."""

    minor_fields = frozenset({"priority"})
    priority: int = 0


def test_a_minor_addition_is_read_by_an_older_reader_unless_a_record_uses_it(tmp_path):
    p = tmp_path / "tasks.jsonl"
    write_records(p, [_NewerTask.model_validate(TASK_V1), _NewerTask.model_validate({**TASK_V1, "id": "t2", "priority": 5})])
    first, second = _lines(p)
    assert "priority" not in first and second["priority"] == 5 and first["schema_version"] == 2
    read = read_records_lenient(p, Task)  # the older reader
    assert [t.id for t in read.records] == ["t1"]
    assert [str(e) for e in read.errors] == [
        f"{p}:2: priority: Extra inputs are not permitted (a typo, or a field of a newer clawgym: this one reads "
        "Task schema_version 2)"]
    assert [t.priority for t in read_records(p, _NewerTask)] == [0, 5]  # the newer reader reads both


@pytest.mark.parametrize("path", CHECKED_IN, ids=lambda p: p.parent.name)
def test_the_checked_in_task_files_read_the_same_in_both_forms(path, tmp_path):
    """The files carry schema_version 2; the same lines without it (version 1, as they were before) read into the
    same tasks, and those write back to the file's exact bytes (the frozen synth-bench-200 keeps the bytes it was
    built with, from before checks shared values: written again, it is in today's encoding, the same tasks)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    assert all(json.loads(x)["schema_version"] == 2 for x in lines)
    tasks = read_records(path, Task)
    old = tmp_path / "v1.jsonl"
    old.write_text("".join(json.dumps({k: v for k, v in json.loads(x).items() if k != "schema_version"}) + "\n"
                           for x in lines), encoding="utf-8")
    assert read_records(old, Task) == tasks
    write_records(tmp_path / "again.jsonl", read_records(old, Task))
    if path.parent.name == "synth-bench-200":
        write_records(tmp_path / "today.jsonl", tasks)
        assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "today.jsonl").read_bytes()
        assert read_records(tmp_path / "today.jsonl", Task) == tasks
    else:
        assert (tmp_path / "again.jsonl").read_bytes() == path.read_bytes()


def test_the_json_schema_bounds_schema_version():
    prop = record_schema("trajectory")["properties"]["schema_version"]
    assert prop["minimum"] == 1 and prop["maximum"] == 2 and prop["default"] == 1
    validate_data("task", TASK_V1)
    validate_data("verdict", {**VERDICT_V1, "schema_version": 2})
    with pytest.raises(jsonschema.ValidationError):
        validate_data("verdict", {**VERDICT_V1, "schema_version": 3})


def test_a_run_of_a_newer_clawgym_is_not_resumed(tmp_path):
    from clawgym.agent import get_agent
    from clawgym.sandbox import get_backend

    run = tmp_path / "run"
    run.mkdir()
    _write(run / TRAJECTORIES, TRAJECTORY_V1, {**TRAJECTORY_V1, "id": "t1#1", "schema_version": 3})
    (run / "run.json").write_text('{"agent": "noop"}\n')
    with pytest.raises(ClawgymError, match=rf"cannot resume this run: {run / TRAJECTORIES}:2: schema_version: "
                                           r"Trajectory schema_version 3 is newer .* upgrade clawgym"):
        load_done(run)
    with pytest.raises(ClawgymError, match="cannot resume this run"):
        run_rollout([Task.model_validate(TASK_V1)], lambda: get_agent("noop"), get_backend("local"), run)
    assert (run / "run.json").read_text() == '{"agent": "noop"}\n'  # left as it was
    # a bad line of another kind is still only skipped
    _write(run / TRAJECTORIES, TRAJECTORY_V1, "{not json")
    assert list(load_done(run)) == ["t1#0"]


def test_clawgym_validate_names_the_newer_line_and_exits_1(tmp_path):
    p = _write(tmp_path / "tasks.jsonl", TASK_V1, {**TASK_V1, "id": "t2", "schema_version": 5})
    r = subprocess.run([sys.executable, "-m", "clawgym", "validate", str(p)], capture_output=True, text=True,
                       timeout=120, env={**__import__("os").environ, "COLUMNS": "300"})
    assert r.returncode == 1
    assert (f"{p}:2: schema_version: Task schema_version 5 is newer than this clawgym reads (2): upgrade clawgym"
            in r.stderr)
    assert "1 valid task records, 1 bad lines" in r.stdout
