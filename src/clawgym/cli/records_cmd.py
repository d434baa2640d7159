"""`clawgym schema`, `clawgym validate`, `clawgym show`: the record types, and tasks files read, checked and shown."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from clawgym.cli.common import err, error_lines, fail, load_tasks, out
from clawgym.cli.options import TASK_IDS, TASKS_ARG


def schema(
    record: str | None = typer.Argument(None, help="Record name: task, trajectory, verdict, workspace, verifier."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout."),
) -> None:
    """Print the JSON Schema of a record type (all of them when no name is given)."""
    from clawgym.core.records import RECORD_TYPES
    from clawgym.core.schema import record_schema

    if record is not None and record not in RECORD_TYPES:
        fail(f"unknown record {record!r}; known: {', '.join(sorted(RECORD_TYPES))}", 2)
    data = record_schema(record) if record else {name: record_schema(name) for name in sorted(RECORD_TYPES)}
    text = json.dumps(data, indent=2)
    if output:
        output.write_text(text + "\n")
    else:
        sys.stdout.write(text + "\n")


def validate(
    path: Path = typer.Argument(..., help="A JSONL file of records."),
    record: str = typer.Option("task", help="Record type of each line: task, trajectory, ..."),
) -> None:
    """Check every line of a JSONL file against its record type; list every bad line."""
    from clawgym.core.jsonl import read_records_lenient
    from clawgym.core.records import RECORD_TYPES

    if record not in RECORD_TYPES:
        fail(f"unknown record {record!r}; known: {', '.join(sorted(RECORD_TYPES))}", 2)
    if not path.exists():
        fail(f"{path}: no such file")
    read = read_records_lenient(path, RECORD_TYPES[record])
    error_lines(read.errors)
    unknown = _unknown_checks(read.records) if record == "task" else []
    for line in unknown:
        err.print(f"{path}: {line}", highlight=False, soft_wrap=True)
    out.print(f"{path}: {len(read.records) - len(unknown)} valid {record} records, "
              f"{len(read.errors) + len(unknown)} bad lines")
    if read.errors or unknown:
        raise typer.Exit(1)


def _unknown_checks(tasks: list) -> list[str]:
    """Tasks whose checks (as data) name a function this clawgym's check library does not register."""
    from clawgym.checks import UnknownCheckError, validate_call

    bad = []
    for t in tasks:
        code = t.verifier.code
        for call in (code.checks if code is not None and code.kind == "checks" else []):
            try:
                validate_call(call)
            except UnknownCheckError as exc:
                bad.append(f"task {t.id}: {exc}")
                break
    return bad


def show(
    tasks_path: Path = TASKS_ARG,
    task_ids: list[str] | None = TASK_IDS,
    limit: int = typer.Option(5, min=1, help="How many tasks to show."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write Markdown to this file."),
) -> None:
    """Render tasks as readable Markdown: request, workspace, checks, reference solution."""
    from rich.markdown import Markdown

    from clawgym.core.render import task_markdown

    tasks, bad = load_tasks(tasks_path)
    if task_ids:
        tasks = [t for t in tasks if t.id in set(task_ids)]
    text = "\n".join(task_markdown(t) for t in tasks[:limit])
    if output:
        output.write_text(text)
        out.print(f"wrote {min(limit, len(tasks))} tasks to {output}", highlight=False)
    else:
        out.print(Markdown(text))
    if bad:
        raise typer.Exit(1)

