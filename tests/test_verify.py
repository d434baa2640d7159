"""Code verifiers run inside a real sandbox: python grade() and shell reward scripts, and their failure modes."""

from __future__ import annotations

import pytest

from clawgym.agent.transcript import TranscriptBuilder
from clawgym.core.records import Task
from clawgym.verify import verify_episode

GOOD_GRADE = """
from pathlib import Path
def grade(transcript, workspace_path):
    p = Path(workspace_path) / "out.txt"
    said = any(e.get("type") == "message" and e["message"]["role"] == "assistant" for e in transcript)
    return {"exists": 1.0 if p.exists() else 0.0,
            "content": 1.0 if p.exists() and p.read_text().strip() == "42" else 0.0,
            "assistant_spoke": 1.0 if said else 0.0}
"""


def task_with(code: dict, mount: str = "/workspace", rubric: dict | None = None, **verifier) -> Task:
    v = {"code": code, **verifier}
    if rubric is not None:
        v["rubric"] = rubric
    return Task.model_validate({
        "id": "v", "instruction": "write 42 to out.txt", "verifier": v,
        "workspace": {"mount_dir": mount, "files": [{"path": "in.txt", "content": "in"}]},
    })


def transcript(assistant: bool = True) -> list[dict]:
    tb = TranscriptBuilder(cwd="/workspace")
    tb.user("write 42 to out.txt")
    if assistant:
        tb.assistant("done")
    return tb.events


@pytest.fixture
def run(bwrap_backend):
    """Start a sandbox for the task, let `prepare` act as the agent, then verify."""

    def _run(task: Task, prepare: str | None = None, events=None, final: str = ""):
        with bwrap_backend.start(task.workspace) as sb:
            if prepare:
                assert sb.exec(prepare).exit_code == 0
            return verify_episode(task, sb, events if events is not None else transcript(), final)

    return _run


def test_python_grade_scores_partial_credit(run):
    task = task_with({"kind": "python", "source": GOOD_GRADE})
    v = run(task, "echo 41 > out.txt")
    assert v.status == "scored"
    assert v.checks == {"exists": 1.0, "content": 0.0, "assistant_spoke": 1.0}
    assert v.score == pytest.approx(2 / 3) and not v.passed
    v = run(task, "echo 42 > out.txt")
    assert v.score == 1.0 and v.passed


def test_grade_sees_the_transcript(run):
    task = task_with({"kind": "python", "source": GOOD_GRADE})
    v = run(task, "echo 42 > out.txt", events=transcript(assistant=False))
    assert v.checks["assistant_spoke"] == 0.0


@pytest.mark.parametrize(
    "source, reason",
    [
        ("def grade(t, w):\n    raise ValueError('boom')\n", "grade() raised ValueError: boom"),
        ("def grade(t, w):\n    return {'a': 'high'}\n", "non-numeric values for: a"),
        ("def grade(t, w):\n    return [1.0]\n", "returned list, not a dict"),
        ("def grade(t, w):\n    return {}\n", "returned no scores"),
        ("x = 1\n", "defines no grade() function"),
        ("def grade(t, w):\n    import os; os._exit(3)\n", "printed no result (exit code 3)"),
        ("def grade(t, w):\n    return {'a': float('nan')}\n", "non-numeric values for: a"),
    ],
)
def test_python_grade_failures_score_zero_with_reason(run, source, reason):
    v = run(task_with({"kind": "python", "source": source}))
    assert v.status == "checker_failed"
    assert v.score == 0.0 and not v.passed
    assert reason in v.error


def test_python_grade_timeout(run):
    task = task_with({"kind": "python", "source": "def grade(t, w):\n    while True: pass\n", "timeout_seconds": 1})
    v = run(task)
    assert v.status == "checker_failed" and "timed out after 1s" in v.error


def test_out_of_range_values_are_clamped_with_a_note(run):
    v = run(task_with({"kind": "python", "source": "def grade(t, w):\n    return {'a': 2, 'b': True}\n"}))
    assert v.checks == {"a": 1.0, "b": 1.0}
    assert any("clamped" in n for n in v.notes)


def test_grader_files_stay_out_of_the_workspace(bwrap_backend):
    task = task_with({"kind": "python", "source": GOOD_GRADE})
    with bwrap_backend.start(task.workspace) as sb:
        verify_episode(task, sb, transcript())
        assert sorted(p.name for p in sb.host_workspace.iterdir()) == ["in.txt"]


SHELL_FILES = [
    {"path": "reward/check.py", "content": (
        "import json, os, sys\n"
        "ws = sys.argv[1]\n"
        "ok = os.path.exists(os.path.join(ws, 'out.txt'))\n"
        "payload = json.load(open(os.environ['OPENCLAW_REWARD_PAYLOAD']))\n"
        "print(json.dumps({'exists': ok, 'final_ok': payload['final_message'] == 'done'}))\n")},
    {"path": "reward/reward.sh", "mode": 493, "content": (
        "#!/usr/bin/env bash\nset -euo pipefail\n"
        "python3 /root/.openclaw/workspace/reward/check.py /root/.openclaw/workspace | "
        "python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(map(float, d.values()))/len(d))'\n")},
]


def shell_task(entry: str = "bash reward/reward.sh", files=None) -> Task:
    return task_with(
        {"kind": "shell", "entry": entry, "subscores_entry": 'python3 reward/check.py "$PWD"',
         "files": files if files is not None else SHELL_FILES},
        mount="/root/.openclaw/workspace",
    )


def test_shell_reward_runs_unmodified_at_its_mount_dir(run):
    v = run(shell_task(), "touch out.txt", final="done")
    assert v.status == "scored" and v.score == 1.0
    assert v.checks == {"exists": 1.0, "final_ok": 1.0}
    v = run(shell_task(), None, final="nope")
    assert v.score == 0.0 and v.checks == {"exists": 0.0, "final_ok": 0.0}


def test_checker_is_copied_in_only_after_the_agent(bwrap_backend):
    task = shell_task()
    with bwrap_backend.start(task.workspace) as sb:
        assert sb.exec("test -e reward").exit_code == 1  # the agent cannot see the checker
        verify_episode(task, sb, transcript(), "done")
        assert sb.exec("test -e reward/reward.sh").exit_code == 0


@pytest.mark.parametrize(
    "entry, reason",
    [
        ("echo high", "last line is not a plain decimal score: 'high'"),
        ("true", "printed nothing"),
        ("exit 2", "printed nothing (exit code 2)"),
        ("echo inf", "not a plain decimal score: 'inf'"),
    ],
)
def test_shell_checker_bad_output_scores_zero(run, entry, reason):
    v = run(shell_task(entry=entry))
    assert v.status == "checker_failed" and v.score == 0.0
    assert reason in v.error


def test_shell_checker_timeout(run):
    task = task_with({"kind": "shell", "entry": "sleep 30", "timeout_seconds": 1})
    v = run(task)
    assert v.status == "checker_failed" and "timed out" in v.error


def test_hybrid_without_judge_scores_code_only_and_says_so(run):
    task = task_with({"kind": "python", "source": GOOD_GRADE}, rubric={"rules": [{"name": "tone"}]})
    v = run(task, "echo 42 > out.txt")
    assert v.status == "scored" and v.score == 1.0 and v.rubric_score is None
    assert v.weights == (1.0, 0.0)
    assert any("rubric not judged" in n for n in v.notes)


def test_rubric_only_task_is_unscored_without_judge(bwrap_backend):
    task = Task.model_validate({"id": "r", "instruction": "x", "verifier": {"rubric": {"rules": [{"name": "a"}]}}})
    with bwrap_backend.start(task.workspace) as sb:
        v = verify_episode(task, sb, transcript())
    assert v.status == "unscored"


def test_local_backend_rewrites_hard_coded_mount_paths(tmp_path):
    from clawgym.sandbox.local import LocalBackend

    task = shell_task()
    with pytest.warns(UserWarning, match="NO isolation"):
        sb = LocalBackend().start(task.workspace)
    with sb:
        assert sb.exec("touch out.txt").exit_code == 0
        v = verify_episode(task, sb, transcript(), "done")
    assert v.status == "scored" and v.score == 1.0


def test_planted_symlink_cannot_redirect_the_checker(run, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    # the "agent" plants reward -> a directory outside the workspace (on the host side of the sandbox)
    v = run(shell_task(), f"ln -s {outside} reward && touch out.txt", final="done")
    assert v.status == "scored" and v.score == 1.0
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("plant", ["touch reward", "mkfifo reward", "mkdir -p reward/check.py", "ln -s /etc reward"])
def test_agent_cannot_block_the_checker(run, plant):
    v = run(shell_task(), f"{plant} && touch out.txt", final="done")
    assert v.status == "scored" and v.score == 1.0, v
