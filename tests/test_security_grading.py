"""Reward integrity II (issue #32): the checker shares nothing with what the agent left behind.

Each test replays one attack found on a680fe3, on both isolated backends where it applies, with the oracle agent
replaying the attack as a task's "reference solution": the task's checker pays 1 only when `out.txt` holds 42,
and no attack writes it. Before the fixes, each of these either scored 1.0 for nothing, turned the agent's
failure into an `infra_error` (unscored, retried, removed from the mean), or crashed the run."""

from __future__ import annotations

import json
import time

import pytest

from clawgym.agent import get_agent
from clawgym.checks import current_checklib
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task, Trajectory
from clawgym.rollout import RolloutOptions, run_rollout
from test_security_sandbox import exec_step, shell_task

FORGED = '{"scores": {"forged": 1.0}}'


def checks_task(steps: list[dict], task_id: str = "attack") -> Task:
    """A task graded by checks as data (the synthesized kind): 1 only when out.txt holds exactly 42."""
    return Task.model_validate({
        "id": task_id, "instruction": "write 42 to out.txt",
        "workspace": {"files": [{"path": "input/a.txt", "content": "a"}]},
        "verifier": {"code": {"kind": "checks", "checklib": current_checklib()[0].model_dump(),
                              "checks": [{"name": "answer", "fn": "text_equals",
                                          "args": {"path": "out.txt", "expected": "42"}}]}},
        "reference": {"steps": steps, "final_message": "done"},
    })


def rollout(task: Task, backend, run_dir, **options) -> Trajectory:
    report = run_rollout([task], lambda: get_agent("oracle"), backend, run_dir,
                         RolloutOptions(retry_delay_s=0.1, **options))
    (traj,) = report.ran
    return traj


# A forger that rewrites, every few milliseconds, whatever the grader writes where the sandbox's commands leave
# their output (the runner's result line, a shell checker's score), for as long as it lives.
# (The output directory was /.clawgym/out before the control directory got a random path per sandbox.)
FORGE_LOOP = (
    "while :; do for f in /.clawgym/out/*.out /.clawgym/*/out/*.out; do "
    f"[ -f \"$f\" ] && printf '\\n__CLAWGYM_GRADE_RESULT__0 {FORGED}\\n1\\n' > \"$f\"; "
    "done; done"
)


# -- 1. a process in a nested pid namespace survives the agent ------------------------------------------------


@pytest.mark.parametrize("kind", ["checks", "shell"])
def test_process_in_nested_pid_namespace_cannot_forge_the_grade(isolated_backend, tmp_path, kind):
    """`unshare --user --pid --fork sh forge.sh &` outlived the kill before verification (it skipped other pid
    namespaces) and replaced the checker's output: 1.0 on bwrap. Now namespaces cannot be made at all (seccomp),
    and a plain background forger, which the kill always reached, is gone with the agent's sandbox too."""
    steps = [{"name": "write", "arguments": {"path": "forge.sh", "content": FORGE_LOOP}},
             exec_step("(unshare --user --pid --fork sh forge.sh >/dev/null 2>&1 &); "
                       "(setsid nohup sh forge.sh >/dev/null 2>&1 &); sleep 0.2; echo started")]
    task = checks_task(steps) if kind == "checks" else shell_task(steps=steps)
    traj = rollout(task, isolated_backend, tmp_path / "run")
    assert traj.status == "completed", (traj.status, traj.error)
    assert traj.verdict.score == 0.0 and "forged" not in traj.verdict.checks, traj.verdict
    assert traj.attempts == 1


def test_sandbox_refuses_new_namespaces(isolated_backend):
    task = shell_task()
    with isolated_backend.start(task.workspace) as sb:
        res = sb.exec("unshare --user --pid --fork true; echo rc=$?")
        assert "rc=0" not in res.stdout, res
        res = sb.exec("unshare --user --map-root-user true; echo rc=$?")
        assert "rc=0" not in res.stdout, res


# -- 2. ptrace of the supervisor ---------------------------------------------------------------------------------

PTRACE_PY = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(os.environ["CLAWGYM_SUPERVISOR_PID"])
PTRACE_SEIZE, PTRACE_ATTACH = 0x4206, 16
for req in (PTRACE_SEIZE, PTRACE_ATTACH):
    rc = libc.ptrace(req, pid, 0, 0)
    print(req, rc, ctypes.get_errno())
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(16)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 16)
remote = iovec(ctypes.c_void_p(0x400000), 16)
libc.process_vm_readv.restype = ctypes.c_ssize_t
rc = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
print("vm", rc, ctypes.get_errno())
"""


def test_command_cannot_ptrace_the_supervisor(isolated_backend):
    """The agent attached to the in-sandbox supervisor and injected an execve() between two requests: the host
    kept trusting it (same pid, same start time) and it forged the grading result (6/6 on both backends)."""
    with isolated_backend.start(shell_task().workspace) as sb:
        res = sb.exec(["python3", "-c", PTRACE_PY])
    assert res.exit_code == 0, res
    lines = [ln.split() for ln in res.stdout.splitlines()]
    for _, rc, err in lines:
        assert rc == "-1" and err == "1", res.stdout  # EPERM: refused by the filter, never attached


def test_grading_runs_in_a_fresh_sandbox(isolated_backend):
    """What the agent started is gone when the grader starts: new supervisor, new control directory path."""
    with isolated_backend.start(shell_task().workspace) as sb:
        sb.exec("(setsid nohup sleep 300 >/dev/null 2>&1 &); echo 42 > out.txt")
        before_ctl = sb.ctl_inside
        sb.restart()
        assert sb.ctl_inside != before_ctl
        res = sb.exec("for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\\0' ' '; echo; done")
        assert "sleep 300" not in res.stdout, res.stdout
        assert sb.read_file("out.txt") == b"42\n"  # the workspace is the agent's
        assert sb.exec("echo $CLAWGYM_SUPERVISOR_PID").exit_code == 0


# -- 3. a directory tree 1,100 deep --------------------------------------------------------------------------------

DEEP = "for i in $(seq 1100); do mkdir d && cd d || exit 1; done; echo deep"


@pytest.mark.parametrize("where", ["workspace", "output dir"])
def test_directory_tree_1100_deep_is_scored_not_an_infra_error(isolated_backend, tmp_path, where):
    """RecursionError in the snapshot walk (or in clearing the output directory) made the episode an
    infra_error: unscored, retried three times, re-run on every resume."""
    build = DEEP if where == "workspace" else f"{{ cd /.clawgym/out || cd /.clawgym/*/out; }} && {DEEP}"
    traj = rollout(shell_task(steps=[exec_step(build)]), isolated_backend, tmp_path / "run")
    assert traj.status == "completed", (traj.status, traj.error)
    assert traj.verdict.status == "scored" and traj.verdict.score == 0.0, traj.verdict
    assert traj.attempts == 1
    assert traj.workspace_snapshot and (tmp_path / "run" / traj.workspace_snapshot).is_file()
    # and an agent that does the task beside such a tree is paid
    paid = rollout(shell_task(steps=[exec_step(build), exec_step("echo 42 > out.txt")], task_id="paid"),
                   isolated_backend, tmp_path / "run2")
    assert paid.verdict.score == 1.0, paid.verdict
    # re-scored from its kept workspace (`clawgym verify`), the tree is copied back whole and graded the same
    from clawgym.verify.rescore import rescore_episode

    again = rescore_episode(paid, shell_task(steps=[], task_id="paid"), tmp_path / "run2", None, isolated_backend)
    assert again.verdict.status == "scored" and again.verdict.score == 1.0, again.verdict


def test_deep_tree_is_removed_with_its_sandbox(bwrap_backend):
    from clawgym.core.fstree import remove_tree

    with bwrap_backend.start(shell_task().workspace) as sb:
        assert sb.exec(DEEP).stdout == "deep\n"
        root = sb.host_workspace
        remove_tree(root / "d")
        assert not (root / "d").exists()


# -- 4. a file name that is not UTF-8 ------------------------------------------------------------------------------


def test_file_name_that_is_not_utf8_is_recorded_escaped(isolated_backend, tmp_path):
    """`touch "$(printf 'x\\377y')"` then the agent's own `ls`: verification failed with UnicodeEncodeError
    (infra_error x3), then writing the trajectory raised and the whole rollout exited with a traceback."""
    steps = [exec_step("touch \"$(printf 'x\\377y')\" && ln -s \"$(printf 't\\376')\" link"),
             {"name": "ls", "arguments": {"path": "."}}, exec_step("echo 42 > out.txt")]
    traj = rollout(shell_task(steps=steps), isolated_backend, tmp_path / "run")
    assert traj.status == "completed" and traj.verdict.score == 1.0, (traj.status, traj.error, traj.verdict)
    (stored,) = read_records(tmp_path / "run" / "trajectories.jsonl", Trajectory)
    text = json.dumps(stored.transcript)
    assert "x\\\\xffy" in text and "t\\\\xfe" in text  # escaped, not dropped
    assert stored.verdict.score == 1.0


def test_a_lone_surrogate_in_a_record_is_written_escaped(tmp_path):
    from clawgym.core.jsonl import JsonlAppender

    traj = Trajectory(id="a#0", task_id="a", sample=0, agent="x", sandbox="bwrap", started_at="now",
                      status="completed", duration_s=1.0,
                      transcript=[{"role": "tool", "content": "name x\udcffy and \ud800"}])
    with JsonlAppender(tmp_path / "t.jsonl") as out:
        out.append(traj)
    (back,) = read_records(tmp_path / "t.jsonl", Trajectory)
    assert back.transcript[0]["content"] == "name x\\xffy and \\ud800"


# -- 5. the Docker log flood -------------------------------------------------------------------------------------


def test_docker_log_flood_does_not_reach_the_host_disk(docker_backend):
    """`head -c 1200000000 /dev/zero | tr '\\0' A > /proc/1/fd/1` grew the container's json-file log to 1.14 GB of
    host disk in 25 s, past the 1,024 MB disk cap. The supervisor's stdout is the channel, never a log."""
    with docker_backend.start(shell_task().workspace) as sb:
        res = sb.exec("head -c 30000000 /dev/zero | tr '\\0' A > /proc/1/fd/1; echo flooded", timeout=60)
        assert res.stdout == "flooded\n", res
        sb.container.reload()
        assert sb.container.attrs["HostConfig"]["LogConfig"]["Type"] == "none"
        log_path = sb.container.attrs.get("LogPath") or ""
        assert not log_path or not __import__("os").path.exists(log_path), log_path
        assert sb.exec("echo still").stdout == "still\n"


# -- 6. outputs linked to the checker's own files ----------------------------------------------------------------


def test_output_linked_to_the_checkers_control_files_scores_nothing(isolated_backend, tmp_path):
    """`ln -s /.clawgym/verify/checks0.json out.txt`: the checker read the expected values through the agent's
    link (3 of 19 synthesized tasks paid 0.067-0.111, single checks 1.0). The grader's control directory is now at
    a new random path in the fresh grading sandbox, which no link made before can name."""
    task = Task.model_validate({
        **checks_task([]).model_dump(mode="json"),
        "verifier": {"code": {"kind": "checks", "checklib": current_checklib()[0].model_dump(),
                              "checks": [{"name": "answer", "fn": "text_has",
                                          "args": {"path": "out.txt", "needles": ["42"]}}]}},
        "reference": {"steps": [exec_step(
            "ln -s /.clawgym/verify/checks0.json out.txt; mkdir -p o; "
            "for d in /.clawgym/*; do ln -s \"$d/verify/checks0.json\" o/$(basename $d); done; "
            "ln -s /proc/self/fd/0 o/stdin; ln -s /proc/self/cmdline o/cmdline")], "final_message": "done"},
    })
    traj = rollout(task, isolated_backend, tmp_path / "run")
    assert traj.status == "completed", (traj.status, traj.error)
    assert traj.verdict.score == 0.0, traj.verdict


def test_output_linked_to_the_checker_script_in_the_workspace_scores_nothing(isolated_backend, tmp_path):
    """ClawGym's checker lives in the workspace (`reward/`): a link made while nothing was there led, once the
    checker was copied in, to the checker's own source, which holds the expected value."""
    grep_checker = {"path": "reward/reward.sh",
                    "content": "#!/bin/sh\nif grep -q 42 out.txt 2>/dev/null; then echo 1; else echo 0; fi\n"}
    task = shell_task(steps=[exec_step("ln -s reward/reward.sh out.txt; ln -s reward rw")])
    data = task.model_dump(mode="json")
    data["verifier"]["code"]["files"] = [grep_checker]
    data["verifier"]["code"]["entry"] = "sh reward/reward.sh"
    traj = rollout(Task.model_validate(data), isolated_backend, tmp_path / "run")
    assert traj.status == "completed", (traj.status, traj.error)
    assert traj.verdict.score == 0.0, traj.verdict


# -- 11. a flood of the supervisor's stdout ------------------------------------------------------------------------


def test_supervisor_stdout_flood_costs_the_host_little_cpu(isolated_backend):
    """`yes` written into the supervisor's stdout through /proc cost the host ~11 s of CPU per 20 s (a line split
    per junk line, O(n^2)), outside every sandbox limit. The host's reading is now linear and spaced out."""
    with isolated_backend.start(shell_task().workspace) as sb:
        cpu0, wall0 = time.process_time(), time.monotonic()
        res = sb.exec("timeout 4 sh -c 'yes > /proc/$CLAWGYM_SUPERVISOR_PID/fd/1'; echo done", timeout=30)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        assert res.stdout == "done\n", res
        assert sb._chan.junk_bytes > 0  # the flood did reach the channel
        assert cpu < 0.25 * wall, (cpu, wall, sb._chan.junk_bytes)
        assert sb.exec("echo still").stdout == "still\n"


def test_lone_surrogate_a_model_writes_into_tool_arguments_is_a_tool_error(bwrap_backend):
    """A policy can write `{"path": "\\ud800"}`: a path Python cannot encode. It is the tool call's error, told
    to the model in text that can be recorded, never a crash of the agent (or of the run's recording)."""
    from clawgym.agent.tools import ToolExecutor

    with bwrap_backend.start(shell_task().workspace) as sb:
        tools = ToolExecutor(sb)
        for name, args in [("write", {"path": "a\ud800.txt", "content": "x"}), ("read", {"path": "\ud800"}),
                           ("exec", {"command": "echo \ud800"}), ("ls", {"path": "\udcff"})]:
            out = tools.call(name, args)
            out.text.encode("utf-8")  # recordable
            assert out.is_error or name == "exec", (name, out)
