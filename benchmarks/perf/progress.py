#!/usr/bin/env python3
"""Progress rewards benchmark: what `--progress` adds to an episode.

The oracle agent replays each task's reference solution in bwrap sandboxes, once without and once with progress
rewards (a snapshot of the workspace after each step that can change it, graded after the episode:
clawgym.verify.progress), on synthesized tasks (checks as data: progress is graded; `clawgym synth persona`,
generated here unless --synth is given) and on the example tasks (python and shell checkers: progress falls back
to outcome credit, so only the wrapper's cost shows). The two passes alternate task by task (A, B, B, A, ...)
so that drift on a shared machine hits both. Prints ONE JSON object: per task set, the mean and median episode
seconds of each pass, the added seconds per episode, the snapshot and grading seconds the progress metadata
records, the states graded and the snapshot bytes per episode, and how many episodes fell back.

    python benchmarks/perf/progress.py [--synth TASKS.jsonl] [-n 12] [--seed 17] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _episodes(task, backend, progress: bool, run: Path) -> list:
    from clawgym.agent import get_agent
    from clawgym.rollout import RolloutOptions, run_rollout

    return run_rollout([task], lambda: get_agent("oracle"), backend, run,
                       RolloutOptions(progress=progress, keep_workspaces=False)).ran


def _summary(trajs: list) -> dict:
    secs = [t.duration_s for t in trajs]
    return {"episodes": len(trajs), "mean_s": round(statistics.mean(secs), 4),
            "median_s": round(statistics.median(secs), 4),
            "passed": sum(1 for t in trajs if t.verdict and t.verdict.passed)}


def bench(tasks, backend, repeat: int, where: Path) -> dict:
    base, prog = [], []
    for r in range(repeat):  # A/B interleaved per task
        for i, task in enumerate(tasks):
            order = (False, True) if (i + r) % 2 == 0 else (True, False)
            for progress in order:
                trajs = _episodes(task, backend, progress, where / f"r{r}-t{i}-{int(progress)}")
                (prog if progress else base).extend(trajs)
    info = [t.metadata.get("progress") or {} for t in prog]
    graded = [p for p in info if p.get("credit") == "progress"]
    a, b = _summary(base), _summary(prog)
    return {
        "tasks": len(tasks), "repeat": repeat, "without_progress": a, "with_progress": b,
        "added_s_per_episode": {"mean": round(b["mean_s"] - a["mean_s"], 4),
                                "median": round(b["median_s"] - a["median_s"], 4),
                                "relative_median": round(b["median_s"] / a["median_s"] - 1, 3) if a["median_s"] else None},
        "progress": {
            "graded": len(graded), "fell_back": len(info) - len(graded),
            "fallback_reasons": sorted({p.get("fallback") for p in info if p.get("fallback")}),
            "snapshot_s_mean": round(statistics.mean([p.get("snapshot_s", 0) for p in info]), 4) if info else None,
            "grade_s_mean": round(statistics.mean([p["grade_s"] for p in graded]), 4) if graded else None,
            "states_mean": round(statistics.mean([p["states"] for p in graded]), 2) if graded else None,
            "snapshot_bytes_mean": round(statistics.mean([p["snapshot_bytes"] for p in graded])) if graded else None,
            "steps_mean": round(statistics.mean([len(t.steps) for t in prog]), 2) if prog else None,
            "sum_equals_code_score": all(
                abs(sum(p["rewards"]) - (t.verdict.code_score or 0)) < 1e-9
                for t, p in zip(prog, info, strict=True) if p.get("credit") == "progress"),
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--synth", type=Path, help="synthesized tasks (default: generated here with -n and --seed)")
    ap.add_argument("-n", type=int, default=12, help="synthesized tasks to generate")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--repeat", type=int, default=2, help="episodes of each task per pass")
    args = ap.parse_args()

    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task
    from clawgym.sandbox.bwrap import BwrapBackend

    backend = BwrapBackend()
    ok, why = backend.check()
    if not ok:
        sys.exit(f"bwrap unusable: {why}")
    with tempfile.TemporaryDirectory(prefix="clawgym-bench-progress-") as tmp:
        where = Path(tmp)
        synth = args.synth
        gen_s = None
        if synth is None:
            synth = where / "synth.jsonl"
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", "clawgym", "synth", "persona", "-n", str(args.n), "--seed",
                            str(args.seed), "-o", str(synth)], check=True, capture_output=True)
            gen_s = round(time.monotonic() - t0, 2)
        synth_tasks = read_records(synth, Task)[: args.n]
        example_tasks = [t for t in read_records(ROOT / "examples" / "tasks.jsonl", Task) if t.reference]
        result = {
            "benchmark": "progress", "agent": "oracle", "sandbox": "bwrap", "python": platform.python_version(),
            "machine": platform.platform(), "synth_tasks": str(args.synth or f"synth persona -n {args.n} --seed {args.seed}"),
            "synth_generation_s": gen_s,
            "synth": bench(synth_tasks, backend, args.repeat, where / "synth"),
            "examples": bench(example_tasks, backend, args.repeat, where / "examples"),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
