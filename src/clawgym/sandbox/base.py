"""The sandbox interface shared by every backend.

A sandbox holds one episode: it starts with a workspace, runs commands with timeouts and captured output,
reads and writes files, takes files in after the agent ends (checkers), snapshots the final workspace and
stops. The workspace always lives in a host directory that the backend mounts at the task's mount dir, so
file access and snapshots are plain host file operations, confined to that directory.
"""

from __future__ import annotations

import base64
import os
import posixpath
import shutil
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from clawgym.core.errors import ClawgymError
from clawgym.core.records import WorkspaceFile, WorkspaceSpec


CTL_DIR = "/.clawgym"  # where each sandbox sees its control directory (supervisor and checker files)


class SandboxError(ClawgymError):
    """The sandbox itself failed (could not start, died, stopped answering): an infrastructure error."""


class SandboxUnavailable(SandboxError):
    """A backend cannot run on this machine; the message says why and how to fix it."""


class SandboxLimits(BaseModel):
    """Resource limits of one sandbox. Every backend enforces all of them (see each backend for how)."""

    model_config = ConfigDict(extra="forbid")

    memory_mb: int = Field(default=2048, gt=0, description="Memory of all processes together.")
    max_processes: int = Field(default=256, gt=0, description="Processes and threads alive at once.")
    cpus: float = Field(default=1.0, gt=0, description="CPU share (Docker); bwrap relies on the host scheduler.")
    max_file_mb: int = Field(default=256, gt=0, description="Largest single file a command may write.")
    max_output_bytes: int = Field(default=1_000_000, gt=0, description="Captured stdout/stderr kept per exec.")
    exec_timeout_s: float = Field(default=120.0, gt=0, description="Default wall-time limit of one exec.")
    network: bool = Field(default=False, description="Give the sandbox a network (off by default).")


@dataclass
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    truncated: bool = False
    limit: str | None = None  # which limit stopped the command: timeout, file_size, memory, output

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
    def workdir(self) -> str:
        """Where the workspace is seen by commands in the sandbox (the mount dir, except for `local`)."""
        return self.mount_dir

    # -- files ----------------------------------------------------------------------------------------
    def host_path(self, path: str) -> Path | None:
        """Host path of a sandbox path inside the workspace (relative, or absolute under the mount dir).

        Returns None for sandbox paths outside the workspace. Raises SandboxError for paths that resolve
        (through symlinks planted by the agent) outside the workspace.
        """
        if path.startswith("/"):
            norm = posixpath.normpath(path)
            for base in {self.mount_dir, self.workdir}:
                if norm == base or norm.startswith(base.rstrip("/") + "/"):
                    rel = posixpath.relpath(norm, base)
                    break
            else:
                return None
        else:
            rel = posixpath.normpath(path)
        root = os.path.realpath(self.host_workspace)
        target = os.path.realpath(os.path.join(root, rel))
        if target != root and not target.startswith(root + os.sep):
            raise SandboxError(f"path {path!r} leaves the workspace")
        return Path(target)

    def read_file(self, path: str) -> bytes:
        hp = self.host_path(path)
        if hp is not None:
            return hp.read_bytes()
        res = self.exec(["base64", "-w0", "--", path], cwd="/")
        if res.exit_code != 0:
            raise FileNotFoundError(f"{path}: {res.stderr.strip()}")
        return base64.b64decode(res.stdout)

    def write_file(self, path: str, data: str | bytes, mode: int | None = None) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else data
        hp = self.host_path(path)
        if hp is not None:
            hp.parent.mkdir(parents=True, exist_ok=True)
            # re-check after mkdir: a parent could be a symlink created by the agent
            self.host_path(path)
            hp.write_bytes(payload)
            if mode is not None:
                hp.chmod(mode)
            return
        parent = posixpath.dirname(path) or "/"
        script = f'mkdir -p -- "$1" && base64 -d > "$2"' + (f' && chmod {mode:o} -- "$2"' if mode else "")
        res = self.exec(["sh", "-c", script, "sh", parent, path], cwd="/", stdin=base64.b64encode(payload))
        if res.exit_code != 0:
            raise SandboxError(f"cannot write {path} in the sandbox: {res.stderr.strip()}")

    def copy_in(self, files: Sequence[WorkspaceFile], assets_dir: Path | None = None) -> None:
        """Write task files (e.g. a checker) into the live workspace, after the agent has ended."""
        from clawgym.workspace.materialize import write_files

        write_files(list(files), self.host_workspace, assets_dir)

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
    ) -> Sandbox:
        """Materialize the workspace and start a sandbox around it."""

    def close(self) -> None:
        """Release backend-wide resources (clients, pools)."""


def prepare_host_workspace(workspace: WorkspaceSpec, base_dir: Path | None, prefix: str) -> Path:
    """A fresh host temp dir with `ws/` (the materialized workspace) and `ctl/` (the supervisor's files)."""
    import tempfile

    from clawgym.workspace.materialize import materialize

    root = Path(tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("CLAWGYM_SANDBOX_TMP")))
    try:
        (root / "ctl").mkdir()
        materialize(workspace, root / "ws", base_dir=base_dir)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return root
