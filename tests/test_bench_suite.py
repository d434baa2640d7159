"""synth-bench-200 (benchmarks/synth-bench-200/, our own suite, called clawgym-bench before #35): ClawGym-Bench's
published shape, and its soundness on real sandboxes.

* shape: 200 tasks, 156 code-verified + 44 hybrid, the six categories with ClawGym-Bench's counts, unique ids,
  every line valid against the Task JSON Schema, rubric rules that name the file they judge, provenance;
* soundness: the whole suite in bwrap -- the oracle (reference solutions replayed) scores 1.0 on every task,
  the noop agent scores 0 on every code check, and every file a rubric rule names exists in the oracle's final
  workspace;
* a hybrid task judged end to end (0.7 code + 0.3 rubric) by a judge behind the scripted model server;
* (slow) build.py rebuilds tasks.jsonl byte for byte from the synthesizers.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
import yaml

from clawgym.core.records import Task
from clawgym.core.schema import record_schema
from clawgym.evaluation import load_suite, run_eval
from clawgym.rollout import RolloutOptions
from clawgym.rollout.setup import AgentSpec

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "synth-bench-200"
SHAPE = {
    "Productivity & Collaboration": 44, "Systems & Automation": 42, "Analysis & Reasoning": 35,
    "Content & Domain": 28, "Planning & Knowledge": 26, "Software Development": 25,
}


@pytest.fixture(scope="module")
def suite():
    return load_suite("synth-bench-200")


def _hybrid(task: Task) -> bool:
    return task.verifier.rubric is not None


def test_the_suite_has_clawgym_bench_s_published_shape(suite):
    tasks = suite.tasks
    assert suite.name == "synth-bench-200" and Path(suite.source) == BENCH / "tasks.jsonl"
    assert len(tasks) == 200
    assert Counter(t.category for t in tasks) == SHAPE
    assert sum(map(_hybrid, tasks)) == 44 and sum(not _hybrid(t) for t in tasks) == 156
    ids = [t.id for t in tasks]
    assert len(set(ids)) == 200 and all(i.startswith("cgb-") for i in ids)
    assert len({t.instruction for t in tasks}) == 200
    from clawgym.core.taxonomy import load_taxonomy

    assert set(SHAPE) <= {c.name for c in load_taxonomy(None).categories}  # the report's names are the taxonomy's


def test_every_line_is_valid_against_the_task_schema():
    validator = jsonschema.Draft202012Validator(record_schema("task"))
    lines = (BENCH / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 200
    for n, line in enumerate(lines, start=1):
        errors = list(validator.iter_errors(json.loads(line)))
        assert not errors, f"tasks.jsonl:{n}: {errors[0].message}"


def test_every_task_is_verified_by_code_and_hybrid_tasks_carry_file_rules(suite):
    for t in suite.tasks:
        assert t.verifier.code is not None and t.verifier.code.kind == "checks", t.id  # checks as data (issue 19)
        assert t.verifier.code.checklib is not None and t.verifier.code.checklib.version >= 2, t.id
        assert t.reference is not None and t.reference.steps, t.id
        bench = t.metadata["bench"]
        assert bench["grading"] == ("hybrid" if _hybrid(t) else "code"), t.id
        if not _hybrid(t):
            assert t.verifier.weights() == (1.0, 0.0)
            continue
        assert t.verifier.weights() == pytest.approx((0.7, 0.3)), t.id
        written = {str(s.arguments.get("path")) for s in t.reference.steps if s.name in ("write", "edit")}
        rules = t.verifier.rubric.rules
        assert rules, t.id
        for r in rules:
            # each rule names the file it judges; the request asks for that file; the reference writes it
            assert r.file_path and r.file_path in written, (t.id, r.name)
            assert f"`{r.file_path}`" in r.description and r.file_path in t.instruction, (t.id, r.name)
            assert set(r.scores) >= {"1.0", "0.0"}, (t.id, r.name)
        assert bench["judged_operation"] in t.operations


def test_provenance_and_exclusions_are_recorded(suite):
    prov = json.loads((BENCH / "provenance.json").read_text())
    spec = yaml.safe_load((BENCH / "suite.yaml").read_text())
    assert prov["tasks_jsonl_sha256"] == hashlib.sha256((BENCH / "tasks.jsonl").read_bytes()).hexdigest()
    assert prov["suite_yaml_sha256"] == hashlib.sha256((BENCH / "suite.yaml").read_bytes()).hexdigest()
    assert prov["tasks"] == 200 and prov["hybrid"] == 44
    sources = [t.metadata["bench"]["source_id"] for t in suite.tasks]
    assert len(set(sources)) == 200
    excluded = {e["source"] for e in spec["exclusions"]}
    # what the hand-check left out is not in the suite (the list may be empty: since the synthesizers' category
    # fit and name detection were fixed, the hand-check of the pools has found nothing to leave out)
    assert not excluded & set(sources)
    assert all(len(e["reason"]) >= 10 for e in spec["exclusions"])
    cats = {c["id"]: c for c in spec["categories"]}
    routes: Counter = Counter()
    for t in suite.tasks:
        b = t.metadata["bench"]
        cat = cats[t.metadata["category_id"]]
        seed = cat["persona"]["seed"] if b["route"] == "persona" else spec["skill_route"]["seed"]
        assert b["seed"] == seed and b["source_id"] == f"{b['route']}-s{seed}-{b['index']:06d}", t.id
        assert t.source == f"synth-{b['route']}", t.id
        if b["route"] == "skill":  # the skills the request points at are in the workspace
            assert t.skills and all(p in {f.path for f in t.workspace.files} for p in t.metadata["skills"]["paths"])
        routes[(cat["id"], b["route"])] += 1
    for cid, cat in cats.items():  # both synthesizers contribute the shares suite.yaml gives them
        assert routes[(cid, "persona")] == cat["persona"]["tasks"] and routes[(cid, "skill")] == cat.get("skill", 0)
    assert sum(routes[k] for k in routes if k[1] == "skill") == 50


def test_oracle_scores_1_and_noop_scores_0_on_the_whole_suite(suite, bwrap_backend, tmp_path):
    from clawgym.workspace import extract_snapshot

    hybrid = {t.id: t for t in suite.tasks if _hybrid(t)}
    oracle = run_eval(suite, AgentSpec(name="oracle"), bwrap_backend, tmp_path / "oracle", RolloutOptions(jobs=4),
                      chart=False)
    o = oracle["overall"]
    assert o["tasks"] == 200 and o["scored"] == 200 and o["infra_errors"] == 0 and o["skipped"] == 0
    assert o["mean_score"] == 1.0 and o["pass_rate"] == 1.0
    # hybrid tasks without a judge: scored on their code checks, and the report says so
    assert o["hybrid_tasks"] == 44 and o["rubric_not_judged"] == 44
    assert "44 scored episode(s) of the 44 task(s) with a rubric" in (tmp_path / "oracle" / "report.md").read_text()
    trajs = [json.loads(x) for x in (tmp_path / "oracle" / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajs) == 200
    for tr in trajs:
        v = tr["verdict"]
        assert v["status"] == "scored" and v["score"] == 1.0 and all(x == 1.0 for x in v["checks"].values()), tr["id"]
        task = hybrid.get(tr["task_id"])
        if task is None:
            continue
        assert v["rubric_score"] is None and any("rubric not judged" in n for n in v["notes"])
        ws = extract_snapshot(tmp_path / "oracle" / tr["workspace_snapshot"], tmp_path / "ws" / task.id)
        for rule in task.verifier.rubric.rules:  # the judge will find the file it is pointed at
            assert (ws / rule.file_path).is_file(), (task.id, rule.file_path)

    noop = run_eval(suite, AgentSpec(name="noop"), bwrap_backend, tmp_path / "noop", RolloutOptions(jobs=4), chart=False)
    n = noop["overall"]
    assert n["scored"] == 200 and n["infra_errors"] == 0 and n["mean_score"] == 0.0 and n["pass_rate"] == 0.0
    for line in (tmp_path / "noop" / "trajectories.jsonl").read_text().splitlines():
        v = json.loads(line)["verdict"]
        assert v["code_score"] == 0.0 and v["checks"] and all(x == 0.0 for x in v["checks"].values()), v


def test_a_hybrid_task_is_judged_end_to_end(suite, bwrap_backend, tmp_path):
    from clawgym.evaluation.suites import Suite
    from clawgym.llm import LLMClient
    from clawgym.verify import Judge
    from scripted_llm import ScriptedLLM

    task = next(t for t in suite.tasks if t.metadata["bench"].get("judged_operation") == "draft_message")
    email = next(s.arguments["content"] for s in task.reference.steps
                 if s.name == "write" and s.arguments["path"] == task.verifier.rubric.rules[0].file_path)
    one = Suite("synth-bench-200", [task], suite.source, suite.base_dir)
    with ScriptedLLM(responder=lambda body: '{"score": 0.75, "reason": "courteous but a little terse"}') as llm:
        judge = Judge(LLMClient(llm.model, llm.base_url), cache_dir=tmp_path / "cache")
        report = run_eval(one, AgentSpec(name="oracle"), bwrap_backend, tmp_path / "run", RolloutOptions(jobs=2),
                          judge=judge, chart=False)
        prompts = [json.dumps(b["messages"]) for b in llm.requests]
    rules = task.verifier.rubric.rules
    assert len(prompts) == len(rules)  # one call per rule
    body_line = next(ln for ln in email.splitlines() if ln.startswith("Hi "))
    for r in rules:  # each rule was judged against the file it names, as the oracle left it
        assert any(r.description[:60] in p and json.dumps(body_line)[1:-1] in p for p in prompts), r.name
    verdict = json.loads((tmp_path / "run" / "verdicts.jsonl").read_text().splitlines()[0])["verdict"]
    assert verdict["code_score"] == 1.0 and verdict["rubric_score"] == 0.75
    assert verdict["score"] == pytest.approx(0.7 * 1.0 + 0.3 * 0.75)
    assert {f"rubric:{r.name}" for r in rules} <= set(verdict["checks"])
    assert report["overall"]["mean_score"] == pytest.approx(0.925) and report["overall"]["rubric_not_judged"] == 0


def _built_with(tasks_jsonl: Path) -> tuple[str, str] | None:
    """The commit that last wrote these bytes of tasks.jsonl and the folder it was in there (renames, such as
    benchmarks/clawgym-bench -> benchmarks/synth-bench-200, do not count as writing): the build.py beside it in
    that commit rebuilds it. None without the git history or when the bytes are not committed."""
    blob = subprocess.run(["git", "-C", str(REPO), "hash-object", str(tasks_jsonl)], capture_output=True, text=True)
    if blob.returncode != 0:
        return None
    blob_id = blob.stdout.strip()

    def paths_in(rev: str) -> list[str]:  # where the blob is in that commit's tree
        tree = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", rev], capture_output=True, text=True)
        return [ln.split("\t", 1)[1] for ln in tree.stdout.splitlines()
                if ln.split()[2] == blob_id and ln.endswith("/tasks.jsonl")]

    # the commits whose diff adds or removes the blob, newest first; a move shows up too, but its parent
    # already held the blob elsewhere
    log = subprocess.run(["git", "-C", str(REPO), "log", "--format=%H", f"--find-object={blob_id}"],
                         capture_output=True, text=True).stdout.split()
    for commit in log:
        here = paths_in(commit)
        if here and not paths_in(f"{commit}^"):
            return commit, str(Path(here[0]).parent)
    return None


def test_the_committed_build_is_found_across_the_rename():
    """The rebuild test below finds the commit that wrote the file's bytes, not the one that moved it."""
    if not (REPO / ".git").exists():
        pytest.skip("needs the git history")
    found = _built_with(BENCH / "tasks.jsonl")
    if found is None:
        pytest.skip("tasks.jsonl differs from every committed version (rebuilt and not committed yet)")
    commit, folder = found
    assert folder in ("benchmarks/clawgym-bench", "benchmarks/synth-bench-200")
    show = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}:{folder}/build.py"])
    assert show.returncode == 0


@pytest.mark.slow
def test_build_reproduces_the_file_byte_for_byte(bwrap_backend, tmp_path):
    """The frozen suite is reproducible from the synthesizers it was built with: the commit that last wrote
    tasks.jsonl, checked out beside this one (the synthesizers have changed since, on purpose: a benchmark's
    tasks stay fixed while the generators improve), rebuilds it to the same bytes with the build.py it had (in
    benchmarks/clawgym-bench/ before the suite was renamed synth-bench-200)."""
    if not (REPO / ".git").exists():
        pytest.skip("needs the git history (the commit that built tasks.jsonl)")
    found = _built_with(BENCH / "tasks.jsonl")
    assert found is not None, "tasks.jsonl is not the bytes of any commit: rebuild it with build.py and commit it"
    commit, folder = found
    tree = tmp_path / "built_with"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(tree), commit], check=True)
    try:
        done = subprocess.run([sys.executable, str(tree / folder / "build.py"), "--check",
                               "--output", str(BENCH / "tasks.jsonl")], capture_output=True, text=True,
                              timeout=1800, env={**os.environ, "PYTHONPATH": str(tree / "src")})
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1])["identical"] is True
