"""aggregate_and_report: group a table by one column and sum/count/average another, into a summary CSV and a
short markdown report naming the top group and the grand total.

Also home of small table helpers the other `data` generators share (numbers, column roles, digests).
"""

from __future__ import annotations

import hashlib
import json
import re

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.ops.base import DOCUMENT, TABLE, Artifact, Check, OpContext, StepPlan, read, to_csv, write

_PLAIN_NUM = re.compile(r"^-?(0|[1-9]\d*)(\.\d+)?$")
_LOOSE_NUM = re.compile(r"^[-+]?[$€£]?\s*[-+]?\d[\d,]*(\.\d+)?$")


# --------------------------------------------------------------------------------------------- shared helpers


def num(value) -> float | None:
    """A number written as text ("1,234.50", "$12", " 7 "), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    s = str(value).strip()
    if not _LOOSE_NUM.match(s):
        return None
    try:
        return float(s.replace(",", "").replace("$", "").replace("€", "").replace("£", "").replace(" ", ""))
    except ValueError:
        return None


def is_plain_number(value: str) -> bool:
    return bool(_PLAIN_NUM.match(str(value).strip()))


def money(v: float) -> str:
    return f"{v:.2f}"


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def table_of(source: Artifact | None) -> tuple[list[str], list[list[str]]] | None:
    """(header, rows as strings, padded) of a TABLE artifact, or None when it is not a usable table."""
    if source is None or source.kind != TABLE or not isinstance(source.data, dict):
        return None
    header = source.data.get("header")
    rows = source.data.get("rows")
    if not isinstance(header, list) or not header or not isinstance(rows, list) or not rows:
        return None
    header = [str(h) for h in header]
    if len({h.casefold() for h in header}) != len(header) or any(not h.strip() for h in header):
        return None
    out = []
    for r in rows:
        if not isinstance(r, (list, tuple)):
            return None
        cells = ["" if c is None else str(c) for c in r][: len(header)]
        out.append(cells + [""] * (len(header) - len(cells)))
    return header, out


def role_column(source: Artifact, header: list[str], role: str) -> str | None:
    col = (source.roles or {}).get(role)
    return col if col in header else None


_AMOUNT = re.compile(r"^-?[$€£]?\s*(0|[1-9]\d{0,2}(,\d{3})+|[1-9]\d{0,9})(\.\d+)?$")
_NOT_QUANTITY = re.compile(r"(^|_|\b)(id|phone|tel|mobile|fax|zip|postcode|postal|code|sku|year|no|number|ref|iban)"
                           r"($|_|\b)", re.I)


def is_quantity(value: str) -> bool:
    """A cell that is an amount or a count (not a phone number, an id with leading zeros, a +-prefixed code)."""
    return bool(_AMOUNT.match(str(value).strip()))


def numeric_column(header: list[str], rows: list[list[str]], prefer: str | None = None) -> str | None:
    """A column of amounts or counts: non-blank cells all quantities (most of them present), `prefer` first.
    Columns named like identifiers (id, phone, zip, sku, year...) never count."""
    order = ([prefer] if prefer in header else []) + [h for h in header if h != prefer]
    for h in order:
        if _NOT_QUANTITY.search(h):
            continue
        i = header.index(h)
        vals = [r[i] for r in rows if r[i].strip()]
        if len(vals) >= max(1, len(rows) // 2) and all(is_quantity(v) for v in vals):
            return h
    return None


def group_column(header: list[str], rows: list[list[str]], prefer: str | None = None,
                 exclude: tuple[str, ...] = ()) -> str | None:
    """A text column with repeating values (2..n-1 distinct, non-numeric), `prefer` first."""
    order = ([prefer] if prefer in header else []) + [h for h in header if h != prefer]
    for h in order:
        if h in exclude:
            continue
        i = header.index(h)
        vals = [r[i].strip() for r in rows if r[i].strip()]
        distinct = {v.casefold() for v in vals}
        if vals and 2 <= len(distinct) < len(vals) and not any(num(v) is not None for v in vals) \
                and len(vals) == len(rows):
            return h
    return None


def refer(source: Artifact) -> str:
    """How a fragment names the previous step's output: its description, with the path in backticks."""
    desc = source.description.strip() or "the previous result"
    if f"({source.path})" in desc:
        return desc.replace(f"({source.path})", f"(`{source.path}`)")
    return desc if source.path in desc else f"{desc} (`{source.path}`)"


def unique_column(header: list[str], rows: list[list[str]], prefer: str | None = None,
                  exclude: tuple[str, ...] = ()) -> str | None:
    """A text column whose values are all present and all different (a key), `prefer` first."""
    order = ([prefer] if prefer in header else []) + [h for h in header if h != prefer]
    for h in order:
        if h in exclude:
            continue
        i = header.index(h)
        vals = [r[i].strip() for r in rows]
        if all(vals) and len({v.casefold() for v in vals}) == len(vals) and not all(num(v) is not None for v in vals):
            return h
    return None


def folder_column(header: list[str], rows: list[list[str]]) -> str | None:
    """A column of file paths whose parent folders repeat (e.g. the new_path of a moves log), last first."""
    for h in reversed(header):
        i = header.index(h)
        vals = [r[i].strip() for r in rows]
        if vals and all("/" in v for v in vals):
            parents = [v.rsplit("/", 1)[0] for v in vals]
            if 2 <= len(set(parents)) < len(parents):
                return h
    return None


# --------------------------------------------------------------------------------------------- generator

REPORT_NAMES = ["summary_report.md", "report.md", "monthly_report.md", "overview.md", "key_figures.md"]
SUMMARY_NAMES = ["summary.csv", "totals_by_group.csv", "group_summary.csv", "breakdown.csv"]


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


def key_figures(report: str, numbers: list, words: list) -> Check:
    """The report's key figures, counted only when it gives the total it had to compute (numbers[0]): the top item
    and its value are in the source itself, which copied to the report's path is no report."""
    return Check("report_key_figures", "gated", parts=[
        Check("", "data_numbers_in_text", {"path": report, "numbers": numbers, "words": words}),
        Check("", "data_numbers_in_text", {"path": report, "numbers": numbers[:1]})])


class AggregateAndReport:
    id = "aggregate_and_report"
    consumes: tuple[str, ...] = (TABLE,)
    produces = (TABLE, DOCUMENT)
    standalone = True

    def _own_input(self, ctx: OpContext):
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        kind = rng.choice(["expenses", "sales", "orders"])
        if kind == "expenses":
            header = ["date", "payee", "category", "amount"]
            payees = flavor.orgs(rng, rng.randint(4, 7))
            groups = rng.sample(voc["categories"], k=rng.randint(3, len(voc["categories"])))
        elif kind == "sales":
            header = ["date", "customer", "product", "amount"]
            payees = flavor.people(rng, rng.randint(4, 8))
            groups = rng.sample(voc["items"], k=rng.randint(3, 5))
        else:
            header = ["date", "supplier", "item", "amount"]
            payees = flavor.orgs(rng, rng.randint(3, 6))
            groups = rng.sample(voc["items"], k=rng.randint(3, 5))
        month = rng.randint(1, 12)
        n = rng.randint(10, 24)
        rows = []
        for i in range(n):
            g = groups[i] if i < len(groups) else rng.choice(groups)
            rows.append([flavor.date_in(rng, 2026, month).isoformat(), rng.choice(payees), g,
                         money(flavor.amount(rng, 5, 600))])
        blanks = rng.randint(0, 2)
        for _ in range(blanks):
            rows.insert(rng.randint(0, len(rows)), [flavor.date_in(rng, 2026, month).isoformat(),
                                                    rng.choice(payees), rng.choice(groups), ""])
        rows.sort(key=lambda r: r[0])
        name = ctx.path(rng.choice([f"{kind}_2026_{month:02d}.csv", f"{kind}.csv", f"{kind}_export.csv"]))
        words = {"expenses": "expense list", "sales": "sales log", "orders": "purchase orders export"}[kind]
        return header, rows, header[2], header[3], name, f"my {words} `{name}`", True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        files: list[WorkspaceFile] = []
        picked = None
        t = table_of(source)
        if t is not None and source is not None:
            header, rows = t
            vcol = numeric_column(header, rows, role_column(source, header, "value"))
            gcol = group_column(header, rows, role_column(source, header, "group"), exclude=(vcol or "",))
            if vcol and gcol and len(_aggregate(header, rows, gcol, vcol)) >= 2:
                picked = (header, rows, gcol, vcol, source.path, refer(source), False)
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
        if picked is None:
            picked = self._own_input(ctx)
        header, rows, gcol, vcol, src_path, src_words, own = picked
        if own:
            files.append(WorkspaceFile(path=src_path, content=to_csv(header, rows)))

        agg = _aggregate(header, rows, gcol, vcol)
        gi, vi = header.index(gcol), header.index(vcol)
        for _ in range(50):  # own data: nudge tied totals apart so "sorted" and "top" are unambiguous
            totals = [a[2] for a in agg]
            tied = next((a for i, a in enumerate(agg) if a[2] in totals[:i]), None)
            if tied is None or not own:
                break
            r = next(r for r in rows if r[gi].strip().casefold() == tied[0].casefold() and num(r[vi]) is not None)
            r[vi] = money(num(r[vi]) + 0.01)
            agg = _aggregate(header, rows, gcol, vcol)
            files[0] = WorkspaceFile(path=src_path, content=to_csv(header, rows))
        ties = len({a[2] for a in agg}) != len(agg)
        n_rows = sum(a[1] for a in agg)
        grand = round(sum(a[2] for a in agg), 2)
        total_row = rng.random() < 0.5
        out_header = [gcol.lower(), "count", "total", "average"]
        out_rows = [[a[0], str(a[1]), money(a[2]), money(a[3])] for a in agg]
        if total_row:
            out_rows.append(["TOTAL", str(n_rows), money(grand), money(round(grand / n_rows, 2))])
        summary = ctx.path(rng.choice(SUMMARY_NAMES))
        report = ctx.path(rng.choice(REPORT_NAMES))
        top = agg[0]

        skip_note = f"skip rows with an empty {vcol}" if any(not r[vi].strip() for r in rows) else "every row counts"
        if ties:
            skip_note += f"; break ties in the total alphabetically by {gcol}"
        total_note = ("and finish with a last row labelled TOTAL carrying the overall count, total and average"
                      if total_row else "with no total row")
        instruction = rng.choice([
            f"Using {src_words}, total the `{vcol}` column per `{gcol}` ({skip_note}). Save the result as "
            f"`{summary}` with exactly the columns {', '.join(out_header)} (count = number of rows, total = sum, "
            f"average = total / count, both with two decimals), one row per {gcol}, sorted by total from highest "
            f"to lowest, {total_note}. Then write a short markdown report `{report}` that states the grand total "
            f"and which {gcol} has the highest total (with that total).",
            f"Break down {src_words} by `{gcol}`: for each {gcol} I need the number of rows, the sum of "
            f"`{vcol}` and the average ({skip_note}). Put it in `{summary}` (header: {','.join(out_header)}; "
            f"two-decimal numbers; biggest total first; {total_note}). Also add a brief markdown write-up at "
            f"`{report}` giving the overall total and naming the top {gcol} and its total.",
            f"Can you summarise {src_words}? Group the rows by `{gcol}` and compute count, total and average of "
            f"`{vcol}` ({skip_note}); write them to `{summary}` with the header `{','.join(out_header)}`, highest "
            f"total first, amounts rounded to 2 decimals, {total_note}. Finally jot the key figures (grand total, "
            f"top {gcol} and how much it came to) into a markdown note `{report}`.",
        ])

        lines = [f"# {gcol.capitalize()} summary", "",
                 f"- Rows counted: {n_rows}",
                 f"- Grand total: {money(grand)}",
                 f"- Top {gcol}: {top[0]} with {money(top[2])} ({top[1]} rows)", ""]
        if rng.random() < 0.5:
            lines += [f"| {gcol} | count | total | average |", "|---|---:|---:|---:|"]
            lines += [f"| {a[0]} | {a[1]} | {money(a[2])} | {money(a[3])} |" for a in agg]
        else:
            lines += [f"## By {gcol}", ""] + [f"- {a[0]}: {money(a[2])} over {a[1]} rows" for a in agg]
        report_text = "\n".join(lines) + "\n"

        group_rows = out_rows[: len(agg)]
        checks = [
            Check("summary_rows_correct", "csv_rows", {"path": summary, "header": out_header, "rows": out_rows}),
            Check("summary_sorted_by_total", "csv_rows",
                  {"path": summary, "header": [out_header[0], "total"], "rows": [[r[0], r[2]] for r in out_rows],
                   "ordered": True}),
            Check("counts_and_averages", "csv_rows",
                  {"path": summary, "header": [out_header[0], "count", "average"],
                   "rows": [[r[0], r[1], r[3]] for r in out_rows]}),
            key_figures(report, [grand, top[2]], [top[0]]),
        ]
        # partial: half the groups, unsorted, one total wrong, no TOTAL row, no report
        half = [list(r) for r in group_rows[: max(1, (len(group_rows) + 1) // 2)]]
        half.reverse()
        half[0][2] = money(float(half[0][2]) + 10)
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=files,
            checks=checks,
            steps=[read(src_path), write(summary, to_csv(out_header, out_rows)), write(report, report_text)],
            partial=[read(src_path), write(summary, to_csv(out_header, half))],
            outputs=[
                Artifact(summary, TABLE, {"header": out_header, "rows": out_rows},
                         f"the per-{gcol} summary ({summary})",
                         roles={"group": out_header[0], "name": out_header[0], "value": "total"}),
                Artifact(report, DOCUMENT, report_text, f"the {gcol} summary report ({report})"),
            ],
            summary=f"summarise {src_path} by {gcol} into {summary} and {report}",
            fingerprint=digest([header, rows, gcol, vcol, total_row]),
        )

    # ----------------------------------------------------------------------------------------- other shapes
    def _count_plan(self, ctx: OpContext, source: Artifact, header, rows, gcol, folders: bool = False) -> StepPlan:
        """A table with a category column but no numbers: count the rows per category (or per folder of a path
        column)."""
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
        out_header = [g, "count", "share_pct"]
        out_rows = [[a[0], str(a[1]), f"{a[1] * 100 / n_rows:.1f}"] for a in agg]
        summary = ctx.path(rng.choice(["counts_by_" + flavor.slug(g) + ".csv", "summary.csv", "breakdown.csv"]))
        report = ctx.path(rng.choice(REPORT_NAMES))
        top = agg[0]
        instruction = rng.choice([
            f"Count the rows of {refer(source)} per {gcol_words} and save `{summary}` with the columns "
            f"{', '.join(out_header)} (share_pct = that {gcol}'s share of all {n_rows} rows in percent, one decimal), "
            f"most frequent first, ties in alphabetical order. Then write a short markdown note `{report}` naming "
            f"the most common {gcol}, how many rows it has, and the total number of rows.",
            f"How is {refer(source)} spread over {gcol_words}? Write `{summary}` (header: {','.join(out_header)}; one "
            f"row per {gcol}; share_pct = percent of all rows with one decimal; biggest count first, ties "
            f"alphabetical) and a brief markdown summary `{report}` with the row total and the top {gcol} with "
            f"its count.",
        ])
        lines = [f"# Rows per {gcol}", "", f"- Total rows: {n_rows}", f"- Most common {gcol}: {top[0]} ({top[1]} rows)",
                 "", f"## By {gcol}", ""] + [f"- {a[0]}: {a[1]}" for a in agg]
        report_text = "\n".join(lines) + "\n"
        checks = [
            Check("counts_correct", "csv_rows", {"path": summary, "header": [g, "count"],
                                                 "rows": [r[:2] for r in out_rows]}),
            Check("shares_correct", "csv_rows", {"path": summary, "header": [g, "share_pct"],
                                                 "rows": [[r[0], r[2]] for r in out_rows], "tol": 0.06}),
            Check("sorted_by_count", "csv_rows", {"path": summary, "header": [g, "count"],
                                                  "rows": [r[:2] for r in out_rows], "ordered": True}),
            key_figures(report, [n_rows, top[1]], [top[0]]),
        ]
        half = [list(r) for r in out_rows[: max(1, (len(out_rows) + 1) // 2)]][::-1]
        for r in half:
            r[2] = str(r[1])  # share written as the count
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=[read(source.path), write(summary, to_csv(out_header, out_rows)), write(report, report_text)],
            partial=[write(summary, to_csv(out_header, half))],
            outputs=[Artifact(summary, TABLE, {"header": out_header, "rows": out_rows}, f"the per-{gcol} counts ({summary})",
                              roles={"group": g, "name": g, "value": "count"}),
                     Artifact(report, DOCUMENT, report_text, f"the {gcol} count note ({report})")],
            summary=f"count {source.path} per {gcol} into {summary} and {report}",
            fingerprint=digest([header, rows, gcol, "count"]),
        )

    def _rank_plan(self, ctx: OpContext, source: Artifact, header, rows, key, vcol) -> StepPlan:
        """One row per item with a number: rank the items and give each one's share of the total."""
        rng = ctx.rng
        ki, vi = header.index(key), header.index(vcol)
        items = [(r[ki].strip(), num(r[vi])) for r in rows if num(r[vi]) is not None]
        items.sort(key=lambda x: (-x[1], x[0].casefold()))
        grand = round(sum(v for _, v in items), 2)
        k, v = key.lower(), vcol.lower()
        if v in (k, "rank", "share_pct"):
            v = "value"
        out_header = ["rank", k, v, "share_pct"]

        def fmt(x: float) -> str:
            return str(int(x)) if float(x).is_integer() and all(float(y).is_integer() for _, y in items) else money(x)

        out_rows = [[str(i), name, fmt(val), f"{val * 100 / grand:.1f}" if grand else "0.0"]
                    for i, (name, val) in enumerate(items, start=1)]
        summary = ctx.path(rng.choice(["ranking.csv", f"{flavor.slug(k)}_ranking.csv", "top_list.csv"]))
        report = ctx.path(rng.choice(REPORT_NAMES))
        skip = f" (skip rows with an empty {vcol})" if len(items) < len(rows) else ""
        instruction = rng.choice([
            f"Rank the entries of {refer(source)} by `{vcol}`{skip}, highest first (ties alphabetically by {key}), "
            f"and save `{summary}` with the columns {', '.join(out_header)}: rank = 1, 2, 3... in that order, "
            f"share_pct = the entry's percentage of the total {vcol}, one decimal. Add a short markdown note "
            f"`{report}` naming the top {key} with its {vcol} and giving the total.",
            f"Which {key} has the most `{vcol}` in {refer(source)}? Write a ranking to `{summary}` (header "
            f"{','.join(out_header)}; highest {vcol} first, ties by {key} alphabetically; share_pct = percent of the "
            f"overall total with one decimal){skip}, and a markdown summary `{report}` with the overall total and "
            f"the top {key} and its value.",
        ])
        lines = [f"# {vcol.capitalize()} ranking", "", f"- Total {vcol}: {fmt(grand)}",
                 f"- Top {key}: {items[0][0]} ({fmt(items[0][1])}, {out_rows[0][3]}%)", "", "## Ranking", ""]
        lines += [f"{r[0]}. {r[1]}: {r[2]}" for r in out_rows]
        report_text = "\n".join(lines) + "\n"
        checks = [
            # the values count as far as they are ranked and shared out: the source table copied as it is holds
            # every item with its value already
            Check("ranking_values", "gated", parts=[
                Check("", "csv_rows", {"path": summary, "header": [k, v], "rows": [r[1:3] for r in out_rows]}),
                Check("", "mean_of", parts=[
                    Check("", "csv_rows", {"path": summary, "header": ["rank", k], "rows": [r[:2] for r in out_rows],
                                           "ordered": True}),
                    Check("", "csv_rows", {"path": summary, "header": [k, "share_pct"],
                                           "rows": [[r[1], r[3]] for r in out_rows], "tol": 0.06})])]),
            Check("ranking_order", "csv_rows", {"path": summary, "header": ["rank", k],
                                                "rows": [r[:2] for r in out_rows], "ordered": True}),
            Check("shares_correct", "csv_rows", {"path": summary, "header": [k, "share_pct"],
                                                 "rows": [[r[1], r[3]] for r in out_rows], "tol": 0.06}),
            key_figures(report, [grand, items[0][1]], [items[0][0]]),
        ]
        half = [list(r) for r in out_rows[: max(1, (len(out_rows) + 1) // 2)]]
        for r in half:
            r[3] = "?"
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


GENERATORS = [AggregateAndReport()]
