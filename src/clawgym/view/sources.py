"""What `clawgym view` was pointed at, sorted into runs, pools, eval reports and RL training directories.

A directory is classified by what it holds:

* ``pool.json``: a pool;
* ``state.json`` or ``metrics.jsonl`` (``clawgym train rl -o OUT``): an RL run -- its reward curve, its ``pool/``
  and each iteration's rollout under ``rollouts/v<N>/`` as runs;
* ``trajectories.jsonl``, ``run.json`` or ``report.json``: a run (rollout or eval), with its ``pool/`` when it
  has one and its ``report.json`` when it was an eval;
* anything else that holds such directories (``runs/demo``): each of them, one level down;
* an empty directory: a run that has not started (its trajectories appear live once it does).

Each source gets a short id (``r0``, ``p1``, ...) used in the page's URLs, so no path from the URL ever reaches
the file system.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym.core.errors import ClawgymError
from clawgym.core.jsonl import read_records_lenient
from clawgym.core.records import Task
from clawgym.view.poolview import PoolView
from clawgym.view.runlog import RunLog

TRAJECTORIES = "trajectories.jsonl"


class ViewSourceError(ClawgymError):
    """A path given to `clawgym view` that is missing or holds nothing it can show."""


@dataclass
class RunSource:
    id: str
    path: Path
    log: RunLog
    pool_id: str | None = None
    label: str = ""
    _tasks: dict[str, dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return "run"

    def info(self) -> dict[str, Any]:
        """run.json (settings), or {} when missing or unreadable (a run just starting)."""
        try:
            data = json.loads((self.path / "run.json").read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def report(self) -> dict[str, Any] | None:
        p = self.path / "report.json"
        if not p.is_file():
            return None
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ClawgymError(f"{p}: not valid JSON ({exc})") from None
        if not isinstance(data, dict) or "overall" not in data:
            raise ClawgymError(f"{p}: not an evaluation report (no 'overall')")
        return data

    def tasks(self) -> dict[str, dict[str, Any]]:
        """Category and operations of each task, from the tasks file run.json names (when it is readable)."""
        if self._tasks is None:
            self._tasks = {}
            name = self.info().get("tasks")
            if isinstance(name, str):
                for cand in (Path(name), self.path / name):
                    if cand.is_file():
                        try:
                            read = read_records_lenient(cand, Task)
                        except ClawgymError:
                            break
                        self._tasks = {t.id: {"category": t.category, "operations": t.operations}
                                       for t in read.records}
                        break
        return self._tasks


@dataclass
class PoolSource:
    id: str
    path: Path
    view: PoolView
    label: str = ""

    @property
    def kind(self) -> str:
        return "pool"


@dataclass
class RLSource:
    id: str
    path: Path
    pool_id: str | None
    run_ids: list[str]
    label: str = ""

    @property
    def kind(self) -> str:
        return "rl"

    def data(self) -> dict[str, Any]:
        rows, bad = [], []
        mp = self.path / "metrics.jsonl"
        if mp.is_file():
            for i, line in enumerate(mp.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    if not isinstance(row, dict):
                        raise ValueError("not an object")
                    rows.append(row)
                except ValueError as exc:
                    bad.append(f"{mp}:{i}: {exc}")
        state = None
        sp = self.path / "state.json"
        if sp.is_file():
            try:
                state = json.loads(sp.read_text(encoding="utf-8"))
            except ValueError as exc:
                bad.append(f"{sp}: not valid JSON ({exc})")
        return {"metrics": rows, "state": state, "errors": bad}


Source = RunSource | PoolSource | RLSource


class Catalog:
    """The sources of one viewer, by id."""

    def __init__(self) -> None:
        self.sources: dict[str, Source] = {}
        self._n = 0

    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n - 1}"

    def _pool(self, path: Path, label: str) -> str:
        for s in self.sources.values():
            if isinstance(s, PoolSource) and s.path == path:
                return s.id
        sid = self._id("p")
        self.sources[sid] = PoolSource(sid, path, PoolView(path), label=label)
        return sid

    def _run(self, path: Path, label: str) -> str:
        sid = self._id("r")
        src = RunSource(sid, path, RunLog(path / TRAJECTORIES), label=label)
        self.sources[sid] = src
        if (path / "pool" / "pool.json").exists():
            src.pool_id = self._pool(path / "pool", f"{label}/pool")
        return sid

    def add(self, given: str | os.PathLike, depth: int = 0) -> list[str]:
        """Classify a path (see the module docstring); return the ids it added."""
        path = Path(given).absolute()
        label = str(given)
        if path.is_file() and path.name == TRAJECTORIES:
            path = path.parent
        if not path.exists():
            raise ViewSourceError(f"{given}: no such run directory or pool")
        if not path.is_dir():
            raise ViewSourceError(f"{given}: not a directory (give a run directory, a pool or a train rl output)")
        if (path / "pool.json").exists():
            return [self._pool(path, label)]
        if (path / "state.json").exists() or (path / "metrics.jsonl").exists():
            sid = self._id("l")
            pool_id = self._pool(path / "pool", f"{label}/pool") if (path / "pool" / "pool.json").exists() else None
            runs = []
            rollouts = path / "rollouts"
            if rollouts.is_dir():
                for d in sorted(rollouts.iterdir(), key=lambda p: (len(p.name), p.name)):
                    if d.is_dir() and not d.is_symlink():
                        runs.append(self._run(d, f"{label}/rollouts/{d.name}"))
            self.sources[sid] = RLSource(sid, path, pool_id, runs, label=label)
            return [sid, *([pool_id] if pool_id else []), *runs]
        if any((path / n).exists() for n in (TRAJECTORIES, "run.json", "report.json")):
            sid = self._run(path, label)
            src = self.sources[sid]
            return [sid, *([src.pool_id] if isinstance(src, RunSource) and src.pool_id else [])]
        if depth == 0:
            added: list[str] = []
            for d in sorted(path.iterdir()):
                if d.is_dir() and not d.is_symlink() and not d.name.startswith("."):
                    try:
                        if _looks_like_source(d):
                            added += self.add(os.path.join(str(given), d.name), depth=1)
                    except ViewSourceError:
                        continue
            if added:
                return added
        return [self._run(path, label)]  # nothing yet: a run that has not started

    def get(self, sid: str) -> Source:
        try:
            return self.sources[sid]
        except KeyError:
            raise ViewSourceError(f"no source {sid!r}") from None

    def run(self, sid: str) -> RunSource:
        s = self.get(sid)
        if not isinstance(s, RunSource):
            raise ViewSourceError(f"{sid} is not a run")
        return s

    def pool(self, sid: str) -> PoolSource:
        s = self.get(sid)
        if not isinstance(s, PoolSource):
            raise ViewSourceError(f"{sid} is not a pool")
        return s

    def close(self) -> None:
        for s in self.sources.values():
            if isinstance(s, PoolSource):
                s.view.close()


def _looks_like_source(d: Path) -> bool:
    return any((d / n).exists() for n in ("pool.json", "state.json", "metrics.jsonl", TRAJECTORIES, "run.json",
                                          "report.json"))
