"""The final workspace of an episode, read-only, from its snapshot in the run directory.

A snapshot is ``workspaces/<episode>.tar.gz`` (or a directory, in older runs) named by the trajectory record, a
value from a file the viewer does not trust. So the snapshot path must resolve inside the run directory and must
not be a symlink; archive members are read from the archive (nothing is extracted, so no member name reaches the
file system); in a directory snapshot every file is opened with ``O_NOFOLLOW`` below a directory whose real path
is inside the snapshot, so a symlink the agent left cannot lead out. Symlinks are listed with their target and
never followed. Files are shown up to :data:`MAX_FILE_BYTES`; binary ones are named, not shown.
"""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path
from typing import Any

from clawgym.core.errors import ClawgymError
from clawgym.core.fstree import WalkStats, walk_sorted

MAX_FILE_BYTES = 512 * 1024
MAX_LISTED = 5000


class WorkspaceViewError(ClawgymError):
    """A snapshot that is missing, outside the run directory, or a file that cannot be shown."""


def _inside(root: Path, path: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def snapshot_path(run_dir: Path, rel: str | None) -> Path:
    """The snapshot a trajectory names, checked to be inside the run directory and not a symlink."""
    if not rel:
        raise WorkspaceViewError("this episode kept no workspace snapshot")
    root = run_dir.resolve()
    candidate = root / rel
    if os.path.isabs(rel) or ".." in Path(rel).parts or not _inside(root, candidate.resolve()):
        raise WorkspaceViewError(f"{rel}: the snapshot path leaves the run directory; refused")
    if candidate.is_symlink() or any(p.is_symlink() for p in candidate.parents if _inside(root, p) and p != root):
        raise WorkspaceViewError(f"{rel}: the snapshot path is a symlink; refused")
    if not candidate.exists():
        raise WorkspaceViewError(f"{rel}: the snapshot is missing from the run directory")
    return candidate


def _clean(name: str) -> str:
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    return "/".join(parts)


def list_files(snapshot: Path) -> list[dict[str, Any]]:
    """Files of a snapshot: path, size, kind (file, dir, symlink) and, for symlinks, the target."""
    out: list[dict[str, Any]] = []
    if snapshot.is_dir():
        real = snapshot.resolve()
        for rel, entry in walk_sorted(real, WalkStats()):  # iterative: the agent chose the depth
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                out.append({"path": rel, "kind": "symlink", "size": 0, "target": os.readlink(entry.path)})
            elif stat.S_ISREG(st.st_mode):
                out.append({"path": rel, "kind": "file", "size": st.st_size})
            if len(out) >= MAX_LISTED:
                return out
        return sorted(out, key=lambda f: f["path"])
    try:
        with tarfile.open(snapshot, "r:*") as tar:
            for m in tar:
                name = _clean(m.name)
                if not name:
                    continue
                if m.issym() or m.islnk():
                    out.append({"path": name, "kind": "symlink", "size": 0, "target": m.linkname})
                elif m.isfile():
                    out.append({"path": name, "kind": "file", "size": m.size})
                if len(out) >= MAX_LISTED:
                    break
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise WorkspaceViewError(f"{snapshot.name}: unreadable snapshot ({exc})") from None
    return sorted(out, key=lambda f: f["path"])


def _shown(data: bytes, size: int) -> dict[str, Any]:
    if b"\x00" in data[:8192]:
        return {"binary": True, "size": size, "text": None, "truncated": False}
    return {"binary": False, "size": size, "text": data[:MAX_FILE_BYTES].decode("utf-8", errors="replace"),
            "truncated": size > MAX_FILE_BYTES}


def read_file(snapshot: Path, path: str) -> dict[str, Any]:
    """One regular file of a snapshot (never through a symlink), as text up to MAX_FILE_BYTES."""
    want = _clean(path)
    if not want or ".." in want.split("/"):
        raise WorkspaceViewError(f"{path!r}: not a path inside the workspace")
    if snapshot.is_dir():
        real = snapshot.resolve()
        parent = (real / want).parent
        if not _inside(real, parent.resolve()) or parent.resolve() != parent:
            raise WorkspaceViewError(f"{path}: leaves the workspace through a symlink; refused")
        try:
            fd = os.open(real / want, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise WorkspaceViewError(f"{path}: cannot open ({exc.strerror}; symlinks are not followed)") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise WorkspaceViewError(f"{path}: not a regular file")
            data = os.read(fd, MAX_FILE_BYTES + 1)
        finally:
            os.close(fd)
        return _shown(data, st.st_size)
    try:
        with tarfile.open(snapshot, "r:*") as tar:
            for m in tar:
                if _clean(m.name) != want:
                    continue
                if not m.isfile():
                    raise WorkspaceViewError(f"{path}: not a regular file ({'symlink to ' + m.linkname if m.issym() else 'not shown'})")
                fh = tar.extractfile(m)
                data = fh.read(MAX_FILE_BYTES + 1) if fh else b""
                return _shown(data, m.size)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise WorkspaceViewError(f"{snapshot.name}: unreadable snapshot ({exc})") from None
    raise WorkspaceViewError(f"{path}: no such file in the workspace")
