"""The reference programs of the operations are real Python files (clawgym/synth/ops/programs/*.py): each compiles
as it is and once rendered with a task's constants, and a rendered one computes what its operation asks for."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clawgym.synth.ops import programs
from clawgym.synth.ops.base import python

NAMES = sorted(p.stem for p in programs.HERE.glob("*.py") if p.stem != "__init__")


def test_there_are_program_files():
    assert {"clean_data", "build_plan", "draft_message_reply", "convert_format_csv_records"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_program_compiles_as_written_and_rendered(name):
    path = programs.HERE / f"{name}.py"
    compile(path.read_text(), str(path), "exec")
    keys = programs.markers(name)
    assert keys, name  # a program without the request's constants would be a fixed answer
    text = programs.render(name, **{k: f"value of {k}" for k in keys})
    compile(text, name, "exec")
    assert "'{" not in text and repr("value of " + sorted(keys)[0]) in text
    assert not text.startswith('"""')  # the file's docstring is not part of the program


def test_render_wants_exactly_the_markers():
    with pytest.raises(KeyError, match="markers"):
        programs.render("convert_format_csv_records", src="a.csv")
    with pytest.raises(KeyError, match="markers"):
        programs.render("convert_format_csv_records", src="a.csv", out="b.json", extra=1)


def test_a_rendered_program_runs(tmp_path):
    (tmp_path / "in.csv").write_text("name,qty,note\npear,3,\nfig,1.5,ripe\n")
    step = python(programs.render("convert_format_csv_records", src="in.csv", out="out/recs.json"))
    r = subprocess.run(["sh", "-c", step.arguments["command"].replace("python3", sys.executable, 1)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out" / "recs.json").read_text()) == [
        {"name": "pear", "qty": 3, "note": ""}, {"name": "fig", "qty": 1.5, "note": "ripe"}]
