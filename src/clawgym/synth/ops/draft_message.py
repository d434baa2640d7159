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
from clawgym.synth.calendar_words import MONTHS
from clawgym.synth.grammar import one_of
from clawgym.synth.ops import operation
from clawgym.synth.ops._docs_common import (
    add_workdays,
    aside,
    digest,
    email_addr,
    eml_text,
    human_date,
    join,
    long_date,
    numeric_col,
    persona_email,
    phrase,
    pick_name,
    reqs,
    role_col,
    short_slug,
    table_of,
    wpath,
)
from clawgym.synth.ops.base import (
    DOCUMENT,
    EVENTS,
    RECORDS,
    TABLE,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    python,
    read,
    to_csv,
    write,
)
from clawgym.synth.ops.programs import render

DATE_COLS = ["date", "order_date", "ordered_on", "booked", "invoice_date", "day"]
SUP_COLS = ["supplier", "vendor", "payee", "merchant", "seller", "paid_to"]
CAT_COLS = ["category", "cost_type", "type", "budget_line", "kind", "account"]
AMT_COLS = ["amount", "cost", "total", "price", "net_amount", "value"]
ROLES = ["my manager", "the treasurer", "our accountant", "the committee chair", "my co-founder", "the auditor",
         "our funder", "the team lead", "my business partner", "the board secretary"]
EMAIL_COLS = ["email", "e_mail", "address", "mail", "email_address"]
# (status column, the value of the people still there, the values of the others)
STATUS_SCHEMES = [("status", "active", ["left", "on leave"]), ("state", "current", ["former", "on leave"]),
                  ("membership", "member", ["lapsed", "resigned"]), ("active", "yes", ["no"]),
                  ("status", "in", ["out", "away"]), ("roster", "on", ["off", "leaver"])]



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


@operation
class DraftMessage(OperationGenerator):
    id = "draft_message"
    consumes: tuple[str, ...] = (DOCUMENT, TABLE, RECORDS, EVENTS)
    produces: tuple[str, ...] = ()
    standalone = True

    # ------------------------------------------------------------------ standalone: reply with totals
    def _reply(self, ctx: OpContext) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        me, my_addr = ctx.persona.name, persona_email(ctx.persona)
        suppliers = flavor.orgs(rng, rng.randint(3, 5))
        cats = rng.sample(voc["categories"], 3)
        dcol, scol, ccol, acol = (rng.choice(DATE_COLS), rng.choice(SUP_COLS), rng.choice(CAT_COLS),
                                  rng.choice(AMT_COLS))
        extra = rng.choice([None, "ref", "notes", "paid_by", "invoice_no"])
        m1 = rng.randint(1, 11)
        rows = []
        for _ in range(rng.randint(12, 22)):
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
        # sometimes one supplier's orders do not count (a closed account, a refund): the request says so
        exclude = ""
        sups_in = sorted({r[1] for r in sel})
        if len(sups_in) >= 2 and rng.random() < 0.35:
            exclude = rng.choice(sups_in)
            sel = [r for r in sel if r[1] != exclude]
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
        subject = rng.choice([f"{cat} spend in {mname}?", f"Quick question - {cat} costs", f"Numbers for {mname}",
                              f"{mname} {cat.lower()} figures", f"Re budget: {cat}", f"Question on {cat} ({mname})",
                              f"{cat} - how much?", f"Before the review: {cat}"])
        purpose = rng.choice(["the budget review", "the board pack", "our quarterly check-in", "the audit file",
                              "the funding report", "next week's planning call"])
        body = (f"Hi {me.split()[0]},\n\nFor {purpose}, could you tell me how much we spent on {cat} in "
                f"{mname} 2026, across how many orders, and which supplier got the most of it?\n\n"
                f"Thanks,\n{asker}\n")
        ask_path = wpath(ctx, ["question", "budget_question", "request", f"from_{flavor.slug(asker.split()[0])}",
                               f"{flavor.slug(cat)}_query", "unanswered"], "eml", ["inbox", "mail", "mail/inbox"],
                         p_folder=0.85)
        data_path = wpath(ctx, ["orders", "purchases_2026", "spend_log", f"{flavor.slug(cat)}_and_more",
                                "order_book", "invoices_2026", "expenses"], "csv", ["data", "finance", "records"],
                          p_world_stem=0.1)
        out = wpath(ctx, ["reply", "reply_budget", "re_question", f"re_{flavor.slug(cat)}",
                          f"answer_{flavor.slug(asker.split()[0])}", "draft_reply"], "eml",
                    ["outbox", "drafts", "mail/drafts", "outgoing"], p_folder=0.85, p_world_folder=0.0)
        cc = None
        if rng.random() < 0.5:
            boss = pick_name(rng, (me, asker))
            cc = (boss, email_addr(boss, flavor.org(rng)))
        sent = dt.datetime(2026, month, 28, 9, 30) + dt.timedelta(days=rng.randint(3, 20))
        header = [dcol, scol, ccol, acol]
        file_rows = [list(r) for r in rows]
        if extra:
            header.append(extra)
            for k, r in enumerate(file_rows):
                r.append({"ref": f"PO-{rng.randint(1000, 9999)}", "notes": rng.choice(["", "", "late", "split",
                                                                                      "partial delivery"]),
                          "paid_by": rng.choice(["card", "transfer", "invoice"]),
                          "invoice_no": f"INV{2026}{k + 1:03d}"}[extra])
        files = [
            WorkspaceFile(path=data_path, content=to_csv(header, file_rows)),
            WorkspaceFile(path=ask_path, generate=GeneratedContent(kind="eml", params={
                "from": f"{asker} <{asker_addr}>", "to": my_addr, "subject": subject, "date": sent.isoformat(),
                "body": body})),
        ]
        reply_body = (f"Hi {asker.split()[0]},\n\nIn {mname} 2026 we spent {total:.2f} on {cat}, across {len(sel)} "
                      f"orders. The biggest supplier was {top} ({ranked[0][1]:.2f}).\n\nBest,\n{me}\n")
        to = [asker_addr]
        text = eml_text(f"{me} <{my_addr}>", to, f"Re: {subject}", reply_body, cc=[f"{cc[0]} <{cc[1]}>"] if cc else None)
        slots = dict(asker=asker, first=asker.split()[0], ask=ask_path, data=data_path, out=out, me=my_addr,
                     to=asker_addr, cat=cat, org=asker_org, month=mname, d=dcol, s=scol, c=ccol, a=acol,
                     ex=exclude, cc=cc[1] if cc else "", ccn=cc[0] if cc else "", purpose=purpose)
        intro = one_of(rng, [
            "[I got|There's] a [question|quick question|query] from {asker} [about {cat}|for {purpose}|] - it's in "
            "`{ask}`.",
            "There's [an email|a message|a mail] from {asker} [at {org}|] in `{ask}` [that needs an answer|"
            "I haven't answered yet|waiting for a reply].",
            "[Can you|Could you|Please] [answer|reply to|deal with] {first}'s [email|question|message] (`{ask}`)?",
            "`{ask}` is a question from {asker} about our {cat} [spending|costs|orders] in {month}.",
            "I owe {asker} [an answer|a reply|some numbers] - [see|the question is in|read] `{ask}`.",
            "[A reply is overdue|I still haven't replied] to {asker} ({org}), who asked about {cat} in {month}: "
            "`{ask}`.",
            "[Budget season|The {purpose}] again: {first} [needs|asked for] our {month} {cat} figures (`{ask}`).",
        ], **slots)
        data = one_of(rng, [
            "The figures are in `{data}` (one row per order: `{d}`, `{s}`, `{c}`, `{a}`).",
            "[Work out|Calculate|Get] the answer from `{data}`: [use|go by] `{a}` for the money, `{s}` for the "
            "supplier, `{d}` for the date and `{c}` for the category.",
            "[Everything you need|All the numbers|The data] [is|sits] in `{data}`[, one line per order|]; the "
            "columns [that matter|you need] are `{c}`, `{d}`, `{s}` and `{a}`.",
            "[Use|Take] `{data}` - `{a}` is what we paid, `{s}` who we paid, `{c}` the budget line and `{d}` "
            "the order date.",
        ], **slots)
        excl = ""
        if exclude:
            excl = one_of(rng, [
                "[Leave out|Don't count|Skip|Ignore] [the orders from|anything from] {ex}[: that account is closed|"
                " - those were refunded|, they're billed to another budget|: we cancelled that contract].",
                "[One thing:|Note:|Careful:] {ex} [doesn't count|must not be included|is excluded] "
                "([it was refunded|the account is closed|it goes through a different budget]).",
            ], **slots)
        items = [phrase(rng, ["[from|sent from] {me}", "{me} as the sender", "my address ({me}) in From"], me=my_addr),
                 phrase(rng, ["[to|addressed to] {to}", "{first} ({to}) as the recipient", "To: {to}",
                              "[going|sent] back to {to}"], **slots)
                 + (" " + phrase(rng, ["[with|and] {ccn} ({cc}) [in Cc|on copy|cc'd]",
                                       "[copying|cc'ing] {ccn} at {cc}[ - they asked to see it|]",
                                       "[plus|and] {cc} [in Cc|on copy] ({ccn} [wants to follow this|keeps "
                                       "track of the budget])"], **slots) if cc else ""),
                 phrase(rng, ['[the subject|subject] "Re: " [followed by|plus|and then] [their|the original] subject',
                              '[keep|reuse] {first}\'s subject line with "Re: " [in front|before it]',
                              '[a|the usual] reply subject: "Re: " + [what they wrote|the subject of `{ask}`]'],
                        **slots),
                 phrase(rng, ["[the total|the amount spent|how much we spent] [with|to] two decimals",
                              "the [overall|total] {cat} [spend|amount] for {month}, [to the cent|two decimal "
                              "places]",
                              "[what it came to|the sum] [in {month}|for the month], [written |]with two decimals"],
                        **slots),
                 phrase(rng, ["[the number of orders|how many orders there were|the order count]",
                              "[how many|the count of] [orders|purchases] [that covers|that sum is made of|it "
                              "took]",
                              "[in|across] how many [orders|separate orders] [it was spent|that went]"], **slots),
                 phrase(rng, ["[the top supplier|which supplier got the most|the biggest supplier by amount]",
                              "[which supplier|who] got the [most|largest share] [of it|of that money]",
                              "who we paid the most",
                              "the supplier with the [highest|largest] [{cat} |]total [that month|in {month}]"],
                        **slots)]
        lead = one_of(rng, ["[Draft|Write|Save|Put] [my reply|the answer|a reply] [as|in|into] `{out}`[ (an email "
                            "file)| as a plain-text email|]:",
                            "The [reply|answer] [goes|should go] in `{out}`[, an .eml|, plain text|]. [It "
                            "needs|Include|Make sure it has]:",
                            "[Please|Can you] [leave|save] [a draft|the reply] [at|in] `{out}` [for me to "
                            "send|that I can send]. [It should have|Put in|Give it]:",
                            "`{out}` [will be|is] the reply[ (an email file)|]; [it should contain|what goes in]:"],
                      out=out)
        instruction = join(intro, data, excl, reqs(rng, items, lead=lead), aside(rng, ctx.persona))
        checks = _checks(out, to + ([cc[1]] if cc else []), ["Re:", subject], [f"{total:.2f}", str(len(sel)), top])
        wrong_total = round(sum(float(r[3]) for r in rows if r[2] == cat), 2)  # forgot the month filter
        partial_body = (f"Hi {asker.split()[0]},\n\nWe spent {wrong_total:.2f} on {cat}. The biggest supplier was "
                        f"{top}.\n\nBest,\n{me}\n")
        partial = eml_text(f"{me} <{my_addr}>", to, subject, partial_body)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks, files=files,
            steps=[read(ask_path), read(data_path), write(out, text)],
            partial=[write(out, partial)],
            program=[read(ask_path), read(data_path), python(render(
                "draft_message_reply", data=data_path, out=out, sender=my_addr, to=asker_addr,
                cc=cc[1] if cc else "", subject=f"Re: {subject}", date_col=dcol, supplier_col=scol, cat_col=ccol,
                amount_col=acol, category=cat, month=f"{mname} 2026", exclude=exclude))],
            outputs=[],
            summary=f"draft a reply to {ask_path} with the {cat} figures",
            fingerprint=digest(rows, cat, month, exclude),
        )

    # ------------------------------------------------------------------ standalone: announcement
    def _announce(self, ctx: OpContext) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        me, my_addr = ctx.persona.name, persona_email(ctx.persona)
        org = flavor.org(rng)
        team = flavor.people(rng, rng.randint(5, 9))
        team = [p for p in team if p != me]
        ecol = rng.choice(EMAIL_COLS)
        scol, active_v, gone_vals = rng.choice(STATUS_SCHEMES)
        status = [active_v] * len(team)
        gone = rng.sample(range(len(team)), rng.randint(1, 2))
        for i in gone:
            status[i] = rng.choice(gone_vals)
        emails = [email_addr(p, org) for p in team]
        project = rng.choice(voc["projects"])
        event = rng.choice([f"{project} workshop", f"{project} kick-off", f"{project} review meeting",
                            f"{project} planning session", f"{project} retrospective", f"{project} drop-in",
                            f"{project} briefing", f"{project} lunch-and-learn"])
        day = add_workdays(flavor.date_in(rng, 2026), rng.randint(0, 3))
        rsvp = day - dt.timedelta(days=rng.randint(3, 6))
        start = rng.choice(["08:30", "09:00", "09:30", "10:00", "11:00", "13:30", "14:00", "15:00", "16:00"])
        end_h = int(start[:2]) + rng.choice([1, 2])
        end = f"{end_h:02d}:{start[3:]}"
        room = rng.choice(["Room 2.14", "the main meeting room", "Studio B", f"{org} office, 3rd floor",
                           "the library annex", f"Room {rng.randint(1, 4)}.{rng.randint(1, 30):02d}",
                           "the staff room", f"the {rng.choice(['Oak', 'Cedar', 'Harbour', 'Garden'])} room",
                           f"{rng.choice(flavor.CITIES)} hub, ground floor"])
        agenda = rng.sample([f"status of the {rng.choice(voc['items'])} order", "budget for next quarter",
                             "who covers the holidays", f"lessons from the last {rng.choice(voc['projects'])}",
                             "open questions", f"{rng.choice(voc['categories']).lower()} costs so far",
                             f"new rota from {MONTHS[day.month % 12]}", f"feedback from {flavor.org(rng)}",
                             f"timeline for the {project}"], rng.randint(3, 4))
        notes = "\n".join([
            f"# {event[0].upper() + event[1:]} - {rng.choice(['planning notes', 'notes', 'prep', 'plan'])}", "",
            f"- when: {human_date(rng, day)}, {start}-{end}", f"- where: {room}",
            f"- RSVP by {human_date(rng, rsvp)} (to me)", "- agenda:", *(f"  - {a}" for a in agenda),
            f"- invite: everyone on the team list who is still {active_v}", "",
        ])
        notes_path = wpath(ctx, ["event_plan", "event_notes", "meeting", f"{flavor.slug(project)}_prep",
                                 "invite_notes", "plan"], "md", ["notes", "planning", "events"])
        team_path = wpath(ctx, ["team", "team_list", "members", "staff", "distribution_list", "people"], "csv",
                          ["contacts", "admin", "lists"])
        out = wpath(ctx, ["announcement", "invite", "invitation", f"invite_{short_slug(event)}",
                          "save_the_date"], "eml", ["outbox", "drafts", "mail/drafts", "outgoing"], p_folder=0.8,
                    p_world_folder=0.0)
        active = [e for e, s in zip(emails, status, strict=False) if s == active_v]
        inactive = [e for e, s in zip(emails, status, strict=False) if s != active_v]
        title = event[0].upper() + event[1:]
        body = (f"Hi all,\n\nYou are invited to the {event} on {long_date(day)}, {start}-{end}, in {room}.\n\n"
                "Agenda:\n" + "".join(f"- {a}\n" for a in agenda) +
                f"\nPlease RSVP by {long_date(rsvp)}.\n\nThanks,\n{me}\n")
        subject = f"Invitation: {title} on {long_date(day)}"
        text = eml_text(f"{me} <{my_addr}>", active, subject, body)
        slots = dict(event=event, out=out, team=team_path, notes=notes_path, me=my_addr, e=ecol, s=scol,
                     v=active_v, gone=" or ".join(f'"{g}"' for g in gone_vals))
        head = one_of(rng, [
            "[Draft|Write|Prepare] the [announcement|invitation|invite] for the {event} as `{out}`.",
            "[I need to|Time to|Help me] [invite people to|announce] the {event}: [put|save] the email in `{out}`.",
            "[Could you|Can you|Please] [write|draft] an invitation email (`{out}`) for the {event}?",
            "The {event} [is coming up|needs an invite|is set] - [draft|prepare] the mail as `{out}`.",
            "[Invites|Invitations] for the {event} [haven't gone out yet|are still to do]: [write|draft] one email, "
            "`{out}`.",
            "[Let's get people to|Time to invite the team to] the {event} - one [mail|email] as `{out}`.",
        ], **slots)
        who = one_of(rng, [
            "[Send it|It goes] from {me} to every person in `{team}` whose `{s}` is \"{v}\" (not {gone}); "
            "their address is in `{e}`.",
            "Recipients: [the people|everyone] in `{team}` with `{s}` = {v}[, nobody else|; skip the rest] "
            "(addresses in the `{e}` column); sender {me}.",
            "[Address|Send] it to the people listed in `{team}` whose `{s}` [is|says] \"{v}\" (emails under "
            "`{e}`), from {me}.",
            "[Only|Just] [the people|those] [on|in] `{team}` [with|whose] `{s}` [\"{v}\"|is \"{v}\"] [get it|are "
            "invited] - [leave out|not] anyone marked {gone}. [Addresses|Emails] [are in|come from] `{e}`; [it's sent "
            "from|the sender is] {me}.",
            "[Who|The list]: `{team}`[, but|, though] [only|just] [rows|those] [where|whose] `{s}` [reads|is] "
            "\"{v}\" ([people marked|anyone] {gone} [shouldn't get it|stay off the list]). [Use|Take] the `{e}` "
            "column for [the addresses|To], and {me} as From.",
            "From {me}; To: [everybody|all the people] in `{team}` [still|currently] `{s}` = \"{v}\" "
            "([their|the] `{e}` [value|column])[, no one who is {gone}|].",
        ], **slots)
        items = [phrase(rng, ["[the event name|the words \"{event}\"] in the subject",
                              "a subject [that names|mentioning|with] [the {event}|\"{event}\"]",
                              "\"{event}\" [somewhere |][in|as part of] the subject [line|]"], event=event),
                 phrase(rng, ["the date and [the time|start time]", "[when it is|when it happens] ([day and "
                              "time|date plus start time])", "[day|date], [start time|start] and [end|finish] as "
                              "in the notes"]),
                 phrase(rng, ["[the place|where it is]", "the [room|venue|location]", "where [to go|we meet]"]),
                 phrase(rng, ["[the agenda points|every agenda item|the agenda]", "[each|all the] [topics|points] "
                              "on the agenda", "what we'll [cover|discuss] ([all of the agenda|every "
                              "point])"]),
                 phrase(rng, ["[the RSVP date|the RSVP deadline|when to reply by]", "[by when|the date by which] "
                              "people [should|must] [RSVP|answer]", "[a|the] [reply-by|respond-by] date"])]
        lead = one_of(rng, ["[Everything comes|The details come|Take the details] from `{notes}`[; include|. "
                            "Include|, and the mail needs]:",
                            "[My|The] [planning notes|notes] [are in|sit in] `{notes}` - [use them for|the mail "
                            "should carry]:",
                            "[Go by|Work from|Base it on] `{notes}` [and make sure the mail has|; it must "
                            "mention]:",
                            "[From|Using] `{notes}`, [put in|the email needs]:"], notes=notes_path)
        instruction = join(head, who, reqs(rng, items, lead=lead), aside(rng, ctx.persona))
        checks = _checks(out, active, [event], [f"date:{day.isoformat()}", f"time:{start}", room,
                                                f"date:{rsvp.isoformat()}", *agenda], not_to=inactive)
        partial = eml_text(f"{me} <{my_addr}>", emails, f"Invitation: {title}",
                           f"Hi all,\n\nYou are invited to the {event} on {long_date(day)} in {room}.\n\n{me}\n")
        name_col = rng.choice(["name", "person", "full_name", "member"])
        cols = [name_col, ecol, scol]
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            files=[WorkspaceFile(path=notes_path, content=notes),
                   WorkspaceFile(path=team_path, content=to_csv(cols,
                                                                [[p, e, s] for p, e, s in zip(team, emails, status, strict=False)]))],
            steps=[read(notes_path), read(team_path), write(out, text)],
            partial=[write(out, partial)],
            program=[read(notes_path), read(team_path),
                     python(render("draft_message_announce", notes=notes_path, team=team_path, out=out,
                                   sender=my_addr, event=event, email_col=ecol, status_col=scol, active=active_v))],
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
        spec = [phrase(rng, ["the number of entries", "how many [rows|entries|lines] there are",
                             "the [row|entry] count", "[how many|the count of] [records|items] [it has|in it]",
                             "[the size of the list|how long the list is] ([in rows|number of rows])"])]
        if value_i is not None:
            total = round(sum(_f(r[value_i]) for r in rows if value_i < len(r)), 2)
            facts.append(f"{total:.2f}")
            said.append(f"total {header[value_i]} {total:.2f}")
            spec.append(phrase(rng, ["the total of the `{v}` column (two decimals)", "the sum of `{v}` to two "
                                     "decimals", "the `{v}` total (2 decimals)",
                                     "[what|how much] `{v}` [adds up to|comes to] [overall|in total] ([2 "
                                     "decimal places|to the cent])",
                                     "[a grand total|the overall sum] [over|of] `{v}`, [written |]with two "
                                     "decimals"], v=header[value_i]))
        if group_i is not None:
            if value_i is not None:
                sums: dict[str, float] = defaultdict(float)
                for r in rows:
                    if value_i < len(r) and group_i < len(r):
                        sums[r[group_i]] += _f(r[value_i])
                best = sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))
                spec.append(phrase(rng, ["the `{g}` with the highest total", "which `{g}` has the largest total",
                                         "the top `{g}` by total", "[which|the] `{g}` [that comes out on top|that "
                                         "leads] [by amount|when you add up the values]",
                                         "[the biggest|the largest] `{g}` [group|] [measured by|by summed] "
                                         "value"], g=header[group_i]))
            else:
                cnt = Counter(r[group_i] for r in rows if group_i < len(r))
                best = sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0]))
                spec.append(phrase(rng, ["the most common `{g}`", "which `{g}` comes up most often",
                                         "the `{g}` that appears most", "the `{g}` with the most [rows|entries]",
                                         "[which|the] `{g}` [that shows up|occurring] [most frequently|the most "
                                         "times]"], g=header[group_i]))
            if len(best) == 1 or best[0][1] != best[1][1]:
                facts.append(best[0][0])
                said.append(f"top {header[group_i]}: {best[0][0]}")
            else:
                spec.pop()
        # a few more figures, drawn: each one the request asks for is checked in the body
        vals = [_f(r[value_i]) for r in rows if value_i is not None and value_i < len(r)]
        if vals and rng.random() < 0.45:
            avg = round(sum(vals) / len(vals), 2)
            facts.append(f"{avg:.2f}")
            said.append(f"average {header[value_i]} {avg:.2f}")
            spec.append(phrase(rng, ["the average `{v}` (two decimals)", "the mean of `{v}`, to two decimals",
                                     "what the average `{v}` per entry is (2 decimals)",
                                     "[the|a] per-[row|entry] average of `{v}` [rounded to|with] two decimals",
                                     "`{v}` [on average|averaged over the rows] (two decimal places)"],
                               v=header[value_i]))
        if vals and rng.random() < 0.4:
            mx = max(vals)
            facts.append(f"{mx:.2f}")
            said.append(f"largest {header[value_i]} {mx:.2f}")
            spec.append(phrase(rng, ["the largest single `{v}`", "the biggest `{v}` of any one entry",
                                     "the highest `{v}` in a single row", "[the maximum|the peak] `{v}` [value|]",
                                     "[which|what] [single |]`{v}` [is the largest|tops the list]"],
                               v=header[value_i]))
        if group_i is not None and rng.random() < 0.4:
            ng = len({r[group_i] for r in rows if group_i < len(r)})
            facts.append(str(ng))
            said.append(f"{ng} different {header[group_i]} values")
            spec.append(phrase(rng, ["how many different `{g}` values there are", "the number of distinct `{g}`",
                                     "how many `{g}` groups", "[in|across] how many [separate|distinct] `{g}` "
                                     "[values|groups] [the rows fall|they are spread]",
                                     "the count of [unique|different] `{g}`"], g=header[group_i]))
        subject = rng.choice([f"Update: {source.path.split('/')[-1]}", "Figures you asked for", "Quick numbers update",
                              f"Numbers from {source.path.split('/')[-1]}", "The figures", "Where we stand",
                              f"Summary for {name.split()[0]}", "Latest totals", "This month in numbers",
                              f"{source.path.split('/')[-1]}: the short version", "Totals, as promised",
                              "Numbers before the meeting", f"For {name.split()[0]}: key figures", "Data check-in"])
        out = wpath(ctx, ["update", "numbers", "summary_mail", "figures", f"to_{flavor.slug(name.split()[0])}",
                          "status_update"], "eml", ["outbox", "drafts", "mail/drafts", "outgoing"], p_folder=0.8,
                    p_world_folder=0.0)
        body = f"Hi {name.split()[0]},\n\nHere are the numbers from {source.path}:\n" + "".join(
            f"- {s}\n" for s in said) + f"\nBest,\n{me}\n"
        text = eml_text(f"{me} <{my_addr}>", [addr], subject, body)
        role = rng.choice(ROLES)
        slots = dict(name=name, first=name.split()[0], addr=addr, out=out, me=my_addr, subject=subject,
                     desc=source.description, src=source.path, role=role)
        head = one_of(rng, [
            "[{role} {name} ({addr})|{name} ({addr}), {role},] [asked for|wants|needs] [an update|the figures|a "
            "summary] [on|from] {desc}: [write|draft] `{out}` from {me}, subject \"{subject}\",",
            "[draft|write|prepare] an email to {name} ({addr}) as `{out}`, from {me}, [with the |]subject "
            "\"{subject}\",",
            "[tell {first} ({addr}) [how things stand|where we are]|let {first} ({addr}) know the numbers] by "
            "email: `{out}`, from {me}, subject \"{subject}\";",
            "[write|put together] `{out}`, a [short|brief|plain] email from {me} to {addr} [(subject \"{subject}\")|"
            "under the subject \"{subject}\"] -",
            "[my colleague|our contact|the person who asked,] {first} ({addr}), [asked about|wants the figures from|"
            "needs the numbers in] {desc}: [draft|save] the mail as `{out}` (from {me}, subject \"{subject}\"),",
            "[mail|send] the [headline numbers|key figures] of `{src}` to {role} ({addr}) - [a draft in|saved as] "
            "`{out}`, sender {me}, [subject|titled] \"{subject}\" -",
            "{first} at {addr} [is waiting for|keeps asking about] these numbers; [one|a] [short |]email "
            "(`{out}`, from {me}, \"{subject}\" as the subject)",
            "[report back to|update] {name} <{addr}> [on|about] {desc} in `{out}` ([sent |]from {me}; subject "
            "\"{subject}\"),",
        ], **slots)
        instruction = join(head, reqs(rng, spec, lead=phrase(rng, [
            "[telling them|reporting|giving|with] [for `{src}`|from {desc}]",
            "[and in the body|the body should give|it should state] [the figures from `{src}`|, from `{src}`,]",
            "[covering|with these numbers on] {desc}:", "[which gives|that says] - [based on|computed from] "
            "`{src}` -"], src=source.path, desc=source.description)))
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
        out = wpath(ctx, ["schedule", "dates", "calendar_update", "upcoming", "dates_for_team", "save_the_dates"],
                    "eml", ["outbox", "drafts", "mail/drafts", "outgoing"], p_folder=0.8, p_world_folder=0.0)
        subject = rng.choice(["Upcoming dates", "Schedule update", "Dates for your calendar", "What's coming up",
                              "Diary dates", "Key dates", "Calendar: the next few weeks", "Please note these dates",
                              "Dates to block out", "The plan, date by date", "Save these dates", "Schedule, final"])
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
        slots = dict(who=", ".join(f"{n} ({a})" for n, a in people), addrs=", ".join(addrs), out=out, me=my_addr,
                     subject=subject, desc=source.description, src=source.path, only=only)
        instruction = one_of(rng, [
            "email {who} the dates from {desc}: write `{out}` from {me}, subject \"{subject}\", listing every "
            "event{only} with its name and date.",
            "draft `{out}` (from {me}, to {addrs}, subject \"{subject}\") with one line per event in `{src}`{only}: "
            "the event's name and its date.",
            "[let|make sure] {who} [know|have] the dates: [save|put] an email in `{out}` [sent |]from {me} "
            "[titled|with the subject] \"{subject}\" [that lists|naming] [each|every] event{only} in `{src}` "
            "[with|and] its date.",
            "[send|share] [the schedule in `{src}`|what's in `{src}`] with {addrs} - the mail goes to `{out}`, from {me}, "
            "subject \"{subject}\"; [one line per event{only}, name and date|each event{only}: what and when].",
            "{who} [need|should get] the [calendar|dates] too. [Write|Save] [an email|a message] to them at `{out}` "
            "(sender {me}, \"{subject}\" as the subject) [that gives|with] [every|each] event{only} of `{src}` "
            "[and the day it falls on|together with its date].",
            "[put|turn] the events{only} [of|from] {desc} into [a|one] [mail|message] for {addrs}: `{out}`, from "
            "{me}, [titled|subject] \"{subject}\" - [for each:|per event,] [the title and the date|its name, its "
            "date].",
            "[a|one] [save-the-date|heads-up] [mail|email] `{out}` from {me} to {addrs} [(subject \"{subject}\")|"
            "under \"{subject}\"], [naming|listing] [each|every] event{only} [in `{src}`|from {desc}] [and its "
            "date|with the date].",
        ], **slots)
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
        subject = (f"{rng.choice(['For review', 'FYI', 'Please read', 'Draft', 'For comments', 'Latest version', 'Shared'])}"
                   f": {title[:60].strip()}")
        out = wpath(ctx, ["share_doc", "for_review", "document", "fyi", f"to_{flavor.slug(name.split()[0])}",
                          "doc_mail"], "eml", ["outbox", "drafts", "mail/drafts", "outgoing"], p_folder=0.8,
                    p_world_folder=0.0)
        body = f"Hi {name.split()[0]},\n\nPlease find the document below.\n\n{doc}\n\nBest,\n{me}\n"
        text = eml_text(f"{me} <{my_addr}>", [addr], subject, body)
        instruction = one_of(rng, [
            "send {desc} to {name} ({addr}): draft `{out}` from {me} with the subject \"{subject}\" and the full "
            "text of `{src}` pasted into the body.",
            "draft an email `{out}` to {addr} (from {me}), subject \"{subject}\", whose body contains the whole "
            "of `{src}`.",
            "[{first} ({addr}) should see|forward|share] [it|the result|`{src}`] - [write|put] the mail in `{out}` "
            "(from {me}, subject \"{subject}\") with [all of `{src}`|the complete text of `{src}`] [in the body|"
            "pasted in|inline], [not as an attachment|no attachments|not just a link].",
            "[paste|put] [the whole of|all of] `{src}` into an email to {name} <{addr}>: file `{out}`, sender {me}, "
            "subject \"{subject}\".",
            "{first} ({addr}) [hasn't seen|doesn't have] {desc} yet. [Draft|Write] `{out}` from {me} - subject "
            "\"{subject}\" - [and put|with] [the text of `{src}`|`{src}` itself] [in the body, in full|in full "
            "in the body].",
            "[mail|email] `{src}` [word for word|in full|unabridged] to {addr}: [save|leave] the draft as `{out}`, "
            "[from|sender] {me}, [subject|with the subject line] \"{subject}\"[; no attachment, inline text|].",
            "[a message|an email] for {name} <{addr}> in `{out}`, [sent |]from {me}, [titled|subject] "
            "\"{subject}\" - [its body is|the body carries] the [complete|whole] [document|text] of `{src}`.",
        ], name=name, first=name.split()[0], addr=addr, out=out, me=my_addr, subject=subject,
            desc=source.description, src=source.path)
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
