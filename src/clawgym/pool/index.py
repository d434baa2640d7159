"""The pool's SQLite index: its schema, how records and events are applied to it, and the one query API
(:class:`StepFilter`, :class:`TrajectoryFilter`: the filters every reader of the index uses, the pool's own
methods and the viewer alike, so the SQL of a filter and of the effective ``trainable`` flag is written once).

The index is derived: everything in it is rebuilt from the JSONL files (:mod:`clawgym.pool.segments`) by
:meth:`clawgym.pool.store.Pool.rebuild_index`. See :mod:`clawgym.pool.store` for why SQLite.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from clawgym.pool.records import ERROR_STATUSES, Curation, GroupExpected, StepRecord, TrajectoryEnd
from clawgym.pool.segments import seg_name

INDEX_SCHEMA_VERSION = 1

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
TABLES = ("segments", "steps", "trajectories", "groups", "tags", "counts", "events", "bad_lines")


def json_list(text: str | None) -> list:
    return json.loads(text) if text else []


def create_schema(conn: sqlite3.Connection) -> None:
    for stmt in SCHEMA.split(";"):
        if stmt.strip():
            conn.execute(stmt)
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?)", (str(INDEX_SCHEMA_VERSION),))


def set_meta(conn: sqlite3.Connection, key: str, value: Any) -> None:
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, str(value)))


def meta_int(conn: sqlite3.Connection, key: str) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row else 0


def schema_ok(conn: sqlite3.Connection) -> bool:
    """Whether the index holds this version's schema (False for a new, empty database)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.OperationalError:  # no such table: a new index
        return False
    return row is not None and int(row[0]) == INDEX_SCHEMA_VERSION


def step_meta(step: StepRecord) -> tuple:
    """The indexed columns of a step, in :data:`_INSERT_STEP`'s order (before seg, off, len, line)."""
    return (
        step.step_id, step.trajectory_id, step.step_index, step.group_id, step.task_id, step.model,
        step.policy_version, step.token_source, step.status, int(step.has_token_ids),
        len(step.prompt_ids) if step.prompt_ids is not None else None,
        len(step.response_ids) if step.response_ids is not None else None,
        step.created_at,
    )


# ------------------------------------------------------------------------------------------ applying records

# called with (line, offset, message) for a line that is skipped (a duplicate step)
Skip = Callable[[int, int, str], None]


def index_steps(conn: sqlite3.Connection, batch: Sequence[tuple[tuple, int, int, int, int]],
                skip: Skip | None = None) -> int:
    """Index (step meta (see :func:`step_meta`), seg, off, len, line) entries inside an open transaction. With
    `skip`, duplicates are reported to it and skipped (catch-up); without, the caller has already checked."""
    if not batch:
        return 0
    rows = []
    trajs: dict[str, list] = {}
    sources: dict[str, int] = {}
    for meta, seg, off, length, line in batch:
        step_id, tid, index, group, task = meta[:5]
        if skip is not None:
            try:
                conn.execute(_INSERT_STEP, (*meta, seg, off, length, line))
            except sqlite3.IntegrityError:
                first = conn.execute("SELECT seg, line FROM steps WHERE step_id = ?", (step_id,)).fetchone()
                where = f" (first at steps/{seg_name(first[0])}:{first[1]})" if first else ""
                skip(line, off, f"step_id: duplicate step {step_id!r}{where}")
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


def apply_event(conn: sqlite3.Connection, ev: Any, off: int, length: int, line: int) -> None:
    """Apply one event of the log (expect_group, trajectory_end, curate) inside an open transaction."""
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
            _apply_curation(conn, "steps", "step_id", step_id, "s", ev)
        else:
            _apply_curation(conn, "trajectories", "trajectory_id", ev.trajectory_id, "t", ev)
    conn.execute("INSERT INTO events (type, trajectory_id, step_id, off, len, line) VALUES (?, ?, ?, ?, ?, ?)",
                 (ev.type, traj, step_id, off, length, line))


def _apply_curation(conn: sqlite3.Connection, table: str, key_col: str, key: str, kind: str, ev: Curation) -> None:
    row = conn.execute(f"SELECT tags, notes FROM {table} WHERE {key_col} = ?", (key,)).fetchone()
    if row is None:
        return
    tags = set(json_list(row[0]))
    notes = json_list(row[1])
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
        return sorted(set(json_list(self.s_tags)) | set(json_list(self.t_tags)))

    @property
    def is_last(self) -> bool:
        return self.ended_at is not None and self.step_index == self.max_index


# ------------------------------------------------------------------------------------------ querying

STEP_SELECT = (
    "SELECT s.seg, s.off, s.len, s.line, s.step_index, s.quality, s.trainable, s.tags, s.status, "
    "t.status, t.reward, t.verdict, t.ended_at, t.max_index, t.quality, t.trainable, t.tags, "
    "s.step_id, s.trajectory_id, t.group_id, t.task_id, s.has_ids, s.n_response "
    "FROM steps s JOIN trajectories t ON t.trajectory_id = s.trajectory_id"
)  # the columns of StepRow


def _where(parts: list[str]) -> str:
    return (" WHERE " + " AND ".join(parts)) if parts else ""


@dataclass(frozen=True)
class StepFilter:
    """Which steps (``s``, joined with their trajectory ``t``): every field given must hold; the effective
    ``trainable`` and ``quality`` (a step's own, else its trajectory's), tags of the step or its trajectory."""

    trajectory_id: str | None = None
    group_id: str | None = None
    task_id: str | None = None
    trainable: bool | None = None
    tag: str | None = None
    model: str | None = None
    quality: str | None = None

    def where(self) -> tuple[str, list]:
        """`` WHERE ...`` (or "") and its arguments."""
        where, args = [], []
        for col, val in (("s.trajectory_id", self.trajectory_id), ("t.group_id", self.group_id),
                         ("t.task_id", self.task_id), ("s.model", self.model),
                         ("COALESCE(s.quality, t.quality)", self.quality)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        if self.trainable is not None:
            where.append(f"{STEP_TRAINABLE_SQL} = ?")
            args.append(int(self.trainable))
        if self.tag is not None:
            where.append("EXISTS (SELECT 1 FROM tags g WHERE g.tag = ? AND "
                         "((g.kind = 't' AND g.key = s.trajectory_id) OR (g.kind = 's' AND g.key = s.step_id)))")
            args.append(self.tag)
        return _where(where), args


# the orders trajectories can be listed in: name -> column (ties broken by id)
TRAJECTORY_SORTS = {"id": "t.trajectory_id", "reward": "t.reward", "steps": "t.n_steps", "status": "t.status",
                    "task": "t.task_id", "group": "t.group_id", "ended": "t.ended_at", "quality": "t.quality"}
_CURATED_SQL = "(t.quality IS NOT NULL OR t.trainable IS NOT NULL OR t.tags IS NOT NULL OR t.notes IS NOT NULL)"


@dataclass(frozen=True)
class TrajectoryFilter:
    """Which trajectories (``t``): every field given must hold. `trainable` is the effective flag; `unrated`:
    no quality set; `ids`: one of these ids; `curated`: any curation (quality, flag, tags, notes) or none;
    `q`: a substring of the id."""

    trajectory_id: str | None = None
    group_id: str | None = None
    task_id: str | None = None
    status: str | None = None
    quality: str | None = None
    unrated: bool = False
    trainable: bool | None = None
    tag: str | None = None
    ids: tuple[str, ...] | None = None
    min_reward: float | None = None
    max_reward: float | None = None
    ended: bool | None = None
    curated: bool | None = None
    q: str | None = None

    def where(self) -> tuple[str, list]:
        """`` WHERE ...`` (or "") and its arguments."""
        where: list[str] = []
        args: list[Any] = []
        for col, val in (("t.trajectory_id", self.trajectory_id), ("t.group_id", self.group_id),
                         ("t.task_id", self.task_id), ("t.status", self.status), ("t.quality", self.quality)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        if self.unrated:
            where.append("t.quality IS NULL")
        if self.trainable is not None:
            where.append(f"{TRAJ_TRAINABLE_SQL} = ?")
            args.append(int(self.trainable))
        if self.tag is not None:
            where.append("EXISTS (SELECT 1 FROM tags g WHERE g.tag = ? AND g.kind = 't' AND g.key = t.trajectory_id)")
            args.append(self.tag)
        if self.ids is not None:
            where.append("t.trajectory_id IN (SELECT value FROM json_each(?))")
            args.append(json.dumps(list(self.ids)))
        if self.min_reward is not None:
            where.append("t.reward >= ?")
            args.append(self.min_reward)
        if self.max_reward is not None:
            where.append("t.reward <= ?")
            args.append(self.max_reward)
        if self.ended is not None:
            where.append("t.ended_at IS NOT NULL" if self.ended else "t.ended_at IS NULL")
        if self.curated is not None:
            where.append(_CURATED_SQL if self.curated else f"NOT {_CURATED_SQL}")
        if self.q:
            where.append("t.trajectory_id LIKE ? ESCAPE '\\'")
            args.append("%" + self.q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        return _where(where), args


def trajectory_order(sort: str = "id", desc: bool = False) -> str:
    """The ORDER BY of a trajectory listing (an unknown `sort` is by id). Sorted by id (never NULL, unique) the
    listing walks the primary key's index; other columns put NULLs last and break ties by id."""
    col = TRAJECTORY_SORTS.get(sort, "t.trajectory_id")
    direction = "DESC" if desc else "ASC"
    if col == "t.trajectory_id":
        return f"t.trajectory_id {direction}"
    return f"{col} {direction} NULLS LAST, t.trajectory_id"


GROUP_SELECT = (
    "SELECT g.group_id, g.expected, COUNT(t.trajectory_id), COALESCE(SUM(t.ended_at IS NOT NULL), 0), "
    "json_group_object(t.trajectory_id, t.reward) FILTER (WHERE t.ended_at IS NOT NULL AND t.reward IS NOT NULL) "
    "FROM groups g LEFT JOIN trajectories t ON t.group_id = g.group_id"
)  # ... GROUP BY g.group_id; the row of group_dict


def group_dict(row: tuple) -> dict:
    """A GROUP_SELECT row as the pool describes a group: ready when `expected` (expect_group) trajectories have
    ended; without expect_group, when every trajectory seen in it has ended."""
    gid, expected, n, n_ended, rewards = row
    ready = n_ended >= expected if expected is not None else (n > 0 and n_ended == n)
    rw = json.loads(rewards) if rewards else {}
    return {"id": gid, "expected": expected, "n_trajectories": n, "n_ended": n_ended, "ready": ready,
            "rewards": rw, "mean_reward": (sum(rw.values()) / len(rw)) if rw else None}


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
