"""The files step records live in: ``steps/NNNNNN.jsonl`` segments, appended whole lines at a time, read back
by ``(segment, offset, length)`` with one ``pread``; and the line reader the index is built with (it also reads
``events.jsonl``). :class:`Segments` holds the descriptors and the writer's position (current segment, its
bytes and lines); the caller (:class:`clawgym.pool.store.Pool`) holds the locks.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

from clawgym.core.errors import ClawgymError

READ_CHUNK = 8 * 1024 * 1024


def seg_name(seg: int) -> str:
    return f"{seg:06d}.jsonl"


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def file_size(path: str | os.PathLike) -> int:
    """The size of a file, 0 when it does not exist."""
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def read_lines(path: Path, start: int) -> Iterator[tuple[int, bytes]]:
    """(offset, line without newline) of every complete line from byte `start`."""
    with open(path, "rb") as fh:
        fh.seek(start)
        pos = start
        rest = b""
        while True:
            chunk = fh.read(READ_CHUNK)
            if not chunk:
                break
            buf = rest + chunk
            base = pos - len(rest)
            i = 0
            while True:
                j = buf.find(b"\n", i)
                if j < 0:
                    break
                yield base + i, buf[i:j]
                i = j + 1
            rest = buf[i:]
            pos += len(chunk)


class Segments:
    """The segment files of one directory. `segment_bytes`: roll to a new segment past this size; `fsync`:
    fsync every append. `error` is raised for a short read (a file truncated behind the index's back)."""

    def __init__(self, directory: Path, segment_bytes: int, fsync: bool = False,
                 error: type[ClawgymError] = ClawgymError) -> None:
        self.dir = directory
        self._dir_str = str(directory)
        self.segment_bytes = int(segment_bytes)
        self.fsync = fsync
        self._error = error
        self._read_fds: dict[int, int] = {}
        self._read_lock = threading.Lock()
        self._fd = -1
        # the writer's position, valid while the index is unchanged (see Pool._sync)
        self.seg = 0
        self.bytes = 0
        self.lines = 0

    def path(self, seg: int) -> Path:
        return Path(self._dir_str, seg_name(seg))

    def files(self) -> list[int]:
        """The numbers of the segment files on disk, in order."""
        return sorted(int(p.stem) for p in self.dir.glob("*.jsonl") if p.stem.isdigit())

    def size(self, seg: int) -> int:
        return file_size(self.path(seg))

    # ------------------------------------------------------------------------------------------ writing

    def position(self, seg: int, nbytes: int, nlines: int) -> None:
        """Set the writer's position (from the index), closing the descriptor of another segment."""
        if seg != self.seg and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.seg, self.bytes, self.lines = seg, nbytes, nlines

    def unchanged(self) -> bool:
        """Whether the current segment still has the size the writer knows and no later segment exists (no
        other process appended behind this one's back)."""
        size = os.fstat(self._fd).st_size if self._fd >= 0 else self.size(self.seg)
        return size == self.bytes and not os.path.exists(os.path.join(self._dir_str, seg_name(self.seg + 1)))

    def make_room(self, nbytes: int) -> None:
        """Make the current segment the one the next `nbytes` go to (roll when full); open its descriptor."""
        if self.bytes > 0 and self.bytes + nbytes > self.segment_bytes:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self.seg += 1
            self.bytes = self.lines = 0
        if self._fd < 0:
            self._fd = os.open(self.path(self.seg), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, data: bytes, nlines: int) -> int:
        """Append whole lines to the current segment; returns the offset they start at."""
        off = self.bytes
        write_all(self._fd, data)
        if self.fsync:
            os.fsync(self._fd)
        self.bytes += len(data)
        self.lines += nlines
        return off

    # ------------------------------------------------------------------------------------------ reading

    def read(self, seg: int, off: int, length: int) -> bytes:
        """`length` bytes at `off` of segment `seg` (one pread; reads run in parallel)."""
        with self._read_lock:
            fd = self._read_fds.get(seg)
            if fd is None:
                fd = self._read_fds[seg] = os.open(self.path(seg), os.O_RDONLY)
        data = os.pread(fd, length, off)
        if len(data) != length:
            raise self._error(f"{self.path(seg)}: short read at byte {off} (the file was truncated; "
                              "rebuild the index)")
        return data

    def close(self) -> None:
        for fd in (*self._read_fds.values(), self._fd):
            if fd >= 0:
                os.close(fd)
        self._read_fds.clear()
        self._fd = -1
