"""Synthesis operations as plug-ins (issue #33): an operation declares its own facts and is found through
:data:`clawgym.synth.ops.OPERATIONS`. A third-party distribution (a package and its dist-info with an entry point,
put on sys.path; nothing in clawgym edited for it) adds an operation, a taxonomy of its own names it, and
persona synthesis writes tasks of it that validation proved in a real bwrap sandbox (reference 1, no-op 0)."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
import yaml

import clawgym.synth.validate  # noqa: F401 - imported before install_dist swaps sys.modules (see plugin_dist.py)
from clawgym.core.registry import UnknownPlugin
from clawgym.core.taxonomy import TaxonomyError, load_taxonomy
from clawgym.skills.rules import operation_scores, rule_operations
from clawgym.skills.skill import Skill
from clawgym.synth import distractors
from clawgym.synth.ops import OPERATIONS, folder_scoped, operation, registry
from clawgym.synth.ops.base import OperationGenerator
from clawgym.synth.pipeline import synthesize
from conftest import REPO
from plugin_dist import install_dist

DIST = "clawgym_water_ops"

WATER_LOG = '''
"""water_log: a water meter's daily readings; the total and the day of the highest reading, each in a file."""

import hashlib

from clawgym.core.records import WorkspaceFile
from clawgym.synth.ops.base import Check, OperationGenerator, StepPlan, to_csv, write


class WaterLog(OperationGenerator):
    id = "water_log"
    folder_scoped = True  # says "everything in water/": no distractor goes there

    def plan(self, ctx, source=None):
        rng = ctx.rng
        days = rng.randint(5, 8)
        litres = rng.sample(range(80, 400), days)  # all different: one peak day
        rows = [[f"2026-03-{d + 1:02d}", str(v)] for d, v in enumerate(litres)]
        meter, total, peak = ctx.path("water/meter.csv"), ctx.path("water/total.txt"), ctx.path("water/peak.txt")
        top = max(rows, key=lambda r: int(r[1]))[0]
        return StepPlan(
            operation=self.id,
            instruction=(f"add up the litres in `{meter}` and write the total to `{total}`, "
                         f"and the date of the highest reading to `{peak}`"),
            checks=[Check("total_written", "text_equals", {"path": total, "expected": str(sum(litres))}),
                    Check("peak_day_written", "text_equals", {"path": peak, "expected": top})],
            steps=[write(total, f"{sum(litres)}\\n"), write(peak, f"{top}\\n")],
            partial=[write(total, f"{sum(litres)}\\n")],
            files=[WorkspaceFile(path=meter, content=to_csv(["date", "litres"], rows))],
            summary="water meter totals",
            fingerprint=hashlib.sha256(repr(rows).encode()).hexdigest()[:16],
        )
'''

TAXONOMY = {
    "version": 1,
    "operation_categories": [{"id": "utilities", "name": "Utilities", "description": "Meters and bills."}],
    "operations": [{"id": "water_log", "name": "Water log", "category": "utilities",
                    "description": "Total a water meter's readings.", "file_kinds": ["csv", "txt"],
                    "skill_patterns": [r"water meters?", r"litres? per day"]}],
    "categories": [{"id": "household", "name": "Household", "description": "Running a home.",
                    "subcategories": [{"id": "home_utilities", "name": "Home utilities",
                                       "description": "Meters, bills and readings.", "operations": ["water_log"]}]}],
}


@pytest.fixture
def water_dist(tmp_path, monkeypatch):
    """The third-party distribution, declaring water_log in clawgym.synth_operations."""
    site = install_dist(tmp_path / "site", monkeypatch, "clawgym-water-ops", {f"{DIST}.water": WATER_LOG},
                        {OPERATIONS.group: {"water_log": f"{DIST}.water:WaterLog"}})
    yield site
    OPERATIONS.remove("water_log")


@pytest.fixture
def water_data(tmp_path):
    """A taxonomy naming water_log, and a persona of its subcategory (a shipped persona, re-homed)."""
    tax = tmp_path / "taxonomy.yaml"
    tax.write_text(yaml.safe_dump(TAXONOMY, sort_keys=False))
    shipped = yaml.safe_load((REPO / "personas" / "personas.yaml").read_text())["personas"]
    people = [dict(p, subcategories=["home_utilities"]) for p in shipped[:2]]
    personas = tmp_path / "personas.yaml"
    personas.write_text(yaml.safe_dump({"version": 1, "personas": people}, sort_keys=False))
    return tax, personas


def test_the_built_in_operations_declare_their_facts():
    ops = registry()
    assert len(ops) >= 26 and list(ops) == sorted(ops)
    tax = load_taxonomy()
    for op_id, gen in ops.items():
        assert isinstance(gen, OperationGenerator) and gen.id == op_id
        assert tax.operation(op_id).skill_patterns, op_id  # its taxonomy line ties skills to it
    assert folder_scoped("organize_files") and folder_scoped("write_automation_script")
    assert not folder_scoped("clean_data") and not folder_scoped("no_such_operation")
    assert distractors.FOLDER_OPS == {o for o, g in ops.items() if g.folder_scoped}


def test_no_operation_imports_another():
    """What two operations share lives in a shared module (``_*.py``), not in one of them."""
    ops_dir = REPO / "src" / "clawgym" / "synth" / "ops"
    names = set(OPERATIONS.builtin)
    for path in ops_dir.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("clawgym.synth.ops"):
                imported = {node.module.rsplit(".", 1)[-1]} | {a.name for a in node.names}
                assert not imported & names, (path.name, node.module)


def test_a_third_party_operation_is_found_through_its_entry_point(water_dist):
    assert f"{DIST}.water" not in sys.modules
    assert "water_log" in OPERATIONS.names() and f"{DIST}.water" not in sys.modules  # listing imports nothing
    cls = OPERATIONS.get("water_log")
    assert cls.__module__ == f"{DIST}.water" and isinstance(registry()["water_log"], cls)
    assert folder_scoped("water_log")  # its facts, read from it


def test_a_new_operations_taxonomy_line_ties_skills_to_it(water_data):
    """The skill patterns are on the taxonomy line: skill annotation reads them without importing synthesis."""
    tax = load_taxonomy(water_data[0])
    skill = Skill(name="water-meter-log", description="Reads a water meter and reports the litres per day.",
                  path=Path("SKILL.md"), text="", body="Keep the water meter readings in a CSV.")
    assert operation_scores(skill, tax)["water_log"] == 3 * 3 + 1  # name, description x 2; body once
    assert rule_operations(skill, tax) == ["water_log"]
    bad = dict(TAXONOMY, operations=[dict(TAXONOMY["operations"][0], skill_patterns=["water (meter"])])
    (water_data[0].parent / "bad.yaml").write_text(yaml.safe_dump(bad, sort_keys=False))
    with pytest.raises(TaxonomyError, match=r"operations\[0\]\.skill_patterns.*not a regular expression"):
        load_taxonomy(water_data[0].parent / "bad.yaml")


def test_an_operation_class_is_checked_as_it_is_registered():
    class Mislabelled(OperationGenerator):
        id = "something_else"

        def plan(self, ctx, source=None):
            raise AssertionError("not planned here")

    with pytest.raises(TypeError, match="must be a subclass of clawgym.synth.ops.base.OperationGenerator"):
        OPERATIONS.add("plain", type("Plain", (), {"id": "plain", "plan": lambda self, ctx, source: None}))
    with pytest.raises(TypeError, match="has id 'something_else'"):
        OPERATIONS.add("mislabelled", Mislabelled)
    with pytest.raises(UnknownPlugin):
        OPERATIONS.get("mislabelled")
    operation(Mislabelled)  # registered under its own id
    try:
        assert OPERATIONS.get("something_else") is Mislabelled
    finally:
        OPERATIONS.remove("something_else")


def test_persona_synthesis_writes_validated_tasks_of_a_third_party_operation(water_dist, water_data, tmp_path,
                                                                              bwrap_backend):
    tax, personas = water_data
    out = tmp_path / "tasks.jsonl"
    report = synthesize(3, 7, out, taxonomy_path=tax, personas_path=personas, sandbox="bwrap", validate=True)
    assert report.written == 3, report.rejected
    tasks = [json.loads(line) for line in out.read_text().splitlines()]
    assert [t["operations"] for t in tasks] == [["water_log"]] * 3
    for t in tasks:
        files = {f["path"] for f in t["workspace"]["files"]}
        assert "water/meter.csv" in files and "`water/total.txt`" in t["instruction"]
        # folder_scoped: the distractors stay out of water/
        assert not any(p.startswith("water/") for p in t["metadata"].get("distractors", []))
        checks = [c["name"] for c in t["verifier"]["code"]["checks"]]
        assert checks[:2] == ["total_written", "peak_day_written"]
        assert [s["name"] for s in t["reference"]["steps"]] == ["write", "write"]
