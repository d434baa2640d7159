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
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from clawgym.core.errors import ClawgymError, RecordError
from clawgym.core.jsonl import parse_line, repair_torn_tail
from clawgym.pool.records import (
    DERIVED_FIELDS,
    ERROR_STATUSES,
    EVENT_ADAPTER,
    Curation,
    GroupExpected,
    StepRecord,
    TrajectoryEnd,
    utc_now,
)

log = logging.getLogger("clawgym.pool")

FORMAT = "clawgym-pool"
FORMAT_VERSION = 1
INDEX_SCHEMA_VERSION = 1
DEFAULT_SEGMENT_BYTES = 256 * 1024 * 1024
_READ_CHUNK = 8 * 1024 * 1024
_PAGE = 2000  # index rows fetched per page when streaming

_ERR_SQL = "(" + ",".join(f"'{s}'" for s in sorted(ERROR_STATUSES)) + ")"
# effective flags, the SQL twin of eff_trajectory_trainable / eff_step_trainable below
TRAJ_TRAINABLE_SQL = (
    f"COALESCE(t.trainable, CASE WHEN t.ended_at IS NOT NULL AND t.status NOT IN {_ERR_SQL} THEN 1 ELSE 0 END)"
)
STEP_TRAINABLE_SQL = f"COALESCE(s.trainable, CASE WHEN s.status = 'error' THEN 0 END, {TRAJ_TRAINABLE_SQL})"


def eff_trajectory_trainable(flag: int | None, ended_at: str | None, status: str | None) -> bool:
    if flag is not None:
        return bool(flag)
    return ended_at is not None and status not in ERROR_STATUSES


def eff_step_trainable(step_flag: int | None, step_status: str, traj_flag: int | None, ended_at: str | None,
                       traj_status: str | None) -> bool:
    if step_flag is not None:
        return bool(step_flag)
    if step_status == "error":
        return False
    return eff_trajectory_trainable(traj_flag, ended_at, traj_status)


SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS segments (seg INTEGER PRIMARY KEY, bytes INTEGER NOT NULL, lines INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    id INTEGER PRIMARY KEY,
    step_id TEXT NOT NULL UNIQUE,
    trajectory_id TEXT NOT NULL,
    step_index INTEGER NOT NULL,
    group_id TEXT NOT NULL,
    task_id TEXT,
    model TEXT NOT NULL,
    policy_version TEXT,
    token_source TEXT NOT NULL,
    status TEXT NOT NULL,
    has_ids INTEGER NOT NULL,
    n_prompt INTEGER,
    n_response INTEGER,
    created_at TEXT NOT NULL,
    seg INTEGER NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL, line INTEGER NOT NULL,
    quality TEXT, trainable INTEGER, tags TEXT, notes TEXT
);
CREATE INDEX IF NOT EXISTS steps_traj ON steps (trajectory_id, step_index);
CREATE INDEX IF NOT EXISTS steps_model ON steps (model);
CREATE INDEX IF NOT EXISTS steps_flagged ON steps (trainable) WHERE trainable IS NOT NULL;
CREATE INDEX IF NOT EXISTS steps_quality ON steps (quality) WHERE quality IS NOT NULL;
CREATE TABLE IF NOT EXISTS trajectories (
    trajectory_id TEXT PRIMARY KEY,
    group_id TEXT,
    task_id TEXT,
    n_steps INTEGER NOT NULL DEFAULT 0,
    n_ok INTEGER NOT NULL DEFAULT 0,
    n_ids INTEGER NOT NULL DEFAULT 0,
    max_index INTEGER NOT NULL DEFAULT -1,
    status TEXT, reward REAL, verdict TEXT, ended_at TEXT,
    quality TEXT, trainable INTEGER, tags TEXT, notes TEXT
);
CREATE INDEX IF NOT EXISTS traj_group ON trajectories (group_id);
CREATE INDEX IF NOT EXISTS traj_task ON trajectories (task_id);
CREATE TABLE IF NOT EXISTS groups (group_id TEXT PRIMARY KEY, expected INTEGER);
CREATE TABLE IF NOT EXISTS tags (tag TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,
                                 PRIMARY KEY (tag, kind, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counts (key TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY, type TEXT NOT NULL, trajectory_id TEXT, step_id TEXT,
    off INTEGER NOT NULL, len INTEGER NOT NULL, line INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS events_traj ON events (trajectory_id);
CREATE TABLE IF NOT EXISTS bad_lines (file TEXT NOT NULL, line INTEGER NOT NULL, off INTEGER NOT NULL,
                                      error TEXT NOT NULL, PRIMARY KEY (file, off));
"""
_TABLES = ("segments", "steps", "trajectories", "groups", "tags", "counts", "events", "bad_lines")


class PoolError(ClawgymError):
    """A pool that cannot be opened, a missing step or trajectory, a duplicate step, a bad request."""


class PoolClosed(PoolError):
    """The pool was used after it was closed (a run stopping, e.g. on Ctrl-C, while calls still arrive)."""


def _json_list(text: str | None) -> list:
    return json.loads(text) if text else []


def _seg_name(seg: int) -> str:
    return f"{seg:06d}.jsonl"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _step_meta(step: StepRecord) -> tuple:
    return (
        step.step_id, step.trajectory_id, step.step_index, step.group_id, step.task_id, step.model,
        step.policy_version, step.token_source, step.status, int(step.has_token_ids),
        len(step.prompt_ids) if step.prompt_ids is not None else None,
        len(step.response_ids) if step.response_ids is not None else None,
        step.created_at,
    )


class StepRow(NamedTuple):
    """One step's index row joined with its trajectory (what queries select before reading the file)."""

    seg: int
    off: int
    len: int
    line: int
    step_index: int
    s_quality: str | None
    s_trainable: int | None
    s_tags: str | None
    s_status: str
    t_status: str | None
    reward: float | None
    verdict: str | None
    ended_at: str | None
    max_index: int
    t_quality: str | None
    t_trainable: int | None
    t_tags: str | None
    step_id: str
    trajectory_id: str
    group_id: str | None
    task_id: str | None
    has_ids: int
    n_response: int | None

    @property
    def trainable(self) -> bool:
        return eff_step_trainable(self.s_trainable, self.s_status, self.t_trainable, self.ended_at, self.t_status)

    @property
    def quality(self) -> str | None:
        return self.s_quality or self.t_quality

    @property
    def tags(self) -> list[str]:
        return sorted(set(_json_list(self.s_tags)) | set(_json_list(self.t_tags)))

    @property
    def is_last(self) -> bool:
        return self.ended_at is not None and self.step_index == self.max_index


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
        self._steps_str = str(self.steps_dir)
        self.events_path = self.root / "events.jsonl"
        self.index_path = self.root / "index.sqlite"
        self._lock = threading.RLock()
        self._read_fds: dict[int, int] = {}
        self._ev_read_fd = -1
        self._seg_fd = -1
        self._ev_fd = -1
        self._lock_fd = -1
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        # writer state, valid while data_version is unchanged (see _sync)
        self._dv: int | None = None
        self._cur_seg = 0
        self._cur_bytes = 0
        self._cur_lines = 0
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
                fresh = not self._segment_files() and not self.events_path.exists()
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
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.OperationalError:  # no such table: a new index
            return False
        return row is not None and int(row[0]) == INDEX_SCHEMA_VERSION

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

    def _segment_files(self) -> list[int]:
        segs = []
        for p in self.steps_dir.glob("*.jsonl"):
            if p.stem.isdigit():
                segs.append(int(p.stem))
        return sorted(segs)

    def _catch_up(self) -> dict[str, Any]:
        """Index every complete line beyond what the index recorded; cut torn tails. Caller holds both locks."""
        assert self._conn is not None
        report: dict[str, Any] = {"indexed_steps": 0, "indexed_events": 0, "torn_bytes": {}, "bad_lines": [],
                                  "rebuilt": False}
        known = {seg: (b, n) for seg, b, n in self._conn.execute("SELECT seg, bytes, lines FROM segments")}
        files = self._segment_files()
        behind = [s for s, (b, _) in known.items() if b > 0 and (s not in files or self._size(self._seg_path(s)) < b)]
        ev_known = self._meta_int("events_bytes"), self._meta_int("events_lines")
        ev_size = self._size(self.events_path)
        if behind or ev_size < ev_known[0]:
            what = f"segment {_seg_name(behind[0])}" if behind else "events.jsonl"
            log.warning("%s: %s is shorter than the index recorded; rebuilding the index", self.root, what)
            return self._rebuild_locked(reason=f"{what} shorter than the index")
        with self._tx() as conn:
            for seg in files:
                path = self._seg_path(seg)
                b, n = known.get(seg, (0, 0))
                if seg not in known:  # (a writer may die between creating a segment and its first line)
                    conn.execute("INSERT INTO segments (seg, bytes, lines) VALUES (?, 0, 0)", (seg,))
                if self._size(path) > b:
                    torn = repair_torn_tail(path)
                    if torn:
                        report["torn_bytes"][str(path)] = torn
                        log.warning("%s: cut a torn last line of %d bytes (a writer was killed mid-append)", path, torn)
                    if self._size(path) > b:
                        report["indexed_steps"] += self._scan_segment(conn, seg, b, n, report["bad_lines"])
            if ev_size > ev_known[0]:
                torn = repair_torn_tail(self.events_path)
                if torn:
                    report["torn_bytes"][str(self.events_path)] = torn
                    log.warning("%s: cut a torn last line of %d bytes", self.events_path, torn)
                report["indexed_events"] += self._scan_events(conn, ev_known[0], ev_known[1], report["bad_lines"])
        self._load_state()
        return report

    def _seg_path(self, seg: int) -> Path:
        return Path(self._steps_str, _seg_name(seg))

    @staticmethod
    def _size(path: str | os.PathLike) -> int:
        try:
            return os.stat(path).st_size
        except FileNotFoundError:
            return 0

    def _meta_int(self, key: str) -> int:
        assert self._conn is not None
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row else 0

    @staticmethod
    def _lines(path: Path, start: int) -> Iterator[tuple[int, bytes]]:
        """(offset, line without newline) of every complete line from byte `start`."""
        with open(path, "rb") as fh:
            fh.seek(start)
            pos = start
            rest = b""
            while True:
                chunk = fh.read(_READ_CHUNK)
                if not chunk:
                    break
                buf = rest + chunk
                base = pos - len(rest)
                i = 0
                while True:
                    j = buf.find(b"\n", i)
                    if j < 0:
                        break
                    yield base + i, buf[i:j]
                    i = j + 1
                rest = buf[i:]
                pos += len(chunk)

    def _bad(self, conn: sqlite3.Connection, path: Path, line: int, off: int, error: str, sink: list) -> None:
        msg = error if error.startswith(str(path)) else f"{path}:{line}: {error}"
        log.warning("skipped bad line: %s", msg)
        conn.execute("INSERT OR REPLACE INTO bad_lines (file, line, off, error) VALUES (?, ?, ?, ?)",
                     (str(path.relative_to(self.root)), line, off, msg))
        sink.append(msg)

    def _scan_segment(self, conn: sqlite3.Connection, seg: int, start: int, lines: int, bad: list) -> int:
        """Index the lines of a segment from byte `start` (line count `lines` before it), in the caller's
        transaction."""
        path = self._seg_path(seg)
        n = 0
        end = start
        batch: list[tuple[tuple, int, int, int, int]] = []
        for off, raw in self._lines(path, start):
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
            batch.append((_step_meta(step), seg, off, len(raw), lines))  # keep the small tuple, not the record
            del step
            if len(batch) >= _PAGE:
                n += self._index_steps(conn, batch, path, bad)
                batch = []
        n += self._index_steps(conn, batch, path, bad)
        conn.execute("INSERT OR REPLACE INTO segments (seg, bytes, lines) VALUES (?, ?, ?)", (seg, end, lines))
        return n

    def _scan_events(self, conn: sqlite3.Connection, start: int, lines: int, bad: list) -> int:
        n = 0
        end = start
        for off, raw in self._lines(self.events_path, start):
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
            self._apply_event(conn, ev, off, len(raw), lines)
            n += 1
        self._set_meta(conn, "events_bytes", end)
        self._set_meta(conn, "events_lines", lines)
        return n

    @staticmethod
    def _set_meta(conn: sqlite3.Connection, key: str, value: Any) -> None:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, str(value)))

    def _load_state(self) -> None:
        """Reload the writer's view (current segment, event log end) from the index."""
        assert self._conn is not None
        row = self._conn.execute("SELECT seg, bytes, lines FROM segments ORDER BY seg DESC LIMIT 1").fetchone()
        seg, b, n = row if row else (1, 0, 0)
        if seg != self._cur_seg and self._seg_fd >= 0:
            os.close(self._seg_fd)
            self._seg_fd = -1
        self._cur_seg, self._cur_bytes, self._cur_lines = seg, b, n
        self._ev_bytes, self._ev_lines = self._meta_int("events_bytes"), self._meta_int("events_lines")
        self._dv = self._conn.execute("PRAGMA data_version").fetchone()[0]
        self._dirty = False

    def _sync(self) -> None:
        """Before a write (both locks held): catch up if another process wrote or a writer died mid-append."""
        assert self._conn is not None
        if not self._dirty and self._conn.execute("PRAGMA data_version").fetchone()[0] == self._dv:
            # plain os calls: this runs before every write
            seg_size = os.fstat(self._seg_fd).st_size if self._seg_fd >= 0 else self._size(self._seg_path(self._cur_seg))
            ev_size = os.fstat(self._ev_fd).st_size if self._ev_fd >= 0 else self._size(self.events_path)
            if (seg_size == self._cur_bytes and ev_size == self._ev_bytes
                    and not os.path.exists(os.path.join(self._steps_str, _seg_name(self._cur_seg + 1)))):
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
            for table in (*_TABLES, "meta"):  # drop and recreate, so an outdated schema is replaced too
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            self._create_schema()
            for seg in self._segment_files():
                path = self._seg_path(seg)
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

    def _create_schema(self) -> None:
        assert self._conn is not None
        for stmt in SCHEMA.split(";"):
            if stmt.strip():
                self._conn.execute(stmt)
        self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?)", (str(INDEX_SCHEMA_VERSION),))

    # ------------------------------------------------------------------------------------------ indexing

    def _index_steps(self, conn: sqlite3.Connection, batch: Sequence[tuple[tuple, int, int, int, int]],
                     path: Path | None = None, bad: list | None = None) -> int:
        """Index (step meta (see _step_meta), seg, off, len, line) entries inside an open transaction. With
        `bad`, duplicates are reported and skipped (catch-up); without, the caller has already checked."""
        if not batch:
            return 0
        rows = []
        trajs: dict[str, list] = {}
        sources: dict[str, int] = {}
        for meta, seg, off, length, line in batch:
            step_id, tid, index, group, task = meta[:5]
            if bad is not None:
                try:
                    conn.execute(_INSERT_STEP, (*meta, seg, off, length, line))
                except sqlite3.IntegrityError:
                    first = conn.execute("SELECT seg, line FROM steps WHERE step_id = ?", (step_id,)).fetchone()
                    where = f" (first at steps/{_seg_name(first[0])}:{first[1]})" if first else ""
                    assert path is not None
                    self._bad(conn, path, line, off, f"step_id: duplicate step {step_id!r}{where}", bad)
                    continue
            else:
                rows.append((*meta, seg, off, length, line))
            agg = trajs.get(tid)
            if agg is None:
                agg = trajs[tid] = [group, task, 0, 0, 0, -1]
            agg[2] += 1
            agg[3] += meta[8] == "ok"
            agg[4] += meta[9]
            agg[5] = max(agg[5], index)
            if agg[1] is None:
                agg[1] = task
            sources[meta[7]] = sources.get(meta[7], 0) + 1
        if rows:
            conn.executemany(_INSERT_STEP, rows)
        conn.executemany(_UPSERT_TRAJ, [(tid, *agg) for tid, agg in trajs.items()])
        conn.executemany("INSERT INTO groups (group_id) VALUES (?) ON CONFLICT DO NOTHING",
                         [(g,) for g in {agg[0] for agg in trajs.values()}])
        n = sum(sources.values())
        conn.executemany(_BUMP_COUNT, [(f"source:{k}", v) for k, v in sources.items()] + [("steps", n)])
        return n

    def _apply_event(self, conn: sqlite3.Connection, ev: Any, off: int, length: int, line: int) -> None:
        traj = getattr(ev, "trajectory_id", None)
        step_id = None
        if isinstance(ev, GroupExpected):
            conn.execute("INSERT INTO groups (group_id, expected) VALUES (?, ?) "
                         "ON CONFLICT (group_id) DO UPDATE SET expected = excluded.expected", (ev.group_id, ev.samples))
        elif isinstance(ev, TrajectoryEnd):
            conn.execute(
                "INSERT INTO trajectories (trajectory_id, group_id, task_id, status, reward, verdict, ended_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (trajectory_id) DO UPDATE SET "
                "group_id = excluded.group_id, task_id = COALESCE(excluded.task_id, task_id), "
                "status = excluded.status, reward = excluded.reward, verdict = excluded.verdict, "
                "ended_at = excluded.ended_at",
                (ev.trajectory_id, ev.group_id, ev.task_id, ev.status, ev.reward,
                 json.dumps(ev.verdict) if ev.verdict is not None else None, ev.ended_at))
            conn.execute("INSERT INTO groups (group_id) VALUES (?) ON CONFLICT DO NOTHING", (ev.group_id,))
        elif isinstance(ev, Curation):
            if ev.step_id is not None:
                step_id = ev.step_id
                row = conn.execute("SELECT trajectory_id FROM steps WHERE step_id = ?", (step_id,)).fetchone()
                traj = row[0] if row else None
                self._apply_curation(conn, "steps", "step_id", step_id, "s", ev)
            else:
                self._apply_curation(conn, "trajectories", "trajectory_id", ev.trajectory_id, "t", ev)
        conn.execute("INSERT INTO events (type, trajectory_id, step_id, off, len, line) VALUES (?, ?, ?, ?, ?, ?)",
                     (ev.type, traj, step_id, off, length, line))

    @staticmethod
    def _apply_curation(conn: sqlite3.Connection, table: str, key_col: str, key: str, kind: str, ev: Curation) -> None:
        row = conn.execute(f"SELECT tags, notes FROM {table} WHERE {key_col} = ?", (key,)).fetchone()
        if row is None:
            return
        tags = set(_json_list(row[0]))
        notes = _json_list(row[1])
        sets: dict[str, Any] = {}
        if ev.quality is not None:
            sets["quality"] = ev.quality or None
        if ev.trainable is not None:
            sets["trainable"] = int(ev.trainable)
        if ev.add_tags or ev.remove_tags:
            tags = (tags | set(ev.add_tags)) - set(ev.remove_tags)
            sets["tags"] = json.dumps(sorted(tags))
            conn.executemany("INSERT OR IGNORE INTO tags (tag, kind, key) VALUES (?, ?, ?)",
                             [(t, kind, key) for t in ev.add_tags if t not in ev.remove_tags])
            conn.executemany("DELETE FROM tags WHERE tag = ? AND kind = ? AND key = ?",
                             [(t, kind, key) for t in ev.remove_tags])
        if ev.note:
            notes.append({"note": ev.note, "by": ev.by, "at": ev.at})
            sets["notes"] = json.dumps(notes)
        if sets:
            assign = ", ".join(f"{k} = ?" for k in sets)
            conn.execute(f"UPDATE {table} SET {assign} WHERE {key_col} = ?", (*sets.values(), key))

    # ------------------------------------------------------------------------------------------ writing

    def _segment_for(self, nbytes: int) -> None:
        """Make the current segment the one the next `nbytes` go to (roll when full); open its descriptor."""
        if self._cur_bytes > 0 and self._cur_bytes + nbytes > self.segment_bytes:
            if self._seg_fd >= 0:
                os.close(self._seg_fd)
                self._seg_fd = -1
            self._cur_seg += 1
            self._cur_bytes = self._cur_lines = 0
        if self._seg_fd < 0:
            self._seg_fd = os.open(self._seg_path(self._cur_seg), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _write_segment(self, data: bytes, nlines: int) -> int:
        """Append whole lines to the current segment; returns the offset they start at."""
        off = self._cur_bytes
        _write_all(self._seg_fd, data)
        if self.fsync:
            os.fsync(self._seg_fd)
        self._cur_bytes += len(data)
        self._cur_lines += nlines
        return off

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
            i = 0
            try:
                while i < len(lines):
                    self._segment_for(len(lines[i]))
                    # take as many lines as fit in this segment (at least one)
                    j, size = i, self._cur_bytes
                    while j < len(lines) and (j == i or size + len(lines[j]) <= self.segment_bytes):
                        size += len(lines[j])
                        j += 1
                    first_line = self._cur_lines
                    off = self._write_segment(b"".join(lines[i:j]), j - i)
                    for k in range(i, j):
                        entries.append((_step_meta(steps[k]), self._cur_seg, off, len(lines[k]) - 1,
                                        first_line + k - i + 1))
                        off += len(lines[k])
                    i = j
                with self._tx() as conn:
                    self._index_steps(conn, entries)
                    segs = {e[1] for e in entries}
                    for seg in segs:
                        if seg == self._cur_seg:
                            conn.execute("INSERT OR REPLACE INTO segments (seg, bytes, lines) VALUES (?, ?, ?)",
                                         (seg, self._cur_bytes, self._cur_lines))
                        else:  # a segment filled by this batch
                            conn.execute("INSERT OR REPLACE INTO segments (seg, bytes, lines) VALUES (?, ?, ?)",
                                         (seg, self._size(self._seg_path(seg)),
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
                _write_all(self._ev_fd, data)
                if self.fsync:
                    os.fsync(self._ev_fd)
                self._ev_bytes += len(data)
                self._ev_lines += 1
                with self._tx() as conn:
                    self._apply_event(conn, ev, off, len(data) - 1, self._ev_lines)
                    self._set_meta(conn, "events_bytes", self._ev_bytes)
                    self._set_meta(conn, "events_lines", self._ev_lines)
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

    def _read_fd(self, seg: int) -> int:
        fd = self._read_fds.get(seg)
        if fd is None:
            fd = self._read_fds[seg] = os.open(self._seg_path(seg), os.O_RDONLY)
        return fd

    def _read_raw(self, seg: int, off: int, length: int) -> bytes:
        with self._lock:
            fd = self._read_fd(seg)
        data = os.pread(fd, length, off)
        if len(data) != length:
            raise PoolError(f"{self._seg_path(seg)}: short read at byte {off} (the file was truncated; "
                            f"rebuild the index)")
        return data

    def _materialize(self, row: tuple) -> StepRecord:
        r = row if isinstance(row, StepRow) else StepRow._make(row)
        seg, off, length, line = r.seg, r.off, r.len, r.line
        raw = self._read_raw(seg, off, length)
        try:
            step = StepRecord.model_validate_json(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise RecordError(str(self._seg_path(seg)), line, ".".join(map(str, err["loc"])) or None,
                              f"{err['msg']} (the file changed under the index; rebuild it)") from None
        step.reward = r.reward
        step.verdict = json.loads(r.verdict) if r.verdict else None
        step.trajectory_status = r.t_status
        step.is_last = r.is_last
        step.trainable = r.trainable
        step.quality = r.quality
        step.tags = r.tags
        return step

    _STEP_SELECT = (
        "SELECT s.seg, s.off, s.len, s.line, s.step_index, s.quality, s.trainable, s.tags, s.status, "
        "t.status, t.reward, t.verdict, t.ended_at, t.max_index, t.quality, t.trainable, t.tags, "
        "s.step_id, s.trajectory_id, t.group_id, t.task_id, s.has_ids, s.n_response "
        "FROM steps s JOIN trajectories t ON t.trajectory_id = s.trajectory_id"
    )

    @staticmethod
    def _step_where(trajectory_id: str | None, group_id: str | None, task_id: str | None, trainable: bool | None,
                    tag: str | None, model: str | None = None, quality: str | None = None) -> tuple[str, list]:
        where, args = [], []
        if trajectory_id is not None:
            where.append("s.trajectory_id = ?")
            args.append(trajectory_id)
        if group_id is not None:
            where.append("t.group_id = ?")
            args.append(group_id)
        if task_id is not None:
            where.append("t.task_id = ?")
            args.append(task_id)
        if model is not None:
            where.append("s.model = ?")
            args.append(model)
        if quality is not None:
            where.append("COALESCE(s.quality, t.quality) = ?")
            args.append(quality)
        if trainable is not None:
            where.append(f"{STEP_TRAINABLE_SQL} = ?")
            args.append(int(trainable))
        if tag is not None:
            where.append("EXISTS (SELECT 1 FROM tags g WHERE g.tag = ? AND "
                         "((g.kind = 't' AND g.key = s.trajectory_id) OR (g.kind = 's' AND g.key = s.step_id)))")
            args.append(tag)
        return (" WHERE " + " AND ".join(where)) if where else "", args

    def steps(self, *, trajectory_id: str | None = None, group_id: str | None = None, task_id: str | None = None,
              trainable: bool | None = None, tag: str | None = None, limit: int | None = None, offset: int = 0,
              model: str | None = None, quality: str | None = None) -> list[StepRecord]:
        """Steps matching every filter given, ordered by trajectory id then step index, with the pool's
        fields (reward, verdict, trajectory_status, is_last, trainable, quality, tags) filled in."""
        self._check_open()
        where, args = self._step_where(trajectory_id, group_id, task_id, trainable, tag, model, quality)
        sql = f"{self._STEP_SELECT}{where} ORDER BY s.trajectory_id, s.step_index LIMIT ? OFFSET ?"
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
                       model: str | None = None, quality: str | None = None) -> Iterator[StepRow]:
        """The index rows of matching steps (no file reads), in steps() order, by keyset pages (low memory)."""
        self._check_open()
        where, args = self._step_where(trajectory_id, group_id, task_id, trainable, tag, model, quality)
        last: tuple[str, int] | None = None
        while True:
            page_where, page_args = where, list(args)
            if last is not None:
                page_where += (" AND " if where else " WHERE ") + "(s.trajectory_id, s.step_index) > (?, ?)"
                page_args += list(last)
            sql = f"{self._STEP_SELECT}{page_where} ORDER BY s.trajectory_id, s.step_index LIMIT {_PAGE}"
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
        return self._read_raw(row.seg, row.off, row.len)

    def get_step(self, step_id: str) -> StepRecord:
        self._check_open()
        with self._lock:
            assert self._conn is not None
            row = self._conn.execute(f"{self._STEP_SELECT} WHERE s.step_id = ?", (step_id,)).fetchone()
        if row is None:
            raise PoolError(f"no step {step_id!r} in {self.root}")
        return self._materialize(row)

    def trajectories(self, *, trajectory_id: str | None = None, group_id: str | None = None,
                     task_id: str | None = None, ended: bool | None = None, trainable: bool | None = None,
                     tag: str | None = None, quality: str | None = None, limit: int | None = None,
                     offset: int = 0) -> list[dict]:
        """One dict per trajectory (ordered by id): id, group, task, status, reward, verdict, quality,
        trainable (effective), tags, notes, n_steps, ended, ended_at, plus n_ok and n_with_ids."""
        self._check_open()
        where, args = [], []
        for col, val in (("t.trajectory_id", trajectory_id), ("t.group_id", group_id), ("t.task_id", task_id),
                         ("t.quality", quality)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        if ended is not None:
            where.append("t.ended_at IS NOT NULL" if ended else "t.ended_at IS NULL")
        if trainable is not None:
            where.append(f"{TRAJ_TRAINABLE_SQL} = ?")
            args.append(int(trainable))
        if tag is not None:
            where.append("EXISTS (SELECT 1 FROM tags g WHERE g.tag = ? AND g.kind = 't' AND g.key = t.trajectory_id)")
            args.append(tag)
        sql = ("SELECT t.trajectory_id, t.group_id, t.task_id, t.status, t.reward, t.verdict, t.quality, "
               "t.trainable, t.tags, t.notes, t.n_steps, t.ended_at, t.n_ok, t.n_ids FROM trajectories t"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY t.trajectory_id LIMIT ? OFFSET ?")
        with self._lock:
            assert self._conn is not None
            rows = self._conn.execute(sql, (*args, -1 if limit is None else int(limit), int(offset))).fetchall()
        return [
            {"id": r[0], "group": r[1], "task": r[2], "status": r[3], "reward": r[4],
             "verdict": json.loads(r[5]) if r[5] else None, "quality": r[6],
             "trainable": eff_trajectory_trainable(r[7], r[11], r[3]), "tags": _json_list(r[8]),
             "notes": _json_list(r[9]), "n_steps": r[10], "ended": r[11] is not None, "ended_at": r[11],
             "n_ok": r[12], "n_with_ids": r[13]}
            for r in rows
        ]

    def groups(self, ready_only: bool = False) -> list[dict]:
        """One dict per group (ordered by id): id, expected, n_trajectories, n_ended, ready, rewards (of the
        ended trajectories that have one, by trajectory id), mean_reward.

        A group is ready when `expected` (expect_group) trajectories have ended; without expect_group, when
        every trajectory seen in it has ended."""
        self._check_open()
        sql = ("SELECT g.group_id, g.expected, COUNT(t.trajectory_id), COALESCE(SUM(t.ended_at IS NOT NULL), 0), "
               "json_group_object(t.trajectory_id, t.reward) FILTER (WHERE t.ended_at IS NOT NULL AND "
               "t.reward IS NOT NULL) "
               "FROM groups g LEFT JOIN trajectories t ON t.group_id = g.group_id GROUP BY g.group_id "
               "ORDER BY g.group_id")
        with self._lock:
            assert self._conn is not None
            rows = self._conn.execute(sql).fetchall()
        out = []
        for gid, expected, n, n_ended, rewards in rows:
            ready = n_ended >= expected if expected is not None else (n > 0 and n_ended == n)
            if ready_only and not ready:
                continue
            rw = json.loads(rewards) if rewards else {}
            out.append({"id": gid, "expected": expected, "n_trajectories": n, "n_ended": n_ended, "ready": ready,
                        "rewards": rw, "mean_reward": (sum(rw.values()) / len(rw)) if rw else None})
        return out

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
        index_bytes = sum(self._size(self.root / n) for n in ("index.sqlite", "index.sqlite-wal"))
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
            "bytes": {"steps": segs[1], "events": self._size(self.events_path), "index": index_bytes},
        }

    # ------------------------------------------------------------------------------------------ closing

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for fd in (*self._read_fds.values(), self._seg_fd, self._ev_fd, self._ev_read_fd):
                if fd >= 0:
                    os.close(fd)
            self._read_fds.clear()
            self._seg_fd = self._ev_fd = self._ev_read_fd = -1
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


_INSERT_STEP = (
    "INSERT INTO steps (step_id, trajectory_id, step_index, group_id, task_id, model, policy_version, token_source, "
    "status, has_ids, n_prompt, n_response, created_at, seg, off, len, line) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPSERT_TRAJ = (
    "INSERT INTO trajectories (trajectory_id, group_id, task_id, n_steps, n_ok, n_ids, max_index) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (trajectory_id) DO UPDATE SET "
    "n_steps = n_steps + excluded.n_steps, n_ok = n_ok + excluded.n_ok, n_ids = n_ids + excluded.n_ids, "
    "max_index = MAX(max_index, excluded.max_index), group_id = COALESCE(group_id, excluded.group_id), "
    "task_id = COALESCE(task_id, excluded.task_id)"
)
_BUMP_COUNT = "INSERT INTO counts (key, n) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET n = n + excluded.n"
