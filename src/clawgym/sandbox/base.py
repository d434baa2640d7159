"""The sandbox protocol: what every backend implements, and what clawgym asks of a sandbox.

A sandbox holds one episode. Everything clawgym does with it after `SandboxBackend.start` goes through the
methods of :class:`Sandbox` below, never through host paths, so that a backend whose workspace is not a host
directory (a Kubernetes pod, a cloud sandbox) implements the same protocol. The methods and their contracts
(docs/sandbox-protocol.md says the same at more length):

Commands
  * ``exec(command, cwd=, env=, timeout=, stdin=) -> ExecResult``: run a shell command (str) or an argv (list)
    in the sandbox, cwd defaulting to the workspace; wall time bounded by `timeout` (the limits' default when
    None), stdout and stderr captured and each cut to `limits.max_output_bytes` (head and tail kept),
    `ExecResult.limit` naming the limit that stopped the command. A failure of the command is a result; a
    failure of the sandbox itself raises SandboxError.
  * ``kill_processes()``: kill every process the episode left (background jobs); the sandbox stays usable.
    Called when the agent is done, before anything is verified.
  * ``restart()``: end the sandbox's whole process tree (the supervisor, every process in any pid namespace
    under it) and start a fresh one (new supervisor, new namespaces, an empty control directory at a new
    path) over the same workspace. Called when the agent is done, before anything is graded, so that no
    process of the agent's can change what the grader reads or writes. A backend that cannot implement it
    inherits a fallback to ``kill_processes()`` and says so with ``fresh_grading = False``.
  * ``stop()``: kill everything and release the sandbox; idempotent.

Workspace files. A path is one a command in the sandbox could use: relative to the workspace, or absolute
under the mount dir (or under `workdir`, when the backend cannot mount at the mount dir). Everything in the
workspace is hostile: the agent may have planted symlinks (to host paths), FIFOs, device nodes, and a
background process may swap entries at any moment. So links are followed only as the sandbox would follow them
and only while they stay inside the workspace (else SandboxPathError, "leaves the workspace"), only regular
files are read or written (else SandboxPathError, "not a regular file"), and nothing may block on, or reach,
what lies outside the sandbox.
  * ``read_file(path, max_bytes=None) -> bytes``: a regular file's bytes (at most `max_bytes`, from the start).
    FileNotFoundError / IsADirectoryError as for open(). Paths outside the workspace are read in the sandbox.
  * ``write_file(path, data, mode=None)``: create or replace a file as the agent would (parents created).
    Paths outside the workspace are written in the sandbox.
  * ``stat(path) -> FileStat | None`` (None: missing), ``exists(path)``, ``list_dir(path) -> [DirEntry]``
    (FileNotFoundError / NotADirectoryError): what is there, links followed as above; list_dir does not follow
    the links it lists (DirEntry.kind "link").
  * ``copy_in(files, assets_dir=, empty_dirs=)``: place TRUSTED files (a checker) after the agent has ended:
    whatever is at their paths or in the way of their parent directories is removed, never followed or opened;
    the top-level directories `empty_dirs` are removed first. OSError when they do not fit (a full workspace).
  * ``import_tree(src, dest=".")``: copy a trusted host directory tree into the workspace at `dest`, the same
    way (symlinks copied as links, modes and modification times kept, other kinds skipped).
  * ``clear_workspace()``: remove everything in the workspace (its processes are gone).
  * ``snapshot(dest, max_bytes=None)`` / ``snapshot_archive(dest, max_bytes=None)``: copy the workspace out to
    the new host directory / gzip tar file `dest`; symlinks copied as links, never followed; other kinds than
    files, directories and links skipped; files past `max_bytes` in all skipped. Returns counts (see
    :func:`clawgym.workspace.materialize.snapshot`).
  * ``take_workspace(dest)``: move the workspace's content out to the new host directory `dest`, leaving it
    empty (its processes are gone).

Trusted files outside the workspace
  * ``write_control_file(name, data) -> str``: write a file for commands to read (a grader, its inputs) where
    they cannot change it; returns its path as commands see it.

Attributes: `backend` (its name), `isolated` (False: commands run on the host), `mount_dir` (where the task
wants its workspace), `workdir` (where commands see it), `limits`, `mounts` (extra mounts: target -> host dir,
for backends that bind host directories). Optional: `engine_ok()`.

The built-in backends keep their workspace in a host directory bound into the sandbox:
:class:`clawgym.sandbox.hostdir.HostDirSandbox` implements the file methods with host file operations that
never follow a link (:mod:`clawgym.sandbox.trusted_copy` for the trusted ones), and
:class:`clawgym.sandbox.supervised.SupervisedSandbox` the commands, once for all three.
"""

from __future__ import annotations

import base64
import posixpath
import shlex
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from clawgym.core.errors import ClawgymError
from clawgym.core.records import WorkspaceFile, WorkspaceSpec

CTL_DIR = "/.clawgym"  # where each sandbox sees its control directory (supervisor and checker files)


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


@dataclass(frozen=True)
class FileStat:
    """What a workspace path leads to (links followed as the sandbox would)."""

    kind: Literal["file", "dir", "other"]  # other: a FIFO, socket or device node
    size: int
    mode: int  # permission bits


@dataclass(frozen=True)
class DirEntry:
    """One entry of a workspace directory, as it is (a link is not followed)."""

    name: str
    kind: Literal["file", "dir", "link", "other"]
    size: int
    target: str | None = None  # a link's target, as written


@runtime_checkable
class WorkspaceReader(Protocol):
    """The read side of the workspace files of the protocol: what the judge needs. Every :class:`Sandbox` is
    one, and so is :class:`clawgym.sandbox.hostdir.HostWorkspace` (a workspace snapshot on the host)."""

    def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes: ...

    def stat(self, path: str) -> FileStat | None: ...

    def list_dir(self, path: str = ".") -> list[DirEntry]: ...


@dataclass
class SandboxInfo:
    backend: str
    mount_dir: str
    workdir: str
    isolated: bool
    details: dict[str, object] = field(default_factory=dict)


class Sandbox(ABC):
    """One live sandbox: the protocol every backend implements (see the module docstring for the contracts).
    Use as a context manager, or call :meth:`stop`."""

    backend: str = "?"
    isolated: bool = True

    def __init__(self, mount_dir: str, limits: SandboxLimits):
        self.mount_dir = mount_dir
        self.limits = limits
        self.mounts: dict[str, Path] = {}  # extra mounts: target inside -> host directory

    # -- commands -------------------------------------------------------------------------------------
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

    fresh_grading: bool = True  # restart() ends every process and starts fresh (False: the fallback below)

    def restart(self) -> None:
        """End every process of the sandbox and start a fresh one over the same workspace (for grading). The
        built-in backends implement it; this fallback, for a backend that does not, only kills what the episode
        left (:meth:`kill_processes`), so a process that escaped that kill could still meet the grader."""
        self.fresh_grading = False
        self.kill_processes()

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

    # -- workspace files ------------------------------------------------------------------------------
    @abstractmethod
    def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """A regular file's content (its first `max_bytes` bytes when given)."""

    @abstractmethod
    def write_file(self, path: str, data: str | bytes, mode: int | None = None) -> None:
        """Create or replace a file as the agent would (parent directories created)."""

    @abstractmethod
    def stat(self, path: str) -> FileStat | None:
        """What a workspace path leads to; None when nothing is there."""

    @abstractmethod
    def list_dir(self, path: str = ".") -> list[DirEntry]:
        """The entries of a workspace directory, sorted by name."""

    def exists(self, path: str) -> bool:
        """Whether something is at a workspace path (False, too, for a path that leads out of it)."""
        try:
            return self.stat(path) is not None
        except SandboxPathError:
            return False

    @abstractmethod
    def copy_in(self, files: Sequence[WorkspaceFile], *, assets_dir: Path | None = None,
                empty_dirs: Iterable[str] = ()) -> None:
        """Place trusted files (a checker) after the agent has ended, over whatever it left at their paths."""

    @abstractmethod
    def import_tree(self, src: Path, dest: str = ".") -> None:
        """Copy the trusted host directory `src` into the workspace at `dest` (as copy_in places files)."""

    @abstractmethod
    def clear_workspace(self) -> None:
        """Remove everything in the workspace."""

    @abstractmethod
    def snapshot(self, dest: Path, max_bytes: int | None = None) -> dict[str, int]:
        """Copy the workspace out to the new host directory `dest`."""

    def snapshot_archive(self, dest: Path, max_bytes: int | None = None) -> dict[str, int]:
        """Copy the workspace out to the gzip tar file `dest` (written whole or not at all)."""
        from clawgym.workspace.materialize import snapshot_archive

        with tempfile.TemporaryDirectory(prefix="clawgym-snapshot-") as tmp:
            stats = self.snapshot(Path(tmp) / "ws", max_bytes=max_bytes)
            archived = snapshot_archive(Path(tmp) / "ws", Path(dest))
        return {**archived, "truncated": stats["truncated"], "errors": stats["errors"] + archived["errors"]}

    def take_workspace(self, dest: Path) -> None:
        """Move the workspace's content out to the new host directory `dest`, leaving the workspace empty."""
        self.snapshot(dest)
        self.clear_workspace()

    # -- trusted files outside the workspace ----------------------------------------------------------
    @abstractmethod
    def write_control_file(self, name: str, data: str | bytes) -> str:
        """Write `name` (a relative path) where commands can read it but not change it; its path inside."""

    # -- helpers for implementations ------------------------------------------------------------------
    def workspace_rel(self, path: str) -> str | None:
        """The workspace-relative form of a sandbox path, or None when it is outside the workspace."""
        if path.startswith("/"):
            norm = posixpath.normpath(path)
            for base in {self.mount_dir, self.workdir}:
                if norm == base or norm.startswith(base.rstrip("/") + "/"):
                    return posixpath.relpath(norm, base)
            return None
        return path

    def _read_in_sandbox(self, path: str, max_bytes: int | None = None) -> bytes:
        """Read a file by running a command in the sandbox (for paths outside the workspace: following links
        there reaches nothing but the sandbox's own files)."""
        if max_bytes is None:
            argv = ["base64", "-w0", "--", path]
        else:  # the checks first: the exit status of a pipeline is its last command's
            script = ('{ test -f "$1" && test -r "$1"; } || { cat -- "$1" >/dev/null; exit 1; }; '
                      f'head -c {int(max_bytes)} -- "$1" | base64 -w0')
            argv = ["sh", "-c", script, "sh", path]
        res = self.exec(argv, cwd="/")
        if res.exit_code != 0:
            raise FileNotFoundError(f"{path}: {res.stderr.strip()}")
        return base64.b64decode(res.stdout)

    def _write_in_sandbox(self, path: str, payload: bytes, mode: int | None = None) -> None:
        """Write a file by running a command in the sandbox (for paths outside the workspace)."""
        parent = posixpath.dirname(path) or "/"
        script = 'mkdir -p -- "$1" && base64 -d > "$2"' + (f' && chmod {mode:o} -- "$2"' if mode is not None else "")
        res = self.exec(["sh", "-c", script, "sh", parent, path], cwd="/", stdin=base64.b64encode(payload))
        if res.exit_code != 0:
            raise SandboxError(f"cannot write {shlex.quote(path)} in the sandbox: {res.stderr.strip()}")

    def info(self) -> SandboxInfo:
        return SandboxInfo(self.backend, self.mount_dir, self.workdir, self.isolated)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SandboxBackend(ABC):
    """Creates sandboxes of one kind. Register a backend by name with
    :func:`clawgym.sandbox.registry.register_backend` (or the `clawgym.sandbox_backends` entry point group)."""

    name: str = "?"
    isolated: bool = True  # False: commands run on the host (never chosen by "auto")
    auto_priority: int | None = None  # tried by "auto" in this order (lowest first); None: never

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
        """Materialize the workspace (or copy `prebuilt`, a host directory already holding it) and start a
        sandbox around it, with the extra `mounts` bound in (SandboxUnavailable when the backend cannot bind
        host directories)."""

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
