"""The data pool: a persistent, append-only store of step records (one per model call) with curation.

Layout of a pool directory::

    pool.json            format marker {"format": "clawgym-pool", "version": 1}
    steps/000001.jsonl   step records, one JSON line each, appended; a new segment after ~256 MB
    events.jsonl         the event log: expect_group, trajectory_end (status, reward, verdict), curate
    index.sqlite         the index (+ -wal, -shm): derived, rebuildable from the two JSONL sources
    .lock                flock(2) target serialising writers across processes

**The JSONL files are the source of truth.** A step is written whole (one ``write`` on an ``O_APPEND``
descriptor, flushed, optionally fsynced) *before* it is indexed; an event likewise before it is applied. The
index records, per segment and for the event log, how many bytes it has taken in. On open -- and before any
write, when another process may have written -- the pool catches the index up: a torn last line left by a
killed writer is cut back to the last newline, and every complete line beyond the recorded offset is indexed.
So ``kill -9`` of a writer loses no completed append, and :meth:`Pool.rebuild_index` can rebuild the index
from nothing. An index that is *ahead* of its segment (a segment truncated behind its back, or a power loss
without ``fsync=True``) is rebuilt from scratch.

**Why SQLite for the index** (stdlib ``sqlite3``, WAL mode): a pool grows to millions of steps, and every
query the trainer and the CLI make -- a trajectory's steps, a group's, a step by id, the trainable ones -- is
an indexed B-tree lookup giving ``(segment, offset, length)``, so a step is read with one ``pread``. Each
append is one atomic transaction, so the index never holds half a step; WAL lets other processes read (the
CLI, a trainer) while the gateway writes, without blocking it; and nothing is loaded into memory at open,
unlike an in-memory dict rebuilt from the files (a million steps would take tens of seconds to scan). It
ships with Python, so there is no server or extra dependency.

**Concurrency.** One ``threading.RLock`` serialises the pool's own threads (the gateway appends from many
threads or async tasks); an exclusive ``flock`` on ``.lock`` is held around each write so several processes
may write (the gateway, and ``clawgym pool curate`` from a shell). A writer first checks (``PRAGMA
data_version``, the sizes of the current segment and of the event log) whether anything changed behind it and
catches up if so. Readers do not take the file lock: they only follow offsets the index has committed, which
always point at bytes already written. ``Pool(root, readonly=True)`` never writes anything (no catch-up).

**Bad lines.** A complete line that is not a valid record (garbled JSON, a failed validation, a duplicate
step id) is *skipped and reported*, never fatal: the pool must keep opening for the gateway. Each is logged
as a warning ``file:line: field: message``, kept in the index (:meth:`Pool.bad_lines`, ``stats()
["bad_lines"]``, ``clawgym pool stats``) and found again by a rebuild. Fix the file by hand and call
:meth:`Pool.rebuild_index` to take it in.

**Curation.** ``trainable`` of a step is, in order: its own flag, ``False`` when the call failed
(``status="error"``), its trajectory's flag, else the default -- ``True`` once the trajectory has ended with a
status not in :data:`ERROR_STATUSES`, ``False`` before it ends or when it ended in error. ``quality`` is free
text, per step or per trajectory (a step's own wins); exports drop quality ``"bad"`` by default. Tags are
sets; a step carries its own tags and its trajectory's.

The pool is three modules: :mod:`clawgym.pool.segments` (the files records live in), :mod:`clawgym.pool.index`
(the SQLite index: schema, applying records and events, and the one query API, :class:`StepFilter` and
:class:`TrajectoryFilter`, the viewer uses too) and this one, the :class:`Pool` facade over both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from clawgym.core.errors import ClawgymError, RecordError
from clawgym.core.jsonl import parse_line, repair_torn_tail
from clawgym.pool import index
from clawgym.pool.index import (
    GROUP_SELECT,
    INDEX_SCHEMA_VERSION,
    STEP_SELECT,
    STEP_TRAINABLE_SQL,
    TRAJ_TRAINABLE_SQL,
    StepFilter,
    StepRow,
    TrajectoryFilter,
    eff_step_trainable,
    eff_trajectory_trainable,
    group_dict,
    json_list,
    step_meta,
    trajectory_order,
)
from clawgym.pool.records import (
    DERIVED_FIELDS,
    EVENT_ADAPTER,
    Curation,
    GroupExpected,
    StepRecord,
    TrajectoryEnd,
    utc_now,
)
from clawgym.pool.segments import Segments, file_size, read_lines, seg_name, write_all

__all__ = ["DEFAULT_SEGMENT_BYTES", "FORMAT", "FORMAT_VERSION", "INDEX_SCHEMA_VERSION", "STEP_TRAINABLE_SQL",
           "TRAJ_TRAINABLE_SQL", "Pool", "PoolClosed", "PoolError", "StepFilter", "StepRow", "TrajectoryFilter",
           "eff_step_trainable", "eff_trajectory_trainable"]

log = logging.getLogger("clawgym.pool")

FORMAT = "clawgym-pool"
FORMAT_VERSION = 1
DEFAULT_SEGMENT_BYTES = 256 * 1024 * 1024
_PAGE = 2000  # index rows fetched per page when streaming


class PoolError(ClawgymError):
    """A pool that cannot be opened, a missing step or trajectory, a duplicate step, a bad request."""


class PoolClosed(PoolError):
    """The pool was used after it was closed (a run stopping, e.g. on Ctrl-C, while calls still arrive)."""


class Pool:
    """A pool directory of step records and events, with its SQLite index. See the module docstring.

    ``Pool(root)`` creates the directory when missing (``create=False``: it must exist). ``readonly=True``
    opens the index read-only and never writes (use it to query a pool another process writes).
    ``fsync=True`` fsyncs every append (power-loss durability; kill -9 needs no fsync). ``segment_bytes``:
    roll to a new segment file past this size.
    """

    def __init__(self, root: str | os.PathLike, create: bool = True, *, readonly: bool = False,
                 fsync: bool = False, segment_bytes: int = DEFAULT_SEGMENT_BYTES):
        self.root = Path(root)
        self.readonly = readonly
        self.fsync = fsync
        self.segment_bytes = int(segment_bytes)
        self.steps_dir = self.root / "steps"
        self.segments = Segments(self.steps_dir, self.segment_bytes, fsync, error=PoolError)
        self.events_path = self.root / "events.jsonl"
        self.index_path = self.root / "index.sqlite"
        self._lock = threading.RLock()
        self._ev_read_fd = -1
        self._ev_fd = -1
        self._lock_fd = -1
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        # writer state, valid while data_version is unchanged (see _sync)
        self._dv: int | None = None
        self._ev_bytes = 0
        self._ev_lines = 0
        self._dirty = True
        self.recovery: dict[str, Any] = {}
        try:
            self._open(create)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------------------------------ opening

    def _open(self, create: bool) -> None:
        marker = self.root / "pool.json"
        if not self.root.exists():
            if not create or self.readonly:
                raise PoolError(f"{self.root}: no such pool directory")
            self.root.mkdir(parents=True)
        if not self.root.is_dir():
            raise PoolError(f"{self.root}: not a directory")
        if marker.exists():
            try:
                info = json.loads(marker.read_text())
            except (OSError, ValueError) as exc:
                raise PoolError(f"{marker}: unreadable pool marker ({exc})") from None
            if info.get("format") != FORMAT:
                raise PoolError(f"{marker}: not a clawgym pool (format {info.get('format')!r})")
            if int(info.get("version", 0)) > FORMAT_VERSION:
                raise PoolError(f"{marker}: pool format version {info.get('version')} is newer than this clawgym")
        else:
            if not create or self.readonly:
                raise PoolError(f"{self.root}: not a clawgym pool (no pool.json)")
            if any(p.name not in (".lock",) for p in self.root.iterdir()):
                raise PoolError(f"{self.root}: directory exists, is not empty and is not a pool (no pool.json)")
            tmp = marker.with_name(".pool.json.tmp")
            tmp.write_text(json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "created_at": utc_now()}) + "\n")
            os.replace(tmp, marker)
        if self.readonly:
            if not self.index_path.exists():
                raise PoolError(f"{self.root}: the pool has no index yet; open it once for writing to build it")
            uri = f"file:{self.index_path}?mode=ro"
            self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=30)
            self._conn.execute("PRAGMA query_only = 1")
            self._check_schema_readonly()
            return
        self.steps_dir.mkdir(exist_ok=True)
        self._lock_fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        with self._lock, self._flock():
            t0 = time.perf_counter()
            try:
                self._connect()
                ok = self._schema_ok()
            except sqlite3.DatabaseError as exc:  # not a database / corrupt: the index is derived, start over
                log.warning("%s: unusable index (%s); moving it aside and rebuilding", self.index_path, exc)
                if self._conn is not None:
                    self._conn.close()
                stamp = time.strftime("%Y%m%dT%H%M%S")
                for suffix in ("", "-wal", "-shm"):
                    p = Path(f"{self.index_path}{suffix}")
                    if p.exists():
                        os.replace(p, p.with_name(f"{p.name}.corrupt-{stamp}"))
                self._connect()
                ok = False
            if not ok:
                fresh = not self.segments.files() and not self.events_path.exists()
                self.recovery = self._rebuild_locked(reason="new pool" if fresh else "index missing or outdated")
            else:
                self.recovery = self._catch_up()
            self.recovery["open_s"] = round(time.perf_counter() - t0, 6)

    def _connect(self) -> None:
        self._conn = sqlite3.connect(self.index_path, isolation_level=None, check_same_thread=False, timeout=30)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")

    def _schema_ok(self) -> bool:
        assert self._conn is not None
        return index.schema_ok(self._conn)

    def _check_schema_readonly(self) -> None:
        if not self._schema_ok():
            raise PoolError(f"{self.index_path}: index missing or outdated; open the pool for writing to rebuild it")

    @contextlib.contextmanager
    def _flock(self) -> Iterator[None]:
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        assert conn is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _check_open(self, write: bool = False) -> None:
        if self._closed or self._conn is None:
            raise PoolClosed(f"{self.root}: the pool is closed")
        if write and self.readonly:
            raise PoolError(f"{self.root}: the pool is open read-only")

    # ------------------------------------------------------------------------------------------ catch-up

    def _catch_up(self) -> dict[str, Any]:
        """Index every complete line beyond what the index recorded; cut torn tails. Caller holds both locks."""
        assert self._conn is not None
        report: dict[str, Any] = {"indexed_steps": 0, "indexed_events": 0, "torn_bytes": {}, "bad_lines": [],
                                  "rebuilt": False}
        known = {seg: (b, n) for seg, b, n in self._conn.execute("SELECT seg, bytes, lines FROM segments")}
        files = self.segments.files()
        behind = [s for s, (b, _) in known.items() if b > 0 and (s not in files or self.segments.size(s) < b)]
        ev_known = self._meta_int("events_bytes"), self._meta_int("events_lines")
        ev_size = file_size(self.events_path)
        if behind or ev_size < ev_known[0]:
            what = f"segment {seg_name(behind[0])}" if behind else "events.jsonl"
            log.warning("%s: %s is shorter than the index recorded; rebuilding the index", self.root, what)
            return self._rebuild_locked(reason=f"{what} shorter than the index")
        with self._tx() as conn:
            for seg in files:
                path = self.segments.path(seg)
                b, n = known.get(seg, (0, 0))
                if seg not in known:  # (a writer may die between creating a segment and its first line)
                    conn.execute("INSERT INTO segments (seg, bytes, lines) VALUES (?, 0, 0)", (seg,))
                if file_size(path) > b:
                    torn = repair_torn_tail(path)
                    if torn:
                        report["torn_bytes"][str(path)] = torn
                        log.warning("%s: cut a torn last line of %d bytes (a writer was killed mid-append)", path, torn)
                    if file_size(path) > b:
                        report["indexed_steps"] += self._scan_segment(conn, seg, b, n, report["bad_lines"])
            if ev_size > ev_known[0]:
                torn = repair_torn_tail(self.events_path)
                if torn:
                    report["torn_bytes"][str(self.events_path)] = torn
                    log.warning("%s: cut a torn last line of %d bytes", self.events_path, torn)
                report["indexed_events"] += self._scan_events(conn, ev_known[0], ev_known[1], report["bad_lines"])
        self._load_state()
        return report

    def _meta_int(self, key: str) -> int:
        assert self._conn is not None
        return index.meta_int(self._conn, key)

    def _bad(self, conn: sqlite3.Connection, path: Path, line: int, off: int, error: str, sink: list) -> None:
        msg = error if error.startswith(str(path)) else f"{path}:{line}: {error}"
        log.warning("skipped bad line: %s", msg)
        conn.execute("INSERT OR REPLACE INTO bad_lines (file, line, off, error) VALUES (?, ?, ?, ?)",
                     (str(path.relative_to(self.root)), line, off, msg))
        sink.append(msg)

    def _scan_segment(self, conn: sqlite3.Connection, seg: int, start: int, lines: int, bad: list) -> int:
        """Index the lines of a segment from byte `start` (line count `lines` before it), in the caller's
        transaction."""
        path = self.segments.path(seg)
        n = 0
        end = start
        batch: list[tuple[tuple, int, int, int, int]] = []

        def skip(line: int, off: int, error: str) -> None:
            self._bad(conn, path, line, off, error, bad)

        for off, raw in read_lines(path, start):
            lines += 1
            end = off + len(raw) + 1
            if not raw.strip():
                continue
            try:
                step = StepRecord.model_validate_json(raw)  # the fast path; parse_line words the error
            except ValidationError:
                try:
                    step = parse_line(raw.decode("utf-8", errors="replace"), StepRecord, path, lines)
                except RecordError as exc:
                    self._bad(conn, path, lines, off, str(exc), bad)
                    continue
            set_derived = [f for f in DERIVED_FIELDS if getattr(step, f) is not None]
            if set_derived:
                self._bad(conn, path, lines, off, f"{set_derived[0]}: is filled by the pool, not stored", bad)
                continue
            batch.append((step_meta(step), seg, off, len(raw), lines))  # keep the small tuple, not the record
            del step
            if len(batch) >= _PAGE:
                n += index.index_steps(conn, batch, skip)
                batch = []
        n += index.index_steps(conn, batch, skip)
        conn.execute("INSERT OR REPLACE INTO segments (seg, bytes, lines) VALUES (?, ?, ?)", (seg, end, lines))
        return n

    def _scan_events(self, conn: sqlite3.Connection, start: int, lines: int, bad: list) -> int:
        n = 0
        end = start
        for off, raw in read_lines(self.events_path, start):
            lines += 1
            end = off + len(raw) + 1
            if not raw.strip():
                continue
            try:
                ev = EVENT_ADAPTER.validate_json(raw)
            except ValidationError as exc:
                err = exc.errors()[0]
                field = ".".join(str(p) for p in err.get("loc", ())) or "<record>"
                self._bad(conn, self.events_path, lines, off, f"{field}: {err['msg']}", bad)
                continue
            index.apply_event(conn, ev, off, len(raw), lines)
            n += 1
        index.set_meta(conn, "events_bytes", end)
        index.set_meta(conn, "events_lines", lines)
        return n

    def _load_state(self) -> None:
        """Reload the writer's view (current segment, event log end) from the index."""
        assert self._conn is not None
        row = self._conn.execute("SELECT seg, bytes, lines FROM segments ORDER BY seg DESC LIMIT 1").fetchone()
        self.segments.position(*(row if row else (1, 0, 0)))
        self._ev_bytes, self._ev_lines = self._meta_int("events_bytes"), self._meta_int("events_lines")
        self._dv = self._conn.execute("PRAGMA data_version").fetchone()[0]
        self._dirty = False

    def _sync(self) -> None:
        """Before a write (both locks held): catch up if another process wrote or a writer died mid-append."""
        assert self._conn is not None
        if not self._dirty and self._conn.execute("PRAGMA data_version").fetchone()[0] == self._dv:
            # plain os calls: this runs before every write
            ev_size = os.fstat(self._ev_fd).st_size if self._ev_fd >= 0 else file_size(self.events_path)
            if ev_size == self._ev_bytes and self.segments.unchanged():
                return
        report = self._catch_up()
        if report.get("indexed_steps") or report.get("indexed_events") or report.get("torn_bytes"):
            log.info("%s: caught up %s", self.root, report)

    def rebuild_index(self) -> dict[str, Any]:
        """Rebuild the whole index from the JSONL files (in one transaction: readers see old or new)."""
        self._check_open(write=True)
        with self._lock, self._flock():
            return self._rebuild_locked(reason="requested")

    def _rebuild_locked(self, reason: str) -> dict[str, Any]:
        assert self._conn is not None
        t0 = time.perf_counter()
        report: dict[str, Any] = {"indexed_steps": 0, "indexed_events": 0, "torn_bytes": {}, "bad_lines": [],
                                  "rebuilt": True, "reason": reason}
        with self._tx() as conn:
            for table in (*index.TABLES, "meta"):  # drop and recreate, so an outdated schema is replaced too
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            index.create_schema(conn)
            for seg in self.segments.files():
                path = self.segments.path(seg)
                torn = repair_torn_tail(path)
                if torn:
                    report["torn_bytes"][str(path)] = torn
                report["indexed_steps"] += self._scan_segment(conn, seg, 0, 0, report["bad_lines"])
            if self.events_path.exists():
                torn = repair_torn_tail(self.events_path)
                if torn:
                    report["torn_bytes"][str(self.events_path)] = torn
                report["indexed_events"] += self._scan_events(conn, 0, 0, report["bad_lines"])
        self._load_state()
        report["seconds"] = round(time.perf_counter() - t0, 3)
        return report

    # ------------------------------------------------------------------------------------------ writing

    def _check_new_ids(self, steps: Sequence[StepRecord]) -> None:
        assert self._conn is not None
        seen: set[str] = set()
        for s in steps:
            if s.step_id in seen:
                raise PoolError(f"duplicate step {s.step_id!r} in the batch")
            seen.add(s.step_id)
        ids = [s.step_id for s in steps]
        if len(ids) == 1:
            if self._conn.execute("SELECT 1 FROM steps WHERE step_id = ?", ids).fetchone():
                raise PoolError(f"step {ids[0]!r} is already in the pool (steps are append-only)")
            return
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            row = self._conn.execute(
                f"SELECT step_id FROM steps WHERE step_id IN ({','.join('?' * len(chunk))}) LIMIT 1", chunk).fetchone()
            if row:
                raise PoolError(f"step {row[0]!r} is already in the pool (steps are append-only)")

    def append_step(self, step: StepRecord) -> None:
        """Append one step: written whole to the current segment, then indexed. Raises PoolError when a step
        with the same id is already stored."""
        self.append_steps([step])

    def append_steps(self, steps: Sequence[StepRecord]) -> None:
        """Append many steps: one write per segment and one index transaction (the bulk path)."""
        self._check_open(write=True)
        if not steps:
            return
        lines = [s.stored_json().encode("utf-8") + b"\n" for s in steps]
        with self._lock, self._flock():
            self._sync()
            self._check_new_ids(steps)
            entries: list[tuple[tuple, int, int, int, int]] = []
            segs = self.segments
            i = 0
            try:
                while i < len(lines):
                    segs.make_room(len(lines[i]))
                    # take as many lines as fit in this segment (at least one)
                    j, size = i, segs.bytes
                    while j < len(lines) and (j == i or size + len(lines[j]) <= self.segment_bytes):
                        size += len(lines[j])
                        j += 1
                    first_line = segs.lines
                    off = segs.append(b"".join(lines[i:j]), j - i)
                    for k in range(i, j):
                        entries.append((step_meta(steps[k]), segs.seg, off, len(lines[k]) - 1,
                                        first_line + k - i + 1))
                        off += len(lines[k])
                    i = j
                with self._tx() as conn:
                    index.index_steps(conn, entries)
                    for seg in {e[1] for e in entries}:
                        if seg == segs.seg:
                            conn.execute("INSERT OR REPLACE INTO segments (seg, bytes, lines) VALUES (?, ?, ?)",
                                         (seg, segs.bytes, segs.lines))
                        else:  # a segment filled by this batch
                            conn.execute("INSERT OR REPLACE INTO segments (seg, bytes, lines) VALUES (?, ?, ?)",
                                         (seg, segs.size(seg),
                                          max(e[4] for e in entries if e[1] == seg)))
            except BaseException:
                self._dirty = True  # the files may hold lines the index has not taken: catch up next time
                raise

    def _write_event(self, ev: Any) -> dict[str, Any]:
        data = (ev.model_dump_json() + "\n").encode("utf-8")
        assert self._conn is not None
        with self._lock, self._flock():
            self._sync()
            if isinstance(ev, Curation):
                self._check_target(ev)
            if self._ev_fd < 0:
                self._ev_fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                off = self._ev_bytes
                write_all(self._ev_fd, data)
                if self.fsync:
                    os.fsync(self._ev_fd)
                self._ev_bytes += len(data)
                self._ev_lines += 1
                with self._tx() as conn:
                    index.apply_event(conn, ev, off, len(data) - 1, self._ev_lines)
                    index.set_meta(conn, "events_bytes", self._ev_bytes)
                    index.set_meta(conn, "events_lines", self._ev_lines)
            except BaseException:
                self._dirty = True
                raise
        return ev.model_dump()

    def _check_target(self, ev: Curation) -> None:
        assert self._conn is not None
        if ev.step_id is not None:
            if not self._conn.execute("SELECT 1 FROM steps WHERE step_id = ?", (ev.step_id,)).fetchone():
                raise PoolError(f"no step {ev.step_id!r} in {self.root}")
        elif not self._conn.execute("SELECT 1 FROM trajectories WHERE trajectory_id = ?",
                                    (ev.trajectory_id,)).fetchone():
            raise PoolError(f"no trajectory {ev.trajectory_id!r} in {self.root}")

    def next_step_index(self, trajectory_id: str) -> int:
        """How many steps of this trajectory are stored (the index of its next step)."""
        self._check_open()
        with self._lock:
            assert self._conn is not None
            if not self.readonly and self._lock_fd >= 0:
                with self._flock():
                    self._sync()
            row = self._conn.execute("SELECT n_steps FROM trajectories WHERE trajectory_id = ?",
                                     (trajectory_id,)).fetchone()
        return int(row[0]) if row else 0

    def expect_group(self, group_id: str, samples: int) -> None:
        """Declare how many trajectories the group will have (it is ready when that many have ended)."""
        self._check_open(write=True)
        try:
            ev = GroupExpected(group_id=group_id, samples=samples)
        except ValidationError as exc:
            raise PoolError(f"expect_group: {exc.errors()[0]['msg']}") from None
        self._write_event(ev)

    def end_trajectory(self, trajectory_id: str, *, group_id: str, task_id: str | None, status: str,
                       reward: float | None, verdict: dict | None = None) -> None:
        """Record the end of a trajectory; status, reward and verdict then attach to all of its steps. A
        trajectory may end with no step stored (it failed before its first call): it still counts in its group.
        Ending it again replaces the outcome (e.g. a re-scored episode)."""
        self._check_open(write=True)
        try:
            ev = TrajectoryEnd(trajectory_id=trajectory_id, group_id=group_id, task_id=task_id, status=status,
                               reward=reward, verdict=verdict)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise PoolError(f"end_trajectory: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
        self._write_event(ev)

    def curate(self, *, trajectory_id: str | None = None, step_id: str | None = None, quality: str | None = None,
               trainable: bool | None = None, add_tags: Iterable[str] = (), remove_tags: Iterable[str] = (),
               note: str | None = None, by: str = "user") -> dict:
        """Change the curation flags of one trajectory or one step; the change is an event (returned)."""
        self._check_open(write=True)
        if (trajectory_id is None) == (step_id is None):
            raise PoolError("curate: give exactly one of a trajectory or a step")
        add, remove = list(dict.fromkeys(add_tags)), list(dict.fromkeys(remove_tags))
        if quality is None and trainable is None and not add and not remove and not note:
            raise PoolError("curate: nothing to change (give a quality, trainable, tags or a note)")
        if any(not t.strip() for t in add + remove):
            raise PoolError("curate: tags must not be empty")
        ev = Curation(trajectory_id=trajectory_id, step_id=step_id, quality=quality, trainable=trainable,
                      add_tags=add, remove_tags=remove, note=note, by=by)
        return self._write_event(ev)

    # ------------------------------------------------------------------------------------------ reading

    def _materialize(self, row: tuple) -> StepRecord:
        r = row if isinstance(row, StepRow) else StepRow._make(row)
        seg, off, length, line = r.seg, r.off, r.len, r.line
        raw = self.segments.read(seg, off, length)
        try:
            step = StepRecord.model_validate_json(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise RecordError(str(self.segments.path(seg)), line, ".".join(map(str, err["loc"])) or None,
                              f"{err['msg']} (the file changed under the index; rebuild it)") from None
        step.reward = r.reward
        step.verdict = json.loads(r.verdict) if r.verdict else None
        step.trajectory_status = r.t_status
        step.is_last = r.is_last
        step.trainable = r.trainable
        step.quality = r.quality
        step.tags = r.tags
        return step

    def steps(self, *, trajectory_id: str | None = None, group_id: str | None = None, task_id: str | None = None,
              trainable: bool | None = None, tag: str | None = None, limit: int | None = None, offset: int = 0,
              model: str | None = None, quality: str | None = None,
              where: StepFilter | None = None) -> list[StepRecord]:
        """Steps matching every filter given (those of `where` and the keywords), ordered by trajectory id then
        step index, with the pool's fields (reward, verdict, trajectory_status, is_last, trainable, quality,
        tags) filled in."""
        self._check_open()
        flt = _merged(where or StepFilter(), trajectory_id=trajectory_id, group_id=group_id, task_id=task_id,
                      trainable=trainable, tag=tag, model=model, quality=quality)
        where_sql, args = flt.where()
        sql = f"{STEP_SELECT}{where_sql} ORDER BY s.trajectory_id, s.step_index LIMIT ? OFFSET ?"
        with self._lock:
            assert self._conn is not None
            rows = self._conn.execute(sql, (*args, -1 if limit is None else int(limit), int(offset))).fetchall()
        return [self._materialize(r) for r in rows]

    def iter_steps(self, **filters: Any) -> Iterator[StepRecord]:
        """Like steps() (same filters, no limit/offset) but streamed page by page: for exports of big pools."""
        for row in self.iter_step_rows(**filters):
            yield self._materialize(row)

    def iter_step_rows(self, *, trajectory_id: str | None = None, group_id: str | None = None,
                       task_id: str | None = None, trainable: bool | None = None, tag: str | None = None,
                       model: str | None = None, quality: str | None = None,
                       where: StepFilter | None = None) -> Iterator[StepRow]:
        """The index rows of matching steps (no file reads), in steps() order, by keyset pages (low memory)."""
        self._check_open()
        flt = _merged(where or StepFilter(), trajectory_id=trajectory_id, group_id=group_id, task_id=task_id,
                      trainable=trainable, tag=tag, model=model, quality=quality)
        cond, args = flt.where()
        last: tuple[str, int] | None = None
        while True:
            page_where, page_args = cond, list(args)
            if last is not None:
                page_where += (" AND " if cond else " WHERE ") + "(s.trajectory_id, s.step_index) > (?, ?)"
                page_args += list(last)
            sql = f"{STEP_SELECT}{page_where} ORDER BY s.trajectory_id, s.step_index LIMIT {_PAGE}"
            with self._lock:
                assert self._conn is not None
                rows = self._conn.execute(sql, page_args).fetchall()
            for r in rows:
                yield StepRow._make(r)
            if len(rows) < _PAGE:
                return
            last = (rows[-1][18], rows[-1][4])

    def read_stored(self, row: StepRow) -> bytes:
        """The stored JSON line of a step (as appended, without the pool's fields)."""
        return self.segments.read(row.seg, row.off, row.len)

    def get_step(self, step_id: str) -> StepRecord:
        self._check_open()
        with self._lock:
            assert self._conn is not None
            row = self._conn.execute(f"{STEP_SELECT} WHERE s.step_id = ?", (step_id,)).fetchone()
        if row is None:
            raise PoolError(f"no step {step_id!r} in {self.root}")
        return self._materialize(row)

    def trajectories(self, *, trajectory_id: str | None = None, group_id: str | None = None,
                     task_id: str | None = None, ended: bool | None = None, trainable: bool | None = None,
                     tag: str | None = None, quality: str | None = None, limit: int | None = None,
                     offset: int = 0, where: TrajectoryFilter | None = None, sort: str = "id",
                     desc: bool = False) -> list[dict]:
        """One dict per trajectory (ordered by id, or by `sort`: see :data:`clawgym.pool.index.TRAJECTORY_SORTS`):
        id, group, task, status, reward, verdict, quality, trainable (effective), tags, notes, n_steps, ended,
        ended_at, plus n_ok and n_with_ids. The filters are those of `where` and the keywords together."""
        flt = _merged(where or TrajectoryFilter(), trajectory_id=trajectory_id, group_id=group_id, task_id=task_id,
                                      ended=ended, trainable=trainable, tag=tag, quality=quality)
        self._check_open()
        cond, args = flt.where()
        sql = ("SELECT t.trajectory_id, t.group_id, t.task_id, t.status, t.reward, t.verdict, t.quality, "
               "t.trainable, t.tags, t.notes, t.n_steps, t.ended_at, t.n_ok, t.n_ids FROM trajectories t"
               f"{cond} ORDER BY {trajectory_order(sort, desc)} LIMIT ? OFFSET ?")
        with self._lock:
            assert self._conn is not None
            rows = self._conn.execute(sql, (*args, -1 if limit is None else int(limit), int(offset))).fetchall()
        return [
            {"id": r[0], "group": r[1], "task": r[2], "status": r[3], "reward": r[4],
             "verdict": json.loads(r[5]) if r[5] else None, "quality": r[6],
             "trainable": eff_trajectory_trainable(r[7], r[11], r[3]), "tags": json_list(r[8]),
             "notes": json_list(r[9]), "n_steps": r[10], "ended": r[11] is not None, "ended_at": r[11],
             "n_ok": r[12], "n_with_ids": r[13]}
            for r in rows
        ]

    def trajectory_ids(self, where: TrajectoryFilter | None = None, *, sort: str = "id", desc: bool = False,
                       offset: int = 0, limit: int | None = None) -> list[str]:
        """The ids of one page of the matching trajectories, in the listing's order. Only the narrow id rows are
        sorted and skipped: a page of a big pool's listing is its ids first, then only their columns."""
        self._check_open()
        cond, args = (where or TrajectoryFilter()).where()
        sql = (f"SELECT t.trajectory_id FROM trajectories t{cond} ORDER BY {trajectory_order(sort, desc)} "
               "LIMIT ? OFFSET ?")
        with self._lock:
            assert self._conn is not None
            rows = self._conn.execute(sql, (*args, -1 if limit is None else int(limit), int(offset))).fetchall()
        return [r[0] for r in rows]

    def count_trajectories(self, where: TrajectoryFilter | None = None) -> int:
        """How many trajectories match."""
        self._check_open()
        cond, args = (where or TrajectoryFilter()).where()
        with self._lock:
            assert self._conn is not None
            return int(self._conn.execute(f"SELECT COUNT(*) FROM trajectories t{cond}", args).fetchone()[0])

    def groups(self, ready_only: bool = False, group_id: str | None = None) -> list[dict]:
        """One dict per group (ordered by id; only `group_id`'s when given): id, expected, n_trajectories, n_ended,
        ready, rewards (of the ended trajectories that have one, by trajectory id), mean_reward.

        A group is ready when `expected` (expect_group) trajectories have ended; without expect_group, when
        every trajectory seen in it has ended."""
        self._check_open()
        cond, args = (" WHERE g.group_id = ?", (group_id,)) if group_id is not None else ("", ())
        with self._lock:
            assert self._conn is not None
            rows = self._conn.execute(f"{GROUP_SELECT}{cond} GROUP BY g.group_id ORDER BY g.group_id", args).fetchall()
        return [g for g in map(group_dict, rows) if g["ready"] or not ready_only]

    def events(self, limit: int | None = None, *, trajectory_id: str | None = None,
               type: str | None = None) -> list[dict]:
        """Events in log order (the last `limit` ones), each with its `seq` number; optionally only those of
        one trajectory (its end, its own and its steps' curations) or of one type."""
        self._check_open()
        where, args = [], []
        if trajectory_id is not None:
            where.append("trajectory_id = ?")
            args.append(trajectory_id)
        if type is not None:
            where.append("type = ?")
            args.append(type)
        sql = ("SELECT seq, off, len FROM events" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY seq DESC LIMIT ?")
        with self._lock:
            assert self._conn is not None
            rows = self._conn.execute(sql, (*args, -1 if limit is None else int(limit))).fetchall()
            if self._ev_read_fd < 0 and rows:
                self._ev_read_fd = os.open(self.events_path, os.O_RDONLY)
        out = []
        for seq, off, length in reversed(rows):
            data = json.loads(os.pread(self._ev_read_fd, length, off))
            out.append({"seq": seq, **data})
        return out

    def bad_lines(self) -> list[dict]:
        """Lines skipped because they are not valid records: file (relative to the pool), line, error."""
        self._check_open()
        with self._lock:
            assert self._conn is not None
            rows = self._conn.execute("SELECT file, line, error FROM bad_lines ORDER BY file, line").fetchall()
        return [{"file": f, "line": n, "error": e} for f, n, e in rows]

    def stats(self) -> dict:
        """Counts: steps, trajectories, ended, groups, ready groups, steps by token source, steps with token
        ids, trainable steps and trajectories, events, bad lines, segments and bytes on disk."""
        self._check_open()
        with self._lock:
            assert self._conn is not None
            c = self._conn
            counts = dict(c.execute("SELECT key, n FROM counts").fetchall())
            traj = c.execute(
                f"SELECT COUNT(*), COALESCE(SUM(ended_at IS NOT NULL), 0), COALESCE(SUM(n_ids), 0), "
                f"COALESCE(SUM({TRAJ_TRAINABLE_SQL}), 0), "
                f"COALESCE(SUM(CASE WHEN {TRAJ_TRAINABLE_SQL} THEN n_ok ELSE 0 END), 0) FROM trajectories t"
            ).fetchone()
            # steps with their own trainable flag: correct the per-trajectory sum for them
            adjust = 0
            for s_flag, s_status, t_flag, ended_at, t_status in c.execute(
                    "SELECT s.trainable, s.status, t.trainable, t.ended_at, t.status FROM steps s "
                    "JOIN trajectories t ON t.trajectory_id = s.trajectory_id WHERE s.trainable IS NOT NULL"):
                default = s_status == "ok" and eff_trajectory_trainable(t_flag, ended_at, t_status)
                adjust += int(bool(s_flag)) - int(default)
            n_groups, n_ready = c.execute(
                "SELECT COUNT(*), COALESCE(SUM(CASE WHEN expected IS NOT NULL THEN n_ended >= expected "
                "ELSE n > 0 AND n_ended = n END), 0) FROM (SELECT g.expected, COUNT(t.trajectory_id) AS n, "
                "COALESCE(SUM(t.ended_at IS NOT NULL), 0) AS n_ended FROM groups g LEFT JOIN trajectories t "
                "ON t.group_id = g.group_id GROUP BY g.group_id)").fetchone()
            n_events = c.execute("SELECT COUNT(*) FROM events").fetchone()[0]
            n_bad = c.execute("SELECT COUNT(*) FROM bad_lines").fetchone()[0]
            segs = c.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM segments").fetchone()
        index_bytes = sum(file_size(self.root / n) for n in ("index.sqlite", "index.sqlite-wal"))
        return {
            "root": str(self.root),
            "steps": counts.get("steps", 0),
            "trajectories": traj[0],
            "ended": traj[1],
            "groups": n_groups,
            "ready_groups": n_ready,
            "token_sources": {k.split(":", 1)[1]: v for k, v in sorted(counts.items()) if k.startswith("source:")},
            "steps_with_token_ids": traj[2],
            "trainable_steps": traj[4] + adjust,
            "trainable_trajectories": traj[3],
            "events": n_events,
            "bad_lines": n_bad,
            "segments": segs[0],
            "bytes": {"steps": segs[1], "events": file_size(self.events_path), "index": index_bytes},
        }

    # ------------------------------------------------------------------------------------------ closing

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.segments.close()
            for fd in (self._ev_fd, self._ev_read_fd):
                if fd >= 0:
                    os.close(fd)
            self._ev_fd = self._ev_read_fd = -1
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Pool({str(self.root)!r}{', readonly=True' if self.readonly else ''})"


Filter = TypeVar("Filter", StepFilter, TrajectoryFilter)


def _merged(base: Filter, **fields: Any) -> Filter:
    """`base` with the keyword filters given (not None) added; one given both ways is refused."""
    given = {k: v for k, v in fields.items() if v is not None}
    clash = [k for k in given if getattr(base, k) is not None]
    if clash:
        raise PoolError(f"the filter {clash[0]!r} is given twice (in `where` and as a keyword)")
    return dataclasses.replace(base, **given)
