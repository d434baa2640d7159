#!/usr/bin/env python3
"""The noop agent over all of ClawGym-Bench (ClawGym's 200 published task folders) on bwrap and on Docker.

Runs, for each backend, the command a user runs:

    clawgym eval --bench clawgym-bench --data DATA --agent noop --sandbox BACKEND -j J -o RUN_DIR

and writes ONE JSON record (also printed on stdout; progress on stderr): the commit, the command, the settings,
per backend the episodes per trajectory status and per verdict status, `checker_failed`, infrastructure errors,
the mean score, the tasks the noop agent is paid on (score above 0: a do-nothing agent should get 0, which is
what ClawGym's task filter asks of its tasks) with their scores, the tasks that need the network, and the wall
time of the whole command. Exit 1 when a backend has an infrastructure error or a checker that failed.

    python benchmarks/clawgym_bench_noop.py --data ../shared/datasets/clawgym-eval
    python benchmarks/clawgym_bench_noop.py --data DIR --backends bwrap -j 4 --out /tmp/noop.json
    (default --out: benchmarks/results/clawgym_bench_noop.json; --data defaults to $CLAWGYM_BENCH_DATA)
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "clawgym_bench_noop.json"


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_backend(backend: str, data: Path, jobs: int, work: Path, given: str) -> dict:
    run_dir = work / backend
    cmd = [sys.executable, "-m", "clawgym.cli.app", "eval", "--bench", "clawgym-bench", "--data", str(data),
           "--agent", "noop", "--sandbox", backend, "-j", str(jobs), "-o", str(run_dir)]
    shown = (f"clawgym eval --bench clawgym-bench --data {shlex.quote(given)} --agent noop --sandbox {backend} "
             f"-j {jobs} -o RUN_DIR")
    print(f"[{backend}] {shown}", file=sys.stderr, flush=True)
    load_before = _loadavg()
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        return {"command": shown, "returncode": done.returncode, "error": done.stderr.strip()[-2000:],
                "wall_s": round(wall, 1)}
    trajs = [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines() if x.strip()]
    report = json.loads((run_dir / "report.json").read_text())
    verdicts = Counter((t.get("verdict") or {}).get("status", "none") for t in trajs)
    scores = {t["task_id"]: (t.get("verdict") or {}).get("score") for t in trajs}
    o = report["overall"]
    net = report.get("requires_network") or {}
    return {
        "command": shown,
        "returncode": 0,
        "wall_s": round(wall, 1),
        "load_average_before": load_before,
        "load_average_after": _loadavg(),
        "episodes": len(trajs),
        "trajectory_status": dict(sorted(Counter(t["status"] for t in trajs).items())),
        "verdict_status": dict(sorted(verdicts.items())),
        "scored": o["scored"],
        "checker_failed": verdicts.get("checker_failed", 0),
        "infra_errors": o["infra_errors"],
        "infra_error_details": report["infra_errors"],
        "mean_score": o["mean_score"],
        "pass_rate": o["pass_rate"],
        "tasks_scored": o.get("tasks_scored"),
        "noop_paid": {
            "tasks_above_zero": o.get("tasks_above_zero"),
            "share_above_zero": (o["tasks_above_zero"] / o["tasks_scored"]) if o.get("tasks_scored") else None,
            "tasks_passed": o.get("tasks_passed"),
            "tasks": report.get("scored_above_zero", []),
        },
        "requires_network": {"tasks": net.get("tasks", 0), "ids": net.get("ids", []),
                             "scores": {i: scores.get(i) for i in net.get("ids", [])}},
        "suite_notes": report["settings"].get("suite_notes", []),
        "versions": report["settings"].get("versions"),
        "limits": report["settings"].get("limits"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=os.environ.get("CLAWGYM_BENCH_DATA"),
                    help="ClawGym-Bench's task folders (default: $CLAWGYM_BENCH_DATA)")
    ap.add_argument("--backends", default="bwrap,docker", help="comma-separated (default: bwrap,docker)")
    ap.add_argument("-j", "--jobs", type=int, default=4)
    ap.add_argument("--out", type=Path, default=OUT, help=f"JSON record (default: {OUT.relative_to(REPO)})")
    args = ap.parse_args(argv)
    if args.data is None or not Path(args.data).is_dir():
        print("error: give ClawGym-Bench's task folders with --data DIR (or $CLAWGYM_BENCH_DATA)", file=sys.stderr)
        return 2
    data = Path(args.data).resolve()
    from clawgym.sandbox.image import recipe, recipe_id

    record = {
        "what": "the noop agent (does nothing) on every ClawGym-Bench task: every checker must run (0 "
                "checker_failed, 0 infrastructure errors) and pay (almost) nothing",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": _git("rev-parse", "HEAD"),
        "worktree_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "command": "python benchmarks/clawgym_bench_noop.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        "data": str(data),
        "settings": {"jobs": args.jobs, "backends": args.backends.split(","), "image": recipe_id(),
                     "image_packages": recipe()["packages"]},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "backends": {},
    }
    with tempfile.TemporaryDirectory(prefix="clawgym-bench-noop-") as tmp:
        for backend in args.backends.split(","):
            record["backends"][backend] = res = run_backend(backend, data, args.jobs, Path(tmp), str(args.data))
            print(f"[{backend}] " + json.dumps({k: res.get(k) for k in ("wall_s", "scored", "checker_failed",
                                                                          "infra_errors", "mean_score")}),
                  file=sys.stderr, flush=True)
    text = json.dumps(record, indent=2, default=str) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = args.out.with_name(f".{args.out.name}.tmp")
    tmp_out.write_text(text)
    tmp_out.replace(args.out)
    sys.stdout.write(text)
    bad = [b for b, r in record["backends"].items()
           if r.get("returncode") != 0 or r.get("infra_errors") or r.get("checker_failed")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
