"""The sandbox interface shared by every backend.

A sandbox holds one episode: it starts with a workspace, runs commands with timeouts and captured output,
reads and writes files, takes files in after the agent ends (checkers), snapshots the final workspace and
stops. The workspace always lives in a host directory that the backend mounts at the task's mount dir, so
file access and snapshots are plain host file operations, confined to that directory.
"""

from __future__ import annotations

import base64
import errno
import os
import posixpath
import shutil
import stat
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from clawgym.core.errors import ClawgymError
from clawgym.core.records import WorkspaceFile, WorkspaceSpec

CTL_DIR = "/.clawgym"  # where each sandbox sees its control directory (supervisor and checker files)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class SandboxError(ClawgymError):
    """The sandbox itself failed (could not start, died, stopped answering): an infrastructure error."""


class SandboxPathError(SandboxError):
    """A file path the sandbox refuses (it leads out of the workspace, or is not a regular file): a
    problem with the request, not with the sandbox, which keeps working."""


class SandboxUnavailable(SandboxError):
    """A backend cannot run on this machine; the message says why and how to fix it."""


class SandboxLimits(BaseModel):
    """Resource limits of one sandbox. Every backend enforces all of them (see each backend for how)."""

    model_config = ConfigDict(extra="forbid")

    memory_mb: int = Field(default=2048, gt=0, description="Memory of all processes together.")
    max_processes: int = Field(default=256, gt=0, description="Processes and threads alive at once.")
    cpus: float = Field(default=1.0, gt=0, description="CPU share (Docker); bwrap relies on the host scheduler.")
    max_file_mb: int = Field(default=256, gt=0, description="Largest single file a command may write.")
    disk_mb: int = Field(
        default=1024, gt=0,
        description="Space of the workspace (and, apart, of the fresh per-sandbox mounts): a size-capped tmpfs "
        "(clawgym.sandbox.disk), so what commands write there also counts against memory_mb.",
    )
    max_output_bytes: int = Field(default=1_000_000, gt=0, description="Captured stdout/stderr kept per exec.")
    exec_timeout_s: float = Field(default=120.0, gt=0, description="Default wall-time limit of one exec.")
    network: bool = Field(default=False, description="Give the sandbox a network (off by default).")


class Mount(BaseModel):
    """An extra directory bound into a sandbox (e.g. a black-box agent's runtime, read-only, and its state).

    `source` None means a fresh empty host directory private to each sandbox, removed with it; the host side is
    `Sandbox.mounts[target]`. The target must be a new top-level directory or lie under one of the sandbox's
    private directories (/tmp, /run, /root, /home), never at or under the workspace or the control directory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target: str = Field(description="Absolute path inside the sandbox.")
    source: Path | None = Field(default=None, description="Host directory; None: a fresh one per sandbox.")
    read_only: bool = Field(default=True, description="Bound read-only (a fresh directory is usually not).")


def check_mounts(mounts: Sequence[Mount], mount_dir: str) -> None:
    """Refuse mounts that would shadow the workspace, the control directory or each other."""
    seen: list[str] = []
    for m in mounts:
        t = posixpath.normpath(m.target)
        if not t.startswith("/") or t == "/":
            raise SandboxError(f"mount target {m.target!r} must be an absolute path below /")
        for other in (mount_dir, CTL_DIR, *seen):
            o = posixpath.normpath(other)
            if t == o or t.startswith(o.rstrip("/") + "/") or o.startswith(t + "/"):
                raise SandboxError(f"mount target {m.target} overlaps {other}")
        if m.source is not None and not Path(m.source).is_dir():
            raise SandboxError(f"mount source {m.source} is not a directory")
        seen.append(t)


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


@dataclass
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    truncated: bool = False
    limit: str | None = None  # which limit stopped the command: timeout, file_size, memory, output, processes

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass
class SandboxInfo:
    backend: str
    mount_dir: str
    host_workspace: Path
    isolated: bool
    details: dict[str, object] = field(default_factory=dict)


class Sandbox(ABC):
    """One live sandbox. Use as a context manager, or call :meth:`stop`."""

    backend: str = "?"
    isolated: bool = True

    def __init__(self, host_workspace: Path, mount_dir: str, limits: SandboxLimits):
        self.host_workspace = Path(host_workspace)
        self.mount_dir = mount_dir
        self.limits = limits
        # the control directory: host side, and as commands in the sandbox see it
        self.ctl_host = self.host_workspace.parent / "ctl"
        self.ctl_inside = CTL_DIR
        self.mounts: dict[str, Path] = {}  # extra mounts: target inside -> host directory

    # -- to implement -------------------------------------------------------------------------------
    @abstractmethod
    def exec(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        """Run a shell command (str) or argv (list) inside the sandbox; cwd defaults to the workspace."""

    @abstractmethod
    def kill_processes(self) -> None:
        """Kill every process the episode left behind (background jobs), keeping the sandbox usable."""

    @abstractmethod
    def stop(self) -> None:
        """Kill everything and release the sandbox; idempotent."""

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called (by the owner: an interrupted run stops its sandboxes)."""
        return bool(getattr(self, "_stopped", False))

    def engine_ok(self) -> bool:
        """Whether what runs the sandbox (the container engine, the host) still works. Asked when the sandbox
        failed under the agent or the checker: if the engine is fine and nobody here stopped the sandbox, the
        failure came from inside it, and is the agent's (or the checker's), never an infrastructure error.
        Process backends have nothing outside the host to ask; engine backends override this."""
        return True

    @property
    def workdir(self) -> str:
        """Where the workspace is seen by commands in the sandbox (the mount dir, except for `local`)."""
        return self.mount_dir

    # -- files ----------------------------------------------------------------------------------------
    # The workspace is a host directory the agent controls: any entry may be a symlink (to a host path, or
    # to an absolute sandbox path) or a FIFO, and a background process may swap entries at any moment. So
    # paths are resolved here as the SANDBOX sees them (absolute links under the mount dir map back into
    # the workspace, any other absolute link leaves it), and the resolved path is then opened component by
    # component with O_NOFOLLOW from the workspace root: a link swapped in after the check fails the open
    # instead of being followed.

    def _sandbox_rel(self, path: str) -> str | None:
        """The workspace-relative form of a sandbox path, or None when it is outside the workspace."""
        if path.startswith("/"):
            norm = posixpath.normpath(path)
            for base in {self.mount_dir, self.workdir}:
                if norm == base or norm.startswith(base.rstrip("/") + "/"):
                    return posixpath.relpath(norm, base)
            return None
        return path

    def _resolve(self, path: str, rel: str) -> list[str]:
        """Components (no symlinks, no dots) of where `rel` leads inside the workspace, following symlinks
        the way the sandbox would; SandboxPathError when it leads out."""
        root = str(self.host_workspace)
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
                inner = self._sandbox_rel(target)
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
        rel = self._sandbox_rel(path)
        if rel is None:
            return None
        return self.host_workspace.joinpath(*self._resolve(path, rel))

    def _open_parent(self, path: str, parts: list[str], create: bool) -> int:
        """A directory fd of the parent of `parts`, walked from the workspace root without following links."""
        fd = os.open(self.host_workspace, _DIR_FLAGS)
        try:
            for part in parts[:-1]:
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
            raise
        return fd

    def read_file(self, path: str) -> bytes:
        rel = self._sandbox_rel(path)
        if rel is None:
            res = self.exec(["base64", "-w0", "--", path], cwd="/")
            if res.exit_code != 0:
                raise FileNotFoundError(f"{path}: {res.stderr.strip()}")
            return base64.b64decode(res.stdout)
        parts = self._resolve(path, rel)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        dfd = self._open_parent(path, parts, create=False)
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
            return fh.read()

    def write_file(self, path: str, data: str | bytes, mode: int | None = None) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else data
        rel = self._sandbox_rel(path)
        if rel is None:
            parent = posixpath.dirname(path) or "/"
            script = 'mkdir -p -- "$1" && base64 -d > "$2"' + (f' && chmod {mode:o} -- "$2"' if mode is not None else "")
            res = self.exec(["sh", "-c", script, "sh", parent, path], cwd="/", stdin=base64.b64encode(payload))
            if res.exit_code != 0:
                raise SandboxError(f"cannot write {path} in the sandbox: {res.stderr.strip()}")
            return
        parts = self._resolve(path, rel)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        dfd = self._open_parent(path, parts, create=True)
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

    def copy_in(self, files: Sequence[WorkspaceFile], assets_dir: Path | None = None) -> None:
        """Write trusted task files (e.g. a checker) into the live workspace, after the agent has ended:
        whatever the agent left at their paths (links, FIFOs, device nodes, directories) is removed, never
        followed or opened (see :mod:`clawgym.sandbox.trusted_copy`)."""
        from clawgym.sandbox.trusted_copy import place_files

        place_files(self.host_workspace, list(files), assets_dir=assets_dir)

    def snapshot(self, dest: Path, max_bytes: int | None = None) -> dict:
        from clawgym.workspace.materialize import snapshot

        return snapshot(self.host_workspace, Path(dest), max_bytes=max_bytes)

    def info(self) -> SandboxInfo:
        return SandboxInfo(self.backend, self.mount_dir, self.host_workspace, self.isolated)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SandboxBackend(ABC):
    """Creates sandboxes of one kind."""

    name: str = "?"

    @abstractmethod
    def check(self) -> tuple[bool, str]:
        """(usable, reason): whether this backend works here, and why not / with what."""

    @abstractmethod
    def start(
        self,
        workspace: WorkspaceSpec,
        *,
        limits: SandboxLimits | None = None,
        base_dir: Path | None = None,
        prebuilt: Path | None = None,
        mounts: Sequence[Mount] = (),
    ) -> Sandbox:
        """Materialize the workspace (or copy `prebuilt`, a directory already holding it) and start a
        sandbox around it, with the extra `mounts` bound in."""

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release backend-wide resources (clients, pools)."""


def tmpfs_sizes(limits: SandboxLimits) -> dict[str, int]:
    """Size caps (bytes) of the sandbox's private tmpfs mounts. Their pages count against the memory limit and
    cannot be reclaimed, so an unbounded /tmp filled up would leave every later command to the OOM killer;
    capped, together below the memory limit, a full /tmp is a plain ENOSPC the agent can recover from. (The
    host directories a sandbox writes, its workspace first, have caps of their own, memory too when written
    from inside: `clawgym.sandbox.disk.host_dir_sizes`.)"""
    mem = limits.memory_mb * 1024 * 1024
    return {"/tmp": mem // 2, "/root": mem // 4, "/run": mem // 16, "/home": mem // 16, "/var/tmp": mem // 16}


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
    from clawgym.workspace.materialize import materialize

    limits = limits or SandboxLimits()
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("CLAWGYM_SANDBOX_TMP")))
    try:
        record_owner(root)
        (root / "ctl" / OUT_SUBDIR).mkdir(parents=True)
        capped = disk.limit_host_dirs(root, disk.host_dir_sizes(limits))
        try:
            if prebuilt is not None:
                shutil.copytree(prebuilt, root / "ws", symlinks=True, dirs_exist_ok=True)
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
