"""The composer: chains 1-4 operation steps into one workflow task in the persona's voice.

Each step after the first consumes an artifact the previous step's reference produces (the cleaned table
becomes the report's input, the report becomes the mail's attachment...), so the agent has to do the steps
in order. The task's code check is the steps' named checks as data over the versioned check library
(:mod:`clawgym.synth.checks`).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

from clawgym.core.records import ReferenceSolution, Task, VerifierSpec, WorkspaceSpec
from clawgym.synth.checks import (  # noqa: F401 (the library and the grade() renderers, as they were found here)
    CHECKLIB_SOURCE,
    checks_code_check,
    library_subset,
    render_grade,
    render_grade_source,
)
from clawgym.synth.ops.base import OpContext, OperationGenerator, StepPlan
from clawgym.synth.personas import Persona, persona_summary
from clawgym.synth.taxonomy import Subcategory, Taxonomy

# --------------------------------------------------------------------------------------------- voice

GREETINGS = {
    "warm": ["Hi!", "Hello there,", "Hey, hope you're well.", "Hi, thanks in advance for this."],
    "formal": ["Good morning.", "Hello,", "Dear assistant,", "Greetings."],
    "terse": ["", "", "quick one:", "need this done:"],
    "anxious": ["Hi, sorry, I'm a bit swamped.", "Hello - I'm behind on this and it's stressing me out.",
                "Hi, could you help? I keep putting this off."],
}
CLOSINGS = {
    "warm": ["Thanks so much!", "You're a star, thank you.", "Cheers!", "Thank you!"],
    "formal": ["Thank you.", "Kind regards.", "Much appreciated.", "Please confirm when done."],
    "terse": ["thx", "", "ta", "that's all."],
    "anxious": ["Thank you, this is a huge help.", "Please double-check everything, I can't afford mistakes.",
                "Thanks - and tell me if anything looks off."],
}
CONNECT = {
    "warm": ["First, ", "Then ", "After that, ", "Finally, "],
    "formal": ["To begin, ", "Next, ", "Subsequently, ", "Lastly, "],
    "anxious": ["So first, ", "Then, once that's right, ", "After that, ", "And last, "],
}
CONTEXT = [
    "I'm {a} {occupation} in {city} and {goal}.",
    "Context: I work as {a} {occupation} ({domain}) and {goal}.",
    "As {a} {occupation}, {goal}, so I need a hand with my files.",
    "I'm {name}, {a} {occupation} based in {city}; {goal}.",
]


def register(persona: Persona) -> str:
    t = f"{persona.tone} {persona.writing_quirks or ''}".casefold()
    if any(w in t for w in ("terse", "blunt", "short", "lowercase", "clipped", "brief", "minimal")):
        return "terse"
    if any(w in t for w in ("anxious", "worried", "nervous", "over-explain", "stressed", "apolog", "hesitant")):
        return "anxious"
    if any(w in t for w in ("formal", "precise", "polite", "professional", "courteous", "measured", "dry",
                            "courtly", "grammar", "methodical", "exact", "careful")):
        return "formal"
    return "warm"


def _lowerfirst(s: str) -> str:
    """The text with its first letter in lower case, for use mid-sentence; an acronym ("HR ...") and the
    pronoun I ("I redo this...", "I'm") keep theirs."""
    if re.match(r"I\b", s):
        return s
    return s[:1].lower() + s[1:] if s[:1].isupper() and not s[1:2].isupper() else s


# Words whose first letter misleads about their first sound: a silent h ("an hour"), a u or eu said "you"
# ("a university", "a European"), an o said "w" ("a one-off").
_AN_SILENT_H = ("hour", "honest", "honour", "honor", "heir")
_A_YOU_SOUND = ("uni", "use", "usu", "uti", "ura", "ure", "uro", "euro", "eu", "ewe", "one", "once", "ubiq")
# Letters whose name starts with a vowel sound, for acronyms read letter by letter ("an HR manager", "an MBA
# student", "a UX writer").
_VOWEL_SOUND_LETTERS = set("AEFHILMNORSX")


def _article(phrase: str) -> str:
    """"a" or "an" before `phrase`, by the sound of its first word, not its first letter."""
    word = re.split(r"[\s/-]", phrase.strip(), maxsplit=1)[0]
    if not word:
        return "a"
    if len(word) > 1 and word.isupper() and word.isalpha():  # an acronym, read letter by letter
        return "an" if word[0] in _VOWEL_SOUND_LETTERS else "a"
    w = word.casefold()
    if w.startswith(_AN_SILENT_H):
        return "an"
    if w.startswith(_A_YOU_SOUND):
        return "a"
    return "an" if w[0] in "aeiou" else "a"


_FIRST_PERSON_VERBS = {"is": "am", "has": "have", "does": "do", "was": "was"}


def _first_person_verb(verb: str) -> str:
    """A third-person singular present verb as after "I": owns -> own, watches -> watch, has -> have."""
    if verb in _FIRST_PERSON_VERBS:
        return _FIRST_PERSON_VERBS[verb]
    if re.search(r"(ss|sh|ch|x|o)es$", verb):
        return verb[:-2]
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    return verb[:-1] if verb.endswith("s") and not verb.endswith("ss") else verb


def first_person_goal(goal: str) -> str:
    """A persona's goal, written about the persona ("...in her inbox", "the code she owns"), in the first
    person ("...in my inbox", "the code I own"), to start mid-sentence."""
    goal = re.sub(r"\b(his|her|their)\b", "my", _lowerfirst(goal).rstrip("."))
    goal = re.sub(r"\b(he|she) (\w+)\b", lambda m: "I " + _first_person_verb(m.group(2)), goal)
    goal = re.sub(r"\bthey (are|were)\b", lambda m: "I " + {"are": "am", "were": "was"}[m.group(1)], goal)
    return re.sub(r"\b(he|she|they)\b", "I", goal)


def persona_context(persona: Persona, rng: random.Random) -> str:
    """One line of who is asking and why, in the first person (persona goals are written about the persona:
    "...in her inbox")."""
    goal = first_person_goal(rng.choice(persona.goals))
    return rng.choice(CONTEXT).format(
        a=_article(persona.occupation), occupation=persona.occupation,
        city=persona.location.split(",")[0],
        goal=f"I'm trying to {goal}" if not goal.startswith(("I ", "my ")) else goal,
        domain=persona.domain, name=persona.name,
    )


def add_steps_and_closing(parts: list[str], frags: list[str], reg: str, rng: random.Random) -> None:
    """Append the step fragments in order (one, a numbered list when terse, else joined by connectives) and a
    closing line of the register."""
    if len(frags) == 1:
        parts.append(frags[0])
    elif reg == "terse":
        parts.append("\n".join(f"{i}. {_lowerfirst(f)}" for i, f in enumerate(frags, start=1)))
    else:
        conn = CONNECT[reg]
        for i, f in enumerate(frags):
            lead = conn[0] if i == 0 else (conn[3] if i == len(frags) - 1 else conn[1 + (i - 1) % 2])
            parts.append(lead + _lowerfirst(f))
    close = rng.choice(CLOSINGS[reg])
    if close:
        parts.append(close)


def join_request(parts: list[str], frags: list[str], reg: str) -> str:
    sep = "\n\n" if reg in ("formal", "anxious") or len(frags) > 2 else "\n"
    return sep.join(parts)


def open_request(persona: Persona, rng: random.Random) -> tuple[str, list[str]]:
    """The register and the request's opening: a greeting and the persona's context line (a terse persona often
    skips it; one who writes in lowercase writes "i'm ..."). Shared by the persona and skill routes."""
    reg = register(persona)
    context = persona_context(persona, rng)
    parts: list[str] = []
    greet = rng.choice(GREETINGS[reg])
    if greet:
        parts.append(greet)
    if reg != "terse" or rng.random() < 0.3:
        parts.append(context.lower() if reg == "terse" and "lowercase" in persona.tone.casefold() else context)
    return reg, parts


def write_request(persona: Persona, plans: list[StepPlan], rng: random.Random) -> str:
    """The whole request, in the persona's register, with the step fragments in order."""
    reg, parts = open_request(persona, rng)
    frags = [p.instruction.strip() for p in plans]
    add_steps_and_closing(parts, frags, reg, rng)
    if reg == "terse" and "lowercase" in persona.tone.casefold():
        # the persona's own words in lowercase; the step fragments keep their exact paths and values
        parts = [p if any(p.endswith(f) for f in frags) or p in frags else p.lower() for p in parts]
    return join_request(parts, frags, reg)


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
) -> Candidate:
    """One task. `solution` picks the reference: "direct" (the answer written out) or "program" (each step's
    :attr:`StepPlan.program` where it has one, computed in the sandbox; validation proves it scores 1.0 as well),
    for the operations in `program_ops` only if it is given. Both draw the same random numbers, so a seed gives
    the same tasks either way."""
    if solution not in SOLUTIONS:
        raise ValueError(f"solution must be one of {', '.join(SOLUTIONS)}, not {solution!r}")
    chain = choose_chain(sub, ops, rng, length)
    plans: list[StepPlan] = []
    used: set[str] = set()
    source = None
    for i, gen in enumerate(chain):
        ctx = OpContext(persona=persona, subcategory=sub, rng=rng, step=i, dir="", used_paths=used)
        plan = gen.plan(ctx, source)
        plans.append(plan)
        produced = [a for a in plan.outputs if i + 1 < len(chain) and a.kind in chain[i + 1].consumes]
        source = produced[0] if produced else None
        if i + 1 < len(chain) and source is None:
            chain = chain[: i + 1]  # the next step cannot use this output: end the chain here
            break
    instruction = write_request(persona, plans, rng)
    files = [f for p in plans for f in p.files]
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
        verifier=VerifierSpec(code=checks_code_check(plans, timeout_seconds=120)),
        reference=ReferenceSolution(steps=steps, final_message=final),
        timeout_seconds=900,
        metadata={
            "persona_id": persona.id, "category_id": category.id, "subcategory_id": sub.id,
            "steps": [p.summary for p in plans], "fingerprint": fingerprint,
            # only when not the default, so that direct-solution tasks keep their bytes
            **({"solution": solution} | ({"program_ops": sorted(program_ops)} if program_ops is not None else {})
               if programs else {}),
        },
    )
    return Candidate(task=task, plans=plans, fingerprint=fingerprint)
