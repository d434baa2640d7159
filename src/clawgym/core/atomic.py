"""Atomic file writes: a temp file in the target's directory, written whole, then renamed over the target.

A reader sees the old file or the new one, never half of one; a crash leaves at most a hidden temp file, which is
removed when the write itself fails. With ``fsync`` the data is on disk before the rename (records, reports);
caches that can be rebuilt skip it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def write_lines(path: str | os.PathLike, lines: Iterable[str], *, fsync: bool = True) -> int:
    """Write `lines` (each with its own line ending, if any) as the new content of `path`; returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent)
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            for line in lines:
                fh.write(line)
                count += 1
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return count


def write_text(path: str | os.PathLike, text: str, *, fsync: bool = True) -> None:
    write_lines(path, (text,), fsync=fsync)


def write_json(path: str | os.PathLike, data: Any, *, indent: int | None = 2, fsync: bool = True,
               **dumps: Any) -> None:
    """`data` as JSON (indented, with a final newline when indented), atomically."""
    text = json.dumps(data, indent=indent, **dumps)
    write_text(path, text + "\n" if indent is not None else text, fsync=fsync)
