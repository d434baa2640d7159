"""The viewer's routes over runs (``/api/runs``, ``/api/run/...``, ``/api/compare``): summaries, the filtered
and sorted episode list, one episode with its turns and workspace files, the report, and two runs side by
side. Pure functions build the answers; :func:`add_run_routes` puts them on the app."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from clawgym.core.errors import ClawgymError
from clawgym.rollout.summary import Price, summarize_digests
from clawgym.view.params import page, to_bool, to_float
from clawgym.view.sources import Catalog, RLSource, RunSource, ViewSourceError
from clawgym.view.workspace import WorkspaceViewError, list_files, read_file, snapshot_path

RUN_SORTS = ("id", "task_id", "status", "score", "rounds", "tokens", "tool_calls", "tool_types", "duration_s",
             "category", "started_at")


def source_row(s: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"id": s.id, "kind": s.kind, "label": s.label, "path": str(s.path)}
    if isinstance(s, RunSource):
        row["pool_id"] = s.pool_id
        row["has_report"] = (s.path / "report.json").is_file()
        row["exists"] = s.path.is_dir()
    elif isinstance(s, RLSource):
        row["pool_id"], row["run_ids"] = s.pool_id, s.run_ids
    return row


def run_summary(s: RunSource, prices: dict[str, Price] | None) -> dict[str, Any]:
    if not s.path.is_dir():
        return {"id": s.id, "label": s.label, "error": f"{s.label}: the run directory is missing",
                "summaries": [], "bad_lines": [], "episodes": 0}
    s.log.refresh()
    latest = s.log.latest()
    sums = summarize_digests([e.digest for e in latest], run=s.label, prices=prices)
    info = s.info()
    return {"id": s.id, "label": s.label, "summaries": [x.as_dict() for x in sums], "bad_lines": s.log.bad[:50],
            "n_bad": len(s.log.bad), "episodes": len(latest), "pool_id": s.pool_id,
            "has_report": (s.path / "report.json").is_file(),
            "settings": {k: info.get(k) for k in ("agent", "model", "sandbox", "samples", "tasks", "updated_at")
                         if k in info},
            "started": s.log.path.exists()}


def _row_filter(q: Any):
    """The query's filters of the episode list, as a predicate over rows."""
    lo, hi = to_float(q.get("min_reward"), "min_reward"), to_float(q.get("max_reward"), "max_reward")
    text = (q.get("q") or "").lower()
    passed = to_bool(q.get("passed"))

    def keep(r: dict[str, Any]) -> bool:
        return ((not q.get("task") or r["task_id"] == q["task"]) and (not q.get("status") or r["status"] == q["status"])
                and (not q.get("category") or r["category"] == q["category"])
                and (not q.get("operation") or q["operation"] in r["operations"])
                and (lo is None or (r["score"] is not None and r["score"] >= lo))
                and (hi is None or (r["score"] is not None and r["score"] <= hi))
                and (passed is None or r["passed"] == passed)
                and (not text or text in r["id"].lower()))

    return keep


def _sorted_rows(rows: list[dict[str, Any]], key: str, desc: bool) -> list[dict[str, Any]]:
    """Rows by `key` (then id), those without a value last."""
    key = key if key in RUN_SORTS else "id"
    present = [r for r in rows if r[key] is not None]
    missing = [r for r in rows if r[key] is None]
    present.sort(key=lambda r: (r[key], r["id"]), reverse=desc)
    return present + missing


def run_trajectories(s: RunSource, q: Any) -> dict[str, Any]:
    """One page of a run's episodes, filtered and sorted by the query, with the facets of the filters."""
    if not s.path.is_dir():
        raise ViewSourceError(f"{s.label}: the run directory is missing")
    s.log.refresh()
    tasks = s.tasks()
    rows = [e.row() for e in s.log.latest()]
    for r in rows:
        meta = tasks.get(r["task_id"]) or {}
        r["category"] = meta.get("category") or ""
        r["operations"] = meta.get("operations") or []
    keep = _row_filter(q)
    rows = _sorted_rows([r for r in rows if keep(r)], q.get("sort") or "id", q.get("order") == "desc")
    offset, limit = page(q)
    facets = {"status": sorted({e.digest.status for e in s.log.latest()}),
              "category": sorted({(tasks.get(e.task_id) or {}).get("category") or "" for e in s.log.latest()} - {""}),
              "operation": sorted({op for t in tasks.values() for op in t.get("operations") or []})}
    return {"total": len(rows), "offset": offset, "limit": limit, "items": rows[offset:offset + limit],
            "facets": facets, "started": s.log.path.exists(), "bad_lines": s.log.bad[:20]}


def episode(s: RunSource, trajectory_id: str) -> tuple[Any, Any]:
    """The index entry and the whole record of one episode of a run (the latest record of that id)."""
    s.log.refresh()
    entry = s.log.get(trajectory_id)
    if entry is None:
        raise ViewSourceError(f"no trajectory {trajectory_id!r} in {s.label}")
    return entry, s.log.read(entry)


def run_trajectory(catalog: Catalog, s: RunSource, trajectory_id: str) -> dict[str, Any]:
    """One episode: its record's fields, its turns, its task, whether the pool has it, its workspace's files."""
    from clawgym.view.turns import episode_turns

    entry, t = episode(s, trajectory_id)
    out: dict[str, Any] = {
        "id": t.id, "task_id": t.task_id, "sample": t.sample, "agent": t.agent, "model": t.model,
        "status": t.status, "error": t.error.model_dump() if t.error else None,
        "verdict": t.verdict.model_dump() if t.verdict else None, "final_message": t.final_message,
        "usage": t.usage, "duration_s": t.duration_s, "started_at": t.started_at, "attempts": t.attempts,
        "tool_calls": t.tool_calls, "tool_errors": t.tool_errors, "row": entry.row(),
        "task": s.tasks().get(t.task_id), "turns": episode_turns(t.messages, t.transcript, t.steps),
        "pool_id": s.pool_id, "in_pool": False, "files": None, "files_error": None,
    }
    if s.pool_id:
        pool = catalog.pool(s.pool_id).view
        try:
            out["in_pool"] = bool(pool.pool().trajectories(trajectory_id=t.id))
        except ClawgymError:
            pass
    try:
        out["files"] = list_files(snapshot_path(s.path, t.workspace_snapshot))
    except WorkspaceViewError as exc:
        out["files_error"] = str(exc)
    return out


def compare_runs(ra: RunSource, rb: RunSource, task: str | None) -> dict[str, Any]:
    """Per task (or only `task`), the episodes of run a and of run b with their scores."""
    by_task: dict[str, dict[str, Any]] = {}
    for side, s in (("a", ra), ("b", rb)):
        s.log.refresh()
        for e in s.log.latest():
            if task is not None and e.task_id != task:
                continue
            cell = by_task.setdefault(e.task_id, {"task_id": e.task_id, "a": [], "b": []})
            cell[side].append({"id": e.id, "score": e.digest.score, "status": e.digest.status,
                               "rounds": e.digest.rounds, "tool_calls": e.digest.tool_calls})

    def mean(xs: list[dict]) -> float | None:
        v = [x["score"] for x in xs if x["score"] is not None]
        return sum(v) / len(v) if v else None

    rows = []
    for task_id in sorted(by_task):
        cell = by_task[task_id]
        cell["mean_a"], cell["mean_b"] = mean(cell["a"]), mean(cell["b"])
        rows.append(cell)
    return {"a": source_row(ra), "b": source_row(rb), "tasks": rows}


def add_run_routes(app: FastAPI, catalog: Catalog, prices: dict[str, Price] | None) -> None:
    @app.get("/api/sources")
    def sources() -> dict[str, Any]:
        return {"sources": [source_row(s) for s in catalog.sources.values()], "prices": bool(prices)}

    @app.get("/api/runs")
    def runs() -> dict[str, Any]:
        return {"runs": [run_summary(s, prices) for s in catalog.sources.values() if isinstance(s, RunSource)]}

    @app.get("/api/run/{sid}")
    def run(sid: str) -> dict[str, Any]:
        return run_summary(catalog.run(sid), prices)

    @app.get("/api/run/{sid}/trajectories")
    def trajectories(sid: str, request: Request) -> dict[str, Any]:
        return run_trajectories(catalog.run(sid), request.query_params)

    @app.get("/api/run/{sid}/trajectory")
    def trajectory(sid: str, id: str) -> dict[str, Any]:
        return run_trajectory(catalog, catalog.run(sid), id)

    @app.get("/api/run/{sid}/file")
    def run_file(sid: str, id: str, path: str) -> dict[str, Any]:
        s = catalog.run(sid)
        _, t = episode(s, id)
        return {"path": path, **read_file(snapshot_path(s.path, t.workspace_snapshot), path)}

    @app.get("/api/run/{sid}/report")
    def run_report(sid: str) -> dict[str, Any]:
        s = catalog.run(sid)
        rep = s.report()
        if rep is None:
            raise ViewSourceError(f"no report.json in {s.label}")
        return rep

    @app.get("/api/compare")
    def compare(a: str, b: str, task: str | None = None) -> dict[str, Any]:
        return compare_runs(catalog.run(a), catalog.run(b), task)
