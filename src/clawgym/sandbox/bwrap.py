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
    check_mounts,
    host_mounts,
    prepare_host_workspace,
    tmpfs_sizes,
)
from clawgym.sandbox.cgroups import CgroupLimits
from clawgym.sandbox.image import find_rootfs
from clawgym.sandbox.supervisor import (
    BASE_PATH,
    CTL_DIR,
    KILL_ALL_SH,
    OUT_SUBDIR,
    SupervisorChannel,
    first_child,
    group_alive,
    kill_namespace,
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


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def __init__(self, root: Path, mount_dir: str, limits: SandboxLimits, rootfs: Path | None,
                 mounts: list[tuple[Path, str, bool]] | None = None):
        super().__init__(root / "ws", mount_dir, limits)
        self.mounts = {target: host for host, target, _ in mounts or []}
        self._root = root
        self._stopped = False
        self._init_pid: int | None = None
        self.rootfs = rootfs
        self._disk = disk.capped_dirs(root)
        self.cgroup = CgroupLimits.create(limits.max_processes, limits.memory_mb * 1024 * 1024)
        home = "/root"
        args = [_bwrap_exe(), "--unshare-all"]
        if limits.network:
            args.append("--share-net")
        args += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv", "--cap-drop", "ALL"]
        args += _root_args(rootfs)
        args += ["--proc", "/proc", "--dev", "/dev"]
        for path, size in tmpfs_sizes(limits).items():
            args += ["--size", str(size), "--tmpfs", path]
        args += ["--bind", str(root / "ws"), mount_dir, "--ro-bind", str(root / "ctl"), CTL_DIR]
        args += ["--bind", str(root / "ctl" / OUT_SUBDIR), f"{CTL_DIR}/{OUT_SUBDIR}"]
        for host, target, read_only in mounts or []:
            args += ["--ro-bind" if read_only else "--bind", str(host), target]
        # bwrap's root is a tmpfs holding the mount points: read-only once they are all made
        args += ["--remount-ro", "/"]
        args += ["--chdir", mount_dir, "--setenv", "HOME", home, "--setenv", "PATH", BASE_PATH]
        args += ["--setenv", "LANG", "C.UTF-8", "--setenv", "WORKSPACE", mount_dir, "--setenv", "TERM", "dumb"]
        args += supervisor_argv(CTL_DIR)
        if self.cgroup is not None:
            # join the cgroup; exempt bwrap, its init and the supervisor from the OOM killer where allowed
            # (CAP_SYS_RESOURCE); commands raise their own score to the maximum (build_run_script)
            join = " && ".join(f'echo $$ > "{p}"' for p in self.cgroup.procs_files)
            oom = "echo -1000 > /proc/self/oom_score_adj 2>/dev/null"
            args = ["/bin/sh", "-c", f'{join} && {{ {oom}; exec "$@"; }}', "sh", *args]
        try:
            self._proc = subprocess.Popen(
                args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                env=dict(BWRAP_ENV), cwd="/",
            )
        except OSError as exc:
            self._cleanup()
            raise SandboxError(f"cannot start bwrap: {exc}") from None
        self._chan = SupervisorChannel(
            root / "ctl", self._send, self._proc.stdout.fileno(), lambda: self._proc.poll() is None,
            group_alive=self._group_alive,
        )

    def _ns_init(self) -> int | None:
        """Host pid of the sandbox's pid-namespace init (bwrap's only child), while bwrap runs (bwrap reaps
        it, so until bwrap exits that pid cannot be reused by another process)."""
        if self._proc.poll() is not None:
            return None
        if self._init_pid is None:
            self._init_pid = first_child(self._proc.pid)
        return self._init_pid

    def _group_alive(self, pgid: int) -> bool | None:
        init = self._ns_init()
        if init is None:
            return None
        return group_alive(pgid, init, self.cgroup.pids if self.cgroup is not None else None)

    def _send(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)

    def _startup_error(self) -> str:
        if self._proc.poll() is not None and self._proc.stderr is not None:
            return self._proc.stderr.read().decode(errors="replace").strip()[-500:]
        return ""

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
        ooms = self.cgroup.oom_kills() if self.cgroup is not None else 0
        try:
            res = self._chan.run(
                command, cwd=cwd or self.mount_dir, env=env or {},
                timeout=timeout or self.limits.exec_timeout_s, max_output=self.limits.max_output_bytes,
                max_file_bytes=self.limits.max_file_mb * 1024 * 1024,
                memory_kb=None if self.cgroup else self.limits.memory_mb * 1024, stdin=stdin,
            )
        except SandboxError as exc:
            detail = self._startup_error()
            raise SandboxError(f"{exc}: {detail}" if detail else str(exc)) from None
        if res.limit is None and res.exit_code == 137 and self.cgroup is not None and self.cgroup.oom_kills() > ooms:
            res.limit = "memory"
        if res.limit is None:
            res.limit = disk.exec_limit(self._disk, res.exit_code)
        return res

    def kill_processes(self) -> None:
        if self._stopped:
            raise SandboxError("sandbox is stopped")
        # from the host when possible: it needs no fork inside (a fork bomb may hold the process limit)
        init = self._ns_init()
        if init is None or not kill_namespace(init, self.cgroup.pids if self.cgroup is not None else None):
            self.exec(["sh", "-c", KILL_ALL_SH], cwd="/", timeout=10)
        self._chan.clear_outputs()
        # the agent is done: trusted files (checkers) must fit, however full it left the workspace
        disk.make_room(self._disk, self.limits)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for f in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            try:
                f and f.close()
            except OSError:
                pass
        self._cleanup()

    def _cleanup(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
        sweep.remove_root(self._root)

    def limit_events(self) -> dict[str, int]:
        if self.cgroup is None:
            return {}
        return {"oom_kills": self.cgroup.oom_kills(), "pids_limit_hits": self.cgroup.pids_limit_hits()}


class BwrapBackend(SandboxBackend):
    name = "bwrap"

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
        return True, f"root: {root}; " + disk.describe()

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
