"""MkDocs hook: add the CLI reference, generated from the typer app at build time, as ``reference/cli.md``.

The page is never written to ``docs/``: it exists only in the build, made from ``clawgym.cli.reference``
(the source of this checkout, whatever clawgym the environment has installed), so it cannot go stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.structure.files import File

SRC = Path(__file__).resolve().parents[2] / "src"


def on_files(files, config):
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))
    from clawgym.cli.reference import markdown_reference

    files.append(File.generated(config, "reference/cli.md", content=markdown_reference()))
    return files
