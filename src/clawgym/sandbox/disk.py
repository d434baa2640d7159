"""The per-sandbox disk limit: size-capped tmpfs mounts over the host directories a sandbox can write.

A sandbox writes to the host in three places, all under its temp root: the workspace (`ws`), the output
directory of its commands (`ctl/out`, writable from inside at /.clawgym/out) and the fresh per-sandbox mount
directories (`mnt`, e.g. an agent's state). Each gets its own tmpfs with a `size=` cap before anything is put
there, on the host, so that both backends (which bind the same host directories) and the local one are bound
by it: a write past the cap fails with ENOSPC, and the exec that hit it reports `limit="disk"`.

Why tmpfs: mounting one costs ~15 µs and unmounting it frees everything at once, where a disk-backed
filesystem (a sparse ext4 image on a loop device) costs ~10 ms of mkfs + loop set-up per sandbox and leaves
dirty pages to write back at stop; project quotas depend on how the host filesystem was made and mounted.
The price: the pages are memory. Pages a sandbox's commands write are charged to the sandbox's memory cgroup
(bwrap, Docker), so what the workspace holds counts against the memory limit, and the host's RAM stays
bounded by the memory limits of the sandboxes it runs. Files the host writes (the materialized workspace,
checkers) are charged to the clawgym process.

Trusted files written after the agent (checkers, copied over whatever the agent left) must always fit: an
agent that filled its workspace must not make the checker's copy fail (an infrastructure error, not scored,
would be a reward hack). So :func:`make_room` — called by every backend's `kill_processes()`, which runs when
the agent is done, before verification — raises the workspace's cap by HEADROOM once nothing of the agent runs.

Mounting needs CAP_SYS_ADMIN on the host (clawgym running as root). Without it the directories stay plain
host directories with no limit but the per-file one; :func:`disk_limit_mode` says so, `clawgym sandbox check`
reports it (as "disk limit: NOT enforced") and starting a sandbox warns once.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import tempfile
import warnings
from pathlib import Path

MiB = 1024 * 1024
# the host directories (relative to a sandbox's temp root) that get a size-capped filesystem
WS, OUT, MNT = "ws", "ctl/out", "mnt"
MNT_DETACH = 2
FULL_BELOW = 1 * MiB  # a capped directory with less free space than this is "full"
HEADROOM = 256 * MiB  # added to the workspace's cap for the trusted files written after the agent (make_room)
MS_NOSUID, MS_NODEV, MS_REMOUNT = 0x2, 0x4, 0x20

_libc = None
_mode: tuple[str | None, str] | None = None
_warned = False


def _lib():
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        lib.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        lib.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        _libc = lib
    return _libc


def mount_tmpfs(path: Path, size_bytes: int, mode: int = 0o755, source: str = "clawgym") -> None:
    """Mount a tmpfs of at most `size_bytes` at `path` (an existing directory); OSError when not allowed.
    `source` names it in mount tables (no spaces)."""
    opts = f"size={max(size_bytes, 4096)},mode={mode:o},uid={os.getuid()},gid={os.getgid()}"
    flags = MS_NOSUID | MS_NODEV  # no device nodes or setuid files there, whatever a sandbox can do
    if _lib().mount(source.encode(), os.fsencode(path), b"tmpfs", flags, opts.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path))


def unmount(path: Path | str) -> bool:
    """Detach the filesystem mounted at `path` (lazily, so a busy one goes too); False if none was."""
    if _lib().umount2(os.fsencode(path), MNT_DETACH) == 0:
        return True
    return False


def mounts_under(root: Path | str) -> list[str]:
    """Mount points at or under `root` in this mount namespace, deepest first."""
    root = os.fsdecode(root).rstrip("/")
    out = []
    try:
        with open("/proc/self/mountinfo", "rb") as fh:
            for line in fh:
                point = line.split()[4].decode("unicode_escape", errors="replace")
                if point == root or point.startswith(root + "/"):
                    out.append(point)
    except OSError:
        pass
    return sorted(set(out), key=lambda p: p.count("/"), reverse=True)


def disk_limit_mode() -> tuple[str | None, str]:
    """('tmpfs', how) when this process can put a size-capped tmpfs under each sandbox, else (None, why not).
    Probed with a real mount in the sandbox temp dir; the answer is kept once it is a clear yes or no."""
    global _mode
    if _mode is not None:
        return _mode
    parent = os.environ.get("CLAWGYM_SANDBOX_TMP")
    if not parent or not os.path.isdir(parent):
        parent = tempfile.gettempdir()
    probe = None
    try:
        probe = Path(tempfile.mkdtemp(prefix="clawgym-disk-probe-", dir=parent))
        mount_tmpfs(probe, MiB)
        unmount(probe)
        _mode = ("tmpfs", "size-capped tmpfs per sandbox (workspace, output dir, fresh mounts)")
        return _mode
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES):
            _mode = (None, "NOT enforced: mounting needs root (CAP_SYS_ADMIN); only the per-file limit applies")
            return _mode
        return None, f"NOT enforced: {exc}; only the per-file limit applies"
    finally:
        if probe is not None:
            try:
                probe.rmdir()
            except OSError:
                pass


def describe() -> str:
    """One line for `clawgym sandbox check`."""
    return f"disk limit: {disk_limit_mode()[1]}"


def host_dir_sizes(limits) -> dict[str, int]:
    """Size caps (bytes) of the host directories under a sandbox's temp root that its commands can write (see
    the module): the workspace and the fresh per-sandbox mounts get `limits.disk_mb` each, the commands'
    output directory room for a stdout and a stderr at the file size limit."""
    return {WS: limits.disk_mb * MiB, OUT: 2 * limits.max_file_mb * MiB + 64 * MiB, MNT: limits.disk_mb * MiB}


def limit_host_dirs(root: Path, sizes: dict[str, int]) -> list[Path]:
    """Mount the capped filesystems under a sandbox's temp root (`sizes`: relative dir -> bytes), creating the
    directories. Returns the mount points, [] when the limit cannot be enforced here (warned once). Each is
    named `<temp root name>/<dir>` in mount tables, as a bind of the plain directory would show its path:
    the Docker backend finds its container's processes by it."""
    global _warned
    for rel in sizes:
        (root / rel).mkdir(parents=True, exist_ok=True)
    mode, how = disk_limit_mode()
    if mode is None:
        if not _warned:
            _warned = True
            warnings.warn(f"sandbox disk limit {how}", stacklevel=3)
        return []
    points = []
    try:
        for rel, size in sizes.items():
            mount_tmpfs(root / rel, size, source=f"{root.name}/{rel}")
            points.append(root / rel)
    except BaseException:
        for p in points:
            unmount(p)
        raise
    return points


def release(points: list[Path]) -> None:
    """Unmount what :func:`limit_host_dirs` mounted (deepest first)."""
    for p in sorted(points, key=lambda p: len(p.parts), reverse=True):
        unmount(p)


def full(points: list[Path]) -> bool:
    """Whether one of the capped directories is (nearly) out of space."""
    for p in points:
        try:
            st = os.statvfs(p)
        except OSError:
            continue
        if st.f_bavail * st.f_frsize < FULL_BELOW:
            return True
    return False


def capped_dirs(root: Path) -> list[Path]:
    """The size-capped directories of a sandbox temp root (those really mounted)."""
    return [root / rel for rel in (WS, OUT, MNT) if os.path.ismount(root / rel)]


def exec_limit(points: list[Path], exit_code: int) -> str | None:
    """'disk' when a failed command left one of the capped directories full (it met ENOSPC there)."""
    return "disk" if exit_code != 0 and points and full(points) else None


def make_room(points: list[Path], limits) -> None:
    """Raise the workspace's cap to `disk_mb` + HEADROOM (idempotent), for the trusted files written once the
    agent is done (see the module)."""
    for p in points:
        if p.name == WS:
            opts = f"size={limits.disk_mb * MiB + HEADROOM}".encode()
            _lib().mount(b"clawgym", os.fsencode(p), b"tmpfs", MS_REMOUNT | MS_NOSUID | MS_NODEV, opts)
