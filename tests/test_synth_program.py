"""Program solutions (``synthesize(..., solution="program")``): the same tasks, with references that compute.

* the tasks are those of ``solution="direct"`` byte for byte, bar the reference solutions;
* where an operation has a program, the reference is an ``exec`` of ``python3`` and validation in a real bwrap
  sandbox accepted it (reference 1.0, no-op 0), i.e. the script really produces what the checks want;
* the script's task-specific constants (UPPER_CASE assignments at its top) are words of the request or of the
  files it reads (or a verb the fixed part of the script dispatches on): what a student model has to copy,
  never something it has to compute;
* an unknown solution kind is one clear error.
"""

from __future__ import annotations

import ast
import json
import re

import pytest

from clawgym.core.errors import ClawgymError
from clawgym.synth.pipeline import synthesize

# operations with a program solution for their standalone variants
PROGRAM_OPS = ["clean_data", "build_plan", "convert_format", "edit_config"]
HEREDOC = re.compile(r"^python3 - <<'PY'\n(.*)PY$", re.S)


def _tasks(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _constants(script: str) -> tuple[list[str], str]:
    """String constants assigned to UPPER_CASE names at the top (the part of a program that differs between
    tasks), and the source of the rest (the same for every task of its kind)."""
    out = []
    body = ast.parse(script).body
    rest = ""
    for i, node in enumerate(body):
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        names = [n for t in getattr(node, "targets", []) for n in ast.walk(t) if isinstance(n, ast.Name)]
        if not isinstance(node, ast.Assign) or not all(n.id.isupper() for n in names):
            rest = "\n".join(ast.unparse(n) for n in body[i:])
            break
        out += [n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert out, "a program without task-specific constants"
    return out, rest


def _task_itself(t: dict) -> dict:
    """A task without its reference solution and the metadata that records how that reference was made."""
    meta = {k: v for k, v in t["metadata"].items() if k not in ("solution", "program_ops")}
    return dict(t, reference=None, metadata=meta)


def test_program_references_compute_the_same_tasks(tmp_path, bwrap_backend):
    direct, program = tmp_path / "direct.jsonl", tmp_path / "program.jsonl"
    for path, solution in ((direct, "direct"), (program, "program")):
        report = synthesize(24, 9, path, jobs=2, operations=PROGRAM_OPS + ["draft_message"], max_ops=1,
                            solution=solution)
        assert report.written == 24
    a, b = _tasks(direct), _tasks(program)
    assert [_task_itself(t) for t in a] == [_task_itself(t) for t in b]
    # the program file says how its references were made; the direct one keeps its bytes (no such keys)
    assert all(t["metadata"]["solution"] == "program" for t in b) and not any("solution" in t["metadata"] for t in a)
    seen = set()
    for t in b:
        steps = t["reference"]["steps"]
        execs = [s for s in steps if s["name"] == "exec"]
        if t["operations"][0] in PROGRAM_OPS:
            assert execs and steps[-1]["name"] == "exec", (t["id"], [s["name"] for s in steps])
        if not execs:
            continue
        seen.add(t["operations"][0])
        m = HEREDOC.match(execs[-1]["arguments"]["command"])
        assert m, execs[-1]["arguments"]["command"][:80]
        script = m.group(1)
        assert "write" not in {s["name"] for s in steps}  # the answer is computed, not written out
        sources = t["instruction"] + "".join((f.get("content") or "") + json.dumps(f.get("generate"), ensure_ascii=False)
                                             for f in t["workspace"]["files"])
        consts, rest = _constants(script)
        for c in consts:  # copied from the request or the files, or a word the fixed part dispatches on
            assert c.removeprefix("Re: ") in sources or repr(c) in rest, (t["id"], c)
    assert seen >= {"clean_data", "build_plan"}, seen


def test_unknown_solution_kind_is_one_clear_error(tmp_path):
    with pytest.raises(ClawgymError, match="--solution"):
        synthesize(1, 0, tmp_path / "x.jsonl", validate=False, solution="magic")


def test_program_ops_limit_programs_to_those_operations(tmp_path):
    out = tmp_path / "t.jsonl"
    synthesize(16, 9, out, validate=False, operations=["clean_data", "build_plan"], max_ops=1, solution="program",
               program_ops=["clean_data"])
    kinds = {(t["operations"][0], t["reference"]["steps"][-1]["name"]) for t in _tasks(out)}
    assert kinds == {("clean_data", "exec"), ("build_plan", "write")}
    with pytest.raises(ClawgymError, match="--program-ops: unknown operation"):
        synthesize(1, 0, tmp_path / "x.jsonl", validate=False, solution="program", program_ops=["no_such_op"])


def test_resume_refuses_a_file_made_with_other_reference_solutions(tmp_path):
    """Resuming with another --solution (or --program-ops) would mix two kinds of references in one file."""
    out = tmp_path / "t.jsonl"
    opts = dict(validate=False, operations=["clean_data", "build_plan"], max_ops=1)
    synthesize(2, 9, out, solution="program", program_ops=["clean_data"], **opts)
    assert {(t["metadata"]["solution"], tuple(t["metadata"]["program_ops"])) for t in _tasks(out)} == {
        ("program", ("clean_data",))}
    before = out.read_bytes()
    with pytest.raises(ClawgymError, match=r"made with --solution program --program-ops clean_data; resume with"):
        synthesize(4, 9, out, **opts)
    with pytest.raises(ClawgymError, match="made with --solution program"):
        synthesize(4, 9, out, solution="program", **opts)  # every operation's programs: not the same references
    assert out.read_bytes() == before
    report = synthesize(4, 9, out, solution="program", program_ops=["clean_data"], **opts)
    assert report.resumed == 2 and report.written == 2
    direct = tmp_path / "d.jsonl"
    synthesize(1, 9, direct, **opts)
    assert "solution" not in _tasks(direct)[0]["metadata"]  # the default leaves the bytes as they were
    with pytest.raises(ClawgymError, match=r"made with --solution direct \(or by an older clawgym"):
        synthesize(2, 9, direct, solution="program", **opts)
