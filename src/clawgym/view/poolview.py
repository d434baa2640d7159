"""The viewer's queries over a data pool: the filtered, sorted, paginated trajectory list, one trajectory with its
steps as turns, groups, policy versions, and curation and exports through the pool's own functions.

Reads go through :class:`clawgym.pool.Pool` opened read-only (WAL: the gateway keeps writing while the page
reads), plus a read-only SQLite connection of our own for the list, whose filters and sort orders the store API
does not offer; those queries use the index's tables as :mod:`clawgym.pool.store` defines them (same effective
``trainable`` expression) and touch only trajectory rows or indexed step lookups, so a page costs the same on a
pool of a million steps. Curation opens the pool for writing just for the call, so the event is exactly the one
``clawgym pool curate`` writes (``by`` says it came from the viewer). Exports are :func:`clawgym.pool.export_sft`
and :func:`clawgym.pool.export_rl`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any

from clawgym.core.errors import ClawgymError
from clawgym.pool import Pool, PoolError, export_rl, export_sft
from clawgym.pool.credit import ALGOS, outcome_advantages
from clawgym.pool.store import INDEX_SCHEMA_VERSION, TRAJ_TRAINABLE_SQL
from clawgym.view.turns import step_turns

SORTS = {"id": "t.trajectory_id", "reward": "t.reward", "steps": "t.n_steps", "status": "t.status",
         "task": "t.task_id", "group": "t.group_id", "ended": "t.ended_at", "quality": "t.quality"}


class PoolView:
    """One pool, opened lazily (a pool the gateway has just created may have no index yet)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._lock = threading.RLock()
        self._pool: Pool | None = None
        self._conn: sqlite3.Connection | None = None
        self._versions: tuple[int, list[dict[str, Any]]] | None = None

    def pool(self) -> Pool:
        with self._lock:
            if self._pool is None:
                if not (self.root / "pool.json").exists():
                    raise PoolError(f"{self.root}: not a clawgym pool (no pool.json)")
                # opened for writing once, as `clawgym pool stats` does: builds or catches up the index with
                # what a killed writer left (a torn last line is cut, bad lines listed); then read-only
                Pool(self.root, create=False).close()
                self._pool = Pool(self.root, create=False, readonly=True)
                uri = f"file:{self.root / 'index.sqlite'}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False,
                                             timeout=30)
                self._conn.execute("PRAGMA query_only = 1")
                row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                if row is not None and int(row[0]) != INDEX_SCHEMA_VERSION:
                    raise PoolError(f"{self.root}: index schema {row[0]}, expected {INDEX_SCHEMA_VERSION}")
            return self._pool

    def _query(self, sql: str, args: list | tuple = ()) -> list[tuple]:
        self.pool()
        with self._lock:
            assert self._conn is not None
            return self._conn.execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
            if self._conn is not None:
                self._conn.close()
            self._pool, self._conn = None, None

    # ------------------------------------------------------------------------------------- reading

    def overview(self) -> dict[str, Any]:
        pool = self.pool()
        return {"stats": pool.stats(), "bad_lines": pool.bad_lines()[:200], "policy_versions": self.policy_versions()}

    def policy_versions(self) -> list[dict[str, Any]]:
        """Steps, trajectories and mean reward per policy version (cached until the step count changes)."""
        n = self._query("SELECT COALESCE((SELECT n FROM counts WHERE key = 'steps'), 0)")[0][0]
        if self._versions is not None and self._versions[0] == n:
            return self._versions[1]
        rows = self._query(
            "SELECT v.policy_version, SUM(v.n), COUNT(*), AVG(t.reward), SUM(t.ended_at IS NOT NULL) FROM "
            "(SELECT policy_version, trajectory_id, COUNT(*) AS n FROM steps GROUP BY policy_version, trajectory_id) v "
            "JOIN trajectories t ON t.trajectory_id = v.trajectory_id GROUP BY v.policy_version")
        out = [{"version": v, "steps": s, "trajectories": nt, "mean_reward": r, "ended": e}
               for v, s, nt, r, e in rows]
        out.sort(key=lambda d: (d["version"] is None, _version_key(d["version"])))
        self._versions = (n, out)
        return out

    def trajectories(self, *, group: str | None = None, task: str | None = None, status: str | None = None,
                     quality: str | None = None, trainable: bool | None = None, tag: str | None = None,
                     policy: str | None = None, min_reward: float | None = None, max_reward: float | None = None,
                     ended: bool | None = None, curated: bool | None = None, q: str | None = None,
                     sort: str = "id", desc: bool = False, offset: int = 0, limit: int = 50) -> dict[str, Any]:
        where, args = [], []
        for col, val in (("t.group_id", group), ("t.task_id", task), ("t.status", status)):
            if val:
                where.append(f"{col} = ?")
                args.append(val)
        if quality:
            where.append("t.quality IS NULL" if quality == "(none)" else "t.quality = ?")
            args += [] if quality == "(none)" else [quality]
        if trainable is not None:
            where.append(f"{TRAJ_TRAINABLE_SQL} = ?")
            args.append(int(trainable))
        if tag:
            where.append("EXISTS (SELECT 1 FROM tags g WHERE g.tag = ? AND g.kind = 't' AND g.key = t.trajectory_id)")
            args.append(tag)
        if policy:
            where.append("EXISTS (SELECT 1 FROM steps s WHERE s.trajectory_id = t.trajectory_id AND "
                         "s.policy_version = ?)")
            args.append(policy)
        if min_reward is not None:
            where.append("t.reward >= ?")
            args.append(min_reward)
        if max_reward is not None:
            where.append("t.reward <= ?")
            args.append(max_reward)
        if ended is not None:
            where.append("t.ended_at IS NOT NULL" if ended else "t.ended_at IS NULL")
        if curated is not None:
            expr = "(t.quality IS NOT NULL OR t.trainable IS NOT NULL OR t.tags IS NOT NULL OR t.notes IS NOT NULL)"
            where.append(expr if curated else f"NOT {expr}")
        if q:
            where.append("t.trajectory_id LIKE ? ESCAPE '\\'")
            args.append("%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        cond = (" WHERE " + " AND ".join(where)) if where else ""
        col = SORTS.get(sort, "t.trajectory_id")
        order = f"{col} {'DESC' if desc else 'ASC'} NULLS LAST, t.trajectory_id"
        total = self._query(f"SELECT COUNT(*) FROM trajectories t{cond}", args)[0][0]
        rows = self._query(
            "SELECT t.trajectory_id, t.group_id, t.task_id, t.status, t.reward, t.quality, "
            f"{TRAJ_TRAINABLE_SQL}, t.tags, t.notes, t.n_steps, t.ended_at, t.trainable, "
            "(SELECT s.policy_version FROM steps s WHERE s.trajectory_id = t.trajectory_id ORDER BY s.step_index "
            f"LIMIT 1) FROM trajectories t{cond} ORDER BY {order} LIMIT ? OFFSET ?",
            [*args, int(limit), int(offset)])
        items = [{"id": r[0], "group": r[1], "task": r[2], "status": r[3], "reward": r[4], "quality": r[5],
                  "trainable": bool(r[6]), "tags": json.loads(r[7]) if r[7] else [],
                  "notes": len(json.loads(r[8])) if r[8] else 0, "n_steps": r[9], "ended": r[10] is not None,
                  "curated": r[5] is not None or r[11] is not None or bool(r[7]) or bool(r[8]),
                  "policy_version": r[12]} for r in rows]
        return {"total": total, "offset": offset, "limit": limit, "items": items}

    def group(self, group_id: str) -> dict[str, Any] | None:
        for g in self.pool().groups():
            if g["id"] == group_id:
                return g
        return None

    def groups(self, offset: int = 0, limit: int = 50, ready: bool | None = None) -> dict[str, Any]:
        gs = self.pool().groups()
        if ready is not None:
            gs = [g for g in gs if g["ready"] == ready]
        return {"total": len(gs), "ready": sum(g["ready"] for g in gs), "items": gs[offset:offset + limit]}

    def advantages(self, group_id: str | None) -> dict[str, dict[str, float]]:
        """Outcome advantage of each trajectory of a group under every preset (baseline as the exports build it:
        ended trajectories with a reward that pass curation)."""
        if group_id is None:
            return {}
        rewards = {t["id"]: float(t["reward"]) for t in self.pool().trajectories(group_id=group_id)
                   if t["ended"] and t["reward"] is not None and t["trainable"] and t["quality"] != "bad"}
        out: dict[str, dict[str, float]] = {}
        for algo in ALGOS:
            for tid, a in outcome_advantages({group_id: rewards}, algo).items():
                out.setdefault(tid, {})[algo] = a
        return out

    def trajectory(self, trajectory_id: str) -> dict[str, Any]:
        pool = self.pool()
        found = pool.trajectories(trajectory_id=trajectory_id)
        if not found:
            raise PoolError(f"no trajectory {trajectory_id!r} in {self.root}")
        t = found[0]
        steps = pool.steps(trajectory_id=trajectory_id)
        turns = step_turns(steps)
        for s, turn in zip(steps, turns, strict=True):
            turn["step"] = {
                "step_id": s.step_id, "index": s.step_index, "model": s.model, "policy_version": s.policy_version,
                "status": s.status, "error": s.error, "token_source": s.token_source, "usage": s.usage,
                "latency_s": s.timings.get("latency_s"), "n_prompt": len(s.prompt_ids or []),
                "n_response": len(s.response_ids or []), "trainable": s.trainable, "quality": s.quality,
                "tags": s.tags or [], "is_last": s.is_last, "created_at": s.created_at,
            }
        return {"trajectory": t, "turns": turns, "group": self.group(t["group"]) if t["group"] else None,
                "advantages": self.advantages(t["group"]).get(trajectory_id, {}),
                "events": pool.events(trajectory_id=trajectory_id)}

    def tokens(self, step_id: str) -> dict[str, Any]:
        s = self.pool().get_step(step_id)
        return {"step_id": s.step_id, "token_source": s.token_source, "prompt_ids": s.prompt_ids or [],
                "response_ids": s.response_ids or [], "logprobs": s.logprobs, "token_check": s.token_check,
                "response_text": s.response.get("content") if isinstance(s.response.get("content"), str) else None}

    def signature(self) -> tuple:
        """Cheap change detector for live updates: sizes of the event log and of the newest step segment."""
        sizes = []
        for p in (self.root / "events.jsonl", self.root / "index.sqlite-wal", self.root / "index.sqlite"):
            try:
                st = os.stat(p)
                sizes.append((st.st_size, st.st_mtime_ns))
            except OSError:
                sizes.append(None)
        try:
            segs = sorted(os.listdir(self.root / "steps"))
            sizes.append((segs[-1], os.stat(self.root / "steps" / segs[-1]).st_size) if segs else None)
        except OSError:
            sizes.append(None)
        return tuple(sizes)

    # ------------------------------------------------------------------------------------- writing

    def curate(self, *, trajectory_id: str | None, step_id: str | None, quality: str | None,
               trainable: bool | None, add_tags: list[str], remove_tags: list[str], note: str | None,
               by: str = "view") -> dict[str, Any]:
        """The same `curate` event `clawgym pool curate` writes (Pool.curate), with `by` naming the viewer."""
        with Pool(self.root, create=False) as pool:
            return pool.curate(trajectory_id=trajectory_id, step_id=step_id, quality=quality, trainable=trainable,
                               add_tags=add_tags, remove_tags=remove_tags, note=note, by=by)

    def export(self, fmt: str, output: Path | None, *, min_reward: float | None, ready_only: bool,
               drop_quality: list[str], algo: str, credit: str, gamma: float) -> dict[str, Any]:
        """Write (or, without `output`, only count) a training file with the pool's own export."""
        pool = self.pool()
        kw: dict[str, Any] = {"min_reward": min_reward, "ready_groups_only": ready_only, "drop_quality": drop_quality}
        tmpdir = None
        if output is None:
            tmpdir = tempfile.mkdtemp(prefix="clawgym-view-")
            target = Path(tmpdir) / "preview.jsonl"
        else:
            target = output
        try:
            if fmt == "sft":
                report = export_sft(pool, target, **kw)
            elif fmt == "rl":
                report = export_rl(pool, target, algo=algo, credit=credit, gamma=gamma, **kw)
            else:
                raise ClawgymError(f"format {fmt!r}: choose sft or rl")
            if output is None:
                report["path"] = None
                report["sample"] = _first_lines(target, 3)
        finally:
            if tmpdir is not None:
                for p in Path(tmpdir).iterdir():
                    p.unlink()
                os.rmdir(tmpdir)
        return report


def _first_lines(path: Path, n: int) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            out.append(line[:2000])
            if len(out) >= n:
                break
    return out


def _version_key(v: str | None) -> tuple:
    try:
        return (0, float(v), "")  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return (1, 0.0, str(v))
