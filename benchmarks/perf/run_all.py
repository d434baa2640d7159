#!/usr/bin/env python3
"""Run every benchmark script in benchmarks/perf/ and collect their JSON into results.json.

Each ``benchmarks/perf/*.py`` other than this one (and other than ``_*.py`` helpers) is run with the same
interpreter; it must print one JSON object on stdout (progress on stderr, which is passed through). The
combined object, keyed by script name (``sandbox`` for ``sandbox.py``), is printed and written atomically to
``benchmarks/perf/results.json``. A script that fails or prints no JSON gets ``{"error": ..., "returncode":
...}`` under its name, and makes the exit code non-zero.

    python benchmarks/perf/run_all.py            # what `make bench` runs
    python benchmarks/perf/run_all.py --quick    # sets CLAWGYM_BENCH_QUICK=1 for every script (smoke run)
    python benchmarks/perf/run_all.py --only sandbox --out /tmp/results.json
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

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results.json"


def scripts(only: list[str] | None = None) -> list[Path]:
    me = Path(__file__).resolve()
    found = sorted(
        p for p in HERE.glob("*.py") if p.resolve() != me and not p.name.startswith("_")
    )
    if only:
        found = [p for p in found if p.stem in only]
    return found


def _parse_json(stdout: str) -> dict | None:
    """The script's JSON object: the whole stdout, else the last line that parses (stray prints above it)."""
    text = stdout.strip()
    if not text:
        return None
    try:
        obj = json.loads(text)
        return obj if isinstance(obj, dict) else {"value": obj}
    except json.JSONDecodeError:
        pass
    # a pretty-printed object after stray output: find the first line that opens a top-level object
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("{"):
            try:
                obj = json.loads("\n".join(lines[i:]))
                return obj if isinstance(obj, dict) else {"value": obj}
            except json.JSONDecodeError:
                continue
    return None


def run_one(path: Path, timeout: float, env: dict[str, str]) -> tuple[dict, bool]:
    print(f"[run_all] {path.name} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(path)], stdout=subprocess.PIPE, stderr=None, text=True, timeout=timeout,
            env=env, cwd=str(HERE.parent.parent),
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return {"error": f"timed out after {timeout:.0f}s", "returncode": None, "stdout_tail": out[-2000:]}, False
    elapsed = time.perf_counter() - t0
    result = _parse_json(proc.stdout)
    print(f"[run_all] {path.name}: exit {proc.returncode} in {elapsed:.1f}s", file=sys.stderr, flush=True)
    if result is None:
        return {
            "error": "no JSON object on stdout",
            "returncode": proc.returncode,
            "stdout_tail": proc.stdout[-2000:],
        }, False
    if proc.returncode != 0:
        result.setdefault("returncode", proc.returncode)
    return result, proc.returncode == 0


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run every benchmarks/perf/*.py and collect their JSON.")
    ap.add_argument("--quick", action="store_true", help="smoke run: sets CLAWGYM_BENCH_QUICK=1 for each script")
    ap.add_argument("--only", default="", help="comma-separated script names (without .py) to run")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to write the results (default {DEFAULT_OUT})")
    ap.add_argument("--timeout", type=float, default=3600.0, help="per-script time limit in seconds")
    opts = ap.parse_args(argv)

    only = [s.strip().removesuffix(".py") for s in opts.only.split(",") if s.strip()] or None
    todo = scripts(only)
    if not todo:
        print("[run_all] no benchmark scripts found", file=sys.stderr)
        return 2
    env = dict(os.environ)
    if opts.quick:
        env["CLAWGYM_BENCH_QUICK"] = "1"
    results: dict[str, dict] = {}
    all_ok = True
    for path in todo:
        result, ok = run_one(path, opts.timeout, env)
        results[path.stem] = result
        all_ok = all_ok and ok
    text = json.dumps(results, indent=2) + "\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    write_atomic(opts.out, text)
    print(f"[run_all] wrote {opts.out}", file=sys.stderr)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
