"""Turn a task's workspace spec into files on disk, and copy a finished workspace back out (snapshot).

Security model: workspace paths come from task files, which may be machine-written or hostile. Every path we
write is resolved with realpath (following any symlink already present, at any depth, including the last
component) and refused unless it lies inside the workspace root. The assets dir must resolve inside the tasks
file's directory (the record already refuses absolute paths and `..`), and every asset inside the assets dir;
only regular files and directories are read (a FIFO would hang the build, a device such as /dev/zero never
ends). Symlinks inside an asset tree are copied as symlinks when they are relative and stay inside the assets
dir, and refused otherwise; symlinks in a workspace being snapshotted are copied as symlinks, never followed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from clawgym.core.errors import ClawgymError
from clawgym.core.fstree import WalkStats, walk_sorted
from clawgym.core.records import Task, WorkspaceFile, WorkspaceSpec
from clawgym.workspace import generators


class WorkspaceError(ClawgymError):
    """A workspace that cannot be built: a path leaving the workspace, a missing asset, bad generator params."""


def _inside(path: str | Path, root_real: str) -> bool:
    """True when `path`, with all symlinks resolved, is `root_real` or below it."""
    real = os.path.realpath(path)
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def _checked_target(root: Path, root_real: str, rel: str) -> Path:
    target = root / rel
    if not _inside(target, root_real):
        raise WorkspaceError(f"{rel}: refusing to write outside the workspace (resolves to {os.path.realpath(target)})")
    return target


def _special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file or directory"


def _copy_regular(src: str | Path, target: Path, what: str) -> None:
    """Copy the regular file `src` (its symlinks already resolved inside the assets dir) to `target`, with its
    mode and times. Opened non-blocking and checked with fstat, so a FIFO or device swapped in is never read."""
    fd = os.open(os.path.realpath(src), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise WorkspaceError(f"{what} is not a regular file ({_special_kind(st.st_mode)}); refusing to read it")
        with open(fd, "rb", closefd=False) as fin, open(target, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        os.chmod(target, stat.S_IMODE(st.st_mode))
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    finally:
        os.close(fd)


def _copy_tree(src: Path, dst: Path, root_real: str, assets_real: str, label: str) -> None:
    """Copy an asset directory, re-checking every destination (a copy may merge into a directory that already
    holds a symlink pointing elsewhere). Symlinks are copied as symlinks when relative and resolving inside the
    assets dir, and refused otherwise; FIFOs, sockets and devices are refused. `label` names `src` in errors."""
    dst.mkdir(parents=True, exist_ok=True)
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        out = dst / entry.name
        what = f"{label}/{entry.name}"
        if not _inside(out, root_real):
            raise WorkspaceError(f"{out}: refusing to write outside the workspace")
        if entry.is_symlink():
            link = os.readlink(entry.path)
            if os.path.isabs(link) or not _inside(entry.path, assets_real):
                raise WorkspaceError(
                    f"asset {what!r} is a symbolic link to {link!r}, out of the assets dir; refusing it"
                )
            if out.is_symlink() or out.is_file():
                out.unlink()
            os.symlink(link, out)
        elif entry.is_dir(follow_symlinks=False):
            _copy_tree(Path(entry.path), out, root_real, assets_real, what)
        elif entry.is_file(follow_symlinks=False):
            _copy_regular(entry.path, out, f"asset {what!r}")
        else:
            kind = _special_kind(entry.stat(follow_symlinks=False).st_mode)
            raise WorkspaceError(f"asset {what!r} is not a regular file ({kind}); refusing to read it")
    shutil.copystat(src, dst)


def _copy_asset(f: WorkspaceFile, target: Path, assets_dir: Path | None, root_real: str) -> None:
    assert f.source is not None
    if assets_dir is None:
        raise WorkspaceError(f"{f.path}: source {f.source!r} given but the workspace has no assets_dir")
    assets_real = os.path.realpath(assets_dir)
    src = Path(assets_dir) / f.source
    if os.path.isabs(f.source) or not _inside(src, assets_real):
        raise WorkspaceError(f"{f.path}: source {f.source!r} leaves the assets dir {assets_dir}")
    if not os.path.lexists(src):
        raise WorkspaceError(f"{f.path}: asset {f.source!r} not found in {assets_dir}")
    mode = os.stat(src).st_mode  # any symlink on the way resolves inside the assets dir (checked above)
    try:
        if stat.S_ISDIR(mode):
            _copy_tree(src, target, root_real, assets_real, f.source)
        elif not stat.S_ISREG(mode):
            raise WorkspaceError(f"asset {f.source!r} is not a regular file ({_special_kind(mode)}); refusing to read it")
        elif target.is_dir():
            raise WorkspaceError(f"is a directory, cannot copy the file {f.source!r} over it")
        else:
            _copy_regular(src, target, f"asset {f.source!r}")
    except WorkspaceError as e:
        raise WorkspaceError(f"{f.path}: {e}") from None


def write_files(files: list[WorkspaceFile], dest: Path, assets_dir: Path | None = None) -> list[Path]:
    """Write `files` under `dest` (created if needed); return the paths written, in order.

    Raises WorkspaceError naming the file for any failure: a path resolving outside `dest`, a source outside
    or missing from `assets_dir`, invalid base64, bad generator params, or an OS error while writing.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    root_real = os.path.realpath(dest)
    written: list[Path] = []
    for f in files:
        # Checked before creating any parent directory, so a planted symlink cannot make us mkdir outside.
        target = _checked_target(dest, root_real, f.path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _checked_target(dest, root_real, f.path)
            if f.content is not None:
                target.write_bytes(f.content.encode("utf-8"))
            elif f.content_b64 is not None:
                try:
                    data = base64.b64decode(f.content_b64, validate=True)
                except (binascii.Error, ValueError):
                    raise WorkspaceError(f"{f.path}: content_b64 is not valid base64") from None
                target.write_bytes(data)
            elif f.source is not None:
                _copy_asset(f, target, assets_dir, root_real)
            elif f.generate is not None:
                try:
                    generators.generate(f.generate.kind, f.generate.params, target)
                except ValueError as e:
                    raise WorkspaceError(f"{f.path}: {e}") from e
            if f.mode is not None:
                if not 0 <= f.mode <= 0o7777:
                    raise WorkspaceError(f"{f.path}: mode {f.mode} is not a permission value (0..0o7777)")
                os.chmod(target, f.mode)
        except OSError as e:
            raise WorkspaceError(f"{f.path}: {e.strerror or e}") from e
        written.append(target)
    return written


def _resolve_assets(spec: WorkspaceSpec, base_dir: Path | None) -> Path | None:
    """The assets dir of `spec`: relative to `base_dir` (the tasks file's directory; default the current
    directory), and refused unless it resolves inside it, symlinks included, so a task file never copies host
    files (keys, credentials) into its workspace and from there into the run's archives."""
    if spec.assets_dir is None:
        return None
    base = Path(base_dir or Path.cwd())
    rel = spec.assets_dir
    # the record refuses both already; checked again for specs built without validation (model_construct)
    if os.path.isabs(rel) or ".." in Path(rel).parts:
        raise WorkspaceError(f"assets_dir {rel!r} must be a relative path inside the tasks file's directory {base}")
    assets = base / rel
    if not _inside(assets, os.path.realpath(base)):
        raise WorkspaceError(
            f"assets_dir {rel!r} resolves to {os.path.realpath(assets)}, outside the tasks file's directory {base}; "
            "refusing to copy files from there"
        )
    return assets


def materialize(spec: WorkspaceSpec, dest: Path, base_dir: Path | None = None) -> list[Path]:
    """Build the workspace of `spec` at `dest`, which must be absent or an empty directory.

    A relative `spec.assets_dir` is taken relative to `base_dir` (the tasks file's directory; default the
    current directory) and must resolve inside it. Returns the paths of the files written.
    """
    assets = _resolve_assets(spec, base_dir)
    dest = Path(dest)
    if dest.exists() or dest.is_symlink():
        if not dest.is_dir() or any(dest.iterdir()):
            raise WorkspaceError(f"{dest}: workspace destination exists and is not an empty directory")
    dest.mkdir(parents=True, exist_ok=True)
    root_real = os.path.realpath(dest)
    for d in spec.directories:
        target = _checked_target(dest, root_real, d)
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise WorkspaceError(f"{d}: {e.strerror or e}") from e
    return write_files(spec.files, dest, assets)


def workspace_dirname(task_id: str) -> str:
    """A file-name-safe directory name for a task id; distinct ids give distinct names.

    Ids that are already safe are used as they are; others get their unsafe characters replaced and a short
    hash of the original id appended (so `a/b` and `a_b` do not collide).
    """
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task_id).lstrip(".")[:100]
    if safe == task_id and safe:
        return safe
    return f"{safe or 'task'}-{hashlib.sha256(task_id.encode()).hexdigest()[:8]}"


def build_workspaces(
    tasks: list[Task], out_dir: Path, base_dir: Path | None = None, overwrite: bool = False
) -> list[tuple[str, Path | Exception]]:
    """Build each task's workspace at `out_dir/<workspace_dirname(id)>`; return (task id, path or error).

    Each workspace is built in a hidden temp dir inside `out_dir` and renamed into place, so a failure never
    leaves a half-built workspace. Existing workspaces are kept (and their path returned) unless `overwrite`.
    One task's error is returned for that task; the others still build.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: list[tuple[str, Path | Exception]] = []
    seen: set[str] = set()
    for task in tasks:
        name = workspace_dirname(task.id)
        final = out_dir / name
        if name in seen:
            results.append((task.id, WorkspaceError(f"{task.id}: duplicate task id")))
            continue
        seen.add(name)
        if (final.exists() or final.is_symlink()) and not overwrite:
            results.append((task.id, final))
            continue
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name[:40]}-", dir=out_dir))
        try:
            materialize(task.workspace, tmp, base_dir)
            tmp.chmod(0o755)  # mkdtemp makes it 0700; the sandbox user may differ from ours
            if final.exists() or final.is_symlink():
                trash = Path(tempfile.mkdtemp(prefix=f".old-{name[:40]}-", dir=out_dir))
                os.rename(final, trash / "old")
                try:
                    os.rename(tmp, final)
                except OSError:
                    os.rename(trash / "old", final)  # put the previous workspace back
                    raise
                finally:
                    shutil.rmtree(trash, ignore_errors=True)
            else:
                os.rename(tmp, final)
            results.append((task.id, final))
        except Exception as e:  # noqa: BLE001 (one broken task must not stop the others)
            results.append((task.id, e))
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return results


def snapshot(src: Path, dest: Path, max_bytes: int | None = None) -> dict[str, int]:
    """Copy the workspace tree `src` to `dest`; symlinks are copied as symlinks and never followed.

    Regular files are copied in sorted path order while the running total stays within `max_bytes`; a file
    that would exceed it is skipped. Sockets, fifos and devices are skipped. Returns {files: entries copied
    (files and symlinks), bytes: bytes copied, truncated: files skipped for the size limit (0 = complete),
    errors: files that could not be read}.
    """
    src, dest = Path(src), Path(dest)
    if not src.is_dir() or src.is_symlink():
        raise WorkspaceError(f"{src}: snapshot source is not a directory")
    stats = {"files": 0, "bytes": 0, "truncated": 0, "errors": 0}
    walked = WalkStats()
    dest.mkdir(parents=True, exist_ok=True)
    dirs: list[tuple[str, Path]] = []
    for rel, entry in walk_sorted(src, walked):
        out = dest / rel
        try:
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), out)
                stats["files"] += 1
            elif entry.is_dir(follow_symlinks=False):
                out.mkdir()
                dirs.append((entry.path, out))
            elif entry.is_file(follow_symlinks=False):
                size = entry.stat(follow_symlinks=False).st_size
                if max_bytes is not None and stats["bytes"] + size > max_bytes:
                    stats["truncated"] += 1
                    continue
                shutil.copy2(entry.path, out, follow_symlinks=False)
                stats["files"] += 1
                stats["bytes"] += size
        except OSError:
            stats["errors"] += 1
    for path, out in reversed(dirs):  # after what they hold, which changed their times
        try:
            shutil.copystat(path, out, follow_symlinks=False)
        except OSError:
            stats["errors"] += 1
    stats["truncated"] += walked.truncated
    stats["errors"] += walked.errors
    return stats


def snapshot_archive(src: Path, dest: Path, max_bytes: int | None = None) -> dict[str, int]:
    """Like :func:`snapshot`, but into one gzip-compressed tar file `dest`, written to a temporary name and
    renamed, so a run directory never holds half an archive. Paths in the archive are relative to the
    workspace root; symlinks are stored as symlinks; sockets, fifos and devices are skipped."""
    import tarfile

    src, dest = Path(src), Path(dest)
    if not src.is_dir() or src.is_symlink():
        raise WorkspaceError(f"{src}: snapshot source is not a directory")
    dest.parent.mkdir(parents=True, exist_ok=True)
    stats = {"files": 0, "bytes": 0, "truncated": 0, "errors": 0}
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as fh, tarfile.open(fileobj=fh, mode="w:gz", compresslevel=6) as tar:

            walked = WalkStats()
            for name, entry in walk_sorted(src, walked):
                try:
                    if entry.is_symlink() or entry.is_dir(follow_symlinks=False):
                        tar.add(entry.path, arcname=name, recursive=False)
                        if entry.is_symlink():
                            stats["files"] += 1
                    elif entry.is_file(follow_symlinks=False):
                        size = entry.stat(follow_symlinks=False).st_size
                        if max_bytes is not None and stats["bytes"] + size > max_bytes:
                            stats["truncated"] += 1
                            continue
                        tar.add(entry.path, arcname=name, recursive=False)
                        stats["files"] += 1
                        stats["bytes"] += size
                except OSError:
                    stats["errors"] += 1
            stats["truncated"] += walked.truncated
            stats["errors"] += walked.errors
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return stats


def extract_snapshot(archive: Path, dest: Path) -> Path:
    """Unpack a snapshot archive into `dest` (created), refusing members that would land outside it."""
    import tarfile

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python < 3.11.4: check each member ourselves
            root = os.path.realpath(dest)
            for m in tar.getmembers():
                target = os.path.realpath(os.path.join(root, m.name))
                if not (target == root or target.startswith(root + os.sep)) or m.isdev():
                    raise WorkspaceError(f"{archive}: member {m.name!r} would leave the workspace")
            tar.extractall(dest)
    return dest
