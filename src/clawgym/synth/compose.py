"""The composer: chains 1-4 operation steps into one workflow task in the persona's voice.

Each step after the first consumes an artifact the previous step's reference produces (the cleaned table
becomes the report's input, the report becomes the mail's attachment...), so the agent has to do the steps
in order. The task's code check is the steps' named checks as data over the versioned check library
(:mod:`clawgym.checks`, written by :mod:`clawgym.synth.checks`).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from clawgym.core.records import ReferenceSolution, Task, VerifierSpec, WorkspaceSpec
from clawgym.core.taxonomy import Subcategory, Taxonomy
from clawgym.synth.checks import check_call, checks_code_check
from clawgym.synth.distractors import distractors, kept_check
from clawgym.synth.grammar import HalfChoices
from clawgym.synth.ops.base import OpContext, OperationGenerator, StepPlan
from clawgym.synth.personas import Persona, persona_summary
from clawgym.synth.voice import article, compose_request, first_person, lowerfirst, register  # noqa: F401

# --------------------------------------------------------------------------------------------- voice
# The request around the step fragments is written by clawgym.synth.voice; these names stay importable here.
_lowerfirst = lowerfirst
_article = article
first_person_goal = first_person


def write_request(persona: Persona, plans: list[StepPlan], rng: random.Random,
                  outputs: list[str | None] | None = None) -> str:
    """The whole request, in the persona's voice (:func:`clawgym.synth.voice.compose_request`), with the step
    fragments in order and byte for byte. `outputs[i]`: the path step i hands to step i + 1, if any (a request
    may say "once `that.csv` is ready, ...")."""
    frags = [p.instruction.strip() for p in plans]
    return compose_request(persona, rng, frags, outputs or [None] * len(frags))


# --------------------------------------------------------------------------------------------- chains


def choose_chain(
    sub: Subcategory, ops: dict[str, OperationGenerator], rng: random.Random, length: int
) -> list[OperationGenerator]:
    """Up to `length` generators where each consumes what the previous produces; preferring the
    subcategory's own operations, never repeating one."""
    local = [ops[o] for o in sub.operations if o in ops]
    starters = [g for g in local if g.standalone] or [g for g in ops.values() if g.standalone]
    chain = [rng.choice(starters)]
    while len(chain) < length:
        produced = set(chain[-1].produces)
        used = {g.id for g in chain}
        fits = [g for g in local if g.id not in used and produced & set(g.consumes)]
        if not fits:
            fits = [g for g in ops.values() if g.id not in used and produced & set(g.consumes)]
        if not fits:
            break
        chain.append(rng.choice(fits))
    return chain


@dataclass
class Candidate:
    task: Task
    plans: list[StepPlan]
    fingerprint: str


SOLUTIONS = ("direct", "program")


def compose_task(
    task_id: str,
    persona: Persona,
    sub: Subcategory,
    taxonomy: Taxonomy,
    ops: dict[str, OperationGenerator],
    rng: random.Random,
    length: int,
    solution: str = "direct",
    program_ops: frozenset[str] | None = None,
    phrasing_half: int | None = None,
    distractor_files: bool = True,
) -> Candidate:
    """One task. `solution` picks the reference: "direct" (the answer written out) or "program" (each step's
    :attr:`StepPlan.program` where it has one, computed in the sandbox; validation proves it scores 1.0 as well),
    for the operations in `program_ops` only if it is given. Both draw the same random numbers, so a seed gives
    the same tasks either way.

    `phrasing_half` (0 or 1) draws every choice of the steps and the request from one half of the options
    (:class:`clawgym.synth.grammar.HalfChoices`), after the operation chain is chosen, so both halves give the
    same mix of operations worded from disjoint halves of the grammars, schemas and vocabularies.

    `distractor_files`: 1-3 files of the persona's world the request does not mention
    (:mod:`clawgym.synth.distractors`), drawn after the request, with a check that they are left as they were."""
    if solution not in SOLUTIONS:
        raise ValueError(f"solution must be one of {', '.join(SOLUTIONS)}, not {solution!r}")
    chain = choose_chain(sub, ops, rng, length)
    if phrasing_half is not None:
        rng = HalfChoices(rng, phrasing_half)
    plans: list[StepPlan] = []
    handed: list[str | None] = []  # the path each step hands to the next
    used: set[str] = set()
    source = None
    for i, gen in enumerate(chain):
        ctx = OpContext(persona=persona, subcategory=sub, rng=rng, step=i, dir="", used_paths=used)
        plan = gen.plan(ctx, source)
        plans.append(plan)
        produced = [a for a in plan.outputs if i + 1 < len(chain) and a.kind in chain[i + 1].consumes]
        source = produced[0] if produced else None
        handed.append(source.path if source is not None else None)
        if i + 1 < len(chain) and source is None:
            chain = chain[: i + 1]  # the next step cannot use this output: end the chain here
            break
    instruction = write_request(persona, plans, rng, handed)
    files = [f for p in plans for f in p.files]
    code = checks_code_check(plans, timeout_seconds=120)
    extra = []
    kept_name = None
    if distractor_files:
        # their own RNG, seeded from the task's: how many and what they hold never shifts the task's later draws
        extra = distractors(persona, plans, instruction, random.Random(rng.getrandbits(64)))
        kept = kept_check(extra, plans, [c.name or "" for c in code.checks])
        kept_name = kept[0] if kept is not None else None
        if kept is not None:
            code = code.model_copy(update={"checks": [*code.checks, check_call(kept[1], kept[0])]})
    files += extra
    programs = solution == "program"
    steps = [s for p in plans
             for s in (p.program if programs and p.program and (program_ops is None or p.operation in program_ops)
                       else p.steps)]
    category = taxonomy.category_of(sub.id)
    final = "Done. " + "; ".join(p.summary for p in plans if p.summary) + "."
    fingerprint = hashlib.sha256(
        ("|".join(f"{p.operation}:{p.fingerprint}" for p in plans)).encode()
    ).hexdigest()[:20]
    task = Task(
        id=task_id,
        source="synth-persona",
        category=category.name,
        subcategory=sub.name,
        operations=[p.operation for p in plans],
        persona=persona_summary(persona),
        instruction=instruction,
        workspace=WorkspaceSpec(files=files),
        verifier=VerifierSpec(code=code),
        reference=ReferenceSolution(steps=steps, final_message=final),
        timeout_seconds=900,
        metadata={
            "persona_id": persona.id, "category_id": category.id, "subcategory_id": sub.id,
            "steps": [p.summary for p in plans], "fingerprint": fingerprint,
            **({"distractors": [f.path for f in extra]} if extra else {}),
            **({"distractor_check": kept_name} if kept_name else {}),
            # only when not the default, so that direct-solution tasks keep their bytes
            **({"phrasing_half": phrasing_half} if phrasing_half is not None else {}),
            **({"solution": solution} | ({"program_ops": sorted(program_ops)} if program_ops is not None else {})
               if programs else {}),
        },
    )
    return Candidate(task=task, plans=plans, fingerprint=fingerprint)
