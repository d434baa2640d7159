"""track_tasks: action items scattered over meeting notes and an email (owners, tasks, due dates written every
which way) are added to a CSV tracker, and the status/due-date updates the notes mention are applied to the
existing rows. Chained: one review task per section of a document, a follow-up per message, a reply task per
record that needs one."""

from __future__ import annotations

import datetime as dt
import re

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _data_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops._docs_common import (
    add_workdays,
    aside,
    clause,
    digest,
    email_addr,
    human_date,
    join,
    long_date,
    persona_email,
    phrase,
    reqs,
    short_slug,
    table_of,
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

HEADER = ["task", "owner", "due", "status"]
# tracker columns (task, owner, due, status) and status words (new, finished, blocked) as different people keep them
SCHEMAS = [HEADER, ["action", "assignee", "deadline", "state"], ["item", "who", "due_date", "status"],
           ["todo", "owner", "by", "progress"], ["task", "responsible", "due", "status"],
           ["what", "owner", "due_on", "state"], ["action_item", "lead", "target_date", "status"]]
STATUSES = [("open", "done", "blocked"), ("todo", "done", "on hold"), ("open", "closed", "blocked"),
            ("not started", "complete", "waiting"), ("new", "finished", "stuck"), ("open", "done", "paused")]
# (task text, keyword the tracker's task cell must contain)
ACTIONS = [
    ("send the vendor list to {org}", "vendor list"), ("book the venue for the {project}", "venue"),
    ("draft the budget memo", "budget memo"), ("update the {item} stock sheet", "stock sheet"),
    ("collect quotes for {item}", "quotes"), ("prepare the slides for the {project} review", "slides"),
    ("call {org} about the late delivery", "late delivery"), ("write the onboarding checklist", "onboarding"),
    ("renew the insurance policy", "insurance"), ("check the fire exits", "fire exits"),
    ("order new {item}", "order"), ("set up the shared folder", "shared folder"),
    ("book the {city} trip", "trip"), ("chase the {org} invoice", "invoice"), ("review the {item} contract", "contract"),
    ("write up the {project} lessons learned", "lessons learned"), ("survey the team about the rota", "survey the team"),
    ("clean up the {item} storage room", "storage room"), ("send the thank-you notes", "thank-you notes"),
    ("print the {project} handouts", "handouts"),
]
EXISTING = [
    ("Sign the supplier contract", "supplier contract"), ("Website copy for the {project}", "website copy"),
    ("Fix the printer in room 2", "printer"), ("Plan the team lunch", "team lunch"),
    ("Archive last year's invoices", "invoices"), ("Survey the customers", "survey"),
    ("Renew the {item} licence", "licence"), ("Update the contact sheet", "contact sheet"),
    ("Repaint the {project} signage", "signage"), ("Budget check with {org}", "budget check"),
]


def _alpha(s: str) -> tuple[str, str]:
    return (s.casefold(), s)


@operation
class TrackTasks(OperationGenerator):
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
        fill = dict(org=flavor.org(rng), project=rng.choice(voc["projects"]), item=rng.choice(voc["items"]),
                    city=rng.choice(flavor.CITIES))
        cols = rng.choice(SCHEMAS)
        st_new, st_done, st_blocked = rng.choice(STATUSES)
        meet = add_workdays(flavor.date_in(rng, 2026, rng.randint(1, 11)), 0)
        # the existing tracker
        ex = rng.sample(EXISTING, rng.randint(3, 4))
        old_rows = []
        for text, kw in ex:
            due = add_workdays(meet, rng.randint(-5, 15)).isoformat()
            old_rows.append({"task": text.format(**fill), "kw": kw, "owner": rng.choice(team), "due": due,
                             "status": rng.choice([st_new, "in progress"])})
        changed = rng.sample(range(len(old_rows)), 2)
        updates = []
        new_rows_old = [dict(r) for r in old_rows]
        for j, i in enumerate(changed):
            r = new_rows_old[i]
            kind = ["done", "blocked", "moved"][j if j < 1 else rng.randint(1, 2)]
            if kind == "done":
                r["status"] = st_done
                updates.append(rng.choice([f"{r['owner'].split()[0]} confirmed \"{r['task']}\" is done.",
                                           f"Good news: \"{r['task']}\" - finished.",
                                           f"\"{r['task']}\" was completed last week ({r['owner'].split()[0]})."]))
            elif kind == "blocked":
                r["status"] = st_blocked
                updates.append(rng.choice([f"\"{r['task']}\" is blocked until {fill['org']} replies.",
                                           f"\"{r['task']}\" cannot move: waiting for {fill['org']}."]))
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
                              "status": st_new, "line": line})
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
                         "status": st_new}
            mail_path = wpath(ctx, ["after_meeting", "one_more_thing", "forgot_one", "extra_action",
                                    f"from_{flavor.slug(sender.split()[0])}"], "eml", ["inbox", "mail"], p_folder=0.85)
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
        notes_path = wpath(ctx, ["meeting_notes", f"sync_{meet.isoformat()}", "minutes", f"{short_slug(fill['project'])}_sync",
                                 f"standup_{meet.strftime('%m%d')}", "team_meeting"], "md", ["notes", "meetings", "minutes"])
        tracker = wpath(ctx, ["tracker", "todo_tracker", "actions", "action_log", "task_list",
                              f"{short_slug(fill['project'])}_tasks", "open_items"], "csv", ["tasks", "admin", "tracking"])
        key = dict(zip(HEADER, cols, strict=True))

        def row(r: dict) -> list[str]:
            return [r[h] for h in HEADER]

        files = [WorkspaceFile(path=tracker, content=to_csv(cols, [row(r) for r in old_rows])),
                 WorkspaceFile(path=notes_path, content=notes)] + files
        all_new = new_items + ([mail_item] if mail_item else [])
        final = new_rows_old + all_new
        final_text = to_csv(cols, [row(r) for r in final])

        def spec(r: dict) -> dict:
            return {key["task"]: [r["kw"]], key["owner"]: r["owner"], key["due"]: r["due"], key["status"]: r["status"]}

        slots = dict(tracker=tracker, notes=notes_path, mail=mail_path or "", me=me, new=st_new, done=st_done,
                     blocked=st_blocked, cols=", ".join(cols), t=cols[0], o=cols[1], d=cols[2], s=cols[3],
                     project=fill["project"])
        mail_txt = (" " + clause(rng, "[and the extra one in|plus the one in|and the item emailed in] `{mail}` ([that "
                                      "one is mine: {o} {me}|mine, so {o} is {me}|my own item - {o} {me}|{o} "
                                      "{me} for that one])", **slots)) if mail_item else ""
        head = one_of(rng, [
            "Update my tracker `{tracker}` from the meeting notes `{notes}`" + mail_txt + ".",
            "[Please|Could you] bring `{tracker}` up to date [from|with] `{notes}`" + mail_txt + "[.|?]",
            "[we had the {project} [sync|meeting|stand-up]|the {project} meeting is over]; the notes are in `{notes}`" + mail_txt
            + ". [Put|Get] it all into `{tracker}`.",
            "`{tracker}` is [behind|out of date|stale] - [the notes|the minutes] in `{notes}`" + mail_txt
            + " [have|contain] [the new items and some updates|what changed].",
            "[Can you|Could you] [sync|reconcile] `{tracker}` with [what was said in|the minutes,] `{notes}`" + mail_txt
            + "?",
            "[New actions|Action items] and [status changes|a few updates] [came out of|are recorded in] `{notes}`"
            + mail_txt + "; [my tracker|the task list] `{tracker}` [doesn't have them yet|needs them].",
            "[Transfer|Copy over] the [actions|to-dos] from `{notes}`" + mail_txt + " to `{tracker}` and [apply|"
            "record] the updates [while you're at it|too].",
        ], **slots)
        items = [
            phrase(rng, ["[add one row per new action item|each new action item becomes a row]: `{t}` in the notes' "
                         "words, `{o}`, `{d}` [as YYYY-MM-DD|as an ISO date|year-month-day], `{s}` \"{new}\"",
                         "new actions [go in|are added] as new rows - `{t}` worded as in the notes, `{o}`, `{d}` "
                         "(YYYY-MM-DD) and `{s}` set to \"{new}\"",
                         "[a row for every|one line per] new action item with its `{t}` (the notes' wording), `{o}`, "
                         "`{d}` in YYYY-MM-DD form and `{s}` \"{new}\"",
                         "[whatever|every action] someone [took on|agreed to do] [gets|becomes] a fresh row, "
                         "\"{new}\" in `{s}`, [its|the] deadline in `{d}` ({iso}) and the person in `{o}`",
                         "`{s}` \"{new}\" for [every|each] [added|new] row; `{t}` [as the notes put it|in the "
                         "minutes' words], `{o}` the person, and {isod}"],
                   iso=V.iso(rng), isod=V.iso(rng, f"`{slots['d']}`"), **slots),
            phrase(rng, ["[apply|carry over] the updates the notes mention to the existing rows (`{s}` \"{done}\" "
                         "[when finished|for finished ones], \"{blocked}\" [when blocked|for blocked ones], or the "
                         "new `{d}`)",
                         "[existing rows|rows already there] [change|get updated] as the notes say: finished -> "
                         "`{s}` \"{done}\", blocked -> \"{blocked}\", [moved deadlines|a moved deadline] -> the "
                         "new `{d}`",
                         "where the notes report progress on an existing task, [update|change] it: \"{done}\" or "
                         "\"{blocked}\" in `{s}`, or the new `{d}`",
                         "[the Updates section|what the notes say under Updates] [changes|edits] rows that are "
                         "already there: a [finished|completed] task becomes \"{done}\", a stuck one \"{blocked}\", "
                         "and a [new deadline|moved date] replaces the old `{d}`",
                         "don't add rows for the updates - [edit|change] the matching existing row (\"{done}\" / "
                         "\"{blocked}\" in `{s}`, or a new `{d}`)"], **slots),
            phrase(rng, ["[keep|same] columns ({cols}) and [all|every one of the] existing rows",
                         "don't drop [any|a single] existing row or change the columns ({cols})",
                         "the columns stay {cols}; [no existing row disappears|nothing gets deleted]",
                         "[old rows stay, even the finished ones|nothing is removed, finished tasks included], and "
                         "the header [remains|is still] {cols}",
                         "[same header|header unchanged] ({cols}); [every|each] row that's there now [is kept|stays]"],
                   **slots),
        ]
        story = ""
        if rng.random() < 0.8:
            story = one_of(rng, [
                "[At|After] the {project} [sync|meeting] on {date}, {who} [and|plus] {n} others [took on|picked up] "
                "[new actions|work].",
                "[Things slip|Actions get lost] [when|if] nobody [updates|looks at] the tracker; {who} [already|just] "
                "asked me [what's open|who owns what].",
                "[We're|The team is] [juggling|tracking] {k} [actions|tasks] for the {project}, and the [minutes|notes] "
                "from {date} [changed a few|add some].",
            ], project=fill["project"], date=human_date(rng, meet, with_year=False), who=team[0], n=len(team) - 1,
                k=len(old_rows))
        instruction = join(story, V.job_line(rng, ctx.persona, 0.4), head,
                           reqs(rng, items, lead=expand("[Rules:|How:|In the tracker:|]", rng)),
                           aside(rng, ctx.persona))
        unchanged = [r for i, r in enumerate(new_rows_old) if i not in changed]
        checks = [
            Check("new_action_items", "docs_tracker_rows", {"path": tracker, "task_col": key["task"], "rows": [spec(r) for r in all_new],
                                                            "extra_penalty": False}),
            Check("updates_applied", "docs_tracker_rows", {"path": tracker, "task_col": key["task"], "rows": [spec(new_rows_old[i])
                                                                                     for i in changed],
                                                           "extra_penalty": False}),
            Check("tracker_complete", "min_of", parts=[
                Check("", "docs_tracker_rows", {"path": tracker, "task_col": key["task"], "rows": [spec(r) for r in final]}),
                Check("", "docs_tracker_rows", {"path": tracker, "task_col": key["task"], "rows": [spec(r) for r in unchanged + all_new],
                                                "extra_penalty": False}),
                Check("", "docs_tracker_rows", {"path": tracker, "task_col": key["task"], "rows": [spec(new_rows_old[i]) for i in changed],
                                                "extra_penalty": False})]),
        ]
        # partial: the new items from the notes added, the updates and the emailed item forgotten
        partial = to_csv(cols, [row(r) for r in old_rows + new_items])
        steps = [read(tracker), read(notes_path)] + ([read(mail_path)] if mail_path else []) + [write(tracker, final_text)]
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks, files=files,
            steps=steps, partial=[write(tracker, partial)],
            outputs=[Artifact(tracker, TABLE, {"header": cols, "rows": [row(r) for r in final]},
                              f"the task tracker ({tracker})", roles={"name": cols[0], "date": cols[2], "group": cols[1]})],
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
        # the heading check (docs_tracker_from_headings) knows the plain columns only
        cols = HEADER if prefix is not None else rng.choice(SCHEMAS)
        st_new = "open" if prefix is not None else rng.choice(STATUSES)[0]
        tc, oc, dc, sc = cols
        how = how.replace('task "', f'`{tc}` "')
        rows = []
        for i, (task, _) in enumerate(items):
            rows.append([task, team[i % len(team)], add_workdays(start, i * step).isoformat(), st_new])
        out = wpath(ctx, ["tracker", "followups", "review_tracker", "todo", "actions", "next_steps", "task_board"],
                    "csv", ["tasks", "tracking", "admin"], p_folder=0.4)
        days = f"{step} working day{'s' if step > 1 else ''}"
        slots = dict(out=out, cols=", ".join(cols), desc=source.description, src=source.path, how=how,
                     team=", ".join(team), start=start.isoformat(), days=days, st=st_new, t=tc, o=oc, d=dc, s=sc)
        head = one_of(rng, [
            "set up a tracker `{out}` (columns {cols}) from {desc}: {how}.",
            "make `{out}` with the columns {cols} for `{src}`: {how}.",
            "[I want|I need] [a|one] tracker for {desc} - `{out}`, columns {cols}; {how}.",
            "[turn|convert] `{src}` into a to-do tracker `{out}` ({cols}): {how}.",
            "[so that nothing in {desc} gets forgotten|to keep on top of {desc}], [start|open] a task list `{out}` "
            "[headed|with the header] {cols}; {how}.",
            "[the follow-up work on|what comes out of] `{src}` [needs owners and dates|should be tracked]: [build|"
            "write] `{out}` ({cols}), {how}.",
        ], **slots)
        items_txt = [
            phrase(rng, ["owners take turns in this order: {team}", "assign `{o}` round-robin: {team}",
                         "`{o}` [rotates|cycles] through {team}, in that order",
                         "[share the rows out|hand the rows out] in turn to {team} (`{o}`), [starting again after "
                         "the last|round and round]",
                         "row 1 goes to {first}, row 2 to the next in {team}, and so on (`{o}`)"],
                   first=team[0], **slots),
            phrase(rng, ["the first `{d}` is {start}, each next one {days} later (Mon-Fri)",
                         "due dates start at {start} and step {days} per row (weekends skipped)",
                         "`{d}` starts on {start}, then [+{days}|{days} more] per row, [skipping weekends|Mon-Fri only]",
                         "[space|stagger] the `{d}` dates {days} apart ({wd}), the first on {start}",
                         "{start} is the first deadline; every following row is due {days} after the one before "
                         "[(no weekends)|(weekdays only)]"], wd=V.workdays(rng), **slots),
            V.iso(rng),
            phrase(rng, ["`{s}` \"{st}\" [everywhere|for every row|on each row]", "every `{s}` is {st}",
                         "[all rows start as|everything begins] \"{st}\" (`{s}`)",
                         "[set|mark] `{s}` to {st} [throughout|on all of them]"], **slots),
        ]
        instruction = join(head, reqs(rng, items_txt))
        kws = [k for _, k in items]
        checks = [
            Check("one_row_per_item", "docs_tracker_rows", {"path": out, "task_col": tc, "rows": [{tc: k} for k in kws]}),
            Check("owners_round_robin", "docs_tracker_rows", {"path": out, "task_col": tc, "rows": [
                {tc: k, oc: r[1]} for k, r in zip(kws, rows, strict=True)]}),
            Check("due_dates_and_status", "docs_tracker_rows", {"path": out, "task_col": tc, "rows": [
                {tc: k, dc: r[2], sc: st_new} for k, r in zip(kws, rows, strict=True)]}),
        ]
        if prefix is not None:
            dyn = {"out": out, "src": source.path, "prefix": prefix, "owners": team, "start": start.isoformat(),
                   "step": step}
            checks = [Check("one_row_per_item", "docs_tracker_from_headings", dict(dyn, part="rows")),
                      Check("owners_round_robin", "docs_tracker_from_headings", dict(dyn, part="owners")),
                      Check("due_dates_and_status", "docs_tracker_from_headings", dict(dyn, part="dates"))]
        # partial: everything given to me, due dates on calendar days
        bad = [[r[0], team[0], (start + dt.timedelta(days=i * step)).isoformat(), st_new] for i, r in enumerate(rows)]
        if bad == rows:
            bad = [[r[0], r[1], r[2], "todo" if st_new != "todo" else "open"] for r in rows]
        text = to_csv(cols, rows)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=([read(source.path)] if "." in source.path.split("/")[-1] else []) + [write(out, text)],
            partial=[write(out, to_csv(cols, bad))],
            outputs=[Artifact(out, TABLE, {"header": list(cols), "rows": rows}, f"the tracker ({out})",
                              roles={"name": tc, "date": dc, "group": oc})],
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
                how = expand(ctx.rng.choice([
                    "one row per `##`/`###` section heading of the document, in document order{more}, task "
                    "\"Review section: <heading>\"",
                    "[a row for each|every] `##` or `###` heading [becomes a row|gets a row][, top to bottom| in the "
                    "order they appear]{more}, the task [reading|being] \"Review section: <heading>\"",
                    "[walk the document's|go down the] `##`/`###` headings{more} [and|,] [add|adding] \"Review "
                    "section: <heading>\" for each, [same order as the document|in document order]",
                ]), ctx.rng, clause=True, more=more)
                return self._chained(ctx, source, items, how, prefix="Review section: ")
        if source is not None and source.kind == MESSAGES and isinstance(source.data, list):
            subs = sorted({str(m.get("subject", "")).strip() for m in source.data if isinstance(m, dict)} - {""}, key=_alpha)
            if subs:
                more = " (only the first 10)" if len(subs) > 10 else ""
                items = [(f"Follow up: {s}", [s]) for s in subs[:10]]
                how = expand(ctx.rng.choice([
                    "one row per distinct message subject, sorted alphabetically (ignoring case){more}, task "
                    "\"Follow up: <subject>\"",
                    "[each|every] different subject line gets one \"Follow up: <subject>\" task, [A-Z|in "
                    "alphabetical order] [ignoring case|regardless of case]{more}",
                ]), ctx.rng, clause=True, more=more)
                return self._chained(ctx, source, items, how)
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
