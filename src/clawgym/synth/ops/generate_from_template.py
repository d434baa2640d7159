"""generate_from_template: fill a template once per data row: letters, certificates or invoices as one file
per row at stated paths, or a mail merge with one .eml per row; cancelled rows are skipped. Chained: the
previous step's table or records become the data of a notice per row."""

from __future__ import annotations

import datetime as dt
import json
import re

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.checklib_docs import _docs_has
from clawgym.synth.ops._docs_common import (
    add_workdays,
    date_col,
    digest,
    email_addr,
    eml_text,
    long_date,
    numeric_col,
    persona_email,
    role_col,
    table_of,
    text_col,
)
from clawgym.synth.ops.base import (
    DOCUMENT,
    MESSAGES,
    RECORDS,
    TABLE,
    Artifact,
    Check,
    OpContext,
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


def _sort_key(v: str) -> tuple:
    """Numbers by value, everything else A-Z ignoring case (numbers first)."""
    t = v.strip()
    try:
        return (0, float(t.replace(",", "")), "")
    except ValueError:
        return (1, 0.0, t.casefold())


class GenerateFromTemplate:
    id = "generate_from_template"
    consumes: tuple[str, ...] = (TABLE, RECORDS)
    produces = (DOCUMENT, MESSAGES)
    standalone = True

    def _standalone(self, ctx: OpContext) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        kind = rng.choice(list(KINDS))
        spec = KINDS[kind]
        syntax = rng.choice(SYNTAX)
        org = flavor.org(rng)
        me = ctx.persona.name
        n = rng.randint(3, 6)
        people = flavor.people(rng, n + 2)
        base = flavor.date_in(rng, 2026)
        prefix = {"letter": "M-", "certificate": "C-", "invoice": "INV-"}[kind]
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
                 "invoice_no": f"{prefix}{start_no + i}"}
            rows.append({f: r[f] for f in spec["fields"]})
        id_field = spec["fields"][0]
        status = ["active"] * len(rows)
        skipped = rng.sample(range(len(rows)), rng.randint(1, 2))
        for i in skipped:
            status[i] = rng.choice(["cancelled", "CANCELLED", "Cancelled "])
        mail = rng.random() < 0.4
        # template and data files
        tvals = {f: _ph(syntax, f) for f in spec["fields"]}
        body_t = spec["body"].format(org=org, me=me, **tvals)
        subj_t = spec["subject"].format(org=org, **tvals)
        tdir = rng.choice(["templates", "tmpl", "admin/templates"])
        if mail:
            tpath = ctx.path(f"{tdir}/{kind}_mail.txt")
            template = f"Subject: {subj_t}\n\n" + re.sub(r"^# .*\n\n", "", body_t)
        else:
            tpath = ctx.path(f"{tdir}/{kind}.md")
            template = body_t
        data_fields = spec["fields"] + ["status"]
        data_rows = [[r[f] for f in spec["fields"]] + [s] for r, s in zip(rows, status, strict=False)]
        if rng.random() < 0.5:
            dpath = ctx.path(rng.choice([f"{spec['dir']}_data.csv", "data/recipients.csv", "mailing_list.csv"]))
            data_text = to_csv(data_fields, data_rows)
        else:
            dpath = ctx.path(rng.choice([f"{spec['dir']}_data.json", "data/recipients.json"]))
            data_text = json.dumps([dict(zip(data_fields, r, strict=False)) for r in data_rows], indent=2) + "\n"
        active = [r for i, r in enumerate(rows) if i not in skipped]
        out_dir = rng.choice(["outbox", "merge_out"]) if mail else rng.choice([spec["dir"], f"out/{spec['dir']}"])
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
        if mail:
            outspec = (f"one email per person as `{out_dir}/<{id_field} in lower case>.eml` (e.g. `{paths[active[0][id_field]]}`), "
                       f"From `{me} <{sender}>`, To the row's email, the Subject from the template's first line "
                       "and the rest of the template as the plain-text body")
        else:
            outspec = f"one file per row named `{out_dir}/<{id_field} in lower case>{ext}` (e.g. `{paths[active[0][id_field]]}`)"
        instruction = rng.choice([
            f"Time to send out the {what}. Fill the template `{tpath}` (placeholders look like `{ph}`) with each "
            f"row of `{dpath}`: {outspec}. Skip rows whose status is cancelled, and copy values exactly as they "
            "are in the data.",
            f"Please do a mail merge: template `{tpath}`, data `{dpath}`. Make {outspec}, replacing every `{ph}` "
            "placeholder with the row's value. Leave out the cancelled rows.",
            f"Generate the {what} from `{tpath}` and `{dpath}` - {outspec}. Rows marked cancelled get nothing; no "
            f"`{ph}` placeholders may be left in the output.",
        ])
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
        heading = rng.choice(["Notice", "Record sheet", "Confirmation", "Summary card"])
        lines = [f"# {heading}: {_ph(syntax, keys[0])}", ""]
        lines += [f"- {header[i]}: {_ph(syntax, k)}" for i, k in zip(fields, keys, strict=False)]
        lines += ["", f"Prepared by {ctx.persona.name} on {long_date(dt.date(2026, 1, 1) + dt.timedelta(days=rng.randint(0, 360)))}.", ""]
        template = "\n".join(lines)
        tpath = ctx.path(rng.choice(["templates/notice.md", "notice_template.md", "tmpl/card.md"]))
        out_dir = rng.choice(["notices", "cards", "out/notices"])
        paths = [ctx.path(f"{out_dir}/{n:02d}.md") for n in range(1, len(rows) + 1)]
        files_out = {}
        for p, r in zip(paths, rows, strict=False):
            files_out[p] = _fill(template, syntax, {k: (r[i] if i < len(r) else "") for i, k in zip(fields, keys, strict=False)})
        mapping = ", ".join(f"`{_ph(syntax, k)}` = column `{header[i]}`" for i, k in zip(fields, keys, strict=False))
        order_cols = ", then ".join(f"`{header[i]}`" for i in fields)
        rows_note = (f"the first {len(rows)} rows" if len(all_rows) > len(rows) else "every row")
        order_txt = f"with the rows sorted by {order_cols} (numbers by value, text A-Z ignoring case)"
        instruction = rng.choice([
            f"use the template `{tpath}` to make one file for {rows_note} of {source.description} {order_txt}: "
            f"`{out_dir}/01.md`, `{out_dir}/02.md`, ... in that order, with {mapping}.",
            f"fill `{tpath}` for {rows_note} of `{source.path}` (placeholders: {mapping}) and save them as "
            f"`{out_dir}/01.md`, `{out_dir}/02.md` and so on, numbered {order_txt}.",
        ])
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
