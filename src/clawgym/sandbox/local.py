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
import subprocess
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from clawgym.core.records import WorkspaceSpec
from clawgym.sandbox import disk, sweep
from clawgym.sandbox.base import (
    ExecResult,
    Mount,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
    prepare_host_workspace,
)
from clawgym.sandbox.cgroups import CgroupLimits
from clawgym.sandbox.supervisor import BASE_PATH, SupervisorChannel, group_alive, supervisor_argv

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


class LocalSandbox(Sandbox):
    backend = "local"
    isolated = False

    def __init__(self, root: Path, mount_dir: str, limits: SandboxLimits):
        super().__init__(root / "ws", mount_dir, limits)
        self._root = root
        self._stopped = False
        self.ctl_inside = str(root / "ctl")
        self._disk = disk.capped_dirs(root)
        self.cgroup = CgroupLimits.create(limits.max_processes, limits.memory_mb * 1024 * 1024)
        args = supervisor_argv(str(root / "ctl"))
        if self.cgroup is not None:
            join = " && ".join(f'echo $$ > "{p}"' for p in self.cgroup.procs_files)
            args = ["/bin/sh", "-c", f'{join} && exec "$@"', "sh", *args]
        env = {
            "PATH": os.environ.get("PATH", BASE_PATH), "HOME": str(root / "ws"), "LANG": "C.UTF-8",
            "WORKSPACE": str(root / "ws"), "TERM": "dumb",
        }
        self._proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0,
            cwd=root / "ws", env=env, start_new_session=True,
        )
        self._chan = SupervisorChannel(
            root / "ctl", self._proc.stdin.write, self._proc.stdout.fileno(),
            lambda: self._proc.poll() is None, sandbox_ctl=str(root / "ctl"),
            group_alive=lambda pgid: group_alive(pgid, None, self._members),
        )

    def _members(self) -> list[int]:
        pids = set(_session_members(self._proc.pid))
        if self.cgroup is not None:
            pids.update(self.cgroup.pids())
        return sorted(pids)

    @property
    def workdir(self) -> str:
        return str(self.host_workspace)

    def exec(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        if self._stopped:
            raise SandboxError("sandbox is stopped")
        if cwd is not None and (cwd == self.mount_dir or cwd.startswith(self.mount_dir + "/")):
            cwd = self.workdir + cwd[len(self.mount_dir):]
        res = self._chan.run(
            command, cwd=cwd or self.workdir, env=env or {}, timeout=timeout or self.limits.exec_timeout_s,
            max_output=self.limits.max_output_bytes, max_file_bytes=self.limits.max_file_mb * 1024 * 1024,
            memory_kb=None if self.cgroup else self.limits.memory_mb * 1024, stdin=stdin,
        )
        if res.limit is None:
            res.limit = disk.exec_limit(self._disk, res.exit_code)
        return res

    def kill_processes(self) -> None:
        self._kill_all()
        # the agent is done: trusted files (checkers) must fit, however full it left the workspace
        disk.make_room(self._disk, self.limits)

    def _kill_all(self) -> None:
        # the supervisor's session, and its cgroup when it has one (which also holds jobs that left the
        # session with setsid); repeated until nothing is left, so that forking jobs cannot outrun it
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

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._kill_all()
        try:
            self._proc.kill()
            self._proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for f in (self._proc.stdin, self._proc.stdout):
            try:
                f and f.close()
            except OSError:
                pass
        if self.cgroup is not None:
            self.cgroup.remove()
        sweep.remove_root(self._root)


class LocalBackend(SandboxBackend):
    name = "local"

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
