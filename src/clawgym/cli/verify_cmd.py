"""`clawgym verify RUN_DIR`: re-score an earlier rollout from its kept workspaces, with the rubric judge."""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from pathlib import Path

import typer

from clawgym.cli.common import err, error_lines, fail, out, progress_bar
from clawgym.cli.judge_opts import (
    JUDGE_BASE_URL_HELP,
    JUDGE_MAX_TOKENS,
    JUDGE_SAMPLES,
    JUDGE_SEED,
    JUDGE_TEMPERATURE,
    announce_judge_server,
    build_judge,
    judge_model_option,
    judge_url,
    unreachable_judge_model,
)
from clawgym.cli.options import jobs_option, request_timeout_option, sandbox_option


def verify_cmd(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="A run directory of `clawgym rollout`."),
    judge_model: list[str] | None = judge_model_option(" None: code checks only."),
    base_url: str | None = typer.Option(None, "--base-url", "--judge-base-url", help=JUDGE_BASE_URL_HELP),
    judge_samples: int = JUDGE_SAMPLES,
    judge_temperature: float | None = JUDGE_TEMPERATURE,
    judge_seed: int = JUDGE_SEED,
    judge_max_tokens: int = JUDGE_MAX_TOKENS,
    tasks_path: Path | None = typer.Option(None, "--tasks", help="The tasks file (default: the one in RUN_DIR/run.json)."),
    task_ids: list[str] | None = typer.Option(None, "--task", help="Only episodes of these task ids (repeatable)."),
    sandbox: str = sandbox_option("auto", "Sandbox backend for the code checks: auto, bwrap, docker, local, or a registered third-party one."),
    jobs: int = jobs_option(2, "Episodes re-scored at once."),
    cache_dir: Path | None = typer.Option(None, help="Judge cache (default RUN_DIR/judge_cache)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the judge cache."),
    llm_concurrency: int = typer.Option(8, min=1, help="Judge calls in flight at once."),
    request_timeout: float = request_timeout_option("Seconds one judge call may take."),
    calibration: bool = typer.Option(False, "--calibration", help="Also report judge vs code agreement and sample "
                                     "spread (RUN_DIR/calibration.json)."),
    code_threshold: float = typer.Option(0.5, min=0.0, max=1.0, help="Calibration: a code score >= this passes."),
    judge_threshold: float = typer.Option(0.5, min=0.0, max=1.0, help="Calibration: a rubric score >= this passes."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON instead of tables."),
) -> None:
    """Re-score a rollout's kept final workspaces (code checks in a fresh sandbox, rubric judge) without
    rerunning the agent; writes RUN_DIR/verdicts.jsonl and RUN_DIR/verdicts.summary.json."""
    from clawgym.core.errors import ClawgymError
    from clawgym.rollout import render_table, summarize
    from clawgym.sandbox import get_backend
    from clawgym.verify.rescore import (
        SUMMARY,
        VERDICTS,
        RescoreError,
        latest_trajectories,
        rescore_run,
        rescored_trajectories,
    )

    if not run_dir.is_dir():
        fail(f"{run_dir}: not a directory", 2)
    url = judge_url(base_url)
    bad = unreachable_judge_model(judge_model, url)
    if bad is not None:
        fail(f"judge model {bad!r} is not a local model; give --base-url (or set OPENAI_BASE_URL)", 2)
    try:
        backend = get_backend(sandbox)
    except (ValueError, ClawgymError) as exc:
        fail(str(exc), 2)
    if sandbox == "local":
        err.print("[bold yellow]warning:[/] sandbox 'local' runs the checks on this host with NO isolation")
    try:
        episodes = latest_trajectories(run_dir)
    except RescoreError as exc:
        fail(str(exc), 2)
    wanted = None
    if task_ids:
        wanted = [t.id for t in episodes if t.task_id in set(task_ids)]
    progress = progress_bar()
    with ExitStack() as stack:
        stack.callback(backend.close)
        judge = None
        if judge_model:
            judge = build_judge(stack, judge_model, url, run_dir=run_dir, samples=judge_samples,
                                temperature=judge_temperature, seed=judge_seed, max_tokens=judge_max_tokens,
                                concurrency=llm_concurrency, timeout=request_timeout,
                                cache_dir=None if no_cache else (cache_dir or run_dir / "judge_cache"),
                                announce=announce_judge_server(err))
        bar = progress.add_task("re-scoring", total=len(wanted) if wanted is not None else len(episodes))
        try:
            with progress:
                report = rescore_run(run_dir, judge=judge, backend=backend, tasks_path=tasks_path, jobs=jobs,
                                     episode_ids=wanted, on_done=lambda r: progress.update(bar, advance=1))
        except RescoreError as exc:
            fail(str(exc), 2)
        except ClawgymError as exc:
            fail(str(exc))
    error_lines(report.task_errors)
    for eid, why in sorted(report.not_rescored.items()):
        err.print(f"not re-scored: {eid}: {why}", highlight=False)
    calib = None
    if calibration:
        from clawgym.verify.calibration import calibration_report, render_calibration

        calib = calibration_report(report.records, code_threshold, judge_threshold)
        (run_dir / "calibration.json").write_text(json.dumps(calib, indent=2) + "\n")
    if as_json:
        sys.stdout.write(json.dumps({"summary": report.summary, "calibration": calib}, indent=2, default=str) + "\n")
    else:
        out.print(render_table(summarize(rescored_trajectories(run_dir, report.records)), title=f"{run_dir} (re-scored)"))
        s = report.summary
        prev = s.get("previous_mean_score")
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(s["statuses"].items())) or "none"
        mean = "-" if s["mean_score"] is None else f"{s['mean_score']:.4f}"
        out.print(f"verdicts: {statuses}; mean score {mean} (rollout: {'-' if prev is None else f'{prev:.4f}'}), "
                  f"{s['changed']} changed", highlight=False)
        j = s.get("judge")
        if j:
            out.print(f"judge {', '.join(j['models'])} x{j['samples']}: {j['requests']} calls, {j['cached']} from the "
                      f"cache; tokens {j['prompt_tokens']} prompt + {j['completion_tokens']} completion; "
                      f"{j['episodes_judge_error']} episodes unscored by judge errors ({j['rule_errors']} rules)",
                      highlight=False)
        if calib is not None:
            out.print(render_calibration(calib))
            out.print(f"calibration: {run_dir / 'calibration.json'}", highlight=False)
        out.print(f"verdicts: {run_dir / VERDICTS}, summary: {run_dir / SUMMARY}", highlight=False)
    if report.task_errors or any(why == "task not in the tasks file" for why in report.not_rescored.values()):
        raise typer.Exit(1)
