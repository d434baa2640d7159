"""Benchmark suites: a name or path to the tasks it holds.

* `clawgym-bench`: our own suite, `benchmarks/clawgym-bench/tasks.jsonl` in the repository (or the path given by
  `$CLAWGYM_BENCH_DIR`): 200 tasks in ClawGym-Bench's six categories (the task's `category` is the taxonomy's
  category name, which the report groups by), 156 code-verified and 44 hybrid, built by
  `benchmarks/clawgym-bench/build.py` from the persona and skill synthesizers;
* `pinchbench:PATH`: a PinchBench checkout or task folder, imported with its `grade()` code, judge rubric and
  weights; `pinchbench-offline:PATH` leaves out the tasks that need the network;
* `clawgym-folder:PATH`: ClawGym RL task folders;
* any `tasks.jsonl` path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from clawgym.core.errors import ClawgymError
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task

REPO = Path(__file__).resolve().parents[3]


class SuiteError(ClawgymError):
    pass


@dataclass
class Suite:
    name: str
    tasks: list[Task]
    source: str
    base_dir: Path | None = None  # where relative asset dirs resolve
    notes: list[str] = field(default_factory=list)


def _bench_dir() -> Path:
    return Path(os.environ.get("CLAWGYM_BENCH_DIR", REPO / "benchmarks" / "clawgym-bench"))


def load_suite(spec: str) -> Suite:
    kind, _, arg = spec.partition(":")
    if spec == "clawgym-bench":
        path = _bench_dir() / "tasks.jsonl"
        if not path.exists():
            raise SuiteError(f"clawgym-bench: {path} not found (set CLAWGYM_BENCH_DIR, or build it with "
                             "python benchmarks/clawgym-bench/build.py)")
        return Suite("clawgym-bench", read_records(path, Task), str(path), path.parent)
    if kind in ("pinchbench", "pinchbench-offline") and arg:
        from clawgym.importers import import_pinchbench

        res = import_pinchbench(Path(arg))
        notes = [f"not imported: {f}" for f in res.failures]
        tasks = res.tasks
        if kind == "pinchbench-offline":
            left = [t.id for t in tasks if t.metadata.get("requires_network")]
            tasks = [t for t in tasks if not t.metadata.get("requires_network")]
            notes += [f"left out (needs the network): {tid}" for tid in left]
        return Suite(spec, tasks, arg, None, notes)
    if kind == "clawgym-folder" and arg:
        from clawgym.importers import import_clawgym

        res = import_clawgym(Path(arg))
        return Suite(spec, res.tasks, arg, None, [f"not imported: {f}" for f in res.failures])
    path = Path(spec)
    if path.is_file():
        return Suite(path.stem, read_records(path, Task), str(path), path.parent.resolve())
    raise SuiteError(
        f"unknown benchmark {spec!r}: use clawgym-bench, pinchbench:PATH, pinchbench-offline:PATH, "
        f"clawgym-folder:PATH or a tasks.jsonl file"
    )
