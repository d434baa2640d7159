"""Attacks on the sandboxes' privileges and resources found by adversarial testing (issue 17), one test each,
on real sandboxes (bwrap and Docker), no mocks:

* Docker containers kept Docker's default capabilities (CAP_MKNOD, CAP_CHOWN, ...) and could gain privileges
  through setuid binaries;
* bwrap's own process, and so the sandbox's pid 1 (bwrap's init), kept clawgym's environment: the API key and
  the gateway token were readable as /proc/1/environ from inside;
* no disk limit: an agent wrote 3 GB to the host disk in 9 s (only the per-file limit applied), and the same
  through the writable output directory and the fresh per-sandbox mounts;
* kill -9 of a rollout left its bwrap temp directories, cgroups (and now mounts) behind, and its Docker
  container running until the next Docker run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from clawgym.core.records import WorkspaceFile, WorkspaceSpec
from clawgym.sandbox.base import Mount, SandboxLimits

MiB = 1024 * 1024
# 48 files of 64 MiB: 3 GiB, each under the per-file limit (256 MiB by default)
FILL_3GB = "i=0; while [ $i -lt 48 ]; do head -c 67108864 /dev/zero > {dir}/fill$i || exit 1; i=$((i+1)); done"


def make_spec(mount_dir: str = "/workspace") -> WorkspaceSpec:
    return WorkspaceSpec(mount_dir=mount_dir, files=[WorkspaceFile(path="hello.txt", content="hello\n")])


@contextmanager
def started(backend, mounts=(), **limits):
    sb = backend.start(make_spec(), limits=SandboxLimits(**limits), mounts=list(mounts))
    try:
        yield sb
    finally:
        sb.stop()


def marker() -> str:
    return f"clawgym-test-{uuid.uuid4().hex[:12]}"


def host_pids_with(text: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if text.encode() in fh.read():
                    out.append(int(entry))
        except OSError:
            pass
    return out


def wait_for(cond, within: float, step: float = 0.1):
    deadline = time.monotonic() + within
    while True:
        got = cond()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(step)


def mounts_under(path: Path) -> list[str]:
    """Mount points at or under `path` in this mount namespace."""
    p = str(path)
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == p or point.startswith(p + "/"):
                out.append(point)
    return out


def tree_bytes(path: Path) -> int:
    """Bytes allocated by the files under `path` (what they take on their filesystem)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


# ---------------------------------------------------------------------------------- 1. docker capabilities


def _status(sb, pid: str = "self") -> dict[str, str]:
    text = sb.exec(["cat", f"/proc/{pid}/status"]).stdout
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def test_docker_sandbox_cannot_mknod(docker_backend):
    with started(docker_backend) as sb:
        # /dev/kmsg, and the host's first disk, in the private /tmp and in the host-backed workspace
        for path, kind in (("/tmp/kmsg", "c 1 11"), (f"{sb.mount_dir}/kmsg", "c 1 11"), ("disk", "b 8 0")):
            r = sb.exec(f"mknod {path} {kind}")
            assert r.exit_code != 0 and "Operation not permitted" in r.stderr, (path, r)
        assert not (sb.host_workspace / "kmsg").exists() and not (sb.host_workspace / "disk").exists()


def test_docker_sandbox_has_no_capabilities_and_no_new_privs(docker_backend):
    from clawgym.sandbox.docker import capabilities_kept

    kept = capabilities_kept()
    assert os.geteuid() != 0 or kept == []
    with started(docker_backend) as sb:
        for pid in ("self", "1", sb.exec("echo $CLAWGYM_SUPERVISOR_PID").stdout.strip()):
            st = _status(sb, pid)
            for key in ("CapPrm", "CapEff", "CapBnd", "CapAmb", "CapInh"):
                assert int(st[key], 16) == 0 or kept, (pid, key, st[key])
            assert st["NoNewPrivs"] == "1", (pid, st.get("NoNewPrivs"))
        # capabilities dropped means dropped: even root cannot chown to another user or bypass file modes
        r = sb.exec("touch f && chown 1234 f")
        assert r.exit_code != 0 and "not permitted" in r.stderr, r
        r = sb.exec("mkdir -p locked && chmod 000 locked && ls locked")
        assert r.exit_code != 0 and "Permission denied" in r.stderr, r


# ------------------------------------------------------------------------------ 2. the sandbox's environ


def _check_no_secret_in_environs(backend, monkeypatch) -> None:
    key, token = f"sk-clawgym-test-{uuid.uuid4().hex}", f"gw-token-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("CLAWGYM_GATEWAY_TOKEN", token)
    with started(backend) as sb:
        sb.exec("sleep 30 >/dev/null 2>&1 &")
        pid1 = sb.exec("tr '\\0' '\\n' < /proc/1/environ")
        every = sb.exec("for f in /proc/[0-9]*/environ /proc/[0-9]*/task/*/environ; do "
                        "tr '\\0' '\\n' < $f; done 2>/dev/null; true")
        # the scan really reads environments (the supervisor's at least)
        assert "WORKSPACE=" in every.stdout, every
        for text in (pid1.stdout, pid1.stderr, every.stdout):
            assert key not in text and token not in text
            assert "OPENAI_API_KEY" not in text and "CLAWGYM_GATEWAY_TOKEN" not in text


def test_bwrap_pid1_environ_does_not_leak_api_key(bwrap_backend, monkeypatch):
    _check_no_secret_in_environs(bwrap_backend, monkeypatch)


def test_docker_pid1_environ_does_not_leak_api_key(docker_backend, monkeypatch):
    _check_no_secret_in_environs(docker_backend, monkeypatch)


# --------------------------------------------------------------------------------- 13. the disk limit


def test_workspace_disk_quota_stops_a_3gb_write(isolated_backend):
    with started(isolated_backend) as sb:  # the default limits
        host_fs = sb.host_workspace.parent.parent
        before = shutil.disk_usage(host_fs).used
        t0 = time.monotonic()
        r = sb.exec(FILL_3GB.format(dir="."), timeout=300)
        assert r.exit_code != 0 and "No space left" in r.stderr and r.limit == "disk", r
        assert time.monotonic() - t0 < 60
        limit = sb.limits.disk_mb * MiB
        assert tree_bytes(sb.host_workspace) <= limit
        assert shutil.disk_usage(host_fs).used - before <= limit + 128 * MiB
        # the episode goes on: the agent can free space and write again
        assert sb.exec("rm -f fill* && head -c 1000000 /dev/zero > small && echo ok").stdout == "ok\n"
        r = sb.exec("echo fine")
        assert r.ok and r.limit is None
        assert (sb.host_workspace / "hello.txt").read_text() == "hello\n"


def test_output_dir_and_fresh_mounts_cannot_fill_the_host_disk(isolated_backend):
    """The other host directories a sandbox can write: its output directory (where commands' stdout and
    stderr go, writable from inside at /.clawgym/out) and the fresh per-sandbox mounts (agent state)."""
    with started(isolated_backend, mounts=[Mount(target="/state", read_only=False)]) as sb:
        out = sb.host_workspace.parent / "ctl" / "out"
        for inside, host in (("/state", sb.mounts["/state"]), ("/.clawgym/out", out)):
            r = sb.exec(FILL_3GB.format(dir=inside), timeout=300)
            assert r.exit_code != 0, (inside, r)
            assert tree_bytes(host) <= 1024 * MiB, inside
            assert sb.exec(f"rm -f {inside}/fill* && echo ok").stdout == "ok\n"
        assert sb.exec("echo fine").stdout == "fine\n"


def test_agent_filling_its_workspace_cannot_dodge_its_score(isolated_backend, tmp_path):
    """The limit must not open a hole of its own: a workspace left full would make the checker's copy fail,
    an infrastructure error (retried, never scored) instead of the agent's score."""
    from clawgym.agent import get_agent
    from clawgym.core.records import Task
    from clawgym.rollout import RolloutOptions, run_rollout

    checker = "#!/bin/sh\n# " + "x" * 2_000_000 + "\necho 0.25\n"  # 2 MB: does not fit in a full workspace
    task = Task.model_validate({
        "id": "fill-the-disk", "instruction": "Fill the disk.", "workspace": make_spec().model_dump(mode="json"),
        "verifier": {"code": {"kind": "shell", "entry": "sh reward/check.sh",
                              "files": [{"path": "reward/check.sh", "content": checker}]}},
        "reference": {"steps": [{"name": "exec", "arguments": {
            "command": FILL_3GB.format(dir=".") + "; head -c 10000000 /dev/zero > last; df -k ."}}]},
    })
    report = run_rollout([task], lambda: get_agent("oracle"), isolated_backend, tmp_path / "run",
                         RolloutOptions(keep_workspaces=False, infra_retries=0))
    (t,) = report.ran
    assert t.status == "completed" and t.verdict.status == "scored", (t.error, t.verdict)
    assert t.verdict.score == 0.25


def test_disk_limit_is_enforced_or_reported(isolated_backend):
    """`clawgym sandbox check` says whether the disk limit holds here; never silently missing."""
    ok, why = isolated_backend.check()
    assert ok and "disk limit" in why, why
    from clawgym.sandbox.disk import disk_limit_mode

    mode = disk_limit_mode()
    assert (mode is None) == ("NOT enforced" in why)
    if os.geteuid() == 0:
        assert mode is not None


# ----------------------------------------------------------------------- 14. kill -9 of the sandbox owner


def _sleepy_task(path: Path, m: str) -> None:
    task = {
        "id": "sleepy", "instruction": "Wait a while.", "workspace": make_spec().model_dump(mode="json"),
        "verifier": {"code": {"kind": "python", "source": "def grade(t, w):\n    return {'ok': 1.0}\n"}},
        "reference": {"steps": [
            {"name": "exec", "arguments": {"command": f'ln -sf "$(command -v sleep)" ./{m}; ./{m} 100'}},
        ]},
    }
    path.write_text(json.dumps(task) + "\n")


def _containers_of(client, pid: int) -> list[str]:
    from clawgym.sandbox.docker import LABEL, OWNER_LABEL

    host = socket.gethostname()
    out = []
    for c in client.api.containers(all=True, filters={"label": LABEL}):
        owner = (c.get("Labels") or {}).get(OWNER_LABEL, "")
        if owner == f"{host}:{pid}" or owner.startswith(f"{host}:{pid}:"):
            out.append(c["Id"])
    return out


def _cgroups_of(pid: int) -> list[Path]:
    """The clawgym cgroup directories a process is in."""
    from clawgym.sandbox.cgroups import CGROUP_ROOT

    out = []
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if "clawgym" not in path:
            continue
        sub = ctrls.split(",")[0] if ctrls else ""
        if sub in ("pids", "memory") or not ctrls:
            out.append(CGROUP_ROOT / sub / path.lstrip("/") if sub else CGROUP_ROOT / path.lstrip("/"))
    return out


@contextmanager
def _killed_rollout(backend, tmp_path: Path, monkeypatch, kill_reaper: bool):
    """Starts `clawgym rollout` in a subprocess on a task whose reference sleeps, waits until the sleep runs
    in the sandbox, and kill -9s the rollout (and, with `kill_reaper`, the helper that cleans up after it).
    Yields what it left: (its pid, sandbox temp dirs, cgroup dirs, container ids, marker)."""
    sbtmp = tmp_path / "sbtmp"
    sbtmp.mkdir()
    monkeypatch.setenv("CLAWGYM_SANDBOX_TMP", str(sbtmp))
    m = marker()
    _sleepy_task(tmp_path / "tasks.jsonl", m)
    exe = Path(sys.executable).with_name("clawgym")
    proc = subprocess.Popen(
        [str(exe), "rollout", str(tmp_path / "tasks.jsonl"), "--agent", "oracle", "--sandbox", backend.name,
         "-o", str(tmp_path / "run")],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "rollout.err", "wb"), env=dict(os.environ),
    )
    client = backend.client if backend.name == "docker" else None
    try:
        sleepers = wait_for(lambda: host_pids_with(m), 90)
        assert sleepers, f"the episode never started: {(tmp_path / 'rollout.err').read_text()[-2000:]}"
        dirs = [p for p in sbtmp.iterdir() if p.name.startswith("clawgym-")]
        assert dirs
        cgroups = [d for pid in sleepers for d in _cgroups_of(pid)] if backend.name == "bwrap" else []
        containers = _containers_of(client, proc.pid) if client is not None else []
        assert backend.name != "docker" or containers
        if kill_reaper:
            for pid in host_pids_with("clawgym.sandbox.sweep"):
                if str(proc.pid).encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                    os.kill(pid, signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        yield proc.pid, dirs, cgroups, containers, m
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        # whatever the test found, leave nothing behind
        for pid in host_pids_with(m):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if client is not None:
            for cid in _containers_of(client, proc.pid):
                try:
                    client.api.remove_container(cid, force=True)
                except Exception:  # noqa: S110 (cleanup whatever the test found: already removed, or the engine is gone)
                    pass
        for point in sorted(mounts_under(sbtmp), reverse=True):
            subprocess.run(["umount", "-l", point], check=False)
        shutil.rmtree(sbtmp, ignore_errors=True)


def _nothing_left(dirs, cgroups, containers, m, client) -> bool:
    return (
        not any(d.exists() for d in dirs)
        and not any(c.exists() for c in cgroups)
        and not host_pids_with(m)
        and not any(mounts_under(d) for d in dirs)
        and (client is None or not (set(containers) & {c["Id"] for c in client.api.containers(all=True)}))
    )


def test_kill_9_of_rollout_leaves_nothing_after_next_start(isolated_backend, tmp_path, monkeypatch):
    """The owner AND its reaper are killed (as by an OOM kill of the whole group, or a reboot): the next
    start of a backend of the same kind sweeps what they left."""
    client = isolated_backend.client if isolated_backend.name == "docker" else None
    with _killed_rollout(isolated_backend, tmp_path, monkeypatch, kill_reaper=True) as left:
        pid, dirs, cgroups, containers, m = left
        time.sleep(1)
        assert any(d.exists() for d in dirs)  # left behind: nobody cleaned up yet
        # a new run: a fresh backend of the same kind, starting one sandbox
        fresh = type(isolated_backend)()
        try:
            with started(fresh) as sb:
                assert sb.exec("echo ok").stdout == "ok\n"
        finally:
            fresh.close()
        assert wait_for(lambda: _nothing_left(dirs, cgroups, containers, m, client), 10), (
            [d for d in dirs if d.exists()], [c for c in cgroups if c.exists()], host_pids_with(m), containers,
        )
        assert not [p for p in (tmp_path / "sbtmp").iterdir()]


def test_kill_9_of_rollout_is_cleaned_up_within_seconds(isolated_backend, tmp_path, monkeypatch):
    """Only the owner is killed: its sandboxes (temp dirs, mounts, cgroups, container) are gone within
    seconds, with no new run needed."""
    client = isolated_backend.client if isolated_backend.name == "docker" else None
    with _killed_rollout(isolated_backend, tmp_path, monkeypatch, kill_reaper=False) as left:
        pid, dirs, cgroups, containers, m = left
        assert wait_for(lambda: _nothing_left(dirs, cgroups, containers, m, client), 15), (
            [d for d in dirs if d.exists()], [c for c in cgroups if c.exists()], host_pids_with(m), containers,
        )


OWNER_SCRIPT = """
import sys, time
from clawgym.core.records import WorkspaceSpec
from clawgym.sandbox.docker import DockerBackend
sb = DockerBackend().start(WorkspaceSpec(mount_dir="/workspace"))
print(sb.container.id, flush=True)
time.sleep(1000)
"""


def test_kill_9_of_docker_owner_and_reaper_ends_an_idle_container(docker_backend, tmp_path, monkeypatch):
    """Without its reaper either, a dead owner's idle container ends by itself: the engine closes the
    supervisor's stdin with the owner's attach connection, and the container removes itself."""
    monkeypatch.setenv("CLAWGYM_SANDBOX_TMP", str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT], stdout=subprocess.PIPE, env=dict(os.environ))
    client = docker_backend.client
    cid = None
    try:
        cid = proc.stdout.readline().decode().strip()
        assert cid, "the owner did not start its sandbox"
        for pid in host_pids_with("clawgym.sandbox.sweep"):
            if str(proc.pid).encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                os.kill(pid, signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert wait_for(lambda: cid not in {c["Id"] for c in client.api.containers(all=True)}, 15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if cid:
            try:
                client.api.remove_container(cid, force=True)
            except Exception:  # noqa: S110 (cleanup whatever the test found: already removed, or the engine is gone)
                pass
        for root in tmp_path.glob("clawgym-*"):
            for point in sorted(mounts_under(root), reverse=True):
                subprocess.run(["umount", "-l", point], check=False)


def test_sweep_spares_live_owners_and_other_hosts(bwrap_backend, tmp_path, monkeypatch):
    """The sweep removes only what a dead owner of this host and pid namespace left."""
    from clawgym.sandbox import sweep

    monkeypatch.setenv("CLAWGYM_SANDBOX_TMP", str(tmp_path))
    me = sweep.current()
    dead = 999999
    while os.path.exists(f"/proc/{dead}"):
        dead += 1
    owners = {
        "clawgym-bwrap-dead": {"host": me.host, "pidns": me.pidns, "pid": dead, "start": 1},
        "clawgym-bwrap-reused": {"host": me.host, "pidns": me.pidns, "pid": me.pid, "start": me.start + 1},
        "clawgym-bwrap-otherhost": {"host": me.host + "-x", "pidns": me.pidns, "pid": dead, "start": 1},
        "clawgym-bwrap-otherns": {"host": me.host, "pidns": me.pidns + 1, "pid": dead, "start": 1},
        "clawgym-bwrap-live": {"host": me.host, "pidns": me.pidns, "pid": me.pid, "start": me.start},
    }
    for name, owner in owners.items():
        (tmp_path / name / "ws").mkdir(parents=True)
        (tmp_path / name / "owner").write_text(json.dumps(owner))
    (tmp_path / "clawgym-bwrap-noowner" / "ws").mkdir(parents=True)
    with started(bwrap_backend) as sb:
        sweep.sweep_host()  # (the backend may have swept already, at its first start)
        assert sb.exec("echo ok").stdout == "ok\n" and sb.host_workspace.is_dir()
        assert all(d.is_dir() for d in sb.cgroup.dirs) if sb.cgroup is not None else True
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["clawgym-bwrap-live", "clawgym-bwrap-noowner", "clawgym-bwrap-otherhost", "clawgym-bwrap-otherns"]
