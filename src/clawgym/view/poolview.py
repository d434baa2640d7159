"""The viewer's queries over a data pool: the filtered, sorted, paginated trajectory list, one trajectory with its
steps as turns, groups, policy versions, and curation and exports through the pool's own functions.

Reads go through :class:`clawgym.pool.Pool` opened read-only (WAL: the gateway keeps writing while the page
reads); the list's filters are the pool's one query API (:class:`clawgym.pool.index.TrajectoryFilter`, its
sorts and paging). A read-only SQLite connection of our own reads what the store API does not offer: a page's
columns with its first step's policy version, and the per-version tally below. Curation opens the pool for
writing just for the call, so the event is exactly the one ``clawgym pool curate`` writes (``by`` says it came
from the viewer). Exports are :func:`clawgym.pool.export_sft` and :func:`clawgym.pool.export_rl`.

What keeps a page fast on a pool of a million steps (``benchmarks/perf/view.py``):

* the list selects the page's trajectory ids first (the sort and the offset over narrow rows; sorted by id, a
  covering index walk) and only then their columns, so a deep page never computes what it skips;
* which trajectories each policy version has (the policy filter, the per-version table) is a tally of the steps
  kept here and extended from the rows appended since (steps are append-only; the index has no column for
  it), so a full scan of the steps happens once per viewer, not per page;
* the pool's counts (``Pool.stats``) are kept until the index changes (``PRAGMA data_version``);
* one trajectory's group is one indexed query, not every group of the pool.
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
from clawgym.pool.credit import outcome_advantages
from clawgym.pool.index import (
    INDEX_SCHEMA_VERSION,
    TrajectoryFilter,
    eff_trajectory_trainable,
)
from clawgym.rl.presets import ALGOS
from clawgym.view.tokens import token_text
from clawgym.view.turns import step_turns


class PoolView:
    """One pool, opened lazily (a pool the gateway has just created may have no index yet)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._lock = threading.RLock()
        self._pool: Pool | None = None
        self._conn: sqlite3.Connection | None = None
        self._versions: tuple[int, list[dict[str, Any]]] | None = None
        self._overview: tuple[int, dict[str, Any]] | None = None
        self._tally = _VersionTally()

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
            self._versions = self._overview = None
            self._tally = _VersionTally()

    # ------------------------------------------------------------------------------------- reading

    def data_version(self) -> int:
        """Changes whenever another connection (the gateway, a curation, a catch-up) commits to the index."""
        return self._query("PRAGMA data_version")[0][0]

    def overview(self) -> dict[str, Any]:
        """The pool's counts and bad lines (kept until the index changes) and its policy versions."""
        pool = self.pool()
        dv = self.data_version()
        cached = self._overview
        if cached is None or cached[0] != dv:
            cached = (dv, {"stats": pool.stats(), "bad_lines": pool.bad_lines()[:200]})
            self._overview = cached
        return {**cached[1], "policy_versions": self.policy_versions()}

    def _refresh_tally(self) -> _VersionTally:
        """The per-version tally brought up to what the index holds now (one read transaction)."""
        self.pool()
        with self._lock:
            conn = self._conn
            assert conn is not None
            conn.execute("BEGIN")
            try:
                self._tally.refresh(conn)
            finally:
                conn.execute("COMMIT")
            return self._tally

    def policy_versions(self) -> list[dict[str, Any]]:
        """Steps, trajectories, ended trajectories and mean reward per policy version."""
        dv = self.data_version()
        if self._versions is not None and self._versions[0] == dv:
            return self._versions[1]
        with self._lock:
            out = self._refresh_tally().rows()
            out.sort(key=lambda d: (d["version"] is None, _version_key(d["version"])))
            self._versions = (dv, out)
        return out

    def trajectories(self, *, group: str | None = None, task: str | None = None, status: str | None = None,
                     quality: str | None = None, trainable: bool | None = None, tag: str | None = None,
                     policy: str | None = None, min_reward: float | None = None, max_reward: float | None = None,
                     ended: bool | None = None, curated: bool | None = None, q: str | None = None,
                     sort: str = "id", desc: bool = False, offset: int = 0, limit: int = 50) -> dict[str, Any]:
        ids = None
        if policy:  # trajectories with a step of this version: from the tally (the index has no such column)
            ids = tuple(self._refresh_tally().steps.get(policy, {}))
        flt = TrajectoryFilter(group_id=group or None, task_id=task or None, status=status or None,
                               quality=quality if quality and quality != "(none)" else None,
                               unrated=quality == "(none)", trainable=trainable, tag=tag or None, ids=ids,
                               min_reward=min_reward, max_reward=max_reward, ended=ended, curated=curated, q=q or None)
        pool = self.pool()
        total = pool.count_trajectories(flt)
        # the page's ids first (sorting and skipping narrow rows), then their columns: a deep page never
        # computes the columns (nor the first step's policy version) of the rows it skips
        page = pool.trajectory_ids(flt, sort=sort, desc=desc, offset=offset, limit=limit)
        found = {r[0]: r for r in self._query(
            "SELECT t.trajectory_id, t.group_id, t.task_id, t.status, t.reward, t.quality, t.ended_at, t.tags, "
            "t.notes, t.n_steps, t.trainable, (SELECT s.policy_version FROM steps s WHERE s.trajectory_id = "
            "t.trajectory_id ORDER BY s.step_index LIMIT 1) FROM trajectories t "
            "WHERE t.trajectory_id IN (SELECT value FROM json_each(?))", [json.dumps(page)])}
        rows = [found[tid] for tid in page if tid in found]
        items = [{"id": r[0], "group": r[1], "task": r[2], "status": r[3], "reward": r[4], "quality": r[5],
                  "trainable": eff_trajectory_trainable(r[10], r[6], r[3]), "tags": json.loads(r[7]) if r[7] else [],
                  "notes": len(json.loads(r[8])) if r[8] else 0, "n_steps": r[9], "ended": r[6] is not None,
                  "curated": r[5] is not None or r[10] is not None or bool(r[7]) or bool(r[8]),
                  "policy_version": r[11]} for r in rows]
        return {"total": total, "offset": offset, "limit": limit, "items": items}

    def group(self, group_id: str) -> dict[str, Any] | None:
        """One group as :meth:`Pool.groups` describes it, by one indexed query."""
        found = self.pool().groups(group_id=group_id)
        return found[0] if found else None

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
                "progress_reward": s.progress_reward,
            }
        return {"trajectory": t, "turns": turns, "group": self.group(t["group"]) if t["group"] else None,
                "advantages": self.advantages(t["group"]).get(trajectory_id, {}),
                "events": pool.events(trajectory_id=trajectory_id)}

    def tokens(self, step_id: str) -> dict[str, Any]:
        """A step's token ids and logprobs, with each response token's text and the prompt's text when the
        tokenizer of the step's model is on this machine (clawgym.view.tokens), else a note saying why not."""
        s = self.pool().get_step(step_id)
        prompt, response = s.prompt_ids or [], s.response_ids or []
        decoder, path, note = token_text(s.model) if (prompt or response) else (None, None, None)
        return {"step_id": s.step_id, "token_source": s.token_source, "prompt_ids": prompt,
                "response_ids": response, "logprobs": s.logprobs, "token_check": s.token_check,
                "response_text": s.response.get("content") if isinstance(s.response.get("content"), str) else None,
                "model": s.model, "tokenizer": path, "tokenizer_note": note,
                "response_tokens": decoder.tokens(response) if decoder else None,
                "prompt_text": decoder.text(prompt) if decoder else None}

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


class _VersionTally:
    """Per policy version: its trajectories (with their steps of that version), how many have ended and the sum
    of their rewards. The index has no column for a step's policy version, so this is counted here, once from
    every step row, then only from what was appended since: step rows past the last id read (steps are
    append-only), and the trajectories with a ``trajectory_end`` event past the last event read (the only way a
    reward or an end changes). An index rebuilt meanwhile (fewer rows, or rows that no longer add up to its
    count) is counted again from the start. Call :meth:`refresh` inside a read transaction."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.steps: dict[str | None, dict[str, int]] = {}  # version -> {trajectory id: its steps of that version}
        self.agg: dict[str | None, list] = {}  # version -> [steps, trajectories, ended, reward sum, rewards]
        self.outcome: dict[str, tuple[float | None, bool]] = {}  # ended trajectories: (reward, ended)
        self.last_id = self.n_steps = self.last_seq = 0

    def _add(self, version: str | None, outcome: tuple[float | None, bool], sign: int) -> None:
        agg = self.agg[version]
        reward, ended = outcome
        agg[2] += sign * int(ended)
        if reward is not None:
            agg[3] += sign * reward
            agg[4] += sign

    def refresh(self, conn: sqlite3.Connection, retry: bool = True) -> None:
        n = conn.execute("SELECT COALESCE((SELECT n FROM counts WHERE key = 'steps'), 0)").fetchone()[0]
        seq = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]
        if n == self.n_steps and seq == self.last_seq:
            return
        top = conn.execute("SELECT COALESCE(MAX(id), 0) FROM steps").fetchone()[0]
        if n < self.n_steps or top < self.last_id or seq < self.last_seq:
            self.reset()
        for tid, reward, ended in conn.execute(
                "SELECT trajectory_id, reward, ended_at IS NOT NULL FROM trajectories WHERE trajectory_id IN "
                "(SELECT trajectory_id FROM events WHERE seq > ? AND type = 'trajectory_end')", (self.last_seq,)):
            old, new = self.outcome.get(tid, (None, False)), (reward, bool(ended))
            if old != new:
                self.outcome[tid] = new
                for version, per in self.steps.items():
                    if tid in per:
                        self._add(version, old, -1)
                        self._add(version, new, 1)
        self.last_seq = seq
        for version, tid, k, last in conn.execute(
                "SELECT policy_version, trajectory_id, COUNT(*), MAX(id) FROM steps WHERE id > ? "
                "GROUP BY policy_version, trajectory_id", (self.last_id,)):
            per = self.steps.setdefault(version, {})
            agg = self.agg.setdefault(version, [0, 0, 0, 0.0, 0])
            if tid not in per:
                per[tid] = 0
                agg[1] += 1
                self._add(version, self.outcome.get(tid, (None, False)), 1)
            per[tid] += k
            agg[0] += k
            self.n_steps += k
            self.last_id = max(self.last_id, last)
        if self.n_steps != n and retry:
            self.reset()
            self.refresh(conn, retry=False)

    def rows(self) -> list[dict[str, Any]]:
        return [{"version": v, "steps": a[0], "trajectories": a[1], "ended": a[2],
                 "mean_reward": a[3] / a[4] if a[4] else None} for v, a in self.agg.items()]


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
