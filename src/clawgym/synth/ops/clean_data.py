"""clean_data: a messy spreadsheet export (duplicates, blank amounts, mixed date and money formats) becomes a
clean CSV with ISO dates and plain two-decimal amounts, sorted by date. The table is one of the persona's
domain (a nurse's claims, a farmer's market sales...), with its own column names; sometimes the persona also
asks to leave out the rows of one name (a closed account, a personal card), which the checks then enforce."""

from __future__ import annotations

import datetime as dt
import hashlib

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _data_vocab as V
from clawgym.synth.ops.base import TABLE, Artifact, Check, OpContext, StepPlan, python, read, to_csv, write

# The program solution: the date formats of flavor.messy_date, money without signs or separators, exact
# duplicates gone once normalised (the clean rows are distinct by construction), the excluded name's rows gone,
# sorted on all four columns. The column names and the excluded name are constants of the request.
PROGRAM = """import os, csv, datetime as dt
SRC, OUT = {src!r}, {out!r}
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
COLS = {cols!r}
SKIP = {skip!r}
def day(s):
    for f in ('%Y-%m-%d', '%d/%m/%Y', '%b %d, %Y', '%d.%m.%Y', '%Y/%m/%d'):
        try:
            return dt.datetime.strptime(s.strip(), f).date().isoformat()
        except ValueError:
            pass
    raise ValueError(s)
rows = set()
for r in csv.DictReader(open(SRC, newline='')):
    a = r[COLS[3]].strip().replace('$', '').replace(',', '')
    if a and r[COLS[1]].strip() not in SKIP:
        rows.add((day(r[COLS[0]]), r[COLS[1]].strip(), r[COLS[2]].strip(), '%.2f' % float(a)))
with open(OUT, 'w', newline='') as f:
    csv.writer(f, lineterminator='\\n').writerows([COLS] + sorted(rows))
print('wrote', len(rows), 'rows to', OUT)
"""

SKIP_REASONS = [
    "that account is closed now", "those are personal, not business", "they were refunded in full",
    "that was my partner's card", "that supplier's entries are handled separately by my accountant",
    "those rows were entered by mistake", "that one is disputed and sits in another file",
    "I've already filed those", "that's a test entry from the old system",
]


class CleanData:
    id = "clean_data"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        sc = V.schema(rng, ctx.persona, n_names=rng.randint(4, 6))
        header = sc.header
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

        fold = V.folder(ctx.persona, rng)
        src = ctx.path(V.join(fold, f"{sc.stem}_{rng.choice(V.EXPORT_SUFFIX)}.csv"))
        out_fold = fold if rng.random() < 0.6 else V.folder(ctx.persona, rng, ["clean", "processed", "output"])
        out = ctx.path(V.join(out_fold, f"{sc.stem}_{rng.choice(V.CLEAN_SUFFIX)}.csv"))
        what = sc.what
        mon = V.month_name(month)
        d, nm, g, v = (f"`{c}`" for c in header)
        cols = ", ".join(header) if rng.random() < 0.5 else ",".join(header)
        items = [
            expand("[@remove] [exact duplicate rows|rows that appear twice|duplicated lines|repeated entries "
                   "(keep one copy)]", rng),
            expand("[@remove] [any row|every line|each row] [with no|missing a|that has an empty] {v}[| value]", rng, v=v),
            expand("[write|format|put] [every|each] {d}[| value] as YYYY-MM-DD[| (ISO)]", rng, d=d),
            expand("[give|write] {v} as {p2} (no currency [signs|symbols] or thousands separators)", rng, v=v,
                   p2=V.plain2(rng)),
            expand("[trim stray spaces|strip extra whitespace|remove leading and trailing spaces] [from the "
                   "cells|around names|]", rng),
            expand("[@sort] the rows by {d}[, then|, and then by] {nm}", rng, d=d, nm=nm),
            expand("[keep exactly the columns|the header must be exactly|use the columns] {cols}", rng, cols=cols),
        ]
        if skip:
            items.append(expand("[leave out|skip|exclude|[@remove]] [the rows of|every row from|anything from] {who}"
                                "[, since| -| because|;] {why}", rng, who=f"\"{skip[0]}\"",
                                why=rng.choice(SKIP_REASONS)))
        lead = one_of(rng, [
            "[My|The] {what} `{src}` is {mess}[ (the {mon} one)|].",
            "I exported [my|the] {what} for {mon} to `{src}` and it[ came out| is] {mess}.",
            "`{src}` is [my|the] {what}[ for {mon}|] and it's {mess}.",
            "[Here's|There's] [a|my] {what} in `{src}`[, {mon} 2026|] - {mess}, as usual.",
        ], what=what, src=src, mon=mon, mess=V.mess(rng))
        ask = one_of(rng, [
            "[@please] [clean|tidy] it [up |]into `{out}`.",
            "[I [@need]|Please make] a clean copy at `{out}`.",
            "Could you [clean it up|tidy it] and [@save] the result as `{out}`?",
            "[Save|Write] a cleaned version [to|as] `{out}`.",
        ], out=out)
        instruction = f"{lead} {ask}" + V.reqs(rng, items, ("What clean means here:", "When you clean it:"), verbs=True)
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
        half = rows[: max(1, len(rows) // 2)]
        partial_rows = list(reversed(half)) + [[m[0], m[1].strip(), m[2], m[3]] for m in messy[:2]]
        digest = hashlib.sha256(repr((header, rows)).encode()).hexdigest()[:16]
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
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
            program=[read(src), python(PROGRAM.format(src=src, out=out, cols=header, skip=skip))],
            outputs=[Artifact(out, TABLE, {"header": header, "rows": rows}, f"the cleaned {what} ({out})",
                              roles=sc.roles)],
            summary=f"clean {src} into {out}",
            fingerprint=digest,
        )


GENERATORS = [CleanData()]
