"""The local backend: the same supervisor as a plain subprocess in a temp dir. NO isolation.

Only for debugging, or machines where neither bubblewrap nor Docker can run; it is never chosen
automatically, and starting it logs a warning. Commands see the workspace at its host path (`workdir`), not at
the task's mount dir; the verifier rewrites checker paths accordingly. The workspace and output directory are
size-capped like the other backends' (`clawgym.sandbox.disk`), and a dead owner's temp dir and cgroup are
removed by its reaper or the next sweep (`clawgym.sandbox.sweep`).
"""

from __future__ import annotations

import os
import signal
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from clawgym.core.records import WorkspaceSpec
from clawgym.sandbox import disk, sweep
from clawgym.sandbox.base import Mount, SandboxBackend, SandboxLimits, SandboxUnavailable
from clawgym.sandbox.cgroups import CgroupLimits
from clawgym.sandbox.hostdir import prepare_host_workspace
from clawgym.sandbox.registry import register_backend
from clawgym.sandbox.supervised import SupervisedSandbox
from clawgym.sandbox.supervisor import BASE_PATH, group_alive, supervisor_argv

WARNING = "sandbox backend 'local' runs agent commands on the host with NO isolation"


def _alive(pid: int) -> bool:
    """True unless the process is gone or a zombie (dead, waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _session_members(sid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid:  # fields after the comm: state ppid pgrp session ...
            out.append(int(entry))
    return out


class LocalSandbox(SupervisedSandbox):
    backend = "local"
    isolated = False
    _can_kill_inside = False  # "inside" is the host: leftovers are only ever killed by session and cgroup

    def __init__(self, root: Path, mount_dir: str, limits: SandboxLimits):
        super().__init__(root, mount_dir, limits,
                         CgroupLimits.create(limits.max_processes, limits.memory_mb * 1024 * 1024))
        self.ctl_inside = str(root / "ctl")
        self._launch()

    def _launch(self) -> None:
        """The supervisor as a plain subprocess in a new session (no isolation: the control directory is seen at
        its host path)."""
        root = self._root
        args = supervisor_argv(str(root / "ctl"))
        if self.cgroup is not None:
            args = self.cgroup.join_argv(args)
        env = {
            "PATH": os.environ.get("PATH", BASE_PATH), "HOME": str(root / "ws"), "LANG": "C.UTF-8",
            "WORKSPACE": str(root / "ws"), "TERM": "dumb",
        }
        self._start_process(
            args, env=env, cwd=root / "ws", capture_stderr=False, sandbox_ctl=str(root / "ctl"),
            group_alive=lambda pgid: group_alive(pgid, None, self._members), new_session=True,
            what="the local supervisor",
        )

    def _members(self) -> list[int]:
        pids = set(_session_members(self._proc.pid)) if self._proc is not None else set()
        if self.cgroup is not None:
            pids.update(self.cgroup.pids())
        return sorted(pids)

    @property
    def workdir(self) -> str:
        return str(self.host_workspace)

    def _exec_cwd(self, cwd: str | None) -> str:
        """Commands see the workspace at its host path: a cwd under the mount dir is mapped there."""
        if cwd is not None and (cwd == self.mount_dir or cwd.startswith(self.mount_dir + "/")):
            cwd = self.workdir + cwd[len(self.mount_dir):]
        return cwd or self.workdir

    def _kill_from_host(self) -> bool:
        self._kill_all()
        return True

    def _kill_all(self) -> None:
        # the supervisor's session, and its cgroup when it has one (which also holds jobs that left the
        # session with setsid); repeated until nothing is left, so that forking jobs cannot outrun it
        if self._proc is None:
            return
        for _ in range(200):
            pids = set(self._members())
            pids.discard(self._proc.pid)
            pids = {p for p in pids if _alive(p)}
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)

    def _shutdown(self) -> None:
        self._kill_all()
        super()._shutdown()


@register_backend("local")
class LocalBackend(SandboxBackend):
    name = "local"
    isolated = False  # never chosen by "auto"

    def __init__(self) -> None:
        self._swept = False

    def check(self) -> tuple[bool, str]:
        return True, f"always available; NO isolation (commands run on the host); {disk.describe()}"

    def start(
        self, workspace: WorkspaceSpec, *, limits: SandboxLimits | None = None, base_dir: Path | None = None,
        prebuilt: Path | None = None, mounts: Sequence[Mount] = (),
    ) -> LocalSandbox:
        if mounts:
            raise SandboxUnavailable("the local backend cannot bind directories into a sandbox; use bwrap or docker")
        warnings.warn(WARNING, stacklevel=2)
        if not self._swept:
            self._swept = True
            sweep.sweep_host()
        limits = limits or SandboxLimits()
        root = prepare_host_workspace(workspace, base_dir, "clawgym-local-", prebuilt, limits)
        return LocalSandbox(root, workspace.mount_dir, limits)
