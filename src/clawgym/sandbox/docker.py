"""The Docker backend, through the Docker SDK (never the CLI).

One container per episode from the clawgym sandbox image: read-only root, private size-capped tmpfs /tmp /run
/root /home /var/tmp, the workspace bind-mounted read-write at the task's mount dir, the control directory
read-only but for its output subdirectory, no network, memory / pids / CPU limits, every capability dropped
(`cap_drop=ALL`: no mknod, chown, raw sockets...; see :func:`capabilities_kept`) and no-new-privileges (a
setuid binary gains nothing), `--init` so orphans are reaped. The workspace, the output directory and the
fresh mounts are size-capped filesystems on the host (`clawgym.sandbox.disk`). The container's main process
is the same sh supervisor the other backends use, fed through the attached stdin, so an exec costs a few
milliseconds instead of a `docker exec` round trip.

Containers carry the label `clawgym.sandbox` and their owner (host, pid, start time, pid namespace); `stop()`
removes them. When the owner dies without stopping them (kill -9), its reaper removes them within a second
(`clawgym.sandbox.sweep`); failing that, the engine closes the supervisor's stdin with the owner's attach
connection (StdinOnce), so the supervisor exits once its current command is done and the container removes
itself; and every new backend sweeps the containers, temp dirs and cgroups of dead owners.
"""

from __future__ import annotations

import os
import struct
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
from clawgym.sandbox.cgroups import oom_kills_of
from clawgym.sandbox.hostdir import host_mounts, prepare_host_workspace
from clawgym.sandbox.image import IMAGE_REPO, docker_tag
from clawgym.sandbox.registry import register_backend
from clawgym.sandbox.supervised import SupervisedSandbox
from clawgym.sandbox.supervisor import (
    BASE_PATH,
    OUT_SUBDIR,
    SupervisorChannel,
    group_alive,
    kill_namespace,
    supervisor_argv,
)

LABEL = "clawgym.sandbox"
OWNER_LABEL = "clawgym.owner"


def _owner() -> str:
    return sweep.current().label


def capabilities_kept() -> list[str]:
    """Capabilities added back after dropping them all: none when clawgym runs as root (the workspace then
    belongs to the container's root, as in bwrap, which has no capabilities either). A non-root host owns the
    workspace files, which the container's root can only write with DAC_OVERRIDE (and chmod with FOWNER)."""
    return [] if os.geteuid() == 0 else ["DAC_OVERRIDE", "FOWNER"]


class _Demux:
    """Strips Docker's 8-byte stream frame headers (non-tty attach) and keeps only stdout."""

    def __init__(self) -> None:
        self._buf = b""

    def __call__(self, chunk: bytes) -> bytes:
        # one pass over the bytes (a command flooding the channel sends many frames: no re-slicing per frame)
        buf = self._buf + chunk if self._buf else chunk
        out: list[bytes] = []
        i, n = 0, len(buf)
        while n - i >= 8:
            size = struct.unpack_from(">I", buf, i + 4)[0]
            if n - i - 8 < size:
                break
            if buf[i] == 1:
                out.append(buf[i + 8 : i + 8 + size])
            i += 8 + size
        self._buf = buf[i:]
        return b"".join(out)


class DockerSandbox(SupervisedSandbox):
    backend = "docker"

    def __init__(self, client, image: str, root: Path, mount_dir: str, limits: SandboxLimits,
                 mounts: list[tuple[Path, str, bool]] | None = None):
        super().__init__(root, mount_dir, limits)  # memory, processes: the container's limits, no cgroup here
        self.mounts = {target: host for host, target, _ in mounts or []}
        self._binds = list(mounts or [])
        self._client = client
        self._image = image
        self._sock = None
        self._init_pid: int | None = None  # host pid of the container's init, when the engine is local
        self._ooms = 0
        self.container = None
        self._launch()

    def _launch(self) -> None:
        import docker.errors
        from docker.types import LogConfig

        limits, root, mount_dir = self.limits, self._root, self.mount_dir
        self._init_pid = None
        self._ooms = 0
        self.ctl_inside = ctl = self._random_ctl_inside()
        volumes = {str(root / "ws"): {"bind": mount_dir, "mode": "rw"},
                   str(root / "ctl"): {"bind": ctl, "mode": "ro"},
                   str(root / "ctl" / OUT_SUBDIR): {"bind": f"{ctl}/{OUT_SUBDIR}", "mode": "rw"}}
        for host, target, read_only in self._binds:
            volumes[str(host)] = {"bind": target, "mode": "ro" if read_only else "rw"}
        try:
            # detach=False with stdin_open: StdinOnce, the engine closes the supervisor's stdin when our attach
            # connection goes (the owner died), and the supervisor exits at its next read
            self.container = self._client.containers.create(
                self._image,
                command=supervisor_argv(ctl),
                stdin_open=True, tty=False, init=True, detach=False,
                cap_drop=["ALL"], cap_add=capabilities_kept() or None,
                # the deny list bwrap gets too (no ptrace of the supervisor, no namespaces: clawgym.sandbox.seccomp)
                security_opt=["no-new-privileges", f"seccomp={seccomp.docker_profile()}"],
                network_mode="bridge" if limits.network else "none",
                mem_limit=f"{limits.memory_mb}m", memswap_limit=f"{limits.memory_mb}m",
                pids_limit=limits.max_processes, nano_cpus=int(limits.cpus * 1e9),
                read_only=True,
                tmpfs={path: f"size={size}" for path, size in tmpfs_sizes(limits).items()},
                volumes=volumes,
                working_dir=mount_dir, hostname="sandbox",
                environment={"HOME": "/root", "PATH": BASE_PATH, "LANG": "C.UTF-8", "WORKSPACE": mount_dir,
                             "TERM": "dumb"},
                labels={LABEL: "1", OWNER_LABEL: _owner()},
                # the supervisor's stdout is our channel (read through the attach socket), never a log: a json-file
                # log would keep whatever a command floods it with on the host's disk
                log_config=LogConfig(type="none"),
                auto_remove=True,
            )
            self._sock = self._client.api.attach_socket(
                self.container.id, params={"stdin": 1, "stdout": 1, "stream": 1}
            )
            self._raw = getattr(self._sock, "_sock", self._sock)
            self.container.start()
        except docker.errors.DockerException as exc:
            self.stop()
            raise SandboxError(f"cannot start docker container: {exc}") from None
        self._chan = SupervisorChannel(
            root / "ctl", self._raw.sendall, self._raw.fileno(), self._alive, demux=_Demux(),
            group_alive=self._group_alive, sandbox_ctl=ctl,
        )

    def _group_alive(self, pgid: int) -> bool | None:
        init = self._local_init_pid()
        return group_alive(pgid, init) if init is not None else None

    def _alive(self) -> bool:
        """Asked only when the supervisor has been silent for a while (select timeouts), so the API round trip
        does not cost anything on the exec path. An unanswered API call (a loaded engine) is not a death."""
        import docker.errors

        try:
            self.container.reload()
            return self.container.status in ("created", "running")
        except docker.errors.NotFound:
            return False
        except Exception:  # noqa: BLE001 (an unanswered or failed API call, e.g. a loaded engine, is not a death: only NotFound is)
            return True

    def _rlimit_memory(self) -> bool:
        return False  # the container's memory limit bounds every process

    def _oom_mark(self) -> object:
        return None  # asked only after a SIGKILL: the last count seen is the mark

    def _oom_killed(self, mark: object) -> bool:
        ooms = self._oom_kills()
        if ooms > self._ooms:
            self._ooms = ooms
            return True
        return False

    def _local_init_pid(self) -> int | None:
        """Host pid of the container's init when the engine runs on this host, else None. Checked on every
        call through the process's mounts, which name this sandbox's private directory, so that a pid
        reused after the container is gone is never taken for it."""
        if self._init_pid is None:
            try:
                self.container.reload()
                self._init_pid = int(self.container.attrs["State"]["Pid"])
            except Exception:  # noqa: BLE001 (no host pid, e.g. the engine does not answer: the engine's API is used instead)
                self._init_pid = 0
        if self._init_pid <= 0:
            return None
        try:
            with open(f"/proc/{self._init_pid}/mountinfo") as fh:
                # the bind of <root>/ctl/out shows that path, or the name of the capped filesystem there
                if f"{self._root.name}/ctl/{OUT_SUBDIR} " in fh.read():
                    return self._init_pid
        except OSError:
            pass
        return None

    def _oom_kills(self) -> int:
        pid = self._local_init_pid()
        if pid is not None:
            return oom_kills_of(pid)
        # a remote engine only says whether the container ever hit an OOM
        return max(self._ooms, 1) if self.oom_killed() else 0

    def _kill_from_host(self) -> bool:
        # when the engine is local: it needs no fork inside (a fork bomb may fill pids_limit)
        pid = self._local_init_pid()
        return pid is not None and kill_namespace(pid)

    def engine_ok(self) -> bool:
        """Whether the Docker engine answers: a container that died while it does was ended from inside."""
        try:
            return bool(self._client.ping())
        except Exception:  # noqa: BLE001 (whatever the failure, the engine does not answer)
            return False

    def oom_killed(self) -> bool:
        try:
            self.container.reload()
            return bool(self.container.attrs.get("State", {}).get("OOMKilled"))
        except Exception:  # noqa: BLE001 (the engine cannot say: not known to be an OOM kill)
            return False

    def _shutdown(self) -> None:
        if self.container is not None:
            try:
                self.container.remove(force=True)
            except Exception:  # noqa: BLE001, S110 (already gone, or the engine does not answer: the reaper or the next sweep removes it)
                pass
        try:
            if self._sock is not None:
                self._sock.close()
        except Exception:  # noqa: BLE001, S110 (a socket already closed or broken: nothing is left to release)
            pass
        self._sock = None

    def _end_all(self) -> None:
        """The container is removed (its every process with it); when the engine is local, its init is waited
        for, and a container the engine still lists is an error."""
        import docker.errors

        if self.container is None:
            return
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            try:
                self.container.reload()
            except docker.errors.NotFound:
                return
            except docker.errors.DockerException as exc:
                raise SandboxError(f"cannot tell whether the container ended: {exc}") from None
            try:
                self.container.remove(force=True)
            except docker.errors.NotFound:
                return
            except docker.errors.DockerException:
                pass
            time.sleep(0.05)
        raise SandboxError("the sandbox's container survived its end")


@register_backend("docker")
class DockerBackend(SandboxBackend):
    name = "docker"
    auto_priority = 20  # "auto" tries it after bwrap

    def __init__(self, image: str | None = None, client=None):
        self.image = image or os.environ.get("CLAWGYM_DOCKER_IMAGE") or docker_tag()
        self._client = client
        self._swept = False

    @property
    def client(self):
        if self._client is None:
            import docker

            try:
                self._client = docker.from_env(timeout=60)
                self._client.ping()
            except Exception as exc:  # noqa: BLE001 (any failure to reach the engine is one line, whatever docker-py raised)
                self._client = None
                raise SandboxUnavailable(
                    f"no Docker engine reachable ({exc.__class__.__name__}); start dockerd or set DOCKER_HOST"
                ) from None
        return self._client

    def check(self) -> tuple[bool, str]:
        import docker.errors

        try:
            client = self.client
        except SandboxUnavailable as exc:
            return False, str(exc)
        try:
            client.images.get(self.image)
        except docker.errors.ImageNotFound:
            return False, f"image {self.image} not found: run `clawgym sandbox build` (imports it into Docker)"
        return True, f"engine {client.version().get('Version', '?')}, image {self.image}; {disk.describe()}"

    def sweep(self) -> int:
        """Remove clawgym containers left behind by owners that no longer run (Ctrl-C, crash, kill -9), and their
        temp dirs and cgroups (see `clawgym.sandbox.sweep`). Returns the number of containers removed."""
        removed = sweep.sweep_containers(self.client)
        sweep.sweep_host()
        return removed

    def start(
        self, workspace: WorkspaceSpec, *, limits: SandboxLimits | None = None, base_dir: Path | None = None,
        prebuilt: Path | None = None, mounts: Sequence[Mount] = (),
    ) -> DockerSandbox:
        import docker.errors

        client = self.client
        if not self._swept:
            self.sweep()
            self._swept = True
        try:
            client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(
                f"image {self.image} not found: run `clawgym sandbox build` (it imports the image into Docker)"
            ) from None
        check_mounts(mounts, workspace.mount_dir)
        sweep.reaper_watch_docker()
        limits = limits or SandboxLimits()
        root = prepare_host_workspace(workspace, base_dir, "clawgym-docker-", prebuilt, limits)
        try:
            binds = host_mounts(root, mounts)
        except BaseException:
            sweep.remove_root(root)
            raise
        return DockerSandbox(client, self.image, root, workspace.mount_dir, limits, binds)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


__all__ = ["DockerBackend", "DockerSandbox", "IMAGE_REPO"]
