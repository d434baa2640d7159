"""A task's checks written with shared argument values (`values` + `use`, clawgym.core.records.hoist_shared_values):
an encoding only. The checks read back, and the check lists graders get, are those of the full form; hand-written
forms that name a missing value, give an argument twice or leave a value unused are refused with the check's name;
a value named from thousands of checks cannot blow a small line up in memory."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError

from clawgym.core.jsonl import read_records, write_records
from clawgym.core.records import MAX_EXPANDED_VALUE_BYTES, Task
from clawgym.core.schema import record_schema

REPO = Path(__file__).resolve().parents[1]
FROZEN = REPO / "benchmarks" / "synth-bench-200" / "tasks.jsonl"  # written before values were shared


def _grader_input(task: Task) -> list[dict]:
    """What clawgym.verify.code hands the grader: each top-level check dumped on its own."""
    return [c.model_dump(mode="json") for c in task.verifier.code.checks]


@pytest.fixture(scope="module")
def frozen() -> list[Task]:
    return read_records(FROZEN, Task)


def test_the_full_form_and_the_shared_form_read_into_the_same_checks(frozen, tmp_path):
    out = tmp_path / "today.jsonl"
    write_records(out, frozen)
    again = read_records(out, Task)
    assert again == frozen
    assert [_grader_input(t) for t in again] == [_grader_input(t) for t in frozen]
    lines = out.read_text(encoding="utf-8").splitlines()
    shared = [json.loads(x)["verifier"]["code"] for x in lines if '"values":' in x]
    assert len(shared) > 100  # most synthesized tasks repeat an argument (a path, a table, a gate's copy)
    assert out.stat().st_size < 0.93 * FROZEN.stat().st_size
    # written again, the shared form is stable (a value is named in the order first met)
    write_records(tmp_path / "again.jsonl", again)
    assert (tmp_path / "again.jsonl").read_bytes() == out.read_bytes()


def test_the_shared_form_is_valid_against_the_task_schema(frozen, tmp_path):
    validator = jsonschema.Draft202012Validator(record_schema("task"))
    for task in frozen[:40]:
        data = json.loads(task.model_dump_json())
        assert not list(validator.iter_errors(data)), task.id


def test_a_value_is_written_once_and_each_check_names_it():
    task = next(t for t in read_records(FROZEN, Task) if t.verifier.code and t.verifier.code.kind == "checks")
    code = json.loads(task.model_dump_json())["verifier"]["code"]
    uses = []

    def walk(call):
        uses.extend(call.get("use", {}).values())
        for part in call.get("parts", []):
            walk(part)

    for call in code["checks"]:
        walk(call)
    assert sorted(set(uses)) == sorted(code.get("values", {}))
    assert all(uses.count(name) >= 2 for name in set(uses))
    assert "source" not in code and "entry" not in code and "files" not in code  # unset, not written as nulls
    files = json.loads(task.model_dump_json())["workspace"]["files"]
    assert all(None not in f.values() for f in files)


def _task(checks: list[dict], values: dict | None) -> dict:
    code = {"kind": "checks", "checks": checks, "checklib": {"version": 3, "sha256": "0" * 64}}
    if values is not None:
        code["values"] = values
    return {"schema_version": 2, "id": "t1", "instruction": "do it",
            "workspace": {"files": [{"path": "a.txt", "content": "x"}]}, "verifier": {"code": code}}


def test_a_use_of_a_value_that_is_not_there_is_refused_naming_the_check():
    data = _task([{"name": "rows_right", "fn": "file_exists", "use": {"path": "v7"}}], {"v0": "out/report.csv"})
    with pytest.raises(ValidationError, match=r"check 'rows_right': `use` names 'v7' for argument 'path'"):
        Task.model_validate(data)


def test_an_argument_given_in_args_and_in_use_is_refused():
    data = _task([{"name": "a", "fn": "file_exists", "args": {"path": "x"}, "use": {"path": "v0"}},
                  {"name": "b", "fn": "file_exists", "use": {"path": "v0"}}], {"v0": "out/report.csv"})
    with pytest.raises(ValidationError, match=r"check 'a': argument 'path' is given in `args` and in `use`"):
        Task.model_validate(data)


def test_a_value_no_check_uses_is_refused():
    data = _task([{"name": "a", "fn": "file_exists", "use": {"path": "v0"}}], {"v0": "a.txt", "v1": "spare"})
    with pytest.raises(ValidationError, match=r"`values` holds 'v1', which no check uses"):
        Task.model_validate(data)


def test_a_hand_written_use_reads_like_the_argument_given_in_place():
    shared = _task([{"name": "a", "fn": "file_exists", "use": {"path": "v0"}},
                    {"name": "b", "fn": "all_of", "parts": [{"fn": "file_exists", "use": {"path": "v0"}}]}],
                   {"v0": "a.txt"})
    inline = _task([{"name": "a", "fn": "file_exists", "args": {"path": "a.txt"}},
                    {"name": "b", "fn": "all_of", "parts": [{"fn": "file_exists", "args": {"path": "a.txt"}}]}], None)
    assert Task.model_validate(shared) == Task.model_validate(inline)


def test_shared_values_bomb_is_refused():
    """A hostile task names one 1 MiB value from 40 checks: 40 MiB in memory from a 1 MiB line. Refused."""
    big = "x" * (1024 * 1024)
    checks = [{"name": f"c{i}", "fn": "text_equals", "args": {"path": "a.txt"}, "use": {"expected": "v0"}}
              for i in range(40)]
    assert 40 * len(big) > MAX_EXPANDED_VALUE_BYTES
    with pytest.raises(ValidationError, match="MiB of arguments"):
        Task.model_validate(_task(checks, {"v0": big}))
