"""reconcile_records: a ledger (ours) against a bank or card statement (theirs) that should agree; list every
mismatch (missing on one side, amount differs, date differs) in a CSV with a reason column."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _data_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops._tables import (
    digest,
    is_quantity,
    money,
    num,
    refer,
    role_column,
    table_of,
    unique_column,
)
from clawgym.synth.ops.base import (
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

OUT_HEADER = ["date", "payee", "ledger_amount", "bank_amount", "reason"]
REASONS = ["missing_in_bank", "missing_in_ledger", "amount_mismatch", "date_mismatch"]
TYPES = ["CARD", "DD", "TRF", "POS"]
# Reason code sets (the codes of REASONS' meanings, in that order) and output column names a request may use.
REASON_SETS = [
    REASONS,
    ["not_on_statement", "not_in_books", "wrong_amount", "wrong_date"],
    ["only_in_ledger", "only_in_bank", "amount_differs", "date_differs"],
    ["MISSING_BANK", "MISSING_LEDGER", "AMOUNT", "DATE"],
]
OURS_COLS = ["ledger_amount", "our_amount", "books_amount", "recorded_amount", "ledger_value"]
THEIRS_COLS = ["bank_amount", "statement_amount", "bank_value", "bank_side"]
REASON_COLS = ["reason", "issue", "status", "problem", "finding"]
STATEMENT_NAMES = ["bank_statement", "statement_export", "card_statement", "bank_transactions", "bank_csv",
                   "online_banking_export", "statement_{mon}", "card_{mon}"]
# when a persona has to have the books squared (a sentence of the request, nothing a check reads)
RECON_WHEN = {
    "health": ["the practice manager's audit", "the quarterly claims review", "the trust's spending check"],
    "education": ["the bursar's termly check", "the governors' finance meeting", "the end-of-term audit"],
    "food": ["the VAT return", "my accountant's visit", "the end-of-month stock take"],
    "software": ["the finance sync", "the quarterly cost review", "the board pack"],
    "finance": ["the client's year-end pack", "the partner review", "the audit fieldwork"],
    "farm": ["the co-op's annual return", "the grant claim", "the harvest accounts"],
    "creative": ["my tax return", "the studio's quarter close", "the funding report"],
    "legal": ["the client account check", "the regulator's annual report", "the accounts rules review"],
    "general": ["the month-end close", "my tax return", "the quarterly review", "the accountant's visit"],
}
OUT_NAMES = ["mismatches", "reconciliation", "recon_issues", "discrepancies", "to_investigate", "unmatched",
             "recon_{mon}", "exceptions"]


def reconcile(ledger: list[tuple[dt.date, str, float]], bank: list[tuple[dt.date, str, float]]):
    """The stated matching rule. Returns (mismatch rows, ambiguous?)."""
    L = list(range(len(ledger)))
    B = list(range(len(bank)))
    ambiguous = False

    def key(x):
        return x[1].casefold()

    # 1. exact matches (payee, date, amount)
    for i in list(L):
        hit = next((j for j in B if key(bank[j]) == key(ledger[i]) and bank[j][0] == ledger[i][0]
                    and abs(bank[j][2] - ledger[i][2]) < 0.005), None)
        if hit is not None:
            L.remove(i)
            B.remove(hit)
    out = []
    # 2. same payee and amount, other date; 3. same payee and date, other amount
    for rule in ("date_mismatch", "amount_mismatch"):
        def fits(i, j, rule=rule):
            if key(bank[j]) != key(ledger[i]):
                return False
            if rule == "date_mismatch":
                return abs(bank[j][2] - ledger[i][2]) < 0.005
            return bank[j][0] == ledger[i][0]

        for i in list(L):
            hits = [j for j in B if fits(i, j)]
            if not hits:
                continue
            j = hits[0]
            if len(hits) > 1 or sum(1 for k in L if fits(k, j)) > 1:
                ambiguous = True
            L.remove(i)
            B.remove(j)
            out.append([ledger[i][0].isoformat(), ledger[i][1], money(ledger[i][2]), money(bank[j][2]), rule])
    for i in L:
        out.append([ledger[i][0].isoformat(), ledger[i][1], money(ledger[i][2]), "", "missing_in_bank"])
    for j in B:
        out.append([bank[j][0].isoformat(), bank[j][1], "", money(bank[j][2]), "missing_in_ledger"])
    out.sort(key=lambda r: (r[0], r[1].casefold(), r[4]))
    return out, ambiguous


def _parse_date(s: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(s).strip())
    except ValueError:
        return None


@dataclass
class _Books:
    """The data stage: the ledger and the bank's side of it."""

    ledger: list  # (date, payee, amount)
    ledger_path: str
    ledger_words: str  # how the request names the ledger
    name_col: str
    story: str
    statement: str  # "bank statement", "card statement", ...
    bank: list  # (date, payee, amount), sorted
    expected: list  # the mismatch rows, reasons as REASONS


@dataclass
class _Statement:
    """The statement as the bank writes it, and the request's note about its format."""

    header: list[str]
    rows: list[list[str]]
    note: str


@dataclass
class _Request:
    """The phrasing stage: paths, the output's columns and reason codes, the request."""

    bank_path: str
    out: str
    header: list[str]
    codes: list[str]
    code: dict[str, str]  # REASONS -> the request's codes
    expected: list  # the mismatch rows with the request's codes
    dcol: str
    ncol: str
    ocol: str
    tcol: str
    rcol: str
    instruction: str


@operation
class ReconcileRecords(OperationGenerator):
    id = "reconcile_records"
    consumes: tuple[str, ...] = (TABLE,)
    produces = (TABLE,)
    standalone = True

    def _ledger_from(self, source: Artifact | None):
        t = table_of(source)
        if t is None or source is None:
            return None
        header, rows = t
        dcol, ncol, vcol = (role_column(source, header, r) for r in ("date", "name", "value"))
        if not (dcol and ncol and vcol):
            return None
        di, ni, vi = header.index(dcol), header.index(ncol), header.index(vcol)
        ledger = []
        for r in rows:
            d, v, p = _parse_date(r[di]), num(r[vi]), r[ni].strip()
            if d is None or v is None or v <= 0 or not p:
                return None
            ledger.append((d, p, round(v, 2)))
        if len(ledger) < 4:
            return None
        return ledger

    def _own_ledger(self, ctx: OpContext):
        rng = ctx.rng
        sc = V.schema(rng, ctx.persona, n_names=rng.randint(4, 7))
        payees = sc.names
        month = rng.randint(1, 11)
        ledger, rows = [], []
        for _ in range(rng.randint(9, 16)):
            d = flavor.date_in(rng, 2026, month)
            p = rng.choice(payees)
            v = flavor.amount(rng, max(8, sc.lo), max(sc.hi, 60))
            ledger.append((d, p, v))
        ledger.sort(key=lambda x: (x[0], x[1]))
        for d, p, v in ledger:
            rows.append([d.isoformat(), p, rng.choice(sc.groups), money(v)])
        fold = V.folder(ctx.persona, rng, ["books", "accounts", "finance"])
        path = ctx.path(V.join(fold, rng.choice([f"{sc.stem}.csv", "ledger.csv", "cashbook.csv", f"{sc.stem}_ledger.csv",
                                                 f"{sc.stem}_{V.month_name(month)[:3].lower()}.csv"])))
        return ledger, path, sc.header, rows, sc, month

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        files: list[WorkspaceFile] = []
        ledger = self._ledger_from(source)
        if ledger is None and source is not None:
            generic = self._generic(ctx, source)
            if generic is not None:
                return generic
        books = self._books(ctx, source, ledger, files)
        stmt = self._statement(ctx, books)
        ask = self._request(ctx, books, stmt, files)
        checks = self._checks(ask)
        ledger_path, bank_path, out, out_header, expected = books.ledger_path, ask.bank_path, ask.out, ask.header, \
            ask.expected
        ledger, brows, ncol, dcol, ocol, rcol = books.ledger, stmt.rows, ask.ncol, ask.dcol, ask.ocol, ask.rcol
        code = ask.code
        # partial: only the lines missing from the bank found, and a wrong bank amount for one of them
        missing = [list(r) for r in expected if r[4] == code["missing_in_bank"]]
        partial_rows = missing + [[r[0], r[1], r[2], r[2], "amount differs"] for r in expected
                                  if r[4] == code["amount_mismatch"]]
        instruction = ask.instruction
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=files,
            checks=checks,
            steps=[read(ledger_path), read(bank_path), write(out, to_csv(out_header, expected))],
            partial=[read(bank_path), write(out, to_csv(out_header, partial_rows))],
            outputs=[Artifact(out, TABLE, {"header": out_header, "rows": expected},
                              expand("[the reconciliation mismatch list|the list of mismatches|the reconciliation result|the "
                                     "unmatched lines] ({out})", ctx.rng, clause=True, out=out),
                              roles={"date": dcol, "name": ncol, "group": rcol, "value": ocol})],
            summary=f"reconcile {ledger_path} against {bank_path} into {out}",
            fingerprint=digest([[(d.isoformat(), p, v) for d, p, v in ledger], brows]),
        )


    # ----------------------------------------------------------------------------------------- data
    def _books(self, ctx: OpContext, source: Artifact | None, ledger: list | None,
               files: list[WorkspaceFile]) -> _Books:
        """The ledger (the previous step's, or one of our own added to `files`), and the bank's side of it: a
        copy with 1-2 lines missing, an amount and a date off and a payee of its own, drawn until the expected
        mismatches are unambiguous."""
        rng = ctx.rng
        story = ""
        if ledger is not None and source is not None:
            ledger_path, ledger_words = source.path, refer(source, ctx.rng)
            name_col = role_column(source, table_of(source)[0], "name") or "payee"
        else:
            ledger, ledger_path, lheader, lrows, sc, _m = self._own_ledger(ctx)
            files.append(WorkspaceFile(path=ledger_path, content=to_csv(lheader, lrows)))
            ledger_words = expand("[my|our|the] [ledger|{what}|books] `{p}`", rng, what=sc.what, p=ledger_path)
            ledger_words = ledger_words[:1].lower() + ledger_words[1:]
            name_col = sc.name
            story = V.story(rng, ctx.persona, sc.what, sc.names, sc.groups, len(ledger), V.month_name(_m),
                            unit="ledger lines")

        statement = rng.choice(["bank statement", "card statement", "bank export"])
        # the other side: a copy of the ledger with a few mismatches, in the bank's own format
        for _attempt in range(30):
            idx = list(range(len(ledger)))
            rng.shuffle(idx)
            n_missing_bank = 1 if len(ledger) < 8 else rng.randint(1, 2)
            n_amount = 1
            n_date = rng.randint(0, 1) if len(ledger) < 8 else 1
            miss = idx[:n_missing_bank]
            amt = idx[n_missing_bank:n_missing_bank + n_amount]
            dat = idx[n_missing_bank + n_amount:n_missing_bank + n_amount + n_date]
            bank = []
            for i, (d, p, v) in enumerate(ledger):
                if i in miss:
                    continue
                if i in amt:
                    delta = rng.choice([-1, 1]) * rng.choice([0.1, 1.0, 10.0, round(v * 0.1, 2), 9.0])
                    v = round(max(0.5, v + delta), 2)
                    if abs(v - ledger[i][2]) < 0.005:
                        v = round(v + 1, 2)
                if i in dat:
                    d = d + dt.timedelta(days=rng.randint(1, 3))
                bank.append((d, p, v))
            known = {p.casefold() for _, p, _ in ledger}
            extra_payee = next(x for x in [rng.choice(["Bank fee", "Monthly account fee", flavor.org(rng)])]
                               + [flavor.org(rng) for _ in range(20)] + ["Account service charge"]
                               if x.casefold() not in known)
            last = max(x[0] for x in ledger)
            for _ in range(rng.randint(1, 2)):
                bank.append((last - dt.timedelta(days=rng.randint(0, 10)), extra_payee, flavor.amount(rng, 2, 120)))
            expected, ambiguous = reconcile(ledger, bank)
            reasons = {r[4] for r in expected}
            if not ambiguous and "amount_mismatch" in reasons and "missing_in_bank" in reasons:
                break
        bank.sort(key=lambda x: (x[0], x[1]))

        return _Books(ledger, ledger_path, ledger_words, name_col, story, statement, bank, expected)

    def _statement(self, ctx: OpContext, books: _Books) -> _Statement:
        """The statement in one of the bank formats, and how the request warns about that format."""
        rng = ctx.rng
        bank = books.bank
        style = rng.choice(["signed", "debit", "upper"])
        if style == "signed":
            bheader = [rng.choice(["Booking date", "Value date", "Date"]), rng.choice(["Counterparty", "Name", "Details"]),
                       "Amount", rng.choice(["Balance", "Running balance"])]
            bal = round(rng.uniform(2000, 9000), 2)
            brows = []
            for d, p, v in bank:
                bal = round(bal - v, 2)
                brows.append([d.strftime("%d/%m/%Y"), p, f"-{v:.2f}", f"{bal:.2f}"])
            fmt_note = one_of(rng, [
                "[The statement's dates are|The bank writes dates as] DD/MM/YYYY and money out is [negative|shown "
                "with a minus sign].",
                "[Heads up:|Note that|Watch out:] the bank [puts the day first|writes DD/MM/YYYY] and [shows "
                "payments as negative amounts|puts a minus in front of what went out].",
                "Their export has a running balance column[ you can ignore|, which doesn't matter here], day-first "
                "dates (DD/MM/YYYY) and [negative|minus-signed] amounts for [payments|money going out].",
                "[Amounts leaving the account|Payments] are negative on the statement, and its dates read "
                "DD/MM/YYYY[ (so 03/04 is 3 April)|].",
            ])
        elif style == "debit":
            bheader = [rng.choice(["date", "txn date", "posted"]), rng.choice(["description", "narrative", "details"]),
                       rng.choice(["debit", "paid out", "money out"]), rng.choice(["credit", "paid in", "money in"])]
            brows = [[d.strftime("%d.%m.%Y"), f"{rng.choice(TYPES)} {p}", f"{v:.2f}", ""] for d, p, v in bank]
            fmt_note = one_of(rng, [
                "[The statement's dates are|Dates on the statement are] DD.MM.YYYY and each description is a "
                "transaction type (CARD, DD, TRF, POS) followed by the [payee|name].",
                "The bank [glues|prefixes] a [transaction code|type code] (CARD, DD, TRF or POS) [onto|to] every "
                "description - the [payee|name] is what follows it - and [writes|uses] DD.MM.YYYY dates.",
                "[Expect|You'll see] dotted dates (DD.MM.YYYY) and descriptions like \"POS <payee>\" or \"DD "
                "<payee>\"; [strip|ignore] the CARD/DD/TRF/POS code [to get|and you have] the [payee|name].",
                "Payments sit in the debit column[, credits are empty|]; dates [are|read] DD.MM.YYYY and the "
                "description starts with CARD, DD, TRF or POS before the [payee|name].",
            ])
        else:
            bheader = [rng.choice(["Posted", "Date posted", "Transaction date"]), rng.choice(["Payee", "Merchant", "To"]),
                       rng.choice(["Amount (EUR)", "Amount (GBP)", "Amount (USD)", "Amount"])]
            brows = [[d.strftime("%Y-%m-%d"), p.upper(), f"{v:,.2f}"] for d, p, v in bank]
            fmt_note = one_of(rng, [
                "The [statement|bank] writes [payees|names] in capitals; compare [names|them] ignoring case.",
                "[Names|Payees] on the [statement|export] are ALL CAPS, so [match them|compare] case-insensitively.",
                "[Don't let the|Ignore the] upper-case [names|payees] on the bank side [trip you up|fool you]: "
                "\"ACME LTD\" and \"Acme Ltd\" are the same [payee|name].",
                "[Their|The bank's] amounts may have thousands separators and every [payee|name] is shouted in "
                "capitals - case doesn't matter when [you compare|matching].",
            ])
        return _Statement(bheader, brows, fmt_note)

    # ----------------------------------------------------------------------------------------- phrasing
    def _request(self, ctx: OpContext, books: _Books, stmt: _Statement, files: list[WorkspaceFile]) -> _Request:
        """The statement's and the output's paths (the statement added to `files`), the output's columns and
        reason codes, and the request: the matching rule, the layout."""
        rng = ctx.rng
        ledger, name_col, expected, story = books.ledger, books.name_col, books.expected, books.story
        ledger_words, statement, bheader, brows, fmt_note = books.ledger_words, books.statement, stmt.header, \
            stmt.rows, stmt.note
        mon = ledger[0][0].strftime("%b").lower()
        bfold = V.folder(ctx.persona, rng, ["bank", "statements", "downloads"])
        bank_path = ctx.path(V.join(bfold, rng.choice(STATEMENT_NAMES).format(mon=mon) + ".csv"))
        files.append(WorkspaceFile(path=bank_path, content=to_csv(bheader, brows)))
        out = ctx.path(V.join(rng.choice(["", "", bfold, "reports"]), rng.choice(OUT_NAMES).format(mon=mon) + ".csv"))
        codes = rng.choice(REASON_SETS)
        code = dict(zip(REASONS, codes, strict=True))
        dcol = rng.choice(["date", "txn_date", "day", "booking_date"])
        ncol = name_col.lower() if name_col.lower() not in (dcol,) else "payee"
        ocol, tcol, rcol = rng.choice(OURS_COLS), rng.choice(THEIRS_COLS), rng.choice(REASON_COLS)
        out_header = [dcol, ncol, ocol, tcol, rcol]
        if len({h.casefold() for h in out_header}) != 5:
            out_header = [dcol, "payee", ocol, tcol, rcol]
            ncol = "payee"
        expected = [r[:4] + [code[r[4]]] for r in expected]
        C = {k: f"`{v}`" for k, v in code.items()}
        N = f"`{ncol}`"
        rule_items = [
            one_of(rng, [
                "a ledger line and a statement line match when [{n}, date and amount all agree|they have the same "
                "{n}, date and amount]",
                "[lines|entries] that share {n}, date and amount on both sides are matched[ and stay out of the "
                "file|]",
                "an exact match is the same {n}, [the same |]date and [the same |]amount in both files",
                "[start by pairing off|first cross off] the lines that agree on all three: {n}, date, amount",
                "if {n}, day and amount are identical on both sides, [that's a match|the pair is fine] and "
                "[it's not reported|nothing gets written for it]",
            ], n=N),
            one_of(rng, [
                "of what is left, pair lines with the same {n} and amount but different dates (reason {c})",
                "[among|of] the leftovers, [same|equal] {n} and amount [but|with] another date [pair up as|is] {c}",
                "[next|then], unmatched lines with the same {n} and amount on different days [are|count as] {c}",
                "{c} is for a pair that agrees on {n} and amount but [was booked|cleared] on another day",
                "[when|if] only the date is off (same {n}, same amount), [pair them and call it|the reason is] {c}",
            ], n=N, c=C["date_mismatch"]),
            one_of(rng, [
                "[then|after that] pair lines with the same {n} and date but different amounts (reason {c})",
                "[after that|then], same {n} and date [but|with] [a different|another] amount [is|pairs up as] {c}",
                "whatever still has a partner with the same {n} and date but a different amount is {c}",
                "a leftover pair on the same day for the same {n} whose amounts disagree [gets|is marked] {c}",
                "[once dates are done|after the date pairs], lines that agree on {n} and day but not on the "
                "[money|sum] are {c}",
            ], n=N, c=C["amount_mismatch"]),
            one_of(rng, [
                "any ledger line still unpaired is {a} and any statement line still unpaired is {b}",
                "[everything|whatever] left over is {a} (ledger side) or {b} (statement side)",
                "unpaired [lines|entries]: {a} [if they are|when] in the ledger, {b} [if they are|when] on the "
                "statement",
                "[no partner at all|nothing to pair with]? [Then it's|That's] {a} for a ledger line, {b} for a "
                "[bank|statement] line",
                "{b} [marks|is for] [bank|statement] lines [the books don't have|that never made it into the "
                "ledger], {a} the other way round",
            ], a=C["missing_in_bank"], b=C["missing_in_ledger"]),
        ]
        OC, TC = f"`{ocol}`", f"`{tcol}`"
        cols_items = [
            expand("[columns|header]: {cols}", rng, cols=V.cols(rng, out_header)),
            one_of(rng, [
                "{d} [as YYYY-MM-DD|in ISO form|in YYYY-MM-DD form] (the ledger's date, or the statement's for {b} lines)",
                "{d} [comes from|is taken from] the ledger[ side|], except for {b} lines where [it's|you take] the "
                "statement's date[ - YYYY-MM-DD either way|, in YYYY-MM-DD]",
                "{iso}; [use|take] the statement's date only [when|where] the ledger has no line ({b})",
                "[for|in] {d}, [write|put] the ledger date (the bank's date for {b}), [ISO style|formatted "
                "YYYY-MM-DD]",
            ], d=f"`{dcol}`", b=C["missing_in_ledger"], iso=V.iso(rng, f"`{dcol}`")),
            one_of(rng, [
                "{o} and {t} as positive numbers with two decimals, [left empty|blank] on the side where the line is "
                "missing",
                "{dec}, no minus signs; [leave|keep] the cell [empty|blank] for the side that has no line",
                "[a missing side|the side without a line] [stays|is left] blank; [otherwise|everywhere else] {o} "
                "and {t} [hold|are] the amounts [as positive values|without a sign] [to the cent|with two decimals]",
                "[put|write] our amount in {o} and the bank's in {t} (positive, [2 dp|two decimals]) - [nothing|an "
                "empty cell] where [one side doesn't have the line|a side is missing]",
            ], o=OC, t=TC, dec=V.two_dec(rng, f"{OC} and {TC}")),
            expand("[only the mismatches|no matched lines|matching lines left out|nothing for lines that "
                   "[reconcile|agree]|[just|only] the problem lines, not the good ones]", rng),
        ]
        lead = one_of(rng, [
            "Please reconcile {lw} against the {st} `{bp}`.",
            "Could you reconcile {lw} [against|with] the {st} `{bp}`?",
            "I [@need] {lw} checked against `{bp}`, my {st}.",
            "Cross-check {lw} with the {st} in `{bp}`.",
            "[Does|Do] {lw} agree with the {st} (`{bp}`)? [Find out|Check line by line].",
            "[Time for|Help me with] the monthly reconciliation: {lw} vs the {st} `{bp}`.",
            "The {st} `{bp}` and {lw} [should|ought to] tell the same story, [but the balances don't|yet the "
            "totals are off|but something is off].",
            "[Tick off|Go through] {lw} line by line against `{bp}` ({st}) [and tell me what doesn't agree|and "
            "flag whatever is off].",
            "[Before|Ahead of] {when}, I [have to|must] [square|reconcile] {lw} with what the bank says in `{bp}`.",
        ], lw=ledger_words, st=statement, bp=bank_path, when=rng.choice(RECON_WHEN.get(V.domain(ctx.persona),
                                                                                         RECON_WHEN["general"])))
        where = one_of(rng, ["[Write|Save|List] the [mismatches|discrepancies|problem lines] [to|in] `{out}`.",
                             "The [result|list of problems] goes [in|into] `{out}`.",
                             "[Every|Each] line that doesn't reconcile [goes|should end up] in `{out}`.",
                             "`{out}` [should list|is for] [what doesn't match|the exceptions].",
                             "[I'd like|Give me] the [breaks|exceptions|differences] as a CSV: `{out}`."], out=out)
        if rng.random() < 0.3:  # the whole matching rule in one breath, as people write it in a hurry
            rules_txt = " " + one_of(rng, [
                "Match on {n}+date+amount first; of the rest, same {n} and amount on another day is {dm}, same {n} "
                "and day with another amount is {am}; what's left is {mb} (ours only) or {ml} (bank only).",
                "[How I match:|The rule:] exact {n}/date/amount pairs are fine and stay out; [then|next] {dm} for "
                "[a pair that only differs in the date|date-only differences], [then|after that] {am} for "
                "[same-day pairs with different amounts|amount-only differences]; lone lines are {mb} (ledger) and "
                "{ml} (statement).",
            ], n=N, dm=C["date_mismatch"], am=C["amount_mismatch"], mb=C["missing_in_bank"],
                ml=C["missing_in_ledger"])
        else:
            rules_txt = V.reqs(rng, rule_items, fixed_order=True,
                               list_leads=("Matching rule:", "How to match:", "The order of matching:",
                                           "Pair them up like this:"))
        lead = f"{lead} {story}" if story else lead
        parts = [lead + " " + fmt_note + " " + where, rules_txt,
                 V.reqs(rng, cols_items, list_leads=("Output:", "For the file:", "In the CSV:", "Layout:"))]
        if rng.random() < 0.35:
            parts = [lead + " " + where + " " + fmt_note, parts[2], rules_txt]
        instruction = V.cat(*parts)
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return _Request(bank_path, out, out_header, codes, code, expected, dcol, ncol, ocol, tcol, rcol, instruction)

    # ----------------------------------------------------------------------------------------- checks
    @staticmethod
    def _checks(ask: _Request) -> list[Check]:
        """The mismatches found (payee and reason), their amounts and dates, the reasons from the given list."""
        out, expected, codes = ask.out, ask.expected, ask.codes
        dcol, ncol, ocol, tcol, rcol = ask.dcol, ask.ncol, ask.ocol, ask.tcol, ask.rcol
        checks = [
            Check("mismatches_found", "csv_rows",
                  {"path": out, "header": [ncol, rcol], "rows": [[r[1], r[4]] for r in expected]}),
            Check("mismatch_amounts", "csv_rows",
                  {"path": out, "header": [ncol, ocol, tcol, rcol],
                   "rows": [[r[1], r[2], r[3], r[4]] for r in expected]}),
            Check("mismatch_dates", "csv_rows",
                  {"path": out, "header": [dcol, ncol, rcol], "rows": [[r[0], r[1], r[4]] for r in expected]}),
            Check("reasons_from_list", "column_matches",
                  {"path": out, "column": rcol, "pattern": "|".join(codes)}),
        ]
        return checks

    # ----------------------------------------------------------------------------------------- any keyed table
    def _generic(self, ctx: OpContext, source: Artifact) -> StepPlan | None:
        """Any table with a key column: compare it with another system's copy that has drifted."""
        t = table_of(source)
        if t is None:
            return None
        header, rows = t
        key = unique_column(header, rows, role_column(source, header, "name"))
        if key is None or len(rows) < 3 or len(header) < 2:
            return None
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        ki = header.index(key)
        fields = [h for h in header if h != key]
        keys = [r[ki].strip() for r in rows]
        order = list(range(len(rows)))
        rng.shuffle(order)
        missing = order[0]
        changed = order[1: 1 + (1 if len(rows) < 5 else 2)]
        theirs = [list(r) for i, r in enumerate(rows) if i != missing]
        expected = [[keys[missing], "", "", "", "missing_in_theirs"]]
        for i in changed:
            row = next(r for r in theirs if r[ki].strip() == keys[i])
            cands = [h for h in fields if rows[i][header.index(h)].strip()]
            if not cands:
                continue
            f = rng.choice(cands)
            fi = header.index(f)
            old = rows[i][fi].strip()
            col_vals = sorted({r[fi].strip() for r in rows if r[fi].strip() and r[fi].strip().casefold() != old.casefold()
                               and not (num(r[fi]) is not None and num(old) is not None and num(r[fi]) == num(old))})
            if is_quantity(old) and num(old) is not None:
                v = num(old)
                dec = len(old.split(".")[1]) if "." in old else 0
                new_v = v + rng.choice([1, -1]) * max(1.0, round(abs(v) * rng.choice([0.1, 0.25]), dec))
                new = f"{new_v:.{dec}f}"
            elif re.fullmatch(r"\d{4}-\d{2}-\d{2}", old):
                new = (dt.date.fromisoformat(old) + dt.timedelta(days=rng.randint(1, 9))).isoformat()
            elif old.casefold() in ("true", "false", "yes", "no"):
                new = {"true": "false", "false": "true", "yes": "no", "no": "yes"}[old.casefold()]
            elif col_vals:
                new = rng.choice(col_vals)
            else:
                new = f"{old} (old)"
            row[fi] = new
            expected.append([keys[i], f, old, new, "value_mismatch"])
        # a record only the other system has, when a realistic new key can be made
        sample = keys[0]
        extra_key = None
        if "@" in sample:
            extra_key = next((flavor.email_of(p, sample.split("@", 1)[1]) for p in flavor.people(rng, 6)
                              if flavor.email_of(p, sample.split("@", 1)[1]).casefold() not in
                              {k.casefold() for k in keys}), None)
        elif re.fullmatch(r"[A-Z][a-z]+ [A-Z][a-z]+", sample):
            extra_key = next((p for p in flavor.people(rng, 6) if p.casefold() not in {k.casefold() for k in keys}), None)
        elif re.fullmatch(r"[A-Za-z][A-Za-z &-]*", sample):
            pool = [w for w in voc["items"] + voc["categories"] + voc["projects"]
                    if w.casefold() not in {k.casefold() for k in keys}]
            if pool:
                w = rng.choice(pool)
                extra_key = w.capitalize() if sample[:1].isupper() else w
        if extra_key:
            donor = list(rows[order[-1]])
            donor[ki] = extra_key
            theirs.insert(rng.randint(0, len(theirs)), donor)
            expected.append([extra_key, "", "", "", "missing_in_ours"])
        theirs.sort(key=lambda r: r[ki].casefold())
        expected.sort(key=lambda r: (r[4], r[0].casefold(), r[1]))
        other_words = rng.choice(["the copy from the shared drive", "the export from the other system",
                                  "my colleague's version", "last week's backup copy", "the version in the CRM",
                                  "what the office has", "the old laptop's copy", "the head office file"])
        other = ctx.path(V.join(V.folder(ctx.persona, rng, ["shared", "other", "incoming"]), rng.choice(
            ["other_copy.csv", "shared_drive_export.csv", "colleague_version.csv", "system_export.csv",
             "their_copy.csv", "backup.csv", "office_version.csv", "crm_export.csv"])))
        their_header = [h.capitalize() if rng.random() < 0.5 else h for h in header]
        files = [WorkspaceFile(path=other, content=to_csv(their_header, theirs))]
        ctx.used_paths.add(other)
        out = ctx.path(rng.choice(["differences.csv", "mismatches.csv", "reconciliation.csv", "drift.csv",
                                   "diff_report.csv", "what_changed.csv"]))
        mo, mt, vm = rng.choice([("missing_in_theirs", "missing_in_ours", "value_mismatch"),
                                 ("only_ours", "only_theirs", "changed"),
                                 ("MISSING_THEIRS", "MISSING_OURS", "DIFFERENT"),
                                 ("not_in_theirs", "not_in_ours", "differs")])
        fc, oc, tc, rc = (rng.choice(c) for c in (["field", "column"], ["ours", "our_value", "mine"],
                                                  ["theirs", "their_value", "other_value"],
                                                  ["reason", "status", "kind"]))
        out_header = [key, fc, oc, tc, rc]
        if len({h.casefold() for h in out_header}) != 5:
            fc, oc, tc, rc = "field_name", "ours_value", "theirs_value", "diff_reason"
            out_header = [key, fc, oc, tc, rc]
        recode = {"missing_in_theirs": mo, "missing_in_ours": mt, "value_mismatch": vm}
        expected = [r[:4] + [recode[r[4]]] for r in expected]
        K = f"`{key}`"
        items = [
            one_of(rng, ["[match|pair] the rows by {k} (ignoring case)[; column names match ignoring case too|]",
                         "{k} is the key[ that ties the two files together|]; case doesn't matter, in the values or "
                         "in the column names",
                         "line rows up [on|by] {k}, case-insensitively (their headers may be capitalised)"], k=K),
            one_of(rng, ["[one row per {k} that only my file has|a row for each {k} missing from theirs|every {k} only "
                         "I have gets a row] (reason {a})",
                         "{a} for [any|each] {k} that [exists only on my side|they don't have]",
                         "[a {k} they lost|keys missing on their side]: [reason|mark it] {a}"], k=K, a=f"`{mo}`"),
            one_of(rng, ["[one row per {k} that only `{o}` has|a row for each {k} that is only in `{o}`|every {k} found "
                         "only in `{o}` gets a row] (reason {b})",
                         "{b} [marks|for] [a {k} that appears only in `{o}`|keys `{o}` has and I don't]",
                         "[anything new|extra keys] in `{o}` [is|are] {b}, one row [each|per {k}]"],
                   k=K, o=other, b=f"`{mt}`"),
            expand("[one row per cell that differs in a matched row|a row for every value that changed between "
                   "matched rows|each differing cell of a matched pair gets a row|[each|every] changed cell of a "
                   "matched row [is|becomes] its own row] (reason {c}, {f} = the column name, {ou} / {th} = the two "
                   "values)", rng, c=f"`{vm}`", f=f"`{fc}`", ou=f"`{oc}`", th=f"`{tc}`"),
            expand("[[leave|keep] {f}, {ou} and {th} [empty|blank] for the missing ones|rows for missing keys get "
                   "[empty|blank] {f}, {ou} and {th}|{f}, {ou} and {th} stay [empty|blank] on the rows of missing "
                   "keys]", rng, f=f"`{fc}`",
                   ou=f"`{oc}`", th=f"`{tc}`"),
            expand("[compare values ignoring case and surrounding spaces, and numbers by value|case and stray spaces "
                   "don't count as differences, and numbers are equal when their values are|treat 'Abc ' and 'abc' "
                   "as the same, and 5 and 5.0 as the same|a difference in case, padding or trailing zeros "
                   "(7 vs 7.00) is not a difference]", rng),
            expand("[columns|header]: {cols}", rng, cols=V.cols(rng, out_header)),
        ]
        src_w = refer(source, ctx.rng)
        lead = one_of(rng, [
            "{S} should agree with {ow}, `{o}`, but they have drifted apart. List every difference in `{out}`.",
            "[Please|Could you] reconcile {s} (ours) with `{o}` ({ow}, theirs) and write the differences to `{out}`.",
            "{S} and `{o}` ({ow}) [no longer match|have diverged]. [What's different?|Find every difference.] Put "
            "it in `{out}`.",
            "[Compare|Diff] {s} against {ow} in `{o}`, [into|and save the result as] `{out}`.",
            "[I don't trust|I'm not sure about] `{o}` ({ow}) any more: [what|which values] [differs|changed] from "
            "{s}? [A CSV at|Write it to] `{out}`, please.",
            "{ow} (`{o}`) [was supposed to be|should be] a copy of {s}. [List|Record] [the drift|every change] in "
            "`{out}`.",
        ], S=src_w[:1].upper() + src_w[1:], s=src_w, ow=other_words, o=other, out=out)
        instruction = V.cat(lead, V.reqs(rng, items, list_leads=("How to compare:", "Rules:")))
        checks = [
            Check("differences_found", "csv_rows", {"path": out, "header": [key, rc],
                                                    "rows": [[r[0], r[4]] for r in expected]}),
            Check("differing_values", "csv_rows", {"path": out, "header": [key, fc, oc, tc],
                                                   "rows": [r[:4] for r in expected]}),
            Check("reasons_from_list", "column_matches",
                  {"path": out, "column": rc, "pattern": f"{mo}|{mt}|{vm}"}),
        ]
        partial_rows = [r for r in expected if r[4] != vm] + \
            [[r[0], r[1], r[2], r[2], "not_same"] for r in expected if r[4] == vm]
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=files,
            checks=checks,
            steps=[read(source.path), read(other), write(out, to_csv(out_header, expected))],
            partial=[write(out, to_csv(out_header, partial_rows))],
            outputs=[Artifact(out, TABLE, {"header": out_header, "rows": expected},
                              f"the list of differences ({out})", roles={"name": key, "group": rc})],
            summary=f"reconcile {source.path} with {other} into {out}",
            fingerprint=digest([header, rows, theirs]),
        )


GENERATORS = [ReconcileRecords()]
