"""Distractor files in persona-route workspaces (clawgym.synth.distractors, issue #20)."""

from __future__ import annotations

import posixpath
import random

import pytest

from clawgym.checks import CHECKLIB_SOURCE
from clawgym.synth import distractors
from clawgym.synth.pipeline import make_candidates


@pytest.fixture(scope="module")
def cands():
    return [c for _, _, c in make_candidates(4242, ((i, 0) for i in range(120))) if not isinstance(c, Exception)]


def test_every_task_has_one_to_three_distractors_the_request_never_names(cands):
    for c in cands:
        t = c.task
        extra = t.metadata.get("distractors", [])
        assert 1 <= len(extra) <= 3, (t.id, extra)
        task_paths = [f.path for p in c.plans for f in p.files]
        assert [f.path for f in t.workspace.files] == task_paths + extra  # appended after the task's own files
        for path in extra:
            assert path not in task_paths
            assert path not in t.instruction and posixpath.basename(path) not in t.instruction
            # never in or under a folder a step treats as a whole
            for p in c.plans:
                if p.operation in distractors.FOLDER_OPS:
                    for f in p.files:
                        d = posixpath.dirname(f.path)
                        for blocked in (d, f.path):
                            if blocked:
                                assert not (path.startswith(blocked + "/")), (t.id, path, blocked)
        kept = t.verifier.code.checks[-1]
        assert kept.name == "distractors_kept" and kept.fn == "gated"
        assert kept.parts[0].fn == "docs_digests_equal" and sorted(kept.parts[0].args["digests"]) == sorted(extra)
        # the gate names the task's checks that run no program (refs), it holds no copy of them
        assert kept.parts[1:] and all(p.ref in {c.name for c in t.verifier.code.checks[:-1]} for p in kept.parts[1:])


def test_distractors_are_seeded_and_vary(cands):
    again = [c for _, _, c in make_candidates(4242, ((i, 0) for i in range(20))) if not isinstance(c, Exception)]
    for a, b in zip(again, cands[:20], strict=True):
        assert a.task.model_dump_json() == b.task.model_dump_json()
    names = {posixpath.basename(p) for c in cands for p in c.task.metadata.get("distractors", [])}
    assert len(names) > 60, sorted(names)[:20]


def test_deleting_or_rewriting_a_distractor_fails_the_check(tmp_path, cands):
    c = next(c for c in cands if len(c.task.metadata.get("distractors", [])) >= 2)
    digests = c.task.verifier.code.checks[-1].parts[0].args["digests"]
    lib: dict = {}
    exec(compile(CHECKLIB_SOURCE, "checklib.py", "exec"), lib)  # the library graders run, on the host
    digests_equal = lib["docs_digests_equal"]
    for f in c.task.workspace.files:
        if f.path in digests:
            (tmp_path / f.path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / f.path).write_text(f.content)
    assert digests_equal(tmp_path, digests) == 1.0
    first = sorted(digests)[0]
    (tmp_path / first).write_text("overwritten\n")
    assert digests_equal(tmp_path, digests) < 1.0
    (tmp_path / first).unlink()
    assert digests_equal(tmp_path, digests) < 1.0


def test_no_distractor_where_the_task_has_no_room():
    """A layout whose every candidate place is taken gives fewer files, never a colliding one."""
    from clawgym.synth.personas import load_personas

    p = load_personas()[0]
    files = distractors.distractors(p, [], "", random.Random(1), n=3)
    assert len({f.path for f in files}) == len(files)
