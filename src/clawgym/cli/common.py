"""What every command module of the CLI shares: the consoles, the one error exit (`fail`), error lines, the
embedded-server announcement, the progress bar and the reading of a tasks file. Imports nothing of the other CLI modules."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

out = Console()
err = Console(stderr=True)


def error_line(message: object) -> None:
    """Print one `error: MESSAGE` line on stderr (the message is printed as is, never read as markup)."""
    err.print(f"[bold red]error:[/] {escape(str(message))}", highlight=False, soft_wrap=True)


def error_lines(errors: Iterable[object]) -> None:
    for e in errors:
        error_line(e)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print `error: MESSAGE` on stderr and exit with `code` (1: the work failed, 2: a bad argument)."""
    error_line(message)
    raise typer.Exit(code)


def announce_server(model: str) -> Callable[[Any], None]:
    """The on_start callback of an embedded model server: says where it runs and where it logs."""

    def announce(server) -> None:
        err.print(f"starting the embedded model server for {model} on {server.base_url} (log: {server.log_path})",
                  highlight=False)

    return announce


def progress_bar(description: str = "[bold]{task.description}", *, status: bool = False):
    """The commands' progress bar on stderr: DESCRIPTION, bar, done/total, elapsed time (and, with `status`, the
    task's `status` field)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn(description), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    if status:
        columns.append(TextColumn("{task.fields[status]}"))
    return Progress(*columns, console=err)


def load_tasks(path: Path) -> tuple[list, list]:
    """All good tasks of a tasks file, and the one-line errors of the bad lines."""
    from clawgym.core.jsonl import read_records_lenient
    from clawgym.core.records import Task

    if not path.exists():
        fail(f"{path}: no such file")
    read = read_records_lenient(path, Task)
    error_lines(read.errors)
    return read.records, read.errors

