"""Records and their JSONL files: validation with file:line:field errors, whole-line appends, atomic writes."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading

import jsonschema
import pytest

from clawgym.core import (
    JsonlAppender,
    RecordError,
    Task,
    Trajectory,
    read_records,
    read_records_lenient,
    record_schema,
    validate_data,
    write_records,
)
from clawgym.core.records import CodeCheck, Rubric, VerifierSpec, WorkspaceFile


def make_task(i: int = 0, **kw) -> Task:
    data = {
        "id": f"t{i}",
        "instruction": "Write hello.txt",
        "workspace": {"files": [{"path": "in.txt", "content": "x"}]},
        "verifier": {"code": {"kind": "python", "source": "def grade(t, w):\n    return {'a': 1.0}\n"}},
    }
    data.update(kw)
    return Task.model_validate(data)


def test_task_defaults_and_round_trip():
    t = make_task()
    assert t.workspace.mount_dir == "/workspace"
    assert t.verifier.weights() == (1.0, 0.0)
    assert Task.model_validate_json(t.model_dump_json()) == t


def test_hybrid_weights_default_to_07_03_and_follow_task_weights():
    code = CodeCheck(kind="python", source="def grade(t, w): return {}")
    assert VerifierSpec(code=code, rubric=Rubric()).weights() == pytest.approx((0.7, 0.3))
    assert VerifierSpec(code=code, rubric=Rubric(), code_weight=0.4, rubric_weight=0.6).weights() == pytest.approx(
        (0.4, 0.6)
    )
    assert VerifierSpec(rubric=Rubric()).weights() == (0.0, 1.0)


@pytest.mark.parametrize(
    "file, message",
    [
        ({"path": "../escape", "content": "x"}, "must not leave the workspace"),
        ({"path": "/abs", "content": "x"}, "relative path"),
        ({"path": "a", "content": "x", "content_b64": "eA=="}, "exactly one of"),
        ({"path": "a"}, "exactly one of"),
    ],
)
def test_workspace_file_validation(file, message):
    with pytest.raises(ValueError, match=message):
        WorkspaceFile.model_validate(file)


def test_unknown_keys_are_rejected():
    with pytest.raises(ValueError, match="Extra inputs"):
        make_task(instrucion="typo")


def test_read_errors_name_file_line_and_field(tmp_path):
    p = tmp_path / "tasks.jsonl"
    good = make_task(0).model_dump_json()
    missing_field = json.loads(make_task(1).model_dump_json())
    del missing_field["instruction"]
    bad_type = json.loads(make_task(2).model_dump_json())
    bad_type["workspace"]["files"][0]["path"] = 5
    p.write_text("\n".join([good, "{not json", json.dumps(missing_field), json.dumps(bad_type), "[1, 2]"]) + "\n")

    with pytest.raises(RecordError) as exc:
        read_records(p, Task)
    assert str(exc.value).startswith(f"{p}:2: not valid JSON")

    read = read_records_lenient(p, Task)
    assert [t.id for t in read.records] == ["t0"]
    msgs = [str(e) for e in read.errors]
    assert msgs[0].startswith(f"{p}:2:")
    assert msgs[1] == f"{p}:3: instruction: Field required"
    assert msgs[2].startswith(f"{p}:4: workspace.files[0].path:")
    assert msgs[3].startswith(f"{p}:5: expected a JSON object")
    assert all("\n" not in m for m in msgs)


def test_write_records_is_atomic(tmp_path):
    p = tmp_path / "out.jsonl"
    write_records(p, [make_task(0)])

    def broken():
        yield make_task(1)
        raise RuntimeError("generator failed half way")

    with pytest.raises(RuntimeError):
        write_records(p, broken())
    # the old content is intact and no temp file is left behind
    assert [t.id for t in read_records(p, Task)] == ["t0"]
    assert os.listdir(tmp_path) == ["out.jsonl"]


def test_appender_repairs_torn_tail(tmp_path):
    p = tmp_path / "traj.jsonl"
    line = make_task(0).model_dump_json()
    p.write_text(line + "\n" + line[: len(line) // 2])  # a writer died mid-line
    with JsonlAppender(p) as app:
        assert app.torn_bytes == len(line) // 2
        app.append(make_task(1))
    assert [t.id for t in read_records(p, Task)] == ["t0", "t1"]


def test_concurrent_appends_never_interleave(tmp_path):
    p = tmp_path / "many.jsonl"
    big = "x" * 200_000  # larger than a pipe buffer: a split write would show up as a broken line
    tasks = [make_task(i, instruction=big) for i in range(40)]
    with JsonlAppender(p) as app:
        threads = [threading.Thread(target=app.append, args=(t,)) for t in tasks]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert sorted(t.id for t in read_records(p, Task)) == sorted(t.id for t in tasks)


def _append_forever(path: str, ready) -> None:
    app = JsonlAppender(path)
    ready.set()
    i = 0
    while True:
        app.append(make_task(i, instruction="y" * 50_000))
        i += 1


def test_killed_writer_leaves_a_readable_file(tmp_path):
    p = tmp_path / "killed.jsonl"
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_append_forever, args=(str(p), ready))
    proc.start()
    ready.wait(10)
    import time

    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    JsonlAppender(p).close()  # reopening repairs a torn tail, if the kill left one
    records = read_records(p, Task)
    assert len(records) > 0


def test_json_schema_export_validates_real_records():
    schema = record_schema("task")
    jsonschema.Draft202012Validator.check_schema(schema)
    validate_data("task", json.loads(make_task().model_dump_json()))
    with pytest.raises(jsonschema.ValidationError):
        validate_data("task", {"id": "x"})
    traj = Trajectory(id="t#0", task_id="t", agent="noop", sandbox="bwrap", status="completed",
                      started_at="2026-01-01T00:00:00Z", duration_s=0.1)
    validate_data("trajectory", json.loads(traj.model_dump_json()))
    with pytest.raises(KeyError, match="unknown record"):
        record_schema("nope")
