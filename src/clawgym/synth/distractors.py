"""Distractor files: the other things a real workspace holds besides the files a task uses.

A persona's workspace used to hold exactly the task's files, so "every file here is an input" was a safe bet.
Real folders hold an older export, a note to self, an unrelated document. :func:`distractors` adds 1-3 such
files to a persona-route task (from :func:`clawgym.synth.compose.compose_task`), drawn from the task's seed and
the persona's world: their file stems and folders (:mod:`clawgym.synth.world`), their interests, tools,
projects and people. The request never mentions them.

Where they go. A distractor must not change what the request asks, so it never goes where a step treats a
folder as a whole ("sort every file in `scans/`", "a manifest of everything under `pipeline/`", a git
repository, a rename script's DIR): the folders of the steps of operations that declare ``folder_scoped`` (and
everything under them)
are off limits. It goes next to the input files of the other steps (the same folder), in a neighbouring
folder (``reports_old/``, ``reports/archive/`` where ``reports/`` is not off limits), in one of the persona's
own folders, or at the top level; its path collides with no path the task names, reads or writes.

How they are checked. :func:`kept_check` is one more named check, ``distractors_kept``: the distractors'
text unchanged (``docs_texts_equal``), gated by the task's own cheap checks (``gated``), so it is 0 on the
untouched workspace (validation requires every check to be 0 there) and for the trivial cheats, and 1 for
the reference, which never touches them. An agent that deletes or rewrites one loses that check: its score
drops below 1 and the task is not passed. (The task's score is the mean of its checks, which have no
weights; gating every check on the distractors would repeat their text in each check's arguments.)
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
import random
import re
from collections.abc import Iterable

from clawgym.checks.library import program_checks
from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor, world
from clawgym.synth.checks import Ref, docs_digest, named_checks
from clawgym.synth.ops import OPERATIONS, folder_scoped
from clawgym.synth.ops.base import Check, StepPlan, to_csv
from clawgym.synth.personas import Persona


def __getattr__(name: str) -> frozenset[str]:
    if name == "FOLDER_OPS":  # the operations that declare folder_scoped, as one set (computed when asked for)
        return frozenset(op for op, cls in OPERATIONS.items() if cls.folder_scoped)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_PATHISH = re.compile(r"[A-Za-z0-9_.<>-]+(?:/[A-Za-z0-9_. <>-]+)+|[A-Za-z0-9_-]+\.[A-Za-z0-9]{1,5}\b")

_OLD_SUFFIXES = ["old", "2024", "2025", "backup", "v1", "copy", "prev", "draft"]
_GENERIC_DIRS = ["archive", "old", "misc", "personal", "backup", "scratch", "notes", "to_read", "2025"]
_NEIGHBOUR = ["{d}_old", "{d}_archive", "old_{d}", "{d}_2025", "{d}_backup", "{d}/archive", "{d}/old"]


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _check_strings(checks: Iterable[Check]) -> Iterable[str]:
    for c in checks:
        yield from _strings(c.args)
        yield from _check_strings(c.parts)


def _mentioned(plan: StepPlan) -> set[str]:
    """Every path-like string a step names: its files, outputs, check arguments, reference and partial tool
    calls, its request fragment."""
    texts = [f.path for f in plan.files] + [a.path for a in plan.outputs] + [plan.instruction]
    texts += list(_check_strings(plan.checks))
    for call in list(plan.steps) + list(plan.partial) + list(plan.program):
        # a tool call (a plain mapping in a hand-written plan)
        texts += list(_strings(call.get("arguments", {}) if isinstance(call, dict) else call.arguments))
    out: set[str] = set()
    for t in set(texts):  # check arguments repeat the same strings (paths, rows) many times
        out.update(m.group().strip("./ ") for m in _PATHISH.finditer(t))
    return {p for p in out if p}


def _dirs_of(path: str) -> list[str]:
    """The folders above `path`, nearest first ("a/b/c.csv" -> "a/b", "a")."""
    out = []
    d = posixpath.dirname(path)
    while d:
        out.append(d)
        d = posixpath.dirname(d)
    return out


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


class _Layout:
    """What the task's paths allow: the folders off limits, the names taken, the folders fit for a
    distractor next to a task's input files."""

    def __init__(self, plans: list[StepPlan], instruction: str):
        self.taken: set[str] = set()
        self.blocked: set[str] = set()  # folders (with everything under them) no distractor may enter
        self.inputs: list[str] = []  # folders of the input files of the other steps, in order, once each
        every = {m.group().strip("./ ") for m in _PATHISH.finditer(instruction)}
        for plan in plans:
            named = _mentioned(plan)
            every |= named
            if folder_scoped(plan.operation):
                for p in named | {f.path for f in plan.files}:
                    # the path itself may be a folder (a repository, DIR); its folder is the one the step scans
                    self.blocked.add(p)
                    d = posixpath.dirname(p)
                    if d:
                        self.blocked.add(d)
        for plan in plans:
            if not folder_scoped(plan.operation):
                for f in plan.files:
                    d = posixpath.dirname(f.path)
                    if d and d not in self.inputs:
                        self.inputs.append(d)
        for p in every:
            self.taken.add(p.casefold())
            self.taken.update(d.casefold() for d in _dirs_of(p))

    def folder_ok(self, folder: str) -> bool:
        """Not in or under a folder a step treats as a whole."""
        return not any(_under(folder, b) for b in self.blocked)

    def path_ok(self, path: str) -> bool:
        """A name the task does not use (as a file or a folder), in a folder a distractor may enter."""
        return path.casefold() not in self.taken and self.folder_ok(posixpath.dirname(path) or ".")


# --------------------------------------------------------------------------------------------- contents


def _words(name: str) -> str:
    return re.sub(r"[_\-.]+", " ", name).strip()


def _old_export(rng: random.Random, persona: Persona) -> tuple[str, str]:
    """A CSV export of the persona's domain from last year: (a stem hint, text)."""
    voc = flavor.vocab(persona.domain, persona.occupation)
    header = rng.choice([["date", "item", "qty", "amount"], ["date", "category", "description", "amount"],
                         ["id", "name", "status", "updated"], ["month", "item", "total"]])
    rows = []
    n = rng.randint(3, 7)
    start = dt.date(rng.choice([2023, 2024, 2025]), rng.randint(1, 12), rng.randint(1, 28))
    for d in sorted(start + dt.timedelta(days=rng.randint(0, 300)) for _ in range(n)):
        row = {"date": d.isoformat(), "item": rng.choice(voc["items"]), "qty": str(rng.randint(1, 40)),
               "amount": f"{flavor.amount(rng, 3, 600):.2f}", "category": rng.choice(voc["categories"]),
               "description": f"{rng.choice(voc['items'])} ({rng.choice(flavor.ORG_WORDS)} "
                              f"{rng.choice(flavor.ORG_KINDS)})",
               "id": f"{rng.choice(['A', 'R', 'T', 'K'])}{rng.randint(100, 999)}", "name": flavor.person(rng),
               "status": rng.choice(["open", "done", "waiting", "closed"]), "updated": d.isoformat(),
               "month": d.strftime("%Y-%m"), "total": f"{flavor.amount(rng, 20, 2000):.2f}"}
        rows.append([row[h] for h in header])
    return "export", to_csv(header, rows)


def _note(rng: random.Random, persona: Persona) -> tuple[str, str]:
    """A note to self about something else: an interest, a project, people to call."""
    voc = flavor.vocab(persona.domain, persona.occupation)
    interest = rng.choice(persona.interests)
    project = rng.choice(voc["projects"])
    kind = rng.choice(["interest", "project", "calls", "ideas"])
    if kind == "interest":
        title = f"{interest[:1].upper()}{interest[1:]}"
        lines = [f"- {x}" for x in rng.sample([
            f"ask {rng.choice(flavor.FIRST)} about {rng.choice(['Saturday', 'next month', 'the trip', 'tickets'])}",
            f"budget: about {rng.randint(20, 300)} for {rng.choice(['gear', 'fees', 'travel', 'the weekend'])}",
            f"look up {rng.choice(['times', 'the club', 'a beginner guide', 'prices'])} in {persona.location}",
            f"{rng.choice(['book', 'sort out', 'check'])} {rng.choice(['the date', 'a spot', 'the schedule'])}",
            "don't forget the deposit"], k=3)]
        stem = _words(interest).casefold().replace(" ", "_")[:24] or "hobby"
    elif kind == "project":
        title = f"{project[:1].upper()}{project[1:]} - loose ends"
        lines = [f"- {x}" for x in rng.sample([
            f"{flavor.person(rng)} owes me the {rng.choice(voc['items'])} figures",
            f"chase {rng.choice(flavor.ORG_WORDS)} {rng.choice(flavor.ORG_KINDS)} about the invoice",
            f"move the {project} check-in to {rng.choice(['Tuesday', 'Thursday', 'next week'])}",
            f"try {rng.choice(persona.tools)} for this next time",
            f"{rng.randint(2, 9)} open questions from last meeting"], k=3)]
        stem = f"{flavor.slug(project)}_notes"
    elif kind == "calls":
        title = "Calls to make"
        people = flavor.people(rng, 3)
        lines = [f"- {p}: {rng.choice(['about ' + project, 'returning their call', 'the quote', 'dates'])}"
                 for p in people]
        stem = rng.choice(["calls", "call_list", "to_call"])
    else:
        title = rng.choice(["Ideas", "Someday", "Random thoughts", "Parking lot"])
        lines = [f"- {x}" for x in rng.sample([
            f"a better way to keep the {_words(rng.choice(world.stems(persona) or voc['items']))}",
            f"learn more {rng.choice(persona.tools)} shortcuts",
            f"more time for {rng.choice(persona.interests)}",
            f"one folder per {rng.choice(['year', 'client', 'month', 'project'])}?",
            f"ask {rng.choice(flavor.FIRST)} how they organise theirs"], k=3)]
        stem = rng.choice(["ideas", "someday", "thoughts", "parking_lot"])
    return stem, f"# {title}\n\n" + "\n".join(lines) + "\n"


def _memo(rng: random.Random, persona: Persona) -> tuple[str, str]:
    """A short unrelated plain-text document: a reminder, a readme of an old folder, a receipt."""
    voc = flavor.vocab(persona.domain, persona.occupation)
    d = dt.date(rng.choice([2024, 2025]), rng.randint(1, 12), rng.randint(1, 28))
    kind = rng.choice(["readme", "reminder", "receipt"])
    if kind == "readme":
        text = (f"Old files from {rng.choice(persona.tools)}, copied over on {d.isoformat()}.\n"
                f"Kept for reference only - {rng.choice(['nothing here is current', 'do not edit', 'superseded'])}."
                "\n")
        return rng.choice(["README", "readme_old", "about_this_folder"]), text
    if kind == "reminder":
        text = (f"Reminder: {rng.choice(['renew', 'cancel', 'check'])} the {rng.choice(voc['items'])} "
                f"{rng.choice(['order', 'subscription', 'contract'])} with {flavor.org(rng)} before "
                f"{d.strftime('%d %B')}.\n{flavor.person(rng)} has the account details.\n")
        return rng.choice(["reminder", "remember", "todo_later"]), text
    total = 0.0
    lines = []
    for item in rng.sample(voc["items"], k=3):
        v = flavor.amount(rng, 2, 120)
        total += v
        lines.append(f"{item:<20}{v:>9.2f}")
    text = f"{flavor.org(rng)}\n{d.isoformat()}\n\n" + "\n".join(lines) + f"\n{'TOTAL':<20}{total:>9.2f}\n"
    return f"receipt_{d.strftime('%Y%m%d')}", text


def _settings(rng: random.Random, persona: Persona) -> tuple[str, str]:
    """A small JSON file of some tool's settings or an old list."""
    data = {"owner": persona.name, "updated": f"{rng.choice([2024, 2025])}-{rng.randint(1, 12):02d}-"
                                              f"{rng.randint(1, 28):02d}",
            rng.choice(["favourites", "recent", "pinned"]): rng.sample(persona.tools, k=min(2, len(persona.tools))),
            "theme": rng.choice(["dark", "light", "system"])}
    return rng.choice(["prefs", "app_state", "view_state"]), json.dumps(data, indent=2, ensure_ascii=False) + "\n"


_MAKERS = [(_old_export, "csv"), (_note, "md"), (_memo, "txt"), (_settings, "json"), (_note, "md"),
           (_old_export, "csv")]


# --------------------------------------------------------------------------------------------- placement


def _name(rng: random.Random, persona: Persona, hint: str, ext: str) -> str:
    """A file name: for an export, one of the persona's own stems (or the hint) with an old-version suffix."""
    if ext == "csv":
        stems = [s for s in world.stems(persona) if s]
        base = rng.choice(stems) if stems and rng.random() < 0.7 else rng.choice(
            [hint, "export", "data", "list", "sheet"])
        return f"{base}_{rng.choice(_OLD_SUFFIXES)}.{ext}"
    return f"{hint}.{ext}"


def _folders(rng: random.Random, persona: Persona, layout: _Layout) -> list[str]:
    """Candidate folders for one distractor, best first: next to an input file, a neighbouring folder, one of
    the persona's own folders or a generic one, the top level."""
    out: list[str] = []
    how = rng.choice(["same", "same", "neighbour", "world", "generic", "top"])
    same = [d for d in layout.inputs if layout.folder_ok(d)]
    neighbours = [pat.format(d=d) for d in layout.inputs + [d for d in world.folders(persona)]
                  for pat in _NEIGHBOUR]
    own = world.folders(persona)
    if how == "same" and same:
        out.append(rng.choice(same))
    if how in ("same", "neighbour") and neighbours:
        out.append(rng.choice(neighbours))
    if how in ("same", "neighbour", "world") and own:
        out.append(rng.choice(own))
    out.append(rng.choice(_GENERIC_DIRS))
    if how == "top":
        out.insert(0, "")
    out.append("")
    return out


def distractors(persona: Persona, plans: list[StepPlan], instruction: str, rng: random.Random,
                n: int | None = None) -> list[WorkspaceFile]:
    """1-3 distractor files (`n` of them if given) for a task of `plans`, from `rng` and the persona's world;
    none where no place is free of the task's paths."""
    layout = _Layout(plans, instruction)
    n = n if n is not None else rng.choice([1, 1, 2, 2, 2, 3])
    out: list[WorkspaceFile] = []
    for _ in range(n):
        make, ext = rng.choice(_MAKERS)
        hint, text = make(rng, persona)
        name = _name(rng, persona, hint, ext)
        for folder in _folders(rng, persona, layout):
            path = f"{folder}/{name}" if folder else name
            if layout.path_ok(path) and all(path.casefold() != f.path.casefold() for f in out):
                out.append(WorkspaceFile(path=path, content=text))
                layout.taken.add(path.casefold())
                break
    return out


def kept_check(files: list[WorkspaceFile], plans: list[StepPlan], taken: Iterable[str]) -> tuple[str, Check] | None:
    """The check that the distractors are as they were: (a name no check of the task has, the check), or None
    without distractors. Gated by the task's own checks that run no program (or its first check), so it pays
    nothing on the untouched workspace, the partial or the cheats' states unless the task's work is there. The
    gate names those checks (refs: each is evaluated once, and the task does not hold a second copy of them) and
    compares the distractors' text by digest (docs_digests_equal: the text is in the workspace already)."""
    if not files:
        return None
    checks = named_checks(plans)
    cheap = [(n, c) for n, c in checks if not _runs_program(c)] or checks[:1]
    name = "distractors_kept"
    taken = set(taken)
    k = 2
    while name in taken:
        name = f"distractors_kept_{k}"
        k += 1
    gate = Check("untouched", "docs_digests_equal", {"digests": {f.path: docs_digest(f.content or "")
                                                                 for f in files}})
    return name, Check(name, "gated", parts=[gate] + [Ref(n) for n, _ in cheap])


def _runs_program(c: Check) -> bool:
    """`c` (or a part of it) calls a check function that runs a program (@check(runs_program=True))."""
    return c.fn in program_checks() or any(_runs_program(p) for p in c.parts)
