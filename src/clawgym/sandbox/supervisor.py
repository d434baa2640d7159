"""The in-sandbox supervisor: a POSIX sh loop that keeps the sandbox alive and runs commands on request.

Why sh and not Python: the supervisor must be ready within a few milliseconds of the sandbox starting
(Python's own start-up costs ~20 ms here), and every exec must cost far less than a `docker exec`. The host
writes a small script per request into the control directory (bind-mounted READ-ONLY at CTL_DIR), sends its
id on the supervisor's stdin, and reads "<id> <exit code> <pgid>" back on its stdout; the command's stdout and
stderr go to files in CTL_DIR/out, the only writable part of the control directory. Wall time is bounded by
coreutils `timeout` (which SIGKILLs the whole process group; the host then waits, from outside, until that
group is really gone, so the next command finds its process slots free), file size by RLIMIT_FSIZE, memory
and process count by the backend (cgroups or Docker), or by rlimits here when the backend has nothing
better. Commands raise their own OOM score to the maximum, so the OOM killer takes them before the
supervisor.

Robustness against the commands it runs:

* dash exits when `fork` fails, which is what happens while a fork bomb holds every slot of the process
  limit. The supervisor's EXIT trap then answers the pending request with "<id> nofork" and execs a fresh
  supervisor in the same process (exec needs no fork; the script text is passed along in "$1", never read
  from a file the sandbox could rewrite), so the sandbox survives and the command is reported as stopped by
  the process limit.
* SIGPIPE keeps its default disposition: an ignored signal would be inherited by every command. Commands
  run as background jobs (so the supervisor knows their pid, which `timeout` makes their process group);
  the SIGINT / SIGQUIT that sh ignores in background jobs are caught by `timeout`, so reset by its exec.
* Commands can write to the supervisor's stdout (`/proc/$CLAWGYM_SUPERVISOR_PID/fd/1`) and stdin. So every
  request carries a fresh random token, sent only through the supervisor's stdin and never written to a file,
  and only an answer line carrying it counts: forged answers are ignored, never taken for a garbled channel
  (which would turn the agent's mischief into an infrastructure error). A newline before each request ends
  any partial line pushed into stdin.
* The host reads the output files through a directory fd with O_NOFOLLOW | O_NONBLOCK and only takes regular
  files, so a command that swaps its output file for a symlink (to a host path) or a FIFO gets nothing.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import secrets
import select
import shlex
import signal
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from clawgym.core.fstree import remove_at
from clawgym.sandbox.base import CTL_DIR, ExecResult, SandboxError

SUPERVISOR_SH = r"""
S="$1"; C="$2"
export CLAWGYM_SUPERVISOR_PID=$$
id=
tok=
eof=
trap '[ -z "$id" ] || echo "$tok $id nofork"; [ -n "$eof" ] || exec sh -c "$S" supervisor "$S" "$C"' EXIT
while :; do
  id=
  tok=
  IFS=' ' read -r id tok || { eof=1; id=; break; }
  case "$id" in
    ''|*[!0-9]*) id=; continue ;;
  esac
  case "$tok" in
    ''|*[!0-9a-f]*) id=; continue ;;
  esac
  sh "$C/$id.run" </dev/null >"$C/out/$id.out" 2>"$C/out/$id.err" &
  p=$!
  wait "$p"
  echo "$tok $id $? $p"
done
"""
_MAX_LINE = 1 << 20  # longest line kept from the supervisor's channel
JUNK_FREE = 1 << 20  # junk read at full speed in one request, before reads are spaced out
JUNK_PAUSE_S = 0.005  # between two reads of a flooded channel
OUT_SUBDIR = "out"  # the writable part of the control directory (captured output)
NOFORK_EXIT = 126  # reported exit code of a command the supervisor could not start (process limit)

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
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def supervisor_argv(ctl: str) -> list[str]:
    """The command that starts the supervisor, with `ctl` the control directory as the sandbox sees it."""
    return ["sh", "-c", SUPERVISOR_SH, "supervisor", SUPERVISOR_SH, ctl]


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
    # commands are the OOM killer's first choice (raising one's score needs no privilege), so that one that
    # fills the memory limit (a tmpfs /tmp counts) is killed rather than the supervisor
    lines = ["echo 1000 2>/dev/null >/proc/self/oom_score_adj", f"cd -- {_q(cwd)} || exit 125"]
    for k, v in env.items():
        if not _ENV_NAME.match(k):
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


def _unlink(dir_fd: int, name: str) -> None:
    """Remove an entry (whatever a command put there: file, symlink, FIFO or directory) without following
    symlinks."""
    try:
        remove_at(dir_fd, name)  # iterative: a tree of any depth a command built there
    except OSError:
        pass


def _write_new(dir_fd: int, name: str, data: bytes) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


class SupervisorChannel:
    """Talks to one supervisor: requests go to `write_line`, answers come from the readable fd `read_fd`.

    `host_ctl` is the control directory on the host; the sandbox sees it at `sandbox_ctl`, read-only except
    for its `out` subdirectory (which the backend mounts read-write)."""

    def __init__(
        self,
        host_ctl: Path,
        write_line: Callable[[bytes], None],
        read_fd: int,
        alive: Callable[[], bool],
        sandbox_ctl: str = CTL_DIR,
        demux: Callable[[bytes], bytes] | None = None,
        group_alive: Callable[[int], bool | None] | None = None,
    ):
        self.host_ctl = host_ctl
        self._group_alive = group_alive
        self.sandbox_ctl = sandbox_ctl
        self._write = write_line
        self._fd = read_fd
        self._alive = alive
        self._demux = demux
        self._buf = b""
        self.junk_bytes = 0  # bytes read from the channel that were no answer (a command flooding it)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        # poll, not select: select fails on fds past 1024, which a process running many sandboxes reaches
        self._poll = select.poll()
        self._poll.register(read_fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def _fill(self, deadline: float) -> None:
        """Read what the supervisor's channel has (waiting up to `deadline`) into the buffer."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise SandboxError("the sandbox supervisor stopped answering")
        if not self._poll.poll(min(left, 1.0) * 1000):
            if not self._alive():
                raise SandboxError("the sandbox died")
            return
        try:
            chunk = os.read(self._fd, 1 << 20)
        except OSError as exc:
            raise SandboxError(f"the sandbox died ({exc})") from None
        if not chunk:
            raise SandboxError("the sandbox died (supervisor closed its channel)")
        self._buf += self._demux(chunk) if self._demux else chunk

    def _answer(self, mark: bytes, deadline: float) -> bytes:
        """The rest of the supervisor's answer line that starts with `mark` (the request's token).

        Everything else on the channel is junk a command wrote into the supervisor's stdout through /proc
        (`yes > /proc/$CLAWGYM_SUPERVISOR_PID/fd/1`), and costs the host as little as possible: the buffer is
        searched once per read for the token, never split line by line, and past JUNK_FREE bytes of junk in one
        request the reads are spaced JUNK_PAUSE_S apart, which caps what a flood makes the host read (a pipe
        holds 64 KiB) while the answer still gets through."""
        junk = 0
        while True:
            at = self._buf.find(mark)
            if at >= 0:
                end = self._buf.find(b"\n", at)
                if end >= 0:
                    line = self._buf[at + len(mark):end]
                    self._buf = self._buf[end + 1:]
                    return line
                dropped = at if len(self._buf) - at <= _MAX_LINE else len(self._buf)  # no answer is this long
            else:
                dropped = max(0, len(self._buf) - (len(mark) - 1))  # the mark's start may end what was read
            self._buf = self._buf[dropped:]
            junk += dropped
            self.junk_bytes += dropped
            if junk > JUNK_FREE:
                time.sleep(JUNK_PAUSE_S)
            self._fill(deadline)

    def _wait_group(self, pgid: int, wait_s: float = 5.0) -> None:
        """After a timeout: `timeout` is gone but the rest of its process group (which it SIGKILLed) may still
        be dying; wait until it is, so that the next command finds the process slots free again."""
        if self._group_alive is None:
            return
        deadline = time.monotonic() + wait_s
        while self._group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.002)

    def clear_outputs(self) -> None:
        """Remove everything commands left in the writable output directory (planted links, FIFOs...)."""
        out = self.host_ctl / OUT_SUBDIR
        try:
            fd = os.open(out, _DIR_FLAGS)
        except OSError:
            return
        try:
            for name in os.listdir(fd):
                _unlink(fd, name)
        finally:
            os.close(fd)

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
            stdin_path = f"{self.sandbox_ctl}/{rid}.in" if stdin is not None else None
            script = build_run_script(
                command, cwd=cwd, env=env, timeout=timeout, max_file_bytes=max_file_bytes,
                memory_kb=memory_kb, stdin_path=stdin_path,
            )
            ctl_fd = os.open(self.host_ctl, _DIR_FLAGS)
            try:
                out_fd = os.open(OUT_SUBDIR, _DIR_FLAGS, dir_fd=ctl_fd)
            except OSError:
                os.close(ctl_fd)
                raise SandboxError("the sandbox's output directory is gone") from None
            names = (f"{rid}.out", f"{rid}.err")
            try:
                for name in names:  # whatever a command may have planted under these names
                    _unlink(out_fd, name)
                if stdin is not None:
                    _write_new(ctl_fd, f"{rid}.in", stdin.encode("utf-8") if isinstance(stdin, str) else stdin)
                _write_new(ctl_fd, f"{rid}.run", script.encode())
                t0 = time.monotonic()
                token = secrets.token_hex(16)
                try:
                    # the leading newline ends whatever partial line a command may have pushed into the
                    # supervisor's stdin, so that this request is read whole
                    self._write(f"\n{rid} {token}\n".encode())
                except OSError as exc:
                    raise SandboxError(f"the sandbox died ({exc})") from None
                # the command's own timeout fires first; the margin covers process teardown
                # only the answer carrying this request's token counts: a late answer of an earlier request
                # has another token, and a command writing to the supervisor's stdout (/proc/PID/fd/1)
                # cannot know the token, which never appears in any file of the sandbox
                line = self._answer(token.encode() + b" ", t0 + timeout + 15.0)
                elapsed = time.monotonic() - t0
                nofork = False
                try:
                    got_id, code, *pgid = line.decode().split()
                    if int(got_id) != rid or len(pgid) > 1:
                        raise ValueError
                    nofork = code == "nofork"
                    exit_code = NOFORK_EXIT if nofork else int(code)
                    group = int(pgid[0]) if pgid else None
                except (ValueError, UnicodeDecodeError):
                    raise SandboxError(f"garbled answer from the sandbox supervisor: {line[:100]!r}") from None
                if group is not None and exit_code in (124, 137) and elapsed >= timeout * 0.98:
                    self._wait_group(group)
                stdout, t1, n1 = _read_capped(out_fd, names[0], max_output)
                stderr, t2, n2 = _read_capped(out_fd, names[1], max_output)
            finally:
                for name in names:
                    _unlink(out_fd, name)
                for name in (f"{rid}.run", f"{rid}.in"):
                    _unlink(ctl_fd, name)
                os.close(out_fd)
                os.close(ctl_fd)
        timed_out = exit_code in (124, 137) and elapsed >= timeout * 0.98
        limit = None
        if timed_out:
            limit = "timeout"
        elif nofork or (exit_code == 125 and "fork system call failed" in stderr):
            # the supervisor (or `timeout`) could not fork: the process limit is full
            limit = "processes"
            if nofork:
                stderr = "cannot start the command: the sandbox is at its process limit\n"
        elif exit_code == 128 + 25:  # SIGXFSZ
            # the captured output is itself a file under RLIMIT_FSIZE: a flood of output ends the same way
            limit = "output" if max(n1, n2) >= max_file_bytes else "file_size"
        elif t1 or t2:
            limit = "output"
        return ExecResult(
            exit_code=exit_code, stdout=stdout, stderr=stderr, duration_s=elapsed,
            timed_out=timed_out, truncated=t1 or t2, limit=limit,
        )


def _read_capped(dir_fd: int, name: str, cap: int) -> tuple[str, bool, int]:
    """A captured stream cut to `cap` bytes, whether it was longer, and its full size. A longer stream keeps
    its head AND its tail (what a checker prints last, its score, is at the end), joined by a line saying how
    much was left out. Only a regular file counts: never follows a symlink, never blocks on a FIFO."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO, errno.EISDIR):
            return "", False, 0
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "", False, 0
        if st.st_size <= cap:
            data = _read_at(fd, 0, cap + 1)
            if len(data) <= cap:
                return data.decode("utf-8", errors="replace"), False, st.st_size
        size = max(st.st_size, os.fstat(fd).st_size)
        room = cap - len(_omitted(size))  # the whole text, marker included, stays within `cap`
        if room < 64:  # too small a cap to show both ends
            head, tail = _read_at(fd, 0, cap), b""
        else:
            head = _read_at(fd, 0, room - room // 2)
            tail = _read_at(fd, max(len(head), size - room // 2), room // 2)
    finally:
        os.close(fd)
    if not tail:
        return head.decode("utf-8", errors="replace")[:cap], True, size
    text = (head.decode("utf-8", errors="replace") + _omitted(size - len(head) - len(tail))
            + tail.decode("utf-8", errors="replace"))
    return text[:cap] if len(text) > cap else text, True, size


def _omitted(n: int) -> str:
    return f"\n[... {n} bytes omitted ...]\n"


def _read_at(fd: int, offset: int, n: int) -> bytes:
    chunks = []
    while n > 0:
        chunk = os.pread(fd, min(n, 1 << 20), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        n -= len(chunk)
    return b"".join(chunks)


# -- host-side process control ---------------------------------------------------------------------------
# Killing leftovers from inside the sandbox needs a fork, which is impossible while a fork bomb holds the
# whole process limit. When the sandbox's processes are visible from here (bwrap, local Docker), they are
# killed from the host instead: every process of the sandbox's pid namespace except its init and the
# supervisor (init's oldest child; orphans re-parented to init always started later).


def proc_stat(pid: int) -> tuple[int, str, int] | None:
    """(ppid, state, start time) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[0].decode(), int(fields[19])


def _pidns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def namespace_members(init_pid: int, candidates: Callable[[], list[int]] | None = None) -> list[int] | None:
    """Live processes of the pid namespace whose init is `init_pid`, minus init and the supervisor; None
    when that namespace is not visible from here."""
    ns = _pidns(init_pid)
    if ns is None or ns == _pidns(os.getpid()):
        return None
    members: dict[int, tuple[int, str, int]] = {}
    for pid in (candidates or _all_pids)():
        if pid == init_pid or _pidns(pid) != ns:
            continue
        st = proc_stat(pid)
        if st is not None:
            members[pid] = st
    children = [(st[2], pid) for pid, st in members.items() if st[0] == init_pid]
    if children:
        del members[min(children)[1]]  # the supervisor
    return [pid for pid, st in members.items() if st[1] not in ("Z", "X")]


def kill_namespace(init_pid: int, candidates: Callable[[], list[int]] | None = None, wait_s: float = 5.0) -> bool:
    """SIGKILL every process of the sandbox (see :func:`namespace_members`) until none is left.

    Returns False when the namespace is not visible from here (the caller then kills from inside)."""
    deadline = time.monotonic() + wait_s
    while True:
        pids = namespace_members(init_pid, candidates)
        if pids is None:
            return False
        if not pids:
            return True
        if time.monotonic() > deadline:
            raise SandboxError(f"could not kill {len(pids)} processes left in the sandbox")
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.002)


def _status_field(pid: int, key: str) -> str | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key):
                    return line[len(key):].strip()
    except OSError:
        pass
    return None


def group_alive(pgid: int, init_pid: int | None, candidates: Callable[[], list[int]] | None = None) -> bool | None:
    """Whether a live (not zombie) process is left in process group `pgid`, numbered as seen in the pid
    namespace of `init_pid` (None: this namespace). None when that cannot be told from here."""
    ns = _pidns(init_pid) if init_pid is not None else _pidns(os.getpid())
    if ns is None:
        return None
    for pid in (candidates or _all_pids)():
        if _pidns(pid) != ns:
            continue
        nspgid = _status_field(pid, "NSpgid:")
        state = _status_field(pid, "State:")
        if nspgid and nspgid.split()[-1] == str(pgid) and state and state[0] not in "ZX":
            return True
    return False


def first_child(pid: int) -> int | None:
    """The oldest child of a process (bwrap's namespace init is the only child of the outer bwrap)."""
    try:
        kids = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                kids += [int(x) for x in fh.read().split()]
    except OSError:
        kids = [p for p in _all_pids() if (proc_stat(p) or (0,))[0] == pid]
    stats = [(st[2], k) for k in kids if (st := proc_stat(k)) is not None]
    return min(stats)[1] if stats else None
