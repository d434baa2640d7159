"""Workspaces held in host directories: the file half of the sandbox protocol, for backends that bind a host
directory into the sandbox (bwrap, docker, local) and for the judge reading a workspace snapshot.

The workspace is a host directory the agent controls: any entry may be a symlink (to a host path, or to an
absolute sandbox path) or a FIFO, and a background process may swap entries at any moment. So paths are
resolved here as the SANDBOX sees them (absolute links under the mount dir map back into the workspace, any
other absolute link leaves it), and the resolved path is then opened component by component with O_NOFOLLOW
from the workspace root: a link swapped in after the check fails the open instead of being followed. Only
regular files are read or written, and opens never block (O_NONBLOCK: a FIFO). Trusted files (checkers,
imported trees) are placed by :mod:`clawgym.sandbox.trusted_copy`, which removes whatever is in the way.
"""

from __future__ import annotations

import errno
import os
import posixpath
import shutil
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from clawgym.core.records import WorkspaceFile, WorkspaceSpec
from clawgym.sandbox.base import (
    CTL_DIR,
    DirEntry,
    FileStat,
    Mount,
    Sandbox,
    SandboxError,
    SandboxInfo,
    SandboxLimits,
    SandboxPathError,
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


class HostWorkspace:
    """File access to a workspace kept in the host directory `root`, as commands in a sandbox see it at
    `mount_dirs` (the mount dir, and the workdir when it differs)."""

    def __init__(self, root: Path, mount_dirs: Iterable[str]):
        self.root = Path(root)
        self.mount_dirs = tuple(dict.fromkeys(d for d in mount_dirs if d))

    # -- paths ----------------------------------------------------------------------------------------
    def rel(self, path: str) -> str | None:
        """The workspace-relative form of a sandbox path, or None when it is outside the workspace."""
        if path.startswith("/"):
            norm = posixpath.normpath(path)
            for base in self.mount_dirs:
                if norm == base or norm.startswith(base.rstrip("/") + "/"):
                    return posixpath.relpath(norm, base)
            return None
        return path

    def _rel_or_refuse(self, path: str) -> str:
        rel = self.rel(path)
        if rel is None:
            raise SandboxPathError(f"path {path!r} is outside the workspace")
        return rel

    def resolve(self, path: str) -> list[str]:
        """Components (no symlinks, no dots) of where `path` leads inside the workspace, following symlinks
        the way the sandbox would; SandboxPathError when it leads out."""
        rel = self._rel_or_refuse(path)
        root = str(self.root)
        todo = [c for c in rel.split("/") if c and c != "."]
        done: list[str] = []
        hops = 0
        while todo:
            part = todo.pop(0)
            if part == "..":
                if not done:
                    raise SandboxPathError(f"path {path!r} leaves the workspace")
                done.pop()
                continue
            cur = os.path.join(root, *done, part)
            try:
                st = os.lstat(cur)
            except (FileNotFoundError, NotADirectoryError):
                done.append(part)
                continue
            if not stat.S_ISLNK(st.st_mode):
                done.append(part)
                continue
            hops += 1
            if hops > 40:
                raise SandboxPathError(f"path {path!r}: too many levels of symbolic links")
            try:
                target = os.readlink(cur)
            except OSError as exc:  # swapped since the lstat: look again
                if exc.errno not in (errno.EINVAL, errno.ENOENT):
                    raise
                todo.insert(0, part)
                continue
            if target.startswith("/"):
                inner = self.rel(target)
                if inner is None:
                    raise SandboxPathError(f"path {path!r} leaves the workspace (link to {target})")
                done = []
                target = inner
            todo = [c for c in target.split("/") if c and c != "."] + todo
        return done

    def host_path(self, path: str) -> Path | None:
        """Host path of a sandbox path inside the workspace (relative, or absolute under the mount dir).

        Returns None for sandbox paths outside the workspace. Raises SandboxPathError for paths that lead
        (through symlinks planted by the agent, or `..`) outside the workspace. The result is free of
        symlinks at the time of the call; the agent may still swap entries later, so open files through
        :meth:`read_file` / :meth:`write_file`, which refuse to follow any link.
        """
        if self.rel(path) is None:
            return None
        return self.root.joinpath(*self.resolve(path))

    def _open_dirs(self, path: str, parts: Sequence[str], create: bool) -> int:
        """A directory fd of `parts`, walked from the workspace root without following links."""
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for part in parts:
                if create:
                    try:
                        os.mkdir(part, dir_fd=fd)
                    except FileExistsError:
                        pass
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nfd
        except OSError as exc:
            os.close(fd)
            if exc.errno == errno.ELOOP:
                raise SandboxPathError(f"path {path!r} leaves the workspace (a link appeared)") from None
            raise type(exc)(exc.errno, exc.strerror, path) from None
        return fd

    # -- the protocol's file methods ------------------------------------------------------------------
    def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        parts = self.resolve(path)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        dfd = self._open_dirs(path, parts[:-1], create=False)
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise SandboxPathError(f"path {path!r} leaves the workspace (a link appeared)") from None
            raise type(exc)(exc.errno, exc.strerror, path) from None
        finally:
            os.close(dfd)
        with os.fdopen(fd, "rb") as fh:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
            if not stat.S_ISREG(mode):
                raise SandboxPathError(f"path {path!r} is not a regular file")
            return fh.read() if max_bytes is None else fh.read(max(0, max_bytes))

    def write_file(self, path: str, data: str | bytes, mode: int | None = None) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else data
        parts = self.resolve(path)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        dfd = self._open_dirs(path, parts[:-1], create=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(parts[-1], flags, 0o644 if mode is None else mode, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise SandboxPathError(f"path {path!r} leaves the workspace (a link appeared)") from None
            if exc.errno == errno.ENXIO:  # a FIFO without reader
                raise SandboxPathError(f"path {path!r} is not a regular file") from None
            raise type(exc)(exc.errno, exc.strerror, path) from None
        finally:
            os.close(dfd)
        with os.fdopen(fd, "wb") as fh:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise SandboxPathError(f"path {path!r} is not a regular file")
            os.ftruncate(fd, 0)
            fh.write(payload)
            if mode is not None:
                os.fchmod(fd, mode)

    def stat(self, path: str) -> FileStat | None:
        parts = self.resolve(path)
        try:
            dfd = self._open_dirs(path, parts[:-1], create=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            st = os.stat(parts[-1] if parts else ".", dir_fd=dfd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        finally:
            os.close(dfd)
        if stat.S_ISLNK(st.st_mode):
            raise SandboxPathError(f"path {path!r}: a link appeared while it was looked at")
        kind = _kind(st.st_mode)
        return FileStat(kind=kind if kind != "link" else "other", size=st.st_size, mode=stat.S_IMODE(st.st_mode))

    def list_dir(self, path: str = ".") -> list[DirEntry]:
        parts = self.resolve(path)
        fd = self._open_dirs(path, parts, create=False)
        try:
            out = []
            with os.scandir(fd) as it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                        kind = _kind(st.st_mode)
                        target = os.readlink(entry.name, dir_fd=fd) if kind == "link" else None
                    except FileNotFoundError:  # removed while listed
                        continue
                    out.append(DirEntry(name=entry.name, kind=kind, size=st.st_size, target=target))
        finally:
            os.close(fd)
        return sorted(out, key=lambda e: e.name)

    def copy_in(self, files: Sequence[WorkspaceFile], *, assets_dir: Path | None = None,
                empty_dirs: Iterable[str] = ()) -> None:
        from clawgym.sandbox.trusted_copy import place_files

        empty_dirs = list(empty_dirs)
        place_files(self.root, list(files), assets_dir=assets_dir, empty_dirs=empty_dirs)
        self.unlink_links_into({f.path for f in files}, empty_dirs)

    def unlink_links_into(self, paths: set[str], dirs: Sequence[str]) -> int:
        """Remove every symlink of the workspace that leads (as the sandbox would follow it) to one of the
        trusted files just placed at `paths` or into one of the directories `dirs` that hold only them.
        When the agent ended, such a link led nowhere (the checker was not there yet) or to what the agent put
        there, since removed; followed now, it would hand the checker its own source as the agent's output (a
        check that wants '42' in out.txt reads it in `reward/reward.sh`). Returns how many were removed."""
        from clawgym.core.fstree import WalkStats, walk_sorted

        tops = tuple(d.rstrip("/") + "/" for d in dirs)
        removed = 0
        for rel, entry in walk_sorted(self.root, WalkStats()):
            if not entry.is_symlink():
                continue
            try:
                target = "/".join(self.resolve(rel))
            except SandboxPathError:
                continue  # leads out of the workspace: no checker file is there
            if target in paths or target.startswith(tops):
                try:
                    os.unlink(entry.path)
                    removed += 1
                except FileNotFoundError:
                    pass
        return removed

    def import_tree(self, src: Path, dest: str = ".") -> None:
        from clawgym.sandbox.trusted_copy import place_tree

        place_tree(self.root, Path(src), dest)

    def clear(self) -> None:
        from clawgym.sandbox.trusted_copy import clear_dir

        clear_dir(self.root)

    def snapshot(self, dest: Path, max_bytes: int | None = None) -> dict[str, int]:
        from clawgym.workspace.materialize import snapshot

        return snapshot(self.root, Path(dest), max_bytes=max_bytes)

    def snapshot_archive(self, dest: Path, max_bytes: int | None = None) -> dict[str, int]:
        from clawgym.workspace.materialize import snapshot_archive

        return snapshot_archive(self.root, Path(dest), max_bytes=max_bytes)

    def take(self, dest: Path) -> None:
        """Move everything to the new directory `dest`: a rename per entry when both are on one filesystem
        (else a copy, as :meth:`snapshot` makes one, and a removal)."""
        dest = Path(dest)
        dest.mkdir()
        src_fd = os.open(self.root, _DIR_FLAGS)
        dst_fd = os.open(dest, _DIR_FLAGS)
        try:
            crossed = False
            for name in sorted(os.listdir(src_fd)):
                try:
                    os.rename(name, name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
                    crossed = True
                    break
        finally:
            os.close(src_fd)
            os.close(dst_fd)
        if crossed:
            self.snapshot(dest)
            self.clear()


class HostDirSandbox(Sandbox):
    """A sandbox whose workspace is the host directory `host_workspace`, bound into it at the mount dir, with
    its control directory next to it (`<root>/ctl`, seen at CTL_DIR, read-only): the file methods of the
    protocol as host file operations (:class:`HostWorkspace`); paths outside the workspace are read and
    written by commands in the sandbox. Commands are the subclass's (:mod:`clawgym.sandbox.supervised`)."""

    def __init__(self, host_workspace: Path, mount_dir: str, limits: SandboxLimits):
        super().__init__(mount_dir, limits)
        self.host_workspace = Path(host_workspace)
        # the control directory: host side, and as commands in the sandbox see it
        self.ctl_host = self.host_workspace.parent / "ctl"
        self.ctl_inside = CTL_DIR
        self._files: HostWorkspace | None = None

    @property
    def files(self) -> HostWorkspace:
        if self._files is None:
            self._files = HostWorkspace(self.host_workspace, (self.mount_dir, self.workdir))
        return self._files

    def host_path(self, path: str) -> Path | None:
        """See :meth:`HostWorkspace.host_path` (for host-side tools, and task validation, which makes its states
        right in its grader's workspace; otherwise clawgym uses the protocol)."""
        return self.files.host_path(path)

    def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        if self.files.rel(path) is None:
            return self._read_in_sandbox(path, max_bytes)
        return self.files.read_file(path, max_bytes=max_bytes)

    def write_file(self, path: str, data: str | bytes, mode: int | None = None) -> None:
        if self.files.rel(path) is None:
            self._write_in_sandbox(path, data.encode("utf-8") if isinstance(data, str) else data, mode)
            return
        self.files.write_file(path, data, mode)

    def stat(self, path: str) -> FileStat | None:
        return self.files.stat(path)

    def list_dir(self, path: str = ".") -> list[DirEntry]:
        return self.files.list_dir(path)

    def copy_in(self, files: Sequence[WorkspaceFile], *, assets_dir: Path | None = None,
                empty_dirs: Iterable[str] = ()) -> None:
        """Write trusted task files (e.g. a checker) into the live workspace, after the agent has ended:
        whatever the agent left at their paths (links, FIFOs, device nodes, directories) is removed, never
        followed or opened (see :mod:`clawgym.sandbox.trusted_copy`)."""
        self.files.copy_in(files, assets_dir=assets_dir, empty_dirs=empty_dirs)

    def import_tree(self, src: Path, dest: str = ".") -> None:
        self.files.import_tree(src, dest)

    def clear_workspace(self) -> None:
        self.files.clear()

    def snapshot(self, dest: Path, max_bytes: int | None = None) -> dict[str, int]:
        return self.files.snapshot(dest, max_bytes)

    def snapshot_archive(self, dest: Path, max_bytes: int | None = None) -> dict[str, int]:
        return self.files.snapshot_archive(dest, max_bytes)

    def take_workspace(self, dest: Path) -> None:
        self.files.take(dest)

    def write_control_file(self, name: str, data: str | bytes) -> str:
        """Written on the host into the control directory, which commands see read-only (but for its output
        subdirectory, refused here); anything at `name` is replaced, never followed."""
        from clawgym.sandbox.supervisor import OUT_SUBDIR
        from clawgym.sandbox.trusted_copy import write_trusted

        parts = [p for p in name.split("/") if p and p != "."]
        if not parts or ".." in parts or name.startswith("/") or parts[0] == OUT_SUBDIR:
            raise SandboxError(f"bad control file name {name!r}")
        fd = os.open(self.ctl_host, _DIR_FLAGS)
        try:
            write_trusted(fd, "/".join(parts), data.encode("utf-8") if isinstance(data, str) else data)
        finally:
            os.close(fd)
        return f"{self.ctl_inside}/{'/'.join(parts)}"

    def info(self) -> SandboxInfo:
        info = super().info()
        info.details["host_workspace"] = str(self.host_workspace)
        return info


def host_mounts(root: Path, mounts: Sequence[Mount]) -> list[tuple[Path, str, bool]]:
    """(host dir, target, read_only) of each mount, creating the fresh per-sandbox ones under `root/mnt/`."""
    out = []
    for i, m in enumerate(mounts):
        if m.source is None:
            host = root / "mnt" / str(i)
            host.mkdir(parents=True)
        else:
            host = Path(m.source).resolve()
        out.append((host, posixpath.normpath(m.target), m.read_only))
    return out


def prepare_host_workspace(
    workspace: WorkspaceSpec, base_dir: Path | None, prefix: str, prebuilt: Path | None = None,
    limits: SandboxLimits | None = None,
) -> Path:
    """A fresh host temp dir with `ws/` (the materialized workspace) and `ctl/` (the supervisor's files;
    read-only in the sandbox except `ctl/out`, where the commands' output goes).

    `prebuilt`: a directory already holding this workspace's files, copied instead of generating them again
    (task validation starts several sandboxes on the same workspace).

    The temp dir records its owner (this process: `clawgym.sandbox.sweep`), and `ws/`, `ctl/out/` and `mnt/`
    (the parent of fresh per-sandbox mounts) are size-capped filesystems (`clawgym.sandbox.disk`) before
    anything is put there, when this host allows it. Remove it with `clawgym.sandbox.sweep.remove_root`
    (which unmounts them), never with a bare rmtree."""
    import tempfile

    from clawgym.sandbox import disk
    from clawgym.sandbox.supervisor import OUT_SUBDIR
    from clawgym.sandbox.sweep import record_owner, remove_root
    from clawgym.workspace.materialize import materialize, snapshot

    limits = limits or SandboxLimits()
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("CLAWGYM_SANDBOX_TMP")))
    try:
        record_owner(root)
        (root / "ctl" / OUT_SUBDIR).mkdir(parents=True)
        capped = disk.limit_host_dirs(root, disk.host_dir_sizes(limits))
        try:
            if prebuilt is not None:  # iterative: a re-scored workspace is as deep as the agent made it
                copied = snapshot(prebuilt, root / "ws")
                if copied["errors"]:
                    raise OSError(f"{copied['errors']} entries of {prebuilt} could not be copied")
            else:
                materialize(workspace, root / "ws", base_dir=base_dir)
        except (OSError, shutil.Error):
            if capped and disk.full([root / "ws"]):
                raise SandboxError(f"the workspace does not fit in the disk limit ({limits.disk_mb} MB)") from None
            raise
    except BaseException:
        remove_root(root)
        raise
    return root
