"""What a dead sandbox owner leaves behind: recorded with each sandbox, reaped at once, swept at the next start.

Every sandbox records the process that started it (its owner: host name, pid namespace, pid and start time,
so that a reused pid is never taken for it): the sandbox's temp root holds an `owner` file, its cgroups
(bwrap, local) carry the owner in their name (`clawgym-<pidns>-<pid>-<start>-<random>`), its Docker container
in the `clawgym.owner` label. An owner is dead when no process with that pid and start time runs in that pid
namespace on this host (a zombie is dead).

Two mechanisms remove what a dead owner left — temp dirs (their size-capped mounts unmounted first),
cgroups (their processes killed), containers:

* the reaper: the first sandbox a process starts also starts a small helper process holding the read end of
  a pipe that only the owner writes. However the owner ends (kill -9 included), the pipe closes; the helper
  then removes that owner's containers, temp dirs and cgroups, within about a second.
* the sweep: every backend, before its first sandbox, removes what any dead owner of this host left (when
  the reaper died too: the whole process group killed, the machine rebooted...).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from clawgym.core.fstree import remove_tree

OWNER_FILE = "owner"
ROOT_PREFIXES = ("clawgym-bwrap-", "clawgym-docker-", "clawgym-local-")
CGROUP_NAME = re.compile(r"clawgym-(\d+)-(\d+)-(\d+)-[0-9a-f]+\Z")


# ----------------------------------------------------------------------------------------------- owners


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of a process, or None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _pidns() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


@dataclass(frozen=True)
class Owner:
    host: str
    pidns: int
    pid: int
    start: int

    @property
    def tag(self) -> str:
        """The owner in a cgroup name."""
        return f"{self.pidns}-{self.pid}-{self.start}"

    @property
    def label(self) -> str:
        """The owner in a Docker label: host:pid:start:pidns."""
        return f"{self.host}:{self.pid}:{self.start}:{self.pidns}"

    def here(self) -> bool:
        """Whether its liveness can be told from here (same host, same pid namespace)."""
        me = current()
        return self.host == me.host and self.pidns in (0, me.pidns)

    def alive(self) -> bool:
        st = _stat(self.pid)
        if st is None or st[0] in ("Z", "X"):
            return False
        return self.start in (0, st[1])

    def dead_here(self) -> bool:
        return self.here() and not self.alive()


_current: Owner | None = None


def current() -> Owner:
    """This process as an owner."""
    global _current
    if _current is None or _current.pid != os.getpid():
        st = _stat(os.getpid())
        _current = Owner(socket.gethostname(), _pidns(), os.getpid(), st[1] if st else 0)
    return _current


def parse_label(label: str) -> Owner | None:
    """An owner from a Docker label: host:pid[:start[:pidns]] (the older form has no start nor pidns)."""
    parts = label.split(":")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[1:]):
        return None
    start = int(parts[2]) if len(parts) > 2 else 0
    pidns = int(parts[3]) if len(parts) > 3 else 0
    return Owner(parts[0], pidns, int(parts[1]), start)


# ------------------------------------------------------------------------------------------- temp dirs


def sandbox_tmp_dir() -> Path:
    return Path(os.environ.get("CLAWGYM_SANDBOX_TMP") or tempfile.gettempdir())


def record_owner(root: Path) -> None:
    """Write the owner file of a fresh sandbox temp root (before anything is mounted in it)."""
    me = current()
    (root / OWNER_FILE).write_text(json.dumps({"host": me.host, "pidns": me.pidns, "pid": me.pid, "start": me.start}))
    reaper_watch(root.parent)


def owner_of(root: Path) -> Owner | None:
    try:
        fd = os.open(root / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        d = json.loads(os.read(fd, 4096))
        return Owner(str(d["host"]), int(d["pidns"]), int(d["pid"]), int(d["start"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        os.close(fd)


def remove_root(root: Path) -> None:
    """Unmount whatever is mounted under a sandbox temp root, then remove it."""
    from clawgym.sandbox.disk import mounts_under, unmount

    for point in mounts_under(root):
        unmount(point)
    remove_tree(root, ignore_errors=True)  # iterative: what an agent left may be any depth


def sweep_dirs(parent: Path | None = None, owner: Owner | None = None) -> int:
    """Remove the sandbox temp roots under `parent` whose owner is dead (only `owner`'s, when given)."""
    parent = parent or sandbox_tmp_dir()
    removed = 0
    try:
        entries = os.listdir(parent)
    except OSError:
        return 0
    for name in entries:
        if not name.startswith(ROOT_PREFIXES):
            continue
        root = parent / name
        who = owner_of(root)
        if who is None or (owner is not None and who != owner) or not who.dead_here():
            continue
        remove_root(root)
        removed += 1
    return removed


# ---------------------------------------------------------------------------------------------- cgroups


def cgroup_name() -> str:
    return f"clawgym-{current().tag}-{os.urandom(4).hex()}"


def sweep_cgroups(owner: Owner | None = None) -> int:
    """Kill the processes of, and remove, the cgroups of dead owners (only `owner`'s, when given)."""
    from clawgym.sandbox.cgroups import CGROUP_ROOT, GROUP_PREFIX, CgroupLimits, cgroup_mode

    mode = cgroup_mode()
    if mode is None:
        return 0
    if mode == "v2":
        parents = [CGROUP_ROOT / GROUP_PREFIX]
    else:
        parents = [CGROUP_ROOT / c / GROUP_PREFIX for c in ("pids", "memory")]
    groups: dict[str, list[Path]] = {}
    for parent in parents:
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            m = CGROUP_NAME.match(name)
            if m and (parent / name).is_dir():
                groups.setdefault(name, []).append(parent / name)
    me = current()
    removed = 0
    for name, dirs in groups.items():
        pidns, pid, start = (int(x) for x in CGROUP_NAME.match(name).groups())
        who = Owner(me.host, pidns, pid, start)
        if (owner is not None and who.tag != owner.tag) or not who.dead_here():
            continue
        CgroupLimits(mode, dirs).remove()
        removed += 1
    return removed


# ----------------------------------------------------------------------------------------------- docker


def sweep_containers(client, owner: Owner | None = None) -> int:
    """Remove the clawgym containers of dead owners of this host (only `owner`'s, when given)."""
    from clawgym.sandbox.docker import LABEL, OWNER_LABEL

    removed = 0
    # the low-level list (one call, labels included): the high-level one inspects each container in turn and
    # fails when one is removed meanwhile, as auto-removed sandboxes of other processes are
    for c in client.api.containers(all=True, filters={"label": LABEL}):
        who = parse_label((c.get("Labels") or {}).get(OWNER_LABEL, ""))
        if who is None:
            continue
        if owner is not None:  # known dead: its containers only
            if (who.host, who.pid) != (owner.host, owner.pid) or who.start not in (0, owner.start):
                continue
        elif not who.dead_here():
            continue
        try:
            client.api.remove_container(c["Id"], force=True)
            removed += 1
        except Exception:  # noqa: BLE001, S110 (removed meanwhile, or the engine does not answer: the next sweep tries again)
            pass
    return removed


# ----------------------------------------------------------------------------------------------- sweep


def sweep_host() -> int:
    """Remove the temp dirs (under the sandbox temp dir) and cgroups of every dead owner here."""
    return sweep_dirs(sandbox_tmp_dir()) + sweep_cgroups()


# ---------------------------------------------------------------------------------------------- reaper

_reaper_lock = threading.Lock()
_reaper: dict = {"pid": None, "fd": None, "proc": None, "told": set()}

REAPER_CODE = (
    "import sys; data = sys.stdin.buffer.read(); "
    "from clawgym.sandbox.sweep import reap; reap(int(sys.argv[1]), int(sys.argv[2]), data)"
)


def _tell(msg: str) -> None:
    """Send one line to this process's reaper, starting it first if needed (best effort: a reaper that
    cannot start leaves the next run's sweep to do the job)."""
    with _reaper_lock:
        if _reaper["pid"] != os.getpid():
            _reaper.update(pid=os.getpid(), fd=None, proc=None, told=set())
            me = current()
            r, w = os.pipe()
            try:
                _reaper["proc"] = subprocess.Popen(
                    [sys.executable, "-c", REAPER_CODE, str(me.pid), str(me.start)], stdin=r,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                )
                _reaper["fd"] = w
            except OSError:
                os.close(w)
            finally:
                os.close(r)
        if _reaper["fd"] is None or msg in _reaper["told"]:
            return
        try:
            os.write(_reaper["fd"], (msg + "\n").encode())
            _reaper["told"].add(msg)
        except OSError:
            pass


def reaper_watch(parent: Path) -> None:
    """Have the reaper clean this process's sandbox temp roots under `parent` when it dies."""
    _tell(f"tmp {parent}")


def reaper_watch_docker() -> None:
    """Have the reaper remove this process's containers when it dies."""
    _tell("docker")


def _after_fork_in_child() -> None:
    # the child is a new owner: it must neither keep its parent's reaper waiting nor talk to it
    fd = _reaper["fd"]
    _reaper.update(pid=None, fd=None, proc=None, told=set())
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def reap(pid: int, start: int, data: bytes) -> None:
    """The reaper, once the owner's pipe has closed: wait for the owner to be really gone (it may only have
    closed the pipe by exec'ing), then remove what it left."""
    owner = Owner(socket.gethostname(), _pidns(), pid, start)
    deadline = time.monotonic() + 10
    while owner.alive():
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)
    lines = data.decode(errors="replace").splitlines()
    if "docker" in lines:
        try:
            import docker

            client = docker.from_env(timeout=30)
            sweep_containers(client, owner)
            client.close()
        except Exception:  # noqa: BLE001, S110 (no engine to ask now: the dead owner's containers wait for the next sweep)
            pass
    for line in lines:
        if line.startswith("tmp "):
            sweep_dirs(Path(line[4:]), owner)
    sweep_cgroups(owner)
