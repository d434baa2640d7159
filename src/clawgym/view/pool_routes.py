"""The viewer's routes over pools (``/api/pool/...``): the overview, the trajectory list (the filters of
:meth:`clawgym.view.poolview.PoolView.trajectories`), groups, one trajectory, a step's tokens, and the two
writes: curation and export (their JSON bodies checked here, one line per refusal)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request

from clawgym.pool.credit import CREDITS
from clawgym.rl.presets import algos
from clawgym.view.params import ViewError, json_body, opt_str, page, str_list, to_bool, to_float
from clawgym.view.sources import Catalog

EXPORT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}\.jsonl$")


def trajectory_query(q: Any) -> dict[str, Any]:
    """The keyword arguments of PoolView.trajectories from a query string."""
    offset, limit = page(q)
    return dict(group=q.get("group") or None, task=q.get("task") or None, status=q.get("status") or None,
                quality=q.get("quality") or None, trainable=to_bool(q.get("trainable")), tag=q.get("tag") or None,
                policy=q.get("policy") or None, min_reward=to_float(q.get("min_reward"), "min_reward"),
                max_reward=to_float(q.get("max_reward"), "max_reward"), ended=to_bool(q.get("ended")),
                curated=to_bool(q.get("curated")), q=q.get("q") or None, sort=q.get("sort") or "id",
                desc=q.get("order") == "desc", offset=offset, limit=limit)


def curation_flag(body: dict[str, Any]) -> bool | None:
    """The `trainable` of a curation body (checked before the pool is looked up, the rest after)."""
    trainable = body.get("trainable")
    if trainable is not None and not isinstance(trainable, bool):
        raise ViewError("trainable: expected true, false or null")
    return trainable


def curation_request(body: dict[str, Any], trainable: bool | None) -> dict[str, Any]:
    """The keyword arguments of PoolView.curate from a curation body."""
    return dict(trajectory_id=opt_str(body, "trajectory_id"), step_id=opt_str(body, "step_id"),
                quality=opt_str(body, "quality"), trainable=trainable, add_tags=str_list(body, "add_tags"),
                remove_tags=str_list(body, "remove_tags"), note=opt_str(body, "note") or None)


def export_request(body: dict[str, Any], exports: Path) -> tuple[str, Path | None, dict[str, Any]]:
    """(format, output file or None, keyword arguments of PoolView.export) from an export body; the output is a
    plain file name, put in the viewer's export directory (made here)."""
    fmt = body.get("format")
    if fmt not in ("sft", "rl"):
        raise ViewError("format: choose sft or rl")
    algo, credit = body.get("algo") or "grpo", body.get("credit") or "outcome"
    choices = algos()
    if algo not in choices:
        raise ViewError(f"algo: choose one of {', '.join(choices)}")
    if credit not in CREDITS:
        raise ViewError(f"credit: choose one of {', '.join(CREDITS)}")
    gamma = to_float(str(body.get("gamma", 1.0)), "gamma")
    if gamma is None or not 0 <= gamma <= 1:
        raise ViewError("gamma: a number in [0, 1]")
    min_reward = body.get("min_reward")
    if min_reward is not None and (isinstance(min_reward, bool) or not isinstance(min_reward, (int, float))):
        raise ViewError("min_reward: expected a number or null")
    drop = [q for q in str_list(body, "drop_quality") if q.lower() != "none"] if "drop_quality" in body \
        else ["bad"]
    output = None
    name = opt_str(body, "output")
    if name:
        if not EXPORT_NAME.match(name):
            raise ViewError("output: a plain file name ending in .jsonl (letters, digits, . _ -), written to "
                            "the viewer's export directory")
        exports.mkdir(parents=True, exist_ok=True)
        output = exports / name
    return fmt, output, dict(min_reward=min_reward, ready_only=bool(body.get("ready_only")), drop_quality=drop,
                             algo=algo, credit=credit, gamma=gamma)


def add_pool_routes(app: FastAPI, catalog: Catalog, exports: Path) -> None:
    @app.get("/api/pool/{sid}")
    def pool_overview(sid: str) -> dict[str, Any]:
        s = catalog.pool(sid)
        ov = s.view.overview()
        return {"id": s.id, "label": s.label, **ov,
                "groups": {"total": ov["stats"]["groups"], "ready": ov["stats"]["ready_groups"], "items": []}}

    @app.get("/api/pool/{sid}/trajectories")
    def pool_trajectories(sid: str, request: Request) -> dict[str, Any]:
        return catalog.pool(sid).view.trajectories(**trajectory_query(request.query_params))

    @app.get("/api/pool/{sid}/groups")
    def pool_groups(sid: str, request: Request) -> dict[str, Any]:
        q = request.query_params
        return catalog.pool(sid).view.groups(*page(q), to_bool(q.get("ready")))

    @app.get("/api/pool/{sid}/trajectory")
    def pool_trajectory(sid: str, id: str) -> dict[str, Any]:
        return catalog.pool(sid).view.trajectory(id)

    @app.get("/api/pool/{sid}/tokens")
    def pool_tokens(sid: str, step: str) -> dict[str, Any]:
        return catalog.pool(sid).view.tokens(step)

    @app.post("/api/pool/{sid}/curate")
    async def pool_curate(sid: str, request: Request) -> dict[str, Any]:
        body = await json_body(request)
        trainable = curation_flag(body)
        view = catalog.pool(sid).view
        event = await asyncio.to_thread(view.curate, **curation_request(body, trainable))
        return {"event": event}

    @app.post("/api/pool/{sid}/export")
    async def pool_export(sid: str, request: Request) -> dict[str, Any]:
        fmt, output, kw = export_request(await json_body(request), exports)
        return await asyncio.to_thread(catalog.pool(sid).view.export, fmt, output, **kw)
