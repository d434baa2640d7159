"""Where a run came from, for its run.json: the clawgym source, the tasks file, the check library, the packages.

    {"source": {"git_commit": "<sha>", "git_dirty": false},       # only when clawgym runs from a git checkout
     "tasks_file": "tasks.jsonl", "tasks_sha256": "<sha256 of the file's bytes>",
     "checklib": {"version": 1, "sha256": "<sha256 of the check library's source>"},
     "packages": {"clawgym": "0.1.0", "python": "3.12.3", "pydantic": "2.14.3", "torch": "2.13.0", ...}}

Nothing here fails a run: a part that cannot be found out (no git, not a checkout, an unreadable file, a package
not installed) is left out.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import clawgym

PACKAGES = ("pydantic", "torch", "transformers", "peft", "trl", "ray")
"""The packages whose versions a run records (with clawgym's and python's) when they are installed."""

GIT_TIMEOUT_S = 10.0
# variables that would point git at another repository than the one clawgym's source is in
_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
            "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES")


def _git(cwd: Path, *args: str) -> str | None:
    """git's stdout, or None when git is missing, fails or takes too long."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV}
    env["GIT_OPTIONAL_LOCKS"] = "0"  # `git status` must not take the index lock of someone working there
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def source_revision(package_dir: Path | None = None) -> dict[str, Any] | None:
    """The git commit of clawgym's source and whether the tree differs from it, or None when the source is not
    a git checkout (an installed package, no git). Dirty: a tracked file changed anywhere in the tree, or a file
    git does not track inside the package."""
    pkg = Path(package_dir or Path(clawgym.__file__).parent).resolve()
    # the package must be tracked where it lies: a package installed into a virtualenv inside some other
    # repository is not a checkout of clawgym
    if not (_git(pkg, "ls-files", "--", "__init__.py") or "").strip():
        return None
    commit = (_git(pkg, "rev-parse", "--verify", "HEAD") or "").strip()
    prefix = _git(pkg, "rev-parse", "--show-prefix")
    status = _git(pkg, "status", "--porcelain=v1", "-z", "--untracked-files=normal")
    if not commit or prefix is None or status is None:
        return None
    prefix = prefix.strip()
    dirty = False
    entries = iter(status.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC":  # a rename or copy: the original path is the next entry
            next(entries, None)
        if code != "??" or path.startswith(prefix):
            dirty = True
            break
    return {"git_commit": commit, "git_dirty": dirty}


def file_sha256(path: str | os.PathLike) -> str | None:
    """The sha256 of a file's bytes, or None when it cannot be read."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def checklib_info() -> dict[str, Any] | None:
    """The check library's version and the sha256 of its source (checklib.py and its extensions, as one file):
    the library that grades tasks whose checks are data."""
    try:
        from clawgym.checks import current_checklib

        ref, _ = current_checklib()
    except Exception:  # noqa: BLE001 (never fail a run over its provenance)
        return None
    return {"version": ref.version, "sha256": ref.sha256}


def package_versions() -> dict[str, str]:
    """clawgym's version (the code running), python's, and those of PACKAGES that are installed."""
    out = {"clawgym": clawgym.__version__, "python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except (metadata.PackageNotFoundError, ValueError):
            continue
    return out


def run_provenance(tasks_file: str | os.PathLike | None = None) -> dict[str, Any]:
    """What run.json records under `provenance` (see the module's docstring); `tasks_file` as the run was given
    it (None: the tasks came from somewhere else than one file, and no digest is recorded)."""
    out: dict[str, Any] = {}
    source = source_revision()
    if source is not None:
        out["source"] = source
    if tasks_file is not None:
        out["tasks_file"] = str(tasks_file)
        digest = file_sha256(tasks_file)
        if digest is not None:
            out["tasks_sha256"] = digest
    lib = checklib_info()
    if lib is not None:
        out["checklib"] = lib
    out["packages"] = package_versions()
    return out
