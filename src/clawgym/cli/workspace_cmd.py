"""`clawgym workspace build`: task workspaces as real files."""

from __future__ import annotations

from pathlib import Path

import typer

from clawgym.cli.common import err, load_tasks, out
from clawgym.cli.options import TASKS_ARG

workspace_app = typer.Typer(no_args_is_help=True, help="Materialize task workspaces as real files.")


@workspace_app.command("build")
def workspace_build(
    tasks_path: Path = TASKS_ARG,
    out_dir: Path = typer.Option(..., "--out", help="Directory to build one workspace per task into."),
    overwrite: bool = typer.Option(False, help="Rebuild workspaces that already exist."),
) -> None:
    """Materialize each task's workspace files into OUT/<task id>/."""
    from clawgym.workspace import build_workspaces

    tasks, bad = load_tasks(tasks_path)
    results = build_workspaces(tasks, out_dir, base_dir=tasks_path.parent.resolve(), overwrite=overwrite)
    failed = 0
    for task_id, res in results:
        if isinstance(res, Exception):
            failed += 1
            err.print(f"[bold red]error:[/] {task_id}: {res}", highlight=False, soft_wrap=True)
    out.print(f"built {len(results) - failed} workspaces in {out_dir} ({failed} failed, {len(bad)} bad lines)")
    if failed or bad:
        raise typer.Exit(1)
