"""The `sys` operation generators (edit_config, analyze_logs, write_automation_script, audit_environment,
fix_failing_tests, implement_feature, review_repository): each validates in a real sandbox for several seeds
and personas (reference 1.0, untouched 0 on every check, partial strictly between), chains where an op consumes
an artifact, is deterministic, and the function libraries behind the repository tasks are sound."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from clawgym.checks import checklib_sys as cls
from clawgym.core.records import WorkspaceFile
from clawgym.core.taxonomy import load_taxonomy
from clawgym.synth.compose import compose_task
from clawgym.synth.ops import (
    _pyrepo,
    analyze_logs,
    audit_environment,
    clean_data,
    edit_config,
    fix_failing_tests,
    implement_feature,
    review_repository,
    write_automation_script,
)
from clawgym.synth.ops.base import RECORDS, TABLE, Artifact, OpContext
from clawgym.synth.personas import load_personas
from clawgym.synth.validate import validate_candidate

OPS = {m.GENERATORS[0].id: m.GENERATORS[0] for m in (edit_config, analyze_logs, write_automation_script,
                                                      audit_environment, fix_failing_tests, implement_feature,
                                                      review_repository)}
SEEDS = [0, 1, 2, 3]


@pytest.fixture(scope="module")
def taxonomy():
    return load_taxonomy()


@pytest.fixture(scope="module")
def personas(taxonomy):
    """The packaged personas (personas/personas.yaml), checked against the taxonomy. A file that does not load
    fails these tests with its file:line error: the tasks must be composed from the personas users get, never
    from stand-ins."""
    loaded = load_personas(taxonomy=taxonomy)
    assert len(loaded) > max(SEEDS), f"the tests take personas[seed] for seeds {SEEDS}; {len(loaded)} loaded"
    return loaded


def _sub(taxonomy, op_id: str, seed: int):
    subs = [s for c in taxonomy.categories for s in c.subcategories if op_id in s.operations]
    return subs[seed % len(subs)]


def _validate(cand, backend):
    v = validate_candidate(cand, backend)
    assert v.ok, f"{v.reason}: {v.detail}\n{cand.task.instruction}"
    return v


@pytest.mark.parametrize("op_id", sorted(OPS))
def test_single_op_validates(op_id, taxonomy, personas, bwrap_backend):
    gen = OPS[op_id]
    for seed in SEEDS:
        persona = personas[(seed * 7 + len(op_id)) % len(personas)]
        cand = compose_task(f"{op_id}-{seed}", persona, _sub(taxonomy, op_id, seed), taxonomy, {op_id: gen},
                            random.Random(seed), 1)
        assert [p.operation for p in cand.plans] == [op_id]
        assert 3 <= len(cand.plans[0].checks) <= 6
        _validate(cand, bwrap_backend)


class _Starter:
    """A generator forced to start the chain (the consumer is standalone too and could otherwise go first)."""

    def __init__(self, gen, first: bool):
        self.gen, self.id, self.produces = gen, gen.id, gen.produces
        self.consumes = () if first else gen.consumes
        self.standalone = first

    def plan(self, ctx, source):
        return self.gen.plan(ctx, source)


@pytest.mark.parametrize("producer", [clean_data.GENERATORS[0], analyze_logs.GENERATORS[0],
                                      audit_environment.GENERATORS[0]], ids=lambda g: g.id)
def test_chain_into_automation_script(producer, taxonomy, personas, bwrap_backend):
    consumer = write_automation_script.GENERATORS[0]
    reg = {producer.id: _Starter(producer, True), consumer.id: _Starter(consumer, False)}
    for seed in (0,):
        cand = compose_task(f"chain-{producer.id}-{seed}", personas[seed], _sub(taxonomy, consumer.id, seed),
                            taxonomy, reg, random.Random(100 + seed), 2)
        assert [p.operation for p in cand.plans] == [producer.id, consumer.id]
        src = next(a.path for a in cand.plans[0].outputs if a.kind in consumer.consumes)
        assert src in cand.plans[1].instruction
        _validate(cand, bwrap_backend)


class _Fixed:
    def __init__(self, plan):
        self.plan_, self.id = plan, plan.operation
        self.consumes, self.produces, self.standalone = (), (TABLE,), True

    def plan(self, ctx, source):
        return self.plan_


RECS = [{"site": s, "kwh": v, "day": f"2026-0{m}-1{d}"} for s, v, m, d in
        [("Porto", 12.5, 3, 1), ("Lyon", 7, 3, 2), ("Porto", 3.25, 4, 3), ("Lyon", 10, 4, 4), ("Oslo", 1, 5, 5)]]


@pytest.mark.parametrize("fmt", ["json", "yaml", "xlsx"])
def test_script_consumes_other_formats(fmt, taxonomy, personas, bwrap_backend):
    """Hand-built artifacts the previous step could leave: JSON/YAML records with numbers, an xlsx table."""
    import yaml

    from clawgym.core.records import GeneratedContent

    roles = {"group": "site", "value": "kwh", "date": "day"}
    if fmt == "xlsx":
        header = ["site", "kwh", "day"]
        rows = [[r["site"], str(r["kwh"]), r["day"]] for r in RECS]
        art = Artifact("meters/readings.xlsx", TABLE, {"header": header, "rows": rows}, "the readings", roles=roles)
        wf = WorkspaceFile(path=art.path, generate=GeneratedContent(kind="xlsx", params={
            "sheets": {"Readings": [header] + [[r["site"], r["kwh"], r["day"]] for r in RECS]}}))
    else:
        art = Artifact(f"meters/readings.{fmt}", RECORDS, RECS, f"the meter readings (meters/readings.{fmt})",
                       roles=roles)
        text = json.dumps(RECS, indent=2) if fmt == "json" else yaml.safe_dump(RECS, sort_keys=False)
        wf = WorkspaceFile(path=art.path, content=text)
    gen = write_automation_script.GENERATORS[0]
    sub = _sub(taxonomy, gen.id, 0)
    for seed in (4,):
        ctx = OpContext(persona=personas[0], subcategory=sub, rng=random.Random(seed), step=1, dir="",
                        used_paths={art.path})
        plan = gen.plan(ctx, art)
        plan.files.insert(0, wf)
        cand = compose_task(f"rec-{seed}", personas[0], sub, taxonomy, {gen.id: _Fixed(plan)}, random.Random(seed), 1)
        assert art.path in cand.task.instruction
        assert any(f.path.endswith(f"_sample.{fmt}") for f in cand.task.workspace.files)
        _validate(cand, bwrap_backend)


def test_shell_rename_chore(taxonomy, personas, bwrap_backend):
    """The sh variant of write_automation_script: the checker reruns the script on a pristine copy of a folder."""
    gen = write_automation_script.GENERATORS[0]
    sub = _sub(taxonomy, gen.id, 0)
    for seed in (0, 1):
        ctx = OpContext(persona=personas[seed], subcategory=sub, rng=random.Random(seed), step=0, dir="")
        plan = gen._rename_plan(ctx, {"items": ["olive oil", "flour"], "projects": ["menu refresh"]})
        assert any(c.name == "script_on_new_folder" for c in plan.checks)
        cand = compose_task(f"sh-{seed}", personas[seed], sub, taxonomy, {gen.id: _Fixed(plan)}, random.Random(seed), 1)
        _validate(cand, bwrap_backend)


@pytest.mark.parametrize("op_id", sorted(OPS))
def test_deterministic(op_id, taxonomy, personas):
    gen = OPS[op_id]
    sub = _sub(taxonomy, op_id, 0)
    a = compose_task("d", personas[1], sub, taxonomy, {op_id: gen}, random.Random(42), 1)
    b = compose_task("d", personas[1], sub, taxonomy, {op_id: gen}, random.Random(42), 1)
    assert repr(dataclasses.asdict(a.plans[0])) == repr(dataclasses.asdict(b.plans[0]))
    assert a.task.model_dump_json() == b.task.model_dump_json()


# ------------------------------------------------------------------------------ the code behind the repo tasks


def _write_pkg(root: Path, module: str, source: str) -> None:
    (root / "pkg").mkdir(parents=True, exist_ok=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / f"{module}.py").write_text(source)


def test_bug_library_sound(tmp_path):
    """Every bug: its snippet is unique, its cases fail with the bug and pass without it, a test catches it."""
    ffl = _pyrepo
    for module in ffl.MODULE_IMPORTS:
        funcs = [f for f in ffl.FUNCS if f.module == module]
        good = ffl.module_source(module, funcs)
        ns: dict = {}
        exec(good, ns)
        for f in funcs:
            for t in f.tests:
                exec("import datetime\nimport pytest\n" + t, ns)
            for name in [n for n in ns if n.startswith("test_")]:
                ns[name]()
        for f in funcs:
            for i, bug in enumerate(f.bugs):
                assert f.code.count(bug.good) == 1, (f.name, i)
                bad = ffl.module_source(module, funcs, {f.name: f.code.replace(bug.good, bug.bad)})
                assert bad.count(bug.bad) == 1, (f.name, i)
                root = tmp_path / f"{f.name}_{i}"
                _write_pkg(root / "good", module, good)
                _write_pkg(root / "bad", module, bad)
                setup = f"from pkg.{module} import {f.name}"
                assert cls.sys_py_cases(root / "good", ".", setup, bug.cases) == 1.0, (f.name, i)
                assert cls.sys_py_cases(root / "bad", ".", setup, bug.cases) == 0.0, (f.name, i)
                bns: dict = {}
                exec(bad, bns)
                failed = 0
                for t in f.tests:
                    exec("import datetime\nimport pytest\n" + t, bns)
                    fn = bns[t.split("(")[0].removeprefix("def ")]
                    try:
                        fn()
                    except BaseException:  # pytest.raises failing raises a BaseException
                        failed += 1
                assert failed, f"no test catches bug {i} of {f.name}"


def test_feature_library_sound(tmp_path):
    """Reference implementations pass their tests and hidden cases; the naive ones pass some hidden cases only."""
    impl = implement_feature
    for feat in impl.FEATURES:
        for kind, body in (("ref", feat.body), ("naive", feat.naive), ("stub", None)):
            root = tmp_path / f"{feat.name}_{kind}"
            _write_pkg(root, feat.module, impl.feature_module(feat, body))
            (root / "tests").mkdir()
            (root / "tests" / f"test_{feat.module}.py").write_text(impl.feature_tests("pkg", feat))
            r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=root,
                               capture_output=True, text=True) if body is not None else None
            score = cls.sys_py_cases(root, ".", f"from pkg.{feat.module} import {feat.name}", feat.hidden)
            if kind == "ref":
                assert r.returncode == 0, r.stdout
                assert score == 1.0, feat.name
            elif kind == "naive":
                assert r.returncode == 1, (feat.name, r.stdout[-2000:])  # 1: tests ran and some failed
                assert 0.0 < score < 1.0, (feat.name, score)
            else:
                assert score == 0.0, feat.name


# ------------------------------------------------------------------------------ check primitives


def test_checklib_sys_primitives(tmp_path):
    (tmp_path / "a.env").write_text("# c\nexport DB_HOST=db\nAPP_NAME=\"x y\"  \nPORT=80 # web\n")
    assert cls.sys_config_load(tmp_path, "a.env", "env") == {"DB_HOST": "db", "APP_NAME": "x y", "PORT": "80"}
    assert cls.sys_config_matches(tmp_path, "a.env", "env", {"db_host": "db", "PORT": 80}, ["/OLD"]) == 1.0
    (tmp_path / "c.ini").write_text("[server]\nport = 8080\n")
    assert cls.sys_config_matches(tmp_path, "c.ini", "ini", {"server": {"port": 8080}}, ["/server/old"]) == 1.0
    assert cls.sys_config_matches(tmp_path, "missing.ini", "ini", {"server": {"port": 8080}}) == 0.0
    (tmp_path / "s.json").write_text(json.dumps({"first_error": "2026-03-01T08:00:05Z", "n": 3}))
    assert cls.sys_json_matches(tmp_path, "s.json", {"first_error": "2026-03-01 08:00:05", "n": 3}) == 1.0
    (tmp_path / "t.csv").write_text("name,when\nb,2026-03-01T08:00:05\na,2026-03-02 09:00:00\n")
    rows = [["b", "2026-03-01 08:00:05"], ["a", "2026-03-02 09:00:00"]]
    assert cls.sys_table_rows(tmp_path, "t.csv", ["name", "when"], rows, ordered=True) == 1.0
    assert cls.sys_table_rows(tmp_path, "t.csv", ["name", "when"], rows[::-1], ordered=True) == 0.0
    (tmp_path / "f.json").write_text(json.dumps({"findings": [{"File": "repo/app/x.py", "category": "Secret"},
                                                              {"file": "y", "category": "todo"}]}))
    exp = [{"file": "app/x.py", "category": "secret"}]
    assert cls.sys_findings(tmp_path, "f.json", exp, ["file", "category"], path_fields=["file"]) == 1.0
    assert cls.sys_findings(tmp_path, "f.json", exp, ["file", "category"], "precision", ["file"]) == 0.5
    (tmp_path / "r.md").write_text("# Review\n\n- `app/x.py`: hard-coded token\n\n\n\n\nsecret\n")
    assert cls.sys_text_findings(tmp_path, "r.md", [["app/x.py", [["token"]]]]) == 1.0
    assert cls.sys_text_findings(tmp_path, "r.md", [["app/x.py", [["secret"]]]]) == 0.0
    assert cls.sys_text_any(tmp_path, "r.md", [["nope", "review"], ["zzz"]]) == 0.5
    (tmp_path / "s.py").write_text("import sys, csv\nw = csv.writer(open(sys.argv[1], 'w'))\nw.writerow(['k'])\n"
                                   "w.writerow([sys.argv[2]])\n")
    assert cls.sys_script_table(tmp_path, ["python3", "s.py", "{out}", "7"], ["k"], [["7"]]) == 1.0
    assert cls.sys_script_table(tmp_path, ["python3", "nope.py", "{out}"], ["k"], [["7"]]) == 0.0
