"""The commands half of the protocol for the built-in backends, implemented once.

bwrap, docker and local all run commands the same way: the sh supervisor (:mod:`clawgym.sandbox.supervisor`)
runs in the sandbox, fed request ids over a channel (a pipe, or Docker's attach socket), with scripts and
captured output in the control directory next to the workspace. :class:`SupervisedSandbox` holds everything
that is the same across them: running a command (timeouts, output capture, limits, which limit stopped it),
killing what an episode left, and stopping. A backend starts its supervisor, hands over the channel, and
supplies the few things that differ through the hooks below:

* ``_exec_cwd(cwd)``: where a command runs (local maps the mount dir to the host workspace);
* ``_rlimit_memory()``: whether memory is bounded by RLIMIT_AS in each command (no cgroup, no container);
* ``_oom_mark()`` / ``_oom_killed(mark)``: whether a SIGKILLed command was the OOM killer's;
* ``_channel_error()``: what the sandbox said when its channel broke (bwrap's start-up error);
* ``_kill_from_host()``: kill leftovers from the host (no fork needed inside, which a fork bomb may prevent);
  when it cannot, they are killed from inside (if ``_can_kill_inside``);
* ``_shutdown()``: end the supervisor (process, container); ``_release()`` frees what is left;
* ``_launch()``: start the supervisor (at start, and again for :meth:`SupervisedSandbox.restart`);
  ``_end_all()``: make sure no process of the sandbox is left once ``_shutdown()`` returned.

Grading never shares a process with the agent: :meth:`SupervisedSandbox.restart` ends the sandbox's whole
process tree (the supervisor, every process under it, any pid namespace a command made), empties the control
directory, and starts a fresh supervisor in fresh namespaces (a fresh container) over the same workspace, with
the control directory at a new random path that no link the agent left can name.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from clawgym.core.fstree import remove_at, remove_contents
from clawgym.sandbox import disk, sweep
from clawgym.sandbox.base import ExecResult, SandboxError, SandboxLimits
from clawgym.sandbox.cgroups import CgroupLimits
from clawgym.sandbox.hostdir import HostDirSandbox
from clawgym.sandbox.supervisor import CTL_DIR, KILL_ALL_SH, OUT_SUBDIR, SupervisorChannel


class SupervisedSandbox(HostDirSandbox):
    """A sandbox in the host temp dir `root` (`ws/` the workspace, `ctl/` the control directory; made by
    :func:`clawgym.sandbox.hostdir.prepare_host_workspace`) whose commands a supervisor runs."""

    _can_kill_inside = True  # False when "inside" is the host (local): KILL_ALL_SH would kill the host's processes

    def __init__(self, root: Path, mount_dir: str, limits: SandboxLimits, cgroup: CgroupLimits | None = None):
        super().__init__(root / "ws", mount_dir, limits)
        self._root = root
        self._stopped = False
        self._disk = disk.capped_dirs(root)
        self.cgroup = cgroup
        self._chan: SupervisorChannel | None = None
        self._proc: subprocess.Popen | None = None
        self.restarts = 0

    def _random_ctl_inside(self) -> str:
        """Where commands see the control directory: a new random directory under CTL_DIR at every launch,
        so that a link the agent left in the workspace (to `/.clawgym/verify/checks0.json`, say) can name no
        file of the grader's."""
        return f"{CTL_DIR}/{secrets.token_hex(12)}"

    # -- starting -------------------------------------------------------------------------------------
    def _start_process(
        self, argv: list[str], *, env: Mapping[str, str], cwd: Path | str, capture_stderr: bool,
        sandbox_ctl: str = CTL_DIR, group_alive: Callable[[int], bool | None] | None = None,
        new_session: bool = False, what: str = "the sandbox", pass_fds: Sequence[int] = (),
    ) -> None:
        """Start the supervisor as a child process (`argv`: bwrap, or the supervisor itself) talking over its
        stdin and stdout; SandboxError (everything released) when it cannot start."""
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if capture_stderr else subprocess.DEVNULL, bufsize=0, env=dict(env),
                cwd=cwd, start_new_session=new_session, pass_fds=tuple(pass_fds),
            )
        except OSError as exc:
            self._release()
            raise SandboxError(f"cannot start {what}: {exc}") from None
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        self._chan = SupervisorChannel(
            self._root / "ctl", proc.stdin.write, proc.stdout.fileno(), lambda: proc.poll() is None,
            sandbox_ctl=sandbox_ctl, group_alive=group_alive,
        )

    # -- hooks ----------------------------------------------------------------------------------------
    def _exec_cwd(self, cwd: str | None) -> str:
        return cwd or self.workdir

    def _rlimit_memory(self) -> bool:
        return self.cgroup is None

    def _oom_mark(self) -> object:
        return self.cgroup.oom_kills() if self.cgroup is not None else None

    def _oom_killed(self, mark: object) -> bool:
        return self.cgroup is not None and isinstance(mark, int) and self.cgroup.oom_kills() > mark

    def _channel_error(self) -> str:
        return ""

    def _kill_from_host(self) -> bool:
        return False

    def _shutdown(self) -> None:
        """End the supervisor's process (backends with another kind of supervisor override this)."""
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                f and f.close()
            except OSError:
                pass

    @abstractmethod
    def _launch(self) -> None:
        """Start the supervisor (sets `_chan`); SandboxError when it cannot. Each backend starts its own (bwrap,
        a container, a plain process), at start and again for :meth:`restart`."""

    def _end_all(self) -> None:
        """After `_shutdown()`: wait until no process of the sandbox is left; SandboxError if some are."""
        if self.cgroup is not None:
            self.cgroup.kill_all(wait_s=5.0)
            if self.cgroup.pids():
                raise SandboxError(f"{len(self.cgroup.pids())} processes of the sandbox survived its end")

    def _reset_control_dir(self) -> None:
        """Empty the control directory (its output subdirectory too, which stays: a mount point)."""
        fd = os.open(self._root / "ctl", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            for name in os.listdir(fd):
                if name != OUT_SUBDIR:
                    remove_at(fd, name)
            out = os.open(OUT_SUBDIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                remove_contents(out)
            finally:
                os.close(out)
        finally:
            os.close(fd)

    def _release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
        sweep.remove_root(self._root)

    # -- the protocol's commands ----------------------------------------------------------------------
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
        if self._chan is None:
            raise SandboxError("the sandbox has no supervisor")
        mark = self._oom_mark()
        try:
            res = self._chan.run(
                command, cwd=self._exec_cwd(cwd), env=env or {}, timeout=timeout or self.limits.exec_timeout_s,
                max_output=self.limits.max_output_bytes, max_file_bytes=self.limits.max_file_mb * 1024 * 1024,
                memory_kb=self.limits.memory_mb * 1024 if self._rlimit_memory() else None, stdin=stdin,
            )
        except SandboxError as exc:
            detail = self._channel_error()
            if detail:
                raise SandboxError(f"{exc}: {detail}") from None
            raise
        # SIGKILL not sent by `timeout`: the OOM killer's?
        if res.limit is None and res.exit_code == 137 and self._oom_killed(mark):
            res.limit = "memory"
        if res.limit is None:
            res.limit = disk.exec_limit(self._disk, res.exit_code)
        return res

    def kill_processes(self) -> None:
        if self._stopped:
            raise SandboxError("sandbox is stopped")
        if not self._kill_from_host():
            if not self._can_kill_inside:
                raise SandboxError("could not kill the processes left in the sandbox")
            self.exec(["sh", "-c", KILL_ALL_SH], cwd="/", timeout=10)
        if self._chan is not None:
            self._chan.clear_outputs()
        # the agent is done: trusted files (checkers) must fit, however full it left the workspace
        disk.make_room(self._disk, self.limits)

    def restart(self) -> None:
        """End everything the episode started and start a fresh sandbox over the same workspace, for grading:
        the supervisor and every process of the sandbox, in any pid namespace under it, are gone before the new
        supervisor starts (new namespaces, a new container), with an empty control directory at a new random
        path. The workspace is as the agent left it, with room made for the checker (`disk.make_room`)."""
        if self._stopped:
            raise SandboxError("sandbox is stopped")
        self._shutdown()
        self._chan = None
        self._end_all()
        self._reset_control_dir()
        disk.make_room(self._disk, self.limits)
        self.restarts += 1
        self._launch()
        if self._stopped:  # stopped by another thread (an interrupted run) while this one restarted it
            self._shutdown()
            raise SandboxError("sandbox is stopped")

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            self._shutdown()
        finally:
            self._release()
