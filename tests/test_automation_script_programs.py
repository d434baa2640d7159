"""write_automation_script's reference scripts are real files (clawgym/synth/ops/programs/write_automation_script*):
the frame and each chore's `main` put together compute what the operation's own Python says (`run_chore`), on
CSV, TSV and JSON input, with an excluded value; the rename script (a POSIX sh file) renames as `tidy_name` says;
and the script of a planned task, run on that task's workspace in a temporary directory, writes the table its
checks expect, on the first export and on the second one."""

from __future__ import annotations

import csv
import json
import random
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from clawgym.core.taxonomy import load_taxonomy
from clawgym.synth.ops import programs
from clawgym.synth.ops import write_automation_script as was
from clawgym.synth.ops.base import OpContext
from clawgym.synth.personas import load_personas

HEADER = ["date", "payee", "category", "amount"]
ROWS = [["2026-03-02", "Acme", "rent", "700.00"], ["2026-03-09", "Bolt", "travel", "12.50"],
        ["2026-03-09", "Acme", "travel", "40"], ["2026-04-01", "Cora", "rent", "650.25"],
        ["2026-04-03", "Bolt", "food", ""], ["2026-04-20", "Cora", "food", "8.75"],
        ["2026-04-20", "Acme", "food", "3.10"], ["2026-05-11", "Bolt", "travel", "99.99"]]
COLS = {"date": "date", "group": "category", "value": "amount"}
NAMES = {"total": "sum_amount", "count": "n", "month": "period", "average": "mean"}


def _run(cwd: Path, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


def _table(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def test_the_scripts_parts_are_program_files():
    names = {p.name for p in programs.HERE.glob("write_automation_script*")}
    assert {f"write_automation_script_{c}.py" for c in was.CHORES} | {"write_automation_script.py",
                                                                      was.TIDY_SCRIPT} <= names
    assert programs.markers("write_automation_script") == {"argc"}
    assert programs.markers("write_automation_script_group") == {"value", "group", "total", "count"}


@pytest.mark.parametrize("chore", was.CHORES)
@pytest.mark.parametrize("fmt", ["csv", "tsv", "json"])
def test_each_chore_computes_what_run_chore_says(chore, fmt, tmp_path):
    cols = {"group": "payee"} if chore == "count" else COLS  # count: the chore of a table with no value column
    skip = None if chore == "count" else ["payee", "Bolt"]
    script = "tools/job.py"
    code = was.reference_script(chore, script, f"Does {chore}.", cols, NAMES, skip)
    (tmp_path / "tools").mkdir()
    (tmp_path / script).write_text(code)
    if fmt == "json":
        (tmp_path / "in.json").write_text(json.dumps([dict(zip(HEADER, r, strict=True)) for r in ROWS]))
    else:
        (tmp_path / f"in.{fmt}").write_text("".join(("\t" if fmt == "tsv" else ",").join(r) + "\n"
                                                    for r in [HEADER, *ROWS]))
    arg = ["40"] if chore == "filter" else []
    r = _run(tmp_path, [sys.executable, script, f"in.{fmt}", "out/result.csv", *arg])
    assert r.returncode == 0, r.stderr
    want_header, want_rows = was.run_chore(chore, HEADER, ROWS, cols, arg[0] if arg else None, NAMES, skip)
    assert _table(tmp_path / "out" / "result.csv") == (want_header, want_rows)
    assert want_rows and (skip is None or all("Bolt" not in row for row in want_rows))
    # the script's docstring is its usage message, with its own path
    bad = _run(tmp_path, [sys.executable, script])
    assert bad.returncode == 1
    assert f"Does {chore}." in bad.stderr and f"Usage: python3 {script} INPUT OUTPUT.csv" in bad.stderr


@pytest.mark.parametrize("sep,header", [("_", "old,new"), ("-", "before,after")])
def test_the_rename_script_renames_as_tidy_name_says(sep, header, tmp_path):
    names = ["IMG 2026-03-01 (2).JPG", "Invoice March Acme.pdf", "tidy.txt", "  flour list.txt",
             "Scan 07.07.2026.PDF"]
    folder = tmp_path / "scans"
    folder.mkdir()
    (folder / "sub").mkdir()  # subfolders are left alone
    for n in names:
        (folder / n).write_text(n)
    (tmp_path / "tidy.sh").write_text(was.tidy_script(sep, header))
    r = _run(tmp_path, ["sh", "tidy.sh", "scans", "logs/renames.csv"])
    assert r.returncode == 0, r.stderr
    want = {was.tidy_name(n, sep): n for n in names}
    assert sorted(p.name for p in folder.iterdir()) == sorted([*want, "sub"])
    assert all((folder / new).read_text() == old for new, old in want.items())
    got_header, got_rows = _table(tmp_path / "logs" / "renames.csv")
    assert got_header == header.split(",")
    assert sorted(got_rows) == sorted([old, new] for new, old in want.items() if new != old)


def test_a_planned_tasks_script_runs_on_its_workspace(tmp_path):
    """The reference steps of planned tasks (write the script, run it), replayed in a directory holding the
    task's files: the output is the artifact the plan promises, and the script on the second export gives
    what the check `script_on_new_data` wants; for every chore a seed of the real personas reaches."""
    taxonomy = load_taxonomy()
    personas = load_personas(taxonomy=taxonomy)
    gen = was.GENERATORS[0]
    sub = next(s for c in taxonomy.categories for s in c.subcategories if gen.id in s.operations)
    seen: set[str] = set()
    for seed in range(80):
        ctx = OpContext(persona=personas[seed % len(personas)], subcategory=sub, rng=random.Random(seed), step=0,
                        dir="")
        plan = gen.plan(ctx, None)
        script = plan.partial[0].arguments["path"]
        if not script.endswith(".py"):
            continue  # the sh rename chore (tested above)
        code = plan.partial[0].arguments["content"]
        chore = _chore_of(code)
        if chore in seen:
            continue
        seen.add(chore)
        root = tmp_path / f"seed{seed}"
        for f in plan.files:
            (root / f.path).parent.mkdir(parents=True, exist_ok=True)
            (root / f.path).write_text(f.content)
        for step in plan.steps:
            if step.name == "write":
                (root / step.arguments["path"]).parent.mkdir(parents=True, exist_ok=True)
                (root / step.arguments["path"]).write_text(step.arguments["content"])
            elif step.name == "exec":
                argv = shlex.split(step.arguments["command"])
                assert argv[0] == "python3"
                r = _run(root, [sys.executable, *argv[1:]])
                assert r.returncode == 0, (seed, r.stderr)
        out = plan.outputs[0]
        assert _table(root / out.path) == (out.data["header"], out.data["rows"]), seed
        again = next(c for c in plan.checks if c.name == "script_on_new_data").args
        argv = [a.replace("{out}", "again.csv") for a in again["argv"]]
        r = _run(root, [sys.executable, *argv[1:]])
        assert r.returncode == 0, (seed, r.stderr)
        assert _table(root / "again.csv") == (again["header"], again["rows"]), seed
    assert seen >= {"group", "month", "filter", "average", "latest"}, seen


def _chore_of(code: str) -> str:
    """The chore whose `main` a script holds: found by a line of its program file that no other chore's has."""
    lines = {c: set(programs.source(f"write_automation_script_{c}").splitlines()) for c in was.CHORES}
    for c, own in lines.items():
        others = set().union(*(v for k, v in lines.items() if k != c))
        if any(line in code for line in own - others if "'{" not in line):
            return c
    raise AssertionError(f"no chore's main in:\n{code}")
