"""aggregate_and_report: group a table by one column and sum/count/average another, into a summary CSV and a
short markdown report naming the top group and the grand total (the table helpers it shares with the other
`data` operations are in :mod:`clawgym.synth.ops._tables`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _data_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops._tables import (
    digest,
    folder_column,
    group_column,
    money,
    num,
    numeric_column,
    refer,
    role_column,
    table_of,
    unique_column,
)
from clawgym.synth.ops.base import (
    DOCUMENT,
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

# --------------------------------------------------------------------------------------------- generator

REPORT_NAMES = ["summary_report", "report", "monthly_report", "overview", "key_figures", "highlights", "findings",
                "summary_note", "breakdown_note", "readout", "notes_for_meeting", "quick_summary"]
SUMMARY_NAMES = ["summary", "totals_by_{g}", "{g}_summary", "breakdown", "by_{g}", "{g}_totals", "rollup",
                 "per_{g}", "grouped", "{g}_breakdown"]
COUNT_COLS = ["count", "n", "rows", "entries", "n_rows", "lines", "records"]
TOTAL_COLS = ["total", "sum", "total_amount", "subtotal", "sum_total", "amount_total"]
AVG_COLS = ["average", "mean", "avg", "mean_value", "avg_per_row"]
TOTAL_LABELS = ["TOTAL", "Total", "ALL", "Grand total", "All rows"]
SHARE_COLS = ["share_pct", "pct_of_total", "percent", "share", "pct"]
RANK_COLS = ["rank", "position", "place"]
SKIP_WHY = ["that account is closed", "those are personal", "they were refunded", "that's a different budget",
            "they're handled by head office", "those were test entries"]
SKIP_WHY_DOM = {
    "health": ["that's the locum agency, billed separately", "those went through the old cost centre"],
    "education": ["the PTA pays those", "that was the trip fund, not the department"],
    "food": ["those were staff meals", "that supplier is charged to the other site"],
    "software": ["that's the sandbox account", "the platform team covers those"],
    "finance": ["that client's fees are on a retainer sheet", "those were write-offs"],
    "farm": ["that's the neighbour's share of the order", "those went on the grant claim"],
    "creative": ["that was a personal job", "the gallery reimbursed those"],
    "legal": ["that matter is billed through the other office", "those are pro bono"],
}
REPORT_FOLDERS = ["reports", "notes", "summaries", "out", "analysis", ""]


def _out_name(ctx: OpContext, names: list[str], g: str, ext: str, folder: str = "") -> str:
    stem = ctx.rng.choice(names).format(g=flavor.slug(g) or "group")
    return ctx.path(V.join(folder, f"{stem}.{ext}"))


def _report_folder(ctx: OpContext) -> str:
    return V.folder(ctx.persona, ctx.rng, REPORT_FOLDERS) if ctx.rng.random() < 0.5 else ""


def _aggregate(header, rows, gcol, vcol):
    gi, vi = header.index(gcol), header.index(vcol)
    groups: dict[str, list[float]] = {}
    names: dict[str, str] = {}
    for r in rows:
        v = num(r[vi])
        g = r[gi].strip()
        if v is None or not g:
            continue
        key = g.casefold()
        names.setdefault(key, g)
        groups.setdefault(key, []).append(v)
    out = []
    for key, vals in groups.items():
        total = round(sum(vals), 2)
        out.append([names[key], len(vals), total, round(total / len(vals), 2)])
    out.sort(key=lambda x: (-x[2], x[0].casefold()))
    return out


def key_figures(report: str, numbers: list, words: list, gate_words: bool = False) -> Check:
    """The report's key figures, counted only when it gives the total it had to compute (numbers[0]): the top item
    and its value are in the source itself, which copied to the report's path is no report. With `gate_words` the
    words (the top item's name) gate too: a small row count is also in any numbered list of the request, which
    copied to the report's path is no report either."""
    gate = [Check("", "data_numbers_in_text", {"path": report, "numbers": numbers[:1]})]
    if gate_words:
        gate.append(Check("", "data_numbers_in_text", {"path": report, "words": words}))
    return Check("report_key_figures", "gated", parts=[
        Check("", "data_numbers_in_text", {"path": report, "numbers": numbers, "words": words}), *gate])


@dataclass
class _Table:
    """The data stage: the table summarised (the previous step's or our own), the name left out, the groups."""

    header: list[str]
    rows: list[list[str]]
    gcol: str
    vcol: str
    src_path: str
    src_words: str  # how the request names the table
    own: bool  # our own table (in `files`), not the previous step's
    what: str  # what our own table is ("" for the previous step's)
    files: list[WorkspaceFile]
    skip_name: str | None  # own data: the name whose rows do not count
    agg: list  # [group, count, total, average], largest total first
    ties: bool  # two groups have the same total
    n_rows: int  # the rows counted
    grand: float


@dataclass
class _Layout:
    """The summary's layout: its columns, the total row, its rows, and where the summary and the report go."""

    total_row: bool
    c_col: str
    t_col: str
    a_col: str
    label: str  # the total row's label
    out_header: list[str]
    out_rows: list[list[str]]
    summary: str
    report: str


@dataclass
class _Counts:
    """The counting variant: the count per category (or folder), the output's layout and paths."""

    gcol: str  # the category column ("folder" when counting the folders of a path column)
    gcol_words: str  # how the request names it
    g: str  # the output's category column
    agg: list  # [category, count], most frequent first
    n_rows: int
    c_col: str
    sh_col: str
    out_header: list[str]
    out_rows: list[list[str]]
    summary: str
    report: str


@dataclass
class _Ranking:
    """The ranking variant: the items by value, the output's layout and paths."""

    items: list[tuple[str, float]]  # (name, value), highest first
    grand: float
    k: str  # the output's name column
    v: str  # the output's value column
    rk: str  # the rank column
    sh: str  # the share column
    out_header: list[str]
    fmt: Callable[[float], str]  # a value as the output writes it
    out_rows: list[list[str]]
    summary: str
    report: str


@operation
class AggregateAndReport(OperationGenerator):
    id = "aggregate_and_report"
    consumes: tuple[str, ...] = (TABLE,)
    produces = (TABLE, DOCUMENT)
    standalone = True

    def _own_input(self, ctx: OpContext):
        rng = ctx.rng
        sc = V.schema(rng, ctx.persona, n_names=rng.randint(4, 7), n_groups=rng.randint(3, 5))
        header, groups = sc.header, sc.groups
        month = rng.randint(1, 12)
        n = rng.randint(10, 24)
        rows = []
        for i in range(n):
            g = groups[i] if i < len(groups) else rng.choice(groups)
            rows.append([flavor.date_in(rng, 2026, month).isoformat(), rng.choice(sc.names), g,
                         money(flavor.amount(rng, sc.lo, sc.hi))])
        blanks = rng.randint(0, 2)
        for _ in range(blanks):
            rows.insert(rng.randint(0, len(rows)), [flavor.date_in(rng, 2026, month).isoformat(),
                                                    rng.choice(sc.names), rng.choice(groups), ""])
        rows.sort(key=lambda r: r[0])
        fold = V.folder(ctx.persona, rng)
        mon = V.month_name(month)
        name = ctx.path(V.join(fold, rng.choice([f"{sc.stem}_2026_{month:02d}.csv", f"{sc.stem}.csv",
                                                 f"{sc.stem}_{mon[:3].lower()}.csv", f"{sc.stem}_export.csv"])))
        words = expand("[my|the|our] {what}[ for {mon}| ({mon} 2026)|] `{name}`", rng, what=sc.what, mon=mon, name=name)
        words = words[:1].lower() + words[1:]
        return header, rows, sc.group, sc.value, name, words, True, sc.what

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        shape = self._from_source(ctx, source)
        if isinstance(shape, StepPlan):
            return shape
        data = self._table(ctx, shape)
        lay = self._layout(ctx, data)
        instruction = self._request(ctx, data, lay)
        report_text = self._report(ctx, data, lay)
        checks = self._checks(data, lay)
        # partial: half the groups, unsorted, one total wrong, no TOTAL row, no report
        group_rows = lay.out_rows[: len(data.agg)]
        half = [list(r) for r in group_rows[: max(1, (len(group_rows) + 1) // 2)]]
        half.reverse()
        half[0][2] = money(float(half[0][2]) + 10)
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        src_path, gcol, summary, report, out_header = data.src_path, data.gcol, lay.summary, lay.report, lay.out_header
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=data.files,
            checks=checks,
            steps=[read(src_path), write(summary, to_csv(out_header, lay.out_rows)), write(report, report_text)],
            partial=[read(src_path), write(summary, to_csv(out_header, half))],
            outputs=[
                Artifact(summary, TABLE, {"header": out_header, "rows": lay.out_rows},
                         f"the per-{gcol} summary ({summary})",
                         roles={"group": out_header[0], "name": out_header[0], "value": lay.t_col}),
                Artifact(report, DOCUMENT, report_text, f"the {gcol} summary report ({report})"),
            ],
            summary=f"summarise {src_path} by {gcol} into {summary} and {report}",
            fingerprint=digest([data.header, data.rows, gcol, data.vcol, lay.total_row]),
        )

    # ----------------------------------------------------------------------------------------- data
    def _from_source(self, ctx: OpContext, source: Artifact | None) -> StepPlan | tuple | None:
        """Which shape the previous step's table calls for: a sum per group (the picked table, as `_own_input`
        gives it), a count per category or folder, or a ranking (those as their whole StepPlan); None when it
        fits none and we bring our own table."""
        t = table_of(source)
        if t is None or source is None:
            return None
        picked = None
        header, rows = t
        vcol = numeric_column(header, rows, role_column(source, header, "value"))
        gcol = group_column(header, rows, role_column(source, header, "group"), exclude=(vcol or "",))
        if vcol and gcol and len(_aggregate(header, rows, gcol, vcol)) >= 2:
            picked = (header, rows, gcol, vcol, source.path, refer(source, ctx.rng), False, "")
        elif gcol is None and vcol is None:
            gcol = group_column(header, rows, role_column(source, header, "group"))
        if picked is None and gcol and vcol is None:
            return self._count_plan(ctx, source, header, rows, gcol)
        if picked is None and vcol is None:
            pcol = folder_column(header, rows)
            if pcol:
                return self._count_plan(ctx, source, header, rows, pcol, folders=True)
        if picked is None and vcol:
            key = unique_column(header, rows, role_column(source, header, "name"), exclude=(vcol,))
            if key and sum(1 for r in rows if num(r[header.index(vcol)]) is not None) >= 3:
                return self._rank_plan(ctx, source, header, rows, key, vcol)
        return picked

    def _table(self, ctx: OpContext, picked: tuple | None) -> _Table:
        """The table (the picked one, or our own added to the files), the name whose rows are left out (own data
        only), and the per-group figures, tied totals of our own data nudged apart."""
        rng = ctx.rng
        files: list[WorkspaceFile] = []
        if picked is None:
            picked = self._own_input(ctx)
        header, rows, gcol, vcol, src_path, src_words, own, what = picked
        if own:
            files.append(WorkspaceFile(path=src_path, content=to_csv(header, rows)))

        # own data: sometimes the rows of one name are to be left out (a closed account...), which the checks enforce
        skip_name = None
        if own and rng.random() < 0.35:
            cand = rng.choice(list(dict.fromkeys(r[1] for r in rows)))
            kept = [r for r in rows if r[1] != cand]
            if len(kept) >= 6 and len(_aggregate(header, kept, gcol, vcol)) >= 2:
                skip_name = cand

        def used() -> list:
            return [r for r in rows if r[1] != skip_name] if skip_name else rows

        agg = _aggregate(header, used(), gcol, vcol)
        gi, vi = header.index(gcol), header.index(vcol)
        for _ in range(50):  # own data: nudge tied totals apart so "sorted" and "top" are unambiguous
            totals = [a[2] for a in agg]
            tied = next((a for i, a in enumerate(agg) if a[2] in totals[:i]), None)
            if tied is None or not own:
                break
            r = next(r for r in used() if r[gi].strip().casefold() == tied[0].casefold() and num(r[vi]) is not None)
            r[vi] = money(num(r[vi]) + 0.01)
            agg = _aggregate(header, used(), gcol, vcol)
            files[0] = WorkspaceFile(path=src_path, content=to_csv(header, rows))
        ties = len({a[2] for a in agg}) != len(agg)
        n_rows = sum(a[1] for a in agg)
        grand = round(sum(a[2] for a in agg), 2)
        return _Table(header, rows, gcol, vcol, src_path, src_words, own, what, files, skip_name, agg, ties, n_rows,
                      grand)

    # ----------------------------------------------------------------------------------------- phrasing
    def _layout(self, ctx: OpContext, data: _Table) -> _Layout:
        """The summary's columns, whether it ends with a total row (and its label), its rows, and where the
        summary and the report go."""
        rng = ctx.rng
        gcol, agg, n_rows, grand = data.gcol, data.agg, data.n_rows, data.grand
        total_row = rng.random() < 0.5
        c_col, t_col, a_col = rng.choice(COUNT_COLS), rng.choice(TOTAL_COLS), rng.choice(AVG_COLS)
        g_out = gcol.lower()
        if g_out in (c_col, t_col, a_col):
            g_out = f"{g_out}_name"
        label = rng.choice(TOTAL_LABELS)
        if any(a[0].casefold() == label.casefold() for a in agg):
            label = "TOTAL (all)"
        out_header = [g_out, c_col, t_col, a_col]
        out_rows = [[a[0], str(a[1]), money(a[2]), money(a[3])] for a in agg]
        if total_row:
            out_rows.append([label, str(n_rows), money(grand), money(round(grand / n_rows, 2))])
        rfold = _report_folder(ctx)
        summary = _out_name(ctx, SUMMARY_NAMES, gcol, "csv", rfold)
        report = _out_name(ctx, REPORT_NAMES, gcol, "md", rfold)
        return _Layout(total_row, c_col, t_col, a_col, label, out_header, out_rows, summary, report)

    def _request(self, ctx: OpContext, data: _Table, lay: _Layout) -> str:
        """The request: the summary's rules (one row per group, columns, sums, order, blanks, ties, the left-out
        name, the total row), a lead naming the source and a tail asking for the report."""
        rng = ctx.rng
        header, rows, gcol, vcol, skip_name = data.header, data.rows, data.gcol, data.vcol, data.skip_name
        src_words, own, what, ties = data.src_words, data.own, data.what, data.ties
        gi, vi = header.index(gcol), header.index(vcol)
        summary, report, label, total_row = lay.summary, lay.report, lay.label, lay.total_row
        cols = V.cols(rng, lay.out_header)
        G, VC = f"`{gcol}`", f"`{vcol}`"
        c_t, t_t, a_t = (f"`{c}`" for c in (lay.c_col, lay.t_col, lay.a_col))
        items = [
            one_of(rng, ["[one row per {g}|a row for [each|every] {g}][| value]",
                         "{g} values [each get|get] [exactly one|their own] row",
                         "[no {g} appears twice|every {g} shows up once]"], g=G),
            one_of(rng, ["[the columns [must be |]exactly|[exactly |]these columns:|header:] {cols}",
                         "[use|keep to] the header {cols}[ and nothing else|, no extra columns|]",
                         "[lay it out as|columns in this order:] {cols}"], cols=cols),
            one_of(rng, ["{c} = [the number of rows|how many rows|the row count] [in that group|for it|], {t} = [the "
                         "sum|the total|everything added up] of {v}, {a} = {t} / {c}",
                         "{t} [sums|adds up] {v} [for the group|per group], {c} counts its rows and {a} is {t} "
                         "divided by {c}",
                         "[per|for each] group: [how many rows|the number of rows] ({c}), [their|the] {v} [total|sum] "
                         "({t}) and the [mean|average] per row ({a})",
                         "{a} [means|is] the average {v} per row, that is {t} over {c}; {t} is the plain sum and {c} "
                         "the [count|number of rows]"], c=c_t, t=t_t, a=a_t, v=VC),
            V.two_dec(rng, f"{t_t} and {a_t}"),
            one_of(rng, ["[@sort] [by|on] {t}[, highest first| from highest to lowest| in descending order| (biggest "
                         "first)]",
                         "[largest|biggest] {t} at the top, [smallest|lowest] at the bottom",
                         "[rank|order] the groups by {t}, [largest first|from the largest down]",
                         "{t} descending[ - the biggest group first|]"], t=t_t),
        ]
        if any(not r[vi].strip() for r in rows):
            items.append(one_of(rng, ["[skip|ignore|leave out] rows [with an empty {v}|where {v} is blank|that have no "
                                      "{v}]",
                                      "a blank {v} [means the row doesn't count|is not a zero - drop that row]",
                                      "rows [missing|without] {v} [are left out of|don't go into] the counts and "
                                      "totals"], v=VC))
        if ties:
            items.append(expand("[break ties in {t} alphabetically by {g}|equal {t}s go A-Z by {g}]", rng, t=t_t, g=G))
        if skip_name:
            items.append(one_of(rng, ["[leave out|ignore|don't count] the rows of {who} in {nc}[ - {why}|, since "
                                      "{why}|]",
                                      "{who} ({nc}) [stays|is kept] out of [it|every figure]: {why}",
                                      "[before grouping|first], [drop|remove] every row whose {nc} is {who} "
                                      "({why})"],
                                who=f"\"{skip_name}\"", nc=f"`{header[1]}`",
                                why=rng.choice(SKIP_WHY + SKIP_WHY_DOM.get(V.domain(ctx.persona), []))))
        if total_row:
            items.append(one_of(rng, ["[finish|end] with a [last |final |]row labelled {lab} [carrying|holding|with] "
                                      "the overall {c}, {t} and {a}",
                                      "[below the groups|at the bottom], one more row {lab} with {c}, {t} and {a} "
                                      "[for all rows together|over everything]",
                                      "[add|append] a {lab} row [last|at the end] - its {c}, {t} and {a} are for "
                                      "the whole [table|file]"], lab=label, c=c_t, t=t_t, a=a_t))
        else:
            items.append(expand("[no total row|don't add a total row|leave out any grand-total row|group rows "
                                "only, no [overall|summary] line]", rng))
        lead = one_of(rng, [
            "[Using|From|Based on] {src}, [total|sum up|add up] {v} per {g} into `{summary}`.",
            "Break down {src} by {g}[ for me|] and [@save] it as `{summary}`.",
            "Can you summarise {src}? [Group|Bucket] the rows by {g}[ and total {v}|] and [@save] the result "
            "[to|as|in] `{summary}`.",
            "I [@need] the {v} totals of {src} per {g}, in `{summary}`.",
            "How much [is there|did each one come to] per {g} in {src}? Put the [totals|figures] in `{summary}`.",
            "[Please |]make `{summary}` from {src}: {v} [grouped|totalled] by {g}.",
            "[{who} asked|I've been asked] [which|what] {g} [the money goes to|costs us most]. [Roll up|Total] {v} "
            "[by|per] {g} from {src} into `{summary}`.",
            "`{summary}` should [show|hold] one line per {g} [with|totalling] the {v} from {src}.",
        ], src=src_words, v=VC, g=G, summary=summary, who=flavor.person(rng))
        tail = one_of(rng, [
            "[Then|Also|And] write a [short|brief|quick] markdown [report|note|write-up] `{report}` that [states|gives] "
            "the grand total and [which {g} has|the {g} with] the highest total [(with that total)|and what it came "
            "to|, with its amount].",
            "[Finally|Last|Then], jot the key figures[ - grand total, top {g} and how much it came to -| (grand "
            "total, top {g} and its total)] into a markdown note `{report}`.",
            "[Add|Include] a [brief|short] markdown [summary|note] at `{report}` [giving|with] the overall total "
            "and naming the top {g} [and its total|with its total].",
            "[For the meeting|For {who}], `{report}` ([markdown, a few lines|a short markdown note]) [should say|says] [how much there is "
            "[altogether|in total]|what it all adds up to] and which {g} [tops the list|is biggest], with [that figure|its amount].",
            "[The headline numbers|Three numbers] go in `{report}` as markdown: the [total of everything|sum over "
            "all rows], the [leading|largest] {g}, and [its total|what that {g} adds up to].",
        ], report=report, g=gcol, who=flavor.person(rng))
        if own:
            lead = " ".join(x for x in (lead, V.story(
                rng, ctx.persona, what, list(dict.fromkeys(r[1] for r in rows)),
                list(dict.fromkeys(r[gi] for r in rows)), len(rows), V.month_name(int(rows[0][0][5:7])))) if x)
        return V.glue(rng, lead, V.reqs(rng, items), tail)

    # ----------------------------------------------------------------------------------------- solutions
    @staticmethod
    def _report(ctx: OpContext, data: _Table, lay: _Layout) -> str:
        """The reference report: rows counted, grand total, the top group, then the groups as a table or a list."""
        rng = ctx.rng
        gcol, agg, top = data.gcol, data.agg, data.agg[0]
        lines = [f"# {gcol.capitalize()} summary", "",
                 f"- Rows counted: {data.n_rows}",
                 f"- Grand total: {money(data.grand)}",
                 f"- Top {gcol}: {top[0]} with {money(top[2])} ({top[1]} rows)", ""]
        if rng.random() < 0.5:
            lines += [f"| {gcol} | {lay.c_col} | {lay.t_col} | {lay.a_col} |", "|---|---:|---:|---:|"]
            lines += [f"| {a[0]} | {a[1]} | {money(a[2])} | {money(a[3])} |" for a in agg]
        else:
            lines += [f"## By {gcol}", ""] + [f"- {a[0]}: {money(a[2])} over {a[1]} rows" for a in agg]
        return "\n".join(lines) + "\n"

    # ----------------------------------------------------------------------------------------- checks
    @staticmethod
    def _checks(data: _Table, lay: _Layout) -> list[Check]:
        """The summary's rows, its order by total, counts and averages, and the report's key figures."""
        summary, out_header, out_rows, c_col, t_col, a_col = (lay.summary, lay.out_header, lay.out_rows, lay.c_col,
                                                              lay.t_col, lay.a_col)
        top = data.agg[0]
        return [
            Check("summary_rows_correct", "csv_rows", {"path": summary, "header": out_header, "rows": out_rows}),
            Check("summary_sorted_by_total", "csv_rows",
                  {"path": summary, "header": [out_header[0], t_col], "rows": [[r[0], r[2]] for r in out_rows],
                   "ordered": True}),
            Check("counts_and_averages", "csv_rows",
                  {"path": summary, "header": [out_header[0], c_col, a_col],
                   "rows": [[r[0], r[1], r[3]] for r in out_rows]}),
            key_figures(lay.report, [data.grand, top[2]], [top[0]]),
        ]


    # ----------------------------------------------------------------------------------------- other shapes
    def _count_plan(self, ctx: OpContext, source: Artifact, header, rows, gcol, folders: bool = False) -> StepPlan:
        """A table with a category column but no numbers: count the rows per category (or per folder of a path
        column)."""
        cn = self._counts(ctx, header, rows, gcol, folders)
        instruction = self._count_request(ctx, source, cn)
        gcol, g, agg, n_rows, top = cn.gcol, cn.g, cn.agg, cn.n_rows, cn.agg[0]
        out_header, out_rows, summary, report, c_col = cn.out_header, cn.out_rows, cn.summary, cn.report, cn.c_col
        lines = [f"# Rows per {gcol}", "", f"- Total rows: {n_rows}", f"- Most common {gcol}: {top[0]} ({top[1]} rows)",
                 "", f"## By {gcol}", ""] + [f"- {a[0]}: {a[1]}" for a in agg]
        report_text = "\n".join(lines) + "\n"
        checks = self._count_checks(cn)
        # partial: the first half of the counts, in reverse order, the share written as the count, no note
        half = [list(r) for r in out_rows[: max(1, (len(out_rows) + 1) // 2)]][::-1]
        for r in half:
            r[2] = str(r[1])  # share written as the count
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=[read(source.path), write(summary, to_csv(out_header, out_rows)), write(report, report_text)],
            partial=[write(summary, to_csv(out_header, half))],
            outputs=[Artifact(summary, TABLE, {"header": out_header, "rows": out_rows}, f"the per-{gcol} counts ({summary})",
                              roles={"group": g, "name": g, "value": c_col}),
                     Artifact(report, DOCUMENT, report_text, f"the {gcol} count note ({report})")],
            summary=f"count {source.path} per {gcol} into {summary} and {report}",
            fingerprint=digest([header, rows, gcol, "count"]),
        )

    def _counts(self, ctx: OpContext, header, rows, gcol, folders: bool) -> _Counts:
        """The count per category (or folder), most frequent first, the output's columns and rows, and where
        the counts and the note go."""
        rng = ctx.rng
        gi = header.index(gcol)
        counts: dict[str, list] = {}
        for r in rows:
            g = r[gi].strip().rsplit("/", 1)[0] if folders else r[gi].strip()
            counts.setdefault(g.casefold(), [g, 0])[1] += 1
        agg = sorted(counts.values(), key=lambda a: (-a[1], a[0].casefold()))
        n_rows = len(rows)
        g = "folder" if folders else gcol.lower()
        gcol_words = f"`{gcol}`"
        if folders:
            gcol = "folder"
            gcol_words = f"folder (the directory part of `{header[gi]}`, without a trailing slash)"
        c_col, sh_col = rng.choice(COUNT_COLS), rng.choice(SHARE_COLS)
        if g in (c_col, sh_col):
            g = f"{g}_name"
        out_header = [g, c_col, sh_col]
        out_rows = [[a[0], str(a[1]), f"{a[1] * 100 / n_rows:.1f}"] for a in agg]
        rfold = _report_folder(ctx)
        summary = _out_name(ctx, ["counts_by_{g}", "{g}_counts", "summary", "breakdown", "how_many_per_{g}",
                                  "{g}_frequency", "tally"], g, "csv", rfold)
        report = _out_name(ctx, REPORT_NAMES, g, "md", rfold)
        return _Counts(gcol, gcol_words, g, agg, n_rows, c_col, sh_col, out_header, out_rows, summary, report)

    def _count_request(self, ctx: OpContext, source: Artifact, cn: _Counts) -> str:
        """The request for the counts: one row per category, the columns, the share, the order, and the note."""
        rng = ctx.rng
        gcol, gcol_words, out_header, summary, report, sh_col, c_col = (cn.gcol, cn.gcol_words, cn.out_header,
                                                                        cn.summary, cn.report, cn.sh_col, cn.c_col)
        cols = V.cols(rng, out_header)
        items = [
            expand("[one row per {g}|a row for [each|every] {g}]", rng, g=gcol_words),
            expand("[the columns [must be |]exactly|columns:|header:] {cols}", rng, cols=cols),
            expand("[{sh} = [that {g}'s share|the share] of all rows in percent|{sh} is the percentage of the rows "
                   "that fall under it|[the share of the table|its share of all rows], as a percentage, goes in {sh}], "
                   "[one decimal|1 decimal place|rounded to one decimal]", rng, sh=f"`{sh_col}`", g=gcol),
            expand("[most frequent first|biggest {c} first|[@sort] by {c}, highest first]", rng, c=c_col),
            expand("[ties in alphabetical order|break ties alphabetically|equal counts in A-Z order]", rng),
        ]
        lead = one_of(rng, [
            "[Count|Tally] the rows of {src} per {gw} [and @save|into] `{summary}`.",
            "How is {src} spread over {gw}? [Write|Put] the counts in `{summary}`.",
            "I'd like to know how many rows of {src} fall under each {gw}[ value|]; [@save] that as `{summary}`.",
            "[Please |]make a frequency table of {src} by {gw} at `{summary}`.",
        ], src=refer(source, ctx.rng), gw=gcol_words, summary=summary)
        tail = one_of(rng, [
            "[Then|Also] write a [short|brief] markdown note `{report}` naming the most common {g}, how many rows it "
            "has, and the total number of rows.",
            "[And|Also] a [brief|quick] markdown summary `{report}` with the row total and the top {g} with its count.",
            "`{report}` ([markdown|a .md note], [short|a few lines]) [should tell me|states] how many rows there are "
            "[altogether|overall] and which {g} [comes up most|is the most frequent], with [its count|how often].",
        ], report=report, g=gcol)
        return V.glue(rng, lead, V.reqs(rng, items), tail)

    @staticmethod
    def _count_checks(cn: _Counts) -> list[Check]:
        """The counts, the shares, the order, and the note's key figures."""
        g, c_col, sh_col, out_rows, summary, top = cn.g, cn.c_col, cn.sh_col, cn.out_rows, cn.summary, cn.agg[0]
        report, n_rows = cn.report, cn.n_rows
        return [
            Check("counts_correct", "csv_rows", {"path": summary, "header": [g, c_col],
                                                 "rows": [r[:2] for r in out_rows]}),
            Check("shares_correct", "csv_rows", {"path": summary, "header": [g, sh_col],
                                                 "rows": [[r[0], r[2]] for r in out_rows], "tol": 0.06}),
            Check("sorted_by_count", "csv_rows", {"path": summary, "header": [g, c_col],
                                                  "rows": [r[:2] for r in out_rows], "ordered": True}),
            key_figures(report, [n_rows, top[1]], [top[0]], gate_words=True),
        ]

    def _rank_plan(self, ctx: OpContext, source: Artifact, header, rows, key, vcol) -> StepPlan:
        """One row per item with a number: rank the items and give each one's share of the total."""
        ranking = self._ranking(ctx, header, rows, key, vcol)
        instruction = self._rank_request(ctx, source, rows, key, vcol, ranking)
        items, grand, fmt, out_rows, out_header = (ranking.items, ranking.grand, ranking.fmt, ranking.out_rows,
                                                   ranking.out_header)
        k, v, summary, report = ranking.k, ranking.v, ranking.summary, ranking.report
        lines = [f"# {vcol.capitalize()} ranking", "", f"- Total {vcol}: {fmt(grand)}",
                 f"- Top {key}: {items[0][0]} ({fmt(items[0][1])}, {out_rows[0][3]}%)", "", "## Ranking", ""]
        lines += [f"{r[0]}. {r[1]}: {r[2]}" for r in out_rows]
        report_text = "\n".join(lines) + "\n"
        checks = self._rank_checks(ranking)
        # partial: the first half of the ranking with the shares left as "?", no note
        half = [list(r) for r in out_rows[: max(1, (len(out_rows) + 1) // 2)]]
        for r in half:
            r[3] = "?"
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=[read(source.path), write(summary, to_csv(out_header, out_rows)), write(report, report_text)],
            partial=[write(summary, to_csv(out_header, half))],
            outputs=[Artifact(summary, TABLE, {"header": out_header, "rows": out_rows}, f"the {vcol} ranking ({summary})",
                              roles={"name": k, "value": v}),
                     Artifact(report, DOCUMENT, report_text, f"the {vcol} ranking note ({report})")],
            summary=f"rank {source.path} by {vcol} into {summary} and {report}",
            fingerprint=digest([header, rows, key, vcol, "rank"]),
        )

    def _ranking(self, ctx: OpContext, header, rows, key, vcol) -> _Ranking:
        """The items by value, highest first, the output's columns and rows (values as integers when all are),
        and where the ranking and the note go."""
        rng = ctx.rng
        ki, vi = header.index(key), header.index(vcol)
        items = [(r[ki].strip(), num(r[vi])) for r in rows if num(r[vi]) is not None]
        items.sort(key=lambda x: (-x[1], x[0].casefold()))
        grand = round(sum(v for _, v in items), 2)
        k, v = key.lower(), vcol.lower()
        rk, sh = rng.choice(RANK_COLS), rng.choice(SHARE_COLS)
        if v in (k, rk, sh):
            v = "value"
        if k in (rk, sh):
            k = f"{k}_name"
        out_header = [rk, k, v, sh]

        def fmt(x: float) -> str:
            return str(int(x)) if float(x).is_integer() and all(float(y).is_integer() for _, y in items) else money(x)

        out_rows = [[str(i), name, fmt(val), f"{val * 100 / grand:.1f}" if grand else "0.0"]
                    for i, (name, val) in enumerate(items, start=1)]
        rfold = _report_folder(ctx)
        summary = _out_name(ctx, ["ranking", "{g}_ranking", "top_list", "leaderboard", "{g}_ranked", "ranked"], k,
                            "csv", rfold)
        report = _out_name(ctx, REPORT_NAMES, k, "md", rfold)
        return _Ranking(items, grand, k, v, rk, sh, out_header, fmt, out_rows, summary, report)

    def _rank_request(self, ctx: OpContext, source: Artifact, rows, key, vcol, ranking: _Ranking) -> str:
        """The request for the ranking: the columns, the rank and share, the order and ties, and the note."""
        rng = ctx.rng
        items, rk, sh, out_header, summary, report = (ranking.items, ranking.rk, ranking.sh, ranking.out_header,
                                                      ranking.summary, ranking.report)
        cols = V.cols(rng, out_header)
        reqs = [
            expand("[the columns [must be |]exactly|columns:|header:] {cols}", rng, cols=cols),
            expand("{rk} = 1, 2, 3... in [that|ranking] order", rng, rk=f"`{rk}`"),
            expand("{sh} = [the entry's|each row's] [percentage|share in percent] of the [total|overall] {v}, "
                   "[one decimal|1 decimal place]", rng, sh=f"`{sh}`", v=f"`{vcol}`"),
            expand("[highest|biggest] {v} first", rng, v=f"`{vcol}`"),
            expand("[ties alphabetically by {k}|break ties by {k}, A-Z]", rng, k=f"`{key}`"),
        ]
        if len(items) < len(rows):
            reqs.append(expand("[skip|ignore] rows with an empty {v}", rng, v=f"`{vcol}`"))
        lead = one_of(rng, [
            "Rank the entries of {src} by {v} and [@save] `{summary}`.",
            "Which {k} has the most {v} in {src}? Write a ranking to `{summary}`.",
            "[I [@need]|Please make] a ranking of {src} by {v}, in `{summary}`.",
            "[Order|Sort] {src} into a league table by {v} at `{summary}`.",
        ], src=refer(source, ctx.rng), v=f"`{vcol}`", k=key, summary=summary)
        tail = one_of(rng, [
            "[Add|Also write] a [short|brief] markdown note `{report}` naming the top {k} with its {v} and giving "
            "the total.",
            "[And|Then] a markdown summary `{report}` with the overall total and the top {k} and its value.",
            "[Sum it all up|Summarise] in `{report}` (markdown): [who|which {k}] [leads|comes first] and with how "
            "much, plus the [total over everyone|overall sum].",
        ], report=report, k=key, v=vcol)
        return V.glue(rng, lead, V.reqs(rng, reqs), tail)

    @staticmethod
    def _rank_checks(ranking: _Ranking) -> list[Check]:
        """The values ranked and shared out, the order, the shares, and the note's key figures."""
        items, grand, k, v, rk, sh, out_rows, summary, report = (ranking.items, ranking.grand, ranking.k, ranking.v,
                                                                 ranking.rk, ranking.sh, ranking.out_rows,
                                                                 ranking.summary, ranking.report)
        return [
            # the values count as far as they are ranked and shared out: the source table copied as it is holds
            # every item with its value already
            Check("ranking_values", "gated", parts=[
                Check("", "csv_rows", {"path": summary, "header": [k, v], "rows": [r[1:3] for r in out_rows]}),
                Check("", "mean_of", parts=[
                    Check("", "csv_rows", {"path": summary, "header": [rk, k], "rows": [r[:2] for r in out_rows],
                                           "ordered": True}),
                    Check("", "csv_rows", {"path": summary, "header": [k, sh],
                                           "rows": [[r[1], r[3]] for r in out_rows], "tol": 0.06})])]),
            Check("ranking_order", "csv_rows", {"path": summary, "header": [rk, k],
                                                "rows": [r[:2] for r in out_rows], "ordered": True}),
            Check("shares_correct", "csv_rows", {"path": summary, "header": [k, sh],
                                                 "rows": [[r[1], r[3]] for r in out_rows], "tol": 0.06}),
            key_figures(report, [grand, items[0][1]], [items[0][0]]),
        ]


GENERATORS = [AggregateAndReport()]
