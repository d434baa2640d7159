"""The `clawgym` command line: a thin layer over the library, one command per stage.

This is the root only: each command or group lives in its own module (clawgym.cli.*_cmd) and is registered
here, in the order `clawgym --help` lists them (commands first, then groups, each in registration order)."""

from __future__ import annotations

import os
import sys

import typer

from clawgym import __version__
from clawgym.cli import data_cmd
from clawgym.cli.agents_cmd import agents_app
from clawgym.cli.common import err, error_line, out
from clawgym.cli.eval_cmd import eval_cmd
from clawgym.cli.pool_cmd import pool_app
from clawgym.cli.records_cmd import schema, show, validate
from clawgym.cli.rollout_cmd import rollout
from clawgym.cli.sandbox_cmd import sandbox_app
from clawgym.cli.serve_cmd import gateway_cmd, serve
from clawgym.cli.skills_cmd import skills_app
from clawgym.cli.summary_cmd import summary
from clawgym.cli.synth_cmd import synth_app
from clawgym.cli.train_cmd import filter_cmd, train_app
from clawgym.cli.verify_cmd import verify_cmd
from clawgym.cli.view_cmd import view_cmd
from clawgym.cli.workspace_cmd import workspace_app
from clawgym.core.errors import ClawgymError

app = typer.Typer(
    name="clawgym", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="Synthesize, run, verify and train Claw-style personal agents in sandboxed workspaces.",
)


def version() -> None:
    """Print the clawgym version."""
    out.print(__version__)


for name, command in (("verify", verify_cmd), ("filter", filter_cmd), ("view", view_cmd), ("version", version),
                      ("schema", schema), ("validate", validate), ("show", show), ("rollout", rollout),
                      ("eval", eval_cmd), ("serve", serve), ("gateway", gateway_cmd), ("summary", summary)):
    app.command(name)(command)
data_cmd.register(app)
for name, group in (("workspace", workspace_app), ("sandbox", sandbox_app), ("synth", synth_app),
                    ("pool", pool_app), ("train", train_app), ("agents", agents_app), ("skills", skills_app)):
    app.add_typer(group, name=name)


def main() -> None:
    try:
        app()
    except ClawgymError as exc:
        error_line(exc)
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted")
        # Records are appended whole and running sandboxes are stopped by then; exit now rather than join worker
        # threads that may still sit in a backend call (the interpreter joins them at exit otherwise).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)


if __name__ == "__main__":
    main()
