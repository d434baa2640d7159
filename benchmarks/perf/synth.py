"""Persona-driven synthesis speed: tasks generated AND validated in sandboxes per second.

Prints one JSON object: tasks written, wall time, tasks/s, rejections by reason, coverage (categories,
subcategories, operations present), and the time a 13,500-task run would take at this rate (or the measured
time, with --n 13500). Run: python benchmarks/perf/synth.py [--n 400] [--jobs 2] [--seed 0] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.quick or os.environ.get("CLAWGYM_BENCH_QUICK") == "1":
        args.n = min(args.n, 60)

    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task
    from clawgym.synth.pipeline import synthesize
    from clawgym.synth.taxonomy import load_taxonomy

    tax = load_taxonomy()
    with tempfile.TemporaryDirectory(prefix="clawgym-bench-synth-") as td:
        out = Path(td) / "tasks.jsonl"
        t0 = time.perf_counter()
        report = synthesize(args.n, args.seed, out, jobs=args.jobs,
                            on_progress=lambda d, n: print(f"\r{d}/{n}", end="", file=sys.stderr))
        wall = time.perf_counter() - t0
        print(file=sys.stderr)
        tasks = read_records(out, Task)
        size = out.stat().st_size
    rate = len(tasks) / wall
    ops = {op for t in tasks for op in t.operations}
    subs = {t.metadata.get("subcategory_id") for t in tasks}
    result = {
        "tasks": len(tasks), "jobs": args.jobs, "wall_s": round(wall, 2), "tasks_per_s": round(rate, 2),
        "validated": "every written task: reference 1.0, no-op 0 on every check, partial strictly between",
        "rejected": dict(report.rejected),
        "coverage": {"categories": len({t.category for t in tasks}), "subcategories": len(subs),
                     "operations": len(ops), "taxonomy_subcategories": len(tax.subcategories),
                     "taxonomy_operations": len(tax.operations)},
        "distinct_instructions": len({t.instruction for t in tasks}),
        "reference_steps": report.as_dict()["reference_steps"],
        "bytes_per_task": round(size / max(1, len(tasks))),
        "projected_13500_s": round(13500 / rate, 1),
        "target_13500_s": 600,
        "environment": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "load_average": os.getloadavg()},
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
