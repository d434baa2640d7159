"""clean_data: a messy spreadsheet export (duplicates, blank amounts, mixed date and money formats) becomes a
clean CSV with ISO dates and plain two-decimal amounts, sorted by date."""

from __future__ import annotations

import datetime as dt
import hashlib

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.ops.base import TABLE, Artifact, Check, OpContext, StepPlan, python, read, to_csv, write

HEADER = ["date", "payee", "category", "amount"]

# The program solution: the date formats of flavor.messy_date, money without signs or separators, exact
# duplicates gone once normalised (the clean rows are distinct by construction), sorted on all four columns.
PROGRAM = """import csv, datetime as dt
SRC, OUT = {src!r}, {out!r}
def day(s):
    for f in ('%Y-%m-%d', '%d/%m/%Y', '%b %d, %Y', '%d.%m.%Y', '%Y/%m/%d'):
        try:
            return dt.datetime.strptime(s.strip(), f).date().isoformat()
        except ValueError:
            pass
    raise ValueError(s)
rows = set()
for r in csv.DictReader(open(SRC, newline='')):
    a = r['amount'].strip().replace('$', '').replace(',', '')
    if a:
        rows.add((day(r['date']), r['payee'].strip(), r['category'].strip(), '%.2f' % float(a)))
with open(OUT, 'w', newline='') as f:
    csv.writer(f, lineterminator='\\n').writerows([['date', 'payee', 'category', 'amount']] + sorted(rows))
print('wrote', len(rows), 'rows to', OUT)
"""


class CleanData:
    id = "clean_data"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        payees = flavor.orgs(rng, 5)
        month = rng.randint(1, 12)
        n = rng.randint(8, 14)
        clean: list[list] = []
        for _ in range(n):
            d = flavor.date_in(rng, 2026, month)
            clean.append([d.isoformat(), rng.choice(payees), rng.choice(voc["categories"]),
                          f"{flavor.amount(rng, 4, 650):.2f}"])
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
            messy.insert(rng.randint(0, len(messy)), [flavor.messy_date(rng, d), rng.choice(payees),
                                                      rng.choice(voc["categories"]), ""])
        rows = sorted(clean, key=lambda r: (r[0], r[1], r[2], r[3]))
        src = ctx.path(rng.choice(["expenses_export.csv", "raw_expenses.csv", "spending_dump.csv", "ledger_raw.csv"]))
        out = ctx.path(rng.choice(["expenses_clean.csv", "clean_expenses.csv", "ledger_clean.csv"]))
        what = rng.choice(["expense export", "spending sheet", "ledger export", "card statement export"])
        instruction = rng.choice([
            f"My {what} `{src}` is a mess. Clean it into `{out}` with the columns {', '.join(HEADER)}: drop exact "
            "duplicate rows and rows with no amount, write every date as YYYY-MM-DD and every amount as a plain "
            "number with two decimals (no currency signs or thousands separators), trim stray spaces, and sort "
            "the rows by date (then payee).",
            f"Please tidy up `{src}` and save the result as `{out}` (columns: {', '.join(HEADER)}). Remove "
            "duplicated lines and any line that has no amount, normalise the dates to ISO format (YYYY-MM-DD), "
            "make the amounts plain numbers like 1234.50, strip extra whitespace and order everything by date, "
            "then by payee.",
        ])
        rows_match = Check("", "csv_rows", {"path": out, "header": HEADER, "rows": rows})
        # the formats count only as far as the rows are right: the messy export copied as it is has some ISO dates
        # and plain amounts already
        checks = [
            Check("clean_rows_match", "csv_rows", {"path": out, "header": HEADER, "rows": rows}),
            Check("dates_are_iso", "gated", parts=[
                Check("", "column_matches", {"path": out, "column": "date", "pattern": r"\d{4}-\d{2}-\d{2}"}), rows_match]),
            Check("amounts_are_plain", "gated", parts=[
                Check("", "column_matches", {"path": out, "column": "amount", "pattern": r"-?\d+\.\d{2}"}), rows_match]),
            Check("sorted_by_date", "csv_rows", {"path": out, "header": HEADER, "rows": rows, "ordered": True}),
        ]
        half = rows[: max(1, len(rows) // 2)]
        partial_rows = list(reversed(half)) + [[m[0], m[1].strip(), m[2], m[3]] for m in messy[:2]]
        digest = hashlib.sha256(repr(rows).encode()).hexdigest()[:16]
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=[WorkspaceFile(path=src, content=to_csv(HEADER, messy))],
            checks=checks,
            steps=[
                read(src),
                write(out, to_csv(HEADER, rows)),
            ],
            partial=[write(out, to_csv(HEADER, partial_rows))],
            program=[read(src), python(PROGRAM.format(src=src, out=out))],
            outputs=[Artifact(out, TABLE, {"header": HEADER, "rows": rows}, f"the cleaned {what} ({out})",
                              roles={"date": "date", "name": "payee", "group": "category", "value": "amount"})],
            summary=f"clean {src} into {out}",
            fingerprint=digest,
        )


GENERATORS = [CleanData()]
