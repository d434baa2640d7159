"""Attacks on the sandbox and the checker by a hostile agent or checker output (issue: sandbox and reward
integrity). Each test is named after the attack it replays; all run in real sandboxes on both backends where
the attack applies."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from clawgym.agent import get_agent
from clawgym.agent.transcript import TranscriptBuilder
from clawgym.core.records import Task
from clawgym.rollout import RolloutOptions, run_rollout
from clawgym.verify import verify_episode

REPO = Path(__file__).resolve().parents[1]
CLAWGYM_MOUNT = "/root/.openclaw/workspace"
# ClawGym's reward script shape: check.py's JSON piped into `python3 -c 'import json ...'` from the workspace
REWARD_SH = (
    "#!/usr/bin/env bash\nset -euo pipefail\n"
    f"python3 {CLAWGYM_MOUNT}/reward/check.py {CLAWGYM_MOUNT} | "
    "python3 -c 'import json, sys; d = json.loads(sys.stdin.read()); print(sum(map(float, d.values())) / len(d))'\n"
)
CHECK_PY = (
    "import json, sys\nfrom pathlib import Path\n"
    "ws = Path(sys.argv[1])\n"
    "print(json.dumps({'done': 1.0 if (ws / 'out.txt').is_file() and (ws / 'out.txt').read_text().strip() == '42' "
    "else 0.0}))\n"
)


def shell_task(entry: str = "bash reward/reward.sh", *, subscores: str | None = None, timeout: float = 60,
               steps: list[dict] | None = None, task_id: str = "attack") -> Task:
    code = {"kind": "shell", "entry": entry, "timeout_seconds": timeout,
            "files": [{"path": "reward/reward.sh", "content": REWARD_SH},
                      {"path": "reward/check.py", "content": CHECK_PY}]}
    if subscores:
        code["subscores_entry"] = subscores
    data = {"id": task_id, "instruction": "write 42 to out.txt", "verifier": {"code": code},
            "workspace": {"mount_dir": CLAWGYM_MOUNT, "files": [{"path": "input/a.txt", "content": "a"}]}}
    if steps is not None:
        data["reference"] = {"steps": steps, "final_message": "done"}
    return Task.model_validate(data)


def exec_step(command: str) -> dict:
    return {"name": "exec", "arguments": {"command": command}}


def transcript() -> list[dict]:
    tb = TranscriptBuilder(cwd=CLAWGYM_MOUNT)
    tb.user("write 42 to out.txt")
    tb.assistant("done")
    return tb.events


def verify_in_thread(task: Task, sb, within: float = 90.0):
    """verify_episode, failing the test (instead of hanging it) when it does not return in time."""
    box: dict = {}

    def go():
        try:
            box["verdict"] = verify_episode(task, sb, transcript(), "done")
        except BaseException as exc:  # pragma: no cover - reported below
            box["error"] = exc

    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(within)
    assert not th.is_alive(), f"verification still running after {within:.0f} s (hung)"
    if "error" in box:
        raise box["error"]
    return box["verdict"]


# -- item 1: a device node planted at a checker path ------------------------------------------------------


def test_device_node_at_checker_path_is_replaced_not_written_through(isolated_backend):
    """An agent with CAP_MKNOD plants `mknod reward/reward.sh c 1 3`: copying the checker in must replace the
    node with a regular file, never write through it into the host's device. (Planted from the host side
    here, since the sandboxes themselves no longer allow mknod; /dev/null is the harmless stand-in.)"""
    task = shell_task()
    with isolated_backend.start(task.workspace) as sb:
        assert sb.exec("echo 42 > out.txt").exit_code == 0
        (sb.host_workspace / "reward").mkdir()
        node = sb.host_workspace / "reward" / "reward.sh"
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        v = verify_in_thread(task, sb)
        assert stat.S_ISREG(os.lstat(node).st_mode)
        assert node.read_text() == REWARD_SH
    assert v.status == "scored" and v.score == 1.0, v


# -- item 3: a FIFO at a checker path; interrupts ------------------------------------------------------------


@pytest.mark.parametrize("plant", ["mkdir -p reward && mkfifo reward/reward.sh",
                                   "mkdir -p reward && mkfifo reward/check.py"])
def test_fifo_at_checker_path_does_not_hang_verification(isolated_backend, plant):
    task = shell_task()
    with isolated_backend.start(task.workspace) as sb:
        assert sb.exec(f"{plant} && echo 42 > out.txt").exit_code == 0
        v = verify_in_thread(task, sb)
    assert v.status == "scored" and v.score == 1.0, v


def test_verification_has_its_own_deadline(bwrap_backend):
    from clawgym.verify.code import run_shell_check

    task = shell_task("sleep 60", subscores="sleep 60", timeout=120)
    with bwrap_backend.start(task.workspace) as sb:
        t0 = time.monotonic()
        res = run_shell_check(task.verifier.code, task, sb, transcript(), "done", deadline=time.monotonic() + 2)
        took = time.monotonic() - t0
    assert res.status == "checker_failed" and "timed out" in res.error
    assert took < 20, took


def _rollout_subprocess(tmp_path: Path, tasks: list[Task], backend: str) -> tuple[subprocess.Popen, Path]:
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    sbtmp = tmp_path / "sbtmp"
    sbtmp.mkdir()
    env = {**os.environ, "CLAWGYM_SANDBOX_TMP": str(sbtmp)}
    # SIGINT at its default disposition in the child (as from a terminal) even when the tests run where it is
    # ignored: a job started in the background inherits SIG_IGN, and Python then installs no handler for it
    proc = subprocess.Popen(
        [sys.executable, "-m", "clawgym", "rollout", str(tasks_file), "--agent", "oracle", "--sandbox", backend,
         "-o", str(tmp_path / "run")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return proc, sbtmp


def _wait_for_sandbox_dir(sbtmp: Path, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if any(sbtmp.iterdir()):
            time.sleep(1.0)  # the episode is under way
            return
        time.sleep(0.1)
    raise AssertionError("no sandbox started")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_rollout_stops_it_and_removes_sandbox_dirs(bwrap_backend, tmp_path, sig):
    """SIGTERM (or Ctrl-C) of a rollout whose agent sits in a long command: the run ends at once and leaves no
    sandbox directory behind (the default SIGTERM killed the process on the spot)."""
    task = shell_task(steps=[exec_step("sleep 300")])
    proc, sbtmp = _rollout_subprocess(tmp_path, [task], "bwrap")
    try:
        _wait_for_sandbox_dir(sbtmp)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out.decode(errors="replace")[-2000:]  # ended as an interrupt, not a crash
    assert list(sbtmp.iterdir()) == [], out.decode(errors="replace")[-2000:]


# -- item 4: Python in shell checks must not import from the workspace --------------------------------------

FAKE_JSON = (
    "def loads(s, *a, **k):\n    return {'done': 1.0}\n"
    "def load(f, *a, **k):\n    return {'done': 1.0}\n"
    "def dumps(o, *a, **k):\n    return '{\"done\": 1.0}'\n"
)


@pytest.mark.parametrize("where", ["json.py", "reward/json.py"])
def test_agent_json_py_cannot_hijack_clawgym_reward(datasets, isolated_backend, tmp_path, where):
    """The agent writes json.py (at the workspace root, where `python3 -c` runs; or in reward/, next to
    check.py): the real ClawGym checker must still score the untouched task 0, not 1."""
    from clawgym.importers import import_clawgym

    tasks = import_clawgym(datasets / "clawgym-train-sample").tasks
    task = next(t for t in tasks if t.id == "task_0076")
    with isolated_backend.start(task.workspace) as sb:
        sb.write_file(where, FAKE_JSON)
        v = verify_in_thread(task, sb)
    assert v.score == 0.0, v


def test_agent_user_site_cannot_hijack_shell_checker(bwrap_backend):
    """A .pth file in the user site-packages under $HOME runs code in every python3 the checker starts."""
    task = shell_task()
    site = "/root/.local/lib/python3.11/site-packages"
    with bwrap_backend.start(task.workspace) as sb:
        planted = sb.exec(f"mkdir -p {site} && printf '%s' \"$PTH\" > {site}/x.pth && "
                          f"printf '%s' \"$FAKE\" > {site}/json.py",
                          env={"FAKE": FAKE_JSON, "PTH": f"import sys; sys.path.insert(0, {site!r})\n"})
        assert planted.exit_code == 0, planted.stderr
        v = verify_in_thread(task, sb)
    assert v.score == 0.0, v


# -- item 5: an agent that kills the supervisor or forges its answers -------------------------------------


@pytest.mark.parametrize("attack", ["kill -9 -1", 'kill -9 "$CLAWGYM_SUPERVISOR_PID"'])
def test_agent_killing_its_sandbox_is_agent_error_not_infra(isolated_backend, tmp_path, attack):
    """Killing the supervisor used to be an infra_error: never scored, retried, removed from the mean."""
    task = shell_task(steps=[exec_step("echo 42 > out.txt"), exec_step(attack)])
    report = run_rollout([task], lambda: get_agent("oracle"), isolated_backend, tmp_path / "run",
                         RolloutOptions(retry_delay_s=0.1))
    (t,) = report.ran
    assert t.status == "agent_error" and t.error.kind == "sandbox_killed", (t.status, t.error)
    assert t.attempts == 1
    assert t.verdict.status == "checker_failed" and t.verdict.score == 0.0
    assert t.score == 0.0  # counted in the mean


def test_forged_supervisor_answers_are_ignored(isolated_backend):
    task = shell_task()
    forge = (
        'S=/proc/$CLAWGYM_SUPERVISOR_PID/fd; '
        'printf "partial" > $S/1; printf "999 0 1\\n" > $S/1; printf "%s 0 1\\n" 1 > $S/1; '
        'printf "junk-in-stdin" > $S/0; echo real'
    )
    with isolated_backend.start(task.workspace) as sb:
        res = sb.exec(forge)
        assert res.exit_code == 0 and res.stdout == "real\n", res
        for _ in range(3):  # the channel still works afterwards
            again = sb.exec("echo 42 > out.txt && echo fine")
            assert again.exit_code == 0 and again.stdout == "fine\n", again
        v = verify_in_thread(task, sb)
    assert v.status == "scored" and v.score == 1.0, v


def test_forged_answers_in_a_rollout_do_not_become_infra_errors(bwrap_backend, tmp_path):
    forge = 'for i in $(seq 1 50); do printf "$i 0 1\\n" > /proc/$CLAWGYM_SUPERVISOR_PID/fd/1; done'
    task = shell_task(steps=[exec_step(forge), exec_step("echo 42 > out.txt")])
    report = run_rollout([task], lambda: get_agent("oracle"), bwrap_backend, tmp_path / "run")
    (t,) = report.ran
    assert t.status == "completed" and t.verdict.score == 1.0, (t.status, t.error, t.verdict)


# -- items 11, 12: what a shell checker prints ---------------------------------------------------------------


@pytest.mark.parametrize("printed", ["0_5", "1.5", "-0.5", "+.5", "nan", "1e3", "0x1", "１"])
def test_shell_score_that_is_not_a_plain_decimal_in_range_is_checker_failed(bwrap_backend, printed):
    """`float('0_5')` is 5.0, which used to be clamped to a passing 1.0."""
    task = shell_task(f"echo '{printed}'")
    with bwrap_backend.start(task.workspace) as sb:
        v = verify_in_thread(task, sb)
    assert v.status == "checker_failed" and v.score == 0.0, (printed, v)
    assert printed.strip() in v.error


@pytest.mark.parametrize("printed, score", [("1", 1.0), ("0.5", 0.5), ("1.0", 1.0), ("5e-05", 5e-05),
                                            ("0.3333333333333333", 1 / 3)])
def test_shell_score_plain_decimals_still_score(bwrap_backend, printed, score):
    task = shell_task(f"echo {printed}")
    with bwrap_backend.start(task.workspace) as sb:
        v = verify_in_thread(task, sb)
    assert v.status == "scored" and v.score == pytest.approx(score)


def test_score_printed_after_20mb_of_output_is_not_lost(isolated_backend):
    task = shell_task("head -c 20000000 /dev/zero | tr '\\0' x; echo; echo 0.75")
    with isolated_backend.start(task.workspace) as sb:
        v = verify_in_thread(task, sb)
    assert v.status == "scored" and v.score == 0.75, v
    assert "bytes omitted" in v.output_tail or v.output_tail.endswith("0.75")


# -- item 10: an id too long for a file name -----------------------------------------------------------------


def test_5000_char_episode_id_makes_a_valid_file_name():
    from clawgym.rollout.runner import _safe_name

    names = {_safe_name("a" * 5000 + "#0"), _safe_name("a" * 5000 + "#1"), _safe_name("." * 300)}
    assert len(names) == 3
    assert all(0 < len(n) <= 120 and not n.startswith(".") for n in names)


def test_episode_ids_that_differ_only_in_replaced_characters_get_distinct_file_names():
    from clawgym.rollout.runner import _safe_name

    assert _safe_name("a b#0") != _safe_name("a_b#0")
    assert _safe_name("task_0076#0") == "task_0076_0"  # plain ids keep the names earlier runs gave them


def test_container_lost_with_its_engine_down_stays_an_infra_error(docker_backend, tmp_path, monkeypatch):
    """The other side of the rule above: when the engine itself stops answering, a lost sandbox is not the
    agent's doing and stays an infrastructure error (retried, never scored)."""
    from clawgym.sandbox.docker import DockerSandbox

    monkeypatch.setattr(DockerSandbox, "engine_ok", lambda self: False)
    task = shell_task(steps=[exec_step("kill -9 -1")])
    report = run_rollout([task], lambda: get_agent("oracle"), docker_backend, tmp_path / "run",
                         RolloutOptions(infra_retries=0))
    (t,) = report.ran
    assert t.status == "infra_error" and t.error.kind == "sandbox_died", (t.status, t.error)


def test_docker_engine_ok_asks_the_engine(docker_backend):
    task = shell_task()
    with docker_backend.start(task.workspace) as sb:
        assert sb.engine_ok() is True


# -- the protocol's file methods (issue #19): what the agent leaves behind is never followed ---------------


@pytest.fixture
def host_victim():
    """A host directory holding a file the agent would like to overwrite or read."""
    victim = Path(f"/root/clawgym-victim-{os.getpid()}-{time.monotonic_ns()}")
    victim.mkdir()
    (victim / "victim.txt").write_text("HOST-ORIGINAL")
    yield victim
    import shutil

    shutil.rmtree(victim)


def test_links_planted_where_a_tree_is_imported_are_replaced_not_followed(isolated_backend, host_victim, tmp_path):
    """Synthesis validation copies states into a grader's workspace with import_tree: an agent's links at those
    paths (to a host directory, to a host file) are replaced, never written through."""
    src = tmp_path / "state"
    (src / "noop" / "sub").mkdir(parents=True)
    (src / "noop" / "sub" / "victim.txt").write_text("state")
    (src / "noop" / "rel").symlink_to("sub/victim.txt")
    with isolated_backend.start(shell_task().workspace) as sb:
        assert sb.exec(f"mkdir -p 0 && ln -s {host_victim} 0/noop && ln -s {host_victim} hostdir").ok
        sb.import_tree(src, "0")
        sb.import_tree(src / "noop", "hostdir")
        assert sb.read_file("0/noop/sub/victim.txt") == b"state" and sb.read_file("0/noop/rel") == b"state"
        assert sb.exec("test -d hostdir && ! test -L hostdir && test -d 0/noop && ! test -L 0/noop").ok
    assert sorted(os.listdir(host_victim)) == ["victim.txt"]
    assert (host_victim / "victim.txt").read_text() == "HOST-ORIGINAL"


def test_listing_a_link_to_a_host_directory_shows_nothing_of_it(isolated_backend, host_victim):
    """The agent's `ls` tool and the judge list directories through list_dir: a link to a host directory
    leads out of the workspace, and a listing shows links as links."""
    from clawgym.agent.tools import ToolExecutor
    from clawgym.sandbox import SandboxPathError

    with isolated_backend.start(shell_task().workspace) as sb:
        assert sb.exec(f"ln -s {host_victim} hostdir && mkdir d && ln -s {host_victim}/victim.txt d/f").ok
        with pytest.raises(SandboxPathError, match="leaves the workspace"):
            sb.list_dir("hostdir")
        out = ToolExecutor(sb).call("ls", {"path": "hostdir"})
        assert out.is_error and "victim.txt" not in out.text
        (entry,) = sb.list_dir("d")
        assert entry.kind == "link" and entry.target == f"{host_victim}/victim.txt"
        with pytest.raises(SandboxPathError):
            sb.stat("d/f")
        assert not sb.exists("d/f") and sb.exists("d")


def test_control_files_cannot_go_where_commands_write(isolated_backend):
    """Checker files go into the read-only control directory, never into its writable output part (where a
    command could have planted a link) nor out of it."""
    from clawgym.sandbox import SandboxError

    with isolated_backend.start(shell_task().workspace) as sb:
        for bad in ("out/x.py", "../ws/x.py", "/etc/x", ""):
            with pytest.raises(SandboxError, match="bad control file name"):
                sb.write_control_file(bad, "x")
        inside = sb.write_control_file("verify/grade.py", "print('mine')")
        assert sb.exec(["cat", inside]).stdout == "print('mine')"
        assert sb.exec(f"echo theirs > {inside}").exit_code != 0


def test_moving_a_workspace_out_keeps_links_as_links_and_skips_fifos(isolated_backend, host_victim, tmp_path):
    """take_workspace (synthesis validation) after a solution planted a link to a host file and a FIFO: the
    link is moved as a link, the host file is not copied, and nothing blocks on the FIFO."""
    with isolated_backend.start(shell_task().workspace) as sb:
        assert sb.exec(f"ln -s {host_victim}/victim.txt leak && mkfifo pipe && echo kept > out.txt").ok
        done = threading.Event()
        threading.Thread(target=lambda: (sb.take_workspace(tmp_path / "state"), done.set()), daemon=True).start()
        assert done.wait(60), "take_workspace blocked"
        assert sb.list_dir(".") == []
    state = tmp_path / "state"
    assert (state / "leak").is_symlink() and (state / "out.txt").read_text() == "kept\n"
    assert not (state / "pipe").exists() or stat.S_ISFIFO(os.lstat(state / "pipe").st_mode)
