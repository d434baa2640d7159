"""Reading the files of an outside task set, which is hostile: a symlink in a task folder must not pull a host
file (a key, a credential) into tasks.jsonl, and a FIFO or a device must not hang the import or read forever.

Every file an importer reads goes through :func:`read_inside`: its path, with all symlinks resolved, must lie
inside the folder it belongs to (the task folder, the assets folder), and it is opened non-blocking and read
only when fstat says it is a regular file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pydantic import ValidationError

from clawgym.core.errors import TaskImportError

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def is_inside(path: str | Path, root_real: str) -> bool:
    """True when `path`, with all symlinks resolved, is `root_real` (itself a realpath) or below it."""
    real = os.path.realpath(path)
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def file_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def check_inside(path: Path, root_real: str, where: str) -> str:
    """The realpath of `path`; TaskImportError when it leads out of `root_real` (`where` names that folder)."""
    real = os.path.realpath(path)
    if not is_inside(real, root_real):
        how = "is a symbolic link" if path.is_symlink() else "goes through a symbolic link"
        raise TaskImportError(str(path), f"{how} leading out of {where} (to {real}); refusing to follow it")
    return real


def read_inside(path: Path, root_real: str, where: str = "the task folder") -> tuple[bytes, int]:
    """(bytes, st_mode) of the regular file `path`, which must resolve inside `root_real`.

    Raises TaskImportError naming `path` for a symlink leading out, a FIFO, socket, device or directory, and
    OSError for a file that cannot be read.
    """
    real = check_inside(path, root_real, where)
    fd = os.open(real, _READ_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TaskImportError(str(path), f"is not a regular file ({file_kind(st.st_mode)}); refusing to read it")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), st.st_mode
    finally:
        os.close(fd)


def validation_message(exc: ValidationError) -> str:
    """The first problem of a ValidationError on one line: `field: message (+N more)`."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "<task>"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {err['msg']}{more}"
