"""Trivial cheats: what a lazy policy can do without reading anything, replayed on a task to prove its reward
does not pay for it.

Validation (:mod:`clawgym.synth.validate`) proves that the reference scores 1, the untouched workspace 0 and a
partial solution in between; it also replays three cheats and rejects a task on which any of them scores
:data:`THRESHOLD` or more:

* ``empty``: every output file written empty;
* ``copy-input``: the first input file copied to every output path;
* ``echo-request``: the request's own text written into every output path.

A task's *outputs* are the files its reference solution leaves new or changed in the workspace (the initial
workspace against the reference's final one: this covers solutions that write files and ones that run a
program alike); its *inputs* are the files of its initial workspace. A cheat is a list of `write` calls, so it
is replayed like any reference solution (as host file operations confined to the workspace) and graded by the
task's own grade().
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from clawgym.core.records import ReferenceSolution, Task, ToolCall

CHEATS = ("empty", "copy-input", "echo-request")
THRESHOLD = 0.3  # a task on which a cheat scores this much or more is rejected
# what tools leave behind while the reference runs (caches, a repository's internals): not outputs
_NOT_OUTPUT_PARTS = {".git", "__pycache__", ".pytest_cache"}
_SKILLS_DIR = "skills"


def _files(root: Path) -> dict[str, os.stat_result]:
    """{relative path: lstat} of the regular files under `root` (symlinks neither followed nor listed)."""
    out: dict[str, os.stat_result] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        parts = [] if rel_dir == "." else rel_dir.split(os.sep)
        dirnames[:] = sorted(d for d in dirnames if d not in _NOT_OUTPUT_PARTS)
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode):
                out["/".join([*parts, name])] = st
    return out


def _same_bytes(a: Path, b: Path) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 16), fb.read(1 << 16)
            if x != y:
                return False
            if not x:
                return True


def output_paths(before: Path, after: Path) -> list[str]:
    """The files the reference left new or changed: `after` (its final workspace) against `before` (the
    untouched one), sorted."""
    old = _files(before)
    out = []
    for rel, st in _files(after).items():
        prev = old.get(rel)
        if prev is None or prev.st_size != st.st_size:
            out.append(rel)
        elif prev.st_mtime_ns != st.st_mtime_ns and not _same_bytes(before / rel, after / rel):
            # (the states are copies that keep modification times: the same size and time is the same file)
            out.append(rel)
    return sorted(out)


def first_input(task: Task, workspace: Path) -> tuple[str, str] | None:
    """(path, text) of the task's first input file: the first text file of its initial workspace that the
    request names (skill folders placed in the workspace are not inputs of the work), else the first text file
    at all; None when the workspace holds no text file. `workspace` is the untouched workspace."""
    skills = bool(task.skills)
    texts: list[tuple[str, str]] = []
    for f in task.workspace.files:
        if skills and f.path.split("/", 1)[0] == _SKILLS_DIR:
            continue
        try:
            text = (workspace / f.path).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append((f.path, text))
    named = [t for t in texts if t[0] in task.instruction]
    return (named or texts or [None])[0]


def empty(task: Task, outputs: list[str], workspace: Path) -> list[ToolCall]:
    """Every output path written empty."""
    return [ToolCall(name="write", arguments={"path": p, "content": ""}) for p in outputs]


def copy_input(task: Task, outputs: list[str], workspace: Path) -> list[ToolCall]:
    """The first input file (see :func:`first_input`) copied to every output path."""
    first = first_input(task, workspace)
    text = first[1] if first else ""
    return [ToolCall(name="write", arguments={"path": p, "content": text}) for p in outputs]


def echo_request(task: Task, outputs: list[str], workspace: Path) -> list[ToolCall]:
    """The request's text written into every output path."""
    return [ToolCall(name="write", arguments={"path": p, "content": task.instruction}) for p in outputs]


CHEAT_STEPS: dict[str, Callable[[Task, list[str], Path], list[ToolCall]]] = {
    "empty": empty, "copy-input": copy_input, "echo-request": echo_request,
}


def cheat_task(task: Task, cheat: str, outputs: list[str], workspace: Path) -> Task:
    """`task` with the cheat's writes as its reference solution, to replay with the oracle agent."""
    steps = CHEAT_STEPS[cheat](task, outputs, workspace)
    return task.model_copy(update={"reference": ReferenceSolution(steps=steps, final_message="Done.")})


def state_name(cheat: str) -> str:
    """The directory a cheat's workspace state is graded in (next to `noop`, `partial`, `oracle`)."""
    return f"cheat-{cheat}"
