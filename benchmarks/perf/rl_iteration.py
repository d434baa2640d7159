#!/usr/bin/env python3
"""The RL loop's speed: one `clawgym train rl` iteration of 8 tasks x 8 samples, this code against an older commit
(checked out beside it as a git worktree), run one after the other on the same machine, the same tasks, model and
settings. Goal (#37): one iteration under 10 minutes on 2 idle cores.

    python benchmarks/perf/rl_iteration.py --tasks runs/demo/train_tasks.jsonl --model runs/demo/student \\
        --base f9e388c --save

For each code: the iteration's wall time (the command, model server start included), and from its
`metrics.jsonl` the rollout, update and publish seconds, episodes, generated tokens per second of the rollout and
the mean reward. Settings are the same for both and recorded; `--precision` is the rollout server's (q4: the
4-bit decoding path, which the kernel of `clawgym.serve.q4_kernel` took over). Prints JSON; `--save` writes
`benchmarks/perf/results_rl_iteration.json` with the commits, command and load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


def run_iteration(src: Path, tasks: Path, model: str, out: Path, a: argparse.Namespace) -> dict:
    cmd = [sys.executable, "-m", "clawgym", "train", "rl", str(tasks), "--model", model, "-k", str(a.samples),
           "--tasks-per-iter", str(a.tasks_per_iter), "--iterations", "1", "--precision", a.precision,
           "--max-turns", str(a.max_turns), "--max-tokens", str(a.max_tokens), "-j", str(a.jobs), "--seed",
           str(a.seed), "--sandbox", a.sandbox, "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": str(src)}
    load = os.getloadavg()
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        return {"returncode": done.returncode, "stderr": done.stderr[-2000:], "wall_s": round(wall, 1)}
    m = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    keep = ("episodes", "scored", "mean_reward", "pass_rate", "rollout_s", "train_s", "publish_s",
            "rollout_tokens_per_s", "train_tokens_per_s", "batch_rows", "tokens")
    return {"returncode": 0, "wall_s": round(wall, 1), "load_average_before": [round(x, 2) for x in load],
            **{k: m.get(k) for k in keep}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=Path, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--base", required=True, help="the older commit to compare with")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--tasks-per-iter", type=int, default=8)
    ap.add_argument("--precision", default="q4")
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sandbox", default="bwrap")
    ap.add_argument("--save", action="store_true")
    a = ap.parse_args()
    head = _git("rev-parse", "HEAD")
    base = _git("rev-parse", a.base)
    tasks, model = a.tasks.resolve(), str(Path(a.model).resolve()) if Path(a.model).exists() else a.model
    with tempfile.TemporaryDirectory(prefix="rl-iter-") as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(tree), base], check=True)
        try:
            results = {"this": run_iteration(REPO / "src", tasks, model, Path(tmp) / "this", a),
                       "base": run_iteration(tree / "src", tasks, model, Path(tmp) / "base-run", a)}
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    this, old = results["this"], results["base"]
    out = {
        "benchmark": "rl_iteration", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": head, "src_modified": bool(_git("status", "--porcelain", "src")), "base_commit": base,
        "command": " ".join(["python", "benchmarks/perf/rl_iteration.py", *sys.argv[1:]]),
        "settings": {k: v for k, v in vars(a).items() if k not in ("save",)} | {"tasks": str(a.tasks)},
        "machine": {"cpus": os.cpu_count()}, "goal_s": 600,
        "this": this, "base": old,
        "speedup_wall": round(old["wall_s"] / this["wall_s"], 2) if this.get("wall_s") and old.get("wall_s") else None,
        "meets_goal": bool(this.get("returncode") == 0 and this["wall_s"] < 600),
    }
    text = json.dumps(out, indent=2, default=str)
    print(text)
    if a.save:
        (Path(__file__).parent / "results_rl_iteration.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
