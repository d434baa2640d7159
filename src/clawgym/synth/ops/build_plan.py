"""build_plan: tasks with durations, dependencies and owners (plus holidays) become a dated schedule that
respects every dependency, as a markdown table with the finish date or as a CSV. Chained: the previous step's
table/records become a funding plan under a budget (items funded in order until the money runs out, one payment
per working day, running totals)."""

from __future__ import annotations

import datetime as dt
import json

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _data_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops._docs_common import (
    add_workdays,
    aside,
    date_col,
    dated,
    digest,
    join,
    md_table,
    next_weekday,
    numeric_col,
    phrase,
    reqs,
    role_col,
    table_of,
    text_col,
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

PHASES = {
    "software": ["Requirements", "API design", "Database changes", "Backend work", "Frontend work", "Testing",
                 "Security review", "Documentation", "Release", "Load testing", "Data migration", "Beta feedback",
                 "Monitoring setup"],
    "food": ["Menu draft", "Supplier quotes", "Tasting", "Staff training", "Kitchen setup", "Soft opening",
             "Marketing", "Launch", "Allergen sheet", "Hygiene inspection", "Price list", "Signage"],
    "education": ["Syllabus draft", "Materials", "Room booking", "Parent letter", "Rehearsal", "Lesson plans",
                  "Assessment design", "Event day", "Risk assessment", "Permission slips", "Marking scheme",
                  "Display boards"],
    "health": ["Needs assessment", "Staff rota", "Stock order", "Training", "Patient letters", "Pilot clinic",
               "Audit", "Go-live", "Consent forms", "Equipment check", "Protocol sign-off", "Waiting list review"],
    "finance": ["Data collection", "Reconciliation", "Draft accounts", "Partner review", "Client sign-off",
                "Filing", "Archive", "Bank confirmations", "Tax computation", "Management letter", "Invoice run"],
    "farm": ["Soil test", "Seed order", "Field prep", "Planting", "Irrigation check", "Fencing", "Harvest plan",
             "Market prep", "Hedge cutting", "Vet visit", "Machinery service", "Grain store clean"],
    "creative": ["Concept", "Mood board", "Client approval", "Shoot", "Editing", "Print proofs", "Framing",
                 "Opening night", "Location scout", "Casting", "Colour grade", "Press release"],
    "legal": ["Intake", "Conflict check", "Document review", "Research memo", "Draft filing", "Partner review",
              "Filing", "Client update", "Witness statements", "Disclosure", "Counsel's opinion", "Bundle prep"],
    "general": ["Scope", "Budget approval", "Vendor selection", "Procurement", "Setup", "Training", "Testing",
                "Communication", "Launch", "Stakeholder survey", "Pilot run", "Handover", "Review meeting"],
}
# why a day is off (a sentence part of the request; the date itself is what the checks read)
OFF_WHY = {
    "health": ["the clinic shuts for staff training", "it's the CQC inspection day", "the ward closes for a deep clean"],
    "education": ["it's an INSET day", "the school is closed for elections", "it's the staff training day"],
    "food": ["we close for the deep clean", "the kitchen is shut for the refit", "it's our one day off"],
    "software": ["it's the company offsite", "the office is closed for the move", "it's a company holiday"],
    "finance": ["the office closes for the partners' away day", "it's a bank holiday", "the systems are down for "
                "the upgrade"],
    "farm": ["it's the county show", "the contractor has the machinery that day", "it's market day and nobody's free"],
    "creative": ["the studio is booked out", "it's the gallery's install day", "I'm at the trade fair"],
    "legal": ["the court is closed", "it's the firm's training day", "the office is shut for the move"],
    "general": ["it's a public holiday", "the office is closed", "it's a bank holiday"],
}
# input columns (task, duration in working days, dependencies, owner) and output columns (task, owner, start, end)
IN_COLS = [("task", "duration_days", "depends_on", "owner"), ("step", "days", "after", "owner"),
           ("activity", "working_days", "needs", "lead"), ("task", "effort_days", "prerequisites", "assignee"),
           ("name", "duration", "depends_on", "who")]
OUT_COLS = [("task", "owner", "start", "end"), ("step", "who", "begins", "ends"), ("task", "lead", "start_date", "end_date"),
            ("activity", "owner", "from", "to"), ("task", "owner", "starts", "finishes")]
FINISH = ["Project finish", "Finish", "Planned finish", "Estimated finish", "Expected finish"]
# funding plan columns and the two status words
FUND_COLS = [("item", "amount", "status", "pay_date", "running_total"), ("item", "cost", "decision", "paid_on", "cumulative"),
             ("entry", "amount", "status", "payment_date", "total_so_far"), ("what", "sum", "outcome", "date", "running")]
FUND_WORDS = [("funded", "deferred"), ("paid", "postponed"), ("approved", "waitlisted"), ("yes", "later")]


def schedule(tasks: list[dict], start: dt.date, holidays: set[dt.date]) -> dict[str, tuple[dt.date, dt.date]]:
    """Earliest start for each task: the first working day after all its dependencies end."""
    out: dict[str, tuple[dt.date, dt.date]] = {}
    for t in tasks:  # tasks are given in dependency order
        s = add_workdays(start, 0, holidays)
        for d in t["deps"]:
            s = max(s, add_workdays(out[d][1], 1, holidays))
        e = add_workdays(s, t["days"] - 1, holidays)
        out[t["name"]] = (s, e)
    return out


@operation
class BuildPlan(OperationGenerator):
    id = "build_plan"
    consumes: tuple[str, ...] = (TABLE, RECORDS)
    produces = (DOCUMENT, EVENTS)
    standalone = True

    def _project(self, ctx: OpContext, source: Artifact | None = None) -> StepPlan:  # noqa: PLR0915 (one linear recipe: its rng draws, in order, fix the tasks a seed gives)
        rng = ctx.rng
        key = flavor.persona_domain(ctx.persona)
        names = PHASES.get(key, PHASES["general"])
        n = rng.randint(5, min(8, len(names)))
        chosen = names[:n] if rng.random() < 0.5 else [names[0]] + sorted(rng.sample(names[1:], n - 1),
                                                                          key=names.index)
        owners = flavor.people(rng, 3)
        from_source = ""
        if source is not None:  # a table without amounts (e.g. an address book): its people own the tasks
            header, rows = table_of(source)
            ni = text_col(header, rows, role_col(source, "name", header))
            names = list(dict.fromkeys(r[ni].strip() for r in rows if ni is not None and ni < len(r) and r[ni].strip()))
            if ni is not None and len(names) >= 2:
                owners = names[:4]
                from_source = " " + expand("([the owners are people from|the owners are drawn from] {d})", ctx.rng, clause=True, d=source.description)
        tasks = []
        for i, name in enumerate(chosen):
            deps = []
            if i > 0:
                deps = [chosen[i - 1]]
                if i > 1 and rng.random() < 0.35:
                    extra = rng.choice(chosen[: i - 1])
                    deps = sorted({extra, chosen[i - 1]}, key=chosen.index)
                elif i > 1 and rng.random() < 0.25:
                    deps = [rng.choice(chosen[: i - 1])]
            tasks.append({"name": name, "days": rng.randint(1, 6), "deps": deps, "owner": rng.choice(owners)})
        start = next_weekday(flavor.date_in(rng, 2026, rng.randint(1, 10)))
        holidays: set[dt.date] = set()
        if rng.random() < 0.6:
            h = add_workdays(start, rng.randint(3, 10))
            holidays.add(h)
        sched = schedule(tasks, start, holidays)
        order = sorted(tasks, key=lambda t: (sched[t["name"]][0], chosen.index(t["name"])))
        finish = max(e for _, e in sched.values())
        rows = [[t["name"], t["owner"], sched[t["name"]][0].isoformat(), sched[t["name"]][1].isoformat()]
                for t in order]
        incols = rng.choice(IN_COLS)
        header = list(rng.choice(OUT_COLS))
        fin_l = rng.choice(FINISH)
        tc, oc, sc, ec = header
        shuffled = list(tasks)
        rng.shuffle(shuffled)
        in_stems = ["tasks", "plan_input", "work_breakdown", "project_tasks", "milestones", "todo_with_durations",
                    f"{flavor.slug(chosen[-1])}_plan"]
        if rng.random() < 0.5:
            in_path = wpath(ctx, in_stems, "csv", ["project", "planning", "plans"], p_folder=0.5)
            in_text = to_csv(list(incols),
                             [[t["name"], str(t["days"]), "; ".join(t["deps"]), t["owner"]] for t in shuffled])
        else:
            in_path = wpath(ctx, in_stems, "json", ["project", "planning", "plans"], p_folder=0.5)
            in_text = json.dumps([dict(zip(incols, (t["name"], t["days"], t["deps"], t["owner"]), strict=True))
                                  for t in shuffled], indent=2) + "\n"
        as_md = rng.random() < 0.6
        out = wpath(ctx, ["plan", "project_plan", "schedule", "timeline", "gantt", "dated_plan", "rollout"],
                    "md" if as_md else "csv", ["project", "planning", "plans"], p_folder=0.4)
        if as_md:
            text = (f"# Project plan\n\nStart: {start.isoformat()}\n\n" + md_table(header, rows) +
                    f"\n{fin_l}: {finish.isoformat()}\n")
        else:
            text = to_csv(header, rows)
        hol_words = []
        if holidays:
            hd = sorted(holidays)[0]
            hol_words = [dated(rng, hd)]
        hol_clause = ""
        slots = dict(inp=in_path, out=out, cols=" | ".join(header), csvcols=",".join(header), fin=fin_l, t=tc, o=oc,
                     s=sc, e=ec, ti=incols[0], du=incols[1], de=incols[2], ow=incols[3],
                     hol=hol_words[0] if hol_words else "", order=", ".join(chosen))
        dom = flavor.persona_domain(ctx.persona)
        if holidays:
            hol_clause = phrase(rng, ["{hol} is a public holiday (no work that day)",
                                      "nobody works on {hol} ([public holiday|bank holiday|the office is closed])",
                                      "skip {hol} as well, it's a holiday",
                                      "{hol} doesn't count as a working day: {why}",
                                      "no work happens on {hol} ({why})",
                                      "[treat|count] {hol} like a weekend - {why}"],
                                why=rng.choice(OFF_WHY.get(dom, OFF_WHY["general"])), **slots)
        fin_line = phrase(rng, ["followed by a line `{fin}: YYYY-MM-DD`",
                                "and [then|after it] one line `{fin}: YYYY-MM-DD` [with|giving] the last end date",
                                "[with|plus] a closing line `{fin}: YYYY-MM-DD` under it"], **slots)
        fmt = (V.md_with(rng, slots["cols"]) + " " + fin_line if as_md else V.csv_with(rng, slots["csvcols"]))
        rules = [
            phrase(rng, ["each task starts on the first working day after all the tasks it depends on (`{de}`) have "
                         "ended (tasks without dependencies start on the start date)",
                         "a task [begins|can start] on the first working day after [every task|all tasks] in its "
                         "`{de}` [has|have] [ended|finished]; tasks with none start on the start date",
                         "nothing starts before [its|all its] `{de}` [are|is] done: the next working day after the "
                         "last of them ends (no `{de}` = the start date)",
                         "[respect|honour] `{de}`: start on the working day after the latest one finishes, or on the "
                         "start date if there are none",
                         "[a task waits for|tasks wait for] everything in `{de}`; [it begins|they begin] the "
                         "[working|next working] day after the last of those ends, [or|and tasks with an empty "
                         "`{de}` begin] on day one",
                         "if `{de}` is empty the task [opens|starts] on the start date; otherwise it [opens|starts] "
                         "one working day after its latest dependency [closes|ends]"], **slots),
            phrase(rng, ["it takes its `{du}` in {wd} (the start day counts)",
                         "`{du}` [is|counts] {wd}, counting the start day",
                         "a task lasts `{du}` weekdays, its first day included",
                         "[weekends don't count|no work on Saturdays or Sundays]: `{du}` is in working days, "
                         "start day included",
                         "`{du}` = how many {wd} it [runs|takes], the first one included (so 1 means it ends the "
                         "day it starts)",
                         "[the end date|a task's last day] is `{du}` {wd} on from its start, counting [the start|"
                         "that first day] as one"], wd=V.workdays(rng), **slots),
            V.iso(rng, "", plural=True),
            phrase(rng, ["rows sorted by `{s}`, ties in the order of the task list below",
                         "[order|sort] the rows by `{s}` (ties: [task list order|as in the list below])",
                         "[earliest|soonest] `{s}` first; [same-day starts|equal starts] keep the task list order",
                         "the table runs in `{s}` order, [with ties|ties] [as in|following] the task list"], **slots),
            phrase(rng, ["keep [each|every] task's `{ow}` as `{o}`", "`{o}` = the task's `{ow}`",
                         "`{o}` [comes straight from|is copied from] `{ow}`",
                         "[whoever|the person] in `{ow}` [goes in|is the] `{o}`"], **slots),
        ] + ([hol_clause] if hol_clause else [])
        starts = [dated(rng, start), dated(rng, start)]  # drawn in this order, as before (same tasks per seed)
        k = rng.choice([0, 1])
        slots["start"] = starts[k]
        head = one_of(rng, [
            "Turn `{inp}` into a schedule starting {start}: write `{out}` as {fmt}.",
            "Please plan the project in `{inp}` from {start} onwards and save it as `{out}` - {fmt}.",
            "[I need|Can I get] [dates|a dated plan] for the tasks in `{inp}`: [we start|work starts|kick-off is] "
            "{start}. [Put|Write] the schedule in `{out}` ({fmt}).",
            "`{inp}` [lists|has] the tasks ([`{ti}`, `{du}`, `{de}`, `{ow}`|name, duration, dependencies, owner]); "
            "[schedule|plan] them from {start} into `{out}`, {fmt}.",
            "[What would the calendar look like|When does each step happen] if we [start|kick off] on {start}? The "
            "tasks are in `{inp}`; [give me|I'd like] `{out}` as {fmt}.",
            "[Work out|Figure out] start and end dates for [every|each] task in `{inp}` (first day: {start}) and "
            "[record|write] them in `{out}` - {fmt}.",
            "[A Gantt-style|A simple] schedule, please: input `{inp}`, output `{out}` ({fmt}), starting {start}.",
            "[From|Beginning] {start}, [how do|how would] the tasks in `{inp}` [fall|line up]? [Answer with|Write] "
            "`{out}`: {fmt}.",
        ], fmt=fmt, **slots)
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        story = ""
        if rng.random() < 0.8:
            owners_in = list(dict.fromkeys(t["owner"] for t in tasks))
            story = one_of(rng, [
                "[The|Our] {project} [has|comes down to] {n} [steps|tasks|work packages], from {first} to {last}, "
                "[and nobody has put dates on them yet|and {o1} keeps asking when {last} will happen|and the {last} "
                "date is what everyone asks about].",
                "[The {project} work is split between|Most of the {project} falls on] {o1} and {o2}; [I promised "
                "them|they want|the board wants] a [dated plan|timeline|schedule] [before|by] {day}.",
                "[We're about to start|Kick-off is close for] the {project}: {n} tasks, [some waiting on others|with "
                "dependencies between them|a few that can run in parallel].",
                "[Before I|I can't] [commit to a date for|promise anything about] {last} [I need to|until I] see how "
                "the {n} tasks of the {project} line up.",
            ], project=rng.choice(voc["projects"]), n=len(tasks), first=chosen[0], last=chosen[-1],
                o1=owners_in[0], o2=owners_in[-1] if len(owners_in) > 1 else "me",
                day=rng.choice(["Friday", "Monday", "the next meeting", "month end"]))
        order_note = one_of(rng, ["(Task list order: {order}.)", "Task list, in order: {order}.",
                                  "[The|My] task list [order|sequence] is: {order}."], **slots)
        if rng.random() < 0.25:  # terse, as a note to oneself
            head = one_of(rng, ["`{inp}` -> `{out}` ({fmt}), start {start}.", "Schedule: `{inp}` in, `{out}` out; "
                                "start {start}; {fmt}.", "[plan|dates] for `{inp}` from {start} -> `{out}`, {fmt}."],
                          fmt=fmt, **slots)
        instruction = join(story, V.job_line(rng, ctx.persona, 0.4), head,
                           reqs(rng, rules, lead=expand("[Rules:|How to schedule:|Scheduling rules:|]",
                                                                      rng)),
                           order_note, from_source.strip(), aside(rng, ctx.persona))
        program = render("build_plan", src=in_path, out=out, start=starts[k], holidays=hol_words, order=", ".join(chosen),
                         incols=list(incols), outcols=list(header), finish=fin_l if as_md else "")
        pairs = [[d, t["name"]] for t in tasks for d in t["deps"]]
        dates = [Check("dates_correct", "docs_table_rows", {"path": out, "header": [tc, sc, ec],
                                                            "rows": [[r[0], r[2], r[3]] for r in rows]}),
                 Check("dependencies_respected", "docs_table_before", {"path": out, "column": tc, "pairs": pairs,
                                                                       "start_col": sc, "end_col": ec})]
        scheduled = Check("", "mean_of", parts=[Check("", c.fn, c.args) for c in dates])
        # owners and order count as far as the tasks are scheduled: the task list copied as it is keeps its owners
        checks = [
            *dates,
            Check("owners_kept", "gated", parts=[Check("", "docs_table_rows", {
                "path": out, "header": [tc, oc], "rows": [[r[0], r[1]] for r in rows]}), scheduled]),
            Check("sorted_by_start", "gated", parts=[Check("", "docs_table_rows", {
                "path": out, "header": [tc], "rows": [[r[0]] for r in rows], "ordered": True}), scheduled]),
        ]
        if as_md:
            checks.append(Check("finish_date", "docs_regex", {"path": out,
                                                              "pattern": rf"finish\W[^\n]*{finish.isoformat()}"}))
        # partial: weekends counted as working days and the holiday ignored
        bad = {}
        for t in tasks:
            s = start
            for d in t["deps"]:
                s = max(s, bad[d][1] + dt.timedelta(days=1))
            bad[t["name"]] = (s, s + dt.timedelta(days=t["days"] - 1))
        bad_rows = [[t["name"], t["owner"], bad[t["name"]][0].isoformat(), bad[t["name"]][1].isoformat()]
                    for t in tasks]
        bad_text = (md_table(header, bad_rows) if as_md else to_csv(header, bad_rows))
        if bad_rows == rows:
            bad_text = md_table(header, bad_rows[:-1]) if as_md else to_csv(header, bad_rows[:-1])
        events = [{"summary": t["name"], "start": sched[t["name"]][0].isoformat(), "end": sched[t["name"]][1].isoformat(),
                   "location": ""} for t in order]
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            files=[WorkspaceFile(path=in_path, content=in_text)],
            steps=[read(in_path), write(out, text)],
            partial=[write(out, bad_text)],
            program=[read(in_path), python(program)],
            outputs=[Artifact(out, DOCUMENT, text, f"the project plan ({out})"),
                     Artifact(out, EVENTS, events, f"the project plan's tasks ({out})")],
            summary=f"schedule {len(tasks)} tasks into {out}",
            fingerprint=digest(rows),
        )

    def _funding(self, ctx: OpContext, source: Artifact) -> StepPlan | None:
        rng = ctx.rng
        header, rows = table_of(source)
        vi = numeric_col(header, rows, role_col(source, "value", header))
        ni = text_col(header, rows, role_col(source, "name", header))
        if vi is None or ni is None or vi == ni:
            return None
        di = date_col(header, rows, role_col(source, "date", header))
        items = []
        for k, r in enumerate(rows):
            try:
                v = round(float(r[vi]), 2)
            except (ValueError, IndexError):
                continue
            if v > 0 and r[ni].strip():
                items.append((r[di] if di is not None and di < len(r) else "", k, r[ni].strip(), v))
        if len(items) < 2:
            return None
        # an order that does not depend on how the earlier step happened to order its rows
        if di is not None:
            items.sort(key=lambda it: (it[0], it[2].casefold(), it[3]))
        else:
            items.sort(key=lambda it: (-it[3], it[2].casefold()))
        total = sum(v for *_, v in items)
        budget = round(total * rng.uniform(0.55, 0.8) / 10) * 10
        start = next_weekday(dt.date(2026, rng.randint(1, 12), rng.randint(1, 20)))
        header_out = list(rng.choice(FUND_COLS))
        w_yes, w_no = rng.choice(FUND_WORDS)
        tot_l = rng.choice(["Total funded", "Total paid", "Funded in total", "Total committed"])
        funded, running, day = [], 0.0, start
        rows_out = []
        for _, _, name, v in items:
            if running + v <= budget + 1e-9:
                running = round(running + v, 2)
                rows_out.append([name, f"{v:.2f}", w_yes, day.isoformat(), f"{running:.2f}"])
                funded.append((name, v, day))
                day = add_workdays(day, 1)
            else:
                rows_out.append([name, f"{v:.2f}", w_no, "", ""])
        if not funded or len(funded) == len(items):
            return None
        hi, ha, hs, hd, hr = header_out
        as_md = rng.random() < 0.5
        out = wpath(ctx, ["funding_plan", "payment_plan", "spend_plan", "what_we_can_afford", "budget_plan",
                          "payment_schedule"], "md" if as_md else "csv", ["finance", "budget", "plans"], p_folder=0.4)
        text = ((f"# Payment plan\n\nBudget: {budget:.2f}\n\n" + md_table(header_out, rows_out) +
                 f"\n{tot_l}: {running:.2f}\n") if as_md else to_csv(header_out, rows_out))
        if di is not None:
            order = expand(rng.choice([
                "by {d} (oldest first; ties by {n} A-Z, then smallest amount)",
                "[in date order|chronologically] by {d} ([same day|equal dates]: {n} alphabetically, then the "
                "smaller amount first)",
                "oldest {d} first, [breaking ties|with ties broken] by {n} (A-Z) and then by the [lower|smaller] "
                "amount",
            ]), rng, clause=True, d=f"`{header[di]}`", n=f"`{header[ni]}`")
        else:
            order = expand(rng.choice([
                "from the largest {v} to the smallest (ties by {n} A-Z)",
                "[biggest|largest] {v} first[, then down| and downwards] ({n} A-Z [on|for] ties)",
                "in descending {v} order, [equal|tied] amounts by {n} alphabetically",
            ]), rng, clause=True, v=f"`{header[vi]}`", n=f"`{header[ni]}`")
        slots = dict(budget=f"{budget:.2f}", desc=source.description, src=source.path, order=order, n=header[ni],
                     v=header[vi], out=out, start=start.isoformat(), cols=" | ".join(header_out),
                     csvcols=",".join(header_out), tot=tot_l, yes=w_yes, no=w_no, i=hi, a=ha, s=hs, d=hd, r=hr)
        fmt = (V.md_with(rng, slots["cols"]) + " " + phrase(rng, [
            "and a final line `{tot}: <amount>`", "[closing with|then] one line `{tot}: <amount>`",
            "plus a last line `{tot}: <amount>` [for|with] the money committed"], **slots)
               if as_md else V.csv_with(rng, slots["csvcols"]))
        head = one_of(rng, [
            "I only have {budget} to spend. Using {desc}, go through the entries {order}.",
            "make a payment plan in `{out}` for the entries of `{src}` taken {order}: budget {budget}.",
            "[the budget is|there's only|we have] {budget} [for this|left|in total]; [plan|work out] what we can pay "
            "from `{src}`, [going|taking the entries] {order}.",
            "[decide|work out] which entries of {desc} fit in a budget of {budget}, [in order|going] {order}.",
            "{budget} is all [the {project} has left|there is until the next top-up|I can release this month]: "
            "[walk through|take] {desc} {order} and [see what we can afford|fund what fits].",
            "[Not everything in|We can't pay all of] {desc} [can be paid|at once] - the pot is {budget}. [Go|Work] "
            "through it {order}.",
        ], project=rng.choice(flavor.vocab(ctx.persona.domain, ctx.persona.occupation)["projects"]), **slots)
        rules = [
            phrase(rng, ["an entry (`{i}` = `{n}`, `{a}` = `{v}`) is {yes} when it fits in what is left of the "
                         "budget, otherwise {no} - and carry on with the next",
                         "fund each entry (`{n}` as the `{i}`, `{v}` as the `{a}`) if it still fits, `{s}` {yes}; "
                         "if not, `{s}` {no} and [keep going|go on] with the later ones",
                         "[if|when] an entry's `{v}` [would push us over|doesn't fit in what's left of] the budget it's "
                         "{no} (`{s}`), otherwise {yes}; a {no} entry doesn't stop the later ones [being funded|from "
                         "fitting] (`{i}` from `{n}`, `{a}` from `{v}`)",
                         "`{s}` says {yes} or {no}: {yes} while the remaining money covers the `{v}`, {no} when it "
                         "doesn't - then [move on|skip to the next one] (copy `{n}` to `{i}`, `{v}` to `{a}`)"],
                   **slots),
            phrase(rng, ["{yes} payments go on consecutive working days (Mon-Fri) from {start}, one per day, in `{d}`",
                         "[pay|schedule] one {yes} entry per working day starting {start} (`{d}`, Mon-Fri)",
                         "`{d}`: the first {yes} entry is paid on {start}, each next one on the following {wd_one}",
                         "[spread|pay out] the {yes} entries one a day over consecutive {wd}, [beginning|from] {start} "
                         "(`{d}`)"], wd=V.workdays(rng), wd_one=rng.choice(["working day", "weekday", "business day"]),
                   **slots),
            phrase(rng, ["`{r}` is the running total of what is {yes}",
                         "[keep|give] a running total in `{r}`",
                         "`{r}` [adds up|accumulates] the {yes} amounts [so far|as you go]",
                         "[after|with] each {yes} row, `{r}` shows [how much is committed|the money spent] so far"],
                   **slots),
            phrase(rng, ["leave `{d}` and `{r}` [empty|blank] for {no} entries",
                         "{no} rows get no `{d}` and no `{r}`",
                         "[nothing|no date or total] in `{d}`/`{r}` on a {no} row"], **slots),
            phrase(rng, ["one row per entry in that order", "[every|each] entry gets a row, [same|in that] order",
                         "[list|keep] all the entries, funded or not, in [the order above|that order]"]),
            V.two_dec(rng, rng.choice(["money", "amounts", "every amount", "the sums"])),
        ]
        instruction = join(head, phrase(rng, ["[write|save] `{out}` as {fmt}.", "the plan goes in `{out}`, {fmt}."],
                                        fmt=fmt, **slots), reqs(rng, rules))
        checks = [
            Check("funding_decisions", "docs_table_rows", {"path": out, "header": [hi, ha, hs],
                                                           "rows": [r[:3] for r in rows_out]}),
            Check("pay_dates_and_running_totals", "docs_table_rows", {"path": out, "header": header_out,
                                                                      "rows": rows_out}),
            Check("order_kept", "docs_table_rows", {"path": out, "header": [hi, ha],
                                                    "rows": [r[:2] for r in rows_out], "ordered": True}),
        ]
        if as_md:
            checks.append(Check("total_funded", "docs_line_number", {"path": out, "label": tot_l,
                                                                     "value": running}))
        # partial: stops at the first item that does not fit (no skipping), dates on calendar days
        bad_rows, run, stop, d = [], 0.0, False, start
        for _, _, name, v in items:
            if not stop and run + v <= budget:
                run = round(run + v, 2)
                bad_rows.append([name, f"{v:.2f}", w_yes, d.isoformat(), f"{run:.2f}"])
                d += dt.timedelta(days=1)
            else:
                stop = True
                bad_rows.append([name, f"{v:.2f}", w_no, "", ""])
        if bad_rows == rows_out:
            bad_rows = bad_rows[::-1]
        bad_text = ((md_table(header_out, bad_rows) + f"\n{tot_l}: {run + 1:.2f}\n") if as_md
                    else to_csv(header_out, bad_rows))
        events = [{"summary": f"Pay {name}", "start": d.isoformat(), "end": d.isoformat(), "location": ""}
                  for name, _, d in funded]
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=[read(source.path), write(out, text)],
            partial=[write(out, bad_text)],
            outputs=[Artifact(out, DOCUMENT, text, f"the payment plan ({out})"),
                     Artifact(out, EVENTS, events, f"the planned payments ({out})")],
            summary=f"plan payments for {source.path} within {budget:.2f}",
            fingerprint=digest(rows_out),
        )

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        if source is not None and source.kind in (TABLE, RECORDS):
            p = self._funding(ctx, source)
            if p is not None:
                return p
        return self._project(ctx, source)


GENERATORS = [BuildPlan()]
