"""clean_data: a messy spreadsheet export (duplicates, blank amounts, mixed date and money formats) becomes a
clean CSV with ISO dates and plain two-decimal amounts, sorted by date. The table is one of the persona's
domain (a nurse's claims, a farmer's market sales...), with its own column names; sometimes the persona also
asks to leave out the rows of one name (a closed account, a personal card), which the checks then enforce."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _data_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops.base import (
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

SKIP_REASONS = [
    "that account is closed now", "those are personal, not business", "they were refunded in full",
    "that was my partner's card", "that supplier's entries are handled separately by my accountant",
    "those rows were entered by mistake", "that one is disputed and sits in another file",
    "I've already filed those", "that's a test entry from the old system",
]

SKIP_DOM = {
    "health": ["that agency's invoices go through the trust, not us", "those claims were rejected by payroll"],
    "education": ["the PTA covers that one", "those belong to last term's budget"],
    "food": ["that's the other restaurant's supplier", "those were comped staff meals"],
    "software": ["that's a personal account someone expensed by mistake", "those are the sandbox charges"],
    "finance": ["that client moved to another firm", "those fees were written off"],
    "farm": ["that's my neighbour's half of a shared order", "those sales were the charity stall"],
    "creative": ["that was a favour, not a paid job", "the gallery settles those directly"],
    "legal": ["that matter was transferred out", "those are pro bono and tracked elsewhere"],
}


@dataclass
class _Table:
    """The data stage: the messy export and the rows a clean copy holds."""

    sc: V.Schema  # the table's columns, names, groups and what it is
    month: int
    messy: list[list[str]]  # the export as the workspace has it
    skip: list[str]  # the name whose rows are left out (none or one)
    rows: list[list[str]]  # the clean rows, sorted


@dataclass
class _Request:
    """The phrasing stage: the export's path, the clean copy's path, the request."""

    src: str
    out: str
    instruction: str


@operation
class CleanData(OperationGenerator):
    id = "clean_data"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        tb = self._table(ctx)
        ask = self._request(ctx, tb)
        checks = self._checks(tb, ask)
        sc, header, messy, rows, skip, src, out = tb.sc, tb.sc.header, tb.messy, tb.rows, tb.skip, ask.src, ask.out
        # partial: half the rows, in reverse order, plus two messy rows as they are
        half = rows[: max(1, len(rows) // 2)]
        partial_rows = list(reversed(half)) + [[m[0], m[1].strip(), m[2], m[3]] for m in messy[:2]]
        digest = hashlib.sha256(repr((header, rows)).encode()).hexdigest()[:16]
        instruction = V.with_aside(ctx.rng, ctx.persona, ask.instruction)
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=[WorkspaceFile(path=src, content=to_csv(header, messy))],
            checks=checks,
            steps=[
                read(src),
                write(out, to_csv(header, rows)),
            ],
            partial=[write(out, to_csv(header, partial_rows))],
            program=[read(src), python(render("clean_data", src=src, out=out, cols=header, skip=skip))],
            outputs=[Artifact(out, TABLE, {"header": header, "rows": rows}, f"the cleaned {sc.what} ({out})",
                              roles=sc.roles)],
            summary=f"clean {src} into {out}",
            fingerprint=digest,
        )

    # ------------------------------------------------------------------------------------------ data
    def _table(self, ctx: OpContext) -> _Table:
        """The clean rows (no two alike), the messy export made from them (odd date and money formats, stray
        spaces, duplicated rows, rows without an amount), the name left out (if any) and the expected rows."""
        rng = ctx.rng
        sc = V.schema(rng, ctx.persona, n_names=rng.randint(4, 6))
        month = rng.randint(1, 12)
        n = rng.randint(8, 14)
        clean: list[list] = []
        for _ in range(n):
            d = flavor.date_in(rng, 2026, month)
            clean.append([d.isoformat(), rng.choice(sc.names), rng.choice(sc.groups),
                          f"{flavor.amount(rng, sc.lo, sc.hi):.2f}"])
        # no two clean rows may be identical, or "drop duplicates" would be ambiguous
        uniq: dict[tuple, list] = {}
        for r in clean:
            uniq.setdefault(tuple(r), r)
        clean = list(uniq.values())
        messy: list[list] = []
        for r in clean:
            d = dt.date.fromisoformat(r[0])
            messy.append([flavor.messy_date(rng, d), f" {r[1]}" if rng.random() < 0.2 else r[1], r[2],
                          flavor.messy_amount(rng, float(r[3]))])
        dups = rng.sample(range(len(messy)), k=min(2, len(messy)))
        for i in dups:
            messy.insert(rng.randint(0, len(messy)), list(messy[i]))
        blanks = rng.randint(1, 2)
        for _ in range(blanks):
            d = flavor.date_in(rng, 2026, month)
            messy.insert(rng.randint(0, len(messy)), [flavor.messy_date(rng, d), rng.choice(sc.names),
                                                      rng.choice(sc.groups), ""])
        # a name whose rows the persona wants left out (when it leaves at least 4 rows and the name has some)
        skip: list[str] = []
        present = [nm for nm in sc.names if any(r[1] == nm for r in clean)]
        if rng.random() < 0.4 and len(present) >= 2:
            cand = rng.choice(present)
            if sum(1 for r in clean if r[1] != cand) >= 4:
                skip = [cand]
        kept = [r for r in clean if r[1] not in skip]
        rows = sorted(kept, key=lambda r: (r[0], r[1], r[2], r[3]))
        return _Table(sc, month, messy, skip, rows)

    # ------------------------------------------------------------------------------------------ phrasing
    def _request(self, ctx: OpContext, tb: _Table) -> _Request:
        """Where the export lies and the clean copy goes, the cleaning rules, and the request."""
        rng = ctx.rng
        sc, header, month, messy, skip = tb.sc, tb.sc.header, tb.month, tb.messy, tb.skip
        fold = V.folder(ctx.persona, rng)
        src = ctx.path(V.join(fold, f"{sc.stem}_{rng.choice(V.EXPORT_SUFFIX)}.csv"))
        out_fold = fold if rng.random() < 0.6 else V.folder(ctx.persona, rng, ["clean", "processed", "output"])
        out = ctx.path(V.join(out_fold, f"{sc.stem}_{rng.choice(V.CLEAN_SUFFIX)}.csv"))
        what = sc.what
        mon = V.month_name(month)
        d, nm, g, v = (f"`{c}`" for c in header)
        cols = ", ".join(header) if rng.random() < 0.5 else ",".join(header)
        items = [
            one_of(rng, ["[@remove] [exact duplicate rows|rows that appear twice|duplicated lines|repeated entries "
                         "(keep one copy)]",
                         "[a row that's in there twice|a line exported twice] [counts once|stays only once]",
                         "[the export repeats some rows|some lines are doubled]; [one copy each|keep a single copy]"]),
            one_of(rng, ["[@remove] [any row|every line|each row] [with no|missing a|that has an empty] {v}[| value]",
                         "[rows|lines] [where|whose] {v} is [blank|empty] [go|are dropped] - [they're|those are] not "
                         "real {w}",
                         "no {v}, no row"], v=v, w=rng.choice(["entries", "records", "transactions", "lines"])),
            one_of(rng, ["[write|format|put] [every|each] {d}[| value] [as YYYY-MM-DD[| (ISO)]|in ISO form, e.g. 2026-02-14|year-month-day, "
                         "e.g. 2026-02-14]",
                         "{iso} - the export mixes [several|three or four|all sorts of] date styles",
                         "{iso}"], d=d, iso=V.iso(rng, d)),
            one_of(rng, ["[give|write] {v} as {p2} (no currency [signs|symbols] or thousands separators)",
                         "{v}: {p2}[ - no $, no commas|, with the currency signs and commas stripped]",
                         "[strip|drop] [the currency signs|symbols] and thousands commas from {v} [so each is|, "
                         "leaving] {p2}"], v=v, p2=V.plain2(rng)),
            expand("[trim stray spaces|strip extra whitespace|remove leading and trailing spaces|no leading or "
                   "trailing blanks] [from the cells|around names|in {nm}|]", rng, nm=nm),
            V.sorted_by(rng, d, nm),
            expand("[keep exactly the columns|the header must be exactly|use the columns|same four columns, "
                   "same names:] {cols}", rng, cols=cols),
        ]
        if skip:
            items.append(expand("[leave out|skip|exclude|[@remove]] [the rows of|every row from|anything from] {who}"
                                "[, since| -| because|;] {why}", rng, who=f"\"{skip[0]}\"",
                                why=rng.choice(SKIP_REASONS + SKIP_DOM.get(V.domain(ctx.persona), []))))
        lead = one_of(rng, [
            "[My|The] {what} `{src}` is {mess}[ (the {mon} one)|].",
            "I exported [my|the] {what} for {mon} to `{src}` and it[ came out| is] {mess}.",
            "`{src}` is [my|the] {what}[ for {mon}|] and it's {mess}.",
            "[Here's|There's] [a|my] {what} in `{src}`[, {mon} 2026|] - {mess}, as usual.",
            "[Whoever|The system that] [exported|produced] `{src}` ([the|my] {what}) [made it|left it] {mess}: "
            "[duplicates, gaps|doubled rows, blanks] and [three|several] date styles.",
            "Before {who} [can use|looks at] the {mon} {what}, `{src}` [has to be|needs to get] [fixed|sorted out] - "
            "it's {mess}.",
            "`{src}` ({what}, {mon}) [won't import|can't be loaded] into [anything|the accounts] the way it is; "
            "it's {mess}.",
        ], what=what, src=src, mon=mon, mess=V.mess(rng), who=flavor.person(rng))
        ask = one_of(rng, [
            "[@please] [clean|tidy] it [up |]into `{out}`.",
            "[I [@need]|Please make] a clean copy at `{out}`.",
            "Could you [clean it up|tidy it] and [@save] the result as `{out}`?",
            "[Save|Write] a cleaned version [to|as] `{out}`.",
        ], out=out)
        story = V.story(rng, ctx.persona, what, sc.names, sc.groups, len(messy), mon)
        instruction = " ".join(x for x in (lead, story, ask) if x) + V.reqs(
            rng, items, ("What clean means here:", "When you clean it:", "Cleaning rules:", "By clean I mean:"),
            verbs=True)
        return _Request(src, out, instruction)

    # ------------------------------------------------------------------------------------------ checks
    @staticmethod
    def _checks(tb: _Table, ask: _Request) -> list[Check]:
        """The clean rows, ISO dates and plain amounts (counted as far as the rows are right), sorted by date."""
        sc, header, rows, out = tb.sc, tb.sc.header, tb.rows, ask.out
        rows_match = Check("", "csv_rows", {"path": out, "header": header, "rows": rows})
        # the formats count only as far as the rows are right: the messy export copied as it is has some ISO dates
        # and plain amounts already
        checks = [
            Check("clean_rows_match", "csv_rows", {"path": out, "header": header, "rows": rows}),
            Check("dates_are_iso", "gated", parts=[
                Check("", "column_matches", {"path": out, "column": sc.date, "pattern": r"\d{4}-\d{2}-\d{2}"}),
                rows_match]),
            Check("amounts_are_plain", "gated", parts=[
                Check("", "column_matches", {"path": out, "column": sc.value, "pattern": r"-?\d+\.\d{2}"}),
                rows_match]),
            Check("sorted_by_date", "csv_rows", {"path": out, "header": header, "rows": rows, "ordered": True}),
        ]
        return checks


GENERATORS = [CleanData()]
