"""Bytes per task of task files (issue 19: checks as data instead of a grade() source embedding the library).

    python benchmarks/checks_size.py LABEL=TASKS.jsonl [LABEL=TASKS.jsonl ...] [--note LABEL=TEXT ...] -o OUT.json

For each file: the number of tasks, the mean / median / max length of a JSON line (bytes, without the newline),
and the mean length of the `verifier.code` object alone (a python grade() source, or the checks as data with their
checklib reference), serialized as in the file.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def measure(path: Path) -> dict:
    lines = [line.rstrip(b"\n") for line in path.read_bytes().splitlines(keepends=True) if line.strip()]
    sizes = [len(line) for line in lines]
    code = []
    kinds: dict[str, int] = {}
    for line in lines:
        c = json.loads(line)["verifier"].get("code")
        if c is not None:
            code.append(len(json.dumps(c, ensure_ascii=False, separators=(",", ":")).encode("utf-8")))
            kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    return {"tasks": len(sizes), "mean_bytes": round(statistics.mean(sizes), 1),
            "median_bytes": statistics.median(sizes), "max_bytes": max(sizes),
            "mean_code_check_bytes": round(statistics.mean(code), 1) if code else None, "code_kinds": kinds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="LABEL=TASKS.jsonl")
    ap.add_argument("--note", action="append", default=[], help="LABEL=how the file was made")
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()
    notes = dict(n.split("=", 1) for n in args.note)
    out = {}
    for spec in args.files:
        label, _, path = spec.partition("=")
        out[label] = {**measure(Path(path)), **({"made_by": notes[label]} if label in notes else {})}
    text = json.dumps(out, indent=2)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
