"""Shared vocabulary of the file-housekeeping operations (batch_rename, deduplicate_files, organize_files,
inventory_and_archive, analyze_logs, audit_environment): per-domain topics for file names, folder names from
the persona's world mixed with operation-specific ones, and small phrasing pieces (why the persona wants it,
when, a distractor remark) drawn through the grammar, so that two requests of one operation rarely share a
sentence. Every choice goes through the caller's RNG (the same seed gives the same text)."""

from __future__ import annotations

import random

from clawgym.synth import flavor, world
from clawgym.synth.calendar_words import WEEKDAYS
from clawgym.synth.grammar import expand, requirements
from clawgym.synth.personas import Persona

# Folder names a later step, or this step's own outputs, may write into: never used as a step's working folder.
_AVOID = {"reports", "report", "audit", "logs", "log", "archive", "out", "output", "outputs", "tmp", "src", "tests",
          "test", "scripts", "config", "configs", "var", "etc", "systemd", "crontabs", "build", "dist", "data"}

# More file topics per domain than flavor's few projects (slugs for names; text for titles).
TOPICS: dict[str, list[str]] = {
    "health": ["shift handover", "ward rota", "infection control", "stock count", "patient leaflet", "cpd log",
               "audit prep", "clinic schedule", "discharge checklist", "fridge temperatures", "training matrix",
               "incident review", "supply order", "on-call list", "vaccine stock"],
    "education": ["lesson plan", "reading list", "term plan", "parent letter", "field trip", "exam timetable",
                  "marking scheme", "seating plan", "club roster", "science fair", "report comments",
                  "homework tracker", "staff meeting", "curriculum map", "library order"],
    "food": ["menu", "prep list", "supplier prices", "allergen matrix", "staff rota", "catering quote",
             "stock take", "recipe costing", "cleaning schedule", "delivery slots", "wine list", "event booking",
             "waste log", "temperature log", "summer festival"],
    "software": ["release notes", "oncall handbook", "api migration", "incident review", "sprint plan",
                 "cost review", "runbook", "architecture notes", "retro", "roadmap", "vendor eval",
                 "access review", "backlog", "postmortem", "load test"],
    "finance": ["quarter close", "vat return", "budget review", "bank rec", "expense policy", "payroll",
                "vendor audit", "cash forecast", "board pack", "tax filing", "invoice run", "fixed assets",
                "audit trail", "accruals", "client fees"],
    "farm": ["herd record", "feed plan", "spring planting", "harvest plan", "vet visits", "milk yield",
             "field map", "spray diary", "fuel log", "market stall", "barn repair", "seed order", "rainfall",
             "machinery service", "grazing plan"],
    "creative": ["shot list", "portfolio", "client brief", "mood board", "gallery show", "album release",
                 "edit notes", "model release", "print order", "pricing sheet", "storyboard", "setlist",
                 "press kit", "gear list", "commission log"],
    "legal": ["case notes", "contract review", "client intake", "discovery", "filing deadlines", "engagement letter",
              "witness list", "billing notes", "conflict check", "court dates", "research memo", "nda draft",
              "exhibit list", "settlement terms", "precedents"],
    "general": ["meeting notes", "budget", "todo", "office move", "team offsite", "website refresh",
                "quarterly review", "travel plan", "supplier list", "newsletter", "checklist", "contacts",
                "renovation", "insurance", "subscriptions"],
}


domain = flavor.persona_domain


def topics(persona: Persona) -> list[str]:
    """File topics for this persona: the domain's pool plus flavor's projects and categories."""
    voc = flavor.vocab(persona.domain, persona.occupation)
    out = list(TOPICS[domain(persona)])
    for t in voc["projects"] + voc["categories"]:
        if t.casefold() not in out:
            out.append(t.casefold())
    return out


def folder_name(persona: Persona, rng: random.Random, fallback: list[str], p_world: float = 0.45) -> str:
    """A working folder: one of the persona's own (not one outputs or later steps write into) or a fallback."""
    name = world.folder(persona, rng, fallback, p_world=p_world)
    if name.casefold() in _AVOID or not name:
        name = fallback[min(int(rng.random() * len(fallback)), len(fallback) - 1)]
    return name


def tool(persona: Persona, rng: random.Random) -> str:
    return rng.choice(list(persona.tools))




def when(rng: random.Random) -> str:
    """A time remark (may be empty)."""
    return expand("[before {day}|by {day}|ahead of {day}'s [meeting|call|review]|before the end of the week|"
                  "this [afternoon|evening|morning]|when you get a [minute|moment]|today if you can|]",
                  rng, day=rng.choice(WEEKDAYS))


def aside(persona: Persona, rng: random.Random, thing: str) -> str:
    """A persona-grounded distractor sentence about `thing` (the folder or file) that changes nothing."""
    t = tool(persona, rng)
    who = flavor.person(rng).split()[0]
    return expand(rng.choice([
        "[I'll|I will|I'm going to] [open|load|sync] {thing} [in|with|from] {tool} [afterwards|later|once you're done].",
        "{who} [keeps asking|asked [me|again]] [where things are in|why it's such a mess in|for a copy of] {thing}.",
        "[It's|This has] been [bugging me|on my list|on my to-do list] for [weeks|a month|ages|a while].",
        "[No rush on|Don't worry about] anything [else|outside {thing}] [for now|today].",
        "[For context|FYI|Background]: {thing} [gets synced|is backed up|is shared] [to|with] {who} [weekly|nightly|"
        "every Friday].",
        "[I|We] [mostly|usually] [work|live] in {tool}, [so|which is why] {thing} [got|ended up] like this.",
        "{who} [will|might] [look at|check] {thing} [afterwards|on Monday][, so keep it tidy|].",
        "",
    ]), rng, thing=thing, tool=t, who=who)


def paths_rel(rng: random.Random) -> str:
    return phrase("[paths relative to the workspace root|workspace-relative paths|paths from the top of the "
                  "workspace|relative paths (from the workspace root)]", rng)


def phrase(template: str, rng: random.Random, **slots: object) -> str:
    """:func:`expand` of a clause inside a sentence (first letter and leading space kept)."""
    return expand(template, rng, clause=True, **slots)


def one_phrase(rng: random.Random, templates: list[str], **slots: object) -> str:
    return phrase(rng.choice(templates), rng, **slots)


def requirements_text(rng: random.Random, items: list[str], leads: str = "", fixed_order: bool = False) -> str:
    """The clauses as a sentence or a list, with a lead drawn from the grammar alternatives `leads` (a list
    with a lead of its own is never also given a "Requirements:" heading)."""
    lead = expand(leads, rng) if leads else ""
    style = rng.choice(["sentence", "bullets", "numbered"]) if lead else None
    return requirements(rng, items, lead=lead, style=style, fixed_order=fixed_order)


def glue(*parts: str) -> str:
    """Sentences and requirement blocks joined: a block (with line breaks) on its own lines."""
    out = ""
    block = False
    for p in parts:
        p = p.strip()
        if not p:
            continue
        if out:
            out += "\n" if block or "\n" in p else " "
        out += p
        block = "\n" in p
    return out


def timing(rng: random.Random) -> str:
    """A sentence about when (often empty)."""
    return expand(rng.choice(["", "", "[Ideally|If possible|Hopefully] {w}.", "[No rush, but|Would be great to have "
                              "it] {w}.", "[Need|Want] this {w}[, thanks|]."]), rng, w=rng.choice(
        [f"before {rng.choice(WEEKDAYS)}", f"by {rng.choice(WEEKDAYS)}", "before the end of the week",
         "this afternoon", "today", "before the weekend", "before the accountant visits", "by tomorrow"]))


def date_text(rng: random.Random, d) -> str:
    """A date as the request writes it: ISO, or a spelled-out form with the ISO in brackets."""
    return rng.choice([d.isoformat(), d.isoformat(), f"{d.day} {d:%B %Y} ({d.isoformat()})",
                       f"{d:%B} {d.day}, {d.year} ({d.isoformat()})"])


def day_text(rng: random.Random, d) -> str:
    """A day as people mention it in passing."""
    return rng.choice([d.strftime("%B %d"), f"{d.day} {d:%B}", d.isoformat(), f"{d:%A} {d.day} {d:%B}",
                       f"{d:%a %d %b}"])


def listing(items: list[str]) -> str:
    items = [i for i in items if i]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def contents_hint(rng: random.Random, thing: str, subjects: list[str], n: int) -> str:
    """A sentence about what is in `thing` (subjects: a few topics of its files; n: how many files)."""
    subj = listing([s.replace("_", " ") for s in subjects[:3]])
    return expand(rng.choice([
        "[There are|I count|It has] {n} files in {thing}, [mostly|mainly|largely] {subj}.",
        "[It's mostly|Mostly|Inside:] {subj} [stuff|files|documents|paperwork][ - {n} files in all| ({n} files)|].",
        "{thing} [holds|has] {n} files[ (about {subj})|; {subj}, that kind of thing|].",
        "[The files are about|Topics in there:|What's in it:] {subj}.",
        "",
    ]), rng, n=n, thing=thing, subj=subj)


# Why the persona wants it now, per operation, around one of their own topics ({topic}) and people ({who}).
STORIES: dict[str, list[str]] = {
    "dedup": [
        "[Our|The] {topic} [deadline|review] is [next week|on {day}] and I [can't|couldn't] find the right version "
        "of anything.",
        "{who} [sent me|opened] the wrong copy of the {topic} [notes|file] [twice|again|last week].",
        "[The disk|My drive|The share] is [almost full|at 95%|nearly out of space] and half of it is copies.",
        "[After|Since] the {topic} [merge|handover|migration] [everything|every document] seems to exist twice.",
        "I [want|need] one clean copy of each document before I [send|share] the {topic} folder to {who}.",
        "[Every time|Whenever] {who} and I [both edit|work on] the {topic} [papers|documents], {tool} [leaves|"
        "makes] [another|a fresh] copy.",
        "[Searching|A search] for \"{topic}\" [returns|brings up] [five|six|a dozen] hits [and|but] [they're|"
        "it's] [mostly|all] the same file.",
    ],
    "organize": [
        "I can never find the {topic} [stuff|files] when {who} [asks|calls].",
        "[Everything|All of it] [lands|ends up] [in one place|in the same folder] [from|via] my phone and the "
        "scanner.",
        "[The|Our] {topic} [review|audit|catch-up] is on {day} and I [need|want] to find things fast.",
        "[I've been|I keep] [saving|dumping] everything [there|in one place] since [the spring|January|the "
        "{topic} started].",
        "{tool} [exports|saves] [straight|everything] into [that one folder|the same place], and I [never|"
        "rarely] [move|file] [anything|things] [afterwards|by hand].",
        "{who} [takes over|covers] the {topic} [stuff|work] [next week|on {day}] and [needs|has] to find "
        "[things|files] without [asking me|calling me].",
    ],
    "rename": [
        "{who} [needs|wants] them [for the|before the] {topic} [review|close|audit] and [can't|couldn't] tell "
        "them apart.",
        "[The|My] {tool} import [sorts|matches] files by name, so the names [matter|have to be right].",
        "[Half of them|Most of them] came [from the scanner|off my phone|by email] with [useless|random] names.",
        "[I'm|We're] [handing|sending] the {topic} paperwork to {who} on {day}.",
        "[Searching|Sorting] [by name|in {tool}] [is useless|doesn't work] [when|because] [every file|half the "
        "files] [is called|are called] something like scan_0042.",
        "[The|Our] {topic} [filing|archive] [rules|convention] changed [this year|in {day}'s meeting] and [the "
        "old files|these] [don't match|never got renamed].",
    ],
    "archive": [
        "[The share|The folder|This drive] is [getting slow|too big|nearly full] and most of it is [old|from "
        "last year].",
        "[The|Our] {topic} [audit|review|handover] is on {day} and {who} wants a list of what's there.",
        "[I'm|We're] [moving to|switching to] {tool} [next month|soon] and [want|need] a clean inventory first.",
        "Nobody has touched [half of|most of] these since the {topic} [wrapped up|ended|finished].",
        "[Backups|The nightly backup] [take|takes] [forever|hours] because of [the old {topic} files|years of "
        "{topic} stuff] nobody opens.",
        "{who} [asked|wants to know] [what we actually keep|what's in there] [before|ahead of] the {topic} "
        "[review|audit] on {day}.",
    ],
    "logs": [
        "{who} [called|messaged me] about it [twice|this morning|at lunch].",
        "[It|This] [happened|started] [right in the middle of|during] the {topic} [rush|run|work].",
        "[I need|I want] [numbers|facts] before I [talk to|email] {who} about it.",
        "[It's|This is] the [second|third] time this [month|week].",
    ],
    "audit": [
        "{who} [set it up|installed it] [years ago|a while back] and nobody has looked since.",
        "[The insurer|Our IT contractor|The auditor|{who}] [asked|wants to know] whether it [meets|follows] our "
        "policy.",
        "It [holds|stores] the {topic} [files|records|data], so I [want|need] it [locked down|safe].",
        "[We|I] [had|nearly had] a [scare|break-in attempt|weird login] [last month|recently].",
    ],
}


def story(persona: Persona, rng: random.Random, op: str, p: float = 0.75) -> str:
    """With probability `p`, a sentence of why, grounded in the persona's topics, tools and people."""
    if rng.random() >= p:
        return ""
    return expand(rng.choice(STORIES[op]), rng, topic=rng.choice(topics(persona)), who=flavor.person(rng).split()[0],
                  tool=tool(persona, rng), day=rng.choice(WEEKDAYS))


def mention(persona: Persona, rng: random.Random, path: str, p: float = 0.5) -> str:
    """With probability `p`, a passing remark naming one of the files (it changes nothing in the task)."""
    if rng.random() >= p:
        return ""
    return expand(rng.choice([
        "[For example|E.g.|Among them:|One of them is] `{f}`.",
        "I know `{f}` is in there [somewhere|too].",
        "`{f}` is the one {who} [keeps asking about|mentioned|needs most].",
        "[I last opened|Last thing I touched was] `{f}`[, I think| a while ago|].",
        "[Careful|Heads-up]: [names like|files like] `{f}` [are typical|are what's in there].",
    ]), rng, f=path, who=flavor.person(rng).split()[0])
