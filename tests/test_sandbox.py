"""Real tests on real sandboxes (bwrap and Docker, plus the unisolated local backend): no mocks.

Each test starts its own sandbox(es) from the conftest backends and checks behaviour from the host side:
containment (host files, network, writes, symlinks), limits (fork bombs, timeouts, file size, memory,
output) and lifecycle (stop, dead supervisors, leftover processes and containers).
"""

from __future__ import annotations

import os
import shutil
import socket
import socketserver
import subprocess
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from clawgym.core.records import WorkspaceFile, WorkspaceSpec
from clawgym.sandbox.base import SandboxError, SandboxLimits, SandboxPathError
from clawgym.sandbox.image import find_rootfs

MOUNTS = ["/workspace", "/root/.openclaw/workspace"]


def make_spec(mount_dir: str = "/workspace", **files: str) -> WorkspaceSpec:
    files = files or {"hello.txt": "hello from the spec\n", "sub/data.csv": "a,b\n1,2\n"}
    return WorkspaceSpec(
        mount_dir=mount_dir, files=[WorkspaceFile(path=p, content=c) for p, c in files.items()],
        directories=["empty"],
    )


@contextmanager
def started(backend, mount_dir: str = "/workspace", **limits):
    sb = backend.start(make_spec(mount_dir), limits=SandboxLimits(**limits))
    try:
        yield sb
    finally:
        sb.stop()


@pytest.fixture(autouse=True)
def _no_leftover_containers(request):
    """Every test that uses Docker leaves as many clawgym containers of this process as it found."""
    callspec = getattr(request.node, "callspec", None)
    uses_docker = "docker_backend" in request.fixturenames or (
        callspec is not None and callspec.params.get("isolated_backend") == "docker"
    )
    if not uses_docker:
        yield
        return
    client = request.getfixturevalue("docker_backend").client
    before = len(_our_containers(client))
    yield
    deadline = time.monotonic() + 10
    while (after := len(_our_containers(client))) != before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert after == before, f"{after - before} clawgym container(s) left behind"


def marker() -> str:
    return f"clawgym-test-{uuid.uuid4().hex[:12]}"


def host_pids_with(text: str) -> list[int]:
    """Host processes whose command line contains `text` (ourselves excluded)."""
    out = []
    needle = text.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if needle in fh.read():
                    out.append(int(entry))
        except OSError:
            pass
    return out


def wait_no_host_pids(text: str, within: float = 5.0) -> list[int]:
    deadline = time.monotonic() + within
    while (pids := host_pids_with(text)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def sleeper(m: str) -> str:
    """Shell code making `./<m>` a `sleep` whose command line carries the marker (seen from the host)."""
    return f'ln -sf "$(command -v sleep)" ./{m}; '


def host_can_fork() -> bool:
    return subprocess.run(["true"], timeout=10).returncode == 0


# ------------------------------------------------------------------------------------------------ basics


def test_exec_shell_string_and_argv(isolated_backend):
    with started(isolated_backend) as sb:
        r = sb.exec("echo out; echo err >&2; exit 3")
        assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
        assert not r.ok and not r.timed_out and r.limit is None
        r = sb.exec(["printf", "%s|", "a b", "$HOME;id", "*"])  # argv: no shell, no splitting, no expansion
        assert (r.exit_code, r.stdout) == (0, "a b|$HOME;id|*|")
        assert sb.exec("true").ok and sb.exec(["false"]).exit_code == 1
        assert sb.exec(["no-such-command-xyz"]).exit_code == 127


def test_stdin_env_and_closed_streams(isolated_backend):
    with started(isolated_backend) as sb:
        assert sb.exec("tr a-z A-Z", stdin="hello\nworld").stdout == "HELLO\nWORLD"
        assert sb.exec(["wc", "-c"], stdin=bytes(range(256)) * 40).stdout.strip() == "10240"
        t0 = time.monotonic()
        r = sb.exec("cat", timeout=10)  # no stdin given: reads /dev/null, not the supervisor's channel
        assert r.ok and r.stdout == "" and time.monotonic() - t0 < 5
        r = sb.exec('printf "%s" "$FOO/$BAR"', env={"FOO": "it's a \"value\"", "BAR": "$(id)"})
        assert r.stdout == "it's a \"value\"/$(id)"
        assert sb.exec("echo $HOME:$WORKSPACE").stdout.strip() == f"/root:{sb.mount_dir}"
        with pytest.raises(ValueError):
            sb.exec("true", env={"BAD NAME": "x"})
        # commands that close their streams, or the supervisor's, do not break the loop
        sb.exec("exec 0<&- 1>&- 2>&-; echo gone")
        sb.exec("exec >/dev/null; echo x >&2")
        assert sb.exec("echo still here").stdout == "still here\n"
        # commands start with default signal dispositions (an ignored SIGPIPE would be inherited: `yes | head`
        # would then end with EPIPE errors instead of quietly)
        # (standard signals 1-31 only: realtime ones ignored by whatever started the test are inherited as is)
        mask = int(sb.exec("grep SigIgn /proc/self/status").stdout.split()[1], 16)
        assert mask & 0x7FFFFFFF == 0, hex(mask)
        r = sb.exec("yes | head -c 10")
        assert (r.exit_code, r.stdout, r.stderr) == (0, "y\n" * 5, "")


@pytest.mark.parametrize("mount_dir", MOUNTS)
def test_workspace_mount_and_cwd(isolated_backend, mount_dir):
    with started(isolated_backend, mount_dir) as sb:
        assert sb.workdir == mount_dir
        assert sb.exec("pwd").stdout.strip() == mount_dir
        assert sb.exec("cat hello.txt").stdout == "hello from the spec\n"
        assert sb.exec(f"cat {mount_dir}/sub/data.csv").stdout == "a,b\n1,2\n"
        assert sb.exec("test -d empty").ok
        assert sb.exec("pwd", cwd="/tmp").stdout.strip() == "/tmp"
        assert sb.exec("pwd", cwd=f"{mount_dir}/sub").stdout.strip() == f"{mount_dir}/sub"
        assert sb.exec("pwd", cwd="/no/such/dir").exit_code == 125


@pytest.mark.parametrize("mount_dir", MOUNTS)
def test_files_inside_and_outside_workspace(isolated_backend, mount_dir):
    with started(isolated_backend, mount_dir) as sb:
        # inside the workspace: host-side file operations, seen by commands
        sb.write_file("notes/todo.txt", "write me\n")
        assert sb.exec("cat notes/todo.txt").stdout == "write me\n"
        assert sb.read_file("hello.txt") == b"hello from the spec\n"
        assert sb.read_file(f"{mount_dir}/sub/data.csv") == b"a,b\n1,2\n"
        sb.write_file(f"{mount_dir}/run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
        assert sb.exec("./run.sh").stdout == "ran\n"
        sb.write_file("ro.txt", "x", mode=0o400)
        assert (sb.host_workspace / "ro.txt").stat().st_mode & 0o777 == 0o400
        # written inside: appears in the host workspace
        sb.exec("mkdir -p out/deep && printf 'z' > out/deep/f.bin")
        assert (sb.host_workspace / "out/deep/f.bin").read_bytes() == b"z"
        # outside the workspace (/tmp): through exec, and not on the host's /tmp
        name = f"/tmp/{marker()}.bin"
        blob = bytes(range(256)) * 3
        sb.write_file(name, blob)
        assert sb.exec(["wc", "-c", name]).stdout.split()[0] == str(len(blob))
        assert sb.read_file(name) == blob
        assert not os.path.exists(name)
        with pytest.raises(FileNotFoundError):
            sb.read_file("/tmp/no-such-file")
        with pytest.raises(FileNotFoundError):
            sb.read_file("no-such-file")
        with pytest.raises(IsADirectoryError):
            sb.read_file("sub")
        assert sb.host_path("/etc/passwd") is None
        assert sb.host_path("sub/data.csv") == sb.host_workspace / "sub" / "data.csv"


def test_tmp_persists_across_execs(isolated_backend):
    with started(isolated_backend) as sb:
        assert sb.exec("echo kept > /tmp/state && export X=1 && cd /tmp").ok
        assert sb.exec("cat /tmp/state").stdout == "kept\n"
        # state lives in the sandbox's files, not in a shell: env and cwd reset per exec
        assert sb.exec('echo "${X:-unset} $(pwd)"').stdout.strip() == f"unset {sb.mount_dir}"


# ------------------------------------------------------------------------------------------- containment


def test_cannot_read_host_files(isolated_backend):
    secret_dir = Path(f"/root/{marker()}")
    secret_dir.mkdir()
    secret = uuid.uuid4().hex
    (secret_dir / "secret.txt").write_text(secret)
    try:
        with started(isolated_backend) as sb:
            r = sb.exec(f"cat {secret_dir}/secret.txt; ls -a /root; grep -r {secret} /root /tmp /home 2>/dev/null")
            assert r.exit_code != 0 and secret not in r.stdout and secret_dir.name not in r.stdout
            # /etc/shadow inside is the image's own, never the host's
            inside = sb.exec("cat /etc/shadow")
            host = Path("/etc/shadow").read_bytes().decode(errors="replace") if Path("/etc/shadow").exists() else None
            image = (find_rootfs() / "etc/shadow").read_text() if find_rootfs() else None
            assert inside.stdout in ("", image)
            if host is not None and host != image:
                assert inside.stdout != host
            # no host process is visible (pid namespace)
            r = sb.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
            assert "pytest" not in r.stdout and "dockerd" not in r.stdout
            assert int(sb.exec("ls -d /proc/[0-9]* | wc -l").stdout) < 15
    finally:
        shutil.rmtree(secret_dir)


def test_bwrap_without_image_uses_curated_host_root(monkeypatch):
    """The no-image fallback (host /usr read-only, an allowlisted /etc): no secrets, nothing writable."""
    from clawgym.sandbox.bwrap import BwrapBackend

    monkeypatch.setenv("CLAWGYM_ROOTFS", "/nonexistent")
    backend = BwrapBackend()
    assert backend.rootfs is None
    ok, why = backend.check()
    if not ok:
        pytest.skip(why)
    with started(backend) as sb:
        assert sb.exec("cat hello.txt").stdout == "hello from the spec\n"
        r = sb.exec("cat /etc/shadow")
        assert r.exit_code != 0 and r.stdout == ""
        for path in ["/etc", "/usr", "/"]:
            assert sb.exec(["touch", f"{path}/x"]).exit_code != 0, path
        assert sb.exec("ls /root").stdout == "" and sb.exec("echo ok > /tmp/x && cat /tmp/x").stdout == "ok\n"


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        self.server.hits += 1  # type: ignore[attr-defined]
        self.request.sendall(b"host secret\n")


CONNECT = """
import socket, sys, time
t = time.monotonic()
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
    print("CONNECTED", s.recv(100))
except OSError as exc:
    print("FAILED", type(exc).__name__, exc, round(time.monotonic() - t, 2))
"""


def test_no_network(isolated_backend):
    server = socketserver.TCPServer(("127.0.0.1", 0), _Handler)
    server.hits = 0  # type: ignore[attr-defined]
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        probe = socket.create_connection(("127.0.0.1", port), timeout=5)  # the server works from the host
        assert probe.recv(100) == b"host secret\n"
        probe.close()
        with started(isolated_backend) as sb:
            sb.write_file("connect.py", CONNECT)
            for host, p in [("127.0.0.1", port), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
                t0 = time.monotonic()
                r = sb.exec(["python3", "connect.py", host, str(p)], timeout=20)
                assert r.stdout.startswith("FAILED"), (host, r.stdout, r.stderr)
                assert time.monotonic() - t0 < 4, f"{host}: did not fail fast: {r.stdout}"
            assert server.hits == 1  # only the host's own probe
            # only the loopback interface exists
            ifaces = [ln.split(":")[0].strip() for ln in sb.exec("cat /proc/net/dev").stdout.splitlines()[2:]]
            assert ifaces == ["lo"]
            assert sb.exec("getent hosts deb.debian.org", timeout=10).exit_code != 0
    finally:
        server.shutdown()
        server.server_close()


def test_cannot_write_outside_workspace(isolated_backend):
    name = marker()
    with started(isolated_backend) as sb:
        for path in ["/usr", "/etc", "/", "/var", "/usr/bin", "/opt", sb.ctl_inside]:
            r = sb.exec(["touch", f"{path}/{name}"])
            assert r.exit_code != 0 and "Read-only" in r.stderr, (path, r.stderr)
        assert sb.exec(["mkdir", f"/{name}"]).exit_code != 0
        # no capability to undo it
        r = sb.exec("mount -o remount,rw /usr; mount -t tmpfs none /mnt; touch /usr/" + name)
        assert r.exit_code != 0 and sb.exec(["test", "-e", f"/usr/{name}"]).exit_code != 0
        # /tmp is writable, private to the sandbox
        assert sb.exec(f"echo private > /tmp/{name}").ok
        assert not os.path.exists(f"/tmp/{name}")
        # nothing reached the host or the shared image
        for root in ["/", find_rootfs()]:
            if root is not None:
                for sub in ["", "usr", "etc", "var", "usr/bin", "opt"]:
                    assert not (Path(root) / sub / name).exists()


def test_symlink_traversal_is_refused(isolated_backend):
    victim_dir = Path(f"/root/{marker()}")
    victim_dir.mkdir()
    (victim_dir / "victim.txt").write_text("original")
    try:
        with started(isolated_backend) as sb:
            ws = sb.mount_dir
            assert sb.exec(
                f"ln -s /etc/passwd link && ln -s {victim_dir} dirlink && ln -s {victim_dir}/victim.txt victim"
                f" && ln -s ../../../../../../etc/shadow rel && ln -s hello.txt alias && ln -s {ws}/sub abs"
                " && ln -s /tmp tmplink"
            ).ok
            for path in ["link", f"{ws}/link", "rel", "victim", "dirlink/victim.txt", "tmplink/x", "../x"]:
                with pytest.raises(SandboxPathError, match="leaves the workspace"):
                    sb.read_file(path)
            with pytest.raises(SandboxError, match="leaves the workspace"):
                sb.write_file("dirlink/evil.txt", "pwned")
            with pytest.raises(SandboxError, match="leaves the workspace"):
                sb.write_file("victim", "pwned")
            with pytest.raises(SandboxError, match="leaves the workspace"):
                sb.write_file("dirlink/new/deep.txt", "pwned")
            assert sorted(os.listdir(victim_dir)) == ["victim.txt"]
            assert (victim_dir / "victim.txt").read_text() == "original"
            # links that stay inside the workspace work, as in the sandbox (absolute ones included)
            assert sb.read_file("alias") == b"hello from the spec\n"
            assert sb.read_file("abs/data.csv") == b"a,b\n1,2\n"
            sb.write_file("abs/new.txt", "via link")
            assert sb.exec("cat sub/new.txt").stdout == "via link"
            # a FIFO would block a host reader forever: refused instead
            assert sb.exec("mkfifo pipe").ok
            with pytest.raises(SandboxPathError, match="not a regular file"):
                sb.read_file("pipe")
            with pytest.raises(SandboxPathError, match="not a regular file"):
                sb.write_file("pipe", "x")
            # the sandbox keeps working
            assert sb.exec("echo ok").stdout == "ok\n"
    finally:
        shutil.rmtree(victim_dir)


def test_output_files_cannot_be_swapped_for_host_links(isolated_backend):
    """A command that replaces its own captured-output file by a link to a host file gets nothing back."""
    secret = Path(f"/root/{marker()}")
    secret.write_text("HOST-SECRET-" + uuid.uuid4().hex)
    try:
        with started(isolated_backend) as sb:
            r = sb.exec(
                f'o=$(readlink /proc/$$/fd/1); e=$(readlink /proc/$$/fd/2); '
                f'rm -f "$o" "$e"; ln -s {secret} "$o"; ln -s {secret} "$e"; echo done'
            )
            assert "HOST-SECRET" not in r.stdout + r.stderr
            # the control directory is read-only: no planted files for later requests or the verifier
            assert sb.exec(f"ln -s {secret} {sb.ctl_inside}/verify").exit_code != 0
            assert sb.exec(f"mkdir {sb.ctl_inside}/99").exit_code != 0
            # links planted for the next request ids are removed before use
            r = sb.exec(f"for i in $(seq 1 200); do ln -sf {secret} {sb.ctl_inside}/out/$i.out; done")
            assert r.ok
            for _ in range(3):
                r = sb.exec("echo fine")
                assert r.stdout == "fine\n" and "HOST-SECRET" not in r.stdout
    finally:
        secret.unlink()


SWAPPER = """
import os
while True:  # swap f atomically between a regular file and a link to a host file
    os.symlink("{secret}", "t1"); os.replace("t1", "f")
    os.link("a", "t2"); os.replace("t2", "f")
"""


def test_host_file_access_races(bwrap_backend):
    """A background process swapping a workspace file for a link to a host file, as fast as it can, never
    makes read_file return the host file."""
    secret = Path(f"/root/{marker()}")
    secret.write_text("HOST-SECRET")
    try:
        with started(bwrap_backend) as sb:
            sb.write_file("swap.py", SWAPPER.format(secret=secret))
            # the swapper is running once f exists (python3's start-up may take a while on a loaded machine; f is
            # briefly absent between a removal and the next creation, so look a few times)
            started_swapping = ("echo inside > a; python3 swap.py >/dev/null 2>&1 & "
                                "for i in $(seq 1 100); do test -L f -o -f f && exit 0; sleep 0.05; done; exit 1")
            assert sb.exec(started_swapping).ok
            seen = set()
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                try:
                    seen.add(sb.read_file("f"))
                except (SandboxPathError, FileNotFoundError):
                    seen.add("refused")
            assert b"HOST-SECRET" not in seen and seen & {b"inside\n", "refused"}
            sb.kill_processes()
    finally:
        secret.unlink()


# ------------------------------------------------------------------------------------------------ limits


FORK_LOOP = "import os  # {m}\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"


HOLD = """
import os, time  # {m}
while True:  # take every free process slot and keep it
    try:
        if os.fork() == 0:
            time.sleep(1000)
            os._exit(0)
    except OSError:
        time.sleep(0.01)
"""


def wait_for(cond, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_fork_bomb_is_contained(isolated_backend):
    m = marker()
    sb = isolated_backend.start(make_spec(), limits=SandboxLimits(max_processes=64))
    try:
        # a bomb inside the command: stopped by the timeout, at most 64 processes at any time
        sb.write_file("bomb.py", FORK_LOOP.format(m=m))
        t0 = time.monotonic()
        r = sb.exec(["python3", "bomb.py", m], timeout=3)
        assert not r.ok and r.timed_out and r.limit == "timeout"
        assert time.monotonic() - t0 < 10
        assert sb.exec("echo ok").stdout == "ok\n"
        # a bomb left running in the background (bash's classic): later commands fail and say why, the
        # sandbox survives it, kill_processes ends it
        r = sb.exec(f"bash -c ':(){{ :|:& }};:' {m}", timeout=5)
        counts = [len(host_pids_with(m))]
        deadline = time.monotonic() + 30  # a loaded machine (CI beside other jobs) forks slowly
        while counts[-1] < 55 and time.monotonic() < deadline:  # until the bomb holds (nearly) every slot
            time.sleep(0.1)
            counts.append(len(host_pids_with(m)))
        assert 55 <= counts[-1] and max(counts) <= 64, counts
        results = [sb.exec("echo ok", timeout=5) for _ in range(3)]  # the bomb churns: either may happen
        assert all(x.ok or x.limit == "processes" for x in results), results
        assert host_can_fork()
        sb.kill_processes()
        assert host_pids_with(m) == []
        assert sb.exec("echo ok").stdout == "ok\n"
        # a bomb that keeps every slot: the supervisor itself cannot fork, and must survive that
        sb.write_file("hold.py", HOLD.format(m=m))
        assert sb.exec(["sh", "-c", f"python3 hold.py {m} & sleep 1"], timeout=10).exit_code in (0, 125, 126)
        assert wait_for(lambda: len(host_pids_with(m)) >= 60)
        results = [sb.exec("echo ok", timeout=5) for _ in range(3)]
        for r in results:  # refused with the reason, or (a holder slot freed meanwhile) run: never a dead sandbox
            # refused by the supervisor's own fork (126, "process limit"), or, when a slot freed for it, by the fork of
            # `timeout` right after (125, "fork system call failed"): both say the process limit stopped it
            assert r.ok or (r.limit == "processes" and (
                (r.exit_code == 126 and "process limit" in r.stderr)
                or (r.exit_code == 125 and "fork system call failed" in r.stderr))), r
        if sb.backend == "bwrap":  # Docker's own init shares the limit, so whether a slot is left there varies
            assert any(r.limit == "processes" for r in results), results
        sb.kill_processes()
        assert host_pids_with(m) == []
        assert sb.exec("echo ok").stdout == "ok\n"
        # and once more, this time ended by stop()
        sb.exec(f"bash -c ':(){{ :|:& }};:' {m}", timeout=5)
    finally:
        sb.stop()
    assert wait_no_host_pids(m) == []
    assert host_can_fork()


def test_endless_loop_times_out(isolated_backend):
    with started(isolated_backend) as sb:
        t0 = time.monotonic()
        r = sb.exec("while :; do :; done", timeout=1)
        wall = time.monotonic() - t0
        assert r.timed_out and r.limit == "timeout" and not r.ok
        assert 0.9 < wall < 3.0 and r.duration_s < 3.0
        # the whole process group goes, background children included
        m = marker()
        r = sb.exec(sleeper(m) + f"./{m} 100 & ./{m} 100; echo never", timeout=1)
        assert r.timed_out and "never" not in r.stdout
        assert wait_no_host_pids(m, 3) == []
        assert sb.exec(sleeper(m) + f"./{m} 100 & echo started").stdout == "started\n"  # (the check can fail)
        assert len(host_pids_with(m)) == 1
        sb.kill_processes()
        # a quick command right at its timeout is not a timeout
        r = sb.exec("exit 124", timeout=5)
        assert r.exit_code == 124 and not r.timed_out


def test_file_size_limit(isolated_backend):
    with started(isolated_backend, max_file_mb=8) as sb:
        r = sb.exec("head -c 100000000 /dev/zero > big", timeout=30)
        # SIGXFSZ: the shell reports 128 + 25
        assert r.exit_code == 153 and r.limit == "file_size", r
        assert (sb.host_workspace / "big").stat().st_size <= 8 * 1024 * 1024
        r = sb.exec("yes > /tmp/big2", timeout=30)
        assert r.limit == "file_size"
        assert int(sb.exec("stat -c %s /tmp/big2").stdout) <= 8 * 1024 * 1024
        r = sb.exec("head -c 1000000 /dev/zero > small && echo ok")  # under the limit
        assert r.ok and r.limit is None


def test_memory_limit(isolated_backend):
    with started(isolated_backend, memory_mb=256) as sb:
        t0 = time.monotonic()
        r = sb.exec(["python3", "-c", "x = b'x' * (1 << 30); print(len(x))"], timeout=60)
        assert not r.ok and "1073741824" not in r.stdout
        assert r.limit == "memory" or "MemoryError" in r.stderr, r
        assert time.monotonic() - t0 < 30
        assert sb.exec(["python3", "-c", "x = b'x' * (64 << 20); print(len(x))"]).stdout.strip() == str(64 << 20)
        assert sb.exec("echo ok").ok
        # /tmp is memory too: filling it is a plain "no space" error, not an OOM that takes the sandbox down
        r = sb.exec("head -c 400000000 /dev/zero > /tmp/fill", timeout=60)
        assert r.exit_code != 0 and "No space left" in r.stderr, r
        assert sb.exec("echo ok").stdout == "ok\n"
        assert sb.exec("rm /tmp/fill && echo ok").stdout == "ok\n"
        # the supervisor loses to the OOM killer only as a last resort: the command goes first
        r = sb.exec(["python3", "-c", "import os; print(open('/proc/self/oom_score_adj').read())"])
        assert r.stdout.strip() == "1000"
    assert host_can_fork()


def test_output_flood_is_truncated(isolated_backend):
    with started(isolated_backend, max_output_bytes=1000) as sb:
        r = sb.exec("yes | head -c 50000000", timeout=60)
        assert r.truncated and len(r.stdout) <= 1000 and r.limit == "output"
        assert r.stdout.startswith("y\ny\n")
        r = sb.exec("yes >&2 | true; head -c 5000 /dev/zero | tr '\\0' e >&2")
        assert r.truncated and len(r.stderr) <= 1000
        assert sb.exec("echo small").stdout == "small\n"
    # output beyond the file size limit: stopped, and reported as an output flood
    with started(isolated_backend, max_output_bytes=1000, max_file_mb=8) as sb:
        t0 = time.monotonic()
        r = sb.exec("yes", timeout=60)
        assert r.limit == "output" and r.truncated and not r.timed_out and len(r.stdout) <= 1000
        assert time.monotonic() - t0 < 30


# --------------------------------------------------------------------------------------------- lifecycle


def test_stop_is_idempotent_and_cleans_up(isolated_backend):
    sb = isolated_backend.start(make_spec())
    root = sb.host_workspace.parent
    assert root.is_dir() and sb.exec("true").ok
    sb.stop()
    sb.stop()
    assert not root.exists()
    with pytest.raises(SandboxError):
        sb.exec("echo hi")
    with pytest.raises(SandboxError):
        sb.kill_processes()
    cgroup = getattr(sb, "cgroup", None)
    if cgroup is not None:
        assert not any(d.exists() for d in cgroup.dirs)


def test_dead_supervisor_is_reported_promptly(isolated_backend):
    sb = isolated_backend.start(make_spec())
    try:
        t0 = time.monotonic()
        with pytest.raises(SandboxError):
            sb.exec("kill -9 $CLAWGYM_SUPERVISOR_PID; sleep 1; echo alive", timeout=60)
            sb.exec("echo alive", timeout=60)
        assert time.monotonic() - t0 < 10
        with pytest.raises(SandboxError):
            sb.exec("echo again", timeout=60)
    finally:
        sb.stop()
    assert not sb.host_workspace.parent.exists()


def test_kill_processes_keeps_sandbox(isolated_backend):
    m = marker()
    with started(isolated_backend) as sb:
        r = sb.exec(
            sleeper(m) + f"echo keep > /tmp/keep; ./{m} 1000 & setsid ./{m} 1001 & "
            f"(sh -c './{m} 1002' &) ; nohup ./{m} 1003 >/dev/null 2>&1 & echo $!"
        )
        assert r.ok
        time.sleep(0.2)
        assert len(host_pids_with(m)) >= 4
        pattern = f"[{m[0]}]{m[1:]}"  # does not match pgrep's own command line
        assert int(sb.exec(f"pgrep -f '{pattern}' | wc -l").stdout) >= 4
        sb.kill_processes()
        assert host_pids_with(m) == []
        assert sb.exec(f"pgrep -f '{pattern}'").exit_code == 1
        assert sb.exec("cat /tmp/keep").stdout == "keep\n"  # same sandbox, not a restart
        sb.kill_processes()  # nothing left: fine
        assert sb.exec("echo ok").ok


def test_in_sandbox_kill_script(isolated_backend):
    """The fallback of kill_processes when the sandbox's processes are not visible from the host (a remote
    Docker engine): a script run inside, which spares init, the supervisor and itself."""
    from clawgym.sandbox.supervisor import KILL_ALL_SH

    m = marker()
    with started(isolated_backend) as sb:
        assert sb.exec(sleeper(m) + f"./{m} 1000 & setsid ./{m} 1001 & echo started").ok
        assert wait_for(lambda: len(host_pids_with(m)) == 2)
        assert sb.exec(["sh", "-c", KILL_ALL_SH], cwd="/").ok
        assert wait_no_host_pids(m, 3) == []
        assert sb.exec("echo ok").stdout == "ok\n"


def _our_containers(client) -> list:
    from clawgym.sandbox.docker import LABEL, OWNER_LABEL, _owner

    return client.api.containers(all=True, filters={"label": [LABEL, f"{OWNER_LABEL}={_owner()}"]})


def test_docker_containers_labelled_and_removed(docker_backend):
    from clawgym.sandbox.docker import LABEL

    client = docker_backend.client
    before = len(_our_containers(client))
    sb = docker_backend.start(make_spec())
    try:
        cid = sb.container.id
        labelled = [c["Id"] for c in client.api.containers(filters={"label": LABEL})]
        assert cid in labelled
        attrs = client.api.inspect_container(cid)
        assert attrs["HostConfig"]["NetworkMode"] == "none" and attrs["HostConfig"]["ReadonlyRootfs"]
        assert attrs["HostConfig"]["PidsLimit"] == SandboxLimits().max_processes
        assert len(_our_containers(client)) == before + 1
    finally:
        sb.stop()
    import docker.errors

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            client.containers.get(cid)
        except docker.errors.NotFound:
            break
        time.sleep(0.1)
    else:
        pytest.fail("container still present after stop()")
    assert len(_our_containers(client)) == before


def test_docker_sweep_removes_orphans(docker_backend):
    import docker.errors

    from clawgym.sandbox.docker import LABEL, OWNER_LABEL, DockerBackend, _owner

    client = docker_backend.client
    dead = 999999
    while os.path.exists(f"/proc/{dead}"):
        dead += 1
    common = dict(command=["sleep", "1000"], network_mode="none", detach=True)
    orphan = client.containers.run(
        docker_backend.image, labels={LABEL: "1", OWNER_LABEL: f"{socket.gethostname()}:{dead}"}, **common
    )
    live = client.containers.run(docker_backend.image, labels={LABEL: "1", OWNER_LABEL: _owner()}, **common)
    try:
        removed = DockerBackend().sweep()
        assert removed >= 1
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(orphan.id)
        assert client.containers.get(live.id).status == "running"  # its owner (this process) lives
    finally:
        for c in (orphan, live):
            try:
                c.remove(force=True)
            except docker.errors.NotFound:
                pass


# ----------------------------------------------------------------------------------------------- local


def test_local_backend(tmp_path):
    from clawgym.sandbox.local import LocalBackend

    with pytest.warns(UserWarning, match="NO isolation"):
        sb = LocalBackend().start(make_spec(), limits=SandboxLimits())
    m = marker()
    try:
        assert not sb.isolated
        assert sb.workdir == str(sb.host_workspace) != sb.mount_dir
        assert sb.exec("pwd").stdout.strip() == os.path.realpath(sb.host_workspace)
        assert sb.exec("cat hello.txt").stdout == "hello from the spec\n"
        assert sb.exec("pwd", cwd=f"{sb.mount_dir}/sub").stdout.strip() == os.path.realpath(
            sb.host_workspace / "sub"
        )
        sb.write_file(f"{sb.mount_dir}/x.txt", "mapped")
        assert (sb.host_workspace / "x.txt").read_text() == "mapped"
        assert sb.read_file("x.txt") == b"mapped"
        t0 = time.monotonic()
        r = sb.exec("while :; do :; done", timeout=1)
        assert r.timed_out and r.limit == "timeout" and time.monotonic() - t0 < 3
        # a job that left the session is found through the cgroup, when there is one
        jobs = sleeper(m) + f"./{m} 1000 &" + (f" setsid ./{m} 1001 &" if sb.cgroup is not None else "")
        assert sb.exec(jobs + " echo started").ok
        time.sleep(0.2)
        assert len(host_pids_with(m)) == (2 if sb.cgroup is not None else 1)
        sb.kill_processes()
        assert wait_no_host_pids(m, 2) == []
        assert sb.exec("echo ok").stdout == "ok\n"
        sb.exec(f"./{m} 1004 &")
    finally:
        sb.stop()
    assert wait_no_host_pids(m, 2) == []
    assert not sb.host_workspace.parent.exists()


# ----------------------------------------------------------------------------------------- concurrency


def test_works_with_high_file_descriptors(isolated_backend):
    """A process running many sandboxes holds many fds: the channel must not rely on select() (< 1024)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < 1200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        with started(isolated_backend) as sb:
            assert sb.exec("echo ok").stdout == "ok\n"
            r = sb.exec("sleep 1.5; echo slow", timeout=10)  # waits across a poll timeout too
            assert r.stdout == "slow\n"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_concurrent_bwrap_sandboxes(bwrap_backend):
    n = 16
    results: dict[int, object] = {}

    def one(i: int) -> None:
        try:
            with bwrap_backend.start(make_spec(), limits=SandboxLimits()) as sb:
                sb.exec(f"echo {i} > mine.txt && echo {i} > /tmp/mine")
                r = sb.exec("cat mine.txt /tmp/mine; ls /tmp | wc -l")
                results[i] = (r.stdout, sb.read_file("mine.txt"))
        except Exception as exc:  # reported below
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert time.monotonic() - t0 < 60
    for i in range(n):
        assert results.get(i) == (f"{i}\n{i}\n1\n", f"{i}\n".encode()), (i, results.get(i))
