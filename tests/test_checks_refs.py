"""A check refers to another by name (`{"ref": name}`, check library v3) instead of repeating it, and the check
functions that run a program are declared by their decorator (`@check(runs_program=True)`).

* a ref is the score the named check gets, evaluated once per grading, whichever names it first;
* refs to a name the task lacks, to the check they are part of, or in a cycle are refused when the task is read;
* a synthesized task (refs, digests) grades every workspace as its inline encoding does, graded as checks or as
  the self-contained grade() a PinchBench export renders;
* a task written for check library v2 (inline copies) still grades with the current library.
"""

from __future__ import annotations

import hashlib

import pytest
from pydantic import ValidationError

from clawgym.agent.transcript import TranscriptBuilder
from clawgym.checks import current_checklib, render_grade_source
from clawgym.checks.library import inline_refs, program_checks
from clawgym.core.records import CodeCheck, Task, VerifierSpec
from clawgym.verify import verify_episode


def transcript() -> list[dict]:
    tb = TranscriptBuilder(cwd="/workspace")
    tb.user("write hello to out.txt")
    tb.assistant("done")
    return tb.events


def checks_task(checks: list[dict], checklib: dict | None = None) -> Task:
    return Task.model_validate({
        "id": "r", "instruction": "write hello to out.txt",
        "workspace": {"files": [{"path": "in.txt", "content": "in"}]},
        "verifier": {"code": {"kind": "checks", "checks": checks,
                              "checklib": checklib or current_checklib()[0].model_dump()}},
    })


def as_python(task: Task) -> Task:
    """The task graded by the grade() source its PinchBench export renders."""
    code = CodeCheck(kind="python", source=render_grade_source(task))
    return task.model_copy(update={"verifier": VerifierSpec(code=code)})


TICK = "printf 'echo run >> ticks.txt; [ $(wc -l < ticks.txt) -ge 2 ]\\n' > tick.sh; echo hello > out.txt"
SUITE = {"fn": "all_of", "parts": [{"fn": "file_exists", "args": {"path": "out.txt"}},
                                   {"fn": "command_output_has", "args": {"argv": ["sh", "-c", "sh tick.sh; echo $?"],
                                                                         "needles": ["1"]}}]}
# `gate` names `suite` before it comes; `again` names it after
WITH_REFS = [
    {"name": "gate", "fn": "gated", "parts": [{"fn": "file_exists", "args": {"path": "in.txt"}}, {"ref": "suite"}]},
    {"name": "suite", **SUITE},
    {"name": "again", "fn": "min_of", "parts": [{"ref": "suite"}, {"ref": "gate"}]},
]


def test_refs_are_evaluated_once_and_give_the_named_checks_score(bwrap_backend):
    """The suite writes a line each time it runs (and fails from its second run on): named by two checks, one
    before it and one after, it runs once and both get its score."""
    for task in (checks_task(WITH_REFS), as_python(checks_task(WITH_REFS))):
        with bwrap_backend.start(task.workspace) as sb:
            assert sb.exec(TICK).exit_code == 0
            v = verify_episode(task, sb, transcript(), "done")
            ticks = sb.exec("cat ticks.txt").stdout
        assert v.status == "scored", v.error
        assert v.checks == {"gate": 1.0, "suite": 1.0, "again": 1.0}, task.verifier.code.kind
        assert ticks.count("run") == 1, task.verifier.code.kind


def test_refs_grade_as_the_inline_copies_do(bwrap_backend):
    inline = [c.model_dump(mode="json") for c in inline_refs(checks_task(WITH_REFS).verifier.code.checks)]
    assert "ref" not in str(inline) and inline[0]["parts"][1] == SUITE
    for prepare in ("echo hello > out.txt", "echo hello > out.txt; echo 'echo 1' > tick.sh", ""):
        got = []
        for task in (checks_task(WITH_REFS), checks_task(inline), as_python(checks_task(WITH_REFS))):
            with bwrap_backend.start(task.workspace) as sb:
                if prepare:
                    assert sb.exec(prepare).exit_code == 0
                got.append(verify_episode(task, sb, transcript(), "done").checks)
        assert got[0] == got[1] == got[2], (prepare, got)


def test_a_check_that_raises_fails_every_check_naming_it_as_a_copy_would(bwrap_backend):
    bad = [{"name": "bad", "fn": "text_has", "args": {"path": "out.txt", "needles": 5}},
           {"name": "uses_it", "fn": "all_of", "parts": [{"ref": "bad"}]}]
    task = checks_task(list(reversed(bad)))
    with bwrap_backend.start(task.workspace) as sb:
        assert sb.exec("echo hello > out.txt").exit_code == 0
        v = verify_episode(task, sb, transcript(), "done")
    assert v.status == "checker_failed" and "check 'uses_it' (all_of) raised TypeError" in (v.error or "")


@pytest.mark.parametrize("checks, message", [
    ([{"name": "a", "fn": "all_of", "parts": [{"ref": "nope"}]}],
     "check 'a' refers to 'nope', which is no check of this task"),
    ([{"name": "a", "fn": "all_of", "parts": [{"fn": "min_of", "parts": [{"ref": "a"}]}]}],
     "check 'a' refers to itself"),
    ([{"name": "a", "fn": "all_of", "parts": [{"ref": "b"}]}, {"name": "b", "fn": "all_of", "parts": [{"ref": "c"}]},
      {"name": "c", "fn": "min_of", "parts": [{"fn": "file_exists", "args": {"path": "x"}}, {"ref": "a"}]}],
     "checks refer to each other in a cycle: 'a' -> 'b' -> 'c' -> 'a'"),
    ([{"name": "a", "fn": "all_of", "parts": [{"ref": "b", "fn": "file_exists"}]}, {"name": "b", "fn": "file_exists"}],
     "a part naming another check (ref 'b') holds nothing else"),
    ([{"name": "a", "ref": "b"}, {"name": "b", "fn": "file_exists"}],
     "a part naming another check (ref 'b') holds nothing else"),
    ([{"name": "a"}], "a check needs `fn`"),
])
def test_refs_to_unknown_self_or_cyclic_names_are_refused_when_the_task_is_read(checks, message):
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        checks_task(checks)


def test_a_ref_is_written_alone_and_read_back():
    task = checks_task(WITH_REFS)
    data = task.verifier.code.model_dump(mode="json")["checks"]
    assert data[0]["parts"][1] == {"ref": "suite"} and data[2] == WITH_REFS[2]
    assert Task.model_validate_json(task.model_dump_json()) == task


def test_a_task_written_for_library_v2_with_inline_copies_still_grades(bwrap_backend):
    v2 = {"version": 2, "sha256": hashlib.sha256(b"v2").hexdigest()}
    task = checks_task([{"name": "suite", **SUITE}, {"name": "gate", "fn": "gated", "parts": [
        {"fn": "file_exists", "args": {"path": "in.txt"}}, SUITE]}], v2)
    with bwrap_backend.start(task.workspace) as sb:
        assert sb.exec(TICK).exit_code == 0
        v = verify_episode(task, sb, transcript(), "done")
    assert v.status == "scored" and v.checks == {"suite": 1.0, "gate": 1.0}, v.error
    assert any("written for check library v2" in n for n in v.notes)
    assert v.checklib == current_checklib()[0] and v.checklib.version == 3


def test_synthesized_tasks_grade_as_their_inline_encoding(bwrap_backend):
    """Persona tasks name their checks from the distractors' gate (refs) and compare kept files by digest; the
    same task with every ref expanded into a copy, and its rendered grade(), score every state the same."""
    import dataclasses

    from clawgym.synth.pipeline import make_candidates
    from clawgym.synth.validate import validate_candidate

    cands = [c for _, _, c in make_candidates(17, [(i, 0) for i in range(4)])]
    assert all(not isinstance(c, Exception) for c in cands)
    assert any("'ref'" in str(c.task.verifier.code.model_dump()) for c in cands)
    for cand in cands:
        code = cand.task.verifier.code
        kept = code.checks[-1]
        assert kept.name.startswith("distractors_kept") and kept.parts[0].fn == "docs_digests_equal"
        assert all(p.ref is not None for p in kept.parts[1:])
        inline = code.model_copy(update={"checks": inline_refs(code.checks)})
        results = [validate_candidate(dataclasses.replace(cand, task=t), bwrap_backend) for t in (
            cand.task, cand.task.model_copy(update={"verifier": VerifierSpec(code=inline)}), as_python(cand.task))]
        assert results[0].ok, (results[0].reason, results[0].detail)
        for state in ("oracle", "noop", "partial"):
            assert len({str(getattr(r, state).checks) for r in results}) == 1, (cand.task.id, state)
        assert len({str({k: v.checks for k, v in r.cheats.items()}) for r in results}) == 1


def test_the_checks_that_run_a_program_are_declared_by_their_decorator():
    """`@check(runs_program=True)` replaces the list distractors.py kept by hand (the set it held)."""
    import clawgym.checks.checklib_data  # noqa: F401 (the extensions register on import)
    import clawgym.checks.checklib_docs  # noqa: F401
    import clawgym.checks.checklib_sys  # noqa: F401
    from clawgym.checks.checklib import REGISTRY, RUNS_PROGRAM
    from clawgym.synth.distractors import _runs_program
    from clawgym.synth.ops.base import Check

    old_slow = {"pytest_passes", "command_ok", "command_output_has", "sys_script_table", "sys_py_cases",
                "sys_git_clean", "git_commits_since", "sqlite_rows"}
    assert program_checks() == old_slow == RUNS_PROGRAM
    assert "file_exists" in REGISTRY and "file_exists" not in RUNS_PROGRAM  # plain @check still registers
    assert _runs_program(Check("x", "gated", parts=[Check("", "file_exists"), Check("", "pytest_passes")]))
    assert not _runs_program(Check("x", "gated", parts=[Check("", "file_exists"), Check("", "text_has")]))
