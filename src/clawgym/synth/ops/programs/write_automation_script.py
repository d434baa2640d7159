"""write_automation_script's reference script, the part every chore shares: `load` reads INPUT (a table with
a header row: .csv, .tsv, .xlsx; or a list of records: .json, .yaml) into its header and rows as text, `save`
writes OUTPUT as a CSV, and the command line calls `main` with the arguments when there are `'{argc}'` words.

The chore's own `main` (write_automation_script_<chore>.py) takes the place of the stand-in `main` below. The
script's docstring is its usage message: what it does (`{doc}`), its path (`{script}`) and its extra argument
(`{usage_arg}`: " THRESHOLD" for a filter), written in as text by the operation (a docstring holds no marker)."""
# ruff: noqa: F401 (defaultdict is for the chore's main)
# ruff: noqa: E402 (the script's own docstring, its usage message, comes before its imports)
# ruff: noqa: B905 (the script as the tasks ship it, byte for byte)

#!/usr/bin/env python3
"""{doc}

Usage: python3 {script} INPUT OUTPUT.csv{usage_arg}
INPUT is a table with a header row (.csv, .tsv or .xlsx) or a list of records (.json or .yaml).
"""
import csv
import datetime
import json
import os
import sys
from collections import defaultdict


def cell(value):
    if value is None:
        return ""
    if isinstance(value, datetime.datetime):
        return value.date().isoformat() if value.time() == datetime.time() else value.isoformat(sep=" ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


def load(path):
    low = path.lower()
    if low.endswith((".json", ".yaml", ".yml")):
        with open(path, encoding="utf-8") as fh:
            if low.endswith(".json"):
                data = json.load(fh)
            else:
                import yaml

                data = yaml.safe_load(fh)
        header = []
        for rec in data:
            header += [k for k in rec if k not in header]
        return header, [{k: cell(rec.get(k)) for k in header} for rec in data]
    if low.endswith(".xlsx"):
        import openpyxl

        sheet = openpyxl.load_workbook(path, read_only=True, data_only=True).worksheets[0]
        grid = [[cell(v) for v in row] for row in sheet.iter_rows(values_only=True)]
        grid = [r for r in grid if any(x.strip() for x in r)]
        header = grid[0] if grid else []
        return header, [dict(zip(header, r)) for r in grid[1:]]
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh, delimiter="\t" if low.endswith(".tsv") else ",")
        return list(reader.fieldnames or []), list(reader)


def save(path, header, rows):
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


def main(*args):
    sys.exit("the chore's main (write_automation_script_<chore>.py) goes here")


if __name__ == "__main__":
    if len(sys.argv) != '{argc}':
        sys.exit(__doc__)
    main(*sys.argv[1:])
