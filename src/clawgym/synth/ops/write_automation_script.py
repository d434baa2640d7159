"""write_automation_script: the agent writes a small python3 script at a stated path that does a recurring data
chore (totals per group, totals per month, filtering by a threshold, counting per group) on a CSV or JSON
export given on the command line, and runs it once. The checker runs the script again on a second export it
has never seen (and with another argument), so hard-coded answers fail."""

from __future__ import annotations

import csv
import datetime as dt
import functools
import hashlib
import io
import json
import re
import shlex
from collections import defaultdict
from dataclasses import dataclass

import yaml

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor, world
from clawgym.synth.grammar import expand, one_of, requirements
from clawgym.synth.ops import operation, programs
from clawgym.synth.ops.base import (
    RECORDS,
    TABLE,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    exec_,
    ls,
    read,
    to_csv,
    write,
)

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}")


def _num(s) -> float | None:
    if s is None or isinstance(s, bool):
        return None
    try:
        return float(str(s).strip())
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------ own data


# Exports a persona of each domain would automate, as (kind, columns by role, group pool, name pool, value range and
# decimals, id column or ""): the roles are date / group / name / value; a pool is a list or one of "items",
# "categories", "people", "orgs", "cities".
SCHEMAS: dict[str, list[tuple]] = {
    "health": [
        ("dispensing", {"date": "day", "group": "ward", "name": "item", "value": "units"},
         ["Ward 3", "Paeds", "Maternity", "A&E", "Day unit"], "items", (1, 60, 0), ""),
        ("overtime", {"date": "shift_date", "group": "unit", "name": "nurse", "value": "hours"},
         ["ICU", "Paeds", "Theatre", "Outpatients"], "people", (0.5, 9, 1), "shift_id"),
        ("clinic_visits", {"date": "visit_date", "group": "clinic", "name": "clinician", "value": "minutes"},
         ["Diabetes", "Asthma", "Travel", "Baby check"], "people", (5, 45, 0), "ref"),
    ],
    "education": [
        ("marks", {"date": "submitted", "group": "class", "name": "pupil", "value": "score"},
         ["7A", "7B", "8C", "9A", "10B"], "people", (12, 100, 0), ""),
        ("trip_payments", {"date": "paid_on", "group": "trip", "name": "parent", "value": "amount"},
         ["Museum", "Zoo", "Science park", "Theatre"], "people", (4, 45, 2), "receipt"),
        ("library_loans", {"date": "loan_date", "group": "genre", "name": "borrower", "value": "days_out"},
         ["Fiction", "History", "Science", "Poetry"], "people", (1, 40, 0), ""),
    ],
    "food": [
        ("orders", {"date": "date", "group": "item", "name": "customer", "value": "total"},
         "items", "people", (6, 240, 2), "order_id"),
        ("waste_log", {"date": "logged", "group": "station", "name": "ingredient", "value": "kg"},
         ["Pastry", "Grill", "Cold", "Prep"], "items", (0.2, 8, 2), ""),
        ("covers", {"date": "service_date", "group": "sitting", "name": "host", "value": "covers"},
         ["Lunch", "Early dinner", "Late dinner"], "people", (8, 90, 0), ""),
    ],
    "software": [
        ("cloud_costs", {"date": "usage_date", "group": "service", "name": "project", "value": "cost_usd"},
         ["compute", "storage", "egress", "database", "cdn"], ["api", "web", "batch", "ml"], (3, 900, 2), ""),
        ("incidents", {"date": "opened", "group": "severity", "name": "owner", "value": "minutes_to_fix"},
         ["sev1", "sev2", "sev3"], "people", (4, 480, 0), "incident"),
        ("builds", {"date": "started", "group": "pipeline", "name": "branch", "value": "duration_s"},
         ["unit", "integration", "deploy", "lint"], ["main", "release", "hotfix", "feature"], (20, 1800, 0), "run"),
    ],
    "finance": [
        ("expenses", {"date": "date", "group": "category", "name": "payee", "value": "amount"},
         "categories", "orgs", (4, 700, 2), ""),
        ("invoices", {"date": "issued", "group": "client", "name": "matter", "value": "net"},
         "orgs", ["audit", "tax return", "payroll", "advisory"], (80, 4800, 2), "invoice_no"),
        ("card_spend", {"date": "posted", "group": "card", "name": "merchant", "value": "eur"},
         ["*1234", "*7781", "*0420"], "orgs", (2, 600, 2), ""),
    ],
    "farm": [
        ("milk_yield", {"date": "date", "group": "cow", "name": "milker", "value": "litres"},
         ["Daisy", "Bella", "Clover", "Rosie", "Maple"], "people", (8, 38, 1), ""),
        ("readings", {"date": "date", "group": "site", "name": "sensor", "value": "reading"},
         "cities", ["temp", "humidity", "co2", "soil_moisture"], (5, 95, 1), ""),
        ("sales", {"date": "market_day", "group": "produce", "name": "stall", "value": "takings"},
         "items", ["North gate", "Square", "Farm shop"], (10, 420, 2), ""),
    ],
    "creative": [
        ("print_sales", {"date": "sold_on", "group": "series", "name": "buyer", "value": "price"},
         ["Coastlines", "Night city", "Portraits", "Botanicals"], "people", (25, 600, 2), "order"),
        ("studio_hours", {"date": "day", "group": "project", "name": "artist", "value": "hours"},
         "projects", "people", (0.5, 10, 1), ""),
        ("streams", {"date": "week_of", "group": "platform", "name": "track", "value": "plays"},
         ["Spotify", "Bandcamp", "Apple Music", "YouTube"], ["Intro", "Low tide", "Paper moon", "Outro"],
         (40, 9000, 0), ""),
    ],
    "legal": [
        ("billable_time", {"date": "date", "group": "matter", "name": "fee_earner", "value": "hours"},
         ["Smith v Jones", "Harbor lease", "Estate of Kim", "Acme merger"], "people", (0.1, 7.5, 1), "entry"),
        ("disbursements", {"date": "incurred", "group": "type", "name": "supplier", "value": "amount"},
         "categories", "orgs", (5, 800, 2), ""),
    ],
    "general": [
        ("expenses", {"date": "date", "group": "category", "name": "payee", "value": "amount"},
         "categories", "orgs", (4, 700, 2), ""),
        ("meter_readings", {"date": "read_on", "group": "meter", "name": "reader", "value": "kwh"},
         ["kitchen", "garage", "main", "heat pump"], "people", (2, 60, 1), ""),
        ("orders", {"date": "date", "group": "item", "name": "customer", "value": "total"},
         "items", "people", (6, 240, 2), "order_id"),
    ],
}


DATA_FOLDERS = ["data", "exports", "downloads", "raw", "incoming", "sheets", "inbox"]
SCRIPT_FOLDERS = ["scripts", "tools", "bin", "automation", "jobs", "cron", "utils"]
OUT_FOLDERS = ["reports", "out", "output", "summaries", "results"]


def _period_stem(rng, kind: str, months: list[int]) -> str:
    a, b = dt.date(2026, months[0], 1), dt.date(2026, months[-1], 1)
    return rng.choice([f"{kind}_{a:%b}_{b:%b}".lower(), f"{kind}_2026-{a:%m}_to_{b:%m}", f"{kind}-{a:%Y-%m}-{b:%m}",
                       f"{a:%Y%m}-{b:%m}_{kind}", f"export_{kind}_{a:%b}-{b:%b}{b:%y}".lower()])


_SHEET_TOOL = re.compile(r"excel|sheets|calc|numbers|airtable|notion|quickbooks|xero|access|tableau|power bi|"
                         r"crm|salesforce|hubspot|export|spreadsheet|smartsheet|redcap|stata|spss", re.I)


def _sheet_tool(persona, rng) -> str:
    """One of the persona's tools that holds tables (a spreadsheet, a CRM, an app's export), else "a
    spreadsheet": where they do this chore by hand today."""
    return rng.choice([t for t in persona.tools if _SHEET_TOOL.search(t)] or ["a spreadsheet"])


def _spec(rng, chore: str, sl: dict) -> str:
    """What the script does, in lower case to follow "it reads INPUT and": the core, the output's columns and the
    details (rounding, blanks, order) as independent choices in a drawn order."""
    def ex(t: str) -> str:
        text = expand(t, rng, **sl)
        return text[:1].lower() + text[1:]

    if chore == "filter":
        core = ex(rng.choice([
            "[keeps only|selects|writes out just|keeps] the rows whose `{v}` is at least THRESHOLD (a number "
            "given as the third argument)",
            "[drops|removes|filters out] every row whose `{v}` is [below|under|less than] THRESHOLD, the [third|"
            "last] argument (a number)",
            "[passes through|lets through|copies] [only |]the rows [where|in which] `{v}` [reaches|is no less than] "
            "THRESHOLD - [that's|which is] the [third|last] [argument|command-line argument], a number",
            "[uses|takes] the [third|last] argument as THRESHOLD [(a number)|, a number,] and [keeps|writes] "
            "[only |]the rows with `{v}` [>=|at or above] it",
        ]))
        details = [ex("[rows with an empty {v} are dropped|a row with no {v} is left out|blank {v} cells never "
                      "pass]"),
                   ex("[the rows stay unchanged, with the same columns|every column is kept as it is|rows are "
                      "copied unchanged, all columns]"),
                   ex("[in their original order|in the order of the input|without re-sorting]")]
        out = ex("[to the output CSV|into OUTPUT (CSV)|as a CSV at OUTPUT]")
        text = f"{core} {out}"
    elif chore == "average":
        core = ex("[averages|computes the mean of|works out the average] `{v}` [per|for each|by] `{g}`")
        out = ex("[writes|saves|outputs] [a CSV with the columns|a CSV headed|a CSV whose header row is|a comma-separated file of] {g}, {average}, {count}")
        details = [ex("{average} [with two decimals|rounded to 2 decimals|formatted with 2 decimals]"),
                   ex("{count} = [the number of rows averaged|how many rows went into it|rows used]"),
                   ex("[skip rows whose {v} is empty|rows with an empty {v} don't count|ignore blank {v} cells]"),
                   ex("[highest {average} first, ties by {g}|sorted by {average}, biggest first, then by {g}]")]
        text = f"{core} and {out}"
    elif chore == "latest":
        core = ex("[finds|picks|keeps] [the most recent|the latest|the newest] `{v}` [per|for each] `{g}` (the row "
                  "with the latest `{d}`[; on a tie the later row in the file|, the last one in the file on a tie])")
        out = ex("[writes|saves|outputs] [a CSV with the columns|a CSV headed|a CSV whose header row is|a comma-separated file of] {g}, {d}, {v}")
        details = [ex("[one row per {g}|a row for each {g}]"),
                   ex("[sorted by {g}|in order of {g} (A-Z)|{g} in alphabetical order]"),
                   ex("[rows with an empty {v} or {d} are ignored|skip rows without a {v} or {d}]"),
                   ex("[{d} and {v} copied as they are|values unchanged]")]
        text = f"{core} and {out}"
    elif chore == "count":
        core = ex("[counts the rows per|counts how many rows there are for each|tallies the rows by] `{g}`")
        out = ex("[writes|saves|outputs] [a CSV with the columns|a CSV headed|a CSV whose header row is|a comma-separated file of] {g}, {count}")
        details = [ex("[most frequent first|the largest {count} first|highest {count} on top]"),
                   ex("[ties by {g}|ties broken by {g} (A-Z)|equal counts in order of {g}]")]
        text = f"{core} and {out}"
    else:
        key = "`{g}`" if chore == "group" else "calendar month (YYYY-MM) of `{d}`"
        core = ex("[adds up|sums|totals] `{v}` [per|for each|by] " + key)
        first = "{g}" if chore == "group" else "{month} (YYYY-MM)"
        out = ex("[writes|saves|outputs] [a CSV with the columns|a CSV headed|a CSV whose header row is|a comma-separated file of] " + first + ", {total}, {count}")
        details = [ex("{total} [with two decimals|rounded to 2 decimals|to the cent (two decimals)]"),
                   ex("{count} = [the number of rows added up|how many rows went into the {total}|rows summed]"),
                   ex("[skip rows whose {v} is empty|rows with an empty {v} don't count|ignore blank {v} cells]")]
        details.append(ex("[largest {total} first, ties by {g}|sorted by {total}, biggest first, then by {g}|"
                          "highest {total} on top (ties: {g} A-Z)]") if chore == "group" else
                       ex("[oldest month first|in date order, oldest first|months in ascending order]"))
        text = f"{core} and {out}"
    rng.shuffle(details)
    if rng.random() < 0.5:
        return text + " (" + "; ".join(details) + ")"
    return text + " - " + ", ".join(details[:-1]) + " and " + details[-1]


def _pool(rng, spec, voc, n: int) -> list[str]:
    if isinstance(spec, list):
        return rng.sample(spec, k=min(n, len(spec)))
    if spec == "people":
        return flavor.people(rng, n)
    if spec == "orgs":
        return flavor.orgs(rng, n)
    if spec == "cities":
        return rng.sample(flavor.CITIES, n)
    return rng.sample(voc[spec], k=min(n, len(voc[spec])))


def _own_table(rng, voc, months: list[int], domain: str = "general"
               ) -> tuple[str, list[str], list[list[str]], dict[str, str]]:
    kind, roles, gspec, nspec, (lo, hi, dec), idcol = rng.choice(SCHEMAS[domain])
    n = rng.randint(12, 26)
    groups = _pool(rng, gspec, voc, rng.randint(3, 4))
    names = _pool(rng, nspec, voc, rng.randint(3, 6))
    order = ["date", "name", "group", "value"] if rng.random() < 0.5 else ["date", "group", "name", "value"]
    header = ([idcol] if idcol else []) + [roles[r] for r in order]
    start = rng.randint(100, 8000)
    prefix = rng.choice(["", "A-", "#", f"{kind[:2].upper()}-"])
    rows: list[list[str]] = []
    for i in range(n):
        d = flavor.date_in(rng, 2026, rng.choice(months))
        cells = {"date": d.isoformat(), "name": rng.choice(names), "group": rng.choice(groups),
                 "value": f"{rng.uniform(lo, hi):.{dec}f}"}
        rows.append(([f"{prefix}{start + i}"] if idcol else []) + [cells[r] for r in order])
    di = header.index(roles["date"])
    rows.sort(key=lambda r: r[di])
    # real exports have a gap or two
    vcol = header.index(roles["value"])
    for i in rng.sample(range(len(rows)), k=rng.randint(1, 2)):
        rows[i][vcol] = ""
    return kind, header, rows, dict(roles)


def _variant_rows(rng, header, rows, roles, months: list[int]) -> list[list[str]]:
    """Another export in the same format: some rows dropped, values changed, dates moved to other months."""
    out = [list(r) for r in rng.sample(rows, k=min(len(rows), max(3, int(len(rows) * rng.uniform(0.5, 0.8)))))]
    while len(out) < 3:  # a tiny source: repeat a row or two
        out.append(list(rng.choice(rows)))
    vi = header.index(roles["value"]) if roles.get("value") in header else None
    di = header.index(roles["date"]) if roles.get("date") in header else None
    gi = header.index(roles["group"]) if roles.get("group") in header else None
    for r in out:
        if vi is not None and _num(r[vi]) is not None:
            decimals = len(r[vi].split(".")[1]) if "." in r[vi] else 0
            v = _num(r[vi]) * rng.uniform(0.4, 1.9)
            r[vi] = f"{v:.{decimals}f}"
        if di is not None and ISO.match(r[di]):
            d = dt.date.fromisoformat(r[di][:10])
            r[di] = dt.date(d.year, rng.choice(months), min(d.day, 28)).isoformat() + r[di][10:]
    if gi is not None and out:
        extra = list(rng.choice(out))
        extra[gi] = rng.choice(["Misc", "Other", "Unsorted"])
        out.insert(rng.randint(0, len(out)), extra)
    if di is not None:
        out.sort(key=lambda r: r[di])
    return out


# ------------------------------------------------------------------------------------------ chores


def _blank(v) -> bool:
    return str(v).strip() == ""


OUT_NAMES = {"total": "total", "count": "count", "month": "month", "average": "average"}


def run_chore(chore: str, header: list[str], rows: list[list[str]], cols: dict[str, str], arg: str | None,
              names: dict[str, str] | None = None, skip: list[str] | None = None):
    """(output header, output rows) of the chore, exactly as the reference script computes them; `names` are the
    output's own column names (total, count, month by default); `skip` = [column, value]: rows whose column holds
    that value (stripped) are left out first."""
    nm = {**OUT_NAMES, **(names or {})}
    ix = {h: i for i, h in enumerate(header)}
    if skip:
        rows = [r for r in rows if str(r[ix[skip[0]]]).strip() != skip[1]]
    if chore == "filter":
        v = ix[cols["value"]]
        thr = float(arg)
        return list(header), [list(r) for r in rows if not _blank(r[v]) and float(r[v]) >= thr]
    if chore == "count":
        g = ix[cols["group"]]
        counts: dict[str, int] = defaultdict(int)
        for r in rows:
            counts[str(r[g]).strip()] += 1
        order = sorted(counts, key=lambda k: (-counts[k], k))
        return [cols["group"], nm["count"]], [[k, str(counts[k])] for k in order]
    if chore == "latest":  # per group, the row with the latest date (the last such row in the file on ties)
        g, d, v = ix[cols["group"]], ix[cols["date"]], ix[cols["value"]]
        last: dict[str, list[str]] = {}
        for r in rows:
            if _blank(r[v]) or _blank(r[d]):
                continue
            k = str(r[g]).strip()
            if k not in last or str(r[d]).strip() >= last[k][0]:
                last[k] = [str(r[d]).strip(), str(r[v]).strip()]
        return [cols["group"], cols["date"], cols["value"]], [[k, *last[k]] for k in sorted(last)]
    if chore == "average":
        g, v = ix[cols["group"]], ix[cols["value"]]
        sums: dict[str, float] = defaultdict(float)
        ns: dict[str, int] = defaultdict(int)
        for r in rows:
            if _blank(r[v]):
                continue
            sums[str(r[g]).strip()] += float(r[v])
            ns[str(r[g]).strip()] += 1
        avg = {k: f"{sums[k] / ns[k]:.2f}" for k in sums}
        order = sorted(avg, key=lambda k: (-float(avg[k]), k))
        return [cols["group"], nm["average"], nm["count"]], [[k, avg[k], str(ns[k])] for k in order]
    v = ix[cols["value"]]
    key_of = (lambda r: str(r[ix[cols["group"]]]).strip()) if chore == "group" else \
        (lambda r: str(r[ix[cols["date"]]]).strip()[:7])
    totals: dict[str, float] = defaultdict(float)
    counts = defaultdict(int)
    for r in rows:
        if _blank(r[v]):
            continue
        totals[key_of(r)] += float(r[v])
        counts[key_of(r)] += 1
    if chore == "group":
        order = sorted(totals, key=lambda k: (-round(totals[k], 2), k))
        first = cols["group"]
    else:
        order = sorted(totals)
        first = nm["month"]
    return [first, nm["total"], nm["count"]], [[k, f"{totals[k]:.2f}", str(counts[k])] for k in order]


# The reference script of a chore is a real file per part (ops/programs/): the frame every chore shares
# (write_automation_script.py: reading the input, writing the CSV, the command line) and the chore's `main`
# (write_automation_script_<chore>.py), which takes the place of the frame's stand-in.
_MAIN_STAND_IN = 'def main(*args):\n    sys.exit("the chore\'s main (write_automation_script_<chore>.py) goes here")\n'
_USAGE_FIELD = re.compile(r"\{(doc|script|usage_arg)\}")
CHORES = ("group", "month", "filter", "count", "average", "latest")


def reference_script(chore: str, script: str, doc: str, cols: dict[str, str], names: dict[str, str],
                     skip: list[str] | None = None) -> str:
    """The reference script of `chore` at `script`: the frame with `doc` and the usage in its docstring, and the
    chore's `main` with the columns it reads (`cols`: role -> column) and the output's column names (`names`);
    `skip` = [column, value]: its loop first passes over the rows whose column holds that value."""
    values = {"value": cols.get("value"), "group": cols.get("group"), "date": cols.get("date"), **names}
    name = f"write_automation_script_{chore}"
    main = programs.render(name, **{k: values[k] for k in programs.markers(name)})
    if skip:
        main = main.replace("    for row in rows:\n", f"    for row in rows:\n        if (row.get({skip[0]!r}) or \"\").strip() "
                            f"== {skip[1]!r}:\n            continue\n", 1)
    frame = programs.render("write_automation_script", argc=4 if chore == "filter" else 3)
    usage = {"doc": doc, "script": script, "usage_arg": " THRESHOLD" if chore == "filter" else ""}
    frame = _USAGE_FIELD.sub(lambda m: usage[m.group(1)], frame)  # one pass: nothing written in is read again
    if frame.count(_MAIN_STAND_IN) != 1:
        raise ValueError("programs/write_automation_script.py: the stand-in `main` is not there once")
    return frame.replace(_MAIN_STAND_IN, main)


def _records_table(records: list[dict]) -> tuple[list[str], list[list[str]]]:
    header: list[str] = []
    for r in records:
        for k in r:
            if k not in header:
                header.append(str(k))
    rows = [["" if r.get(h) is None else str(r.get(h)) for h in header] for r in records]
    return header, rows


def _pick_columns(header, rows, roles) -> dict[str, str]:
    """Which column plays group / value / date, from the roles where they fit the data, else by inspection."""
    cols: dict[str, str] = {}

    def numeric(i):
        vals = [r[i] for r in rows if i < len(r) and not _blank(r[i])]
        return bool(vals) and all(_num(v) is not None for v in vals) and len(set(vals)) > 1

    def groupish(i):
        vals = [str(r[i]).strip() for r in rows if i < len(r)]
        return all(vals) and 1 < len(set(vals)) < len(vals) and not all(_num(v) is not None for v in vals)

    def dateish(i):
        return all(i < len(r) and ISO.match(str(r[i]).strip()) for r in rows)

    ix = {h: i for i, h in enumerate(header)}
    for role, test in (("value", numeric), ("group", groupish), ("date", dateish)):
        name = roles.get(role)
        if name in ix and test(ix[name]):
            cols[role] = name
    if "value" not in cols:
        for h in reversed(header):
            if numeric(ix[h]) and not h.casefold().endswith(("id", "year", "zip", "port")):
                cols["value"] = h
                break
    if "group" not in cols:
        cands = [h for h in header if groupish(ix[h])]
        if cands:
            cols["group"] = min(cands, key=lambda h: len({str(r[ix[h]]).strip() for r in rows}))
    if "date" not in cols:
        d = next((h for h in header if dateish(ix[h]) and h != cols.get("group")), None)
        if d:
            cols["date"] = d
    return cols


INPUT_FORMATS = {"csv": "a CSV file with a header row", "tsv": "a tab-separated file with a header row",
                 "xlsx": "an .xlsx workbook whose first sheet has a header row",
                 "json": "a JSON file holding a list of objects", "yaml": "a YAML file holding a list of mappings"}


# other ways to say INPUT_FORMATS (the same formats)
INPUT_PHRASES = {
    "csv": [INPUT_FORMATS["csv"], "a CSV export whose first row names the columns", "comma-separated, column names in "
            "the first line", "a CSV with headers", "a .csv file, header row first"],
    "tsv": [INPUT_FORMATS["tsv"], "tab-separated, column names in the first line", "a TSV export with headers"],
    "xlsx": [INPUT_FORMATS["xlsx"], "an Excel .xlsx file; its first sheet starts with a header row",
             "a workbook (.xlsx), header row on the first sheet"],
    "json": [INPUT_FORMATS["json"], "a JSON array of records", "JSON: a list of objects, one per row"],
    "yaml": [INPUT_FORMATS["yaml"], "a YAML list of records", "YAML: a list of mappings, one per row"],
}


def _input_format(path: str) -> str | None:
    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    return {"csv": "csv", "tsv": "tsv", "xlsx": "xlsx", "json": "json", "yaml": "yaml", "yml": "yaml"}.get(ext)


def _variant_file(path: str, fmt: str, header: list[str], rows: list[list[str]], source: Artifact | None):
    """The second export, in the same format as the first (records keep their numbers as numbers)."""
    if fmt in ("csv", "tsv"):
        buf = io.StringIO()
        w = csv.writer(buf, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
        return WorkspaceFile(path=path, content=buf.getvalue())
    typed: dict[str, type] = {}
    if source is not None and source.kind == RECORDS:
        for rec in source.data:
            for h in header:
                v = rec.get(h)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    typed.setdefault(h, type(v))

    def cell(h: str, v: str):
        num = _num(v)
        if num is None or (fmt != "xlsx" and h not in typed):
            return v
        if (typed.get(h) is int or fmt == "xlsx") and num.is_integer() and "." not in v:
            return int(num)
        return num

    if fmt == "xlsx":
        grid = [list(header)] + [[cell(h, v) for h, v in zip(header, r, strict=False)] for r in rows]
        return WorkspaceFile(path=path, generate=GeneratedContent(kind="xlsx", params={"sheets": {"Sheet1": grid}}))
    recs = [{h: cell(h, v) for h, v in zip(header, r, strict=False)} for r in rows]
    if fmt == "json":
        return WorkspaceFile(path=path, content=json.dumps(recs, indent=2) + "\n")
    return WorkspaceFile(path=path, content=yaml.safe_dump(recs, sort_keys=False, allow_unicode=True))


@dataclass
class _Chore:
    """The data stage: the input, the chore, the second export, and what the script must output for each."""

    kind: str
    src: str
    fmt: str
    what: str  # how the request names the input
    header: list[str]
    rows: list[list]
    roles: dict[str, str]
    cols: dict[str, str]  # role -> column the chore uses
    chore: str  # one of CHORES
    var_rows: list[list]
    var_path: str
    arg: str | None  # the threshold of a filter
    arg2: str | None  # another threshold, for the check that the script uses it
    names: dict[str, str]  # the output's column names
    skip: list[str] | None  # [column, value] of the rows left out
    why: str
    out_header: list[str]
    out_rows: list[list[str]]
    var_header: list[str]
    var_out: list[list[str]]
    vslug: str


@operation
class WriteAutomationScript(OperationGenerator):
    id = "write_automation_script"
    consumes = (TABLE, RECORDS)
    produces = (TABLE,)
    standalone = True
    folder_scoped = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        files: list[WorkspaceFile] = []
        months = sorted(rng.sample(range(1, 13), 3))
        other_months = sorted(rng.sample([m for m in range(1, 13) if m not in months], 2))
        if source is not None and not (source.data if source.kind == RECORDS else source.data.get("rows")):
            source = None  # nothing to process in the previous step's output: bring our own export
        if source is not None and _input_format(source.path) is None:
            source = None  # a format the script cannot be asked to read (markdown, html...): our own export
        if source is None and rng.random() < 0.25:
            return self._rename_plan(ctx, voc)
        job = self._chore(ctx, source, voc, months, other_months, files)
        script, out, code, run = self._script(ctx, job)
        instruction = self._request(ctx, source, job, script, out)
        checks = self._checks(job, script, out)
        chore, roles, out_header, out_rows, src, fmt = job.chore, job.roles, job.out_header, job.out_rows, job.src, \
            job.fmt
        rows, var_rows = job.rows, job.var_rows
        out_roles = ({k: v for k, v in roles.items() if v in out_header} if chore == "filter" else
                     {"group": out_header[0], "date": out_header[1], "value": out_header[2]} if chore == "latest" else
                     {"group": out_header[0], "value": out_header[1]})
        if chore == "month":
            out_roles["date"] = out_header[0]
        digest = hashlib.sha256((code + repr(rows) + repr(var_rows)).encode()).hexdigest()[:16]
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=files,
            checks=checks,
            steps=([] if fmt == "xlsx" else [read(src)]) + [write(script, code), exec_(run)],
            partial=[write(script, code)],  # the script is right but was never run: no output file
            outputs=[Artifact(out, TABLE, {"header": out_header, "rows": out_rows},
                              expand("[the report the script produced|the script's output|the table the script wrote|what the script "
                                     "generated|the script's report] ({out})", rng, clause=True, out=out), roles=out_roles)],
            summary=f"write {script} and run it on {src}",
            fingerprint=digest,
        )


    # ------------------------------------------------------------------------------------------ data
    def _chore(self, ctx: OpContext, source: Artifact | None, voc: dict, months: list[int],  # noqa: PLR0915 (one linear recipe: its rng draws, in order, fix the tasks a seed gives)
               other_months: list[int], files: list[WorkspaceFile]) -> _Chore:
        """The input (the previous step's table or our own export, added to `files`), the chore done on it, a
        second export of the same kind for the script to prove itself on (added to `files`), the threshold, the
        output's column names, an exception, and what the script must output for both inputs."""
        rng = ctx.rng
        if source is None:
            dk = flavor.persona_domain(ctx.persona)
            kind, header, rows, roles = _own_table(rng, voc, months, dk)
            data_dir = world.folder(ctx.persona, rng, DATA_FOLDERS, p_world=0.4)
            stem = _period_stem(rng, kind, months)
            src = ctx.path(f"{data_dir}/{stem}.csv")
            files.append(WorkspaceFile(path=src, content=to_csv(header, rows)))
            fmt = "csv"
            what = expand("[the {k} export|the {k} file|this period's {k}|the current {k} sheet] `{src}`", rng,
                          k=kind.replace("_", " "), src=src)
            what = what[:1].lower() + what[1:]
        else:
            if source.kind == RECORDS:
                header, rows = _records_table(list(source.data))
            else:
                header, rows = list(source.data["header"]), [list(map(str, r)) for r in source.data["rows"]]
            roles = dict(source.roles)
            src = source.path
            fmt = _input_format(src)
            kind = "export"
            what = source.description if src in source.description else f"{source.description} (`{src}`)"
        rows = [list(r[: len(header)]) + [""] * (len(header) - len(r)) for r in rows]  # ragged rows: pad
        cols = _pick_columns(header, rows, roles)
        chores = []
        if "group" in cols and "value" in cols:
            chores += ["group", "group", "average"]
            if "date" in cols and fmt in ("csv", "tsv"):
                chores.append("latest")
        if "date" in cols and "value" in cols and len({str(r[header.index(cols['date'])])[:7] for r in rows}) > 1:
            chores.append("month")
        if "value" in cols:
            chores.append("filter")
        if "group" in cols and "value" not in cols:
            chores.append("count")
        if not chores:  # nothing numeric and nothing repeated: count rows per value of the first column
            cols["group"] = header[0]
            chores.append("count")
        chore = rng.choice(chores)
        var_rows = _variant_rows(rng, header, rows, cols, other_months)
        folder, _, name = src.rpartition("/")
        if source is None:
            name = _period_stem(rng, kind, other_months)
        else:
            name = re.sub(r"\.[A-Za-z]+$", "", name) + "_sample"
        var_path = ctx.path(f"{folder}/{name}.{fmt}" if folder else f"{name}.{fmt}")

        arg = arg2 = None
        if chore == "filter":
            vi = header.index(cols["value"])
            vals = sorted({float(r[vi]) for r in rows if not _blank(r[vi])})

            def fmt_num(x: float) -> str:
                return f"{x:.0f}" if x >= 10 or all(v.is_integer() for v in vals) else f"{x:.1f}"

            arg = fmt_num(vals[len(vals) // 2])
            arg2 = fmt_num(vals[len(vals) // 4])
            if arg2 == arg:
                arg2 = fmt_num(vals[0]) if fmt_num(vals[0]) != arg else f"{float(arg) / 2:g}"
        vslug = flavor.slug(cols.get("value", "value")) or "value"
        names = {"total": rng.choice(["total", "total", "sum", f"sum_{vslug}", f"{vslug}_total"]),
                 "count": rng.choice(["count", "count", "rows", "n", "entries"]),
                 "month": rng.choice(["month", "month", "period", "yyyy_mm"]),
                 "average": rng.choice(["average", "avg", f"avg_{vslug}", "mean", f"mean_{vslug}"])}
        if set(names.values()) & set(header) or len(set(names.values())) < 4:
            names = dict(OUT_NAMES)
        # a persona-grounded exception: the rows of one payee / nurse / customer... are left out
        skip = None
        ncol = roles.get("name")
        if ncol in header and ncol not in cols.values() and rng.random() < 0.4:
            ni = header.index(ncol)
            present = sorted({str(r[ni]).strip() for r in rows if str(r[ni]).strip()})
            in_var = [x for x in present if any(str(r[ni]).strip() == x for r in var_rows)]
            if len(present) > 2 and in_var:
                skip = [ncol, rng.choice(in_var)]
        why = rng.choice(["that account is closed", "those are test entries", "they are handled separately",
                          "they were entered by mistake", "that one is billed elsewhere",
                          "they are already in last year's figures", "I track those on paper"])
        for attempt in (skip, None):
            skip = attempt
            out_header, out_rows = run_chore(chore, header, rows, cols, arg, names, skip)
            var_header, var_out = run_chore(chore, header, var_rows, cols, arg, names, skip)
            if not var_out and "value" in cols:  # the sample must give the script something to do
                vi = header.index(cols["value"])
                top = max(rows, key=lambda r: _num(r[vi]) if _num(r[vi]) is not None else float("-inf"))
                keep_i = [i for i, r in enumerate(var_rows)
                          if not skip or str(r[header.index(skip[0])]).strip() != skip[1]]
                if keep_i:
                    var_rows[keep_i[0]][vi] = top[vi]
                var_header, var_out = run_chore(chore, header, var_rows, cols, arg, names, skip)
            if out_rows and var_out:
                break
        files.append(_variant_file(var_path, fmt, header, var_rows, source))
        return _Chore(kind, src, fmt, what, header, rows, roles, cols, chore, var_rows, var_path, arg, arg2, names,
                      skip, why, out_header, out_rows, var_header, var_out, vslug)

    # ------------------------------------------------------------------------------------------ solution
    def _script(self, ctx: OpContext, job: _Chore) -> tuple[str, str, str, str]:
        """The script's path and its output's, the reference script (:func:`reference_script`: the frame and the
        chore's `main`, files in ops/programs/) and the command that runs it on the input."""
        rng = ctx.rng
        chore, cols, names, skip, src, arg, vslug = job.chore, job.cols, job.names, job.skip, job.src, job.arg, job.vslug
        gslug = flavor.slug(cols.get("group", "group")) or "group"
        verb = rng.choice({
            "group": [f"totals_by_{gslug}", f"sum_per_{gslug}", f"{gslug}_totals", f"rollup_{gslug}",
                      f"{vslug}_by_{gslug}"],
            "month": ["monthly_totals", "per_month", "month_summary", f"{vslug}_per_month", "monthly_rollup"],
            "filter": [f"filter_{vslug}", f"big_{vslug}", f"{vslug}_over", f"min_{vslug}", f"select_{vslug}"],
            "average": [f"average_{vslug}_by_{gslug}", f"mean_per_{gslug}", f"{gslug}_averages", f"avg_{vslug}"],
            "latest": [f"latest_per_{gslug}", f"last_{vslug}_by_{gslug}", f"{gslug}_latest", "most_recent"],
            "count": [f"count_by_{gslug}", f"{gslug}_counts", f"tally_{gslug}", f"how_many_per_{gslug}"],
        }[chore])
        script_dir = world.folder(ctx.persona, rng, SCRIPT_FOLDERS, p_world=0.2)
        script = ctx.path(f"{script_dir}/{verb}.py")
        out = ctx.path(f"{world.folder(ctx.persona, rng, OUT_FOLDERS, p_world=0.3)}/{verb}.csv")

        v, g, d = cols.get("value"), cols.get("group"), cols.get("date")
        doc = {
            "group": f"Total {v} per {g} (rows with an empty {v} are skipped).",
            "month": f"Total {v} per month (YYYY-MM of {d}); empty values are skipped.",
            "filter": f"Keep the rows whose {v} is at least THRESHOLD.",
            "count": f"Count the rows per {g}.",
            "average": f"Average {v} per {g} (rows with an empty {v} are skipped).",
            "latest": f"The latest {v} per {g} (by {d}).",
        }[chore]
        if skip:
            doc += f" Rows whose {skip[0]} is {skip[1]!r} are left out."
        code = reference_script(chore, script, doc, cols, names, skip)
        run = " ".join(shlex.quote(a) for a in ["python3", script, src, out] + ([arg] if arg else []))

        return script, out, code, run

    # ------------------------------------------------------------------------------------------ phrasing
    def _request(self, ctx: OpContext, source: Artifact | None, job: _Chore, script: str, out: str) -> str:
        """The request: what the script does and how it is called, that it must be generic, the first run, facts
        about the input, the exception."""
        rng = ctx.rng
        fmt, chore, cols, names, var_path, what, arg, kind = (job.fmt, job.chore, job.cols, job.names, job.var_path,
                                                              job.what, job.arg, job.kind)
        header, rows, src, skip, why = job.header, job.rows, job.src, job.skip, job.why
        usage_arg = " THRESHOLD" if chore == "filter" else ""
        v, g, d = cols.get("value"), cols.get("group"), cols.get("date")
        inp = rng.choice(INPUT_PHRASES[fmt])
        sl = dict(v=v, g=g, d=d, total=names["total"], count=names["count"], month=names["month"],
                  average=names["average"])
        spec = _spec(rng, chore, sl)
        usage = f"`python3 {script} INPUT OUTPUT{usage_arg}`"
        slots = dict(script=script, usage=usage, inp=inp, spec=spec, var=var_path, what=what, out=out, arg=arg or "",
                     often=rng.choice(["every month", "every week", "each quarter", "after every payday",
                                       "every Monday", "at each month-end", "twice a month"]),
                     who=flavor.person(rng).split()[0],
                     minutes=rng.choice([20, 30, 40, 45, 60, 90]), tool=_sheet_tool(ctx.persona, rng),
                     kind=kind.replace("_", " ") if source is None else "data")
        run_clause = one_of(rng, [
            "Then run it once on {what} so the result lands in `{out}`" + (" (threshold {arg})." if arg else "."),
            "Run it on {what} and save the output as `{out}`" + (", using {arg} as the threshold." if arg else "."),
            "Test it on {what}, writing `{out}`" + (" with THRESHOLD {arg}." if arg else "."),
            "[For now|Today], [run it on|use it on|point it at] {what}[ and write|, output to|; the result goes to] "
            "`{out}`" + (" (THRESHOLD = {arg})." if arg else "."),
            "[First real run|Its first job|The first run]: {what} -> `{out}`" + (", threshold {arg}." if arg else "."),
            "[Please also run it|And do run it] [once|right away] on {what}; [I want|I need|I'd like] the [output|"
            "result] [in|at] `{out}`" + (" (use {arg} as THRESHOLD)." if arg else "."),
            "[Show me it works|Prove it works] [by running it on|on] {what}[ - the output belongs in| and saving the "
            "result to] `{out}`" + (" with a threshold of {arg}." if arg else "."),
        ], **slots)
        reuse = one_of(rng, [
            "It must work on any export in this format (another one is `{var}`), not just this one.",
            "Don't hard-code anything about this data - the next file will differ, see `{var}`.",
            "I'll also use it on files like `{var}`[, so nothing may be hard-coded|].",
            "[It has to be reusable|It must be generic]: `{var}` is another export it has to handle.",
            "[Each time|Every time|Whenever] there's a new {kind} [file|export], [like|for example] `{var}`, so [keep it "
            "generic|no hard-coded values|nothing specific to this file].",
            "`{var}` [is last period's|is an older] {kind} [export|file][ - same layout, different rows|]; the "
            "script [must|should] [cope with|handle] [it|that one] too.",
            "[Assume|Expect] [the rows|the data|row counts and values] [to change|will change] [every time|from file "
            "to file][ (`{var}` is another example)|: `{var}` is a second sample].",
        ], **slots)
        opening = one_of(rng, [
            "I redo this by hand {often}, so please automate it. Write a Python script `{script}`, run as {usage}, "
            "that [reads|takes|loads|goes through|works on] INPUT ({inp}) and {spec}.",
            "Can you write me a reusable script for a recurring chore? `{script}` (usage: {usage}): it [reads|takes|loads|goes through|works on] INPUT "
            "({inp}) and {spec}.",
            "Please create `{script}`: {usage}. Given INPUT ({inp}), it {spec}.",
            "[This takes me|I lose] about {minutes} minutes {often}[ in a spreadsheet|]. [I'd like|I need] a "
            "python3 script, `{script}`, [called as|used like] {usage}: it [reads|takes|loads|goes through|works on] INPUT ({inp}) and {spec}.",
            "{who} [used to do|did] this by hand {often}; let's script it. `{script}`, [usage|invoked as] {usage}, "
            "[reads|takes|loads|goes through|works on] INPUT ({inp}) and {spec}.",
            "[Right now|At the moment] I [copy|paste] the {kind} [export|data] into {tool} {often} and [fiddle|"
            "fight] with it. [Instead|Better]: `{script}` ({usage}), which [reads|takes|loads|goes through|works on] INPUT ({inp}) and {spec}.",
            "[Script request|A small automation]: `{script}`. [Usage|Call it as]: {usage}. [Input|INPUT] is {inp}; "
            "the script {spec}.",
            "[Could you|Can you] [automate|take over] [my|the] {kind} [chore|routine][ (I do it {often})|]? [I'm "
            "after|I need] `{script}` ({usage}) that [reads|takes|loads|goes through|works on] INPUT ({inp}) and {spec}.",
            "[{tool} can't|I can't get {tool} to] do this [cleanly|reliably|without hand edits], so [let's have|"
            "I'd like] a python3 script: `{script}`, run as {usage}. It [reads|takes|loads|goes through|works on] INPUT ({inp}) and {spec}.",
            "[The|My] {kind} [numbers|figures] [need|want] [crunching|rolling up] {often}. [Write|Please write] "
            "`{script}` ({usage}): it [should read|reads|should take|takes] INPUT ({inp}) and {spec}.",
        ], **slots)
        parts = [opening, reuse, run_clause]
        if rng.random() < 0.5:
            parts = [opening, run_clause, reuse]
        if rng.random() < 0.6:
            di = header.index(d) if d in header else None
            dates = sorted(str(r[di])[:10] for r in rows if di is not None and ISO.match(str(r[di])))
            facts = dict(n=len(rows), d0=dates[0] if dates else "", d1=dates[-1] if dates else "",
                         cols=", ".join(f"`{h}`" for h in header), src=src)
            parts.insert(rng.randint(1, len(parts)), one_of(rng, [
                "[The current export|`{src}`|This file] has {n} rows" + (
                    "[ from {d0} to {d1}| ({d0} - {d1})|]" if dates else "") + "[ and the columns {cols}|].",
                "[Its|The] columns are {cols}[; {n} rows this time|, {n} rows in all|].",
                "[For reference|FYI], {n} rows[ this time| at the moment|]" + (
                    "[, dated {d0} to {d1}|]" if dates else "") + ".",
            ], **facts))
        if skip:
            parts.insert(1, one_of(rng, [
                "[Leave out|Skip|Ignore] [the rows|every row|all rows] where `{col}` is {val}[ - {why}| ({why})|].",
                "[One exception|Important|Note]: [rows with|all rows with] `{col}` = {val} [must not count|should be "
                "skipped|are not included][, {why}|].",
                "[The script must|It should] [drop|skip|ignore] rows whose `{col}` is {val}[; {why}|].",
            ], col=skip[0], val=skip[1], why=why))
        instruction = ("\n" if rng.random() < 0.3 else " ").join(parts)
        return instruction

    # ------------------------------------------------------------------------------------------ checks
    @staticmethod
    def _checks(job: _Chore, script: str, out: str) -> list[Check]:
        """The output of the first run (content, then order), the script run on the second export, and for a
        filter the script run with another threshold."""
        out_header, out_rows, var_path, arg, arg2 = job.out_header, job.out_rows, job.var_path, job.arg, job.arg2
        var_header, var_out, chore, header, rows, cols, names, skip, src = (
            job.var_header, job.var_out, job.chore, job.header, job.rows, job.cols, job.names, job.skip, job.src)
        base_argv = ["python3", script]
        checks = [
            Check("output_correct", "sys_table_rows", {"path": out, "header": out_header, "rows": out_rows}),
            Check("output_order", "sys_table_rows", {"path": out, "header": out_header, "rows": out_rows,
                                                     "ordered": True}),
            Check("script_on_new_data", "sys_script_table", {
                "argv": base_argv + [var_path, "{out}"] + ([arg] if arg else []), "header": var_header,
                "rows": var_out, "ordered": True}),
        ]
        if chore == "filter":
            h2, rows2 = run_chore(chore, header, rows, cols, arg2, names, skip)
            checks.append(Check("script_uses_threshold", "sys_script_table", {
                "argv": base_argv + [src, "{out}", arg2], "header": h2, "rows": rows2, "ordered": True}))
        return checks

    # ------------------------------------------------------------------------------ shell chore: tidy names

    def _rename_plan(self, ctx: OpContext, voc) -> StepPlan:
        rng = ctx.rng
        base = world.folder(ctx.persona, rng, ["inbox/scans", "downloads", "incoming", "phone_dump", "scans",
                                                "camera_roll", "desktop_dump", "to_sort"], p_world=0.3)
        folder = ctx.path(base if rng.random() < 0.7 else f"{base}/{rng.choice(['new', 'batch1', '2026', 'unsorted'])}")
        other = ctx.path(f"{folder.rsplit('/', 1)[0] + '/' if '/' in folder else ''}"
                         f"{rng.choice(['next_batch', 'more_scans', 'old_laptop', 'from_phone', 'batch2'])}")
        script_dir = world.folder(ctx.persona, rng, SCRIPT_FOLDERS, p_world=0.2)
        if script_dir in (folder, other):  # the script must not sit among the files it renames (it would rename
            script_dir = next(d for d in SCRIPT_FOLDERS if d not in (folder, other))  # itself)
        script = ctx.path(f"{script_dir}/"
                          f"{rng.choice(['tidy_names', 'clean_names', 'fix_filenames', 'normalise_names'])}.sh")
        manifest = ctx.path(rng.choice(["reports/renames.csv", "rename_log.csv", "logs/renamed_files.csv",
                                        "logs/renames.csv", "manifests/renamed.csv", "renamed.csv"]))
        cols = rng.choice([["old", "new"], ["old", "new"], ["before", "after"], ["old_name", "new_name"],
                           ["from", "to"]])
        sep = rng.choice(["_", "_", "-"])
        first = make_messy_names(rng, voc, rng.randint(6, 10), sep)
        second = make_messy_names(rng, voc, rng.randint(4, 7), sep)
        files = [WorkspaceFile(path=f"{folder}/{n}", content=f"{n} - scanned copy\n") for n in first]
        files += [WorkspaceFile(path=f"{other}/{n}", content=f"{n}\n") for n in second]
        rows = [[n, tidy_name(n, sep)] for n in first if tidy_name(n, sep) != n]
        var_rows = [[n, tidy_name(n, sep)] for n in second if tidy_name(n, sep) != n]
        kept = [f"{folder}/{n}" for n in first if tidy_name(n, sep) == n]
        ex = rng.choice(rows) if rows else ["Invoice March.PDF", tidy_name("Invoice March.PDF", sep)]
        usage = f"`sh {script} DIR MANIFEST`"
        hdr = ",".join(cols)
        shown = rng.sample(first, k=min(2, len(first)))
        slots = dict(folder=folder, script=script, usage=usage, sep=sep, manifest=manifest, other=other, hdr=hdr,
                     a=ex[0], b=ex[1], n=len(first), f1=shown[0], f2=shown[-1], tool=rng.choice(ctx.persona.tools),
                     who=flavor.person(rng).split()[0],
                     device=rng.choice(["my phone", "the office scanner", "the shared drive", "email attachments",
                                        "my old laptop", "WhatsApp", "the camera", "a USB stick"]))
        opening = one_of(rng, [
            "My `{folder}/` folder is full of badly named files[ ({n} of them)|].",
            "[The files in `{folder}/` have|Everything in `{folder}/` has|Half the files in `{folder}/` have] "
            "[awful|messy|inconsistent] names[ - `{f1}`, `{f2}` and so on|].",
            "[I keep dumping|My phone and scanner dump] files into `{folder}/`[, {n} so far|] and the names are "
            "[a mess|all over the place][ (think `{f1}`)|].",
            "[Please automate my file-name clean-up.|File names again...|Time to fix the names in `{folder}/`.]",
            "Whatever comes off {device} lands in `{folder}/` with names like `{f1}`[ - spaces, capitals, brackets|"
            ", which {tool} then chokes on|].",
            "[{who} keeps|People keep|I keep] [saving|dropping] files into `{folder}/` [straight from|from] "
            "{device}[, and|;] [nothing is named consistently|no two names follow the same pattern].",
            "[Searching|Finding anything in] `{folder}/` is [hopeless|painful|a lottery] because of names like "
            "`{f2}`[ ({n} files so far)|].",
            "[I rename|I've been renaming] files in `{folder}/` by hand [for ages|every week|whenever {who} "
            "complains][ and I'm done with it|; never again|].",
            "[Our|My] `{folder}/` [folder|dump] [is|has become] a [zoo|jumble|graveyard] of names[ like `{f1}` and "
            "`{f2}`|].",
        ], **slots)
        script_s = one_of(rng, [
            "Write a POSIX shell script `{script}` ({usage}) that renames every file directly in DIR.",
            "[I'd like|I need|Please write] `{script}`, a POSIX sh script [used as|run as|called like] {usage}, "
            "[that renames|to rename] each file directly in DIR (subfolders are left alone).",
            "[Automate it|Script it] with a shell script at `{script}`, run as {usage}, that renames the files "
            "directly in DIR[, not in subfolders| (no recursion)|].",
            "[What I want|The fix] is `{script}` (POSIX sh, {usage}): it [gives|renames] every file [sitting "
            "directly|at the top level] in DIR [a tidy name|to a clean name][; subfolders are not touched|].",
            "[Make|Write me] a [small|plain] sh script, `{script}` - {usage} - [that tidies|to tidy] the names of "
            "the files directly inside DIR[ (leave subfolders alone)|].",
        ], **slots)
        items = [
            expand("[lower-case the whole name|everything in lower case|make the name lower case]", rng),
            expand("[[each|every] run of characters other than a-z, 0-9 and `.`|anything that is not a-z, 0-9 or "
                   "`.` (one or more in a row)|every stretch of characters outside a-z, 0-9 and `.`] [becomes|is "
                   "replaced by|turns into] [one|a single] `{sep}`", rng, sep=sep),
            expand("[no|drop any] `{sep}` at the start, at the end or next to a `.`", rng, sep=sep),
            expand("[names that are already tidy stay as they are|leave tidy names alone|a file whose name is "
                   "already tidy is not touched]", rng),
            expand("MANIFEST [is|gets] a CSV with the header `{hdr}` and one row per renamed file", rng, hdr=hdr),
        ]
        tail_items = items[3:]
        rng.shuffle(tail_items)
        style = rng.choice(["sentence", "bullets", "numbered", "block"])
        rules = requirements(rng, items[:3] + tail_items, fixed_order=True, style=style,
                             lead="" if style == "block" else
                             expand("[The rules:|Naming rules:|How to rename:|For each file:|A tidy name means:|"
                                    "How a name gets cleaned:|What tidy means here:]", rng))
        example = one_of(rng, ["[For example|E.g.|So], `{a}` [->|becomes|turns into|should end up as] `{b}`.",
                               "`{a}` [would become|should come out as] `{b}`[, to give you the idea|, for instance|].",
                               "[One real case|A real one from the folder]: `{a}` -> `{b}`."], a=ex[0], b=ex[1])
        run_s = one_of(rng, [
            "Run it on `{folder}` with the manifest `{manifest}`.",
            "[Then run it|Run it once] on `{folder}/`[, manifest|, writing the manifest to| with MANIFEST =] "
            "`{manifest}`.",
            "[Use it on|Point it at] `{folder}` (manifest: `{manifest}`).",
            "[Do the first pass|Try it out] on `{folder}` [and keep the manifest as|; the list of renames goes in] "
            "`{manifest}`.",
            "`{folder}` is the first [victim|folder to clean]: [run the script on it|run it there] with `{manifest}` "
            "as MANIFEST.",
        ], **slots)
        reuse_s = one_of(rng, [
            "I'll reuse it on other folders such as `{other}/`.",
            "It has to work on other folders too, like `{other}/`.",
            "`{other}/` is next[, so nothing folder-specific, please|].",
            "[Later|After that] {who} [wants|will want] to run it on `{other}/`[ too|], so [keep it general|no "
            "folder names inside the script].",
            "[The same mess|More of the same] [lives|sits] in `{other}/` (from {device}); the script [has to|must] "
            "work there as well.",
        ], **slots)
        tail = [run_s, reuse_s] if rng.random() < 0.6 else [reuse_s, run_s]
        joiner = "\n" if rng.random() < 0.3 else " "
        instruction = joiner.join([opening, script_s]) + "\n" + rules + "\n" + joiner.join([example] + tail)
        moves = {f"{folder}/{o}": [f"{folder}/{n}", f"{o} - scanned copy\n"] for o, n in rows}
        tidy = tidy_script(sep, hdr)
        checks = [
            Check("files_renamed", "files_moved", {"moves": moves}),
            Check("manifest_correct", "sys_table_rows", {"path": manifest, "header": cols, "rows": rows}),
            Check("script_on_new_folder", "sys_script_table", {
                "argv": ["sh", script, "{stage}", "{out}"], "stage": other, "header": cols,
                "rows": var_rows}),
        ]
        if kept:
            checks.append(Check("tidy_names_kept", "min_of", parts=[
                Check("k", "paths_exist", {"paths": kept}), Check("m", "files_moved", {"moves": moves})]))
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=files,
            checks=checks,
            steps=[ls(folder), write(script, tidy), exec_(f"sh {script} {folder} {manifest}")],
            partial=[write(script, tidy)],  # written, never run
            outputs=[Artifact(manifest, TABLE, {"header": cols, "rows": rows},
                              f"the rename manifest ({manifest})", roles={"name": cols[1]})],
            summary=f"write {script} and tidy {folder}",
            fingerprint=hashlib.sha256(repr((first, second)).encode()).hexdigest()[:16],
        )


# the reference rename script, for the separator "_" and the manifest header "old,new"
TIDY_SCRIPT = "write_automation_script_tidy.sh"


def tidy_name(name: str, sep: str = "_") -> str:
    s = re.sub(r"[^a-z0-9.]+", sep, name.lower())
    s = re.sub(rf"{re.escape(sep)}*\.{re.escape(sep)}*", ".", s)
    return s.strip(sep)


@functools.cache
def _tidy_source() -> str:
    return (programs.HERE / TIDY_SCRIPT).read_text(encoding="utf-8")


def tidy_script(sep: str, header: str) -> str:
    """The reference rename script (programs/write_automation_script_tidy.sh) with `sep` between words and
    `header` as the manifest's first line."""
    text = _tidy_source()
    edits = [('echo "old,new"', f'echo "{header}"'), ("(CSV: old,new)", f"(CSV: {header})")]
    if sep != "_":
        words = "-e 's/[^a-z0-9.]\\{1,\\}/_/g' -e 's/_*\\._*/./g' -e 's/^_//' -e 's/_$//'"
        edits += [(words, words.replace("_", sep)),
                  ('runs of other characters -> "_"', f'runs of other characters -> "{sep}"')]
    for a, b in edits:
        if a not in text:
            raise ValueError(f"programs/{TIDY_SCRIPT} has no {a!r} to make {b!r} of")
        text = text.replace(a, b)
    return text


def make_messy_names(rng, voc, n: int, sep: str = "_") -> list[str]:
    items = voc["items"] + voc["projects"]
    months = ["Jan", "Feb", "March", "April", "May", "June", "July", "Aug", "Sept", "Oct", "Nov", "Dec"]
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        d = flavor.date_in(rng, 2026)
        name = rng.choice([
            f"IMG {d.isoformat()} ({rng.randint(1, 9)}).JPG",
            f"Scan {d.strftime('%d.%m.%Y')}.PDF",
            f"Invoice {rng.choice(months)} {rng.choice(flavor.ORG_WORDS)}.pdf",
            f"{rng.choice(items).title()} - notes ({rng.randint(1, 4)}).TXT",
            f"{rng.choice(flavor.FIRST)} CV final FINAL.docx",
            f"{flavor.slug(rng.choice(items))}_{d.year}.csv",
            f"  {rng.choice(items)} list.txt",
            f"WhatsApp Image {d.isoformat()} at 10.{rng.randint(10, 59)}.jpeg",
        ])
        tidy = tidy_name(name, sep)
        if tidy in seen or name in seen or not tidy or tidy.startswith("."):
            continue
        seen.update({tidy, name})
        out.append(name)
    return out


GENERATORS = [WriteAutomationScript()]
