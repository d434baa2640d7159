"""draft_message: write an email as an .eml file whose recipients, subject and body facts come from the
workspace: a reply to a colleague's question with totals computed from an order sheet, or an announcement to
the active members of a team list; chained, a short update on the previous step's table/records (count,
total, top group), events (each title and date) or document (pasted). Ends a chain."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter, defaultdict

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.ops._docs_common import (
    add_workdays,
    digest,
    email_addr,
    eml_text,
    human_date,
    long_date,
    numeric_col,
    persona_email,
    pick_name,
    role_col,
    table_of,
)
from clawgym.synth.ops.base import (
    DOCUMENT,
    EVENTS,
    RECORDS,
    TABLE,
    Artifact,
    Check,
    OpContext,
    StepPlan,
    python,
    read,
    to_csv,
    write,
)

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


# The program solution of a reply with figures: addresses, subject, category and month copied from the request
# and the question; the figures computed from the order sheet.
REPLY_PROGRAM = """import csv, os, datetime as dt
DATA, OUT = %r, %r
FROM, TO, CC = %r, %r, %r
SUBJECT = %r
CATEGORY, MONTH = %r, %r
m = dt.datetime.strptime(MONTH, '%%B %%Y').strftime('%%Y-%%m')
rows = [r for r in csv.DictReader(open(DATA)) if r['category'] == CATEGORY and r['date'].startswith(m)]
by = {}
for r in rows:
    by[r['supplier']] = by.get(r['supplier'], 0) + float(r['amount'])
top = min(by, key=lambda k: (-by[k], k))
total = sum(float(r['amount']) for r in rows)
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
text = 'From: %%s\\nTo: %%s\\n' %% (FROM, TO) + ('Cc: %%s\\n' %% CC if CC else '') + 'Subject: %%s\\n\\n' %% SUBJECT
text += 'Hello,\\n\\nIn %%s we spent %%.2f on %%s, across %%d orders. The biggest supplier was %%s (%%.2f).\\n' %% (
    MONTH, total, CATEGORY, len(rows), top, by[top])
open(OUT, 'w').write(text)
print('wrote', OUT)
"""


# The program solution of an announcement: the active people of the team list as recipients, the event as
# written in the request, and the planning notes themselves as the body (when, where, agenda, RSVP).
ANNOUNCE_PROGRAM = """import csv, os
NOTES, TEAM, OUT = %r, %r, %r
FROM, EVENT = %r, %r
to = [r['email'] for r in csv.DictReader(open(TEAM)) if r['status'] == 'active']
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
text = 'From: %%s\\nTo: %%s\\nSubject: Invitation: %%s\\n\\n' %% (FROM, ', '.join(to), EVENT) + open(NOTES).read()
open(OUT, 'w').write(text)
print('wrote', OUT, 'to', len(to), 'people')
"""


def _f(v: str) -> float:
    try:
        return float(str(v).replace(",", "").strip() or 0)
    except ValueError:
        return 0.0


def _checks(out: str, to: list[str], subject_has: list[str], body_has: list[str],
            not_to: list[str] | None = None) -> list[Check]:
    rcpt = {"path": out, "to": to}
    if not_to:
        rcpt["not_to"] = not_to
    # the subject and the body count only in a message to the right people: a copy of the mail being answered
    # (its subject, its facts) or the request itself (which states the facts) is no such message, nor is a file
    # without any recipient for the "must not be there" part of the recipients
    recipients = (Check("recipients_right", "gated", parts=[Check("", "docs_eml", rcpt), addressed(out, to)])
                  if not_to else Check("recipients_right", "docs_eml", rcpt))
    checks = [recipients,
              Check("subject_right", "gated", parts=[Check("", "docs_eml", {"path": out, "subject_has": subject_has}),
                                                    addressed(out, to)])]
    checks.append(Check("body_has_key_facts", "gated", parts=[Check("", "docs_eml", {"path": out, "body_has": body_has}),
                                                             addressed(out, to)]))
    return checks


def addressed(out: str, to: list[str]) -> Check:
    """The fraction of the recipients the message at `out` is addressed to (what gates its other checks)."""
    return Check("", "docs_eml", {"path": out, "to": to})


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _iso_date(v) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(v)[:10])
    except ValueError:
        return None


class DraftMessage:
    id = "draft_message"
    consumes: tuple[str, ...] = (DOCUMENT, TABLE, RECORDS, EVENTS)
    produces: tuple[str, ...] = ()
    standalone = True

    # ------------------------------------------------------------------ standalone: reply with totals
    def _reply(self, ctx: OpContext) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        me, my_addr = ctx.persona.name, persona_email(ctx.persona)
        suppliers = flavor.orgs(rng, 4)
        cats = rng.sample(voc["categories"], 3)
        m1 = rng.randint(1, 11)
        rows = []
        for _ in range(rng.randint(12, 20)):
            d = flavor.date_in(rng, 2026, rng.choice([m1, m1 + 1]))
            rows.append([d.isoformat(), rng.choice(suppliers), rng.choice(cats), f"{flavor.amount(rng, 15, 900):.2f}"])
        rows.sort()
        cat, month = rng.choice(cats), rng.choice([m1, m1 + 1])
        sel = [r for r in rows if r[2] == cat and int(r[0][5:7]) == month]
        if len(sel) < 2:  # make sure the question has a real answer
            for _ in range(2):
                d = flavor.date_in(rng, 2026, month)
                rows.append([d.isoformat(), rng.choice(suppliers), cat, f"{flavor.amount(rng, 15, 900):.2f}"])
            rows.sort()
            sel = [r for r in rows if r[2] == cat and int(r[0][5:7]) == month]
        total = round(sum(float(r[3]) for r in sel), 2)
        by_sup: dict[str, float] = defaultdict(float)
        for r in sel:
            by_sup[r[1]] += float(r[3])
        ranked = sorted(by_sup.items(), key=lambda kv: (-kv[1], kv[0]))
        top = ranked[0][0]
        asker = pick_name(rng, (me,))
        asker_org = flavor.org(rng)
        asker_addr = email_addr(asker, asker_org)
        mname = MONTHS[month - 1]
        subject = rng.choice([f"{cat} spend in {mname}?", f"Quick question - {cat} costs", f"Numbers for {mname}"])
        body = (f"Hi {me.split()[0]},\n\nFor the budget review, could you tell me how much we spent on {cat} in "
                f"{mname} 2026, across how many orders, and which supplier got the most of it?\n\n"
                f"Thanks,\n{asker}\n")
        ask_path = ctx.path(rng.choice(["inbox/question.eml", "inbox/budget_question.eml", "mail/request.eml"]))
        data_path = ctx.path(rng.choice(["orders.csv", "purchases_2026.csv", "data/orders.csv"]))
        out = ctx.path(rng.choice(["outbox/reply.eml", "drafts/reply_budget.eml", "outbox/re_question.eml"]))
        cc = None
        if rng.random() < 0.5:
            boss = pick_name(rng, (me, asker))
            cc = (boss, email_addr(boss, flavor.org(rng)))
        sent = dt.datetime(2026, month, 28, 9, 30) + dt.timedelta(days=rng.randint(3, 20))
        files = [
            WorkspaceFile(path=data_path, content=to_csv(["date", "supplier", "category", "amount"], rows)),
            WorkspaceFile(path=ask_path, generate=GeneratedContent(kind="eml", params={
                "from": f"{asker} <{asker_addr}>", "to": my_addr, "subject": subject, "date": sent.isoformat(),
                "body": body})),
        ]
        reply_body = (f"Hi {asker.split()[0]},\n\nIn {mname} 2026 we spent {total:.2f} on {cat}, across {len(sel)} "
                      f"orders. The biggest supplier was {top} ({ranked[0][1]:.2f}).\n\nBest,\n{me}\n")
        to = [asker_addr]
        text = eml_text(f"{me} <{my_addr}>", to, f"Re: {subject}", reply_body, cc=[f"{cc[0]} <{cc[1]}>"] if cc else None)
        cc_txt = f", with {cc[0]} ({cc[1]}) in Cc" if cc else ""
        instruction = rng.choice([
            f"{asker} emailed me a question (`{ask_path}`). Work out the answer from `{data_path}` and draft my "
            f"reply as `{out}`: From {my_addr}, To {asker_addr}{cc_txt}, Subject \"Re: <their subject>\", and a "
            "short plain-text body giving the total (two decimals), the number of orders and the top supplier.",
            f"Please answer the email in `{ask_path}` using the figures in `{data_path}`. Save the reply as an .eml "
            f"file at `{out}` addressed to {asker_addr}{cc_txt} (from {my_addr}), subject 'Re: ' plus the original "
            "subject; in the body state the amount spent (2 decimals), how many orders and which supplier was "
            "the largest.",
        ])
        checks = _checks(out, to + ([cc[1]] if cc else []), ["Re:", subject], [f"{total:.2f}", str(len(sel)), top])
        wrong_total = round(sum(float(r[3]) for r in rows if r[2] == cat), 2)  # forgot the month filter
        partial_body = (f"Hi {asker.split()[0]},\n\nWe spent {wrong_total:.2f} on {cat}. The biggest supplier was "
                        f"{top}.\n\nBest,\n{me}\n")
        partial = eml_text(f"{me} <{my_addr}>", to, subject, partial_body)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks, files=files,
            steps=[read(ask_path), read(data_path), write(out, text)],
            partial=[write(out, partial)],
            program=[read(ask_path), read(data_path), python(REPLY_PROGRAM % (
                data_path, out, my_addr, asker_addr, cc[1] if cc else "", f"Re: {subject}", cat, f"{mname} 2026"))],
            outputs=[],
            summary=f"draft a reply to {ask_path} with the {cat} figures",
            fingerprint=digest(rows, cat, month),
        )

    # ------------------------------------------------------------------ standalone: announcement
    def _announce(self, ctx: OpContext) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        me, my_addr = ctx.persona.name, persona_email(ctx.persona)
        org = flavor.org(rng)
        team = flavor.people(rng, rng.randint(5, 8))
        team = [p for p in team if p != me]
        status = ["active"] * len(team)
        gone = rng.sample(range(len(team)), rng.randint(1, 2))
        for i in gone:
            status[i] = rng.choice(["left", "on leave", "left"])
        emails = [email_addr(p, org) for p in team]
        project = rng.choice(voc["projects"])
        event = rng.choice([f"{project} workshop", f"{project} kick-off", f"{project} review meeting",
                            f"{project} planning session"])
        day = add_workdays(flavor.date_in(rng, 2026), rng.randint(0, 3))
        rsvp = day - dt.timedelta(days=rng.randint(3, 6))
        start = rng.choice(["09:30", "10:00", "13:30", "14:00", "15:00"])
        end_h = int(start[:2]) + rng.choice([1, 2])
        end = f"{end_h:02d}:{start[3:]}"
        room = rng.choice(["Room 2.14", "the main meeting room", "Studio B", f"{org} office, 3rd floor",
                           "the library annex"])
        agenda = rng.sample([f"status of the {rng.choice(voc['items'])} order", "budget for next quarter",
                             "who covers the holidays", f"lessons from the last {rng.choice(voc['projects'])}",
                             "open questions"], 3)
        notes = "\n".join([
            f"# {event[0].upper() + event[1:]} - planning notes", "",
            f"- when: {human_date(rng, day)}, {start}-{end}", f"- where: {room}",
            f"- RSVP by {human_date(rng, rsvp)} (to me)", "- agenda:", *(f"  - {a}" for a in agenda),
            "- invite: everyone on the team list who is still active", "",
        ])
        notes_path = ctx.path(rng.choice(["notes/event_plan.md", "event_notes.md", "planning/meeting.md"]))
        team_path = ctx.path(rng.choice(["team.csv", "contacts/team_list.csv", "members.csv"]))
        out = ctx.path(rng.choice(["outbox/announcement.eml", "drafts/invite.eml", "outbox/invitation.eml"]))
        active = [e for e, s in zip(emails, status, strict=False) if s == "active"]
        inactive = [e for e, s in zip(emails, status, strict=False) if s != "active"]
        title = event[0].upper() + event[1:]
        body = (f"Hi all,\n\nYou are invited to the {event} on {long_date(day)}, {start}-{end}, in {room}.\n\n"
                "Agenda:\n" + "".join(f"- {a}\n" for a in agenda) +
                f"\nPlease RSVP by {long_date(rsvp)}.\n\nThanks,\n{me}\n")
        subject = f"Invitation: {title} on {long_date(day)}"
        text = eml_text(f"{me} <{my_addr}>", active, subject, body)
        instruction = rng.choice([
            f"Draft the announcement for the {event} as `{out}`: from {my_addr} to every active person in "
            f"`{team_path}` (not the ones who left or are on leave), with the event name in the subject, and a "
            f"body giving the date, time, place, agenda and RSVP date from `{notes_path}`.",
            f"Using `{notes_path}`, write the invitation email `{out}` (an .eml). Send it from {my_addr} to the "
            f"active members listed in `{team_path}`; subject must mention the {event}; body must include when "
            "(date and time), where, the agenda points and the RSVP deadline.",
        ])
        checks = _checks(out, active, [event], [f"date:{day.isoformat()}", f"time:{start}", room,
                                                f"date:{rsvp.isoformat()}", *agenda], not_to=inactive)
        partial = eml_text(f"{me} <{my_addr}>", emails, f"Invitation: {title}",
                           f"Hi all,\n\nYou are invited to the {event} on {long_date(day)} in {room}.\n\n{me}\n")
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            files=[WorkspaceFile(path=notes_path, content=notes),
                   WorkspaceFile(path=team_path, content=to_csv(["name", "email", "status"],
                                                                [[p, e, s] for p, e, s in zip(team, emails, status, strict=False)]))],
            steps=[read(notes_path), read(team_path), write(out, text)],
            partial=[write(out, partial)],
            program=[read(notes_path), read(team_path),
                     python(ANNOUNCE_PROGRAM % (notes_path, team_path, out, my_addr, event))],
            outputs=[],
            summary=f"draft the invitation to the {event}",
            fingerprint=digest(notes, active),
        )

    # ------------------------------------------------------------------ chained
    def _recipient(self, ctx: OpContext) -> tuple[str, str]:
        rng = ctx.rng
        name = pick_name(rng, (ctx.persona.name,))
        return name, email_addr(name, flavor.org(rng))

    def _from_table(self, ctx: OpContext, source: Artifact) -> StepPlan:
        rng = ctx.rng
        me, my_addr = ctx.persona.name, persona_email(ctx.persona)
        header, rows = table_of(source)
        value_i = numeric_col(header, rows, role_col(source, "value", header))
        group_i = role_col(source, "group", header)
        if group_i is None:
            for i in range(len(header)):
                vals = [r[i] for r in rows if i < len(r)]
                if (i != value_i and vals and 1 < len(set(vals)) <= max(2, len(vals) // 2)
                        and all(v and len(v) < 40 and not re.fullmatch(r"[\d.,:/ -]+", v) for v in vals)):
                    group_i = i
                    break
        name, addr = self._recipient(ctx)
        facts = [str(len(rows))]
        said = [f"{len(rows)} rows"]
        spec = ["the number of entries"]
        if value_i is not None:
            total = round(sum(_f(r[value_i]) for r in rows if value_i < len(r)), 2)
            facts.append(f"{total:.2f}")
            said.append(f"total {header[value_i]} {total:.2f}")
            spec.append(f"the total of the `{header[value_i]}` column (two decimals)")
        if group_i is not None:
            if value_i is not None:
                sums: dict[str, float] = defaultdict(float)
                for r in rows:
                    if value_i < len(r) and group_i < len(r):
                        sums[r[group_i]] += _f(r[value_i])
                best = sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))
                spec.append(f"the `{header[group_i]}` with the highest total")
            else:
                cnt = Counter(r[group_i] for r in rows if group_i < len(r))
                best = sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0]))
                spec.append(f"the most common `{header[group_i]}`")
            if len(best) == 1 or best[0][1] != best[1][1]:
                facts.append(best[0][0])
                said.append(f"top {header[group_i]}: {best[0][0]}")
            else:
                spec.pop()
        subject = rng.choice([f"Update: {source.path.split('/')[-1]}", "Figures you asked for", "Quick numbers update"])
        out = ctx.path(rng.choice(["outbox/update.eml", "drafts/numbers.eml", "outbox/summary_mail.eml"]))
        body = f"Hi {name.split()[0]},\n\nHere are the numbers from {source.path}:\n" + "".join(
            f"- {s}\n" for s in said) + f"\nBest,\n{me}\n"
        text = eml_text(f"{me} <{my_addr}>", [addr], subject, body)
        instruction = rng.choice([
            f"draft an email to {name} ({addr}) as `{out}`, from {my_addr}, subject \"{subject}\", telling them "
            f"{_and(spec)} in {source.description}.",
            f"write `{out}`: an email from {my_addr} to {addr} with the subject \"{subject}\" that reports "
            f"for `{source.path}`: {'; '.join(spec)}.",
        ])
        checks = _checks(out, [addr], [subject], facts)
        partial = eml_text(f"{me} <{my_addr}>", [addr], "numbers", f"Hi,\n\n{said[0]}.\n\n{me}\n")
        return self._chained_plan(ctx, source, instruction, checks, out, text, partial, f"email {addr} about {source.path}")

    def _from_events(self, ctx: OpContext, source: Artifact) -> StepPlan:
        rng = ctx.rng
        me, my_addr = ctx.persona.name, persona_email(ctx.persona)
        evs = sorted((e for e in source.data if isinstance(e, dict) and e.get("summary") and _iso_date(e.get("start"))),
                     key=lambda e: (str(e["start"]), str(e["summary"])))
        only = ""
        if len(evs) > 8:  # a cut-off by date, so the subset does not depend on the earlier step's order
            cutoff = _iso_date(evs[7]["start"])
            evs = [e for e in evs if _iso_date(e["start"]) <= cutoff]
            only = f" dated up to {cutoff.isoformat()}"
        people = [self._recipient(ctx) for _ in range(rng.randint(1, 3))]
        addrs = [a for _, a in people]
        out = ctx.path(rng.choice(["outbox/schedule.eml", "drafts/dates.eml", "outbox/calendar_update.eml"]))
        subject = rng.choice(["Upcoming dates", "Schedule update", "Dates for your calendar"])
        lines = []
        needles = []
        for e in evs:
            d = str(e["start"])[:10]
            when = dt.date.fromisoformat(d)
            t = str(e["start"])[11:16]
            lines.append(f"- {e['summary']}: {long_date(when)}" + (f" at {t}" if t else ""))
            needles += [str(e["summary"]), f"date:{d}"]
        body = "Hi all,\n\nHere are the dates:\n" + "\n".join(lines) + f"\n\nBest,\n{me}\n"
        text = eml_text(f"{me} <{my_addr}>", addrs, subject, body)
        instruction = rng.choice([
            f"email {', '.join(f'{n} ({a})' for n, a in people)} the dates from {source.description}: write "
            f"`{out}` from {my_addr}, subject \"{subject}\", listing every event{only} with its name and date.",
            f"draft `{out}` (from {my_addr}, to {', '.join(addrs)}, subject \"{subject}\") with one line per event "
            f"in `{source.path}`{only}: the event's name and its date.",
        ])
        checks = _checks(out, addrs, [subject], needles)
        partial = eml_text(f"{me} <{my_addr}>", addrs[:1], subject, "Hi all,\n\n" + lines[0] + "\n")
        if len(addrs) == 1 and len(evs) == 1:
            partial = eml_text(f"{me} <{my_addr}>", addrs, "dates", "Hi all,\n\n" + lines[0] + "\n")
        return self._chained_plan(ctx, source, instruction, checks, out, text, partial, f"email the dates in {source.path}")

    def _from_document(self, ctx: OpContext, source: Artifact) -> StepPlan:
        rng = ctx.rng
        me, my_addr = ctx.persona.name, persona_email(ctx.persona)
        doc = str(source.data).strip()
        lines = [ln.strip() for ln in doc.splitlines() if ln.strip()]
        title = lines[0].lstrip("#").strip() if lines else source.path
        name, addr = self._recipient(ctx)
        subject = f"{rng.choice(['For review', 'FYI', 'Please read'])}: {title[:60].strip()}"
        out = ctx.path(rng.choice(["outbox/share_doc.eml", "drafts/for_review.eml", "outbox/document.eml"]))
        body = f"Hi {name.split()[0]},\n\nPlease find the document below.\n\n{doc}\n\nBest,\n{me}\n"
        text = eml_text(f"{me} <{my_addr}>", [addr], subject, body)
        instruction = rng.choice([
            f"send {source.description} to {name} ({addr}): draft `{out}` from {my_addr} with the subject "
            f"\"{subject}\" and the full text of `{source.path}` pasted into the body.",
            f"draft an email `{out}` to {addr} (from {my_addr}), subject \"{subject}\", whose body contains the "
            f"whole of `{source.path}`.",
        ])
        checks = _checks(out, [addr], [subject], [])
        checks[-1] = Check("body_has_document", "gated", parts=[
            Check("", "docs_eml_has_file", {"path": out, "src": source.path}), addressed(out, [addr])])
        partial = eml_text(f"{me} <{my_addr}>", [addr], subject, f"Hi,\n\nsee {source.path}.\n")
        return self._chained_plan(ctx, source, instruction, checks, out, text, partial, f"email {source.path} to {addr}")

    def _chained_plan(self, ctx, source, instruction, checks, out, text, partial, summary) -> StepPlan:
        reads = [read(source.path)] if "." in source.path.split("/")[-1] else []
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=[*reads, write(out, text)], partial=[write(out, partial)], outputs=[],
            summary=summary, fingerprint=digest(text),
        )

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        if source is not None:
            if source.kind == EVENTS and isinstance(source.data, list) and any(
                    isinstance(e, dict) and e.get("summary") and _iso_date(e.get("start")) for e in source.data):
                return self._from_events(ctx, source)
            if source.kind in (TABLE, RECORDS):
                header, rows = table_of(source)
                if header and rows:
                    return self._from_table(ctx, source)
            if source.kind == DOCUMENT and isinstance(source.data, str) and source.data.strip():
                return self._from_document(ctx, source)
        return self._reply(ctx) if ctx.rng.random() < 0.55 else self._announce(ctx)


GENERATORS = [DraftMessage()]
