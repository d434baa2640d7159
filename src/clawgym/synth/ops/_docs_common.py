"""Helpers shared by the `docs` generators (documents, mail, calendars, contacts, plans, notes, trackers).

Not an operation module (the registry skips names starting with "_").
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import re
from email.header import Header
from email.utils import format_datetime, formataddr, parseaddr
from typing import Any

from clawgym.synth import flavor
from clawgym.synth.calendar_words import MONTHS, WORKDAYS
from clawgym.synth.ops.base import Artifact
from clawgym.synth.personas import Persona


def digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def md_table(header: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def persona_email(persona: Persona) -> str:
    words = [w for w in flavor.slug(persona.domain).split("_") if w] or ["mail"]
    dom = words[0] if len(words[0]) >= 5 or len(words) == 1 else words[0] + words[1]
    return flavor.email_of(persona.name, f"{dom[:16]}.example.com")


def email_addr(name: str, org: str) -> str:
    return flavor.email_of(name, flavor.slug(org).replace("_", "") + ".example.com")


def _hdr_addr(value: str) -> str:
    name, addr = parseaddr(value)
    return formataddr((name, addr)) if name else addr


def eml_text(sender: str, to: list[str] | str, subject: str, body: str, date: dt.datetime | None = None,
             cc: list[str] | None = None) -> str:
    """A plain-text email as a person would type it: a few headers, a blank line, an 8-bit UTF-8 body (header
    values with non-ASCII text are RFC 2047 encoded)."""
    to = [to] if isinstance(to, str) else to
    lines = [f"From: {_hdr_addr(sender)}", "To: " + ", ".join(_hdr_addr(a) for a in to)]
    if cc:
        lines.append("Cc: " + ", ".join(_hdr_addr(a) for a in cc))
    subj = subject if subject.isascii() else Header(subject, "utf-8").encode()
    lines.append(f"Subject: {subj}")
    if date is not None:
        lines.append("Date: " + format_datetime(date.replace(tzinfo=dt.timezone.utc) if date.tzinfo is None else date))
    lines += ["MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: 8bit"]
    return "\n".join(lines) + "\n\n" + body.rstrip("\n") + "\n"


def ics_stamp(d: dt.datetime) -> str:
    return d.strftime("%Y%m%dT%H%M%S")


def ics_text(events: list[dict], calname: str | None = None) -> str:
    """A VCALENDAR with floating local times: events are {summary, start, end (datetime or date), location?,
    attendees?, uid?}."""
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//assistant//plan//EN", "CALSCALE:GREGORIAN"]
    if calname:
        lines.append(f"X-WR-CALNAME:{calname}")
    for i, e in enumerate(events):
        start, end = e["start"], e["end"]
        uid = e.get("uid") or f"{digest(e['summary'], str(start), i)}@assistant"
        lines += ["BEGIN:VEVENT", f"UID:{uid}"]
        if isinstance(start, dt.datetime):
            lines += [f"DTSTAMP:{ics_stamp(start)}Z", f"DTSTART:{ics_stamp(start)}", f"DTEND:{ics_stamp(end)}"]
        else:
            lines += [f"DTSTAMP:{start.strftime('%Y%m%d')}T000000Z", f"DTSTART;VALUE=DATE:{start.strftime('%Y%m%d')}",
                      f"DTEND;VALUE=DATE:{end.strftime('%Y%m%d')}"]
        lines.append("SUMMARY:" + e["summary"].replace(",", "\\,").replace(";", "\\;"))
        if e.get("location"):
            lines.append("LOCATION:" + e["location"].replace(",", "\\,").replace(";", "\\;"))
        for a in e.get("attendees") or []:
            lines.append(f"ATTENDEE:mailto:{a}")
        lines.append("END:VEVENT")
    lines.append("END:VCALENDAR")
    return "\r\n".join(lines) + "\r\n"


def long_date(d: dt.date) -> str:
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def human_date(rng: random.Random, d: dt.date, with_year: bool = True) -> str:
    """The date as people write it in notes and mails."""
    opts = [f"{d.strftime('%A')} {d.day} {MONTHS[d.month - 1]}", f"{MONTHS[d.month - 1]} {d.day}",
            f"{d.day} {MONTHS[d.month - 1][:3]}", f"{d.strftime('%a')} {d.day:02d}/{d.month:02d}"]
    if with_year:
        opts += [f"{d.day} {MONTHS[d.month - 1]} {d.year}", d.isoformat(), f"{MONTHS[d.month - 1]} {d.day}, {d.year}"]
    return rng.choice(opts)


def dated(rng: random.Random, d: dt.date) -> str:
    """The date as people write it, always with the year."""
    return rng.choice([f"{d.strftime('%A')} {d.day} {MONTHS[d.month - 1]} {d.year}", f"{d.day} {MONTHS[d.month - 1]} {d.year}",
                       d.isoformat(), f"{MONTHS[d.month - 1]} {d.day}, {d.year}", f"{d.strftime('%a')} {d.day:02d}/{d.month:02d}/{d.year}"])


def add_workdays(d: dt.date, n: int, holidays: frozenset[dt.date] | set[dt.date] = frozenset()) -> dt.date:
    """The date n working days after d (n=0: d itself, moved forward to a working day)."""
    while d.weekday() >= 5 or d in holidays:
        d += dt.timedelta(days=1)
    while n > 0:
        d += dt.timedelta(days=1)
        if d.weekday() < 5 and d not in holidays:
            n -= 1
    return d


def next_weekday(d: dt.date) -> dt.date:
    while d.weekday() >= 5:
        d += dt.timedelta(days=1)
    return d


def words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def role_col(source: Artifact, role: str, header: list[str]) -> int | None:
    """Index of the column that plays `role` in a table artifact, or None."""
    name = source.roles.get(role)
    if name is None:
        return None
    low = [h.casefold() for h in header]
    return low.index(name.casefold()) if name.casefold() in low else None


def numeric_col(header: list[str], rows: list[list], prefer: int | None = None) -> int | None:
    if prefer is not None:
        return prefer
    for i in range(len(header)):
        vals = [r[i] for r in rows if i < len(r) and str(r[i]).strip()]
        if vals and all(re.fullmatch(r"-?\d+(\.\d+)?", str(v).strip()) for v in vals):
            if not all(re.fullmatch(r"\d{4}", str(v).strip()) for v in vals):
                return i
    return None


def date_col(header: list[str], rows: list[list], prefer: int | None = None) -> int | None:
    if prefer is not None:
        return prefer
    for i in range(len(header)):
        vals = [str(r[i]).strip() for r in rows if i < len(r)]
        if vals and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", v) for v in vals):
            return i
    return None


def text_col(header: list[str], rows: list[list], prefer: int | None = None, avoid: tuple = ()) -> int | None:
    """A column of short words/names (not numbers, not dates)."""
    if prefer is not None:
        return prefer
    for i in range(len(header)):
        if i in avoid:
            continue
        vals = [str(r[i]).strip() for r in rows if i < len(r)]
        if vals and all(v and re.search(r"[A-Za-z]", v) and len(v) <= 60 and "\n" not in v for v in vals):
            return i
    return None


def table_of(source: Artifact) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a table or records artifact (records: the union of keys, in first-seen order)."""
    if isinstance(source.data, dict) and "header" in source.data:
        header = [str(h) for h in source.data["header"]]
        rows = [["" if c is None else str(c) for c in r] for r in source.data["rows"]]
        return header, rows
    recs = [r for r in (source.data or []) if isinstance(r, dict)]
    header: list[str] = []
    for r in recs:
        for k in r:
            if k not in header:
                header.append(str(k))
    rows = [[_cell(r.get(h)) for h in header] for r in recs]
    return header, rows


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    return str(v)


def fmt_money(v: float) -> str:
    return f"{v:.2f}"


def pick_name(rng: random.Random, exclude: tuple[str, ...] = ()) -> str:
    while True:
        p = flavor.person(rng)
        if p not in exclude:
            return p


# ------------------------------------------------------------------------------------------ variety (issue #20)
# Names and small phrasings shared by the docs generators, so that their requests, files and folders differ from
# task to task: workspace names mix the persona's own world (synth/world.py) with each operation's own pools.

_UNSAFE = re.compile(r"[^a-z0-9_./-]+")


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name.strip().lower()).strip("_./") or "files"


def wfolder(ctx, fallback, p_world: float = 0.5) -> str:
    """A lower-case folder name: the persona's own (see world.py) or one of `fallback`."""
    from clawgym.synth import world

    return _safe(world.folder(ctx.persona, ctx.rng, list(fallback), p_world))


def wpath(ctx, stems, ext: str, folders=(), p_folder: float = 0.6, p_world_folder: float = 0.45,
          p_world_stem: float = 0.0, suffix: str = "") -> str:
    """A unique lower-case workspace path `[folder/]stem[suffix].ext`: the stem from `stems` (or, with
    `p_world_stem`, one of the persona's own file stems), the folder (with probability `p_folder`) from the
    persona's folders or `folders`. Always draws the same number of random values."""
    from clawgym.synth import world

    rng = ctx.rng
    stem = _safe(world.stem(ctx.persona, rng, list(stems), p_world_stem)) + suffix
    folder = wfolder(ctx, list(folders) or ["docs"], p_world_folder)
    use_folder = rng.random() < p_folder
    name = f"{stem}.{ext}" if ext else stem
    return ctx.path(f"{folder}/{name}" if use_folder else name)


WEEKDAYS = WORKDAYS


def aside(rng: random.Random, persona: Persona | None = None) -> str:
    """A by-the-way sentence a person adds to a request (a deadline, a reason, a place) that changes nothing the
    checks look at; "" about a third of the time."""
    if rng.random() < 0.35:
        return ""
    from clawgym.synth.grammar import one_of

    city = persona.location.split(",")[0].strip() if persona is not None and persona.location else rng.choice(
        flavor.CITIES)
    return one_of(rng, [
        "[No rush, but|Ideally] I'd like [this|it] [done|sorted] [before|by] {day}[ {time}|].",
        "I'm [travelling|out of the office|in meetings] [on {day}|until {day}|most of {day}], so [this|it] "
        "[would really help|saves me an evening|is a big help].",
        "[For context|Background]: [this goes to|I need it for] [the {day} meeting|a call with {name} on {day}|"
        "{name}, who asked on {day}].",
        "{name} [will read|is going to look at|reviews] [it|the result] [after me|on {day}|before it goes out].",
        "[I'll be|I'm] [working from|back in] {city} [on {day}|from {day}|this week][, in case that matters|].",
        "[Thanks in advance|Many thanks|Cheers] - [this has been on my list since {day}|I've put it off since "
        "{day}|{n} other things are waiting].",
        "[Afterwards|Later] I'll [check it|go over it|paste bits of it] in {tool}[, so plain files are best|].",
        "[My|Our] {day} [stand-up|check-in|call] [with {first}|] [depends on it|is where it gets used].",
        "[If anything looks off|If something doesn't add up], [tell me in your answer|say so when you reply] "
        "rather than [guessing|inventing a value].",
        "[It's|This is] [all |][for|part of] the {topic} [work|side of things|job][, roughly|, more or less|].",
    ], day=rng.choice(WEEKDAYS), time=rng.choice(["noon", "10am", "3pm", "end of day", "lunchtime"]),
        name=flavor.person(rng), city=city, n=rng.randint(3, 12),
        tool=rng.choice(list(persona.tools)) if persona is not None and persona.tools else "my notes app",
        first=flavor.person(rng).split()[0],
        topic=rng.choice(_topics(persona)))


def _topics(persona: Persona | None) -> list[str]:
    from clawgym.synth.ops import _files_vocab

    return _files_vocab.topics(persona) if persona is not None else _files_vocab.TOPICS["general"]


def join(*parts: str) -> str:
    """Sentences joined with one space (a new line after a part that ends in a list), the empty ones left out."""
    out = ""
    for p in parts:
        p = (p or "").strip()
        if not p:
            continue
        last = out.rsplit("\n", 1)[-1]
        sep = "\n" if re.match(r"(- |\* |\d+\. )", last) else " "
        out = p if not out else out + sep + p
    return out


def clause(rng: random.Random, template: str, **slots: Any) -> str:
    """A requirement clause: :func:`grammar.expand` without its capital first letter."""
    from clawgym.synth.grammar import expand

    text = expand(template, rng, **slots)
    return text[:1].lower() + text[1:] if text[:1].isupper() and not text[1:2].isupper() else text


def reqs(rng: random.Random, items: list[str], lead: str = "", fixed_order: bool = False) -> str:
    """:func:`grammar.requirements` where a lead that ends a sentence part keeps its own case, and a lead is never
    followed by a second heading (no "block" style with a lead)."""
    from clawgym.synth.grammar import requirements

    style = rng.choice(["sentence", "bullets", "numbered"] if lead else ["sentence", "bullets", "numbered", "block"])
    text = requirements(rng, items, lead=lead, fixed_order=fixed_order, style=style)
    if lead and lead[:1].islower():
        text = lead[:1] + text[1:]
    return text


def short_slug(text: str, words: int = 2) -> str:
    """The first `words` words of `text` as a file-name part."""
    return "_".join([w for w in flavor.slug(text).split("_") if w][:words]) or "item"


def phrase(rng: random.Random, templates: list[str], **slots: Any) -> str:
    """:func:`grammar.one_of` for a clause inside a sentence or list: lower-case first letter, unless the text
    starts with a slot's value (a name, a path)."""
    from clawgym.synth.grammar import one_of

    text = one_of(rng, templates, **slots)
    if any(str(v) and text.startswith(str(v)) for v in slots.values()):
        return text
    if text[1:2].isupper() or re.match(r"I\b", text):  # an acronym ("JSON ..."), the pronoun I
        return text
    return text[:1].lower() + text[1:]
