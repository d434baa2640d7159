"""`clawgym pool ...`: inspect, curate and export the data pool of step records (see clawgym.pool)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from clawgym.cli.common import err, fail, out
from clawgym.cli.options import output_option
from clawgym.core.errors import ClawgymError

pool_app = typer.Typer(no_args_is_help=True, help="Inspect, curate and export the data pool of model calls.")


POOL_ARG = typer.Argument(..., metavar="POOL_DIR", help="The pool directory.")


@contextlib.contextmanager
def _pool(path: Path) -> Iterator[Any]:
    """Open an existing pool; any ClawgymError inside becomes one error line and exit code 1."""
    from clawgym.pool import Pool

    try:
        with Pool(path, create=False) as pool:
            yield pool
    except ClawgymError as exc:
        fail(str(exc))


def _dump(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, list):
        return ",".join(map(str, v)) or "-"
    return str(v)


@pool_app.command()
def stats(
    pool_dir: Path = POOL_ARG,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Counts: steps, trajectories, groups (ready ones), token sources, trainable data, bytes, bad lines."""
    with _pool(pool_dir) as pool:
        s = pool.stats()
        bad = pool.bad_lines()
    if as_json:
        _dump({**s, "bad_line_list": bad})
        return
    table = Table(title=f"pool {pool_dir}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    for key in ("steps", "trajectories", "ended", "groups", "ready_groups", "steps_with_token_ids",
                "trainable_steps", "trainable_trajectories", "events", "segments", "bad_lines"):
        table.add_row(key.replace("_", " "), f"{s[key]:,}")
    for src, n in s["token_sources"].items():
        table.add_row(f"token source {src}", f"{n:,}")
    for what, n in s["bytes"].items():
        table.add_row(f"{what} bytes", f"{n / 1e6:,.1f} MB")
    out.print(table)
    for b in bad[:20]:
        err.print(f"[yellow]bad line:[/] {escape(b['error'])}", highlight=False, soft_wrap=True)
    if len(bad) > 20:
        err.print(f"... and {len(bad) - 20} more bad lines (--json lists them all)")


def _step_row(step: Any) -> dict[str, Any]:
    resp = step.response or {}
    return {
        "step_id": step.step_id, "model": step.model, "status": step.status, "token_source": step.token_source,
        "prompt_ids": len(step.prompt_ids) if step.prompt_ids is not None else None,
        "response_ids": len(step.response_ids) if step.response_ids is not None else None,
        "finish_reason": resp.get("finish_reason"), "tool_calls": len(resp.get("tool_calls") or []),
        "latency_s": step.timings.get("latency_s"), "reward": step.reward, "trainable": step.trainable,
        "quality": step.quality, "tags": step.tags,
    }


@pool_app.command("list")
def list_(
    pool_dir: Path = POOL_ARG,
    trajectory: str | None = typer.Option(None, "--trajectory", help="Steps of this trajectory."),
    group: str | None = typer.Option(None, "--group", help="Only this group."),
    task: str | None = typer.Option(None, "--task", help="Only this task."),
    trainable: bool | None = typer.Option(None, "--trainable/--not-trainable", help="Only (non-)trainable ones."),
    tag: str | None = typer.Option(None, "--tag", help="Only those with this tag."),
    steps: bool = typer.Option(False, "--steps", help="List steps (the default with --trajectory)."),
    limit: int = typer.Option(50, "--limit", min=1, help="At most this many rows."),
    offset: int = typer.Option(0, "--offset", min=0, help="Skip this many rows first."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List trajectories (or steps, with --trajectory or --steps) as a table."""
    with _pool(pool_dir) as pool:
        if trajectory is not None or steps:
            rows = [_step_row(s) for s in pool.steps(trajectory_id=trajectory, group_id=group, task_id=task,
                                                      trainable=trainable, tag=tag, limit=limit, offset=offset)]
            title = f"steps of {trajectory}" if trajectory else "steps"
            cols = ["step_id", "model", "status", "token_source", "prompt_ids", "response_ids", "finish_reason",
                    "tool_calls", "latency_s", "reward", "trainable", "quality", "tags"]
        else:
            rows = [{k: t[k] for k in ("id", "group", "task", "status", "reward", "n_steps", "ended", "trainable",
                                       "quality", "tags", "notes")}
                    for t in pool.trajectories(group_id=group, task_id=task, trainable=trainable, tag=tag,
                                               limit=limit, offset=offset)]
            title = "trajectories"
            cols = ["id", "group", "task", "status", "reward", "n_steps", "ended", "trainable", "quality", "tags",
                    "notes"]
    if as_json:
        _dump(rows)
        return
    table = Table(title=f"{title} ({len(rows)} shown)")
    for c in cols:
        table.add_column(c.replace("_", " "), overflow="fold")
    for r in rows:
        table.add_row(*[escape(_fmt(len(r[c]) if c == "notes" else r[c])) for c in cols])
    out.print(table)


def _clip(text: str, n: int) -> str:
    return text if n <= 0 or len(text) <= n else text[:n] + f" ... [{len(text) - n} more characters]"


def _print_call(call: dict, max_chars: int) -> None:
    fn = call.get("function") or {}
    args = fn.get("arguments")
    args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    out.print(f"  -> {escape(str(fn.get('name')))}({escape(_clip(args, max_chars))})", highlight=False)


@pool_app.command()
def show(
    pool_dir: Path = POOL_ARG,
    step_id: str = typer.Argument(..., metavar="STEP_ID", help="'<trajectory_id>/<step_index>'."),
    max_chars: int = typer.Option(2000, "--max-chars", help="Clip each message to this many characters (0: all)."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole record as JSON."),
) -> None:
    """Show one step: its messages, the response, token ids, token source, outcome and curation."""
    from clawgym.pool.export import text_content

    with _pool(pool_dir) as pool:
        step = pool.get_step(step_id)
        history = [e for e in pool.events(trajectory_id=step.trajectory_id)
                   if e["type"] == "trajectory_end" or e.get("step_id") in (None, step_id)]
    if as_json:
        _dump(step.model_dump())
        return
    p = out.print
    p(f"[bold]step {escape(step.step_id)}[/]  trajectory {escape(step.trajectory_id)}  group "
      f"{escape(step.group_id)}  task {escape(str(step.task_id))}", highlight=False)
    p(f"model {escape(step.model)}  policy {escape(str(step.policy_version))}  status {step.status}"
      + (f" ({escape(step.error or '')})" if step.status == "error" else "")
      + f"  stream {_fmt(step.stream)}  created {step.created_at}", highlight=False)
    n = {k: (len(v) if v is not None else None) for k, v in
         (("prompt_ids", step.prompt_ids), ("response_ids", step.response_ids), ("logprobs", step.logprobs))}
    p(f"tokens: source [bold]{step.token_source}[/]  prompt ids {_fmt(n['prompt_ids'])}  response ids "
      f"{_fmt(n['response_ids'])}  logprobs {_fmt(n['logprobs'])}  check {escape(json.dumps(step.token_check))}",
      highlight=False)
    if step.usage or step.timings:
        p(f"usage {escape(json.dumps(step.usage))}  timings {escape(json.dumps(step.timings))}", highlight=False)
    p(f"outcome: trajectory {_fmt(step.trajectory_status)}  reward {_fmt(step.reward)}  last step "
      f"{_fmt(step.is_last)}  trainable {_fmt(step.trainable)}  quality {_fmt(step.quality)}  tags "
      f"{_fmt(step.tags)}", highlight=False)
    tools = step.request.get("tools") or []
    if tools:
        names = [(t.get("function") or {}).get("name", "?") for t in tools]
        p(f"tools: {escape(', '.join(names))}", highlight=False)
    params = step.request.get("params") or {}
    if params:
        p(f"params: {escape(json.dumps(params))}", highlight=False)
    p("")
    for i, m in enumerate(step.request.get("messages") or []):
        content = text_content(m.get("content"))
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False) if content is not None else ""
        p(f"[bold cyan]--- [{i}] {escape(str(m.get('role')))}[/]" +
          (f" (tool_call_id {escape(str(m['tool_call_id']))})" if m.get("tool_call_id") else ""), highlight=False)
        if content:
            p(escape(_clip(content, max_chars)), highlight=False)
        for c in m.get("tool_calls") or []:
            _print_call(c, max_chars)
    resp = step.response
    p(f"[bold green]--- response[/] (finish_reason {escape(str(resp.get('finish_reason')))})", highlight=False)
    if resp.get("reasoning"):
        p(f"[dim]{escape(_clip(resp['reasoning'], max_chars))}[/]", highlight=False)
    if resp.get("content"):
        p(escape(_clip(str(resp["content"]), max_chars)), highlight=False)
    for c in resp.get("tool_calls") or []:
        _print_call(c, max_chars)
    if history:
        p("")
        p("[bold]events[/]")
        for e in history:
            e = {k: v for k, v in e.items() if v not in (None, [], {})}
            p(f"  {escape(json.dumps(e, ensure_ascii=False))}", highlight=False)


@pool_app.command()
def curate(
    pool_dir: Path = POOL_ARG,
    trajectory: str | None = typer.Option(None, "--trajectory", help="Curate this trajectory ..."),
    step: str | None = typer.Option(None, "--step", help="... or this step."),
    quality: str | None = typer.Option(None, "--quality", help="Free text: good, bad, suspect, ... ('' clears)."),
    trainable: bool | None = typer.Option(None, "--trainable/--not-trainable", help="Include in training exports."),
    tag: list[str] = typer.Option([], "--tag", help="Add this tag (repeatable)."),
    untag: list[str] = typer.Option([], "--untag", help="Remove this tag (repeatable)."),
    note: str | None = typer.Option(None, "--note", help="Add a note."),
    by: str = typer.Option("user", "--by", help="Who curates (recorded in the event)."),
) -> None:
    """Change the curation flags of a trajectory or a step; the change is logged as an event."""
    if (trajectory is None) == (step is None):
        fail("give exactly one of --trajectory or --step", 2)
    with _pool(pool_dir) as pool:
        event = pool.curate(trajectory_id=trajectory, step_id=step, quality=quality, trainable=trainable,
                            add_tags=tag, remove_tags=untag, note=note, by=by)
    target = f"trajectory {trajectory}" if trajectory else f"step {step}"
    changes = {k: event[k] for k in ("quality", "trainable", "add_tags", "remove_tags", "note")
               if event[k] not in (None, [])}
    out.print(f"curated {escape(target)}: {escape(json.dumps(changes, ensure_ascii=False))}", highlight=False)


class ExportFormat(str, Enum):
    sft = "sft"
    rl = "rl"


@pool_app.command()
def export(
    pool_dir: Path = POOL_ARG,
    fmt: ExportFormat = typer.Option(..., "--format", help="sft: a conversation per trajectory; rl: a row per step."),
    output: Path = output_option("The JSONL file to write (atomically)."),
    min_reward: float | None = typer.Option(None, "--min-reward", help="Only trajectories with reward >= this."),
    ready_only: bool = typer.Option(False, "--ready-only", help="Only groups whose trajectories have all ended."),
    drop_quality: list[str] = typer.Option(["bad"], "--drop-quality",
                                           help="Drop data of this quality (repeatable; 'none' keeps all)."),
    algo: str = typer.Option("grpo", "--algo", help="rl: advantage preset: grpo, dr-grpo, rloo, reinforce++ "
                             "(formulas: clawgym.pool.credit)."),
    credit: str = typer.Option("outcome", "--credit", help="rl: outcome (one advantage per trajectory), step "
                               "(per step, from discounted returns normalized within the group by step) or progress "
                               "(step credit over the progress rewards the rollout recorded with --progress; "
                               "trajectories without them fall back to outcome credit and are listed in the summary) "
                               "or gae (each row's step_reward, the progress rewards with the same fallback, and a null "
                               "advantage: GAE needs the policy's values; `train rl --credit gae` fills it in)."),
    gamma: float = typer.Option(1.0, "--gamma", min=0.0, max=1.0, help="rl, --credit step: discount factor."),
    as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
) -> None:
    """Write a training file from the trainable data of the pool; print what was kept and dropped, and why."""
    from clawgym.pool import export_rl, export_sft
    from clawgym.pool.credit import CREDITS
    from clawgym.rl import algos

    if algo not in algos():
        fail(f"--algo {algo!r}: choose one of {', '.join(algos())}")
    if credit not in CREDITS:
        fail(f"--credit {credit!r}: choose one of {', '.join(CREDITS)}")
    drop = [q for q in drop_quality if q.lower() != "none"]
    with _pool(pool_dir) as pool:
        if fmt is ExportFormat.sft:
            report = export_sft(pool, output, min_reward=min_reward, ready_groups_only=ready_only, drop_quality=drop)
        else:
            report = export_rl(pool, output, min_reward=min_reward, ready_groups_only=ready_only, drop_quality=drop,
                               algo=algo, credit=credit, gamma=gamma)
    if as_json:
        _dump(report)
        return
    unit = "trajectories" if fmt is ExportFormat.sft else "steps"
    dropped = sum(report["dropped"].values())
    out.print(f"wrote {report['kept']:,} {unit} to {escape(str(output))} ({dropped:,} dropped)", highlight=False)
    for reason, n in report["dropped"].items():
        out.print(f"  dropped {n:,}: {escape(reason)}", highlight=False)
    for reason, n in (report.get("notes") or {}).items():
        out.print(f"  note {n:,}: {escape(reason)}", highlight=False)
    if report.get("token_ids"):
        where = ", ".join(f"{n:,} {src}" for src, n in sorted(report["token_ids"].items()))
        out.print(f"  token ids: {where} (engine: the serving engine's own; retokenized: the model's chat template "
                  "applied to the conversation)", highlight=False)


@pool_app.command()
def rebuild(pool_dir: Path = POOL_ARG) -> None:
    """Rebuild the pool's index from its JSONL files (after fixing a bad line by hand, say)."""
    with _pool(pool_dir) as pool:
        report = pool.rebuild_index()
    out.print(f"rebuilt the index of {escape(str(pool_dir))}: {report['indexed_steps']:,} steps, "
              f"{report['indexed_events']:,} events, {len(report['bad_lines'])} bad lines, "
              f"{report['seconds']:.1f} s", highlight=False)
    for b in report["bad_lines"][:20]:
        err.print(f"[yellow]bad line:[/] {escape(b)}", highlight=False, soft_wrap=True)
