"""The in-sandbox supervisor: a POSIX sh loop that keeps the sandbox alive and runs commands on request.

Why sh and not Python: the supervisor must be ready within a few milliseconds of the sandbox starting
(Python's own start-up costs ~20 ms here), and every exec must cost far less than a `docker exec`. The host
writes a small script per request into the control directory (bind-mounted at CTL_DIR), sends its id on the
supervisor's stdin, and reads "<id> <exit code>" back on its stdout; the command's stdout and stderr go to
files beside the script. Wall time is bounded by coreutils `timeout` (which kills the whole process group),
file size by RLIMIT_FSIZE, memory and process count by the backend (cgroups or Docker), or by rlimits here
when the backend has nothing better.
"""

from __future__ import annotations

import itertools
import os
import select
import shlex
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from clawgym.sandbox.base import CTL_DIR, ExecResult, SandboxError

SUPERVISOR_SH = r"""
C="$1"
export CLAWGYM_SUPERVISOR_PID=$$
trap '' PIPE
while IFS= read -r id; do
  case "$id" in
    ''|*[!0-9]*) echo "bad 2"; continue ;;
  esac
  sh "$C/$id/run" </dev/null >"$C/$id/out" 2>"$C/$id/err"
  echo "$id $?"
done
"""

# Kills every process of the sandbox but init (pid 1), the supervisor, our `timeout` parent and ourselves.
KILL_ALL_SH = r"""
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  case "$p" in 1|"$CLAWGYM_SUPERVISOR_PID"|"$PPID"|"$$") continue ;; esac
  kill -9 "$p" 2>/dev/null
done
exit 0
"""

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _q(s: str) -> str:
    return shlex.quote(s)


def build_run_script(
    command: str | Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    max_file_bytes: int,
    memory_kb: int | None,
    stdin_path: str | None,
) -> str:
    """The per-request script the supervisor runs: cwd, env, rlimits, stdin, then `timeout` + the command."""
    lines = [f"cd -- {_q(cwd)} || exit 125"]
    for k, v in env.items():
        if not k.replace("_", "a").isalnum() or k[0].isdigit():
            raise ValueError(f"bad environment variable name {k!r}")
        lines.append(f"export {k}={_q(v)}")
    lines.append(f"ulimit -f {max(1, max_file_bytes // 512)} 2>/dev/null")
    if memory_kb:
        lines.append(f"ulimit -v {memory_kb} 2>/dev/null")
    if stdin_path:
        lines.append(f"exec <{_q(stdin_path)}")
    argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
    if not argv:
        raise ValueError("empty command")
    secs = f"{max(timeout, 0.001):.3f}"
    lines.append(f"exec timeout -s KILL {secs} " + " ".join(_q(a) for a in argv))
    return "\n".join(lines) + "\n"


class SupervisorChannel:
    """Talks to one supervisor: requests go to `write_line`, answers come from the readable fd `read_fd`."""

    def __init__(
        self,
        host_ctl: Path,
        write_line: Callable[[bytes], None],
        read_fd: int,
        alive: Callable[[], bool],
        sandbox_ctl: str = CTL_DIR,
        demux: Callable[[bytes], bytes] | None = None,
    ):
        self.host_ctl = host_ctl
        self.sandbox_ctl = sandbox_ctl
        self._write = write_line
        self._fd = read_fd
        self._alive = alive
        self._demux = demux
        self._buf = b""
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _readline(self, deadline: float) -> bytes:
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxError("the sandbox supervisor stopped answering")
            r, _, _ = select.select([self._fd], [], [], min(left, 1.0))
            if not r:
                if not self._alive():
                    raise SandboxError("the sandbox died")
                continue
            chunk = os.read(self._fd, 65536)
            if not chunk:
                raise SandboxError("the sandbox died (supervisor closed its channel)")
            self._buf += self._demux(chunk) if self._demux else chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def run(
        self,
        command: str | Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        timeout: float,
        max_output: int,
        max_file_bytes: int,
        memory_kb: int | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        with self._lock:
            rid = next(self._ids)
            d = self.host_ctl / str(rid)
            d.mkdir()
            stdin_path = None
            if stdin is not None:
                (d / "in").write_bytes(stdin.encode("utf-8") if isinstance(stdin, str) else stdin)
                stdin_path = f"{self.sandbox_ctl}/{rid}/in"
            script = build_run_script(
                command, cwd=cwd, env=env, timeout=timeout, max_file_bytes=max_file_bytes,
                memory_kb=memory_kb, stdin_path=stdin_path,
            )
            (d / "run").write_text(script)
            t0 = time.monotonic()
            try:
                self._write(f"{rid}\n".encode())
            except OSError as exc:
                raise SandboxError(f"the sandbox died ({exc})") from None
            # the command's own timeout fires first; the margin covers process teardown
            line = self._readline(t0 + timeout + 15.0)
            elapsed = time.monotonic() - t0
            try:
                got_id, code = line.decode().split()
                if int(got_id) != rid:
                    raise ValueError
                exit_code = int(code)
            except ValueError:
                raise SandboxError(f"garbled answer from the sandbox supervisor: {line[:100]!r}") from None
            stdout, t1 = _read_capped(d / "out", max_output)
            stderr, t2 = _read_capped(d / "err", max_output)
            shutil.rmtree(d, ignore_errors=True)
        timed_out = exit_code in (124, 137) and elapsed >= timeout * 0.98
        limit = None
        if timed_out:
            limit = "timeout"
        elif exit_code == 128 + 25 or exit_code == 153:  # SIGXFSZ
            limit = "file_size"
        elif t1 or t2:
            limit = "output"
        return ExecResult(
            exit_code=exit_code, stdout=stdout, stderr=stderr, duration_s=elapsed,
            timed_out=timed_out, truncated=t1 or t2, limit=limit,
        )


def _read_capped(path: Path, cap: int) -> tuple[str, bool]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(cap + 1)
    except FileNotFoundError:
        return "", False
    truncated = len(data) > cap
    return data[:cap].decode("utf-8", errors="replace"), truncated
