"""Checks as data (issue 19): a task's checks are `{name, fn, args, parts}` over ONE versioned check library,
copied into the sandbox's control directory at grading time.

* an unknown `fn` or arguments that are not JSON data fail when the task is made;
* a missing output file is a 0 the check returns (scored); a check that raises (a wrong argument, a bug) is
  `checker_failed` with the exception, never a silent 0;
* a fix to the library reaches a task already written: the task records the version it was written for, the
  verdict the one that graded it;
* tasks with a python grade() source (written before, or imported) grade as they did, and a PinchBench export
  renders a self-contained grade() that gives the same scores.
"""

from __future__ import annotations

import dataclasses

import pytest

from clawgym.agent.transcript import TranscriptBuilder
from clawgym.checks import UnknownCheckError, current_checklib, registered_checks, render_grade_source
from clawgym.checks import library as checks_mod
from clawgym.core.records import CheckCall, CodeCheck, Task, VerifierSpec
from clawgym.synth.checks import check_call
from clawgym.synth.ops.base import Check
from clawgym.verify import verify_episode


def transcript() -> list[dict]:
    tb = TranscriptBuilder(cwd="/workspace")
    tb.user("write hello to out.txt")
    tb.assistant("done")
    return tb.events


def checks_task(checks: list[dict], checklib: dict | None = None) -> Task:
    ref = checklib or current_checklib()[0].model_dump()
    return Task.model_validate({
        "id": "c", "instruction": "write hello to out.txt",
        "workspace": {"files": [{"path": "in.txt", "content": "in"}]},
        "verifier": {"code": {"kind": "checks", "checks": checks, "checklib": ref}},
    })


@pytest.fixture
def run(bwrap_backend):
    def _run(task: Task, prepare: str | None = None):
        with bwrap_backend.start(task.workspace) as sb:
            if prepare:
                assert sb.exec(prepare).exit_code == 0
            return verify_episode(task, sb, transcript(), "done")

    return _run


# --------------------------------------------------------------------------------------------- synthesis time


def test_unknown_check_function_fails_when_the_task_is_made():
    with pytest.raises(UnknownCheckError, match=r"check 'x'.*no check function 'no_such_check'.*@check"):
        check_call(Check("x", "no_such_check", {"path": "a"}), name="x")
    # inside a combinator too
    with pytest.raises(UnknownCheckError, match="part 2.*'nope'"):
        check_call(Check("y", "all_of", parts=[Check("", "file_exists", {"path": "a"}), Check("", "nope")]),
                   name="y")
    # a library helper that is not a registered check function is refused as well
    assert "same" not in registered_checks() and "file_exists" in registered_checks()
    with pytest.raises(UnknownCheckError, match="'same'"):
        check_call(Check("z", "same", {"a": 1, "b": 1}), name="z")


def test_check_arguments_must_be_json_data():
    call = check_call(Check("t", "text_has", {"path": "a.txt", "needles": ("x", "y")}), name="t")
    assert call.args == {"path": "a.txt", "needles": ["x", "y"]}  # a tuple is a JSON list
    for bad in ({"needles": {"x"}}, {"tol": float("nan")}, {"rows": {1: "a"}}):
        with pytest.raises(UnknownCheckError, match="not JSON data"):
            check_call(Check("t", "text_has", {"path": "a.txt", **bad}), name="t")


def test_registry_is_what_the_library_source_registers():
    import clawgym.checks.checklib_data  # noqa: F401 (the extensions register on import)
    import clawgym.checks.checklib_docs  # noqa: F401
    import clawgym.checks.checklib_sys  # noqa: F401
    from clawgym.checks.checklib import CHECKLIB_VERSION, REGISTRY

    assert set(REGISTRY) == set(registered_checks())
    assert current_checklib()[0].version == CHECKLIB_VERSION


def test_checks_code_check_shape_and_compact_form():
    code = CodeCheck(kind="checks", checklib=current_checklib()[0], checks=[
        CheckCall(name="a", fn="file_exists", args={"path": "out.txt"}),
        CheckCall(name="b", fn="all_of", parts=[CheckCall(fn="file_exists", args={"path": "out.txt"})])])
    data = code.model_dump(mode="json")
    assert data["checks"][1] == {"name": "b", "fn": "all_of", "parts": [{"fn": "file_exists",
                                                                           "args": {"path": "out.txt"}}]}
    assert "checks" not in CodeCheck(kind="python", source="def grade(t, w): return {}").model_dump()
    with pytest.raises(ValueError, match="unique"):
        CodeCheck(kind="checks", checklib=current_checklib()[0],
                  checks=[CheckCall(name="a", fn="file_exists"), CheckCall(name="a", fn="file_exists")])
    with pytest.raises(ValueError, match="checklib"):
        CodeCheck(kind="checks", checks=[CheckCall(name="a", fn="file_exists")])


# --------------------------------------------------------------------------------------------- grading


FIXED = [
    {"name": "exists", "fn": "file_exists", "args": {"path": "out.txt"}},
    {"name": "says_hello", "fn": "text_has", "args": {"path": "out.txt", "needles": ["hello", "world"]}},
    {"name": "both", "fn": "gated", "parts": [
        {"fn": "file_exists", "args": {"path": "out.txt"}},
        {"fn": "min_of", "parts": [{"fn": "text_has", "args": {"path": "out.txt", "needles": ["hello"]}},
                                   {"fn": "text_has", "args": {"path": "out.txt", "needles": ["world"]}}]}]},
]


def test_checks_grade_with_partial_credit_and_record_the_library(run):
    v = run(checks_task(FIXED), "echo hello > out.txt")
    assert v.status == "scored", v.error
    assert v.checks == {"exists": 1.0, "says_hello": 0.5, "both": 0.0}
    assert v.checklib == current_checklib()[0]
    v = run(checks_task(FIXED), "echo hello world > out.txt")
    assert v.score == 1.0 and v.passed


def test_missing_output_file_is_a_scored_zero(run):
    v = run(checks_task(FIXED))
    assert v.status == "scored" and v.error is None
    assert v.checks == {"exists": 0.0, "says_hello": 0.0, "both": 0.0} and v.score == 0.0


@pytest.mark.parametrize("checks, reason", [
    # an argument of the wrong type: text_has iterates `needles`
    ([{"name": "bad", "fn": "text_has", "args": {"path": "out.txt", "needles": 5}}],
     "check 'bad' (text_has) raised TypeError"),
    # an argument the function does not take
    ([{"name": "bad", "fn": "file_exists", "args": {"path": "out.txt", "bogus": 1}}],
     "check 'bad' (file_exists) raised TypeError"),
    # inside a combinator
    ([{"name": "ok", "fn": "file_exists", "args": {"path": "out.txt"}},
      {"name": "bad", "fn": "all_of", "parts": [{"fn": "csv_rows", "args": {"path": "out.txt", "header": [1],
                                                                             "rows": [["a"]]}}]}],
     "check 'bad' (all_of) raised AttributeError"),
    # a function this library lacks (a hand-written task)
    ([{"name": "bad", "fn": "no_such_check", "args": {}}], "has no check function 'no_such_check'"),
])
def test_a_check_that_raises_is_checker_failed_with_the_exception(run, checks, reason):
    v = run(checks_task(checks), "printf 'a,b\\n1,2\\n' > out.txt")
    assert v.status == "checker_failed" and v.score == 0.0
    assert reason in (v.error or ""), v.error
    assert v.checklib == current_checklib()[0]


def test_a_suite_that_passes_only_on_its_second_run_is_not_paid_by_a_check_repeating_it(bwrap_backend):
    """A step's check repeated as another check's gate (the distractors check gates on the step's own checks, a
    test suite among them) is evaluated once per workspace: the gate sees the same value, and a workspace whose
    script changes its answer when run again (here: it passes once it has been run before) cannot turn the
    repeat into a pass. It also halves the cost of repository tasks, whose suites are the most expensive checks."""
    suite = {"fn": "command_ok", "args": {"argv": ["sh", "tick.sh"]}}
    task = checks_task([{"name": "suite", **suite},
                        {"name": "gate", "fn": "all_of", "parts": [{"fn": "file_exists", "args": {"path": "in.txt"}},
                                                                   suite]}])
    with bwrap_backend.start(task.workspace) as sb:
        assert sb.exec("printf 'echo run >> ticks.txt; [ $(wc -l < ticks.txt) -ge 2 ]\\n' > tick.sh").exit_code == 0
        v = verify_episode(task, sb, transcript(), "done")
        ticks = sb.exec("cat ticks.txt").stdout
    assert v.status == "scored", v.error
    assert v.checks == {"suite": 0.0, "gate": 0.0}
    assert ticks.count("run") == 1


def test_a_library_fix_reaches_a_task_already_written(run, monkeypatch):
    """A task written for a library version is graded with whatever library is current: patch the library (a 'fix' to
    text_equals: compare case-insensitively) and bump its version; the same task gets the fixed behaviour and its
    verdict records the library that graded it."""
    task = checks_task([{"name": "eq", "fn": "text_equals", "args": {"path": "out.txt", "expected": "Hello"}}])
    written_for = task.verifier.code.checklib
    v = run(task, "echo hello > out.txt")
    assert v.status == "scored" and v.checks == {"eq": 0.0} and v.checklib == written_for

    source = checks_mod.CHECKLIB_SOURCE
    old = "        return 1.0 if text.strip() == expected.strip() else 0.0\n"
    assert source.count(old) == 1
    version = current_checklib()[0].version
    fixed = (source.replace(old, "        return 1.0 if text.strip().casefold() == expected.strip().casefold() "
                                 "else 0.0\n")
             .replace(f"\nCHECKLIB_VERSION = {version}\n", f"\nCHECKLIB_VERSION = {version + 1}\n"))
    monkeypatch.setattr(checks_mod, "CHECKLIB_SOURCE", fixed)
    ref = current_checklib()[0]
    assert ref.version == version + 1 and ref.sha256 != written_for.sha256

    v = run(task, "echo hello > out.txt")
    assert v.status == "scored" and v.checks == {"eq": 1.0}, (v.error, v.checks)
    assert v.checklib == ref  # the verdict names the library that graded it
    assert any(f"written for check library v{version}" in n and f"graded with v{version + 1}" in n for n in v.notes)


def test_a_task_written_for_a_newer_library_is_not_graded_with_an_older_one(run):
    ref = current_checklib()[0]
    task = checks_task(FIXED, {"version": ref.version + 1, "sha256": "0" * 64})
    v = run(task, "echo hello > out.txt")
    assert v.status == "checker_failed" and "upgrade clawgym" in (v.error or "")


def test_old_form_python_grade_source_still_grades(run):
    """A task as synthesized before checks were data: its embedded grade() runs as it always did (the narrowed
    library is only what new renders embed)."""
    old = (
        "from pathlib import Path\n\n\n"
        "def file_exists(ws, path, min_bytes=1):\n"
        "    try:\n        p = Path(ws) / path\n"
        "        return 1.0 if p.is_file() and p.stat().st_size >= min_bytes else 0.0\n"
        "    except Exception:\n        return 0.0\n"
        + checks_mod.GRADE_TAIL.format(checks="    ('exists', lambda ws, transcript: file_exists(ws, **{'path': "
                                              "'out.txt'})),\n    ('bad', lambda ws, transcript: "
                                              "file_exists(ws, **{'path': 5})),")
    )
    task = Task.model_validate({"id": "o", "instruction": "x", "verifier": {"code": {"kind": "python",
                                                                                      "source": old}}})
    v = run(task, "echo hello > out.txt")
    # the old tail turns the broken check into a 0, as it always did
    assert v.status == "scored" and v.checks == {"exists": 1.0, "bad": 0.0} and v.checklib is None


# --------------------------------------------------------------------------------------------- synthesized tasks


def test_synthesized_tasks_and_their_pinchbench_export_score_the_same(bwrap_backend, tmp_path):
    """Synthesized tasks carry checks as data; the python grade() rendered for PinchBench, exported and imported
    back, scores the oracle, no-op, partial and cheat workspaces exactly as the checks do."""
    from clawgym.importers import import_pinchbench
    from clawgym.importers.pinchbench import export_pinchbench
    from clawgym.synth.pipeline import make_candidates
    from clawgym.synth.validate import validate_candidate

    cands = [c for _, _, c in make_candidates(7, [(i, 0) for i in range(3)])]
    assert all(not isinstance(c, Exception) for c in cands)
    export_pinchbench([c.task for c in cands], tmp_path)
    imported = {t.id: t for t in import_pinchbench(tmp_path).tasks}
    for cand in cands:
        code = cand.task.verifier.code
        assert code.kind == "checks" and code.checklib == current_checklib()[0]
        source = render_grade_source(cand.task)
        assert "def grade(transcript, workspace_path)" in source and "REGISTRY" not in source
        back = imported[f"task_{cand.task.id}"]
        assert back.verifier.code.kind == "python" and back.verifier.code.source.strip() == source.strip()
        as_python = dataclasses.replace(cand, task=cand.task.model_copy(update={"verifier": VerifierSpec(
            code=back.verifier.code, rubric=cand.task.verifier.rubric)}))
        a, b = validate_candidate(cand, bwrap_backend), validate_candidate(as_python, bwrap_backend)
        assert a.ok, (a.reason, a.detail)
        for state in ("oracle", "noop", "partial"):
            va, vb = getattr(a, state), getattr(b, state)
            assert (va.status, va.checks) == (vb.status, vb.checks), (cand.task.id, state)
        assert {k: v.checks for k, v in a.cheats.items()} == {k: v.checks for k, v in b.cheats.items()}
        assert a.oracle.score == 1.0 and a.noop.score == 0.0


# --------------------------------------------------------------------------------------------- the CLI


def test_cli_validate_flags_unknown_check_functions_and_export_renders_grade(tmp_path):
    from typer.testing import CliRunner

    from clawgym.cli.app import app
    from clawgym.core.jsonl import write_records
    from clawgym.importers import import_pinchbench

    good = checks_task(FIXED)
    bad = checks_task([{"name": "x", "fn": "no_such_check"}]).model_copy(update={"id": "bad"})
    tasks = tmp_path / "tasks.jsonl"
    write_records(tasks, [good, bad])
    res = CliRunner().invoke(app, ["validate", str(tasks)])
    assert res.exit_code == 1
    assert "task bad: check 'x': the check library (v" in res.output and "'no_such_check'" in res.output
    assert "1 valid task records, 1 bad lines" in " ".join(res.output.split())

    write_records(tasks, [good])
    res = CliRunner().invoke(app, ["export", "pinchbench", str(tasks), "-o", str(tmp_path / "pb")])
    assert res.exit_code == 0, res.output
    back = import_pinchbench(tmp_path / "pb").tasks
    assert [t.id for t in back] == ["task_c"]
    assert back[0].verifier.code.source.strip() == render_grade_source(good).strip()
