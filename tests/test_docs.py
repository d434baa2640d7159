"""The documentation: the README's links, the CLI reference generated from the typer app, the strict site build.

The site (mkdocs.yml, docs/) is built with `mkdocs build --strict`: a broken link or anchor, a page missing from
the nav, a nav entry without a page all fail it. The build is skipped with a reason when mkdocs is not installed
(`pip install -e '.[docs]'`; `make install` installs it) and fails instead under CLAWGYM_REQUIRE_ALL=1.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from conftest import require

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _cli_tree() -> dict[str, object]:
    """Every visible command path of the typer app, walked here independently of clawgym.cli.reference."""
    from clawgym.cli.app import app

    root = typer.main.get_command(app)
    found: dict[str, object] = {}

    def visit(cmd, ctx, path):
        found[path] = cmd
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not getattr(sub, "hidden", False):
                    visit(sub, sub.context_class(sub, info_name=name, parent=ctx), f"{path} {name}")

    visit(root, root.context_class(root, info_name="clawgym"), "clawgym")
    return found


def test_readme_is_the_front_door():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < 250, "reference material belongs in docs/, the README stays short"
    assert "make demo" in text and "make test" in text
    for target in ["demo", "test", "docs", "docs-serve"]:
        assert re.search(rf"^{re.escape(target)}:", (REPO / "Makefile").read_text(), re.M), target


def test_readme_relative_links_resolve():
    links = LINK.findall((REPO / "README.md").read_text())
    assert links
    for target in links:
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        assert (REPO / path).exists(), f"README.md links to {target}, which does not exist"


def test_docs_pages_link_only_to_what_exists():
    """The same check for the hand-written pages (the strict build checks them too, when mkdocs is installed)."""
    docs = REPO / "docs"
    for page in docs.glob("*.md"):
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if path == "reference/cli.md":  # generated at build time
                continue
            assert (page.parent / path).exists(), f"{page.name} links to {target}, which does not exist"


def test_cli_reference_documents_every_command_and_option():
    from clawgym.cli.reference import anchor, markdown_reference

    text = markdown_reference()
    tree = _cli_tree()
    assert len(tree) > 30
    for path, cmd in tree.items():
        heading = re.search(rf"^#+ {re.escape(path)} \{{#{anchor(path)}\}}$", text, re.M)
        assert heading, f"`{path}` has no section in the CLI reference"
        section = text[heading.end():].split("\n#", 1)[0]
        for p in cmd.params:
            if p.param_type_name == "option" and not getattr(p, "hidden", False):
                assert p.opts[0] in section, f"`{path}`: option {p.opts[0]} missing from its section"
        if cmd.help:
            first = cmd.help.strip().split("\n")[0].split()[0]
            assert first in section


def _mkdocs(config_dir: Path, site: Path) -> subprocess.CompletedProcess:
    require(importlib.util.find_spec("mkdocs") is not None and importlib.util.find_spec("material") is not None,
            "the docs build needs mkdocs and mkdocs-material: pip install -e '.[docs]' (make install does)")
    paths = [str(REPO / "src")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=os.pathsep.join(paths))
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=config_dir, env=env, capture_output=True, text=True, timeout=600)


def test_docs_build_strict(tmp_path):
    proc = _mkdocs(REPO, tmp_path / "site")
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert "WARNING" not in log, log
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    for path in _cli_tree():
        assert f'id="{re.sub(r"[^a-z0-9]+", "-", path)}"' in cli, f"`{path}` missing from the built CLI reference"
    for page in ["learning", "synthesis", "cluster", "security", "sandbox-protocol", "sample_tasks"]:
        assert (tmp_path / "site" / page / "index.html").exists(), page
    assert not (tmp_path / "site" / "hooks").exists()


@pytest.mark.parametrize("damage", ["broken_link", "broken_anchor", "page_not_in_nav"])
def test_docs_build_fails_on_broken_links_and_missing_pages(tmp_path, damage):
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    if damage == "broken_link":
        (copy / "docs" / "view.md").write_text((copy / "docs" / "view.md").read_text() + "\n[x](no-such-page.md)\n")
    elif damage == "broken_anchor":
        (copy / "docs" / "view.md").write_text((copy / "docs" / "view.md").read_text() + "\n[x](training.md#nope)\n")
    else:
        (copy / "docs" / "orphan.md").write_text("# An orphan\n")
    proc = _mkdocs(copy, tmp_path / "site")
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Aborted with" in log and "WARNING" in log, log
