"""track_tasks: action items scattered over meeting notes and an email (owners, tasks, due dates written every
which way) are added to a CSV tracker, and the status/due-date updates the notes mention are applied to the
existing rows. Chained: one review task per section of a document, a follow-up per message, a reply task per
record that needs one."""

from __future__ import annotations

import datetime as dt
import re

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.ops._docs_common import (
    add_workdays,
    digest,
    email_addr,
    human_date,
    long_date,
    persona_email,
    table_of,
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

HEADER = ["task", "owner", "due", "status"]
# (task text, keyword the tracker's task cell must contain)
ACTIONS = [
    ("send the vendor list to {org}", "vendor list"), ("book the venue for the {project}", "venue"),
    ("draft the budget memo", "budget memo"), ("update the {item} stock sheet", "stock sheet"),
    ("collect quotes for {item}", "quotes"), ("prepare the slides for the {project} review", "slides"),
    ("call {org} about the late delivery", "late delivery"), ("write the onboarding checklist", "onboarding"),
    ("renew the insurance policy", "insurance"), ("check the fire exits", "fire exits"),
    ("order new {item}", "order"), ("set up the shared folder", "shared folder"),
]
EXISTING = [
    ("Sign the supplier contract", "supplier contract"), ("Website copy for the {project}", "website copy"),
    ("Fix the printer in room 2", "printer"), ("Plan the team lunch", "team lunch"),
    ("Archive last year's invoices", "invoices"), ("Survey the customers", "survey"),
]


def _alpha(s: str) -> tuple[str, str]:
    return (s.casefold(), s)


class TrackTasks:
    id = "track_tasks"
    consumes: tuple[str, ...] = (DOCUMENT, MESSAGES, RECORDS)
    produces = (TABLE,)
    standalone = True

    # ------------------------------------------------------------------ standalone
    def _standalone(self, ctx: OpContext) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        me = ctx.persona.name
        team = [p for p in flavor.people(rng, 5) if p != me][:4]
        fill = dict(org=flavor.org(rng), project=rng.choice(voc["projects"]), item=rng.choice(voc["items"]))
        meet = add_workdays(flavor.date_in(rng, 2026, rng.randint(1, 11)), 0)
        # the existing tracker
        ex = rng.sample(EXISTING, rng.randint(3, 4))
        old_rows = []
        for text, kw in ex:
            due = add_workdays(meet, rng.randint(-5, 15)).isoformat()
            old_rows.append({"task": text.format(**fill), "kw": kw, "owner": rng.choice(team), "due": due,
                             "status": rng.choice(["open", "in progress"])})
        changed = rng.sample(range(len(old_rows)), 2)
        updates = []
        new_rows_old = [dict(r) for r in old_rows]
        for j, i in enumerate(changed):
            r = new_rows_old[i]
            kind = ["done", "blocked", "moved"][j if j < 1 else rng.randint(1, 2)]
            if kind == "done":
                r["status"] = "done"
                updates.append(rng.choice([f"{r['owner'].split()[0]} confirmed \"{r['task']}\" is done.",
                                           f"Good news: \"{r['task']}\" - finished."]))
            elif kind == "blocked":
                r["status"] = "blocked"
                updates.append(f"\"{r['task']}\" is blocked until {fill['org']} replies.")
            else:
                nd = add_workdays(dt.date.fromisoformat(r["due"]), rng.randint(3, 8))
                r["due"] = nd.isoformat()
                updates.append(f"The deadline of \"{r['task']}\" moves to {human_date(rng, nd, with_year=False)}.")
        # new action items
        acts = rng.sample(ACTIONS, rng.randint(3, 4))
        new_items = []
        styles = ["action", "checkbox", "prose"]
        for k, (text, kw) in enumerate(acts):
            owner = team[k % len(team)]
            due = add_workdays(meet, rng.randint(2, 15))
            task = text.format(**fill)
            st = rng.choice(styles)
            d = human_date(rng, due, with_year=False)
            line = {"action": f"- ACTION: {owner} to {task} by {d}",
                    "checkbox": f"- [ ] {owner}: {task} (due {d})",
                    "prose": f"- {owner} will {task} before {d}."}[st]
            new_items.append({"task": task[0].upper() + task[1:], "kw": kw, "owner": owner, "due": due.isoformat(),
                              "status": "open", "line": line})
        # one more item from an email to me
        mail_item = None
        mail_path = None
        files = []
        if rng.random() < 0.6:
            text, kw = rng.choice([a for a in ACTIONS if a not in acts])
            sender = rng.choice(team)
            due = add_workdays(meet, rng.randint(3, 10))
            task = text.format(**fill)
            mail_item = {"task": task[0].upper() + task[1:], "kw": kw, "owner": me, "due": due.isoformat(),
                         "status": "open"}
            mail_path = ctx.path(rng.choice(["inbox/after_meeting.eml", "mail/one_more_thing.eml"]))
            files.append(WorkspaceFile(path=mail_path, generate=GeneratedContent(kind="eml", params={
                "from": f"{sender} <{email_addr(sender, fill['org'])}>", "to": persona_email(ctx.persona),
                "subject": "One more action from today", "date": f"{meet.isoformat()}T16:40:00",
                "body": (f"Hi {me.split()[0]},\n\nWe forgot one in the notes: could you {task} by "
                         f"{human_date(rng, due, with_year=False)}? Thanks!\n\n{sender.split()[0]}\n")})))
        notes = "\n".join([
            f"# {fill['project'].capitalize()} sync - {long_date(meet)}", "",
            f"Present: {', '.join(team)}, {me}", "",
            "## Updates", "", *(f"- {u}" for u in updates), "",
            "## Discussion", "",
            f"- Went through the {fill['project']} timeline; no change to the launch.",
            f"- {fill['org']} still has not confirmed the delivery window.", "",
            "## Action items", "", *(it["line"] for it in new_items), "",
        ])
        notes_path = ctx.path(rng.choice(["meeting_notes.md", f"notes/sync_{meet.isoformat()}.md", "minutes.md"]))
        tracker = ctx.path(rng.choice(["tracker.csv", "tasks/tracker.csv", "todo_tracker.csv"]))
        files = [WorkspaceFile(path=tracker, content=to_csv(HEADER, [[r[h] for h in HEADER] for r in old_rows])),
                 WorkspaceFile(path=notes_path, content=notes)] + files
        all_new = new_items + ([mail_item] if mail_item else [])
        final = new_rows_old + all_new
        final_text = to_csv(HEADER, [[r[h] for h in HEADER] for r in final])

        def spec(r: dict) -> dict:
            return {"task": [r["kw"]], "owner": r["owner"], "due": r["due"], "status": r["status"]}

        mail_txt = f" and the extra one in `{mail_path}` (that one is mine: owner {me})" if mail_item else ""
        instruction = rng.choice([
            f"Update my tracker `{tracker}` from the meeting notes `{notes_path}`{mail_txt}: add one row per new "
            "action item (task in the notes' words, owner, due date as YYYY-MM-DD, status open) and apply the "
            "updates the notes mention to the existing rows (status done / blocked, or the new due date). Keep "
            "the columns task,owner,due,status and all existing rows.",
            f"Please bring `{tracker}` up to date: the action items from `{notes_path}`{mail_txt} become new rows "
            "(task as worded there, owner, due as YYYY-MM-DD, status \"open\"), and the \"Updates\" in the notes "
            "change the existing rows (status \"done\" or \"blocked\", or a moved due date). Same columns "
            "(task, owner, due, status); don't drop any existing task.",
        ])
        unchanged = [r for i, r in enumerate(new_rows_old) if i not in changed]
        checks = [
            Check("new_action_items", "docs_tracker_rows", {"path": tracker, "rows": [spec(r) for r in all_new],
                                                            "extra_penalty": False}),
            Check("updates_applied", "docs_tracker_rows", {"path": tracker, "rows": [spec(new_rows_old[i])
                                                                                     for i in changed],
                                                           "extra_penalty": False}),
            Check("tracker_complete", "min_of", parts=[
                Check("", "docs_tracker_rows", {"path": tracker, "rows": [spec(r) for r in final]}),
                Check("", "docs_tracker_rows", {"path": tracker, "rows": [spec(r) for r in unchanged + all_new],
                                                "extra_penalty": False}),
                Check("", "docs_tracker_rows", {"path": tracker, "rows": [spec(new_rows_old[i]) for i in changed],
                                                "extra_penalty": False})]),
        ]
        # partial: the new items from the notes added, the updates and the emailed item forgotten
        partial = to_csv(HEADER, [[r[h] for h in HEADER] for r in old_rows + new_items])
        steps = [read(tracker), read(notes_path)] + ([read(mail_path)] if mail_path else []) + [write(tracker, final_text)]
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks, files=files,
            steps=steps, partial=[write(tracker, partial)],
            outputs=[Artifact(tracker, TABLE, {"header": HEADER, "rows": [[r[h] for h in HEADER] for r in final]},
                              f"the task tracker ({tracker})", roles={"name": "task", "date": "due", "group": "owner"})],
            summary=f"update {tracker} from {notes_path}",
            fingerprint=digest(final_text),
        )

    # ------------------------------------------------------------------ chained
    def _chained(self, ctx: OpContext, source: Artifact, items: list[tuple[str, list[str]]], how: str,
                 prefix: str | None = None) -> StepPlan:
        """items: (task text, keywords), in the order `how` states; owners round-robin, due dates every `step`
        working days. With `prefix` the rows come from the document's headings and are checked against the file
        the agent actually wrote (docs_tracker_from_headings)."""
        rng = ctx.rng
        me = ctx.persona.name
        team = [me] + [p for p in flavor.people(rng, 3) if p != me][:2]
        start = add_workdays(flavor.date_in(rng, 2026), rng.randint(1, 5))
        step = rng.choice([1, 2])
        rows = []
        for i, (task, _) in enumerate(items):
            rows.append([task, team[i % len(team)], add_workdays(start, i * step).isoformat(), "open"])
        out = ctx.path(rng.choice(["tracker.csv", "followups.csv", "review_tracker.csv"]))
        instruction = rng.choice([
            f"set up a tracker `{out}` (columns task,owner,due,status) from {source.description}: {how}. Owners take turns in this order: {', '.join(team)}. The first task is due {start.isoformat()}, "
            f"each next one {step} working day{'s' if step > 1 else ''} later (Mon-Fri); dates as YYYY-MM-DD; "
            "status open.",
            f"make `{out}` with the columns task, owner, due, status for `{source.path}`: {how}. "
            f"Assign owners round-robin: {', '.join(team)}. Due dates start at {start.isoformat()} and step "
            f"{step} working day{'s' if step > 1 else ''} per row (weekends skipped), written YYYY-MM-DD; every "
            "status is open.",
        ])
        kws = [k for _, k in items]
        checks = [
            Check("one_row_per_item", "docs_tracker_rows", {"path": out, "rows": [{"task": k} for k in kws]}),
            Check("owners_round_robin", "docs_tracker_rows", {"path": out, "rows": [
                {"task": k, "owner": r[1]} for k, r in zip(kws, rows, strict=True)]}),
            Check("due_dates_and_status", "docs_tracker_rows", {"path": out, "rows": [
                {"task": k, "due": r[2], "status": "open"} for k, r in zip(kws, rows, strict=True)]}),
        ]
        if prefix is not None:
            dyn = {"out": out, "src": source.path, "prefix": prefix, "owners": team, "start": start.isoformat(),
                   "step": step}
            checks = [Check("one_row_per_item", "docs_tracker_from_headings", dict(dyn, part="rows")),
                      Check("owners_round_robin", "docs_tracker_from_headings", dict(dyn, part="owners")),
                      Check("due_dates_and_status", "docs_tracker_from_headings", dict(dyn, part="dates"))]
        # partial: everything given to me, due dates on calendar days
        bad = [[r[0], team[0], (start + dt.timedelta(days=i * step)).isoformat(), "open"] for i, r in enumerate(rows)]
        if bad == rows:
            bad = [[r[0], r[1], r[2], "todo"] for r in rows]
        text = to_csv(HEADER, rows)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=([read(source.path)] if "." in source.path.split("/")[-1] else []) + [write(out, text)],
            partial=[write(out, to_csv(HEADER, bad))],
            outputs=[Artifact(out, TABLE, {"header": HEADER, "rows": rows}, f"the tracker ({out})",
                              roles={"name": "task", "date": "due", "group": "owner"})],
            summary=f"track {len(rows)} tasks from {source.path}",
            fingerprint=digest(rows),
        )

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        if source is not None and source.kind == DOCUMENT and isinstance(source.data, str):
            heads = []
            for m in re.finditer(r"^#{2,3}\s+(.+?)\s*#*\s*$", source.data, re.M):
                h = m.group(1).strip()
                if h not in [x for x, _ in heads]:
                    heads.append((h, [h]))
            if heads:
                items = [(f"Review section: {h}", kw) for h, kw in heads[:10]]
                more = " (the first 10 if there are more)" if len(heads) > 10 else ""
                return self._chained(ctx, source, items, "one row per `##`/`###` section heading of the document, "
                                                         f"in document order{more}, task \"Review section: "
                                                         "<heading>\"", prefix="Review section: ")
        if source is not None and source.kind == MESSAGES and isinstance(source.data, list):
            subs = sorted({str(m.get("subject", "")).strip() for m in source.data if isinstance(m, dict)} - {""}, key=_alpha)
            if subs:
                more = " (only the first 10)" if len(subs) > 10 else ""
                items = [(f"Follow up: {s}", [s]) for s in subs[:10]]
                return self._chained(ctx, source, items, "one row per distinct message subject, sorted "
                                                         f"alphabetically (ignoring case){more}, task \"Follow up: <subject>\"")
        if source is not None and source.kind in (RECORDS, TABLE):
            header, rows = table_of(source)
            low = [h.casefold() for h in header]
            if "subject" in low and "needs_reply" in low:
                si, ni = low.index("subject"), low.index("needs_reply")
                subs = sorted({r[si] for r in rows if str(r[ni]).strip().casefold() in ("true", "yes", "1")}, key=_alpha)
                if subs:
                    more = " (only the first 10)" if len(subs) > 10 else ""
                    items = [(f"Reply: {s}", [s]) for s in subs[:10]]
                    return self._chained(ctx, source, items, "one row per message that needs a reply, sorted "
                                                             f"alphabetically by subject (ignoring case){more}, task \"Reply: "
                                                             "<subject>\"")
            ti = next((i for i, h in enumerate(low) if h in ("task", "title", "name", "item", "subject", "summary")),
                      None)
            if ti is not None:
                vals = sorted({r[ti].strip() for r in rows if ti < len(r) and r[ti].strip()}, key=_alpha)
                if vals:
                    more = " (only the first 10)" if len(vals) > 10 else ""
                    items = [(f"Check: {v}", [v]) for v in vals[:10]]
                    return self._chained(ctx, source, items, f"one row per distinct `{header[ti]}` value, sorted "
                                                             f"alphabetically (ignoring case){more}, task \"Check: <{header[ti]}>\"")
        return self._standalone(ctx)


GENERATORS = [TrackTasks()]
