"""Benchmark suites: a name or path to the tasks it holds.

* `clawgym-bench`: ClawGym's published ClawGym-Bench (200 task folders), from `--data PATH`, `$CLAWGYM_BENCH_DATA`
  or the Hugging Face Hub (`RUC-AIBOX/ClawGym-Bench`), imported with its own `reward.sh` checkers and annotated
  (tasks that need the network, what the checkers run): :mod:`clawgym.evaluation.clawgym_bench`;
  `clawgym-bench-offline` leaves out the tasks that need the network;
* `synth-bench-200`: our own suite, `benchmarks/synth-bench-200/tasks.jsonl` in the repository (or the path given
  by `$CLAWGYM_SYNTH_BENCH_DIR`): 200 tasks synthesized by this project in the shape ClawGym-Bench publishes (its
  six categories, the task's `category` being the taxonomy's category name, which the report groups by), 156
  code-verified and 44 hybrid, built by `benchmarks/synth-bench-200/build.py` from the persona and skill
  synthesizers. It was called `clawgym-bench` before; its old folder path and `$CLAWGYM_BENCH_DIR` still work,
  with a deprecation message (`Suite.deprecations`);
* `pinchbench:PATH`: a PinchBench checkout or task folder, imported with its `grade()` code, judge rubric and
  weights; `pinchbench-offline:PATH` leaves out the tasks that need the network;
* `clawgym-folder:PATH`: ClawGym RL task folders, imported as they are;
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
SYNTH_BENCH = "synth-bench-200"
SYNTH_BENCH_ENV = "CLAWGYM_SYNTH_BENCH_DIR"
OLD_BENCH_ENV = "CLAWGYM_BENCH_DIR"  # deprecated: meant our own suite's folder when it was called clawgym-bench
CLAWGYM_BENCH = "clawgym-bench"
NAMES = f"{CLAWGYM_BENCH}, {CLAWGYM_BENCH}-offline, {SYNTH_BENCH}, pinchbench:PATH, pinchbench-offline:PATH, " \
        "clawgym-folder:PATH or a tasks.jsonl file"


class SuiteError(ClawgymError):
    pass


@dataclass
class Suite:
    name: str
    tasks: list[Task]
    source: str
    base_dir: Path | None = None  # where relative asset dirs resolve
    notes: list[str] = field(default_factory=list)
    deprecations: list[str] = field(default_factory=list)  # one line each: an old spelling that still works


def _synth_bench_dir(deprecations: list[str]) -> Path:
    if os.environ.get(SYNTH_BENCH_ENV):
        return Path(os.environ[SYNTH_BENCH_ENV])
    if os.environ.get(OLD_BENCH_ENV):
        deprecations.append(f"${OLD_BENCH_ENV} is deprecated: it names our own suite's folder, now "
                            f"{SYNTH_BENCH} (set ${SYNTH_BENCH_ENV})")
        return Path(os.environ[OLD_BENCH_ENV])
    return REPO / "benchmarks" / SYNTH_BENCH


def _load_synth_bench(deprecations: list[str], path: Path | None = None) -> Suite:
    path = path or _synth_bench_dir(deprecations) / "tasks.jsonl"
    if not path.exists():
        raise SuiteError(f"{SYNTH_BENCH}: {path} not found (set {SYNTH_BENCH_ENV}, or build it with "
                         f"python benchmarks/{SYNTH_BENCH}/build.py)")
    return Suite(SYNTH_BENCH, read_records(path, Task), str(path), path.parent, deprecations=deprecations)


def _old_bench_path(spec: str) -> bool:
    """`spec` is the old folder of our own suite (or its tasks.jsonl), moved to benchmarks/synth-bench-200."""
    p = Path(spec)
    parts = p.parts[:-1] if p.name == "tasks.jsonl" else p.parts
    return not p.exists() and parts[-2:] == ("benchmarks", "clawgym-bench")


def load_suite(spec: str, data: Path | str | None = None) -> Suite:
    """The suite `spec` names. `data` (`clawgym eval --data`): where ClawGym-Bench's task folders are, for
    `clawgym-bench` only."""
    kind, _, arg = spec.partition(":")
    deprecations: list[str] = []
    if data not in (None, "") and spec not in (CLAWGYM_BENCH, f"{CLAWGYM_BENCH}-offline"):
        raise SuiteError(f"--data is for --bench {CLAWGYM_BENCH} (ClawGym-Bench's task folders), not {spec!r}")
    if spec in (CLAWGYM_BENCH, f"{CLAWGYM_BENCH}-offline"):
        from clawgym.evaluation.clawgym_bench import ClawgymBenchError, load_clawgym_bench, suite_network_note

        if data in (None, "") and os.environ.get(OLD_BENCH_ENV) and not os.environ.get("CLAWGYM_BENCH_DATA"):
            deprecations.append(f"${OLD_BENCH_ENV} is deprecated and ignored here: it names our own suite, now "
                                f"--bench {SYNTH_BENCH}; {CLAWGYM_BENCH} is ClawGym's published ClawGym-Bench")
        try:
            tasks, source, notes = load_clawgym_bench(data)
        except ClawgymBenchError as exc:
            raise SuiteError(str(exc) + "".join(f" ({d})" for d in deprecations)) from None
        if spec.endswith("-offline"):
            left = [t for t in tasks if t.metadata.get("requires_network")]
            tasks = [t for t in tasks if not t.metadata.get("requires_network")]
            notes.append(f"left out (needs the network): {len(left)} tasks: {', '.join(t.id for t in left)}")
        elif note := suite_network_note(tasks):
            notes.append(note)
        return Suite(spec, tasks, source, None, notes, deprecations)
    if spec == SYNTH_BENCH:
        return _load_synth_bench(deprecations)
    if _old_bench_path(spec):
        deprecations.append(f"{spec} is deprecated: our own suite moved to benchmarks/{SYNTH_BENCH} "
                            f"(--bench {SYNTH_BENCH})")
        return _load_synth_bench(deprecations, REPO / "benchmarks" / SYNTH_BENCH / "tasks.jsonl")
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
    raise SuiteError(f"unknown benchmark {spec!r}: use {NAMES}")
