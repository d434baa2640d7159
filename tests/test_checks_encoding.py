"""The written form of a task's checks (clawgym.core.records.encode_checks, encode_workspace_refs): a run of
parts naming all the other checks is `{"refs": "others"}`, rows that are another check's rows cut to fewer columns
name it (`rows_from`), a docs_digests_equal of workspace files names them (`workspace_digests`), and a workspace
file's text in an argument is `{"workspace_text": PATH}`. An
encoding only: tasks read back into the checks of the full form, and graders get those. Each attack a written
form could carry (a small line growing past 16 MiB in memory, a check comparing against what the agent can
change) is refused or impossible, and a test below is named after it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError

from clawgym.core.jsonl import read_records, write_records
from clawgym.core.records import MAX_EXPANDED_VALUE_BYTES, Task, workspace_digest
from clawgym.core.schema import record_schema
from clawgym.synth.checks import docs_digest
from clawgym.synth.pipeline import synthesize

REPO = Path(__file__).resolve().parents[1]
FROZEN = REPO / "benchmarks" / "synth-bench-200" / "tasks.jsonl"  # written before these encodings


@pytest.fixture(scope="module")
def frozen() -> list[Task]:
    return read_records(FROZEN, Task)


@pytest.fixture(scope="module")
def written(frozen, tmp_path_factory) -> list[str]:
    """The frozen suite written today (its checks have no refs: written for check library v2)."""
    out = tmp_path_factory.mktemp("enc") / "tasks.jsonl"
    write_records(out, frozen)
    return out.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory) -> list[str]:
    """30 tasks synthesized today (refs, the distractors' gate), as written."""
    out = tmp_path_factory.mktemp("synth") / "tasks.jsonl"
    synthesize(30, 17, out, validate=False)
    return out.read_text(encoding="utf-8").splitlines()


def _grader_input(task: Task) -> list[str]:
    """What clawgym.verify.code hands the grader (each top-level check dumped on its own), key order aside."""
    return [json.dumps(c.model_dump(mode="json"), sort_keys=True) for c in task.verifier.code.checks]


def _walk(call, seen: list) -> None:
    seen.append(call)
    if isinstance(call, dict):
        for p in call.get("parts", []):
            _walk(p, seen)


def test_every_encoding_is_used_and_reads_back_into_the_same_checks(synthesized):
    calls: list = []
    for line in synthesized:
        for c in json.loads(line)["verifier"]["code"]["checks"]:
            _walk(c, calls)
    assert sum(isinstance(c, dict) and c.get("refs") == "others" for c in calls) > 20  # the distractors' gate
    assert sum(isinstance(c, dict) and "rows_from" in c for c in calls) > 10
    assert sum(isinstance(c, dict) and "workspace_digests" in c for c in calls) > 20
    assert sum('"workspace_texts":true' in x for x in synthesized) >= 2
    tasks = [Task.model_validate_json(x) for x in synthesized]
    # the full form (a python-mode dump is never encoded) reads into the same tasks, with the same grader input
    full = [Task.model_validate(json.loads(json.dumps(t.model_dump()))) for t in tasks]
    assert full == tasks
    assert [_grader_input(t) for t in full] == [_grader_input(t) for t in tasks]
    graders = "\n".join(g for t in tasks for g in _grader_input(t))
    for key in ('"rows_from"', '"workspace_digests"', '"workspace_text"', '"refs"'):
        assert key not in graders  # graders get the full form only
    assert '{"ref": ' in graders and '"digests": {' in graders


def test_old_records_read_into_the_same_checks_and_today_s_form_back(frozen, written):
    again = [Task.model_validate_json(x) for x in written]
    assert again == frozen
    assert [_grader_input(t) for t in again] == [_grader_input(t) for t in frozen]
    assert sum('"rows_from"' in x for x in written) > 50


def test_the_written_form_is_stable_and_valid_against_the_task_schema(synthesized, written, tmp_path):
    for lines in (synthesized, written):
        write_records(tmp_path / "again.jsonl", [Task.model_validate_json(x) for x in lines])
        assert (tmp_path / "again.jsonl").read_text(encoding="utf-8").splitlines() == lines
    validator = jsonschema.Draft202012Validator(record_schema("task"))
    for line in synthesized + written:
        data = json.loads(line)
        assert not list(validator.iter_errors(data)), data["id"]


def test_every_field_but_the_verifier_is_written_as_before(frozen, written):
    for task, line in zip(frozen, written, strict=True):
        data = json.loads(line)
        full = json.loads(task.model_dump_json())
        for key in full:
            if key != "verifier":
                assert data[key] == full[key], (task.id, key)


def test_the_workspace_digest_here_is_the_check_librarys(frozen):
    """core keeps its own copy of docs_digests_equal's normalisation (it is below the check library): on every
    workspace text of the suite and on the cases the normalisation is about, the two give the same digest."""
    texts = [f.content for t in frozen for f in t.workspace.files if f.content is not None]
    texts += ["**Bold** __under__ `code`", "  A\tB\n\nC  ", "Straße ÉCOLE", "x\u00a0y\u2028z", "", "*_*"]
    assert len(texts) > 500
    for text in texts:
        assert workspace_digest(text) == docs_digest(text)


# --------------------------------------------------------------------------------------------- hand-written forms


def _task(checks: list, values: dict | None = None, files: list | None = None, **code_extra) -> dict:
    code = {"kind": "checks", "checks": checks, "checklib": {"version": 3, "sha256": "0" * 64}, **code_extra}
    if values is not None:
        code["values"] = values
    return {"schema_version": 2, "id": "t1", "instruction": "do it",
            "workspace": {"files": files or [{"path": "a.txt", "content": "x"}]}, "verifier": {"code": code}}


_TABLE = {"path": "out.csv", "header": ["name", "total", "share"], "rows": [["a", "1", "0.5"], ["b", "1", "0.5"]]}


def test_hand_written_encodings_read_like_the_full_form():
    text = "the original settings, long enough to be worth naming\n"
    files = [{"path": "a.txt", "content": text}, {"path": "keep.md", "content": "# Notes\n\n**kept**\n"}]
    short = _task([
        {"name": "table", "fn": "csv_rows", "args": _TABLE},
        {"name": "ranked", "fn": "csv_rows", "args": {"path": "out.csv", "header": ["total", "name"]},
         "rows_from": "table"},
        {"name": "changed", "fn": "sys_changed", "args": {"path": "a.txt", "original": {"workspace_text": "a.txt"}}},
        {"name": "both", "fn": "all_of", "parts": [{"ref": "table"}, {"ref": "ranked"}]},
        {"name": "kept", "fn": "gated", "parts": [{"fn": "docs_digests_equal", "workspace_digests": ["keep.md"]},
                                                  {"refs": "others", "except": ["changed"]}]},
    ], files=files, workspace_texts=True)
    full = _task([
        {"name": "table", "fn": "csv_rows", "args": _TABLE},
        {"name": "ranked", "fn": "csv_rows",
         "args": {"path": "out.csv", "header": ["total", "name"], "rows": [["1", "a"], ["1", "b"]]}},
        {"name": "changed", "fn": "sys_changed", "args": {"path": "a.txt", "original": text}},
        {"name": "both", "fn": "all_of", "parts": [{"ref": "table"}, {"ref": "ranked"}]},
        {"name": "kept", "fn": "gated", "parts": [
            {"fn": "docs_digests_equal", "args": {"digests": {"keep.md": docs_digest("# Notes\n\n**kept**\n")}}},
            {"ref": "table"}, {"ref": "ranked"}, {"ref": "both"}]},
    ], files=files)
    assert Task.model_validate(short) == Task.model_validate(full)
    assert _grader_input(Task.model_validate(short)) == _grader_input(Task.model_validate(full))
    # and the full form is written as the short one
    written = json.loads(Task.model_validate(full).model_dump_json())["verifier"]["code"]
    assert written["workspace_texts"] is True
    assert written["checks"][1]["rows_from"] == "table"
    assert written["checks"][4]["parts"] == [{"fn": "docs_digests_equal", "workspace_digests": ["keep.md"]},
                                             {"refs": "others", "except": ["changed"]}]


def test_checks_naming_each_other_through_refs_to_others_are_a_cycle():
    checks = [{"name": "a", "fn": "all_of", "parts": [{"fn": "file_exists", "args": {"path": "x"}},
                                                      {"refs": "others"}]},
              {"name": "b", "fn": "all_of", "parts": [{"ref": "a"}]}]
    with pytest.raises(ValidationError, match="cycle"):
        Task.model_validate(_task(checks))


@pytest.mark.parametrize("check, message", [
    ({"name": "b", "fn": "csv_rows", "args": {"path": "x", "header": ["name"]}, "rows_from": "nope"},
     r"check 'b': `rows_from` names 'nope', which is no check of this task"),
    ({"name": "b", "fn": "csv_rows", "args": {"path": "x", "header": ["colour"]}, "rows_from": "table"},
     r"check 'b': column 'colour' is not in the header of 'table'"),
    ({"name": "b", "fn": "csv_rows", "args": {"path": "x", "header": ["name"], "rows": []}, "rows_from": "table"},
     r"`rows` is given in `args` and by `rows_from`"),
    ({"name": "b", "fn": "csv_rows", "args": {"path": "x", "header": ["name"]}, "rows_from": "b"},
     r"`rows_from` names 'b', which holds no rows of its own"),
    ({"name": "b", "fn": "all_of", "parts": [{"fn": "file_exists", "args": {"path": "x"}},
                                             {"refs": "others", "except": ["ghost"]}]},
     r"check 'b': `except` names 'ghost', which is no other check of this task"),
    ({"name": "b", "fn": "all_of", "parts": [{"fn": "file_exists", "args": {"path": "x"}},
                                             {"refs": "others", "except": ["table"]}]},
     r"leaves out every other check"),
    ({"name": "b", "fn": "all_of", "parts": [{"fn": "file_exists", "args": {"path": "x"}}, {"refs": "all"}]},
     r"a part with `refs` is \{\"refs\": \"others\"\}"),
    ({"name": "b", "fn": "docs_digests_equal", "workspace_digests": ["missing.md"]},
     r"check 'b': 'missing.md' is no file of the task's workspace given as inline text"),
    ({"name": "b", "fn": "docs_digests_equal", "args": {"digests": {"a.txt": "0" * 64}},
      "workspace_digests": ["a.txt"]}, r"`digests` is given in `args` and by `workspace_digests`"),
])
def test_a_written_form_naming_what_is_not_there_is_refused_naming_the_check(check, message):
    with pytest.raises(ValidationError, match=message):
        Task.model_validate(_task([{"name": "table", "fn": "csv_rows", "args": _TABLE}, check]))


def test_a_rows_from_chain_is_refused():
    checks = [{"name": "table", "fn": "csv_rows", "args": _TABLE},
              {"name": "b", "fn": "csv_rows", "args": {"path": "x", "header": ["name", "total"]}, "rows_from": "table"},
              {"name": "c", "fn": "csv_rows", "args": {"path": "x", "header": ["name"]}, "rows_from": "b"}]
    with pytest.raises(ValidationError, match=r"check 'c': `rows_from` names 'b', which holds no rows of its own"):
        Task.model_validate(_task(checks))


def test_a_hand_written_workspace_text_object_without_the_flag_is_plain_data(tmp_path):
    """Records from before (and hand-written ones) may hold an object `{"workspace_text": ...}` as data: it is read
    as it is, and written back as it is (never taken for a reference)."""
    data = _task([{"name": "j", "fn": "json_matches",
                   "args": {"path": "a.json", "expected": {"workspace_text": "a.txt"}}}])
    task = Task.model_validate(data)
    assert task.verifier.code.checks[0].args["expected"] == {"workspace_text": "a.txt"}
    again = Task.model_validate_json(task.model_dump_json())
    assert again == task and '"workspace_texts"' not in task.model_dump_json()


# --------------------------------------------------------------------------------------------- attacks


def test_an_agent_cannot_change_what_workspace_digests_compare_against():
    """The digests are taken from the task record's workspace when the task is read: the grader gets them as
    literal digests, never a path it would resolve in the sandbox the agent worked in."""
    files = [{"path": "a.txt", "content": "x"}, {"path": "notes.md", "content": "My notes\n"}]
    task = Task.model_validate(_task([{"name": "kept", "fn": "docs_digests_equal",
                                       "workspace_digests": ["notes.md"]}], files=files))
    assert task.verifier.code.checks[0].model_dump(mode="json") == {
        "name": "kept", "fn": "docs_digests_equal", "args": {"digests": {"notes.md": docs_digest("My notes\n")}}}


def test_rows_from_bomb_is_refused():
    """40 checks take the rows of one 1 MiB table: 40 MiB in memory from a 1 MiB line. Refused."""
    rows = [["x" * 1000, str(i)] for i in range(1050)]
    checks = [{"name": "big", "fn": "csv_rows", "args": {"path": "a", "header": ["a", "b"], "rows": rows}}] + [
        {"name": f"c{i}", "fn": "csv_rows", "args": {"path": "a", "header": ["a", "b"]}, "rows_from": "big"}
        for i in range(40)]
    assert 40 * len(json.dumps(rows)) > MAX_EXPANDED_VALUE_BYTES
    with pytest.raises(ValidationError, match="MiB of arguments"):
        Task.model_validate(_task(checks))


def test_rows_from_repeated_column_bomb_is_refused():
    """One check takes one column of a table 20,000 times over (a header repeating it): refused before the rows are
    built, however small the cells."""
    rows = [[str(i)] for i in range(2000)]
    checks = [{"name": "t", "fn": "csv_rows", "args": {"path": "a", "header": ["n"], "rows": rows}},
              {"name": "c", "fn": "csv_rows", "args": {"path": "a", "header": ["n"] * 20000}, "rows_from": "t"}]
    with pytest.raises(ValidationError, match="MiB of arguments"):
        Task.model_validate(_task(checks))


def test_refs_to_others_quadratic_bomb_is_refused():
    """3,000 checks each naming all the others: 9 million refs from a line of a few hundred KB. Refused."""
    checks = [{"name": f"check_{i:05d}", "fn": "gated",
               "parts": [{"fn": "file_exists", "args": {"path": "a.txt"}}, {"refs": "others"}]} for i in range(3000)]
    with pytest.raises(ValidationError, match="MiB of arguments"):
        Task.model_validate(_task(checks))


def test_workspace_text_bomb_is_refused():
    """A 1 MiB workspace file named from 40 arguments: 40 MiB of arguments from a 1 MiB line. Refused."""
    big = "y" * (1024 * 1024)
    checks = [{"name": f"c{i}", "fn": "sys_changed", "args": {"path": "a.txt", "original": {"workspace_text": "b.txt"}}}
              for i in range(40)]
    files = [{"path": "a.txt", "content": "x"}, {"path": "b.txt", "content": big}]
    with pytest.raises(ValidationError, match="MiB of arguments"):
        Task.model_validate(_task(checks, files=files, workspace_texts=True))


def test_workspace_reference_to_a_file_given_twice_is_refused():
    """Two entries of one path: which text a check compares against would depend on the order they are written."""
    files = [{"path": "a.txt", "content": "one"}, {"path": "a.txt", "content": "two"}]
    data = _task([{"name": "k", "fn": "docs_digests_equal", "workspace_digests": ["a.txt"]}], files=files)
    with pytest.raises(ValidationError, match="is no file of the task's workspace given as inline text"):
        Task.model_validate(copy.deepcopy(data))
