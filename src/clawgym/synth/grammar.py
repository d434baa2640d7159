"""A small phrasing grammar for the template generators: one written request becomes many ways of saying it.

Why: two or three fixed instruction templates per operation made 1,000 persona tasks read as a few dozen
(distinct-4 0.23, a nearest-neighbour cosine of 0.86, see ``clawgym synth stats``). A generator now writes its
request once, with its alternatives inline, and every choice is drawn from the task's RNG (the same seed gives
the same text):

- ``[a|b|c]``: one of the alternatives (they may nest: ``[sort [them|the rows]|order them]``);
- ``[a|]``: an optional part (the empty alternative);
- ``[@save]``: one synonym of a shared set (:data:`SYNONYMS`), so common words vary the same way everywhere;
- ``{name}``: a slot, filled *after* the choices are made from the keyword arguments, with its value as it is
  (slot values are never parsed: a path or a JSON example with brackets in it stays intact);
- ``\\[``, ``\\]``, ``\\|``: literal brackets and bar in the template itself.

Exact constants a check depends on (paths, column names, values) go in slots, never in alternatives: the
grammar changes how a request is phrased, not what it asks.

:func:`requirements` renders a list of requirement clauses the way people write them (one sentence, a bulleted
or numbered list, a "Requirements:" block), in a drawn order where order does not matter.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

# Shared synonym sets: ``[@key]`` draws one. Keys name the plainest member.
SYNONYMS: dict[str, list[str]] = {
    "save": ["save", "write", "store", "put"],
    "saved": ["saved", "written", "stored", "put"],
    "please": ["please", "kindly", "could you", "can you"],
    "make": ["make", "create", "produce", "build"],
    "check": ["check", "verify", "confirm", "double-check"],
    "list": ["list", "table", "overview", "rundown"],
    "file": ["file", "document", "sheet"],
    "folder": ["folder", "directory"],
    "use": ["use", "go by", "rely on", "work from"],
    "need": ["need", "want", "would like", "have to have"],
    "keep": ["keep", "leave", "preserve", "retain"],
    "remove": ["remove", "drop", "delete", "get rid of"],
    "sort": ["sort", "order", "arrange"],
    "each": ["each", "every", "every single"],
    "exactly": ["exactly", "precisely", "strictly"],
    "also": ["also", "in addition", "as well,", "besides that,"],
    "quick": ["quick", "short", "brief", "small"],
    "help": ["help", "a hand", "some help", "assistance"],
    "mess": ["a mess", "chaotic", "all over the place", "in bad shape", "untidy"],
    "look_at": ["look at", "go through", "read", "open"],
    "then": ["then", "after that", "next", "once that's done"],
}

_TOKEN = re.compile(r"\\[\[\]|]|\[|\]|\|")


class GrammarError(ValueError):
    """A template that does not parse: an unclosed or stray bracket, an unknown synonym set or slot."""


@lru_cache(maxsize=4096)
def _parse(template: str) -> list:
    """The template as a tree (cached: generators expand the same templates for every task; never mutated): a sequence of strings and choice nodes (lists of alternative sequences)."""
    stack: list[list] = [[[]]]  # each level: its alternatives; each alternative a list of parts
    pos = 0
    for m in _TOKEN.finditer(template):
        if m.start() > pos:
            stack[-1][-1].append(template[pos:m.start()])
        tok = m.group()
        if tok.startswith("\\"):
            stack[-1][-1].append(tok[1])
        elif tok == "[":
            stack.append([[]])
        elif tok == "|":
            if len(stack) == 1:
                stack[-1][-1].append("|")  # a bar outside any choice is text
            else:
                stack[-1].append([])
        else:  # "]"
            if len(stack) == 1:
                raise GrammarError(f"stray ']' at {m.start()} in {template!r}")
            alts = stack.pop()
            stack[-1][-1].append(alts)
        pos = m.end()
    if len(stack) != 1:
        raise GrammarError(f"unclosed '[' in {template!r}")
    if pos < len(template):
        stack[0][-1].append(template[pos:])
    return stack[0][0]


def _render(parts: list, rng: random.Random) -> str:
    out = []
    for p in parts:
        if isinstance(p, str):
            out.append(p)
            continue
        if len(p) == 1 and len(p[0]) == 1 and isinstance(p[0][0], str) and p[0][0].startswith("@"):
            key = p[0][0][1:]
            if key not in SYNONYMS:
                raise GrammarError(f"unknown synonym set [@{key}]")
            out.append(rng.choice(SYNONYMS[key]))
            continue
        out.append(_render(rng.choice(p), rng))
    return "".join(out)


_SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(template: str, rng: random.Random, *, clause: bool = False, **slots: object) -> str:
    """One phrasing of `template` (see the module docstring), with `slots` filled in; runs of spaces the empty
    alternatives leave are folded and spaces before punctuation removed. The text is stripped and its first
    letter capitalised; a `clause` (text for the middle of a sentence) keeps its first letter and any leading
    space. A ``{name}`` without a value is an error, so that a typo never reaches a task as literal braces."""
    text = _render(_parse(template), rng)
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r" +([,.;:!?)])(?!\w)", r"\1", text)  # not before ".ics", ".md": a name, not a full stop
    text = text.rstrip() if clause else text.strip()

    def fill(m: re.Match) -> str:
        if m.group(1) not in slots:
            raise GrammarError(f"no value for slot {{{m.group(1)}}} in {template!r}")
        return str(slots[m.group(1)])

    text = _SLOT.sub(fill, text)
    return text[:1].upper() + text[1:] if not clause and text[:1].islower() else text


def one_of(rng: random.Random, templates: Sequence[str], **slots: object) -> str:
    """:func:`expand` of one template drawn from `templates`: for phrasings that differ in their structure
    (clause order, question or imperative), each itself with alternatives inside."""
    return expand(rng.choice(list(templates)), rng, **slots)


STYLES = ("sentence", "bullets", "numbered", "block")


def requirements(rng: random.Random, items: Sequence[str], *, lead: str = "", fixed_order: bool = False,
                 style: str | None = None) -> str:
    """Requirement clauses as people write them. `items` are clauses without final punctuation ("write dates as
    YYYY-MM-DD"); unless `fixed_order`, they are shuffled. `style` (drawn when None): ``sentence`` (joined with
    commas and "and"), ``bullets``, ``numbered`` or ``block`` ("Requirements:" and bullets). `lead` introduces
    them ("When you do it,"); a list style puts it on its own line."""
    items = [i.strip().rstrip(".") for i in items if i.strip()]
    if not items:
        return lead.strip()
    if not fixed_order:
        items = list(items)
        rng.shuffle(items)
    style = style or rng.choice(STYLES)
    if style not in STYLES:
        raise GrammarError(f"unknown requirements style {style!r}; one of {', '.join(STYLES)}")
    if style == "sentence" or len(items) == 1:
        body = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
        text = f"{lead.strip()} {body}".strip() + "."
        return text[:1].upper() + text[1:]
    if style == "bullets":
        head = lead.strip() or expand("[Some rules:|A few things:|Please make sure to:|What I need:|Mind that:|Keep in mind:|"
                                        "The details:|Conditions:]", rng)
        return head + "\n" + "\n".join(f"- {i}" for i in items)
    if style == "numbered":
        head = lead.strip() or expand("[Steps:|In detail:|Specifically:]", rng)
        return head + "\n" + "\n".join(f"{n}. {i}" for n, i in enumerate(items, start=1))
    head = expand("[Requirements|Rules|Constraints|Details]:", rng)
    pre = f"{lead.strip()}\n" if lead.strip() else ""
    return pre + head + "\n" + "\n".join(f"* {i}" for i in items)


class HalfChoices:
    """A view of a task's RNG whose every ``choice`` comes from one half of its options: the alternatives at
    even positions (half 0) or at odd positions (half 1), wherever there are at least two; everything else
    (numbers, shuffles, samples) is the RNG's own. Generators draw their phrasings, synonyms, schemas and names
    with ``choice`` (through :func:`expand`, :func:`one_of`, :func:`choose_names` or directly), so tasks made
    with half 0 and half 1 are worded from disjoint halves of the grammar: what the learning experiment's
    held-out-phrasing split (``synth persona --phrasing-half``) needs to test wording nobody trained on.

    It shares the RNG's state (draws advance the RNG it wraps), so a generator sees one stream either way."""

    def __init__(self, rng: random.Random, half: int):
        if half not in (0, 1):
            raise ValueError(f"phrasing half must be 0 or 1, not {half!r}")
        self._rng = rng
        self.half = half

    def choice(self, seq):  # noqa: ANN001 - any sequence, as random.Random.choice
        if len(seq) >= 2:
            try:
                seq = seq[self.half::2]
            except TypeError:  # a sequence without slicing
                seq = list(seq)[self.half::2]
        return self._rng.choice(seq)

    def __getattr__(self, name: str):
        return getattr(self._rng, name)


def choose_names(rng: random.Random, options: Mapping[str, Sequence[str]] | Sequence[str], domain: str = "") -> str:
    """A file or folder name drawn from `options`: a list, or a mapping from a domain key
    (:func:`clawgym.synth.flavor.domain_key`) to a list, with ``"general"`` as the fallback."""
    if isinstance(options, Mapping):
        pool = options.get(domain) or options["general"]
    else:
        pool = options
    return rng.choice(list(pool))
