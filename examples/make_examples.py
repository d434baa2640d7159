"""Build the demo's example tasks and write them to examples/tasks.jsonl.

    python examples/make_examples.py            # writes examples/tasks.jsonl
    python examples/make_examples.py -o out.jsonl

Eight tasks of the kind a persona asks a Claw-style personal agent, one or two per ClawGym-Bench category,
each built on different workspace generators. Every task carries:

* a `grade(transcript, workspace_path)` check (or, for one task, a shell check) returning named partial-credit
  scores that are 0 for an untouched workspace and 1 for the right outputs;
* a reference solution made of the agent's own tool calls. The contents it writes are computed here from the
  very data put in the workspace, so they are right by construction; `make demo` replays them (the `oracle`
  baseline) next to the `noop` baseline to show that each verifier separates doing the task from doing nothing.

The output is deterministic: rerunning the script gives the identical file (tests/test_examples.py checks it).
Nothing here reads the clock or depends on hash order.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import random
import sys
from collections import Counter, defaultdict
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import yaml

from clawgym.core.jsonl import write_records
from clawgym.core.records import (
    CodeCheck,
    GeneratedContent,
    ReferenceSolution,
    Rubric,
    RubricRule,
    Task,
    ToolCall,
    VerifierSpec,
    WorkspaceFile,
    WorkspaceSpec,
)

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "tasks.jsonl"
SOURCE = "example"

# --------------------------------------------------------------------------------------------- helpers


def gen(path: str, kind: str, **params: Any) -> WorkspaceFile:
    return WorkspaceFile(path=path, generate=GeneratedContent(kind=kind, params=params))


def text(path: str, content: str, mode: int | None = None) -> WorkspaceFile:
    return WorkspaceFile(path=path, content=content, mode=mode)


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def csv_text(header: list[str], rows: list[list[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def money(value: Decimal) -> str:
    return str(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


# Shared by every python grader: safe file reading and a runner that turns any exception into a 0.
GRADER_PRELUDE = '''\
import csv
import io
import json
import os
import re


def _text(ws, rel):
    """The UTF-8 text of a workspace file, or None when it is missing or unreadable."""
    try:
        with open(os.path.join(ws, rel), encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _json(ws, rel):
    raw = _text(ws, rel)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _csv_rows(ws, rel):
    raw = _text(ws, rel)
    if raw is None:
        return None
    return [row for row in csv.reader(io.StringIO(raw)) if any(cell.strip() for cell in row)]


def _num(value):
    try:
        return float(str(value).replace(",", "").replace("$", "").strip())
    except (TypeError, ValueError):
        return None


def _run(ws, checks):
    """{name: score in [0, 1]}: a check that raises scores 0, so a missing or garbled file never crashes."""
    scores = {}
    for name, fn in checks:
        try:
            scores[name] = max(0.0, min(1.0, float(fn(ws))))
        except Exception:
            scores[name] = 0.0
    return scores

'''


def grader(expected: Any, body: str) -> str:
    """A grader source: the shared prelude, the task's expected values as JSON, then its checks."""
    literal = json.dumps(json.dumps(expected, sort_keys=True, ensure_ascii=False), ensure_ascii=False)
    return GRADER_PRELUDE + f"EXPECTED = json.loads({literal})\n\n" + body.strip() + "\n"


def python_check(expected: Any, body: str) -> CodeCheck:
    return CodeCheck(kind="python", source=grader(expected, body), timeout_seconds=60)


# ============================================================================================ 1. expenses

EXPENSE_HEADER = ["Date", "Merchant", "Category", "Amount"]
EXPENSE_ROWS: list[list[str]] = [
    ["2025-01-03", "Figma", "Software", "15.00"],
    ["01/06/2025", "Delta Air Lines", "Travel", "$412.60"],
    ["Jan 9, 2025", "Blue Bottle Coffee", "Meals", "8.75"],
    ["2025-01-09", "WeWork", "coworking", "$350.00"],
    [],
    ["01/14/2025", "Adobe", "software ", "54.99"],
    ["2025-01-14", " Adobe", "Software", "54.99"],
    ["Jan 22, 2025", "Staples", "Office", "$1,204.30"],
    ["2025-01-28", "Uber", "TRAVEL", "23.40"],
    ["", "", "", ""],
    ["02/03/2025", "Figma", "Software", "15.00"],
    ["Feb 5, 2025", "Hilton Garden Inn", "Travel", "$389.00"],
    ["2025-02-05", "Chipotle", "meals", "12.85"],
    ["2025-02-05", "Chipotle", "meals", "12.85"],
    ["02/11/2025", "WeWork", "Coworking", "350.00"],
    ["Feb 19, 2025", "Notion", "Software", "10.00"],
    ["2025-02-24", "Amtrak", "Travel", "$96.00"],
    ["03/03/2025", "Figma", "Software", "15.00"],
    ["2025-03-07", "Sweetgreen", "Meals", "14.20"],
    ["Mar 10, 2025", "WeWork", "Coworking", "$350.00"],
    ["03/10/2025", "WeWork", "coworking", "350"],
    ["2025-03-18", "Staples", "office", "46.12"],
    ["Mar 21, 2025", "Blue Bottle Coffee", "Meals", "6.50"],
    [],
    ["2025-03-27", "Lyft", "Travel", "31.75"],
]


def _norm_date(value: str) -> str:
    value = value.strip()
    for fmt in ("%Y-%m-%d", "%m/%d/%Y", "%b %d, %Y"):
        try:
            return dt.datetime.strptime(value, fmt).date().isoformat()
        except ValueError:
            continue
    raise ValueError(f"unparseable date {value!r}")


def expense_outputs() -> tuple[list[list[str]], list[list[str]]]:
    """(clean rows, summary rows) exactly as the instruction defines them."""
    seen: set[tuple[str, str, str, str]] = set()
    clean: list[tuple[str, str, str, str]] = []
    for row in EXPENSE_ROWS:
        if not any(cell.strip() for cell in row):
            continue
        date, merchant, category, amount = row
        rec = (
            _norm_date(date), merchant.strip(), category.strip().lower(),
            money(Decimal(amount.replace("$", "").replace(",", "").strip())),
        )
        if rec in seen:
            continue
        seen.add(rec)
        clean.append(rec)
    clean.sort(key=lambda r: (r[0], r[1]))
    totals: dict[str, Decimal] = defaultdict(Decimal)
    counts: Counter[str] = Counter()
    for _, _, category, amount in clean:
        totals[category] += Decimal(amount)
        counts[category] += 1
    order = sorted(totals, key=lambda c: (-totals[c], c))
    assert len({totals[c] for c in order}) == len(order), "category totals must not tie"
    summary = [[c, str(counts[c]), money(totals[c])] for c in order]
    summary.append(["TOTAL", str(len(clean)), money(sum(totals.values(), Decimal(0)))])
    return [list(r) for r in clean], summary


EXPENSE_GRADER = r'''
CLEAN = "expenses/q1_clean.csv"
SUMMARY = "expenses/q1_summary.csv"


def _clean_body(ws):
    rows = _csv_rows(ws, CLEAN)
    if not rows or [c.strip().lower() for c in rows[0]] != ["date", "merchant", "category", "amount"]:
        return None
    return rows[1:]


def _key(row):
    date, merchant, category, amount = (row + ["", "", "", ""])[:4]
    value = _num(amount)
    return (date.strip(), merchant.strip(), category.strip().lower(), None if value is None else round(value, 2))


def clean_rows_match(ws):
    body = _clean_body(ws)
    if not body:
        return 0.0
    want = [tuple(r[:3]) + (round(float(r[3]), 2),) for r in EXPECTED["clean"]]
    got = [_key(r) for r in body]
    pool = list(want)
    hits = 0
    for g in got:
        if g in pool:
            pool.remove(g)
            hits += 1
    return hits / max(len(want), len(got))


def dates_are_iso(ws):
    body = _clean_body(ws)
    if not body:
        return 0.0
    return float(all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", r[0].strip()) for r in body))


def no_duplicates_or_blanks(ws):
    body = _clean_body(ws)
    if not body:
        return 0.0
    keys = [_key(r) for r in body]
    return float(len(keys) == len(set(keys)) == len(EXPECTED["clean"]))


def sorted_by_date_then_merchant(ws):
    body = _clean_body(ws)
    if not body:
        return 0.0
    keys = [(r[0].strip(), r[1].strip()) for r in body]
    return float(keys == sorted(keys))


def _summary(ws):
    rows = _csv_rows(ws, SUMMARY)
    if not rows or [c.strip().lower() for c in rows[0]] != ["category", "count", "total"]:
        return None
    return {r[0].strip().lower(): (_num(r[1]), _num(r[2])) for r in rows[1:] if len(r) >= 3}


def category_totals(ws):
    got = _summary(ws)
    if not got:
        return 0.0
    want = [r for r in EXPECTED["summary"] if r[0] != "TOTAL"]
    ok = 0
    for category, count, total in want:
        c, t = got.get(category, (None, None))
        if c is not None and t is not None and int(c) == int(count) and abs(t - float(total)) < 0.005:
            ok += 1
    return ok / len(want)


def summary_order_and_total_row(ws):
    rows = _csv_rows(ws, SUMMARY)
    if not rows:
        return 0.0
    body = [[c.strip() for c in r[:3]] for r in rows[1:]]
    want = EXPECTED["summary"]
    if len(body) != len(want) or body[-1][0].upper() != "TOTAL":
        return 0.0
    order_ok = [r[0].lower() for r in body[:-1]] == [r[0] for r in want[:-1]]
    total_ok = _num(body[-1][1]) == float(want[-1][1]) and abs(_num(body[-1][2]) - float(want[-1][2])) < 0.005
    return (order_ok + total_ok) / 2


def grade(transcript, workspace_path):
    return _run(workspace_path, [
        ("clean_rows_match", clean_rows_match),
        ("dates_are_iso", dates_are_iso),
        ("no_duplicates_or_blanks", no_duplicates_or_blanks),
        ("sorted_by_date_then_merchant", sorted_by_date_then_merchant),
        ("category_totals", category_totals),
        ("summary_order_and_total_row", summary_order_and_total_row),
    ])
'''


def task_expenses() -> Task:
    clean, summary = expense_outputs()
    clean_csv = csv_text(["date", "merchant", "category", "amount"], clean)
    summary_csv = csv_text(["category", "count", "total"], summary)
    check_cmd = (
        "python3 -c \"import csv; r = list(csv.DictReader(open('expenses/q1_clean.csv'))); "
        "print(len(r), 'rows,', round(sum(float(x['amount']) for x in r), 2))\" && cat expenses/q1_summary.csv"
    )
    return Task(
        id="example-expense-cleanup",
        source=SOURCE,
        category="Content & Domain",
        subcategory="Personal finance",
        operations=["read_csv", "normalize_dates", "deduplicate", "aggregate", "write_csv"],
        persona="Priya Raman, a freelance UX designer who exports her business card transactions every quarter "
        "to prepare estimated tax payments.",
        instruction=(
            "My Q1 expense export at expenses/q1_raw.csv is a mess: blank lines, the same charge listed twice, and "
            "three different date styles (2025-01-03, 01/06/2025, Jan 9, 2025). Please clean it up for my "
            "accountant.\n\n"
            "1. Write expenses/q1_clean.csv with the header `date,merchant,category,amount`: drop blank rows, "
            "write dates as YYYY-MM-DD, trim spaces around merchants, make categories lower-case and trimmed, and "
            "write amounts as plain numbers with two decimals (no $ or thousands separators). Rows that are "
            "identical after this clean-up are duplicates: keep only one. Sort by date, then merchant.\n"
            "2. Write expenses/q1_summary.csv with the header `category,count,total`: one row per category with "
            "its number of expenses and total (two decimals), sorted by total from highest to lowest, and a last "
            "row `TOTAL,<count>,<total>` for everything.\n\n"
            "Leave the raw file as it is."
        ),
        workspace=WorkspaceSpec(files=[gen("expenses/q1_raw.csv", "csv", header=EXPENSE_HEADER, rows=EXPENSE_ROWS)]),
        verifier=VerifierSpec(code=python_check({"clean": clean, "summary": summary}, EXPENSE_GRADER)),
        reference=ReferenceSolution(
            steps=[
                call("read", path="expenses/q1_raw.csv"),
                call("write", path="expenses/q1_clean.csv", content=clean_csv),
                call("write", path="expenses/q1_summary.csv", content=summary_csv),
                call("exec", command=check_cmd),
            ],
            final_message=(
                f"Cleaned {len(clean)} unique expenses into expenses/q1_clean.csv (dates normalised, duplicates and "
                f"blank rows removed) and wrote the per-category totals to expenses/q1_summary.csv; Q1 total is "
                f"${summary[-1][2]}."
            ),
        ),
        metadata={"generators": ["csv"], "difficulty": "easy"},
    )


# ============================================================================================ 2. meeting

MEETING_EVENTS: list[dict[str, Any]] = [
    {"summary": "Engineering standup", "start": "2025-03-10T09:30:00", "end": "2025-03-10T10:00:00"},
    {"summary": "Roadmap review", "start": "2025-03-10T13:00:00", "end": "2025-03-10T15:00:00",
     "location": "Room Atlas"},
    {"summary": "Engineering standup", "start": "2025-03-11T09:30:00", "end": "2025-03-11T10:00:00"},
    {"summary": "Sprint planning", "start": "2025-03-11T10:00:00", "end": "2025-03-11T11:30:00",
     "location": "Room Atlas"},
    {"summary": "1:1 Jordan", "start": "2025-03-11T11:30:00", "end": "2025-03-11T12:00:00"},
    {"summary": "Lunch", "start": "2025-03-11T12:00:00", "end": "2025-03-11T13:00:00"},
    {"summary": "Hiring sync", "start": "2025-03-11T13:00:00", "end": "2025-03-11T14:00:00"},
    {"summary": "1:1 Aisha", "start": "2025-03-11T14:00:00", "end": "2025-03-11T14:30:00"},
    {"summary": "Architecture review", "start": "2025-03-11T15:30:00", "end": "2025-03-11T16:30:00",
     "description": "Event bus proposal, part 2"},
    {"summary": "Engineering standup", "start": "2025-03-12T09:30:00", "end": "2025-03-12T10:00:00"},
    {"summary": "Vendor call: Datadog renewal", "start": "2025-03-12T10:30:00", "end": "2025-03-12T11:00:00"},
    {"summary": "Lunch", "start": "2025-03-12T12:00:00", "end": "2025-03-12T13:00:00"},
    {"summary": "Incident postmortem", "start": "2025-03-12T14:00:00", "end": "2025-03-12T15:00:00"},
    {"summary": "Engineering standup", "start": "2025-03-13T09:30:00", "end": "2025-03-13T10:00:00"},
    {"summary": "Company offsite", "start": "2025-03-14", "end": "2025-03-15"},
]
MEETING_DAYS = ["2025-03-11", "2025-03-12"]
MEETING_WINDOW = ("10:00", "16:00")


def earliest_free_slot() -> tuple[dt.datetime, dt.datetime]:
    busy = [
        (dt.datetime.fromisoformat(e["start"]), dt.datetime.fromisoformat(e["end"]))
        for e in MEETING_EVENTS if "T" in e["start"]
    ]
    for day in MEETING_DAYS:
        start = dt.datetime.fromisoformat(f"{day}T{MEETING_WINDOW[0]}")
        last = dt.datetime.fromisoformat(f"{day}T{MEETING_WINDOW[1]}")
        while start + dt.timedelta(hours=1) <= last:
            end = start + dt.timedelta(hours=1)
            if all(end <= b0 or start >= b1 for b0, b1 in busy):
                return start, end
            start += dt.timedelta(minutes=30)
    raise AssertionError("no free slot")


MEETING_GRADER = r'''
INVITE = "outbox/q2-integration-review.ics"
REPLY = "outbox/reply-to-elena.txt"


def _events(ws):
    raw = _text(ws, INVITE)
    if raw is None:
        return None
    raw = raw.replace("\r\n", "\n").replace("\n ", "").replace("\n\t", "")
    lines = [ln.strip() for ln in raw.split("\n") if ln.strip()]
    if not lines or lines[0].upper() != "BEGIN:VCALENDAR" or lines[-1].upper() != "END:VCALENDAR":
        return None
    events, cur = [], None
    for ln in lines:
        up = ln.upper()
        if up == "BEGIN:VEVENT":
            cur = []
        elif up == "END:VEVENT" and cur is not None:
            events.append(cur)
            cur = None
        elif cur is not None:
            name, _, value = ln.partition(":")
            cur.append((name.split(";")[0].upper(), ln, value.strip()))
    return events


def _event(ws):
    events = _events(ws)
    return events[0] if events and len(events) == 1 else None


def _prop(event, name):
    for prop, _, value in event:
        if prop == name:
            return value
    return None


def _when(value):
    m = re.fullmatch(r"(\d{8}T\d{4})(\d{2})?Z?", value or "")
    return m.group(1) if m else None


def invite_is_one_event(ws):
    return float(_event(ws) is not None)


def slot_is_earliest_free(ws):
    ev = _event(ws)
    if ev is None:
        return 0.0
    return float(_when(_prop(ev, "DTSTART")) == EXPECTED["start"] and _when(_prop(ev, "DTEND")) == EXPECTED["end"])


def slot_fits_constraints(ws):
    ev = _event(ws)
    if ev is None:
        return 0.0
    start, end = _when(_prop(ev, "DTSTART")), _when(_prop(ev, "DTEND"))
    if not start or not end or start[:8] != end[:8] or start[:8] not in EXPECTED["days"]:
        return 0.0
    s, e = int(start[9:11]) * 60 + int(start[11:13]), int(end[9:11]) * 60 + int(end[11:13])
    if e - s != 60 or s < EXPECTED["window"][0] or e > EXPECTED["window"][1]:
        return 0.0
    for day, b0, b1 in EXPECTED["busy"]:
        if day == start[:8] and s < b1 and e > b0:
            return 0.0
    return 1.0


def invite_has_attendee_and_title(ws):
    ev = _event(ws)
    if ev is None:
        return 0.0
    attendee = any(p == "ATTENDEE" and "elena.rossi@northwind.io" in ln.lower() for p, ln, _ in ev)
    title = "q2" in (_prop(ev, "SUMMARY") or "").lower()
    return (attendee + title) / 2


def reply_proposes_slot(ws):
    body = _text(ws, REPLY)
    if not body:
        return 0.0
    low = body.lower()
    date_ok = any(d in low for d in EXPECTED["date_phrases"])
    time_ok = any(t in low for t in EXPECTED["time_phrases"])
    return (date_ok + time_ok) / 2


def reply_addresses_elena(ws):
    body = _text(ws, REPLY)
    if not body:
        return 0.0
    return float("elena" in body.lower() and ("invite" in body.lower() or "invitation" in body.lower()))


def grade(transcript, workspace_path):
    return _run(workspace_path, [
        ("invite_is_one_event", invite_is_one_event),
        ("slot_is_earliest_free", slot_is_earliest_free),
        ("slot_fits_constraints", slot_fits_constraints),
        ("invite_has_attendee_and_title", invite_has_attendee_and_title),
        ("reply_proposes_slot", reply_proposes_slot),
        ("reply_addresses_elena", reply_addresses_elena),
    ])
'''


def _hm(value: str) -> int:
    h, m = value.split(":")
    return int(h) * 60 + int(m)


def task_meeting() -> Task:
    start, end = earliest_free_slot()
    stamp = "%Y%m%dT%H%M%S"
    busy = []
    for e in MEETING_EVENTS:
        if "T" in e["start"]:
            s, f = dt.datetime.fromisoformat(e["start"]), dt.datetime.fromisoformat(e["end"])
            busy.append([s.strftime("%Y%m%d"), s.hour * 60 + s.minute, f.hour * 60 + f.minute])
    day_name = start.strftime("%A")
    nice_date = f"{start.strftime('%B')} {start.day}"
    hhmm = start.strftime("%H:%M")
    twelve = f"{start.hour % 12 or 12}:{start.minute:02d}"
    expected = {
        "start": start.strftime(stamp)[:13], "end": end.strftime(stamp)[:13],
        "days": [d.replace("-", "") for d in MEETING_DAYS],
        "window": [_hm(MEETING_WINDOW[0]), _hm(MEETING_WINDOW[1])],
        "busy": busy,
        "date_phrases": [nice_date.lower(), f"{start.day} {start.strftime('%B').lower()}", start.date().isoformat()],
        "time_phrases": [hhmm, twelve],
    }
    invite = "".join(line + "\r\n" for line in [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//Marcus Chen//personal agent//EN",
        "METHOD:REQUEST",
        "BEGIN:VEVENT",
        f"UID:q2-integration-review-{start.strftime('%Y%m%d')}@brightloop.dev",
        "DTSTAMP:20250310T080000Z",
        f"DTSTART:{start.strftime(stamp)}",
        f"DTEND:{end.strftime(stamp)}",
        "SUMMARY:Q2 integration plan review",
        "DESCRIPTION:Walk through the Q2 integration plan with Northwind.",
        "ORGANIZER;CN=Marcus Chen:mailto:marcus@brightloop.dev",
        "ATTENDEE;CN=Elena Rossi;RSVP=TRUE:mailto:elena.rossi@northwind.io",
        "END:VEVENT",
        "END:VCALENDAR",
    ])
    reply = (
        "Subject: Re: Q2 integration plan - time to walk through it?\n"
        "To: Elena Rossi <elena.rossi@northwind.io>\n\n"
        "Hi Elena,\n\n"
        f"Thanks for reaching out. {day_name}, {nice_date} at {hhmm} (my time) works well for me; that is the "
        f"earliest hour I have free in your window. I've attached a calendar invite for {hhmm}-"
        f"{end.strftime('%H:%M')}, so feel free to forward it to anyone else on your side who should join.\n\n"
        "Looking forward to going through the plan.\n\n"
        "Best,\nMarcus\n"
    )
    return Task(
        id="example-meeting-scheduling",
        source=SOURCE,
        category="Productivity & Collaboration",
        subcategory="Calendar & scheduling",
        operations=["parse_ics", "read_email", "find_free_slot", "write_ics", "draft_reply"],
        persona="Marcus Chen, an engineering manager at a 40-person startup whose week is packed with 1:1s, "
        "planning sessions and partner calls.",
        instruction=(
            "Elena from Northwind emailed me asking for an hour to go over the Q2 integration plan; her message is "
            "inbox/meeting-request.eml and my calendar for the week is calendar/marcus.ics. Find the earliest "
            "60-minute slot in the window she gives that doesn't overlap anything on my calendar (start it on the "
            "hour or half hour).\n\n"
            "Then:\n"
            "1. Write an invite to outbox/q2-integration-review.ics: a VCALENDAR with exactly one VEVENT whose "
            "SUMMARY mentions Q2, with DTSTART and DTEND as local times without a time zone "
            "(like 20250311T090000), me (marcus@brightloop.dev) as ORGANIZER and Elena as ATTENDEE.\n"
            "2. Draft my reply in outbox/reply-to-elena.txt: greet her by name, propose the slot with the date "
            "written like 'March 11' and the time as HH:MM (24-hour), and mention the invite.\n\n"
            "Don't send anything, I'll review first."
        ),
        workspace=WorkspaceSpec(files=[
            gen("calendar/marcus.ics", "ics", calendar_name="Marcus Chen (work)", events=MEETING_EVENTS),
            gen(
                "inbox/meeting-request.eml", "eml",
                **{
                    "from": "Elena Rossi <elena.rossi@northwind.io>",
                    "to": "Marcus Chen <marcus@brightloop.dev>",
                    "subject": "Q2 integration plan - time to walk through it?",
                    "date": "Mon, 10 Mar 2025 08:12:00 +0000",
                    "body": (
                        "Hi Marcus,\n\n"
                        "Now that the API contract is signed off, could we find 60 minutes to walk through the Q2 "
                        "integration plan together? I'm travelling this week, so Tuesday (March 11) or Wednesday "
                        "(March 12) works best, anywhere between 10:00 and 16:00 your time.\n\n"
                        "Whatever is earliest for you is great - the sooner we align, the sooner my team can start.\n\n"
                        "Thanks,\nElena Rossi\nHead of Partnerships, Northwind\n"
                    ),
                },
            ),
        ]),
        verifier=VerifierSpec(
            code=python_check(expected, MEETING_GRADER),
            rubric=Rubric(rules=[
                RubricRule(
                    name="reply_tone", file_path="outbox/reply-to-elena.txt",
                    description="The reply is a short, friendly, professional email that confirms one concrete "
                    "slot and mentions the attached invite.",
                    scores={"1.0": "Concise, warm, one clear slot, mentions the invite",
                            "0.5": "Correct content but wordy, vague or stiff", "0.0": "Missing or no slot"},
                ),
                RubricRule(
                    name="invite_is_usable", file_path="outbox/q2-integration-review.ics",
                    description="The invite would import cleanly into a calendar app: a clear title, a short "
                    "description of the purpose, organizer and attendee set.",
                    scores={"1.0": "Imports cleanly with a clear title and purpose",
                            "0.5": "Imports but title or purpose unclear", "0.0": "Not a usable calendar file"},
                ),
            ]),
        ),
        reference=ReferenceSolution(
            steps=[
                call("ls", path="."),
                call("read", path="inbox/meeting-request.eml"),
                call("read", path="calendar/marcus.ics"),
                call("exec", command="grep -E '^(DTSTART|DTEND|SUMMARY)' calendar/marcus.ics | paste - - -"),
                call("write", path="outbox/q2-integration-review.ics", content=invite),
                call("write", path="outbox/reply-to-elena.txt", content=reply),
            ],
            final_message=(
                f"The earliest free hour in Elena's window is {day_name}, {nice_date}, {hhmm}-{end.strftime('%H:%M')}. "
                "The invite is in outbox/q2-integration-review.ics and a reply draft in outbox/reply-to-elena.txt; "
                "nothing was sent."
            ),
        ),
        metadata={"generators": ["ics", "eml"], "difficulty": "medium"},
    )


# ============================================================================================ 3. inbox

VIP_CUSTOMERS = [
    {"name": "Meridian Foods", "domain": "meridianfoods.com", "account_manager": "Sofia Alvarez"},
    {"name": "Harbor Retail Group", "domain": "harborretail.com", "account_manager": "Sofia Alvarez"},
    {"name": "Alpine Outfitters", "domain": "alpineoutfitters.com", "account_manager": "Carlos Mendes"},
]
INBOX: list[dict[str, Any]] = [
    {"file": "inbox/2025-03-17-0712.eml", "from": "Dmitri Volkov <dmitri@fleettrack.io>",
     "subject": "URGENT: GPS tracking outage on 14 trucks", "date": "Mon, 17 Mar 2025 07:12:00 +0000",
     "body": "Hi Sofia,\n\nSince 06:40 our GPS gateway is dropping positions for 14 of your trucks on the northern "
     "routes. We are rolling back the firmware; ETA for a fix is 11:00. Dispatch should fall back to phone "
     "check-ins until then.\n\nDmitri\nFleetTrack support\n"},
    {"file": "inbox/2025-03-17-0845.eml", "from": "Hannah Brooks <hbrooks@meridianfoods.com>",
     "subject": "Change to next week's pallet order", "date": "Mon, 17 Mar 2025 08:45:00 +0000",
     "body": "Hello Sofia,\n\nCould we move Tuesday's delivery of 22 pallets to Thursday morning and add 4 "
     "pallets of frozen goods? Please confirm by Wednesday noon.\n\nThanks,\nHannah\n"},
    {"file": "inbox/2025-03-17-0900.eml", "from": "Logistics Weekly <news@logisticsweekly.com>",
     "subject": "This week: diesel prices, port congestion and AI route planning",
     "date": "Mon, 17 Mar 2025 09:00:00 +0000", "headers": {"List-Unsubscribe": "<mailto:unsub@logisticsweekly.com>"},
     "body": "Your weekly digest of logistics news.\n\n1. Diesel prices dip for a third week\n"
     "2. Rotterdam congestion eases\n3. Does AI route planning pay off?\n"},
    {"file": "inbox/2025-03-17-0932.eml", "from": "Carlos Mendes <carlos@swiftmove.co>",
     "subject": "Timesheet approval for week 11", "date": "Mon, 17 Mar 2025 09:32:00 +0000",
     "body": "Hi Sofia,\n\nThe warehouse timesheets for week 11 are in the shared drive and need your approval "
     "before payroll runs on Friday.\n\nCarlos\n"},
    {"file": "inbox/2025-03-17-1005.eml", "from": "Payroll Hub <no-reply@payroll-hub.com>",
     "subject": "Your monthly payroll report is ready", "date": "Mon, 17 Mar 2025 10:05:00 +0000",
     "body": "Your payroll report for February 2025 is ready to download in Payroll Hub.\n"},
    {"file": "inbox/2025-03-17-1110.eml", "from": "Amelia Grant <amelia@packright.com>",
     "subject": "Quote for corrugated boxes (Q2)", "date": "Mon, 17 Mar 2025 11:10:00 +0000",
     "body": "Dear Sofia,\n\nPlease find our Q2 quote: 12,000 double-wall boxes at $0.84 each, delivery in two "
     "batches. The quote is valid until March 31.\n\nBest regards,\nAmelia Grant\nPackRight\n",
     "attachments": [{"filename": "packright-quote-q2.txt",
                      "content": "12000 x double-wall box 40x30x30 @ 0.84 USD = 10080.00 USD\n"}]},
    {"file": "inbox/2025-03-17-1340.eml", "from": "Raj Patel <raj.patel@harborretail.com>",
     "subject": "Invoice 4471 discrepancy", "date": "Mon, 17 Mar 2025 13:40:00 +0000",
     "body": "Hi Sofia,\n\nInvoice 4471 bills 18 deliveries but our records show 16. Can you check before we "
     "process the payment run on the 20th?\n\nRegards,\nRaj\n"},
    {"file": "inbox/2025-03-17-1500.eml", "from": "Warehouse Expo <events@warehouse-expo.com>",
     "subject": "Last chance: save 20% on Warehouse Expo passes", "date": "Mon, 17 Mar 2025 15:00:00 +0000",
     "headers": {"List-Unsubscribe": "<https://warehouse-expo.com/unsubscribe>"},
     "body": "Early-bird pricing ends Friday. Register now and save 20% on all passes.\n"},
]
PRIORITY_ORDER = {"high": 0, "medium": 1, "low": 2}


def _address(sender: str) -> tuple[str, str]:
    name, _, rest = sender.partition(" <")
    return name, rest.rstrip(">").lower()


def triage_outputs() -> tuple[list[dict[str, str]], str]:
    vip = [c["domain"] for c in VIP_CUSTOMERS]
    items = []
    for mail in INBOX:
        _, addr = _address(mail["from"])
        subject = mail["subject"]
        automated = "List-Unsubscribe" in mail.get("headers", {}) or addr.split("@")[0] in ("noreply", "no-reply")
        if addr.split("@")[1] in vip or "urgent" in subject.lower() or "outage" in subject.lower():
            prio = "high"
        elif automated:
            prio = "low"
        else:
            prio = "medium"
        items.append({"file": mail["file"], "from": addr, "subject": subject, "priority": prio})
    items.sort(key=lambda i: (PRIORITY_ORDER[i["priority"]], i["file"]))
    lines = ["# Inbox summary - Monday, March 17", ""]
    for prio in PRIORITY_ORDER:
        lines.append(f"## {prio.capitalize()}")
        lines.append("")
        for item in items:
            if item["priority"] == prio:
                name = _address(next(m["from"] for m in INBOX if m["file"] == item["file"]))[0]
                lines.append(f"- {item['subject']} - {name} <{item['from']}>")
        lines.append("")
    return items, "\n".join(lines)


INBOX_GRADER = r'''
TRIAGE = "triage/triage.json"
SUMMARY = "triage/summary.md"
ORDER = {"high": 0, "medium": 1, "low": 2}


def _items(ws):
    data = _json(ws, TRIAGE)
    if not isinstance(data, list):
        return None
    return [d for d in data if isinstance(d, dict)]


def _by_file(ws):
    items = _items(ws)
    if items is None:
        return None
    return {str(d.get("file", "")).lstrip("./"): d for d in items}


def triage_json_well_formed(ws):
    items = _items(ws)
    if not items:
        return 0.0
    keys = ("file", "from", "subject", "priority")
    return float(len(items) == len(EXPECTED["items"]) and all(all(k in d for k in keys) for d in items))


def every_email_listed(ws):
    got = _by_file(ws)
    if not got:
        return 0.0
    return sum(e["file"] in got for e in EXPECTED["items"]) / len(EXPECTED["items"])


def priorities_correct(ws):
    got = _by_file(ws)
    if not got:
        return 0.0
    ok = sum(str(got.get(e["file"], {}).get("priority", "")).lower() == e["priority"] for e in EXPECTED["items"])
    return ok / len(EXPECTED["items"])


def sorted_by_priority(ws):
    items = _items(ws)
    if not items or len(items) != len(EXPECTED["items"]):
        return 0.0
    keys = [(ORDER.get(str(d.get("priority", "")).lower(), 9), str(d.get("file", ""))) for d in items]
    return float(keys == sorted(keys))


def _sections(ws):
    raw = _text(ws, SUMMARY)
    if raw is None:
        return None
    sections, cur = {}, None
    for line in raw.splitlines():
        m = re.match(r"^##\s+(\w+)", line)
        if m:
            cur = m.group(1).lower()
            sections[cur] = []
        elif cur is not None:
            sections[cur].append(line)
    return sections


def summary_has_sections(ws):
    sections = _sections(ws)
    if not sections:
        return 0.0
    return float([s for s in sections if s in ORDER] == ["high", "medium", "low"])


def summary_lists_high_priority(ws):
    sections = _sections(ws)
    if not sections or "high" not in sections:
        return 0.0
    body = "\n".join(sections["high"]).lower()
    high = [e for e in EXPECTED["items"] if e["priority"] == "high"]
    return sum(e["subject"].lower() in body for e in high) / len(high)


def grade(transcript, workspace_path):
    return _run(workspace_path, [
        ("triage_json_well_formed", triage_json_well_formed),
        ("every_email_listed", every_email_listed),
        ("priorities_correct", priorities_correct),
        ("sorted_by_priority", sorted_by_priority),
        ("summary_has_sections", summary_has_sections),
        ("summary_lists_high_priority", summary_lists_high_priority),
    ])
'''


def task_inbox() -> Task:
    items, summary = triage_outputs()
    files = [gen("contacts/vip_customers.json", "json", data={"customers": VIP_CUSTOMERS})]
    for mail in INBOX:
        params = {k: v for k, v in mail.items() if k != "file"}
        params["to"] = "Sofia Alvarez <sofia@swiftmove.co>"
        files.append(gen(mail["file"], "eml", **params))
    return Task(
        id="example-inbox-triage",
        source=SOURCE,
        category="Productivity & Collaboration",
        subcategory="Email triage",
        operations=["list_files", "parse_email_headers", "classify", "write_json", "write_markdown"],
        persona="Sofia Alvarez, operations lead at a regional logistics company, back from a week off to a full "
        "inbox.",
        instruction=(
            "I'm back from leave and inbox/ is full of .eml files. Triage them for me.\n\n"
            "Priority rules: `high` if the sender's domain belongs to one of our VIP customers in "
            "contacts/vip_customers.json, or the subject contains 'urgent' or 'outage' (any case). Otherwise "
            "`low` for automated mail (it has a List-Unsubscribe header, or comes from a noreply@/no-reply@ "
            "address). Everything else is `medium`.\n\n"
            "1. Write triage/triage.json: a JSON array with one object per email with the keys `file` (path like "
            "inbox/xxx.eml), `from` (the bare email address, lower-case), `subject` and `priority`, ordered high, "
            "medium, low and by file name within a priority.\n"
            "2. Write triage/summary.md with a title and the sections `## High`, `## Medium` and `## Low` (in "
            "that order), each listing its emails as `- <subject> - <sender name> <address>`."
        ),
        workspace=WorkspaceSpec(files=files),
        verifier=VerifierSpec(
            code=python_check({"items": items}, INBOX_GRADER),
            rubric=Rubric(rules=[
                RubricRule(
                    name="summary_is_skimmable", file_path="triage/summary.md",
                    description="The summary can be read in under a minute: one line per email, high-priority "
                    "items first, no pasted email bodies.",
                    scores={"1.0": "Clean, one line per email, priorities obvious",
                            "0.5": "Complete but cluttered", "0.0": "Missing or unreadable"},
                ),
                RubricRule(
                    name="no_invented_facts", file_path="triage/summary.md",
                    description="Everything in the summary is backed by the emails; nothing is made up.",
                    scores={"1.0": "Fully faithful", "0.5": "Minor embellishment", "0.0": "Invented content"},
                ),
            ]),
        ),
        reference=ReferenceSolution(
            steps=[
                call("ls", path="inbox"),
                call("read", path="contacts/vip_customers.json"),
                call("exec", command="grep -H -i -E '^(from|subject|list-unsubscribe):' inbox/*.eml"),
                call("write", path="triage/triage.json", content=json.dumps(items, indent=2) + "\n"),
                call("write", path="triage/summary.md", content=summary),
            ],
            final_message=(
                f"Triaged {len(items)} emails: {sum(i['priority'] == 'high' for i in items)} high (the GPS outage "
                "and two VIP customers), the rest medium or low. See triage/triage.json and triage/summary.md."
            ),
        ),
        metadata={"generators": ["eml", "json"], "difficulty": "medium"},
    )


# ============================================================================================ 4. git bugfix

REPO = "invoicer"
GIT_AUTHOR = "Tom Becker <tom@becker.dev>"
TOTALS_V1 = '''\
"""Money arithmetic for invoices. Amounts are Decimals rounded to the cent, half up (as the tax office does)."""

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def to_cents(value):
    return Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)


def line_total(quantity, unit_price):
    return to_cents(Decimal(str(quantity)) * Decimal(str(unit_price)))


def subtotal(lines):
    """Sum of (quantity, unit_price) lines."""
    return sum((line_total(q, p) for q, p in lines), Decimal("0.00"))
'''
TOTALS_BUGGY = TOTALS_V1 + '''

def apply_discount(amount, percent):
    """`amount` reduced by `percent` per cent (15 means 15%)."""
    factor = 1 - Decimal(str(percent)) / 100
    return (amount * factor).quantize(CENT)


def invoice_total(lines, discount_percent=0, tax_rate=0):
    """Subtotal, minus the discount, plus tax on the discounted amount (tax_rate 0.19 means 19%)."""
    net = apply_discount(subtotal(lines), discount_percent)
    return net + to_cents(net * Decimal(str(tax_rate)))
'''
BUG_LINE = "    return (amount * factor).quantize(CENT)\n"
FIX_LINE = "    return (amount * factor).quantize(CENT, rounding=ROUND_HALF_UP)\n"
TOTALS_FIXED = TOTALS_BUGGY.replace(BUG_LINE, FIX_LINE)
assert TOTALS_FIXED != TOTALS_BUGGY
TESTS_V1 = '''\
from decimal import Decimal

from invoicer.totals import line_total, subtotal


def test_line_total_rounds_half_up():
    assert line_total(3, "0.125") == Decimal("0.38")


def test_subtotal():
    assert subtotal([(2, "19.99"), (1, "5.00")]) == Decimal("44.98")


def test_empty_subtotal():
    assert subtotal([]) == Decimal("0.00")
'''
TESTS_V2 = TESTS_V1.replace(
    "from invoicer.totals import line_total, subtotal",
    "from invoicer.totals import apply_discount, invoice_total, line_total, subtotal",
) + '''

def test_discount():
    assert apply_discount(Decimal("200.00"), 15) == Decimal("170.00")


def test_discount_rounds_half_up():
    assert apply_discount(Decimal("10.25"), 10) == Decimal("9.23")


def test_invoice_total_with_discount_and_tax():
    lines = [(1, "10.25")]
    assert invoice_total(lines, discount_percent=10, tax_rate="0.19") == Decimal("10.98")
'''
N_TESTS = 6
INVOICER_COMMITS: list[dict[str, Any]] = [
    {
        "message": "Initial commit: invoice line totals",
        "author": GIT_AUTHOR,
        "date": "2025-02-02T10:15:00Z",
        "files": {
            "README.md": "# invoicer\n\nSmall helpers for invoice arithmetic. Run the tests with "
            "`python3 -m pytest -q`.\n",
            ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n",
            "pyproject.toml": '[project]\nname = "invoicer"\nversion = "0.2.0"\n\n'
            '[tool.pytest.ini_options]\npythonpath = ["."]\ntestpaths = ["tests"]\n',
            "invoicer/__init__.py": '__version__ = "0.2.0"\n',
            "invoicer/totals.py": TOTALS_V1,
            "tests/test_totals.py": TESTS_V1,
        },
    },
    {
        "message": "Add percentage discounts and invoice totals with tax",
        "date": "2025-02-16T18:40:00Z",
        "files": {"invoicer/totals.py": TOTALS_BUGGY, "tests/test_totals.py": TESTS_V2},
    },
    {
        "message": "README: document invoice_total",
        "date": "2025-02-17T09:05:00Z",
        "files": {
            "README.md": "# invoicer\n\nSmall helpers for invoice arithmetic: `line_total`, `subtotal`, "
            "`apply_discount` and `invoice_total(lines, discount_percent, tax_rate)`.\n\nRun the tests with "
            "`python3 -m pytest -q`.\n",
        },
    },
]

GIT_CHECKER = r'''
"""Checker of example-git-bugfix: runs the tests and inspects the git history.

`python3 .checks/check.py` prints the sub-scores as JSON then the score (their mean) as the last line;
`--json` prints only the JSON. Any failure to find the repository scores 0.
"""
import json
import os
import re
import subprocess
import sys

REPO = os.path.join(os.environ.get("WORKSPACE", os.getcwd()), __REPO__)
BASE_COMMITS = __BASE_COMMITS__
N_TESTS = __N_TESTS__
TESTS_ORIGINAL = __TESTS__
TOTALS_BUGGY = __TOTALS__


def git(*args):
    proc = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", REPO, *args],
        capture_output=True, text=True, timeout=60,
    )
    return proc.returncode, proc.stdout


def tests_pass():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts="],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
    )
    m = re.search(r"(\d+) passed", proc.stdout)
    return float(proc.returncode == 0 and m is not None and int(m.group(1)) == N_TESTS)


def new_commit_with_fix():
    code, out = git("rev-list", "--count", "HEAD")
    if code != 0 or int(out.strip()) <= BASE_COMMITS:
        return 0.0
    code, committed = git("show", "HEAD:invoicer/totals.py")
    return float(code == 0 and committed != TOTALS_BUGGY)


def tests_untouched():
    with open(os.path.join(REPO, "tests", "test_totals.py"), encoding="utf-8") as fh:
        current = fh.read()
    code, committed = git("show", "HEAD:tests/test_totals.py")
    return float(current == TESTS_ORIGINAL and code == 0 and committed == TESTS_ORIGINAL)


def working_tree_clean():
    code, out = git("status", "--porcelain")
    return float(code == 0 and out.strip() == "")


def main():
    scores = {}
    committed = 0.0
    for name, fn in [("tests_pass", tests_pass), ("new_commit_with_fix", new_commit_with_fix),
                     ("tests_untouched", tests_untouched), ("working_tree_clean", working_tree_clean)]:
        try:
            scores[name] = fn()
        except Exception:
            scores[name] = 0.0
        if name == "new_commit_with_fix":
            committed = scores[name]
    # untouched tests and a clean tree only count once the fix is committed (a no-op must score 0)
    scores["tests_untouched"] *= committed
    scores["working_tree_clean"] *= committed
    print(json.dumps(scores, sort_keys=True))
    if "--json" not in sys.argv:
        print(round(sum(scores.values()) / len(scores), 6))


main()
'''


def task_git_bugfix() -> Task:
    checker = (
        GIT_CHECKER.lstrip()
        .replace("__REPO__", repr(REPO))
        .replace("__BASE_COMMITS__", str(len(INVOICER_COMMITS)))
        .replace("__N_TESTS__", str(N_TESTS))
        .replace("__TESTS__", repr(TESTS_V2))
        .replace("__TOTALS__", repr(TOTALS_BUGGY))
    )
    commit = (
        "git add invoicer/totals.py && git -c user.name='Tom Becker' -c user.email=tom@becker.dev commit -q "
        "-m 'Round discounted amounts half up, like every other amount' && git log --oneline -n 2 "
        "&& git status --short"
    )
    return Task(
        id="example-git-bugfix",
        source=SOURCE,
        category="Software Development",
        subcategory="Debugging",
        operations=["git_log", "run_tests", "read_code", "edit_code", "git_commit"],
        persona="Tom Becker, a solo developer who keeps a tiny invoicing library for his bookkeeping side business.",
        instruction=(
            "The tests of my invoicer library (git repo in invoicer/) started failing after I added discounts. "
            "Find the bug and fix it in the library code so that `python3 -m pytest -q` passes in invoicer/ - "
            "the tests are right, don't change them. Then commit the fix on main with a short message, as "
            "Tom Becker <tom@becker.dev>, and leave the working tree clean."
        ),
        workspace=WorkspaceSpec(files=[gen(REPO, "git", commits=INVOICER_COMMITS)]),
        verifier=VerifierSpec(
            code=CodeCheck(
                kind="shell",
                entry="python3 .checks/check.py",
                subscores_entry="python3 .checks/check.py --json",
                files=[text(".checks/check.py", checker)],
                timeout_seconds=120,
            ),
        ),
        reference=ReferenceSolution(
            steps=[
                call("exec", command="git log --oneline", workdir=REPO),
                call("exec", command="python3 -m pytest -q -p no:cacheprovider", workdir=REPO, timeout=120),
                call("read", path=f"{REPO}/invoicer/totals.py"),
                call("edit", path=f"{REPO}/invoicer/totals.py", oldText=BUG_LINE, newText=FIX_LINE),
                call("exec", command="python3 -m pytest -q -p no:cacheprovider", workdir=REPO, timeout=120),
                call("exec", command=commit, workdir=REPO),
            ],
            final_message=(
                "apply_discount quantized with Python's default banker's rounding (9.225 -> 9.22) while everything "
                "else rounds half up; I passed rounding=ROUND_HALF_UP, all 6 tests pass, and the fix is committed "
                "on main."
            ),
        ),
        metadata={"generators": ["git"], "difficulty": "medium"},
    )


# ============================================================================================ 5. sqlite

TEA_CUSTOMERS = [
    [1, "Amara Lewis", "Leeds", "2024-06-02"],
    [2, "Ben Carter", "Bristol", "2024-08-19"],
    [3, "Chloe Nguyen", "London", "2024-09-01"],
    [4, "Daniel Ortiz", "Manchester", "2024-10-12"],
    [5, "Eva Schmidt", "London", "2024-11-30"],
    [6, "Farah Haddad", "Glasgow", "2025-01-07"],
    [7, "George Mills", "Cardiff", "2025-01-21"],
    [8, "Hana Sato", "Oxford", "2025-02-14"],
]
TEA_PRODUCTS = [
    [1, "Darjeeling First Flush", "black", 14.50],
    [2, "Sencha Kyoto", "green", 11.00],
    [3, "Earl Grey Supreme", "black", 9.75],
    [4, "Jasmine Pearls", "green", 16.25],
    [5, "Rooibos Vanilla", "herbal", 7.90],
    [6, "Cast-iron Teapot", "teaware", 42.00],
]
TEA_STATUSES = ["completed"] * 7 + ["cancelled", "refunded"]


def tea_orders() -> tuple[list[list[Any]], list[list[Any]]]:
    rng = random.Random(20250301)
    orders, items = [], []
    day0 = dt.date(2025, 2, 1)
    for oid in range(1001, 1043):
        day = day0 + dt.timedelta(days=rng.randrange(0, 88))
        orders.append([oid, rng.randint(1, 8), day.isoformat(), rng.choice(TEA_STATUSES)])
        for pid in sorted(rng.sample(range(1, 7), rng.randint(1, 3))):
            price = TEA_PRODUCTS[pid - 1][3]
            if pid != 6 and rng.random() < 0.15:
                price = round(price * 0.9, 2)  # a promotion price, different from the list price
            items.append([oid, pid, rng.randint(1, 4), price])
    orders.sort(key=lambda o: o[0])
    return orders, items


def tea_answers() -> dict[str, Any]:
    orders, items = tea_orders()
    revenue: dict[int, Decimal] = defaultdict(Decimal)
    for oid, _pid, qty, price in items:
        revenue[oid] += Decimal(qty) * Decimal(str(price))
    done = [o for o in orders if o[3] == "completed"]
    march = [o for o in done if o[2].startswith("2025-03")]
    by_customer: dict[int, Decimal] = defaultdict(Decimal)
    done_count: Counter[int] = Counter()
    for oid, cid, _, _ in done:
        by_customer[cid] += revenue[oid]
        done_count[cid] += 1
    units: Counter[int] = Counter()
    done_ids = {o[0] for o in done}
    for oid, pid, qty, _ in items:
        if oid in done_ids:
            units[pid] += qty
    top_c = sorted(by_customer.items(), key=lambda kv: -kv[1])
    top_p = units.most_common()
    assert top_c[0][1] != top_c[1][1] and top_p[0][1] != top_p[1][1], "argmax must be unique"
    cancelled = sum(o[3] == "cancelled" for o in orders)
    aov = sum((revenue[o[0]] for o in done), Decimal(0)) / len(done)
    return {
        "march_revenue": float(money(sum((revenue[o[0]] for o in march), Decimal(0)))),
        "march_orders": len(march),
        "top_customer": TEA_CUSTOMERS[top_c[0][0] - 1][1],
        "best_selling_product": TEA_PRODUCTS[top_p[0][0] - 1][1],
        "cancelled_percent": float((Decimal(100 * cancelled) / len(orders)).quantize(Decimal("0.1"), ROUND_HALF_UP)),
        "average_order_value": float(money(aov)),
        "repeat_customers": sum(1 for c in done_count.values() if c >= 2),
    }


TEA_GRADER = r'''
import sqlite3

ANSWERS = "answers.json"
SQL = {
    "march_revenue": """
        SELECT ROUND(SUM(i.quantity * i.unit_price), 2) FROM orders o JOIN order_items i ON i.order_id = o.id
        WHERE o.status = 'completed' AND o.order_date BETWEEN '2025-03-01' AND '2025-03-31'""",
    "march_orders": """
        SELECT COUNT(*) FROM orders WHERE status = 'completed' AND order_date LIKE '2025-03-%'""",
    "top_customer": """
        SELECT c.name FROM orders o JOIN order_items i ON i.order_id = o.id JOIN customers c ON c.id = o.customer_id
        WHERE o.status = 'completed' GROUP BY c.id ORDER BY SUM(i.quantity * i.unit_price) DESC LIMIT 1""",
    "best_selling_product": """
        SELECT p.name FROM orders o JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id
        WHERE o.status = 'completed' GROUP BY p.id ORDER BY SUM(i.quantity) DESC LIMIT 1""",
    "cancelled_percent": """
        SELECT ROUND(100.0 * SUM(status = 'cancelled') / COUNT(*), 1) FROM orders""",
    "average_order_value": """
        SELECT ROUND(SUM(i.quantity * i.unit_price) / COUNT(DISTINCT o.id), 2)
        FROM orders o JOIN order_items i ON i.order_id = o.id WHERE o.status = 'completed'""",
    "repeat_customers": """
        SELECT COUNT(*) FROM (SELECT customer_id FROM orders WHERE status = 'completed'
        GROUP BY customer_id HAVING COUNT(*) >= 2)""",
}
_CACHE = {}


def _truth(ws):
    """The answers recomputed from shop.db, or None if the database is missing or was altered."""
    if ws not in _CACHE:
        _CACHE[ws] = None
        path = os.path.join(ws, "shop.db")
        if os.path.isfile(path):
            db = sqlite3.connect("file:" + path + "?mode=ro", uri=True)
            try:
                counts = [db.execute("SELECT COUNT(*) FROM " + t).fetchone()[0]
                          for t in ("customers", "products", "orders", "order_items")]
                if counts == EXPECTED["row_counts"]:
                    _CACHE[ws] = {k: db.execute(q).fetchone()[0] for k, q in SQL.items()}
            finally:
                db.close()
    return _CACHE[ws]


def _answer_check(key):
    def check(ws):
        answers = _json(ws, ANSWERS)
        truth = _truth(ws)
        if not isinstance(answers, dict) or truth is None or key not in answers:
            return 0.0
        want, got = truth[key], answers[key]
        if isinstance(want, str):
            return float(isinstance(got, str) and got.strip().lower() == want.lower())
        got = _num(got)
        tolerance = 0.051 if key == "cancelled_percent" else 0.006
        return float(got is not None and abs(got - float(want)) < tolerance)
    return check


def grade(transcript, workspace_path):
    return _run(workspace_path, [(key, _answer_check(key)) for key in SQL])
'''


def task_sqlite() -> Task:
    orders, items = tea_orders()
    answers = tea_answers()
    row_counts = [len(TEA_CUSTOMERS), len(TEA_PRODUCTS), len(orders), len(items)]
    queries = [
        "sqlite3 shop.db '.tables' '.schema'",
        "sqlite3 -header -column shop.db \"SELECT status, COUNT(*) AS n FROM orders GROUP BY status\"",
        "sqlite3 -header -column shop.db \"SELECT strftime('%Y-%m', o.order_date) AS month, COUNT(DISTINCT o.id) "
        "AS orders, ROUND(SUM(i.quantity * i.unit_price), 2) AS revenue FROM orders o JOIN order_items i "
        "ON i.order_id = o.id WHERE o.status = 'completed' GROUP BY month\"",
        "sqlite3 -header -column shop.db \"SELECT c.name, COUNT(DISTINCT o.id) AS orders, "
        "ROUND(SUM(i.quantity * i.unit_price), 2) AS revenue FROM orders o JOIN order_items i ON i.order_id = o.id "
        "JOIN customers c ON c.id = o.customer_id WHERE o.status = 'completed' GROUP BY c.id ORDER BY revenue DESC\"",
        "sqlite3 -header -column shop.db \"SELECT p.name, SUM(i.quantity) AS units FROM orders o JOIN order_items i "
        "ON i.order_id = o.id JOIN products p ON p.id = i.product_id WHERE o.status = 'completed' GROUP BY p.id "
        "ORDER BY units DESC\"",
    ]
    return Task(
        id="example-shop-orders-sql",
        source=SOURCE,
        category="Analysis & Reasoning",
        subcategory="Data analysis (SQL)",
        operations=["inspect_schema", "sql_aggregate", "sql_join", "compute_metrics", "write_json"],
        persona="Nadia Okonkwo, who runs a small online tea shop and wants her monthly numbers without opening a "
        "BI tool.",
        instruction=(
            "My shop's orders are in the SQLite database shop.db (customers, products, orders, order_items; "
            "an order's revenue is the sum of quantity x unit_price of its items). Only `completed` orders count "
            "as sales. Please answer these in answers.json, a JSON object with exactly these keys:\n"
            "- march_revenue: total revenue of completed orders placed in March 2025 (number, 2 decimals)\n"
            "- march_orders: number of completed orders placed in March 2025\n"
            "- top_customer: name of the customer with the highest completed revenue overall\n"
            "- best_selling_product: name of the product with the most units sold in completed orders\n"
            "- cancelled_percent: share of all orders with status `cancelled`, in percent, 1 decimal\n"
            "- average_order_value: average revenue per completed order (2 decimals)\n"
            "- repeat_customers: number of customers with at least two completed orders\n\n"
            "Please don't modify the database."
        ),
        workspace=WorkspaceSpec(files=[
            gen("shop.db", "sqlite", tables={
                "customers": {"columns": ["id INTEGER PRIMARY KEY", "name TEXT", "city TEXT", "joined TEXT"],
                              "rows": TEA_CUSTOMERS},
                "products": {"columns": ["id INTEGER PRIMARY KEY", "name TEXT", "category TEXT", "price REAL"],
                             "rows": TEA_PRODUCTS},
                "orders": {"columns": ["id INTEGER PRIMARY KEY", "customer_id INTEGER REFERENCES customers(id)",
                                       "order_date TEXT", "status TEXT"], "rows": orders},
                "order_items": {"columns": ["order_id INTEGER REFERENCES orders(id)",
                                            "product_id INTEGER REFERENCES products(id)", "quantity INTEGER",
                                            "unit_price REAL"], "rows": items},
            }),
        ]),
        verifier=VerifierSpec(code=python_check({"row_counts": row_counts}, TEA_GRADER)),
        reference=ReferenceSolution(
            steps=[
                *[call("exec", command=q) for q in queries],
                call("write", path="answers.json", content=json.dumps(answers, indent=2) + "\n"),
            ],
            final_message=(
                f"March 2025: {answers['march_orders']} completed orders, revenue {answers['march_revenue']:.2f}. "
                f"Top customer {answers['top_customer']}, best seller {answers['best_selling_product']}. "
                "All answers are in answers.json; the database is untouched."
            ),
        ),
        metadata={"generators": ["sqlite"], "difficulty": "medium"},
    )


# ============================================================================================ 6. config + logs

SERVICE_DIR = "services/billing-api"
CONFIG_V1: dict[str, Any] = {
    "version": 1,
    "service_name": "billing-api",
    "host": "0.0.0.0",
    "port": 8080,
    "workers": 4,
    "db_url": "postgres://billing@db.internal:5432/billing",
    "db_pool": 20,
    "log_level": "info",
    "log_format": "json",
    "cache": {"enabled": True, "ttl": 300},
    "feature_flags": "invoice_pdf_v2, stripe_webhooks ,dunning_emails",
}
MIGRATION_DOC = """\
# Config schema v2

The new config loader (billing-api 3.0) only reads version 2 files. Map the v1 keys like this:

| v1 key            | v2 key                   | notes                                              |
|-------------------|--------------------------|----------------------------------------------------|
| `version: 1`      | `version: 2`             |                                                    |
| `service_name`    | `service.name`           |                                                    |
| `host`, `port`    | `service.listen`         | one string, `"<host>:<port>"`                      |
| `workers`         | `service.workers`        | integer, unchanged                                 |
| `db_url`          | `database.url`           |                                                    |
| `db_pool`         | `database.pool_size`     | integer                                            |
| `log_level`       | `logging.level`          | UPPER-CASE (`info` -> `INFO`)                      |
| `log_format`      | `logging.format`         | unchanged                                          |
| `cache.enabled`   | `cache.enabled`          | unchanged                                          |
| `cache.ttl`       | `cache.ttl_seconds`      | integer, renamed                                   |
| `feature_flags`   | `features`               | a YAML list, split on commas, whitespace trimmed   |

A v2 file has exactly the top-level keys `version`, `service`, `database`, `logging`, `cache` and
`features`; v1 keys must not remain.
"""
LOG_PATHS = [
    ("GET", "/v1/invoices", 0.04), ("POST", "/v1/invoices", 0.10), ("GET", "/v1/invoices/export", 0.35),
    ("POST", "/v1/webhooks/stripe", 0.22), ("POST", "/v1/refunds", 0.15), ("GET", "/v1/customers", 0.02),
    ("GET", "/healthz", 0.0),
]
LOG_AGENTS = ["billing-worker/2.3", "Mozilla/5.0 (X11; Linux x86_64) Firefox/123.0", "python-httpx/0.27.0"]


def access_log() -> list[tuple[str, str, int]]:
    """[(method, path with query, status)] and the log text, from a fixed seed."""
    rng = random.Random(8080)
    out = []
    for _ in range(120):
        method, path, p_err = rng.choice(LOG_PATHS)
        if path == "/v1/invoices" and method == "GET" and rng.random() < 0.5:
            path += f"?status={rng.choice(['open', 'paid', 'overdue'])}&page={rng.randint(1, 5)}"
        roll = rng.random()
        if roll < p_err:
            status = rng.choice([500, 502, 503, 504])
        elif roll < p_err + 0.08:
            status = rng.choice([400, 401, 404, 422])
        else:
            status = 201 if method == "POST" else 200
        out.append((method, path, status))
    return out


def access_log_text() -> str:
    rng = random.Random(443)
    t = dt.datetime(2025, 3, 11, 9, 0, 0)
    lines = []
    for method, path, status in access_log():
        t += dt.timedelta(seconds=rng.randint(1, 40))
        ip = f"10.0.{rng.randint(0, 4)}.{rng.randint(2, 250)}"
        size = 0 if status >= 500 else rng.randint(120, 9000)
        if path == "/healthz":
            agent = "kube-probe/1.29"
        elif path.startswith("/v1/webhooks/stripe"):
            agent = "Stripe/1.0 (+https://stripe.com/docs/webhooks)"
        else:
            agent = rng.choice(LOG_AGENTS)
        lines.append(
            f'{ip} - - [{t.strftime("%d/%b/%Y:%H:%M:%S")} +0000] "{method} {path} HTTP/1.1" {status} {size} '
            f'"-" "{agent}" rt={rng.randint(3, 900) / 1000:.3f}'
        )
    return "\n".join(lines) + "\n"


def config_v2() -> dict[str, Any]:
    c = CONFIG_V1
    return {
        "version": 2,
        "service": {"name": c["service_name"], "listen": f"{c['host']}:{c['port']}", "workers": c["workers"]},
        "database": {"url": c["db_url"], "pool_size": c["db_pool"]},
        "logging": {"level": c["log_level"].upper(), "format": c["log_format"]},
        "cache": {"enabled": c["cache"]["enabled"], "ttl_seconds": c["cache"]["ttl"]},
        "features": [f.strip() for f in c["feature_flags"].split(",")],
    }


def error_report() -> dict[str, Any]:
    entries = access_log()
    server = Counter(p.split("?")[0] for _, p, s in entries if s >= 500)
    top = sorted(server.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert len(top) == 3 and len(server) > 3 and top[2][1] > sorted(server.values(), reverse=True)[3], "no ties"
    n5 = sum(s >= 500 for _, _, s in entries)
    return {
        "total_requests": len(entries),
        "server_errors": n5,
        "client_errors": sum(400 <= s < 500 for _, _, s in entries),
        "error_rate_percent": float((Decimal(100 * n5) / len(entries)).quantize(Decimal("0.01"), ROUND_HALF_UP)),
        "top_failing_endpoints": [{"path": p, "count": n} for p, n in top],
    }


CONFIG_GRADER = r'''
import yaml

V2 = "services/billing-api/config.v2.yaml"
REPORT = "services/billing-api/reports/errors.json"


def _v2(ws):
    raw = _text(ws, V2)
    if raw is None:
        return None
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _section(key):
    def check(ws):
        data = _v2(ws)
        return float(data is not None and data.get(key) == EXPECTED["config"][key])
    return check


def v2_version_and_service(ws):
    data = _v2(ws)
    return float(data is not None and data.get("version") == 2 and data.get("service") == EXPECTED["config"]["service"])


def v2_exact_top_level_keys(ws):
    data = _v2(ws)
    return float(data is not None and sorted(data) == sorted(EXPECTED["config"]))


def v1_config_kept(ws):
    raw = _text(ws, "services/billing-api/config.yaml")
    if raw is None or _v2(ws) is None:
        return 0.0
    return float(yaml.safe_load(raw) == EXPECTED["v1"])


def report_counts(ws):
    data = _json(ws, REPORT)
    if not isinstance(data, dict):
        return 0.0
    keys = ("total_requests", "server_errors", "client_errors")
    return sum(data.get(k) == EXPECTED["report"][k] for k in keys) / len(keys)


def report_error_rate(ws):
    data = _json(ws, REPORT)
    if not isinstance(data, dict):
        return 0.0
    got = _num(data.get("error_rate_percent"))
    return float(got is not None and abs(got - EXPECTED["report"]["error_rate_percent"]) < 0.006)


def report_top_endpoints(ws):
    data = _json(ws, REPORT)
    if not isinstance(data, dict) or not isinstance(data.get("top_failing_endpoints"), list):
        return 0.0
    got = [(str(e.get("path")), e.get("count")) for e in data["top_failing_endpoints"] if isinstance(e, dict)]
    want = [(e["path"], e["count"]) for e in EXPECTED["report"]["top_failing_endpoints"]]
    return sum(g == w for g, w in zip(got, want)) / len(want) if len(got) == len(want) else 0.0


def grade(transcript, workspace_path):
    return _run(workspace_path, [
        ("v2_version_and_service", v2_version_and_service),
        ("v2_database", _section("database")),
        ("v2_logging", _section("logging")),
        ("v2_cache", _section("cache")),
        ("v2_features", _section("features")),
        ("v2_exact_top_level_keys", v2_exact_top_level_keys),
        ("v1_config_kept", v1_config_kept),
        ("report_counts", report_counts),
        ("report_error_rate", report_error_rate),
        ("report_top_endpoints", report_top_endpoints),
    ])
'''


def task_config() -> Task:
    v2 = config_v2()
    report = error_report()
    v2_text = "# billing-api config, schema v2 (migrated from config.yaml)\n" + yaml.safe_dump(
        v2, sort_keys=False, default_flow_style=False
    )
    d = SERVICE_DIR
    status_hist = f"awk '{{print $9}}' {d}/logs/access.log | sort | uniq -c | sort -rn"
    failing = (
        f"awk '$9 >= 500 {{split($7, p, \"?\"); print p[1]}}' {d}/logs/access.log | sort | uniq -c | sort -k1,1nr -k2"
    )
    return Task(
        id="example-config-migration",
        source=SOURCE,
        category="Systems & Automation",
        subcategory="Configuration & log analysis",
        operations=["read_docs", "parse_yaml", "migrate_schema", "parse_logs", "aggregate", "write_json"],
        persona="Jonas Weber, a DevOps engineer getting the billing API ready for its 3.0 release and an incident "
        "review.",
        instruction=(
            f"Two things for the billing API in {d}/ before tomorrow's release:\n\n"
            f"1. Migrate {d}/config.yaml to the v2 schema described in {d}/MIGRATION.md and write it to "
            f"{d}/config.v2.yaml. Keep the old config.yaml unchanged.\n"
            f"2. From the nginx access log {d}/logs/access.log (status code is the 9th field), write "
            f"{d}/reports/errors.json with: total_requests, server_errors (5xx), client_errors (4xx), "
            "error_rate_percent (5xx as a percent of all requests, 2 decimals) and top_failing_endpoints: the "
            "three paths (query string removed) with the most 5xx responses, as a list of {\"path\", \"count\"} "
            "objects, most failures first."
        ),
        workspace=WorkspaceSpec(files=[
            gen(f"{d}/config.yaml", "yaml", data=CONFIG_V1),
            text(f"{d}/MIGRATION.md", MIGRATION_DOC),
            text(f"{d}/logs/access.log", access_log_text()),
        ]),
        verifier=VerifierSpec(code=python_check({"config": v2, "v1": CONFIG_V1, "report": report}, CONFIG_GRADER)),
        reference=ReferenceSolution(
            steps=[
                call("read", path=f"{d}/MIGRATION.md"),
                call("read", path=f"{d}/config.yaml"),
                call("write", path=f"{d}/config.v2.yaml", content=v2_text),
                call("exec", command=f"python3 -c \"import yaml; print(yaml.safe_load(open('{d}/config.v2.yaml')))\""),
                call("read", path=f"{d}/logs/access.log", limit=5),
                call("exec", command=status_hist),
                call("exec", command=failing),
                call("write", path=f"{d}/reports/errors.json", content=json.dumps(report, indent=2) + "\n"),
            ],
            final_message=(
                f"config.v2.yaml is written (v1 left in place). The log has {report['total_requests']} requests, "
                f"{report['server_errors']} of them 5xx ({report['error_rate_percent']}%); the worst endpoint is "
                f"{report['top_failing_endpoints'][0]['path']}. Details in reports/errors.json."
            ),
        ),
        metadata={"generators": ["yaml"], "difficulty": "hard"},
    )


# ============================================================================================ 7. xlsx

GRADE_WEIGHTS = [["component", "weight"], ["homework", 0.25], ["lab", 0.15], ["midterm", 0.25], ["final", 0.35]]
FIRST = ["Ava", "Liam", "Maya", "Noah", "Zoe", "Ethan", "Isla", "Lucas", "Mia", "Omar", "Ruby", "Theo", "Leah",
         "Kai", "Nora", "Sami"]
LAST = ["Brooks", "Chen", "Diaz", "Evans", "Fischer", "Garcia", "Hughes", "Ito", "Jensen", "Khan", "Lopez",
        "Moreau", "Novak", "Okafor", "Patel", "Quinn"]
LETTERS = [(90, "A"), (80, "B"), (70, "C"), (60, "D"), (0, "F")]


def gradebook() -> tuple[list[list[Any]], list[list[Any]]]:
    rng = random.Random(3)
    roster = [["student_id", "first_name", "last_name", "period"]]
    scores = [["student_id", "hw1", "hw2", "hw3", "lab", "midterm", "final"]]
    for i in range(16):
        sid = f"S{2401 + i}"
        roster.append([sid, FIRST[i], LAST[(i * 7) % 16], [2, 3, 5][i % 3]])
        base = rng.randint(55, 97)
        hw = [min(100, max(0, base + rng.randint(-12, 10))) for _ in range(3)]
        if i in (4, 10):
            hw[rng.randrange(3)] = None  # missing homework counts as 0
        scores.append([sid, *hw, min(100, base + rng.randint(-5, 8)), min(100, base + rng.randint(-10, 8)),
                       min(100, base + rng.randint(-12, 6))])
    return roster, scores


def grade_rows() -> list[list[Any]]:
    roster, scores = gradebook()
    weights = {c: Decimal(str(w)) for c, w in GRADE_WEIGHTS[1:]}
    by_id = {r[0]: r for r in scores[1:]}
    rows = []
    for sid, first, last, period in roster[1:]:
        if period != 3:
            continue
        _, h1, h2, h3, lab, mid, fin = by_id[sid]
        hw_avg = sum(Decimal(h or 0) for h in (h1, h2, h3)) / 3
        total = (weights["homework"] * hw_avg + weights["lab"] * lab + weights["midterm"] * mid
                 + weights["final"] * fin)
        letter = next(ltr for cut, ltr in LETTERS if total >= cut)
        assert all(abs(total - cut) > Decimal("0.1") for cut, _ in LETTERS[:-1]), "keep clear of letter cut-offs"
        rows.append([sid, last, first, money(hw_avg), str(total.quantize(Decimal("0.1"), ROUND_HALF_UP)), letter])
    rows.sort(key=lambda r: r[1])
    return rows


XLSX_GRADER = r'''
OUT = "exports/period3_grades.csv"
HEADER = ["student_id", "last_name", "first_name", "hw_avg", "weighted_total", "letter"]
_CACHE = {}


def _truth(ws):
    """{student_id: (last, first, hw_avg, total, letter)} recomputed from the workbook with openpyxl."""
    if ws not in _CACHE:
        import openpyxl
        wb = openpyxl.load_workbook(os.path.join(ws, "gradebook.xlsx"), read_only=True, data_only=True)
        rows = {name: [list(r) for r in wb[name].iter_rows(values_only=True)] for name in wb.sheetnames}
        weights = {c: float(w) for c, w in rows["Weights"][1:]}
        scores = {r[0]: r for r in rows["Scores"][1:]}
        truth = {}
        for sid, first, last, period in rows["Roster"][1:]:
            if period != 3:
                continue
            _, h1, h2, h3, lab, mid, fin = scores[sid]
            hw = sum(h or 0 for h in (h1, h2, h3)) / 3
            total = weights["homework"] * hw + weights["lab"] * lab + weights["midterm"] * mid + weights["final"] * fin
            letter = "A" if total >= 90 else "B" if total >= 80 else "C" if total >= 70 else "D" if total >= 60 else "F"
            truth[sid] = (last, first, hw, total, letter)
        _CACHE[ws] = truth if len(truth) == EXPECTED["n_students"] else None
    return _CACHE[ws]


def _rows(ws):
    rows = _csv_rows(ws, OUT)
    if not rows or [c.strip().lower() for c in rows[0]] != HEADER:
        return None
    return [[c.strip() for c in r] for r in rows[1:] if len(r) >= len(HEADER)]


def _per_student(test):
    def check(ws):
        rows, truth = _rows(ws), _truth(ws)
        if not rows or truth is None:
            return 0.0
        ok = sum(1 for r in rows if r[0] in truth and test(r, truth[r[0]]))
        return ok / max(len(truth), len(rows))
    return check


def header_and_period3_students(ws):
    rows, truth = _rows(ws), _truth(ws)
    if not rows or truth is None:
        return 0.0
    return float(sorted(r[0] for r in rows) == sorted(truth))


def sorted_by_last_name(ws):
    rows = _rows(ws)
    if not rows:
        return 0.0
    names = [r[1] for r in rows]
    return float(names == sorted(names) and len(rows) == EXPECTED["n_students"])


def grade(transcript, workspace_path):
    return _run(workspace_path, [
        ("header_and_period3_students", header_and_period3_students),
        ("names_match_roster", _per_student(lambda r, t: (r[1], r[2]) == (t[0], t[1]))),
        ("hw_avg_correct", _per_student(lambda r, t: abs(float(r[3]) - t[2]) < 0.006)),
        ("weighted_total_correct", _per_student(lambda r, t: abs(float(r[4]) - t[3]) < 0.051)),
        ("letter_correct", _per_student(lambda r, t: r[5].upper() == t[4])),
        ("sorted_by_last_name", sorted_by_last_name),
    ])
'''

XLSX_DUMP = (
    "python3 -c \"import openpyxl\n"
    "wb = openpyxl.load_workbook('gradebook.xlsx', read_only=True)\n"
    "for ws in wb:\n"
    "    print('==', ws.title)\n"
    "    for row in ws.iter_rows(values_only=True): print(row)\""
)


def task_xlsx() -> Task:
    roster, scores = gradebook()
    rows = grade_rows()
    out_csv = csv_text(["student_id", "last_name", "first_name", "hw_avg", "weighted_total", "letter"], rows)
    return Task(
        id="example-gradebook-export",
        source=SOURCE,
        category="Content & Domain",
        subcategory="Education",
        operations=["read_xlsx", "join_sheets", "filter_rows", "compute_columns", "write_csv"],
        persona="Laura Kim, a high-school chemistry teacher who keeps grades in Excel and has to upload them to "
        "the school portal as CSV.",
        instruction=(
            "The school portal wants my period 3 grades as a CSV. My workbook gradebook.xlsx has a Roster sheet "
            "(student_id, names, period), a Scores sheet (hw1-hw3, lab, midterm, final, out of 100) and a Weights "
            "sheet.\n\n"
            "Write exports/period3_grades.csv with the header "
            "`student_id,last_name,first_name,hw_avg,weighted_total,letter` and one row per period 3 student, "
            "sorted by last name: hw_avg is the mean of hw1-hw3 where a missing homework counts as 0 (2 "
            "decimals), weighted_total applies the Weights sheet to homework (hw_avg), lab, midterm and final (1 "
            "decimal), and letter is A (90+), B (80+), C (70+), D (60+) or F. Don't edit the workbook."
        ),
        workspace=WorkspaceSpec(files=[
            gen("gradebook.xlsx", "xlsx", sheets={"Roster": roster, "Scores": scores, "Weights": GRADE_WEIGHTS},
                created="2025-01-06T08:00:00"),
        ]),
        verifier=VerifierSpec(code=python_check({"n_students": len(rows)}, XLSX_GRADER)),
        reference=ReferenceSolution(
            steps=[
                call("exec", command=XLSX_DUMP),
                call("write", path="exports/period3_grades.csv", content=out_csv),
                call("exec", command="wc -l exports/period3_grades.csv && cat exports/period3_grades.csv"),
            ],
            final_message=(
                f"Exported {len(rows)} period 3 students to exports/period3_grades.csv with homework averages "
                "(missing homework as 0), weighted totals and letter grades."
            ),
        ),
        metadata={"generators": ["xlsx"], "difficulty": "medium"},
    )


# ============================================================================================ 8. notes

NOTES: list[tuple[str, str, list[str], str]] = [
    ("2025-01-08-advisor-meeting.md", "Advisor meeting, January", ["research", "meetings"],
     "- Chapter 2 draft due end of February\n- Ask Prof. Lindqvist about the second reader\n"),
    ("reading-list-spring.md", "Reading list for spring", ["reading"],
     "1. *Thinking in Systems* - Meadows\n2. *The Craft of Research* - Booth et al.\n"),
    ("ta-office-hours.md", "TA office hours plan", ["teaching", "admin"],
     "Tuesdays 14:00-15:30 in room B214. Post the slot on the course page.\n"),
    ("conference-deadlines.md", "Conference deadlines 2025", ["research"],
     "| Venue | Deadline |\n|-------|----------|\n| CHI | Sep 12 |\n| CSCW | Jul 15 |\n"),
    ("grocery-and-meal-prep.md", "Meal prep ideas", ["personal"],
     "Lentil soup on Sundays, overnight oats for the week.\n"),
    ("stipend-paperwork.md", "Stipend paperwork", ["admin"],
     "Send the signed form to the graduate office before March 3.\n"),
    ("paper-notes-attention.md", "Notes on 'Attention Is All You Need'", ["reading", "research"],
     "Self-attention replaces recurrence; positional encodings carry order.\n"),
    ("grading-rubric-lab3.md", "Grading rubric, lab 3", ["teaching"],
     "Correctness 60%, clarity 25%, style 15%.\n"),
    ("running-plan.md", "Half-marathon training", ["personal", "health"],
     "Week 1: 3 x 5 km easy, 1 x 8 km long run.\n"),
    ("dataset-cleaning-log.md", "Dataset cleaning log", ["research", "data"],
     "Dropped 312 duplicate survey responses; recoded Likert items 1-7.\n"),
]


def note_text(title: str, tags: list[str], body: str) -> str:
    return f"---\ntitle: \"{title}\"\ntags: [{', '.join(tags)}]\n---\n\n# {title}\n\n{body}"


def notes_index() -> str:
    by_tag: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for fname, title, tags, _ in NOTES:
        by_tag[tags[0]].append((title, f"{tags[0]}/{fname}"))
    lines = ["# Notes index", ""]
    for tag in sorted(by_tag):
        lines += [f"## {tag}", ""]
        lines += [f"- [{title}]({link})" for title, link in sorted(by_tag[tag])]
        lines.append("")
    return "\n".join(lines)


NOTES_GRADER = r'''
INDEX = "notes/index.md"


def moved_to_first_tag_folder(ws):
    ok = sum(_text(ws, "notes/" + n["dest"]) == n["content"] for n in EXPECTED["notes"])
    return ok / len(EXPECTED["notes"])


def no_notes_left_at_top_level(ws):
    moved = [n for n in EXPECTED["notes"] if _text(ws, "notes/" + n["dest"]) == n["content"]]
    if not moved:
        return 0.0
    gone = sum(not os.path.exists(os.path.join(ws, "notes", n["file"])) for n in moved)
    return gone / len(EXPECTED["notes"])


def _index(ws):
    raw = _text(ws, INDEX)
    return raw if raw and raw.strip() else None


def index_tag_sections(ws):
    raw = _index(ws)
    if raw is None:
        return 0.0
    heads = [m.group(1).strip().lower() for m in re.finditer(r"^##\s+(.+)$", raw, re.M)]
    return float(heads == EXPECTED["tags"])


def index_links_every_note(ws):
    raw = _index(ws)
    if raw is None:
        return 0.0
    links = re.findall(r"\[([^\]]+)\]\(([^)]+)\)", raw)
    ok = sum(any(t == n["title"] and h.lstrip("./") == n["dest"] for t, h in links) for n in EXPECTED["notes"])
    return ok / len(EXPECTED["notes"])


def index_links_resolve(ws):
    raw = _index(ws)
    if raw is None:
        return 0.0
    links = [h for _, h in re.findall(r"\[([^\]]+)\]\(([^)]+)\)", raw)]
    if not links:
        return 0.0
    return sum(os.path.isfile(os.path.join(ws, "notes", h)) for h in links) / len(links)


def grade(transcript, workspace_path):
    return _run(workspace_path, [
        ("moved_to_first_tag_folder", moved_to_first_tag_folder),
        ("no_notes_left_at_top_level", no_notes_left_at_top_level),
        ("index_tag_sections", index_tag_sections),
        ("index_links_every_note", index_links_every_note),
        ("index_links_resolve", index_links_resolve),
    ])
'''


def task_notes() -> Task:
    expected_notes = [
        {"file": f, "dest": f"{tags[0]}/{f}", "title": title, "content": note_text(title, tags, body)}
        for f, title, tags, body in NOTES
    ]
    tags = sorted({tags[0] for _, _, tags, _ in NOTES})
    move = " && ".join(["cd notes", f"mkdir -p {' '.join(tags)}"] + [f"mv {n['file']} {n['dest']}" for n in expected_notes])
    return Task(
        id="example-notes-organize",
        source=SOURCE,
        category="Planning & Knowledge",
        subcategory="Personal knowledge management",
        operations=["list_files", "parse_front_matter", "create_directories", "move_files", "write_markdown"],
        persona="Ben Okafor, a second-year PhD student whose Obsidian-style notes folder has become a flat pile "
        "of markdown files.",
        instruction=(
            "My notes/ folder is a flat mess. Each note has YAML front matter with a title and a list of tags. "
            "Please file every note into a subfolder of notes/ named after its FIRST tag (e.g. a note tagged "
            "[research, meetings] goes to notes/research/), keeping the file name and content exactly as they "
            "are, so nothing is left loose in notes/.\n\n"
            "Then write notes/index.md starting with `# Notes index`, with one `## <tag>` section per folder in "
            "alphabetical order, each listing its notes as `- [<title>](<tag>/<file name>)` sorted by title."
        ),
        workspace=WorkspaceSpec(files=[text(f"notes/{n['file']}", n["content"]) for n in expected_notes]),
        verifier=VerifierSpec(code=python_check({"notes": expected_notes, "tags": tags}, NOTES_GRADER)),
        reference=ReferenceSolution(
            steps=[
                call("ls", path="notes"),
                call("exec", command="grep -H -E '^(title|tags):' notes/*.md"),
                call("exec", command=move),
                call("write", path="notes/index.md", content=notes_index()),
                call("exec", command="find notes -type f | sort"),
            ],
            final_message=(
                f"Filed {len(NOTES)} notes into {len(tags)} folders ({', '.join(tags)}) by their first tag and wrote "
                "notes/index.md linking every note."
            ),
        ),
        metadata={"generators": [], "difficulty": "easy"},
    )


# --------------------------------------------------------------------------------------------- main

BUILDERS = [
    task_expenses, task_meeting, task_inbox, task_git_bugfix, task_sqlite, task_config, task_xlsx, task_notes,
]


def build_tasks() -> list[Task]:
    return [build() for build in BUILDERS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUT, help="where to write the tasks (JSONL)")
    args = parser.parse_args(argv)
    tasks = build_tasks()
    write_records(args.output, tasks)
    print(f"wrote {len(tasks)} tasks to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
