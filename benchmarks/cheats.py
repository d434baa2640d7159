"""Trivial cheats against task files: how much reward a lazy policy collects without doing the work.

The three cheats of `clawgym.synth.cheats`, replayed and graded exactly as synthesis validation does it (the
same sandboxes, the same one-python-process grading): `empty` (every output file written empty), `copy-input`
(the first input file copied to every output path), `echo-request` (the request's text written into every
output path). A task's outputs are the files its reference solution leaves new or changed. Scores are the
code checks' (a hybrid task's rubric is not judged here: the cheat's code score is what it collects without a
judge, and an upper bound of its share with one).

Prints one JSON object: per file, the oracle's mean (must be 1), and per cheat the mean, the max and how many
tasks it scores >= 0.3 on, per operation, and the best-paid tasks with the checks that paid.

Run: python benchmarks/cheats.py [--tasks LABEL=FILE ...] [--bench] [-j 2] [--out FILE]
     (--bench: benchmarks/synth-bench-200/tasks.jsonl, our own suite, labelled synth-bench-200; the JSON behind
     the figures in docs/synthesis.md is benchmarks/results/cheats.json, recorded when the suite was called
     clawgym-bench, hence its labels)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BENCH = HERE / "synth-bench-200" / "tasks.jsonl"
_W: dict = {}


def _init(sandbox: str) -> None:
    from clawgym.sandbox import get_backend

    if "CLAWGYM_SANDBOX_TMP" not in os.environ and os.access("/dev/shm", os.W_OK):
        os.environ["CLAWGYM_SANDBOX_TMP"] = "/dev/shm"
    _W["backend"] = get_backend(sandbox)


def _grade(lines: list[str]) -> list[dict]:
    """Oracle and cheat verdicts of the tasks (JSON lines), graded as validation grades them."""
    from clawgym.core.records import Task
    from clawgym.synth.compose import Candidate
    from clawgym.synth.ops.base import StepPlan
    from clawgym.synth.validate import start_grader, start_replay_sandbox, validate_batch

    backend = _W["backend"]
    tasks = [Task.model_validate_json(x) for x in lines]
    # validation's machinery wants a candidate: one with an empty partial solution (its verdict is not used)
    cands = [Candidate(task=t, plans=[StepPlan(operation="", instruction="", checks=[], steps=[], partial=[])],
                       fingerprint="") for t in tasks]
    grader, replay = start_grader(backend), start_replay_sandbox(backend)
    try:
        verdicts = validate_batch(cands, backend, grader, replay=replay)
    finally:
        grader.stop()
        replay.stop()
    out = []
    for t, v in zip(tasks, verdicts, strict=True):
        out.append({
            "id": t.id, "operations": list(t.operations),
            "oracle": v.oracle.score if v.oracle else None, "noop": v.noop.score if v.noop else None,
            "cheats": {c: round(x.score, 4) for c, x in v.cheats.items()},
            "paid": {c: {k: round(s, 3) for k, s in x.checks.items() if s > 0} for c, x in v.cheats.items()},
            "error": None if v.oracle else f"{v.reason}: {v.detail[:200]}",
        })
    return out


def measure(path: Path, jobs: int, sandbox: str = "bwrap", chunk: int = 40) -> dict:
    from clawgym.synth.cheats import CHEATS, THRESHOLD

    lines = [x for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    chunks = [lines[i:i + chunk] for i in range(0, len(lines), chunk)]
    t0 = time.monotonic()
    rows: list[dict] = []
    with ProcessPoolExecutor(max_workers=jobs, initializer=_init, initargs=(sandbox,)) as pool:
        for part in pool.map(_grade, chunks):
            rows.extend(part)
    n = len(rows)
    cheats = {}
    for c in CHEATS:
        scores = [r["cheats"].get(c, 0.0) for r in rows]  # a task whose reference changed no file: nothing to cheat
        cheats[c] = {"mean": round(sum(scores) / n, 4) if n else None, "max": max(scores, default=None),
                     f"tasks_at_or_above_{THRESHOLD:g}": sum(s >= THRESHOLD for s in scores)}
    by_op: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        for op in set(r["operations"]):
            for c in CHEATS:
                by_op[op][c].append(r["cheats"].get(c, 0.0))
    worst = sorted(((r["cheats"].get(c, 0.0), r["id"], c, "+".join(r["operations"]), r["paid"].get(c, {}))
                    for r in rows for c in CHEATS), reverse=True)[:15]
    oracle = [r["oracle"] for r in rows if r["oracle"] is not None]
    return {
        "file": str(path.resolve().relative_to(REPO)) if path.resolve().is_relative_to(REPO) else str(path),
        "tasks": n, "seconds": round(time.monotonic() - t0, 1),
        "oracle_mean": round(sum(oracle) / len(oracle), 4) if oracle else None,
        "not_graded": [f"{r['id']}: {r['error']}" for r in rows if r["error"]],
        "cheats": cheats,
        "by_operation": {op: {"tasks": len(v[CHEATS[0]]),
                              **{c: {"mean": round(sum(s) / len(s), 4), "max": max(s),
                                     f"at_or_above_{THRESHOLD:g}": sum(x >= THRESHOLD for x in s)}
                                 for c, s in v.items()}}
                         for op, v in sorted(by_op.items())},
        "best_paid": [{"score": s, "task": t, "cheat": c, "operations": ops, "checks_that_paid": paid}
                      for s, t, c, ops, paid in worst if s > 0],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", action="append", default=[], metavar="LABEL=FILE", help="A task file to measure.")
    ap.add_argument("--bench", action="store_true", help="Measure synth-bench-200 (benchmarks/synth-bench-200).")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--sandbox", default="bwrap")
    ap.add_argument("--out", type=Path, help="Also write the JSON here.")
    ap.add_argument("--note", action="append", default=[], metavar="LABEL=TEXT",
                    help="How a file was made (the command), recorded with its figures.")
    args = ap.parse_args(argv)
    files = [(lbl, Path(p)) for lbl, _, p in (t.partition("=") for t in args.tasks)]
    if args.bench:
        files.insert(0, ("synth-bench-200", BENCH))
    if not files:
        ap.error("nothing to measure: give --bench and/or --tasks LABEL=FILE")
    notes = dict(n.partition("=")[::2] for n in args.note)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    result = {
        "command": "python benchmarks/cheats.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit,
        "machine": f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}, Python {platform.python_version()}",
        "cheats": {"empty": "every output file written empty",
                   "copy-input": "the first input file copied to every output path",
                   "echo-request": "the request's own text written into every output path"},
        "outputs": "the files the reference solution leaves new or changed; scores are the code checks'",
        "files": {},
    }
    for label, path in files:
        res = measure(path, args.jobs, args.sandbox)
        if label in notes:
            res["made_with"] = notes[label]
        result["files"][label] = res
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
