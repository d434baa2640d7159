"""`clawgym eval`: run a benchmark suite (rollout + verify) and write its report.

RUN_DIR gets the rollout's files (`trajectories.jsonl`, `run.json`, kept workspaces, the pool for the LLM agent)
and the report in three forms: `report.json`, `report.md`, `report.png` (per-category bar chart).
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from clawgym import __version__
from clawgym.agent.kind import AgentSpec, get_kind, settings_data
from clawgym.core.atomic import write_text
from clawgym.core.jsonl import JsonlAppender, read_records_lenient
from clawgym.core.records import Trajectory
from clawgym.evaluation.report import build_report, render_chart, render_markdown
from clawgym.evaluation.suites import Suite
from clawgym.rollout.runner import TRAJECTORIES, RolloutOptions, run_rollout
from clawgym.rollout.setup import agent_session
from clawgym.sandbox.base import SandboxBackend


def _versions() -> dict[str, str]:
    out = {"clawgym": __version__, "python": platform.python_version(), "platform": platform.platform()}
    for mod in ("torch", "transformers", "openai"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001, S110 (a package missing, broken on import or without __version__ is not listed)
            pass
    return out


def _spec_record(spec: AgentSpec, own: Any) -> dict[str, Any]:
    """The agent spec as the report records it: the shared settings, and the kind's own as plain data."""
    return {**{k: v for k, v in asdict(spec).items() if k != "settings"}, "settings": settings_data(own)}


def run_eval(
    suite: Suite,
    spec: AgentSpec,
    backend: SandboxBackend,
    run_dir: Path,
    options: RolloutOptions,
    *,
    announce: Callable[[Any], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_done: Callable[[Trajectory], None] | None = None,
    chart: bool = True,
    judge: Any = None,
) -> dict[str, Any]:
    """Roll out the suite, verify, and write the report. With `judge` (a clawgym.verify.Judge), the episodes of
    tasks that have a rubric are re-scored from their kept workspaces with the judge (0.7 code + 0.3 rubric, or
    the task's weights) before the report is built; their verdicts are in RUN_DIR/verdicts.jsonl."""
    kind = get_kind(spec.name)
    run_dir.mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = {
        "suite": suite.name, "suite_source": suite.source, "agent": spec.name, "samples": options.samples,
        "jobs": options.jobs, "sandbox": backend.name, "limits": options.limits.model_dump(),
        "agent_spec": _spec_record(spec, kind.settings_of(spec)), "versions": _versions(), "suite_notes": suite.notes,
    }
    if kind.uses_model:
        settings["model"] = spec.model
    options.base_dir = options.base_dir or suite.base_dir
    with agent_session(spec, run_dir, suite.tasks, options, announce=announce) as session:
        tasks_file = suite.source if Path(suite.source).is_file() else None  # a folder import has no one file
        run_rollout(suite.tasks, session.factory, backend, run_dir, options, on_start=on_start, on_done=on_done,
                    settings={"suite": suite.name, **session.settings}, tasks_file=tasks_file)
        settings.update(session.settings)
        if session.client is not None:
            settings["usage"] = session.client.usage.as_dict()
    trajs = read_records_lenient(run_dir / TRAJECTORIES, Trajectory).records
    ids = {t.id for t in suite.tasks}
    judged = [t.id for t in suite.tasks if t.verifier.rubric is not None]
    if judge is not None and judged:
        from clawgym.verify.rescore import rescore_run

        wanted = set(judged)
        eps = [t.id for t in trajs if t.task_id in wanted and t.status != "infra_error"]
        res = rescore_run(run_dir, judge=judge, backend=backend, tasks=suite.tasks, jobs=options.jobs,
                          episode_ids=eps)
        new = {e.id: e.verdict for e in res.records}
        trajs = [t.model_copy(update={"verdict": new[t.id]}) if t.id in new else t for t in trajs]
        # the judged verdicts go into trajectories.jsonl too (its last record of an episode wins), so that it
        # never says "no judge configured" of an episode the report gives as judged
        latest = {t.id: t for t in trajs}
        with JsonlAppender(run_dir / TRAJECTORIES) as out:
            for tid in new:
                if tid in latest:
                    out.append(latest[tid])
        settings["judge"] = {"models": [c.model for c in judge.clients], "samples": judge.samples,
                             "episodes_judged": len(new), "not_rescored": res.not_rescored}
    report = build_report(suite.name, suite.tasks, [t for t in trajs if t.task_id in ids], options.samples, settings)
    write_text(run_dir / "report.json", json.dumps(report, indent=2, default=str) + "\n")
    write_text(run_dir / "report.md", render_markdown(report))
    if chart:
        try:
            render_chart(report, run_dir / "report.png")
        except ImportError:  # matplotlib missing: the table and Markdown still exist
            pass
    return report
