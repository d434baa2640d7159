"""Walking and removing directory trees an agent built: iteratively, following no link, with bounds.

A workspace is hostile, and its depth is the agent's choice: a tree 1,100 directories deep is a one-line shell
loop. Python 3.11's `os.walk`, `shutil.rmtree` and any recursive walk raise RecursionError on it, which used to
surface as an infrastructure error (unscored, retried, re-run on every resume): a way for a policy to erase its
failures from the mean. Everything here uses an explicit stack, holds O(1) file descriptors however deep the
tree, and never follows a symlink.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# Bounds of a walk over a workspace (a snapshot, a listing): deeper directories and entries past the count are
# left out and counted as truncated, never a crash. A path this deep is longer than PATH_MAX anyway.
MAX_DEPTH = 512
MAX_ENTRIES = 500_000


def _ident(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def remove_contents(dir_fd: int) -> None:
    """Remove everything inside the directory `dir_fd` (not the directory itself), following no link, at any
    depth, with at most two file descriptors open at a time besides `dir_fd`. Entries that vanish meanwhile
    are fine; a directory that changed identity under the walk (moved by someone) raises OSError."""
    cur = os.dup(dir_fd)
    top = _ident(cur)
    stack: list[tuple[str, tuple[int, int]]] = []  # (name in parent, parent's identity) of each level below top
    try:
        while True:
            sub = None
            for name in os.listdir(cur):
                try:
                    st = os.stat(name, dir_fd=cur, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    sub = name
                    break
                try:
                    os.unlink(name, dir_fd=cur)
                except FileNotFoundError:
                    pass
            if sub is not None:  # down into the first subdirectory left
                nfd = os.open(sub, _DIR_FLAGS, dir_fd=cur)
                stack.append((sub, _ident(cur)))
                os.close(cur)
                cur = nfd
                continue
            if not stack:  # `dir_fd` itself is empty now
                return
            name, parent_id = stack.pop()  # empty: up, and remove it
            up = os.open("..", _DIR_FLAGS, dir_fd=cur)
            if _ident(up) != parent_id:
                os.close(up)
                raise OSError(f"directory {name!r} was moved while it was removed")
            os.close(cur)
            cur = up
            try:
                os.rmdir(name, dir_fd=cur)
            except FileNotFoundError:
                pass
            if not stack and _ident(cur) != top:
                raise OSError("the top directory changed while it was emptied")
    finally:
        os.close(cur)


def remove_at(dir_fd: int, name: str) -> None:
    """Remove the entry `name` of the directory `dir_fd`, whatever it is (a file, link, FIFO, device node,
    socket, or a directory tree of any depth), without following a link or opening anything but
    directories."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        return
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        remove_contents(fd)
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def remove_tree(path: str | Path, ignore_errors: bool = False) -> None:
    """`shutil.rmtree` without its recursion (a tree of any depth), following no link; `path` itself may be a
    link or a file, which is then unlinked."""
    path = os.fspath(path)
    parent, name = os.path.split(os.path.normpath(path))
    try:
        pfd = os.open(parent or ".", _DIR_FLAGS)
    except OSError:
        if ignore_errors:
            return
        raise
    try:
        remove_at(pfd, name)
    except OSError:
        if not ignore_errors:
            raise
    finally:
        os.close(pfd)


@dataclass
class WalkStats:
    """What a bounded walk left out: directories past `MAX_DEPTH` and entries past `MAX_ENTRIES`
    (`truncated`), and directories it could not list (`errors`)."""

    truncated: int = 0
    errors: int = 0


def walk_sorted(root: str | Path, stats: WalkStats, max_depth: int = MAX_DEPTH,
                max_entries: int = MAX_ENTRIES) -> Iterator[tuple[str, os.DirEntry]]:
    """(path relative to `root`, entry) of every entry under `root` in sorted pre-order (each directory right
    before what it holds, siblings in name order: the order of a recursive walk), never following a link (a
    link to a directory is yielded, not entered). Iterative and bounded (see :class:`WalkStats`)."""

    def listing(path: str) -> Iterator[os.DirEntry]:
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            stats.errors += 1
            return iter(())
        return iter(entries)

    stack: list[tuple[Iterator[os.DirEntry], str, int]] = [(listing(os.fspath(root)), "", 0)]
    seen = 0
    while stack:
        entries, rel, depth = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        if seen >= max_entries:
            stats.truncated += 1
            continue
        seen += 1
        name = f"{rel}{entry.name}"
        yield name, entry
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if is_dir:
            if depth + 1 >= max_depth:
                stats.truncated += 1
            else:
                stack.append((listing(entry.path), name + "/", depth + 1))
