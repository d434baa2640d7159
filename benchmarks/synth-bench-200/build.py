"""Build synth-bench-200 (`tasks.jsonl`) from the synthesizers, byte for byte, as `suite.yaml` describes it.

    python benchmarks/synth-bench-200/build.py              # writes tasks.jsonl and provenance.json here
    python benchmarks/synth-bench-200/build.py --check      # rebuilds in a temp dir; exit 1 if the bytes differ
    python benchmarks/synth-bench-200/build.py --review cgb-pc-001 [--review ...]   # a task in full, to hand-check

The suite was called clawgym-bench until that name went to ClawGym's published ClawGym-Bench (issue #35); the
name recorded in the tasks (`metadata.bench.suite`, from `suite.yaml`'s `name`) and the `cgb-` ids stay as they
were built, so that the bytes do not change.

For each category of `suite.yaml` the script synthesizes a pool of validated persona-route candidates with the
category's own seed (`clawgym.synth.pipeline.synthesize`, restricted to that category) and takes from one
shared skill-route pool (`clawgym.synth.skill_route`, which has no category filter) the candidates that fell
in the category; it drops the candidates the hand-check excluded and takes the first ones in index order. Of
those, `hybrid` tasks whose chain ends in a judgeable deliverable (an email, a summary, a write-up, an edited
document, an audit report, a review) get rubric rules naming that file, and their weights become 0.7 code +
0.3 rubric. Every task records where it came from in
`metadata.bench` (route, seed, index, attempt, synthesizer task id). The synthesizers are deterministic for a
seed, so the same code and the same `suite.yaml` give the same bytes; `provenance.json` records the digests of
the synthesizer sources and data the file was made from.

Needs a working bwrap sandbox (the synthesizers validate every candidate in one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from clawgym.core.errors import ClawgymError
from clawgym.core.jsonl import read_records, write_records
from clawgym.core.records import Rubric, RubricRule, Task, ToolCall
from clawgym.synth.pipeline import MAX_ATTEMPTS

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SPEC = HERE / "suite.yaml"
OUTPUT = HERE / "tasks.jsonl"
PROVENANCE = HERE / "provenance.json"
CODE_WEIGHT, RUBRIC_WEIGHT = 0.7, 0.3


# --------------------------------------------------------------------------------------------- the data


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PersonaShare(_Strict):
    tasks: int = Field(ge=0, description="Tasks the persona route contributes to the category.")
    seed: int = Field(description="The category's persona seed (the suite's own; never train on it).")
    pool: int = Field(ge=1, description="Candidates synthesized; the first `tasks` not excluded are taken.")

    @model_validator(mode="after")
    def _pool_big_enough(self) -> PersonaShare:
        if self.pool < self.tasks:
            raise ValueError(f"pool ({self.pool}) is smaller than tasks ({self.tasks})")
        return self


class SkillRouteSpec(_Strict):
    seed: int = Field(description="The skill route's seed (the suite's own; never train on it).")
    pool: int = Field(ge=1, description="Candidates synthesized, all categories together.")


class CategorySpec(_Strict):
    id: str
    abbr: str = Field(pattern=r"^[a-z]{2,4}$")
    tasks: int = Field(ge=1)
    hybrid: int = Field(ge=0)
    persona: PersonaShare
    skill: int = Field(default=0, ge=0, description="Tasks the skill-grounded route contributes.")

    @model_validator(mode="after")
    def _shares_add_up(self) -> CategorySpec:
        if self.persona.tasks + self.skill != self.tasks:
            raise ValueError(f"persona.tasks + skill = {self.persona.tasks + self.skill}, not {self.tasks}")
        if self.hybrid > self.tasks:
            raise ValueError("more hybrid tasks than tasks")
        return self


class RuleTemplate(_Strict):
    name: str
    description: str
    scores: dict[str, str] = Field(default_factory=dict)


class RubricTemplate(_Strict):
    extensions: list[str]
    rules: list[RuleTemplate] = Field(min_length=1)


class Exclusion(_Strict):
    source: str = Field(description="The synthesizer's task id, e.g. persona-s7101-000012.")
    reason: str = Field(min_length=10)


class SuiteSpec(_Strict):  # noqa: D101 - suite.yaml's header comments say what each field is
    version: int
    name: str
    id_prefix: str
    skill_route: SkillRouteSpec | None = None
    categories: list[CategorySpec]
    moving_operations: list[str] = Field(default_factory=list)
    rubrics: dict[str, RubricTemplate]
    exclusions: list[Exclusion] = Field(default_factory=list)


def load_spec(path: Path = SPEC) -> SuiteSpec:
    """suite.yaml, validated; a bad file is one line naming the file and the field."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ClawgymError(f"{path}: {exc}".splitlines()[0]) from None
    try:
        return SuiteSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ClawgymError(f"{path}: {where}: {err['msg']}") from None


# --------------------------------------------------------------------------------------------- drawing


@dataclass
class Drawn:
    """One candidate of a route's pool, with what the build needs to know about how it was made."""

    task: Task
    route: str
    seed: int
    index: int
    attempt: int
    outputs: list[tuple[str, str]]  # (operation, workspace path written by that step's reference), in order


def _written_paths(steps: list[ToolCall]) -> list[str]:
    return [str(s.arguments["path"]) for s in steps if s.name in ("write", "edit") and "path" in s.arguments]


def _persona_pool(cat: CategorySpec, route: PersonaShare, workdir: Path, jobs: int) -> list[Drawn]:
    """The persona route's validated candidates for one category, each with the paths its steps write.

    The per-step outputs are not in the task record, so each task's candidate is made again from its
    (seed, index, attempt) with `pipeline.make_candidates` (as the pipeline's workers make it) and must equal
    the written task byte for byte (a check that the pipeline is deterministic, too)."""
    from clawgym.synth import pipeline

    out = workdir / f"{cat.id}.persona.jsonl"
    out.unlink(missing_ok=True)  # a fresh pool: synthesize() would resume a file that is there
    pipeline.synthesize(route.pool, route.seed, out, jobs=jobs, categories=[cat.id])
    drawn = []
    prefix = f"persona-s{route.seed}-"
    for task in read_records(out, Task):
        index = int(task.id.removeprefix(prefix))
        wanted = task.model_dump_json()
        attempts = ((index, a) for a in range(MAX_ATTEMPTS))
        # an exception in a candidate's place is an attempt the synthesizer rejected for a generator error
        found = next(((a, c) for _, a, c in pipeline.make_candidates(route.seed, attempts, categories=[cat.id])
                      if not isinstance(c, Exception) and c.task.model_dump_json() == wanted), None)
        if found is None:
            raise ClawgymError(f"{task.id}: cannot be made again from its seed (is the synthesizer deterministic?)")
        attempt, cand = found
        outputs = [(p.operation, path) for p in cand.plans for path in _written_paths(p.steps)]
        drawn.append(Drawn(task, "persona", route.seed, index, attempt, outputs))
    return drawn


def _skill_pool(route: SkillRouteSpec, workdir: Path, jobs: int) -> list[Drawn]:
    """The skill-grounded route's validated candidates (all categories), each with the paths its steps write,
    made again from (seed, index, attempt) and checked byte for byte as for the persona route."""
    try:
        from clawgym.synth import skill_route
    except ImportError:
        raise ClawgymError("suite.yaml gives the skill route a share, but clawgym.synth.skill_route is not in "
                           "this checkout") from None
    out = workdir / "skill.jsonl"
    out.unlink(missing_ok=True)
    skill_route.synthesize_skill_tasks(route.pool, route.seed, out, jobs=jobs)
    config = skill_route.SkillRouteConfig()
    drawn = []
    prefix = f"{skill_route.ROUTE}-s{route.seed}-"
    for task in read_records(out, Task):
        index = int(task.id.removeprefix(prefix))
        wanted = task.model_dump_json()
        for attempt in range(MAX_ATTEMPTS):
            try:
                cand = skill_route.make_skill_candidate(config, route.seed, index, attempt)
            except Exception:  # noqa: BLE001 - an attempt the synthesizer rejected for a generator error
                continue
            if cand.task.model_dump_json() == wanted:
                break
        else:
            raise ClawgymError(f"{task.id}: cannot be made again from its seed (is the synthesizer deterministic?)")
        outputs = [(p.operation, path) for p in cand.plans for path in _written_paths(p.steps)]
        drawn.append(Drawn(task, "skill", route.seed, index, attempt, outputs))
    return drawn




# --------------------------------------------------------------------------------------------- hybrid


def judged_output(d: Drawn, spec: SuiteSpec) -> tuple[str, str] | None:
    """(operation, file) whose output the rubric judges, or None when the task has no judgeable deliverable
    that is sure to be where its path says at the end (no file-moving step after it)."""
    ops = list(d.task.operations)
    best = None
    for op, path in d.outputs:
        tmpl = spec.rubrics.get(op)
        if tmpl is None or path.rsplit(".", 1)[-1].lower() not in tmpl.extensions:
            continue
        later = ops[ops.index(op) + 1:] if op in ops else []
        if any(o in spec.moving_operations for o in later):
            continue
        best = (op, path)  # the last qualifying one wins: the task's final deliverable
    return best


def pick_hybrid(chosen: list[Drawn], count: int, spec: SuiteSpec) -> dict[str, tuple[str, str]]:
    """Which of a category's tasks get a rubric: round-robin over the judged operations (in order of first
    appearance), the earliest eligible task of each in turn, so that one kind of deliverable (say, emails)
    does not take all the rubrics of a category."""
    by_op: dict[str, list[tuple[str, tuple[str, str]]]] = {}
    for d in chosen:
        j = judged_output(d, spec)
        if j is not None:
            by_op.setdefault(j[0], []).append((d.task.id, j))
    picked: dict[str, tuple[str, str]] = {}
    while len(picked) < count and any(by_op.values()):
        for queue in by_op.values():
            if queue and len(picked) < count:
                tid, j = queue.pop(0)
                picked[tid] = j
    return picked


def rubric_for(op: str, path: str, spec: SuiteSpec) -> Rubric:
    tmpl = spec.rubrics[op]
    rules = [RubricRule(name=r.name, description=" ".join(r.description.replace("{file}", f"`{path}`").split()),
                        file_path=path, weight=1.0, scores=dict(r.scores)) for r in tmpl.rules]
    return Rubric(rules=rules)


# --------------------------------------------------------------------------------------------- the build


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree_digest(root: Path, suffixes: tuple[str, ...] | None) -> str:
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file() and "__pycache__" not in q.parts):
        if suffixes is None or p.suffix in suffixes:
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def synth_digest() -> dict[str, str]:
    """Digests of what the synthesizers make tasks from: their code and taxonomy, the personas, the skill
    catalog and its loader (a change in any of them can change the suite's bytes)."""
    import clawgym.synth as synth_pkg

    src = Path(synth_pkg.__file__).parent
    out = {"src/clawgym/synth": _tree_digest(src, (".py", ".yaml"))}
    if (src.parent / "skills").is_dir():
        out["src/clawgym/skills"] = _tree_digest(src.parent / "skills", (".py", ".yaml"))
    personas = REPO / "personas" / "personas.yaml"
    if personas.exists():
        out["personas/personas.yaml"] = _sha256(personas)
    if (REPO / "skills").is_dir():
        out["skills"] = _tree_digest(REPO / "skills", None)
    return out


def build(spec: SuiteSpec, output: Path, provenance: Path | None, jobs: int = 2, keep_pools: Path | None = None,
          log=lambda msg: print(msg, file=sys.stderr)) -> list[Task]:
    """Synthesize the pools, select, add the rubrics, write `output` (and `provenance`). `keep_pools`: a folder
    to keep each route's whole pool in (`<category>.<route>.jsonl`, for reviewing candidates)."""
    from clawgym.core.taxonomy import load_taxonomy

    tax = load_taxonomy(None)
    names = {c.id: c.name for c in tax.categories}
    excluded = {e.source: e.reason for e in spec.exclusions}
    seen_excluded: set[str] = set()
    tasks: list[Task] = []
    summary: list[dict[str, Any]] = []
    skill_pool: list[Drawn] | None = None

    def take(pool: list[Drawn], count: int, what: str) -> list[Drawn]:
        """The first `count` candidates of the pool that the hand-check did not exclude."""
        kept = []
        for d in pool:
            if d.task.id in excluded:
                seen_excluded.add(d.task.id)
            else:
                kept.append(d)
        if len(kept) < count:
            raise ClawgymError(f"{what}: {len(kept)} candidates left after exclusions, {count} needed "
                               "(raise its pool in suite.yaml)")
        return kept[:count]

    with tempfile.TemporaryDirectory(prefix="synth-bench-200-") as tmp:
        pools_dir = keep_pools or Path(tmp)
        pools_dir.mkdir(parents=True, exist_ok=True)
        for cat in spec.categories:
            if cat.id not in names:
                raise ClawgymError(f"suite.yaml: categories: {cat.id!r} is not a category of the taxonomy")
            log(f"{cat.id}: synthesizing {cat.persona.pool} persona candidates (seed {cat.persona.seed})")
            chosen = take(_persona_pool(cat, cat.persona, pools_dir, jobs), cat.persona.tasks, f"{cat.id}/persona")
            if cat.skill:
                if spec.skill_route is None:
                    raise ClawgymError(f"suite.yaml: categories: {cat.id}: skill tasks wanted but no skill_route")
                if skill_pool is None:
                    log(f"skill route: synthesizing {spec.skill_route.pool} candidates (seed {spec.skill_route.seed})")
                    skill_pool = _skill_pool(spec.skill_route, pools_dir, jobs)
                mine = [d for d in skill_pool if d.task.metadata.get("category_id") == cat.id]
                chosen += take(mine, cat.skill, f"{cat.id}/skill")
            hybrid_ids = pick_hybrid(chosen, cat.hybrid, spec)
            if len(hybrid_ids) < cat.hybrid:
                raise ClawgymError(f"{cat.id}: only {len(hybrid_ids)} of its tasks have a judgeable deliverable, "
                                   f"{cat.hybrid} hybrid needed")
            for n, d in enumerate(chosen, start=1):
                tasks.append(_bench_task(spec, cat, n, d, hybrid_ids.get(d.task.id)))
            summary.append({"category": names[cat.id], "id": cat.id, "tasks": len(chosen), "hybrid": len(hybrid_ids),
                            "routes": {"persona": cat.persona.tasks, "skill": cat.skill}})
    stale = sorted(set(excluded) - seen_excluded)
    if stale:
        raise ClawgymError(f"suite.yaml: exclusions: {stale[0]} is not in any pool any more (the data has drifted)")
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ClawgymError("duplicate task ids in the build")
    write_records(output, tasks)
    log(f"wrote {len(tasks)} tasks -> {output}")
    if provenance is not None:
        import clawgym

        record = {
            "suite": spec.name, "version": spec.version, "tasks": len(tasks),
            "hybrid": sum(1 for t in tasks if t.verifier.rubric is not None),
            "categories": summary,
            "exclusions": [e.model_dump() for e in spec.exclusions],
            "built_with": {"clawgym": clawgym.__version__, **synth_digest()},
            "suite_yaml_sha256": _sha256(SPEC),
            "tasks_jsonl_sha256": _sha256(output),
        }
        tmp_path = provenance.with_name(f".{provenance.name}.tmp")
        tmp_path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp_path, provenance)
    return tasks


def _bench_task(spec: SuiteSpec, cat: CategorySpec, n: int, d: Drawn, judged: tuple[str, str] | None) -> Task:
    verifier = d.task.verifier
    bench: dict[str, Any] = {
        "suite": spec.name, "version": spec.version, "route": d.route, "seed": d.seed, "index": d.index,
        "attempt": d.attempt, "source_id": d.task.id, "grading": "hybrid" if judged else "code",
    }
    if judged is not None:
        op, path = judged
        verifier = verifier.model_copy(update={"rubric": rubric_for(op, path, spec), "code_weight": CODE_WEIGHT,
                                               "rubric_weight": RUBRIC_WEIGHT})
        bench["judged_operation"] = op
    return d.task.model_copy(update={
        "id": f"{spec.id_prefix}-{cat.abbr}-{n:03d}", "verifier": verifier,
        "metadata": {**d.task.metadata, "bench": bench},
    })


# --------------------------------------------------------------------------------------------- review


def review(task: Task) -> str:
    """A task in full for hand-checking: request, every workspace file, the named checks, the reference."""
    from clawgym.core.render import task_markdown
    from clawgym.workspace import materialize

    out = [task_markdown(task, preview_lines=0), f"**Source**: `{task.metadata.get('bench', {}).get('source_id')}`", ""]
    with tempfile.TemporaryDirectory() as tmp:
        materialize(task.workspace, Path(tmp))
        for p in sorted(Path(tmp).rglob("*")):
            if p.is_file() and ".git" not in p.parts:
                data = p.read_bytes()
                text = data.decode("utf-8", errors="replace") if b"\0" not in data[:4096] else "(binary)"
                out += [f"--- workspace `{p.relative_to(tmp)}` ---", text[:3000], ""]
    code = task.verifier.code
    if code is not None and code.kind != "shell":
        from clawgym.checks import render_grade_source

        source = render_grade_source(task)  # checks as data, rendered as the lambdas they evaluate
        if "CHECKS = [" in source and "def grade(" in source:
            out += ["--- checks ---", source[source.index("CHECKS = ["):source.index("def grade(")]]
    if task.verifier.rubric is not None:
        out += ["--- rubric ---", *(f"- {r.name} [{r.file_path}]: {r.description}" for r in task.verifier.rubric.rules), ""]
    for s in (task.reference.steps if task.reference else []):
        args = dict(s.arguments)
        body = args.pop("content", None) or args.pop("newText", None)
        out.append(f"--- reference {s.name} {json.dumps(args)[:400]}")
        if body:
            out.append(str(body)[:2500])
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT, help="tasks.jsonl to write")
    parser.add_argument("--check", action="store_true", help="rebuild in a temp dir and compare with --output")
    parser.add_argument("--review", action="append", metavar="TASK_ID", help="print a task of --output in full")
    parser.add_argument("--keep-pools", type=Path, metavar="DIR", help="keep every candidate pool here (review)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="synthesis worker processes (no effect on bytes)")
    args = parser.parse_args(argv)
    try:
        if args.review:
            tasks = {t.id: t for t in read_records(args.output, Task)}
            for tid in args.review:
                if tid not in tasks:
                    raise ClawgymError(f"{args.output}: no task {tid!r}")
                print(review(tasks[tid]))
            return 0
        spec = load_spec()
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                fresh = Path(tmp) / "tasks.jsonl"
                build(spec, fresh, None, jobs=args.jobs)
                same = args.output.exists() and fresh.read_bytes() == args.output.read_bytes()
                print(json.dumps({"identical": same, "rebuilt_sha256": _sha256(fresh),
                                  "committed_sha256": _sha256(args.output) if args.output.exists() else None}))
                return 0 if same else 1
        build(spec, args.output, PROVENANCE if args.output == OUTPUT else None, jobs=args.jobs,
              keep_pools=args.keep_pools)
        return 0
    except ClawgymError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
