"""Per-sandbox process and memory limits through Linux cgroups (v2, or v1 `pids` + `memory`).

Used by the process-based backends (bwrap, local). Rlimits alone cannot bound a fork bomb when the sandbox
runs as root (RLIMIT_NPROC counts every process of the uid on the host), so when the cgroup filesystem is
writable each sandbox gets its own group; otherwise the caller falls back to rlimits and says so.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path(os.environ.get("CLAWGYM_CGROUP_ROOT", "/sys/fs/cgroup"))
GROUP_PREFIX = "clawgym"


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def cgroup_mode() -> str | None:
    """'v2', 'v1' or None when no usable, writable pids+memory hierarchy exists for this process."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        ctrls = (CGROUP_ROOT / "cgroup.controllers").read_text().split()
        if {"pids", "memory"} <= set(ctrls) and _writable_dir(CGROUP_ROOT):
            return "v2"
        return None
    if _writable_dir(CGROUP_ROOT / "pids") and _writable_dir(CGROUP_ROOT / "memory"):
        return "v1"
    return None


@dataclass
class CgroupLimits:
    """One sandbox's cgroup(s). Create with :meth:`create`; put a process in with :attr:`procs_files`."""

    mode: str
    dirs: list[Path] = field(default_factory=list)

    @classmethod
    def create(cls, pids_max: int, memory_bytes: int, name: str | None = None) -> CgroupLimits | None:
        mode = cgroup_mode()
        if mode is None:
            return None
        if name is None:
            from clawgym.sandbox.sweep import cgroup_name

            name = cgroup_name()
        try:
            if mode == "v2":
                parent = CGROUP_ROOT / GROUP_PREFIX
                if not parent.exists():
                    parent.mkdir()
                    (CGROUP_ROOT / "cgroup.subtree_control").write_text("+pids +memory")
                    (parent / "cgroup.subtree_control").write_text("+pids +memory")
                d = parent / name
                d.mkdir()
                (d / "pids.max").write_text(str(pids_max))
                (d / "memory.max").write_text(str(memory_bytes))
                (d / "memory.swap.max").write_text("0") if (d / "memory.swap.max").exists() else None
                return cls(mode, [d])
            pd = CGROUP_ROOT / "pids" / GROUP_PREFIX / name
            md = CGROUP_ROOT / "memory" / GROUP_PREFIX / name
            pd.mkdir(parents=True)
            md.mkdir(parents=True)
            (pd / "pids.max").write_text(str(pids_max))
            (md / "memory.limit_in_bytes").write_text(str(memory_bytes))
            return cls(mode, [pd, md])
        except OSError:
            return None

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def join_argv(self, argv: list[str], oom_exempt: bool = False) -> list[str]:
        """`argv` run by a sh that first moves itself into this cgroup (so everything it starts is counted
        from its first instruction); `oom_exempt`: and out of the OOM killer's reach where allowed
        (CAP_SYS_RESOURCE)."""
        join = " && ".join(f'echo $$ > "{p}"' for p in self.procs_files)
        run = '{ echo -1000 > /proc/self/oom_score_adj 2>/dev/null; exec "$@"; }' if oom_exempt else 'exec "$@"'
        return ["/bin/sh", "-c", f"{join} && {run}", "sh", *argv]

    def pids(self) -> list[int]:
        out: set[int] = set()
        for d in self.dirs:
            try:
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return sorted(out)

    def oom_kills(self) -> int:
        """How many processes the kernel killed for exceeding the memory limit."""
        for d in self.dirs:
            events = d / ("memory.events" if self.mode == "v2" else "memory.oom_control")
            try:
                for line in events.read_text().splitlines():
                    key, _, val = line.partition(" ")
                    if key == "oom_kill":
                        return int(val)
            except OSError:
                continue
        return 0

    def pids_limit_hits(self) -> int:
        """How many forks the pids limit refused (v2: pids.events max; v1: not reported, 0)."""
        for d in self.dirs:
            ev = d / "pids.events"
            if ev.exists():
                for line in ev.read_text().splitlines():
                    key, _, val = line.partition(" ")
                    if key == "max":
                        return int(val)
        return 0

    def kill_all(self, wait_s: float = 2.0) -> None:
        if self.mode == "v2" and (self.dirs[0] / "cgroup.kill").exists():
            (self.dirs[0] / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + wait_s
        while True:
            pids = self.pids()
            if not pids or time.monotonic() > deadline:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def oom_kills_of(pid: int) -> int:
    """OOM kills counted by the memory cgroup of a process (e.g. a local Docker container's init); 0 when
    that cannot be read."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            f = CGROUP_ROOT / "memory" / path.lstrip("/") / "memory.oom_control"
        elif ctrls == "" and (CGROUP_ROOT / "cgroup.controllers").exists():
            f = CGROUP_ROOT / path.lstrip("/") / "memory.events"
        else:
            continue
        try:
            for row in f.read_text().splitlines():
                key, _, val = row.partition(" ")
                if key == "oom_kill":
                    return int(val)
        except OSError:
            pass
    return 0
