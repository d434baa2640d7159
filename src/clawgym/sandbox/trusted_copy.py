"""Writing trusted files (a checker) into a workspace that an agent has controlled.

By the time a checker is copied in, the agent's processes are dead, but everything it left in the workspace is
still there and hostile: a symlink at the checker's path (to a host file), a FIFO (an open for writing blocks
forever), a device node (a write goes to the host's device), a directory, or a Python module next to where the
checker runs (`reward/json.py`, imported by the checker instead of the standard library). So each checker path
is walked from the workspace root through directory fds opened with O_NOFOLLOW, whatever is in the way is
removed (never followed, never opened), and the file is created anew with O_CREAT | O_EXCL | O_NOFOLLOW |
O_NONBLOCK and written only once fstat says it is a regular file. A directory that holds nothing but checker
files (ClawGym's `reward/`) is emptied first, so nothing the agent put there runs beside the checker.
"""

from __future__ import annotations

import base64
import binascii
import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from clawgym.core.fstree import remove_at
from clawgym.core.records import WorkspaceFile

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class TrustedCopyError(OSError):
    """A trusted file could not be placed (the workspace is gone, a removal failed)."""


def remove_entry(dir_fd: int, name: str) -> None:
    """Remove `name` in the directory `dir_fd`, whatever it is (file, symlink, FIFO, socket, device node,
    directory tree), without following a symlink and without opening anything but directories."""
    remove_at(dir_fd, name)  # iterative: a tree of any depth the agent built


def _payload(f: WorkspaceFile, assets_dir: Path | None) -> bytes:
    if f.content is not None:
        return f.content.encode("utf-8")
    if f.content_b64 is not None:
        try:
            return base64.b64decode(f.content_b64, validate=True)
        except (binascii.Error, ValueError):
            raise TrustedCopyError(errno.EINVAL, f"{f.path}: content_b64 is not valid base64") from None
    # an asset or a generated file: built in a private temp dir first (trusted code, trusted place), then copied
    from clawgym.workspace.materialize import write_files

    with tempfile.TemporaryDirectory(prefix="clawgym-checker-") as tmp:
        write_files([f], Path(tmp), assets_dir)
        return (Path(tmp) / f.path).read_bytes()


def _open_dir_making_way(parent_fd: int, name: str) -> int:
    """An O_NOFOLLOW fd of directory `name` under `parent_fd`, replacing whatever non-directory is there."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        remove_entry(parent_fd, name)
    os.mkdir(name, 0o755, dir_fd=parent_fd)
    return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)


def write_trusted(root_fd: int, rel_path: str, data: bytes, mode: int | None = None) -> None:
    """Create `rel_path` under the directory `root_fd` as a NEW regular file holding `data`, removing anything
    that was at that path or in the way of its parents."""
    parts = [p for p in rel_path.split("/") if p and p != "."]
    if not parts or ".." in parts:
        raise TrustedCopyError(errno.EINVAL, f"{rel_path}: not a path inside the workspace")
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            nfd = _open_dir_making_way(fd, part)
            os.close(fd)
            fd = nfd
        remove_entry(fd, parts[-1])
        ffd = os.open(parts[-1], _NEW_FILE_FLAGS, 0o644 if mode is None else mode, dir_fd=fd)
    finally:
        os.close(fd)
    try:
        if not stat.S_ISREG(os.fstat(ffd).st_mode):  # cannot happen with O_CREAT|O_EXCL; checked all the same
            raise TrustedCopyError(errno.EINVAL, f"{rel_path}: not a regular file")
        view = memoryview(data)
        while view:
            view = view[os.write(ffd, view):]
        if mode is not None:
            os.fchmod(ffd, mode)
    finally:
        os.close(ffd)


def checker_only_dirs(files: Sequence[WorkspaceFile], initial: Iterable[str] = ()) -> list[str]:
    """Top-level directories that hold checker files and nothing of the task's initial workspace (`initial`:
    the initial workspace's file and directory paths): these are emptied before the checker goes in."""
    taken = {p.split("/", 1)[0] for p in initial}
    tops = {f.path.split("/", 1)[0] for f in files if "/" in f.path}
    return sorted(tops - taken)


def place_files(
    root: Path, files: Sequence[WorkspaceFile], *, assets_dir: Path | None = None, empty_dirs: Iterable[str] = ()
) -> None:
    """Copy trusted `files` into the workspace directory `root` (see the module docstring); `empty_dirs`
    (top-level names) are removed entirely first."""
    payloads = [(f, _payload(f, assets_dir)) for f in files]  # before touching the workspace
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for name in empty_dirs:
            if name and "/" not in name and name not in (".", ".."):
                remove_entry(root_fd, name)
        for f, data in payloads:
            if f.mode is not None and not 0 <= f.mode <= 0o7777:
                raise TrustedCopyError(errno.EINVAL, f"{f.path}: mode {f.mode} is not a permission value")
            write_trusted(root_fd, f.path, data, f.mode)
    finally:
        os.close(root_fd)


def clear_dir(root: Path) -> None:
    """Remove everything in the directory `root` (not `root` itself), following no link."""
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for name in os.listdir(root_fd):
            remove_entry(root_fd, name)
    finally:
        os.close(root_fd)


def _copy_file_into(src: str, dir_fd: int, name: str, st: os.stat_result) -> None:
    remove_entry(dir_fd, name)
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        ffd = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd)
        try:
            while True:
                chunk = os.read(sfd, 1 << 20)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(ffd, view):]
            os.fchmod(ffd, stat.S_IMODE(st.st_mode))
            os.utime(ffd, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(ffd)
    finally:
        os.close(sfd)


def _copy_tree_into(src: str, dir_fd: int) -> None:
    with os.scandir(src) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            sub = _open_dir_making_way(dir_fd, entry.name)
            try:
                _copy_tree_into(entry.path, sub)
                os.fchmod(sub, stat.S_IMODE(st.st_mode))
                os.utime(sub, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(sub)
        elif stat.S_ISLNK(st.st_mode):
            remove_entry(dir_fd, entry.name)
            os.symlink(os.readlink(entry.path), entry.name, dir_fd=dir_fd)
        elif stat.S_ISREG(st.st_mode):
            _copy_file_into(entry.path, dir_fd, entry.name, st)
        # FIFOs, sockets, device nodes: skipped


def place_tree(root: Path, src: Path, dest: str = ".") -> None:
    """Copy the trusted host directory `src` into the workspace directory `root` at `dest` (relative): its
    directories, regular files (modes and modification times kept) and symlinks (copied as links, never
    followed); other kinds are skipped. Whatever is in the way in the workspace is removed as
    :func:`write_trusted` does; what is there and not in `src` is left alone."""
    parts = [p for p in dest.split("/") if p and p != "."]
    if ".." in parts:
        raise TrustedCopyError(errno.EINVAL, f"{dest}: not a path inside the workspace")
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            nfd = _open_dir_making_way(fd, part)
            os.close(fd)
            fd = nfd
        _copy_tree_into(str(src), fd)
    finally:
        os.close(fd)
