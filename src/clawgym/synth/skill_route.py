"""`clawgym synth skill`: skill-grounded workflow tasks.

A primary skill of the catalog, plus up to two supporting skills whose operations connect with it, becomes one
multi-step task: the skills' annotated operations choose the chain of operation generators (each step consumes
what the previous one produces, as in the persona route), a persona whose needs fit the chain gives the data
its flavour and the request its voice, and the request is written around the primary skill's job. The skills'
folders are placed in the task's workspace at `skills/<name>/` — where OpenClaw looks for workspace skills — and
the reference solution reads each skill's SKILL.md before the steps it serves.

Everything else is the persona route's machinery (:mod:`clawgym.synth.pipeline`): the same validation in
sandboxes (reference 1.0, no-op 0, partial strictly between), the same near-duplicate rejection, the same
determinism (task i from its own RNG seeded with (seed, i, attempt)) and resume.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawgym.core.atomic import write_json
from clawgym.core.errors import ClawgymError
from clawgym.core.jsonl import read_records_lenient
from clawgym.core.records import (
    ReferenceSolution,
    Task,
    VerifierSpec,
    WorkspaceFile,
    WorkspaceSpec,
)
from clawgym.core.taxonomy import Subcategory, Taxonomy
from clawgym.synth.checks import checks_code_check
from clawgym.synth.compose import Candidate
from clawgym.synth.grammar import expand
from clawgym.synth.ops.base import OpContext, OperationGenerator, StepPlan, read
from clawgym.synth.personas import Persona, persona_summary
from clawgym.synth.pipeline import SynthReport, synthesize
from clawgym.synth.voice import compose_request, lowerfirst, register

ROUTE = "skill"
LENGTH_WEIGHTS = {2: 4, 3: 3, 4: 2}
SUPPORTING_WEIGHTS = {0: 2, 1: 3, 2: 2}
WORKSPACE_SKILLS_DIR = "skills"  # <workspace>/skills: OpenClaw's workspace skills folder
MAX_RESOURCE_BYTES = 256_000


def task_id(seed: int, index: int) -> str:
    return f"{ROUTE}-s{seed}-{index:06d}"


@dataclass(frozen=True)
class SkillRouteConfig:
    """What a worker needs to make skill-grounded candidates (picklable: it travels to worker processes)."""

    skills_dir: str | None = None
    taxonomy_path: str | None = None
    personas_path: str | None = None
    primary: tuple[str, ...] = ()  # only these skills as primary (all eligible ones when empty)


def eligible(skill) -> bool:
    """A skill the offline route can ground a task in: annotated, doable with text tools, needing no account,
    and not one whose job is risky (sending, publishing, deleting for real)."""
    a = skill.annotations
    return a is not None and a.text_only_compatible and not a.auth_required and not a.has_risk


@dataclass
class _State:
    taxonomy: Taxonomy
    personas: list[Persona]
    ops: dict[str, OperationGenerator]
    skills: list  # eligible skills, sorted by name
    primary: list  # the ones that may be primary
    files: dict[str, list[WorkspaceFile]]  # skill name -> its files in a task's workspace


_STATE: dict[SkillRouteConfig, _State] = {}


def skill_files(skill) -> list[WorkspaceFile]:
    """The skill's folder as workspace files under `skills/<name>/`: SKILL.md as it is, resources too."""
    from clawgym.skills.importer import slug

    base = f"{WORKSPACE_SKILLS_DIR}/{slug(skill.name)}"
    files = [WorkspaceFile(path=f"{base}/SKILL.md", content=skill.text)]
    for p in sorted(skill.folder.rglob("*")):
        rel = p.relative_to(skill.folder)
        if p == skill.path or not p.is_file() or p.is_symlink() or any(part.startswith(".") for part in rel.parts):
            continue
        data = p.read_bytes()
        if len(data) > MAX_RESOURCE_BYTES:
            continue
        try:
            files.append(WorkspaceFile(path=f"{base}/{rel.as_posix()}", content=data.decode("utf-8")))
        except UnicodeDecodeError:
            files.append(WorkspaceFile(path=f"{base}/{rel.as_posix()}", content_b64=base64.b64encode(data).decode()))
    return files


def load_state(config: SkillRouteConfig) -> _State:
    """The catalog, taxonomy, personas and generators (loaded once per process)."""
    st = _STATE.get(config)
    if st is not None:
        return st
    from clawgym.core.taxonomy import load_taxonomy
    from clawgym.skills.catalog import load_catalog
    from clawgym.synth.ops import registry
    from clawgym.synth.personas import load_personas

    tax = load_taxonomy(config.taxonomy_path)
    personas = load_personas(config.personas_path, tax)
    ops = registry()
    catalog = load_catalog(config.skills_dir, taxonomy=tax)
    skills = [s for s in catalog if eligible(s) and any(o in ops for o in s.annotations.operations)]
    if not skills:
        raise ClawgymError(f"{catalog.root}: no skill can ground a task (annotated, text-only, no auth, no risk)")
    if config.primary:
        by_name = {s.name: s for s in skills}
        bad = [n for n in config.primary if n not in by_name]
        if bad:
            known = set(catalog.names)
            why = ", ".join(f"{n!r} ({'not eligible' if n in known else 'no such skill'})" for n in bad)
            raise ClawgymError(f"{catalog.root}: cannot use as primary skill: {why}")
        primary = [by_name[n] for n in sorted(set(config.primary))]
    else:
        primary = skills
    st = _State(tax, personas, ops, skills, primary, {s.name: skill_files(s) for s in skills})
    _STATE[config] = st
    return st


# --------------------------------------------------------------------------------------------- chains


def _chains(pool: list[str], ops: dict[str, OperationGenerator], length: int) -> list[list[str]]:
    """Every chain of distinct operations from `pool`, 1..length long, each step consuming what the previous
    one produces."""
    out: list[list[str]] = []

    def grow(chain: list[str]) -> None:
        out.append(list(chain))
        if len(chain) == length:
            return
        produced = set(ops[chain[-1]].produces)
        for op in pool:
            if op not in chain and produced & set(ops[op].consumes):
                grow(chain + [op])

    for op in pool:
        if ops[op].standalone:
            grow([op])
    return out


def _connects(a: list[str], b: list[str], ops: dict[str, OperationGenerator]) -> bool:
    return any(set(ops[x].produces) & set(ops[y].consumes) for x in a for y in b)


def choose_skill_chain(primary, others: list, ops: dict[str, OperationGenerator], rng: random.Random,
                       length: int) -> list[tuple[str, str]]:
    """[(operation, skill name)]: a chain that uses at least one of the primary skill's operations, extended by
    the operations of supporting skills picked among `others` that connect with it."""
    p_ops = [o for o in primary.annotations.operations if o in ops]
    fits = [s for s in others if s.name != primary.name and (
        _connects(p_ops, [o for o in s.annotations.operations if o in ops], ops)
        or _connects([o for o in s.annotations.operations if o in ops], p_ops, ops))]
    k = rng.choices(list(SUPPORTING_WEIGHTS), weights=list(SUPPORTING_WEIGHTS.values()))[0]
    support = rng.sample(fits, k=min(k, len(fits)))
    owner: dict[str, str] = {o: primary.name for o in p_ops}
    for s in support:
        for o in s.annotations.operations:
            if o in ops and o not in owner:
                owner[o] = s.name
    pool = list(owner)
    chains = [c for c in _chains(pool, ops, length) if any(owner[o] == primary.name for o in c)]
    best = max(len(c) for c in chains)
    # the longest chains; among them the ones that give the primary skill the most steps
    top = [c for c in chains if len(c) == best]
    most = max(sum(owner[o] == primary.name for o in c) for c in top)
    top = [c for c in top if sum(owner[o] == primary.name for o in c) == most]
    chain = rng.choice(top)
    return [(o, owner[o]) for o in chain]


# --------------------------------------------------------------------------------------------- the request

SKILL_LINES = {
    "warm": [
        "There's a skill for this in the workspace, `{path}` ({what}) - [please follow it|go by it|use it].",
        "I've put the `{name}` skill in `{dir}/` ({what}); [use it for this|please follow it|it says how I like it "
        "done].",
        "[Please work|Work] the way `{path}` describes ({what}).",
        "[Have a look at|Read] `{path}` first ({what}) and [stick to it|follow it][, please|].",
        "The `{name}` skill (`{path}`: {what}) is how [I|we] do this[, so please follow it|].",
    ],
    "formal": [
        "The skill `{name}` ({what}) is in the workspace at `{path}`; please follow it.",
        "Please follow the procedure in `{path}` ({what}).",
        "[Kindly|Please] [consult|read] `{path}` ({what}) [before starting|first] and [adhere to|follow] it.",
        "The procedure to [follow|apply] is the `{name}` skill, at `{path}` ({what}).",
    ],
    "anxious": [
        "I found a skill that should help: `{path}` ({what}). Please follow it closely.",
        "Please use the `{name}` skill in `{dir}/` ({what}) - I don't want to get this wrong.",
        "[Someone told me|I was told] to use `{path}` for this ({what}), so [please|] [stick to it|follow it "
        "exactly], [I think it matters|just in case].",
    ],
    "terse": ["use the {name} skill ({path}).", "skill: {path}.", "follow {path}.", "see {path} ({what}).",
              "{name} skill in {dir}/ - use it."],
}
SUPPORT_LINES = [
    "For one of the steps, `{path}` ({what}) has the details.",
    "The `{name}` skill in `{dir}/` covers part of this too ({what}).",
    "Also see `{path}` ({what}).",
    "[Part of it|One step] is covered by `{path}` ({what}) [as well|too].",
    "[And|Plus] `{name}` (`{path}`) for [the rest|the other part] ({what}).",
]


def _what(skill) -> str:
    return lowerfirst(skill.annotations.summary.strip().rstrip("."))


def _fill(template: str, skill, rng: random.Random) -> str:
    """A skill line: the template's alternatives drawn, the skill's name, folder, path and summary in slots."""
    from clawgym.skills.importer import slug

    d = f"{WORKSPACE_SKILLS_DIR}/{slug(skill.name)}"
    text = expand(template, rng, name=skill.name, dir=d, path=f"{d}/SKILL.md", what=_what(skill))
    return text if template[:1].isupper() else text[:1].lower() + text[1:]


def write_skill_request(persona: Persona, plans: list[StepPlan], primary, support: list,
                        rng: random.Random) -> str:
    """The request in the persona's voice (:func:`clawgym.synth.voice.compose_request`): greeting and context,
    the skill(s) to follow, the steps in order, the closing."""
    reg = register(persona)
    lines = [_fill(rng.choice(SKILL_LINES[reg]), primary, rng)]
    for s in support:
        lines.append(_fill(rng.choice(SUPPORT_LINES), s, rng))
    frags = [p.instruction.strip() for p in plans]
    outputs = [o.outputs[0].path if o.outputs else None for o in plans]
    return compose_request(persona, rng, frags, outputs, middle=lines)


# --------------------------------------------------------------------------------------------- candidates


def _subcategory(tax: Taxonomy, chain: list[str], rng: random.Random) -> Subcategory:
    """A subcategory holding the chain's first operation, preferring those that hold most of the chain."""
    subs = [s for s in tax.subcategories if chain[0] in s.operations] or tax.subcategories
    most = max(len(set(chain) & set(s.operations)) for s in subs)
    return rng.choice([s for s in subs if len(set(chain) & set(s.operations)) == most])


def compose_skill_task(tid: str, primary, st: _State, rng: random.Random, length: int) -> Candidate:
    """One skill-grounded candidate (not yet validated)."""
    from clawgym.skills.importer import slug

    steps = choose_skill_chain(primary, st.skills, st.ops, rng, length)
    chain = [o for o, _ in steps]
    sub = _subcategory(st.taxonomy, chain, rng)
    fitting = [p for p in st.personas if sub.id in p.subcategories] or st.personas
    persona = rng.choice(fitting)
    by_name = {s.name: s for s in st.skills}
    used_paths: set[str] = {WORKSPACE_SKILLS_DIR}
    plans: list[StepPlan] = []
    owners: list[str] = []
    source = None
    for i, (op, owner) in enumerate(steps):
        ctx = OpContext(persona=persona, subcategory=sub, rng=rng, step=i, dir="", used_paths=used_paths)
        plan = st.ops[op].plan(ctx, source)
        plans.append(plan)
        owners.append(owner)
        if i + 1 < len(steps):
            nxt = st.ops[steps[i + 1][0]]
            produced = [a for a in plan.outputs if a.kind in nxt.consumes]
            source = produced[0] if produced else None
            if source is None:
                break  # the next step cannot use this output: the chain ends here
    if primary.name not in owners:  # the chain ended before the primary skill's step: try another attempt
        raise ValueError(f"chain {chain} ended before a step of the primary skill {primary.name!r}")
    used = [primary.name] + [n for n in dict.fromkeys(owners) if n != primary.name]
    support = [by_name[n] for n in used[1:]]
    # the reference reads each skill's SKILL.md before the first step it serves
    seen: set[str] = set()
    for plan, owner in zip(plans, owners, strict=True):
        if owner not in seen:
            seen.add(owner)
            plan.steps = [read(f"{WORKSPACE_SKILLS_DIR}/{slug(owner)}/SKILL.md"), *plan.steps]
    instruction = write_skill_request(persona, plans, primary, support, rng)
    files = [f for n in used for f in st.files[n]] + [f for p in plans for f in p.files]
    category = st.taxonomy.category_of(sub.id)
    final = "Done. " + "; ".join(p.summary for p in plans if p.summary) + "."
    fingerprint = hashlib.sha256(("|".join(f"{p.operation}:{p.fingerprint}" for p in plans)).encode()).hexdigest()[:20]
    task = Task(
        id=tid,
        source="synth-skill",
        category=category.name,
        subcategory=sub.name,
        operations=[p.operation for p in plans],
        persona=persona_summary(persona),
        skills=used,
        instruction=instruction,
        workspace=WorkspaceSpec(files=files),
        verifier=VerifierSpec(code=checks_code_check(plans, timeout_seconds=120)),
        reference=ReferenceSolution(steps=[s for p in plans for s in p.steps], final_message=final),
        timeout_seconds=900,
        metadata={
            "route": ROUTE, "persona_id": persona.id, "category_id": category.id, "subcategory_id": sub.id,
            "steps": [p.summary for p in plans], "fingerprint": fingerprint,
            "skills": {
                "primary": primary.name, "supporting": [s.name for s in support],
                "paths": [f"{WORKSPACE_SKILLS_DIR}/{slug(n)}/SKILL.md" for n in used],
                "by_step": owners,
            },
        },
    )
    return Candidate(task=task, plans=plans, fingerprint=fingerprint)


def make_skill_candidate(config: SkillRouteConfig, seed: int, index: int, attempt: int) -> Candidate:
    """Candidate (index, attempt) of a seed: the same bytes in any process, in any order."""
    st = load_state(config)
    rng = random.Random(f"clawgym-synth-skill:{seed}:{index}:{attempt}")
    primary = st.primary[(index + attempt * 7) % len(st.primary)] if attempt < 3 else rng.choice(st.primary)
    length = rng.choices(list(LENGTH_WEIGHTS), weights=list(LENGTH_WEIGHTS.values()))[0]
    return compose_skill_task(task_id(seed, index), primary, st, rng, length)


# --------------------------------------------------------------------------------------------- the run


def _skill_counts(output: Path) -> dict:
    primary: Counter = Counter()
    used: Counter = Counter()
    read = read_records_lenient(output, Task)
    for t in read.records:
        info = t.metadata.get("skills") or {}
        if info.get("primary"):
            primary[info["primary"]] += 1
        for n in t.skills:
            used[n] += 1
    return {"by_primary_skill": dict(sorted(primary.items())), "by_skill": dict(sorted(used.items()))}


def synthesize_skill_tasks(
    n: int,
    seed: int,
    output: Path,
    *,
    jobs: int = 1,
    skills_dir: Path | None = None,
    skills: list[str] | None = None,
    taxonomy_path: Path | None = None,
    personas_path: Path | None = None,
    sandbox: str = "bwrap",
    validate: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
    executor: Any = None,
    dedup: bool = False,
    dedup_precision: str = "auto",
    rewrite: Any = None,
) -> SynthReport:
    """Write skill-grounded tasks 0..n-1 of the seed to `output` (appending after what is already there),
    each validated in a sandbox; `skills` restricts the primary skills. The report
    (`output.report.json`) also counts tasks per skill. `executor`, `dedup`, `dedup_precision`, `rewrite`: see
    :func:`synthesize`."""
    config = SkillRouteConfig(
        skills_dir=str(skills_dir) if skills_dir else None,
        taxonomy_path=str(taxonomy_path) if taxonomy_path else None,
        personas_path=str(personas_path) if personas_path else None,
        primary=tuple(skills or ()),
    )
    load_state(config)  # bad catalogs and names fail here, before any worker starts or any line is written
    report = synthesize(
        n, seed, output, jobs=jobs, taxonomy_path=taxonomy_path, personas_path=personas_path, sandbox=sandbox,
        validate=validate, on_progress=on_progress,
        make=functools.partial(make_skill_candidate, config), id_prefix=ROUTE, executor=executor, dedup=dedup,
        dedup_precision=dedup_precision, rewrite=rewrite,
    )
    report_path = output.with_name(output.name + ".report.json")
    if report_path.exists():
        data = json.loads(report_path.read_text())
        data.update(_skill_counts(output))
        write_json(report_path, data)
    return report
