"""An incremental index of a run's ``trajectories.jsonl``: one small entry per line (byte offset, length, the
summary digest and the list columns), so the viewer never loads the whole file per request.

The file is read once, then only what was appended since (a rollout appends whole lines): :meth:`RunLog.refresh`
takes in every complete line past the last offset and leaves a partial last line (a writer mid-append) for the
next refresh. A file that shrank or was replaced (another inode) is indexed again from the start. A line that is
not a valid trajectory is listed as ``file:line: field: message`` and skipped. The last record of an episode
wins, as when the runner reads a run back. One trajectory is read again from its offset when a page needs it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawgym.core.errors import RecordError
from clawgym.core.jsonl import parse_line
from clawgym.core.records import Trajectory
from clawgym.rollout.summary import EpisodeDigest, digest

_CHUNK = 8 * 1024 * 1024


@dataclass
class Entry:
    """One indexed line: where it is and the columns the trajectory list shows, filters and sorts by."""

    off: int
    length: int
    line: int
    id: str
    task_id: str
    sample: int
    duration_s: float
    started_at: str
    error: str | None
    has_snapshot: bool
    digest: EpisodeDigest

    def row(self) -> dict[str, Any]:
        d = self.digest
        return {
            "id": self.id, "task_id": self.task_id, "sample": self.sample, "agent": d.agent, "model": d.model,
            "status": d.status, "score": d.score, "passed": d.passed, "verdict_status": d.verdict_status,
            "rounds": d.rounds, "tokens": d.tokens, "tool_calls": d.tool_calls, "tool_types": len(d.tool_types),
            "duration_s": round(self.duration_s, 3), "started_at": self.started_at, "error": self.error,
            "has_snapshot": self.has_snapshot,
        }


class RunLog:
    """The index of one ``trajectories.jsonl`` (which need not exist yet: a run not started)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._reset()

    def _reset(self, ino: int | None = None) -> None:
        self.offset = 0
        self.lines = 0
        self.ino = ino
        self.entries: dict[str, Entry] = {}
        self.bad: list[str] = []

    def refresh(self) -> bool:
        """Take in what was appended; True when anything changed."""
        with self._lock:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                changed = bool(self.entries or self.bad)
                self._reset()
                return changed
            if st.st_ino != self.ino or st.st_size < self.offset:
                self._reset(st.st_ino)
            if st.st_size == self.offset:
                return False
            changed = False
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                pending = b""
                while True:
                    chunk = fh.read(_CHUNK)
                    if not chunk:
                        break
                    pending += chunk
                    cut = pending.rfind(b"\n")
                    if cut < 0:
                        continue
                    self._take(pending[:cut + 1])
                    changed = True
                    pending = pending[cut + 1:]
            return changed

    def _take(self, data: bytes) -> None:
        start = 0
        while start < len(data):
            end = data.index(b"\n", start)
            raw = data[start:end]
            off = self.offset + start
            self.lines += 1
            start = end + 1
            if not raw.strip():
                continue
            try:
                t = parse_line(raw.decode("utf-8", errors="surrogateescape"), Trajectory, self.path, self.lines)
            except RecordError as exc:
                self.bad.append(str(exc))
                continue
            self.entries.pop(t.id, None)  # the last record of an episode wins (and moves to the end)
            self.entries[t.id] = Entry(
                off=off, length=len(raw), line=self.lines, id=t.id, task_id=t.task_id, sample=t.sample,
                duration_s=t.duration_s, started_at=t.started_at,
                error=f"{t.error.kind}: {t.error.message[:300]}" if t.error else None,
                has_snapshot=t.workspace_snapshot is not None, digest=digest(t),
            )
        self.offset += len(data)

    def latest(self) -> list[Entry]:
        with self._lock:
            return list(self.entries.values())

    def get(self, trajectory_id: str) -> Entry | None:
        with self._lock:
            return self.entries.get(trajectory_id)

    def read(self, entry: Entry) -> Trajectory:
        """The whole trajectory of an entry, read from its offset."""
        with open(self.path, "rb") as fh:
            fh.seek(entry.off)
            raw = fh.read(entry.length)
        return parse_line(raw.decode("utf-8", errors="surrogateescape"), Trajectory, self.path, entry.line)
