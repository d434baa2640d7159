"""generate_from_template: fill a template once per data row: letters, certificates or invoices as one file
per row at stated paths, or a mail merge with one .eml per row; cancelled rows are skipped. Chained: the
previous step's table or records become the data of a notice per row."""

from __future__ import annotations

import datetime as dt
import json
import re

from clawgym.checks.checklib_docs import _docs_has
from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import operation
from clawgym.synth.ops._docs_common import (
    add_workdays,
    aside,
    date_col,
    digest,
    email_addr,
    eml_text,
    join,
    long_date,
    numeric_col,
    persona_email,
    phrase,
    reqs,
    role_col,
    table_of,
    text_col,
    wfolder,
    wpath,
)
from clawgym.synth.ops.base import (
    DOCUMENT,
    MESSAGES,
    RECORDS,
    TABLE,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    read,
    to_csv,
    write,
)

SYNTAX = [("{{", "}}"), ("{", "}"), ("<<", ">>"), ("[[", "]]")]


def _ph(syntax: tuple[str, str], field: str) -> str:
    return f"{syntax[0]}{field}{syntax[1]}"


def _fill(template: str, syntax: tuple[str, str], row: dict[str, str]) -> str:
    out = template
    for k, v in row.items():
        out = out.replace(_ph(syntax, k), v)
    return out


KINDS = {
    "letter": {
        "fields": ["member_id", "name", "email", "amount", "due_date"],
        "title": "renewal letters",
        "dir": "letters",
        "body": ("# Membership renewal\n\nDear {name},\n\nThank you for another year with {org}. Your membership "
                 "({member_id}) is up for renewal; the fee of {amount} is due on {due_date}.\n\nYou can pay by bank "
                 "transfer quoting your member number, or reply to this letter if your details have changed.\n\n"
                 "Kind regards,\n{me}\n"),
        "subject": "Your {org} membership renewal ({member_id})",
    },
    "certificate": {
        "fields": ["cert_id", "name", "email", "course", "hours", "date"],
        "title": "completion certificates",
        "dir": "certificates",
        "body": ("# Certificate of completion\n\nThis certifies that **{name}** completed the course "
                 "\"{course}\" ({hours} hours) on {date}.\n\nCertificate number: {cert_id}\n\nIssued by {org}\n"),
        "subject": "Your certificate for {course} ({cert_id})",
    },
    "invoice": {
        "fields": ["invoice_no", "client", "email", "service", "amount", "due_date"],
        "title": "invoices",
        "dir": "invoices",
        "body": ("# Invoice {invoice_no}\n\nFrom: {me}, {org}\nBill to: {client}\n\n| Service | Amount |\n|---|---|\n"
                 "| {service} | {amount} |\n\nTotal due: {amount}\nPayment due by: {due_date}\n\nThank you for your "
                 "business.\n"),
        "subject": "Invoice {invoice_no} from {org}",
    },
}
KINDS.update({
    "reminder": {
        "fields": ["ref", "name", "email", "appointment", "time", "place"],
        "title": "appointment reminders",
        "dir": "reminders",
        "body": ("# Appointment reminder\n\nHello {name},\n\nThis is a reminder of your appointment on {appointment} "
                 "at {time}, at {place}. Your reference is {ref}.\n\nIf you cannot make it, please tell us at least "
                 "24 hours before.\n\n{me}\n{org}\n"),
        "subject": "Reminder: your appointment on {appointment} ({ref})",
    },
    "receipt": {
        "fields": ["receipt_no", "name", "email", "item", "amount", "paid_on"],
        "title": "receipts",
        "dir": "receipts",
        "body": ("# Receipt {receipt_no}\n\nReceived from {name} the sum of {amount} for {item}, paid on "
                 "{paid_on}.\n\nThank you,\n{me}, {org}\n"),
        "subject": "Receipt {receipt_no} - {org}",
    },
    "welcome": {
        "fields": ["member_id", "name", "email", "start_date", "buddy"],
        "title": "welcome letters",
        "dir": "welcome",
        "body": ("# Welcome to {org}\n\nDear {name},\n\nWe are glad to have you with us from {start_date}. Your "
                 "member number is {member_id}, and {buddy} will show you around in your first week.\n\nSee you "
                 "soon,\n{me}\n"),
        "subject": "Welcome to {org}, {name} ({member_id})",
    },
    "badge": {
        "fields": ["badge_id", "name", "email", "role", "event"],
        "title": "name badges",
        "dir": "badges",
        "body": "# {event}\n\n## {name}\n\n{role}\n\nBadge {badge_id} - issued by {org}\n",
        "subject": "Your badge for {event} ({badge_id})",
    },
})
# Kinds of one domain (flavor.persona_domain): drawn alongside the general ones above for its personas.
DOMAIN_KINDS = {
    "payment_reminder": ("finance legal creative general", {
        "fields": ["invoice_no", "client", "email", "amount", "due_date"],
        "title": "payment reminders",
        "dir": "payment_reminders",
        "body": ("# Friendly reminder: invoice {invoice_no}\n\nDear {client},\n\nOur records show that invoice "
                 "{invoice_no} for {amount} is still open. Could you arrange payment by {due_date}? If it has "
                 "already gone out, please ignore this note.\n\nWith thanks,\n{me}\n{org}\n"),
        "subject": "Reminder: invoice {invoice_no} from {org} is due",
    }),
    "parent_letter": ("education", {
        "fields": ["ref", "name", "email", "appointment", "time", "place"],
        "title": "parent meeting letters",
        "dir": "parent_letters",
        "body": ("# Parent-teacher meeting\n\nDear {name},\n\nYou are booked for a parent-teacher meeting on "
                 "{appointment} at {time} in {place}. Please quote {ref} if you need to move it.\n\nBest "
                 "wishes,\n{me}\n{org}\n"),
        "subject": "Parent-teacher meeting on {appointment} ({ref})",
    }),
    "course_place": ("education health software general", {
        "fields": ["member_id", "name", "email", "course", "start_date"],
        "title": "course place confirmations",
        "dir": "course_places",
        "body": ("# Your place on {course}\n\nHi {name},\n\nYour place on \"{course}\" is confirmed from "
                 "{start_date}. Your participant number is {member_id}; bring it on the first day.\n\n{me}, "
                 "{org}\n"),
        "subject": "Place confirmed: {course} ({member_id})",
    }),
    "donation_thanks": ("general creative farm", {
        "fields": ["receipt_no", "name", "email", "amount", "paid_on"],
        "title": "donation thank-you letters",
        "dir": "thank_you",
        "body": ("# Thank you\n\nDear {name},\n\nThank you for your gift of {amount}, received on {paid_on}. "
                 "It goes straight to our work this season. Your receipt number is {receipt_no}.\n\nWarmly,\n"
                 "{me}\n{org}\n"),
        "subject": "Thank you for your gift ({receipt_no})",
    }),
    "booking": ("food health creative legal", {
        "fields": ["ref", "name", "email", "appointment", "time", "place"],
        "title": "booking confirmations",
        "dir": "bookings",
        "body": ("# Booking confirmed\n\nHello {name},\n\nWe look forward to seeing you on {appointment} at "
                 "{time} ({place}). Booking reference: {ref}.\n\nTo change or cancel, reply to this message.\n\n"
                 "{me}\n{org}\n"),
        "subject": "Booking {ref} confirmed for {appointment}",
    }),
    "order_notice": ("food farm finance general", {
        "fields": ["receipt_no", "name", "email", "item", "amount", "paid_on"],
        "title": "order confirmations",
        "dir": "orders",
        "body": ("# Order {receipt_no}\n\nDear {name},\n\nThanks for your order of {item} ({amount}), paid on "
                 "{paid_on}. We will be in touch about delivery.\n\n{me}, {org}\n"),
        "subject": "Order {receipt_no} - {item}",
    }),
    "access_notice": ("software health legal", {
        "fields": ["badge_id", "name", "email", "role", "start_date"],
        "title": "access notices",
        "dir": "access",
        "body": ("# Access granted\n\nHi {name},\n\nYour access as {role} starts on {start_date}. Your badge "
                 "number is {badge_id}; keep it with you on site.\n\n{me}\n{org}\n"),
        "subject": "Access from {start_date} ({badge_id})",
    }),
}
PREFIX = {"letter": "M-", "certificate": "C-", "invoice": "INV-", "reminder": "APT-", "receipt": "R-",
          "welcome": "W-", "badge": "B-", "payment_reminder": "PR-", "parent_letter": "PT-", "course_place": "CP-",
          "donation_thanks": "D-", "booking": "BK-", "order_notice": "ORD-", "access_notice": "ACC-"}


def kinds_for(domain: str) -> dict[str, dict]:
    """The kinds of document a persona of `domain` merges: the general ones and those of the domain."""
    out = dict(KINDS)
    for k, (domains, spec) in DOMAIN_KINDS.items():
        if domain in domains.split():
            out[k] = spec
    return out
# (column, the value of the rows to leave out, why, spellings of that value in the data)
SKIPS = [("status", "cancelled", "they cancelled"), ("status", "withdrawn", "they withdrew"),
         ("state", "on hold", "they are on hold"), ("opt_out", "yes", "they opted out"),
         ("status", "refunded", "they were refunded"), ("send", "no", "they asked for nothing")]
PLACES = ["Room 3", "the front desk", "Clinic B", "the main hall", "Studio 2", "the east entrance", "Office 12"]
ROLES = ["Speaker", "Volunteer", "Staff", "Guest", "Organiser", "Press", "Exhibitor"]
COURSES = ["First aid refresher", "Food hygiene level 2", "Data protection basics", "Fire warden training",
           "Manual handling", "Spreadsheet essentials", "Customer care", "Safeguarding"]


def row_specs(files_out: dict[str, str], values: dict[str, list[str]], keys: dict[str, list[str]]) -> dict:
    """{path: [its row's values, other rows' values]} for docs_row_files / docs_row_values: of `values[path]`
    those the expected file holds, and of the other paths' `keys` (values that tell a row apart) those it does
    not hold. A file then counts as a row's file only with that row's content in it, and no other row's."""
    specs = {}
    for p, text in files_out.items():
        own = list(dict.fromkeys(v for v in values[p] if v.strip() and _docs_has(text, v)))
        others = list(dict.fromkeys(v for q, ks in keys.items() if q != p for v in ks
                                    if v.strip() and not _docs_has(text, v)))
        specs[p] = [own, others]
    return specs


def _distinct(values: list[str], all_values: dict[str, list[str]], path: str) -> list[str]:
    """The first of a row's `values` that no other row has (what tells the row apart), or none."""
    others = {v.casefold() for q, vs in all_values.items() if q != path for v in vs}
    return [v for v in values if v.casefold() not in others][:1]


def _a(noun: str) -> str:
    """The noun with its indefinite article ("an editor", "a nurse", "a user researcher")."""
    from clawgym.synth.voice import article

    return f"{article(noun)} {noun}"


def _sort_key(v: str) -> tuple:
    """Numbers by value, everything else A-Z ignoring case (numbers first)."""
    t = v.strip()
    try:
        return (0, float(t.replace(",", "")), "")
    except ValueError:
        return (1, 0.0, t.casefold())


@operation
class GenerateFromTemplate(OperationGenerator):
    id = "generate_from_template"
    consumes: tuple[str, ...] = (TABLE, RECORDS)
    produces = (DOCUMENT, MESSAGES)
    standalone = True

    def _standalone(self, ctx: OpContext) -> StepPlan:  # noqa: PLR0915 (one linear recipe: its rng draws, in order, fix the tasks a seed gives)
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        kinds = kinds_for(flavor.persona_domain(ctx.persona))
        kind = rng.choice(list(kinds))
        spec = kinds[kind]
        syntax = rng.choice(SYNTAX)
        org = flavor.org(rng)
        me = ctx.persona.name
        n = rng.randint(3, 6)
        people = flavor.people(rng, n + 2)
        base = flavor.date_in(rng, 2026)
        prefix = PREFIX[kind]
        event = f"{rng.choice(voc['projects']).title()} {rng.choice(['Day', 'Fair', 'Forum', 'Open House'])} 2026"
        start_no = rng.randint(100, 900)
        rows: list[dict[str, str]] = []
        for i, p in enumerate(people):
            org_p = flavor.org(rng)
            r = {"name": p, "client": f"{org_p} ({p})", "email": email_addr(p, org_p),
                 "amount": f"{flavor.amount(rng, 40, 2400):.2f}", "due_date": add_workdays(base, rng.randint(5, 30)).isoformat(),
                 "course": rng.choice(COURSES), "hours": str(rng.choice([3, 4, 6, 8, 12, 16])),
                 "date": add_workdays(base, rng.randint(0, 10)).isoformat(),
                 "service": f"{rng.choice(voc['projects'])} - {rng.choice(voc['categories']).lower()}",
                 "member_id": f"{prefix}{start_no + i}", "cert_id": f"{prefix}{start_no + i}",
                 "invoice_no": f"{prefix}{start_no + i}", "ref": f"{prefix}{start_no + i}",
                 "receipt_no": f"{prefix}{start_no + i}", "badge_id": f"{prefix}{start_no + i}",
                 "appointment": add_workdays(base, rng.randint(1, 20)).isoformat(),
                 "time": f"{rng.randint(8, 17):02d}:{rng.choice(['00', '15', '30', '45'])}", "place": rng.choice(PLACES),
                 "item": rng.choice(voc["items"]), "paid_on": add_workdays(base, rng.randint(0, 10)).isoformat(),
                 "start_date": add_workdays(base, rng.randint(3, 25)).isoformat(), "buddy": flavor.person(rng),
                 "role": rng.choice(ROLES), "event": event}
            rows.append({f: r[f] for f in spec["fields"]})
        id_field = spec["fields"][0]
        skip_col, skip_val, skip_why = rng.choice(SKIPS)
        keep_val = {"status": "active", "state": "confirmed", "opt_out": "no", "send": "yes"}[skip_col]
        status = [rng.choice([keep_val, keep_val, keep_val.upper() if len(keep_val) < 4 else keep_val])
                  for _ in rows]
        skipped = rng.sample(range(len(rows)), rng.randint(1, 2))
        for i in skipped:
            status[i] = rng.choice([skip_val, skip_val.upper(), skip_val.capitalize() + " "])
        mail = rng.random() < 0.4
        # template and data files
        tvals = {f: _ph(syntax, f) for f in spec["fields"]}
        body_t = spec["body"].format(org=org, me=me, **tvals)
        subj_t = spec["subject"].format(org=org, **tvals)
        tdir = rng.choice(["templates", "tmpl", "admin/templates", "forms", "boilerplate",
                           f"{wfolder(ctx, ['shared', 'admin', 'office'], 0.6)}/templates"])
        if mail:
            tpath = ctx.path(f"{tdir}/{kind}{rng.choice(['_mail', '_email', '_message'])}.txt")
            template = f"Subject: {subj_t}\n\n" + re.sub(r"^# .*\n\n", "", body_t)
        else:
            tpath = ctx.path(f"{tdir}/{kind}{rng.choice(['', '_template', '_tmpl', '_master'])}.md")
            template = body_t
        data_fields = spec["fields"] + [skip_col]
        data_rows = [[r[f] for f in spec["fields"]] + [s] for r, s in zip(rows, status, strict=False)]
        dstems = [f"{spec['dir']}_data", "recipients", "mailing_list", f"{spec['dir']}_{base.strftime('%b').lower()}",
                  "people", "list", f"{kind}_rows"]
        if rng.random() < 0.5:
            dpath = wpath(ctx, dstems, "csv", ["data", "lists", "admin"], p_folder=0.5)
            data_text = to_csv(data_fields, data_rows)
        else:
            dpath = wpath(ctx, dstems, "json", ["data", "lists", "admin"], p_folder=0.5)
            data_text = json.dumps([dict(zip(data_fields, r, strict=False)) for r in data_rows], indent=2) + "\n"
        active = [r for i, r in enumerate(rows) if i not in skipped]
        out_dir = (rng.choice(["outbox", "merge_out", "mail/outbox", f"outbox/{spec['dir']}", "to_send"]) if mail else
                   rng.choice([spec["dir"], f"out/{spec['dir']}", f"{spec['dir']}_{base.year}", f"generated/{spec['dir']}",
                               f"{wfolder(ctx, ['out'], 0.6)}/{spec['dir']}"]))
        ext = ".eml" if mail else rng.choice([".md", ".txt"])
        paths = {r[id_field]: ctx.path(f"{out_dir}/{r[id_field].lower()}{ext}") for r in rows}
        skipped_paths = [paths[rows[i][id_field]] for i in skipped]
        sender = persona_email(ctx.persona)
        files_out: dict[str, str] = {}
        messages = []
        for r in active:
            p = paths[r[id_field]]
            if mail:
                body = _fill(template.split("\n\n", 1)[1], syntax, r)
                subject = _fill(subj_t, syntax, r)
                files_out[p] = eml_text(f"{me} <{sender}>", [r["email"]], subject, body)
                messages.append({"from": f"{me} <{sender}>", "to": r["email"], "subject": subject,
                                 "date": "", "body": body})
            else:
                files_out[p] = _fill(template, syntax, r)
        value_fields = [f for f in spec["fields"] if f not in ("email",)]
        tokens = [_ph(syntax, f) for f in spec["fields"]]
        what = spec["title"]
        ph = f"{syntax[0]}field{syntax[1]}"
        slots = dict(what=what, t=tpath, d=dpath, ph=ph, dir=out_dir, id=id_field, ex=paths[active[0][id_field]],
                     ext=ext, me=me, sender=sender, col=skip_col, val=skip_val, why=skip_why, n=len(rows))
        if mail:
            outspec = [
                phrase(rng, ["one email per [person|row] as `{dir}/<{id} in lower case>.eml` (e.g. `{ex}`)",
                             "[a separate|an individual] `.eml` [for|per] [every|each] [recipient|remaining row], "
                             "saved in `{dir}/` and named after its `{id}` in lower case (`{ex}` for the first)",
                             "`{dir}/` [gets|should end up with] one message file per [row|person], called <{id}, "
                             "lower-cased>.eml - [like|for example] `{ex}`",
                             "[the emails|the messages] [go|are saved] to `{dir}/`, [one|a file] each, [named|with "
                             "the name] `<{id} in lower case>.eml` (`{ex}` [and so on|etc.])"], **slots),
                phrase(rng, ["From `{me} <{sender}>`, To the row's email",
                             "[sent|coming] from `{me} <{sender}>` and addressed to [the address in the row|that "
                             "row's email]",
                             "[the sender is|sender:] `{me} <{sender}>`; [the recipient|To:] [is |][whatever email "
                             "the row has|the row's own address]",
                             "[each|every] message [goes|is addressed] to [its|the] row's email, [from|with From set "
                             "to] `{me} <{sender}>`"], **slots),
                phrase(rng, ["the Subject from the template's first line and the rest of the template as the "
                             "plain-text body",
                             "the [template's|template] first line [gives|is] the Subject, [everything|all] "
                             "[below|after] it [is|becomes] the [plain-text |]body",
                             "[take|use] the `Subject:` line of the template for the subject and [the remainder|"
                             "what follows] as [a plain-text|the] body",
                             "[subject|Subject header] [= the template's first line|from line one of the "
                             "template], body [= the rest, as plain text|from the lines after it]"], **slots)]
        else:
            outspec = [phrase(rng, [
                "one file per row named `{dir}/<{id} in lower case>{ext}` (e.g. `{ex}`)",
                "[a separate|an individual|its own] file for [every|each] row [in|under] `{dir}/`, [called|named] "
                "after the [row's |]`{id}` in lower case [plus|with] `{ext}` (`{ex}` for the first)",
                "`{dir}/` [gets|should end up with|should hold] one `{ext}` [file|document] per row, [named|called] "
                "<{id}, lower-cased>{ext} - [like|for example|e.g.] `{ex}`",
                "[the output|the filled-in copies|the results] [go|are saved] to `{dir}/` as `<{id} in lower "
                "case>{ext}`, one [per row|each] (`{ex}` [and so on|etc.])"], **slots)]
        rules = outspec + [
            phrase(rng, ["[skip|leave out|no output for] rows whose `{col}` is \"{val}\" (any case; {why})",
                         "[nothing|no file] for [anyone|people|rows] [marked|with] `{col}` = \"{val}\" "
                         "[in any capitalisation|whatever the case] - {why}",
                         "[ignore|drop] the \"{val}\" rows ([check|compare] `{col}` [case-insensitively|without "
                         "regard to case]): {why}",
                         "[{why}, so|since {why},] rows [where|whose] `{col}` [says|reads] \"{val}\" (upper or "
                         "lower case) [get nothing|are skipped|must not get one]"], **slots),
            phrase(rng, ["[copy values exactly as they are in the data|values exactly as in the data|every `{ph}` "
                         "placeholder replaced by the row's value]",
                         "[each|every] placeholder [swapped for|filled with|replaced by] the [matching|row's] value, "
                         "[copied|taken] [verbatim|character for character|as is] [from the data|]",
                         "[don't|do not] [reformat|round|change] the values: [paste|put] them in [exactly |]as "
                         "[the data has them|they appear in `{d}`]",
                         "the [rest of the|] template text [unchanged|kept word for word], only the placeholders "
                         "[filled|replaced] [from the row|with the row's values]"], **slots),
            phrase(rng, ["no `{ph}` placeholders [may be|can be|] left [in the output|anywhere]",
                         "[not a single|no] [unfilled|leftover] `{ph}`-style [token|marker] [in any file|anywhere in "
                         "the output]",
                         "[make sure|check that] [every|each] `{ph}` [got|has been] [filled|replaced] - [none|"
                         "nothing] [left over|remaining]",
                         "[zero|no] [raw|literal] placeholders ([the `{ph}` kind|like `{ph}`]) [in the results|"
                         "survive]"], **slots)]
        head = one_of(rng, [
            "Time to send out the {what}. Fill the template `{t}` (placeholders look like `{ph}`) with each row of "
            "`{d}`.",
            "[Please do|I need|Time for] a mail merge: template `{t}`, data `{d}`.",
            "Generate the {what} from `{t}` and `{d}`.",
            "[I have|There are] {n} [rows|entries] in `{d}` and [a template|the template] in `{t}` (placeholders "
            "like `{ph}`); [I need|make] the {what} [from them|out of them].",
            "The {what} [are due|need to go out|have to be ready] - `{t}` is the template, `{d}` the data.",
            "[Merge|Combine] `{d}` [into|with] the template `{t}` (its placeholders look like `{ph}`) to [produce|get] "
            "the {what}.",
            "[One per person|A personalised copy for each row]: the {what}, from `{t}` filled with `{d}`.",
            "[Can you|Could you] [produce|churn out] the {what}? Data: `{d}` ({n} rows). Template: `{t}`.",
        ], **slots)
        lead = expand("[Output|What I need|The result|How]:", rng)
        story = ""
        if rng.random() < 0.8:
            story = one_of(rng, [
                "[Every {month}|Once a term|Each quarter] I [send|prepare|print] the {what} for {org} by hand, and it "
                "[takes hours|eats an afternoon|is error-prone].",
                "{n} people [are on the list|signed up|are in the sheet] this time, [but|and] {k} of them [dropped "
                "out|should get nothing].",
                "[The|Our] {what} [always|usually] go out [before|around] {month}; [this year|this time] I want them "
                "[generated|filled in] [properly|from the data].",
                "[Last time|Last {month}] I [copy-pasted|typed] the {what} [one by one|by hand] in {tool} and "
                "[sent one to the wrong person|left a placeholder in two of them|got a name wrong].",
                "[As|Being] {role}, I [do|handle] the {what} for {org} [myself|on my own], [usually|mostly] "
                "[late at night|between other jobs].",
                "[{k} of the {n} people|Some people] on the list [shouldn't get one|are not to get anything] this "
                "time - the data says who.",
            ], what=what, org=org, n=len(rows), k=len(skipped), month=base.strftime("%B"),
                tool=rng.choice(list(ctx.persona.tools)), role=_a(ctx.persona.occupation))
        instruction = join(story, head, reqs(rng, rules, lead=lead), aside(rng, ctx.persona))
        expected = [paths[r[id_field]] for r in active]
        # a file counts for the format checks (one per active row, no placeholder left) only when it is its row's
        # file: its row's values in it and no other row's id (an empty file, the request or the data copied to
        # every path earns nothing)
        specs = row_specs(files_out, {paths[r[id_field]]: [r[f] for f in spec["fields"]] for r in active},
                          {paths[r[id_field]]: [r[id_field]] for r in rows})
        checks = [Check("one_file_per_active_row", "min_of", parts=[
            Check("", "docs_row_files", {"specs": specs}),
            Check("", "docs_paths_absent", {"paths": skipped_paths})])]
        if mail:
            checks += [
                Check("recipients_and_subjects", "docs_eml_each", {"specs": [
                    {"path": paths[r[id_field]], "to": [r["email"]], "subject_has": [r[id_field]]} for r in active]}),
                Check("bodies_filled", "docs_eml_each", {"specs": [
                    {"path": paths[r[id_field]], "body_has": [m["body"] and r[f] for f in value_fields
                                                              if r[f] in m["body"]]}
                    for r, m in zip(active, messages, strict=False)]}),
            ]
        else:
            checks += [
                Check("values_filled", "docs_row_values",
                      {"specs": row_specs(files_out, {paths[r[id_field]]: [r[f] for f in value_fields] for r in active},
                                          {paths[r[id_field]]: [r[id_field]] for r in rows})}),
                Check("matches_template", "docs_texts_equal", {"specs": files_out}),
            ]
        checks.append(Check("no_placeholders_left", "docs_row_files", {"specs": specs, "lack": tokens}))
        # partial: all rows (the cancelled ones too), the first two raw with placeholders left
        partial_steps = []
        for i, r in enumerate(rows):
            p = paths[r[id_field]]
            if mail:
                body = template.split("\n\n", 1)[1] if i < 2 else _fill(template.split("\n\n", 1)[1], syntax, r)
                partial_steps.append(write(p, eml_text(f"{me} <{sender}>", [r["email"]], _fill(subj_t, syntax, r),
                                                       body)))
            else:
                partial_steps.append(write(p, template if i < 2 else _fill(template, syntax, r)))
        outputs = []
        if mail:
            outputs.append(Artifact(f"{out_dir}", MESSAGES, messages, f"the merged emails in {out_dir}/"))
        else:
            first = expected[0]
            outputs.append(Artifact(first, DOCUMENT, files_out[first], f"the first of the {what} ({first})"))
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            files=[WorkspaceFile(path=tpath, content=template), WorkspaceFile(path=dpath, content=data_text)],
            steps=[read(tpath), read(dpath), *(write(p, t) for p, t in files_out.items())],
            partial=partial_steps,
            outputs=outputs,
            summary=f"fill {tpath} for {len(active)} rows of {dpath}",
            fingerprint=digest(files_out),
        )

    def _chained(self, ctx: OpContext, source: Artifact) -> StepPlan:
        rng = ctx.rng
        header, rows = table_of(source)
        all_rows = [r for r in rows if any(c.strip() for c in r)]
        rows = all_rows
        name_i = text_col(header, rows, role_col(source, "name", header))
        value_i = numeric_col(header, rows, role_col(source, "value", header))
        date_i = date_col(header, rows, role_col(source, "date", header))
        fields = [i for i in (name_i, date_i, value_i) if i is not None]
        for i in range(len(header)):
            if i not in fields and len(fields) < 4 and all(len(r[i]) <= 60 for r in rows if i < len(r)):
                fields.append(i)
        fields = list(dict.fromkeys(fields))[:4]
        # rows in an order of their own (sorted by the template's fields), so the numbering does not depend on
        # how the earlier step happened to order them
        rows = sorted(all_rows, key=lambda r: tuple(_sort_key(r[i] if i < len(r) else "") for i in fields))[:10]
        syntax = rng.choice(SYNTAX[:3])
        keys: list[str] = []
        for i in fields:
            k = flavor.slug(header[i]) or f"col{i}"
            keys.append(k if k not in keys else f"{k}_{i}")
        heading = rng.choice(["Notice", "Record sheet", "Confirmation", "Summary card", "Entry", "Fact sheet",
                              "Slip", "Data card", "Index card", "Line item", "Profile", "Memo", "Label",
                              "Statement"])
        lines = [f"# {heading}: {_ph(syntax, keys[0])}", ""]
        lines += [f"- {header[i]}: {_ph(syntax, k)}" for i, k in zip(fields, keys, strict=False)]
        lines += ["", f"Prepared by {ctx.persona.name} on {long_date(dt.date(2026, 1, 1) + dt.timedelta(days=rng.randint(0, 360)))}.", ""]
        template = "\n".join(lines)
        tslug = flavor.slug(heading)
        tpath = wpath(ctx, [tslug, f"{tslug}_template", "card", "notice_template", "one_per_row"], "md",
                      ["templates", "tmpl", "forms"], p_folder=0.6)
        out_dir = rng.choice(["notices", "cards", "out/notices", f"{tslug}s", f"out/{tslug}", "per_row", "sheets"])
        paths = [ctx.path(f"{out_dir}/{n:02d}.md") for n in range(1, len(rows) + 1)]
        files_out = {}
        for p, r in zip(paths, rows, strict=False):
            files_out[p] = _fill(template, syntax, {k: (r[i] if i < len(r) else "") for i, k in zip(fields, keys, strict=False)})
        map_t = rng.choice(["`{p}` = column `{c}`", "`{p}` <- `{c}`", "`{p}` from `{c}`", "`{c}` into `{p}`",
                            "`{p}` takes `{c}`", "`{p}`: the `{c}` value"])
        mapping = ", ".join(map_t.format(p=_ph(syntax, k), c=header[i]) for i, k in zip(fields, keys, strict=False))
        order_cols = rng.choice([", then ", " > ", ", after that ", " and then "]).join(f"`{header[i]}`"
                                                                                      for i in fields)
        rows_note = (f"the first {len(rows)} rows" if len(all_rows) > len(rows) else
                     expand("[every row|each row|all the rows|all {n} rows]", rng, clause=True, n=len(rows)))
        if len(all_rows) > len(rows):
            rows_note = expand("[the first {n} rows|only the first {n} rows (after sorting)|{n} rows, the first "
                               "ones in that order]", rng, clause=True, n=len(rows))
        order_txt = one_of(rng, [
            "with the rows sorted by {cols} (numbers by value, text A-Z ignoring case)",
            "in the order you get [by sorting|when you sort] on {cols} ([numbers|numeric values] by size, "
            "[words|text] alphabetically [without regard to|regardless of] case)",
            "[ordered|sorted] [ascending |][on|by] {cols} - compare numbers as numbers and text case-insensitively "
            "[A to Z|alphabetically]",
            "after [sorting|ordering] [ascending |]by {cols}; [numeric|number] cells [compare|sort] by value, "
            "[the rest|text cells] [alphabetically|A-Z] with upper and lower case [treated alike|the same]",
        ], cols=order_cols)
        order_txt = order_txt[:1].lower() + order_txt[1:]
        numbering = expand(rng.choice(["`{dir}/01.md`, `{dir}/02.md`, ...", "`{dir}/01.md`, `{dir}/02.md` and so "
                                       "on", "`{dir}/NN.md` [from|starting at] `{dir}/01.md`",
                                       "two-digit [names|numbers] in `{dir}/` (`01.md`, `02.md`, ...)"]), rng,
                           clause=True, dir=out_dir)
        slots = dict(t=tpath, rows=rows_note, desc=source.description, src=source.path, order=order_txt, dir=out_dir,
                     map=mapping, h=heading.lower(), num=numbering, me=ctx.persona.name)
        if rng.random() < 0.5:
            instruction = one_of(rng, [
                "use the template `{t}` to make one file for {rows} of {desc} {order}: {num} in that order, with {map}.",
                "fill `{t}` for {rows} of `{src}` (placeholders: {map}) and save them as {num}, numbered {order}.",
                "[turn|make] {rows} of `{src}` into one {h} [each|per row] [using|from] `{t}` ({map}); number the "
                "files {num} {order}.",
                "one {h} per row: [fill|complete] `{t}` ({map}) for {rows} of {desc}, saved as {num}, {order}.",
            ], **slots)
        else:
            head = one_of(rng, [
                "[I'd like|I need|Please make] [a {h}|one {h}] for [each|every] row of {desc}, [from|based on] "
                "the template `{t}`.",
                "`{t}` is a {h} template; [fill it in|complete it] [once per row|for each row] of `{src}`.",
                "[Now|Next,] [print out|produce|generate] {h}s from `{src}` with the template in `{t}`.",
                "[Each|Every] row of {desc} [should get|needs] its own {h} (template: `{t}`).",
            ], **slots)
            items = [
                phrase(rng, ["the placeholders [map|correspond] [like this|as follows]: {map}",
                             "[fill|replace] {map}", "[mapping|placeholder to column]: {map}"], **slots),
                phrase(rng, ["[files|the outputs] [named|numbered] {num}", "[save|write] them as {num}",
                             "[number them|the names are] {num}"], **slots),
                phrase(rng, ["[number|put] them {order}", "the numbering [follows|goes] {order}",
                             "[first file|`01.md`] = first row {order}"], **slots),
                phrase(rng, ["[cover|use] {rows}", "{rows} [are needed|get one|count]"], **slots),
            ]
            instruction = join(head, reqs(rng, items, lead=expand("[Details|How|Specifically]:", rng)))
        tokens = [_ph(syntax, k) for k in keys]
        # as in the standalone case, a file counts for the format checks only with its own row's values in it
        # and not another row's (the values that tell each row apart from the others)
        row_values = {p: [r[i] for i in fields if i < len(r) and r[i].strip()] for p, r in zip(paths, rows, strict=False)}
        specs = row_specs(files_out, row_values, {p: _distinct(v, row_values, p) for p, v in row_values.items()})
        checks = [
            Check("one_file_per_row", "docs_row_files", {"specs": specs}),
            Check("values_filled", "docs_row_values", {"specs": specs}),
            Check("matches_template", "docs_texts_equal", {"specs": files_out}),
            Check("no_placeholders_left", "docs_row_files", {"specs": specs, "lack": tokens}),
        ]
        partial = [write(p, template if i == 0 else t) for i, (p, t) in enumerate(files_out.items())][: max(1, len(paths) - 1)]
        if len(paths) == 1:
            partial = [write(paths[0], template)]
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            files=[WorkspaceFile(path=tpath, content=template)],
            steps=[read(tpath), read(source.path), *(write(p, t) for p, t in files_out.items())],
            partial=partial,
            outputs=[Artifact(paths[0], DOCUMENT, files_out[paths[0]], f"the first generated file ({paths[0]})")],
            summary=f"fill {tpath} for {len(rows)} rows of {source.path}",
            fingerprint=digest(files_out),
        )

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        if source is not None and source.kind in (TABLE, RECORDS):
            header, rows = table_of(source)
            if header and any(any(c.strip() for c in r) for r in rows):
                return self._chained(ctx, source)
        return self._standalone(ctx)


GENERATORS = [GenerateFromTemplate()]
