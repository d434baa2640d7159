"""Persona-driven synthesis: the pipeline's determinism and resume, and validation's rejection reasons."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from clawgym.core.jsonl import read_records
from clawgym.core.records import Task
from clawgym.core.taxonomy import load_taxonomy
from clawgym.synth.checks import render_grade
from clawgym.synth.compose import compose_task
from clawgym.synth.ops.base import TABLE, Artifact, Check, StepPlan, write
from clawgym.synth.ops.clean_data import CleanData
from clawgym.synth.personas import load_personas
from clawgym.synth.pipeline import synthesize
from clawgym.synth.validate import validate_candidate, validate_candidate_episodes


@pytest.fixture(scope="module")
def tax():
    return load_taxonomy()


@pytest.fixture(scope="module")
def personas(tax):
    return load_personas(taxonomy=tax)


def test_same_seed_same_bytes_whatever_the_workers(tmp_path, bwrap_backend):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    synthesize(5, 3, a, jobs=1)
    synthesize(5, 3, b, jobs=2)
    assert a.read_bytes() == b.read_bytes()
    tasks = read_records(a, Task)
    assert [t.id for t in tasks] == [f"persona-s3-{i:06d}" for i in range(5)]
    assert len({t.instruction for t in tasks}) == 5
    c = tmp_path / "c.jsonl"
    synthesize(4, 4, c, jobs=1)
    assert c.read_bytes() != a.read_bytes()[: len(c.read_bytes())]


def test_resume_gives_the_same_file(tmp_path, bwrap_backend):
    whole, part = tmp_path / "whole.jsonl", tmp_path / "part.jsonl"
    synthesize(4, 1, whole, jobs=2)
    synthesize(2, 1, part, jobs=1)
    report = synthesize(4, 1, part, jobs=2)
    assert report.resumed == 2 and report.written == 2
    assert part.read_bytes() == whole.read_bytes()
    with pytest.raises(Exception, match="another seed"):
        synthesize(4, 2, part)


class _Broken:
    """A generator whose parts can be broken one at a time, to see validation catch each."""

    id = "clean_data"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True

    def __init__(self, mode: str):
        self.mode = mode

    def plan(self, ctx, source):
        good = CleanData().plan(ctx, source)
        out = good.outputs[0].path
        if self.mode == "wrong_reference":
            good.steps = [write(out, "date,payee,category,amount\n2026-01-01,x,y,1.00\n")]
        elif self.mode == "noop_passes":
            good.checks.append(Check("input_exists", "file_exists", {"path": good.files[0].path}))
        elif self.mode == "partial_is_full":
            good.partial = list(good.steps)
        elif self.mode == "reference_tool_error":
            good.steps = good.steps + [{"name": "exec", "arguments": {"command": "false"}}]
        return good


@pytest.mark.parametrize("mode, reason", [
    ("ok", None),
    ("wrong_reference", "reference_below_1"),
    ("noop_passes", "noop_above_0"),
    ("partial_is_full", "partial_not_between"),
    ("reference_tool_error", "reference_tool_error"),
])
def test_validation_rejects_each_kind_of_unsound_task(tax, personas, bwrap_backend, mode, reason):
    sub = tax.subcategories[0]
    gen = CleanData() if mode == "ok" else _Broken(mode)
    cand = compose_task("t", personas[0], sub, tax, {gen.id: gen}, random.Random(5), 1)
    v = validate_candidate(cand, bwrap_backend)
    assert v.ok == (reason is None), (v.reason, v.detail)
    assert v.reason == reason
    if reason is None:
        assert v.oracle.score == 1.0 and all(x == 0 for x in v.noop.checks.values()) and 0 < v.partial.score < 1
    # the one-sandbox fast path agrees with three ordinary rollout episodes
    slow = validate_candidate_episodes(cand, bwrap_backend)
    assert slow.reason == v.reason
    for a, b in ((v.oracle, slow.oracle), (v.noop, slow.noop), (v.partial, slow.partial)):
        assert (a.checks, a.score) == (b.checks, b.score)


def test_grade_source_is_self_contained(tmp_path):
    plan = StepPlan(
        operation="x", instruction="", steps=[], partial=[],
        checks=[Check("has", "text_has", {"path": "a.txt", "needles": ["hello", "world"]}),
                Check("both", "all_of", parts=[Check("e", "file_exists", {"path": "a.txt"}),
                                               Check("t", "text_has", {"path": "a.txt", "needles": ["world"]})])],
        outputs=[Artifact("a.txt", TABLE, {}, "")],
    )
    source = render_grade([plan])
    (tmp_path / "a.txt").write_text("Hello there")
    ns: dict = {}
    exec(compile(source, "grade.py", "exec"), ns)  # our own generated source, run on the host in this test
    assert ns["grade"]([], str(tmp_path)) == {"has": 0.5, "both": 0.0}
    (tmp_path / "a.txt").write_text("hello world")
    assert ns["grade"]([], str(tmp_path)) == {"has": 1.0, "both": 1.0}


def test_bad_persona_file_gives_one_clear_line(tmp_path):
    bad = tmp_path / "personas.yaml"
    bad.write_text("personas:\n  - id: a\n    name: A\n")
    r = subprocess.run([sys.executable, "-m", "clawgym", "synth", "persona", "-n", "1", "-o", str(tmp_path / "o.jsonl"),
                        "--personas", str(bad)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(bad) in lines[0] and ":2" in lines[0], r.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_operation_filter_and_max_ops(tmp_path, bwrap_backend):
    out = tmp_path / "ops.jsonl"
    report = synthesize(10, 5, out, jobs=1, sandbox="bwrap", operations=["convert_format", "edit_config"],
                        max_ops=1)
    tasks = read_records(out, Task)
    assert report.written == 10 and len(tasks) == 10
    assert all(len(t.operations) == 1 and t.operations[0] in {"convert_format", "edit_config"} for t in tasks)
    assert {t.operations[0] for t in tasks} == {"convert_format", "edit_config"}
    # two operations allowed, chains up to 2: every operation of every task is one of them
    out2 = tmp_path / "ops2.jsonl"
    synthesize(8, 5, out2, jobs=1, sandbox="bwrap", operations=["clean_data", "aggregate_and_report"], max_ops=2)
    tasks2 = read_records(out2, Task)
    assert all(set(t.operations) <= {"clean_data", "aggregate_and_report"} for t in tasks2)
    assert max(len(t.operations) for t in tasks2) <= 2


def test_operation_filter_rejects_unknown_ids(tmp_path):
    from clawgym.core.errors import ClawgymError

    with pytest.raises(ClawgymError, match="unknown operation"):
        synthesize(2, 0, tmp_path / "x.jsonl", validate=False, operations=["no_such_op"])
    assert not (tmp_path / "x.jsonl").exists()


def test_split_personas_gives_disjoint_loadable_halves(tmp_path):
    from clawgym.synth.personas import default_personas_path, split_personas

    a, b, na, nb = split_personas(None, tmp_path)
    pa, pb = load_personas(a), load_personas(b)
    everyone = load_personas(default_personas_path())
    assert (na, nb) == (len(pa), len(pb)) and na + nb == len(everyone) and abs(na - nb) <= 1
    assert not {p.id for p in pa} & {p.id for p in pb}
    assert {p.id for p in pa} | {p.id for p in pb} == {p.id for p in everyone}
    before = a.stat().st_mtime_ns
    split_personas(None, tmp_path)  # a rerun leaves identical files alone
    assert a.stat().st_mtime_ns == before
