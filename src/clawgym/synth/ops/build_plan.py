"""build_plan: tasks with durations, dependencies and owners (plus holidays) become a dated schedule that
respects every dependency, as a markdown table with the finish date or as a CSV. Chained: the previous step's
table/records become a funding plan under a budget (items funded in order until the money runs out, one payment
per working day, running totals)."""

from __future__ import annotations

import datetime as dt
import json

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.ops._docs_common import (
    add_workdays,
    date_col,
    dated,
    digest,
    md_table,
    next_weekday,
    numeric_col,
    role_col,
    table_of,
    text_col,
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

PHASES = {
    "software": ["Requirements", "API design", "Database changes", "Backend work", "Frontend work", "Testing",
                 "Security review", "Documentation", "Release"],
    "food": ["Menu draft", "Supplier quotes", "Tasting", "Staff training", "Kitchen setup", "Soft opening",
             "Marketing", "Launch"],
    "education": ["Syllabus draft", "Materials", "Room booking", "Parent letter", "Rehearsal", "Lesson plans",
                  "Assessment design", "Event day"],
    "health": ["Needs assessment", "Staff rota", "Stock order", "Training", "Patient letters", "Pilot clinic",
               "Audit", "Go-live"],
    "general": ["Scope", "Budget approval", "Vendor selection", "Procurement", "Setup", "Training", "Testing",
                "Communication", "Launch"],
}


# The program solution of a project plan: the dates are the request's own words (any of the ways
# _docs_common.dated writes them), the task list order is copied from the request and is the dependency order.
PROGRAM = """import csv, json, datetime as dt
SRC, OUT = {src!r}, {out!r}
START, HOLIDAYS = {start!r}, {holidays!r}
ORDER = {order!r}.split(', ')
def day(s):
    for f in ('%Y-%m-%d', '%A %d %B %Y', '%d %B %Y', '%B %d, %Y', '%a %d/%m/%Y'):
        try:
            return dt.datetime.strptime(s, f).date()
        except ValueError:
            pass
off = [day(h) for h in HOLIDAYS]
def work(d, n):
    while d.weekday() > 4 or d in off or n > 0:
        n -= d.weekday() < 5 and d not in off and n > 0
        d += dt.timedelta(1)
    return d
tasks = {{t['task']: t for t in (json.load(open(SRC)) if SRC.endswith('.json') else csv.DictReader(open(SRC)))}}
end, rows = {{}}, []
for n in ORDER:
    t = tasks[n]
    deps = t['depends_on'] if SRC.endswith('.json') else [x for x in t['depends_on'].split('; ') if x]
    s = max([work(day(START), 0)] + [work(end[d], 1) for d in deps])
    end[n] = work(s, int(t['duration_days']) - 1)
    rows.append([n, t['owner'], str(s), str(end[n])])
rows.sort(key=lambda r: r[2])
if OUT.endswith('.csv'):
    text = ''.join(','.join(r) + '\\n' for r in [['task', 'owner', 'start', 'end']] + rows)
else:
    text = '# Project plan\\n\\nStart: %s\\n\\n| task | owner | start | end |\\n|---|---|---|---|\\n' % day(START)
    text += ''.join('| ' + ' | '.join(r) + ' |\\n' for r in rows) + '\\nProject finish: %s\\n' % max(end.values())
open(OUT, 'w').write(text)
print('wrote', len(rows), 'tasks to', OUT)
"""


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


class BuildPlan:
    id = "build_plan"
    consumes: tuple[str, ...] = (TABLE, RECORDS)
    produces = (DOCUMENT, EVENTS)
    standalone = True

    def _project(self, ctx: OpContext, source: Artifact | None = None) -> StepPlan:
        rng = ctx.rng
        key = flavor.domain_key(ctx.persona.domain, ctx.persona.occupation)
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
                from_source = f" (the owners are people from {source.description})"
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
        header = ["task", "owner", "start", "end"]
        shuffled = list(tasks)
        rng.shuffle(shuffled)
        if rng.random() < 0.5:
            in_path = ctx.path(rng.choice(["tasks.csv", "project/tasks.csv", "plan_input.csv"]))
            in_text = to_csv(["task", "duration_days", "depends_on", "owner"],
                             [[t["name"], str(t["days"]), "; ".join(t["deps"]), t["owner"]] for t in shuffled])
        else:
            in_path = ctx.path(rng.choice(["tasks.json", "project/tasks.json"]))
            in_text = json.dumps([{"task": t["name"], "duration_days": t["days"], "depends_on": t["deps"],
                                   "owner": t["owner"]} for t in shuffled], indent=2) + "\n"
        as_md = rng.random() < 0.6
        out = ctx.path(rng.choice(["plan.md", "project_plan.md", "schedule.md"]) if as_md else
                       rng.choice(["plan.csv", "schedule.csv"]))
        if as_md:
            text = (f"# Project plan\n\nStart: {start.isoformat()}\n\n" + md_table(header, rows) +
                    f"\nProject finish: {finish.isoformat()}\n")
        else:
            text = to_csv(header, rows)
        hol, hol_words = "", []
        if holidays:
            hd = sorted(holidays)[0]
            hol_words = [dated(rng, hd)]
            hol = f" {hol_words[0]} is a public holiday (no work that day)."
        fmt = (f"a markdown table with the columns {' | '.join(header)} followed by a line `Project finish: "
               "YYYY-MM-DD`" if as_md else f"a CSV with the columns {','.join(header)}")
        rules = ("Each task starts on the first working day after all the tasks it depends on have ended (tasks "
                 "without dependencies start on the start date) and takes its duration in working days (Mon-Fri, "
                 f"the start day counts).{hol} Dates as YYYY-MM-DD; rows sorted by start date, ties in the order of "
                 "the task list below.")
        order_hint = ", ".join(chosen)
        starts = [dated(rng, start), dated(rng, start)]  # drawn in this order, as before (same tasks per seed)
        k = rng.choice([0, 1])
        instruction = [
            f"Turn `{in_path}` into a schedule starting {starts[0]}: write `{out}` as {fmt}. {rules} "
            f"(Task list order: {order_hint}.)",
            f"Please plan the project in `{in_path}` from {starts[1]} onwards and save it as `{out}` - "
            f"{fmt}. {rules} (Task list order: {order_hint}.)",
        ][k] + from_source
        program = PROGRAM.format(src=in_path, out=out, start=starts[k], holidays=hol_words, order=order_hint)
        pairs = [[d, t["name"]] for t in tasks for d in t["deps"]]
        dates = [Check("dates_correct", "docs_table_rows", {"path": out, "header": ["task", "start", "end"],
                                                            "rows": [[r[0], r[2], r[3]] for r in rows]}),
                 Check("dependencies_respected", "docs_table_before", {"path": out, "column": "task", "pairs": pairs,
                                                                       "start_col": "start", "end_col": "end"})]
        scheduled = Check("", "mean_of", parts=[Check("", c.fn, c.args) for c in dates])
        # owners and order count as far as the tasks are scheduled: the task list copied as it is keeps its owners
        checks = [
            *dates,
            Check("owners_kept", "gated", parts=[Check("", "docs_table_rows", {
                "path": out, "header": ["task", "owner"], "rows": [[r[0], r[1]] for r in rows]}), scheduled]),
            Check("sorted_by_start", "gated", parts=[Check("", "docs_table_rows", {
                "path": out, "header": ["task"], "rows": [[r[0]] for r in rows], "ordered": True}), scheduled]),
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
        funded, running, day = [], 0.0, start
        rows_out = []
        for _, _, name, v in items:
            if running + v <= budget + 1e-9:
                running = round(running + v, 2)
                rows_out.append([name, f"{v:.2f}", "funded", day.isoformat(), f"{running:.2f}"])
                funded.append((name, v, day))
                day = add_workdays(day, 1)
            else:
                rows_out.append([name, f"{v:.2f}", "deferred", "", ""])
        if not funded or len(funded) == len(items):
            return None
        header_out = ["item", "amount", "status", "pay_date", "running_total"]
        as_md = rng.random() < 0.5
        out = ctx.path(rng.choice(["funding_plan.md", "payment_plan.md"]) if as_md else
                       rng.choice(["funding_plan.csv", "payment_plan.csv"]))
        text = ((f"# Payment plan\n\nBudget: {budget:.2f}\n\n" + md_table(header_out, rows_out) +
                 f"\nTotal funded: {running:.2f}\n") if as_md else to_csv(header_out, rows_out))
        order = (f"by `{header[di]}` (oldest first; ties by `{header[ni]}` A-Z, then smallest amount)" if di is not None
                 else f"from the largest `{header[vi]}` to the smallest (ties by `{header[ni]}` A-Z)")
        fmt = (f"a markdown table with the columns {' | '.join(header_out)} and a final line `Total funded: <amount>`"
               if as_md else f"a CSV with the columns {','.join(header_out)}")
        instruction = rng.choice([
            f"I only have {budget:.2f} to spend. Using {source.description}, go through the entries {order} and "
            f"fund each one (`{header[ni]}` as the item, `{header[vi]}` as the amount) if it still fits in what is "
            "left of the budget, otherwise mark it deferred and carry on with the next. Funded items are paid one "
            f"per working day (Mon-Fri) starting {start.isoformat()}. Write `{out}` as {fmt}, one row per entry in "
            "that order (pay_date and running_total empty for deferred ones, amounts with two decimals).",
            f"make a payment plan in `{out}` ({fmt}) for the entries of `{source.path}` taken {order}: budget "
            f"{budget:.2f}; an entry (item = `{header[ni]}`, amount = `{header[vi]}`) is funded when it fits in "
            "the remaining budget, else deferred (keep going with the later ones). Funded payments go on "
            f"consecutive working days from {start.isoformat()}. One row per entry in that order; leave pay_date "
            "and running_total blank when deferred; two decimals for money.",
        ])
        checks = [
            Check("funding_decisions", "docs_table_rows", {"path": out, "header": ["item", "amount", "status"],
                                                           "rows": [r[:3] for r in rows_out]}),
            Check("pay_dates_and_running_totals", "docs_table_rows", {"path": out, "header": header_out,
                                                                      "rows": rows_out}),
            Check("order_kept", "docs_table_rows", {"path": out, "header": ["item", "amount"],
                                                    "rows": [r[:2] for r in rows_out], "ordered": True}),
        ]
        if as_md:
            checks.append(Check("total_funded", "docs_line_number", {"path": out, "label": "Total funded",
                                                                     "value": running}))
        # partial: stops at the first item that does not fit (no skipping), dates on calendar days
        bad_rows, run, stop, d = [], 0.0, False, start
        for _, _, name, v in items:
            if not stop and run + v <= budget:
                run = round(run + v, 2)
                bad_rows.append([name, f"{v:.2f}", "funded", d.isoformat(), f"{run:.2f}"])
                d += dt.timedelta(days=1)
            else:
                stop = True
                bad_rows.append([name, f"{v:.2f}", "deferred", "", ""])
        if bad_rows == rows_out:
            bad_rows = bad_rows[::-1]
        bad_text = ((md_table(header_out, bad_rows) + f"\nTotal funded: {run + 1:.2f}\n") if as_md
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
