"""The CLI reference as Markdown, generated from the typer app (the documentation site builds it at build time).

``markdown_reference()`` walks the click command tree that typer builds from ``clawgym.cli.app.app`` and writes
one section per command and subcommand: its usage line, its help text, its arguments and its options (with
their defaults and ranges, as ``--help`` shows them). Nothing is written by hand, so the reference cannot drift
from the commands. The docs hook ``docs/hooks/cli_reference.py`` adds it to the site as ``reference/cli.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import typer

_SPECIAL = re.compile(r"([\\*_\[\]#])")


@dataclass(frozen=True)
class CommandDoc:
    """One command of the tree: its full path (``clawgym synth persona``), the click command and its context."""

    path: str
    command: Any  # a click command (typer 0.29 ships its own click: duck-typed, not isinstance-checked)
    ctx: Any

    @property
    def anchor(self) -> str:
        return anchor(self.path)


def anchor(path: str) -> str:
    """The heading id of a command's section: ``clawgym synth persona`` -> ``clawgym-synth-persona``."""
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


def root_command() -> Any:
    from clawgym.cli.app import app

    return typer.main.get_command(app)


def _is_group(command: Any) -> bool:
    return hasattr(command, "list_commands")


def _subcommands(command: Any, ctx: Any) -> list[tuple[str, Any]]:
    if not _is_group(command):
        return []
    subs = [(n, command.get_command(ctx, n)) for n in command.list_commands(ctx)]
    return [(n, s) for n, s in subs if s is not None and not getattr(s, "hidden", False)]


def walk(command: Any = None, ctx: Any = None) -> Iterator[CommandDoc]:
    """Every visible command and group, depth first, in the order ``--help`` lists them."""
    command = command or root_command()
    ctx = ctx or command.context_class(command, info_name="clawgym")
    yield CommandDoc(ctx.command_path, command, ctx)
    for name, sub in _subcommands(command, ctx):
        yield from walk(sub, sub.context_class(sub, info_name=name, parent=ctx))


def command_paths() -> list[str]:
    return [c.path for c in walk()]


def _escape(text: str) -> str:
    """Escape Markdown outside `code spans` (help texts quote commands in backticks)."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") and p.endswith("`") and len(p) > 1
                   else _SPECIAL.sub(r"\\\1", p).replace("<", "&lt;").replace(">", "&gt;") for p in parts)


def _paragraphs(text: str) -> str:
    """click's help text (``\\b`` keeps a paragraph's line breaks) as Markdown paragraphs."""
    out = []
    for para in re.split(r"\n\s*\n", text.strip()):
        lines = [ln for ln in para.splitlines() if ln.strip() != "\b"]
        if not lines:
            continue
        if para.lstrip().startswith("\b"):
            out.append("  \n".join(_escape(ln.strip()) for ln in lines))
        else:
            out.append(_escape(" ".join(ln.strip() for ln in lines)))
    return "\n\n".join(out)


def _section(doc: CommandDoc, level: int) -> list[str]:
    cmd, ctx = doc.command, doc.ctx
    lines = [f"{'#' * level} {doc.path} {{#{doc.anchor}}}", ""]
    usage = ctx.get_usage().removeprefix("Usage: ")
    lines += ["```text", usage, "```", ""]
    if cmd.help:
        lines += [_paragraphs(cmd.help), ""]
    args = [p for p in cmd.params if p.param_type_name == "argument"]
    opts = [p for p in cmd.params if p.param_type_name == "option" and not getattr(p, "hidden", False)]
    if args:
        lines += ["**Arguments**", ""]
        for p in args:
            rec = p.get_help_record(ctx) if hasattr(p, "get_help_record") else None
            name, helptext = (rec if rec else (p.human_readable_name, ""))
            lines.append(f"- `{name}`" + (f": {_escape(helptext)}" if helptext else ""))
        lines.append("")
    if opts:
        lines += ["**Options**", ""]
        for p in opts:
            rec = p.get_help_record(ctx)
            if rec is None:
                continue
            name, helptext = rec
            lines.append(f"- `{name}`" + (f": {_escape(helptext)}" if helptext else ""))
        lines.append("")
    subs = _subcommands(cmd, ctx)
    if subs:
        lines += ["**Commands**", ""]
        for n, s in subs:
            short = s.get_short_help_str(limit=120)
            path = f"{doc.path} {n}"
            lines.append(f"- [`{path}`](#{anchor(path)})" + (f": {_escape(short)}" if short else ""))
        lines.append("")
    return lines


def markdown_reference() -> str:
    """The whole CLI reference as one Markdown page."""
    from clawgym import __version__

    lines = [
        "# CLI reference",
        "",
        f"Generated from the typer app (`clawgym.cli.app`, clawgym {__version__}) when the documentation is built:",
        "every command and subcommand with its usage, help, arguments and options, as `clawgym COMMAND --help`",
        "prints them. The stage pages explain what the commands do and show them at work.",
        "",
    ]
    for doc in walk():
        depth = doc.path.count(" ")
        lines += _section(doc, min(2 + depth, 4) if depth else 2)
    return "\n".join(lines).rstrip() + "\n"
