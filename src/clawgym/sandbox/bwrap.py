"""The bubblewrap backend: Docker-free isolation with a few milliseconds of start-up.

Each sandbox is one `bwrap --unshare-all` process tree: the image's root filesystem bound read-only entry by
entry onto bwrap's own tmpfs root (so new top-level mount points such as /workspace can be created; the root
is remounted read-only once they are), the workspace bound read-write at the task's mount dir, the control
directory read-only but for its output subdirectory, private size-capped tmpfs /tmp, /run, /root, /home and
/var/tmp, no network, no capabilities, no_new_privs (bwrap sets it), killed with its parent. Leftover
processes are killed from the host (every process of the sandbox's pid namespace but its init and the
supervisor), which needs no fork inside. Memory and process count are bounded by a per-sandbox cgroup when the
cgroup filesystem is writable (root), else by rlimits; file size by RLIMIT_FSIZE and wall time by `timeout` in
the supervisor; the space of the workspace, the output directory and the fresh mounts by size-capped
filesystems on the host (`clawgym.sandbox.disk`).

bwrap itself starts with a minimal environment (BWRAP_ENV: no API key, no token), because its init, the
sandbox's pid 1, keeps the environment bwrap was started with, readable from inside as /proc/1/environ
(`--clearenv` only clears the supervisor's). Temp dirs and cgroups record their owner; what a dead owner left
is removed by its reaper, or by the next backend's sweep (`clawgym.sandbox.sweep`).

Without a built image the host's /usr is used read-only, with a curated /etc (no secrets) — a fallback that
`clawgym sandbox check` reports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from clawgym.core.records import WorkspaceSpec
from clawgym.sandbox import disk, seccomp, sweep
from clawgym.sandbox.base import (
    Mount,
    SandboxBackend,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
    check_mounts,
    tmpfs_sizes,
)
from clawgym.sandbox.cgroups import CgroupLimits
from clawgym.sandbox.hostdir import host_mounts, prepare_host_workspace
from clawgym.sandbox.image import find_rootfs
from clawgym.sandbox.registry import register_backend
from clawgym.sandbox.supervised import SupervisedSandbox
from clawgym.sandbox.supervisor import (
    BASE_PATH,
    OUT_SUBDIR,
    first_child,
    group_alive,
    kill_namespace,
    proc_stat,
    supervisor_argv,
)

# Entries of the root that each sandbox gets fresh instead of from the image.
PRIVATE_ENTRIES = {"proc", "dev", "sys", "tmp", "run", "root", "home", "workspace", "lost+found", ".clawgym"}
# Host /etc files that are safe to expose in the no-image fallback.
HOST_ETC_ALLOWLIST = [
    "passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives",
    "ssl", "ca-certificates", "localtime", "mime.types", "python3", "python3.11", "bash.bashrc", "profile",
    "gitconfig", "debian_version", "os-release",
]
HOST_ROOT_ENTRIES = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt"]
# The whole environment bwrap (and the sh that puts it in its cgroup) starts with: bwrap's init, pid 1 of the
# sandbox, keeps it (readable as /proc/1/environ from inside; --clearenv only clears the supervisor's).
BWRAP_ENV = {"PATH": BASE_PATH, "LANG": "C.UTF-8"}


def _bwrap_exe() -> str:
    return shutil.which("bwrap") or shutil.which("bwrap", path=BASE_PATH) or "bwrap"


def _root_args(rootfs: Path | None) -> list[str]:
    args: list[str] = []
    if rootfs is not None:
        for entry in sorted(os.listdir(rootfs)):
            if entry in PRIVATE_ENTRIES:
                continue
            src = rootfs / entry
            if src.is_symlink():
                args += ["--symlink", os.readlink(src), f"/{entry}"]
            elif src.is_dir():
                args += ["--ro-bind", str(src), f"/{entry}"]
        return args
    for entry in HOST_ROOT_ENTRIES:
        src = Path("/") / entry
        if src.is_symlink():
            args += ["--symlink", os.readlink(src), f"/{entry}"]
        elif src.is_dir():
            args += ["--ro-bind", str(src), f"/{entry}"]
    args += ["--tmpfs", "/etc"]
    for name in HOST_ETC_ALLOWLIST:
        if os.path.lexists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    args += ["--remount-ro", "/etc", "--dir", "/var"]
    return args


def _mount_dir_ok(mount_dir: str, rootfs: Path | None) -> None:
    top = mount_dir.strip("/").split("/")[0]
    if top in PRIVATE_ENTRIES:
        return
    root = rootfs if rootfs is not None else Path("/")
    if (root / top).exists() and rootfs is not None and top not in PRIVATE_ENTRIES:
        # under a read-only bind: the directory must already exist in the image
        if not (rootfs / mount_dir.lstrip("/")).is_dir():
            raise SandboxError(
                f"mount dir {mount_dir} is under the image's read-only /{top}; use a new top-level directory, "
                "or one under /root, /home or /tmp"
            )


class BwrapSandbox(SupervisedSandbox):
    backend = "bwrap"

    def __init__(self, root: Path, mount_dir: str, limits: SandboxLimits, rootfs: Path | None,
                 mounts: list[tuple[Path, str, bool]] | None = None):
        super().__init__(root, mount_dir, limits,
                         CgroupLimits.create(limits.max_processes, limits.memory_mb * 1024 * 1024))
        self.mounts = {target: host for host, target, _ in mounts or []}
        self._binds = list(mounts or [])
        self._init_pid: int | None = None
        self.rootfs = rootfs
        self.seccomp = seccomp.bpf_program() is not None
        self._launch()

    def _launch(self) -> None:
        limits, root, mount_dir = self.limits, self._root, self.mount_dir
        self._init_pid = None
        self.ctl_inside = ctl = self._random_ctl_inside()
        args = [_bwrap_exe(), "--unshare-all"]
        if limits.network:
            args.append("--share-net")
        args += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv", "--cap-drop", "ALL"]
        args += _root_args(self.rootfs)
        args += ["--proc", "/proc", "--dev", "/dev"]
        for path, size in tmpfs_sizes(limits).items():
            args += ["--size", str(size), "--tmpfs", path]
        args += ["--bind", str(root / "ws"), mount_dir, "--ro-bind", str(root / "ctl"), ctl]
        args += ["--bind", str(root / "ctl" / OUT_SUBDIR), f"{ctl}/{OUT_SUBDIR}"]
        for host, target, read_only in self._binds:
            args += ["--ro-bind" if read_only else "--bind", str(host), target]
        # bwrap's root is a tmpfs holding the mount points: read-only once they are all made
        args += ["--remount-ro", "/"]
        args += ["--chdir", mount_dir, "--setenv", "HOME", "/root", "--setenv", "PATH", BASE_PATH]
        args += ["--setenv", "LANG", "C.UTF-8", "--setenv", "WORKSPACE", mount_dir, "--setenv", "TERM", "dumb"]
        # no ptrace, no namespaces, no mounts for anything in the sandbox (clawgym.sandbox.seccomp); bwrap loads
        # the filter after its own set-up, right before it runs the supervisor
        filter_fd = seccomp.bwrap_fd()
        if filter_fd is not None:
            args += ["--seccomp", str(filter_fd)]
        args += supervisor_argv(ctl)
        if self.cgroup is not None:
            # join the cgroup; exempt bwrap, its init and the supervisor from the OOM killer where allowed
            # (CAP_SYS_RESOURCE); commands raise their own score to the maximum (build_run_script)
            args = self.cgroup.join_argv(args, oom_exempt=True)
        try:
            self._start_process(args, env=BWRAP_ENV, cwd="/", capture_stderr=True, group_alive=self._group_alive,
                                what="bwrap", sandbox_ctl=ctl, pass_fds=() if filter_fd is None else (filter_fd,))
        finally:
            if filter_fd is not None:
                os.close(filter_fd)

    def _shutdown(self) -> None:
        self._ns_init()  # known before bwrap goes: _end_all waits for it
        super()._shutdown()

    def _end_all(self) -> None:
        """bwrap is gone (its init and so its whole pid namespace die with it: --die-with-parent); with a
        cgroup, whatever is left in it is killed too (cgroup.kill) and waited for."""
        init = self._init_pid
        super()._end_all()
        if init is not None:
            deadline = time.monotonic() + 5.0
            while (st := proc_stat(init)) is not None and st[1] not in ("Z", "X"):
                if time.monotonic() > deadline:
                    raise SandboxError("the sandbox's init survived its end")
                time.sleep(0.002)

    def _ns_init(self) -> int | None:
        """Host pid of the sandbox's pid-namespace init (bwrap's only child), while bwrap runs (bwrap reaps
        it, so until bwrap exits that pid cannot be reused by another process)."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        if self._init_pid is None:
            self._init_pid = first_child(self._proc.pid)
        return self._init_pid

    def _group_alive(self, pgid: int) -> bool | None:
        init = self._ns_init()
        if init is None:
            return None
        return group_alive(pgid, init, self.cgroup.pids if self.cgroup is not None else None)

    def _channel_error(self) -> str:
        """bwrap's own error when it exited (it could not set the sandbox up)."""
        if self._proc is not None and self._proc.poll() is not None and self._proc.stderr is not None:
            return self._proc.stderr.read().decode(errors="replace").strip()[-500:]
        return ""

    def _kill_from_host(self) -> bool:
        init = self._ns_init()
        return init is not None and kill_namespace(init, self.cgroup.pids if self.cgroup is not None else None)

    def limit_events(self) -> dict[str, int]:
        if self.cgroup is None:
            return {}
        return {"oom_kills": self.cgroup.oom_kills(), "pids_limit_hits": self.cgroup.pids_limit_hits()}


@register_backend("bwrap")
class BwrapBackend(SandboxBackend):
    name = "bwrap"
    auto_priority = 10  # "auto" tries it first: no engine to talk to, milliseconds to start

    def __init__(self, rootfs: Path | None = None, allow_host_root: bool = True):
        self.rootfs = rootfs if rootfs is not None else find_rootfs()
        self.allow_host_root = allow_host_root
        self._swept = False

    def check(self) -> tuple[bool, str]:
        exe = shutil.which("bwrap")
        if exe is None:
            return False, "bubblewrap is not installed (apt-get install bubblewrap, or `make system-deps`)"
        if self.rootfs is None and not self.allow_host_root:
            return False, "no sandbox image built (run `clawgym sandbox build`)"
        try:
            proc = subprocess.run(
                [_bwrap_exe(), "--unshare-all", "--die-with-parent", *_root_args(self.rootfs), "--proc", "/proc",
                 "--dev", "/dev", "true"], capture_output=True, text=True, timeout=20, env=dict(BWRAP_ENV),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"bwrap failed to run: {exc}"
        if proc.returncode != 0:
            return False, f"bwrap cannot create namespaces here: {proc.stderr.strip()[:300]}"
        root = f"image {self.rootfs}" if self.rootfs else "host /usr read-only (no image built: `clawgym sandbox build`)"
        return True, f"root: {root}; {seccomp.describe()}; " + disk.describe()

    def start(
        self, workspace: WorkspaceSpec, *, limits: SandboxLimits | None = None, base_dir: Path | None = None,
        prebuilt: Path | None = None, mounts: Sequence[Mount] = (),
    ) -> BwrapSandbox:
        if shutil.which("bwrap") is None:
            raise SandboxUnavailable("bubblewrap is not installed (apt-get install bubblewrap)")
        if self.rootfs is None and not self.allow_host_root:
            raise SandboxUnavailable("no sandbox image built (run `clawgym sandbox build`)")
        _mount_dir_ok(workspace.mount_dir, self.rootfs)
        check_mounts(mounts, workspace.mount_dir)
        for m in mounts:
            _mount_dir_ok(m.target, self.rootfs)
        if not self._swept:  # what dead owners left (kill -9): their temp dirs, mounts and cgroups
            self._swept = True
            sweep.sweep_host()
        limits = limits or SandboxLimits()
        root = prepare_host_workspace(workspace, base_dir, "clawgym-bwrap-", prebuilt, limits)
        try:
            binds = host_mounts(root, mounts)
        except BaseException:
            sweep.remove_root(root)
            raise
        return BwrapSandbox(root, workspace.mount_dir, limits, self.rootfs, binds)
