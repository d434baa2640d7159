"""run.json's provenance (clawgym.rollout.provenance) on real git repositories and files: the source's commit and
whether its tree is dirty, nothing (and no failure) outside a checkout, the tasks file's digest, the packages."""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import subprocess
from pathlib import Path

import pytest

from clawgym import __version__
from clawgym.checks import CHECKLIB_SOURCE
from clawgym.checks.checklib import CHECKLIB_VERSION
from clawgym.rollout.provenance import (
    checklib_info,
    file_sha256,
    package_versions,
    run_provenance,
    source_revision,
)


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
           "HOME": str(repo), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def checkout(tmp_path):
    """A git repository with a package `src/pkg` committed in it."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    pkg = repo / "src" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("x = 1\n")
    (repo / "README").write_text("r\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    return repo, pkg


def test_the_commit_of_a_clean_checkout(checkout):
    repo, pkg = checkout
    head = _git(repo, "rev-parse", "HEAD").strip()
    assert source_revision(pkg) == {"git_commit": head, "git_dirty": False}
    (repo / "notes.txt").write_text("a file outside the package that git does not track\n")
    assert source_revision(pkg) == {"git_commit": head, "git_dirty": False}


@pytest.mark.parametrize("change", ["edit", "edit-outside", "untracked-inside", "staged-rename"])
def test_a_changed_tree_is_dirty(checkout, change):
    repo, pkg = checkout
    if change == "edit":
        (pkg / "mod.py").write_text("x = 2\n")
    elif change == "edit-outside":
        (repo / "README").write_text("changed\n")
    elif change == "untracked-inside":
        (pkg / "new.py").write_text("")
    else:
        _git(repo, "mv", "src/pkg/mod.py", "src/pkg/renamed.py")
    assert source_revision(pkg)["git_dirty"] is True


def test_no_source_outside_a_checkout_or_for_an_untracked_package(tmp_path, checkout):
    plain = tmp_path / "plain" / "pkg"
    plain.mkdir(parents=True)
    (plain / "__init__.py").write_text("")
    assert source_revision(plain) is None
    repo, _ = checkout
    installed = repo / "venv" / "pkg"  # a package installed inside some other repository, not tracked there
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text("")
    assert source_revision(installed) is None


def test_git_missing_gives_no_source_and_no_failure(checkout, monkeypatch):
    _, pkg = checkout
    monkeypatch.setenv("PATH", str(pkg))  # no git there
    assert source_revision(pkg) is None
    prov = run_provenance(None)
    assert "source" not in prov and prov["packages"]["clawgym"] == __version__


def test_the_tasks_file_digest_and_the_rest(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(b'{"id": "a"}\n' * 1000)
    prov = run_provenance(tasks)
    assert prov["tasks_file"] == str(tasks)
    assert prov["tasks_sha256"] == hashlib.sha256(tasks.read_bytes()).hexdigest() == file_sha256(tasks)
    assert prov["checklib"] == checklib_info() == {
        "version": CHECKLIB_VERSION, "sha256": hashlib.sha256(CHECKLIB_SOURCE.encode()).hexdigest()}
    missing = run_provenance(tmp_path / "gone.jsonl")  # an unreadable file: named, not digested
    assert missing["tasks_file"].endswith("gone.jsonl") and "tasks_sha256" not in missing
    assert "tasks_file" not in run_provenance(None)


def test_package_versions_are_the_installed_ones():
    versions = package_versions()
    assert versions["clawgym"] == __version__ and versions["pydantic"] == importlib.metadata.version("pydantic")
    for name in ("torch", "transformers", "peft", "trl", "ray"):
        try:
            assert versions[name] == importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            assert name not in versions
