"""Progress rewards (clawgym.verify.progress, clawgym.rollout.snapshots): a scripted agent on a task with three
checks as data, in real bwrap sandboxes; the rewards are the potential differences of the code score over the
workspace states the steps left, graded after the episode in a fresh sandbox."""

from __future__ import annotations

import json

import pytest

from clawgym.agent.base import AgentOutcome, EpisodeContext
from clawgym.agent.tools import ToolExecutor
from clawgym.agent.transcript import TranscriptBuilder
from clawgym.checks import current_checklib
from clawgym.core.records import CheckCall, CodeCheck, Task, VerifierSpec, WorkspaceFile, WorkspaceSpec
from clawgym.pool.credit import progress_advantages, progress_step_rewards
from clawgym.pool.records import StepRecord
from clawgym.rollout import RolloutOptions, run_rollout
from clawgym.rollout.snapshots import attribute
from clawgym.sandbox.base import Sandbox
from clawgym.verify.progress import fallback_line, fell_back, progress_of
from clawgym.view.turns import episode_turns
from clawgym.workspace import extract_snapshot

THIRD = 1 / 3


def _task(task_id: str = "progress-three", extra_checks: list[CheckCall] | None = None) -> Task:
    checks = [
        CheckCall(name="a", fn="text_equals", args={"path": "a.txt", "expected": "alpha"}),
        CheckCall(name="b", fn="text_equals", args={"path": "b.txt", "expected": "beta"}),
        CheckCall(name="notes", fn="text_has", args={"path": "notes.txt", "needles": ["done"]}),
        *(extra_checks or []),
    ]
    return Task(
        id=task_id, source="test", instruction="Write a.txt and b.txt, and mark the notes done.",
        workspace=WorkspaceSpec(files=[WorkspaceFile(path="notes.txt", content="draft\n")]),
        verifier=VerifierSpec(code=CodeCheck(kind="checks", checks=checks, checklib=current_checklib()[0])),
        timeout_seconds=120,
    )


class ScriptedAgent:
    """Does its steps in order: each step is one assistant message (as one model call of the LLM agent) with
    the tool calls given, run through the same tools the agents use; one step record per step."""

    name = "scripted"

    def __init__(self, steps: list[list[tuple[str, dict]]]):
        self.script = steps

    def run(self, task: Task, sandbox: Sandbox, ctx: EpisodeContext) -> AgentOutcome:
        tb = TranscriptBuilder(cwd=sandbox.mount_dir)
        tb.user(task.instruction)
        tools = ToolExecutor(sandbox, exec_timeout=ctx.exec_timeout)
        steps: list[dict] = []
        n = 0
        for calls in self.script:
            ids = [(f"call_{n + i}", name, args) for i, (name, args) in enumerate(calls)]
            n += len(calls)
            tb.assistant("" if calls else "done", tool_calls=ids)
            for cid, name, args in ids:
                out = tools.call(name, args)
                tb.tool_result(cid, name, out.text, out.is_error)
            steps.append({"tool_calls": len(calls)})
        return AgentOutcome(transcript=tb.events, final_message="done", tool_calls=n, steps=steps)


def _run(tmp_path, backend, agent, tasks, **kw):
    return run_rollout(tasks, lambda: agent, backend, tmp_path / "run", RolloutOptions(progress=True, **kw))


SCRIPT = [
    [("write", {"path": "a.txt", "content": "alpha"})],  # a passes: 0 -> 1/3
    [("exec", {"command": "printf beta > b.txt"}), ("read", {"path": "b.txt"})],  # b passes: -> 2/3
    [("read", {"path": "notes.txt"}), ("exec", {"command": "cat notes.txt"})],  # nothing changes: 0
    [("write", {"path": "a.txt", "content": "wrong"})],  # undoes a: -> 1/3
    [("edit", {"path": "notes.txt", "oldText": "nothing here", "newText": "x"}),  # fails, writes nothing
     ("edit", {"path": "notes.txt", "oldText": "draft", "newText": "done"})],  # notes passes: -> 2/3
    [("edit", {"path": "/workspace/a.txt", "oldText": "wrong", "newText": "alpha"})],  # a again: -> 1
    [],  # the final answer
]


def test_progress_rewards_are_the_potential_differences(bwrap_backend, tmp_path):
    report = _run(tmp_path, bwrap_backend, ScriptedAgent(SCRIPT), [_task()])
    (t,) = report.ran
    assert t.status == "completed" and t.verdict.status == "scored"
    expected = [THIRD, THIRD, 0.0, -THIRD, THIRD, THIRD, 0.0]  # by hand, from the three checks
    rewards = [s["progress_reward"] for s in t.steps]
    assert rewards == pytest.approx(expected, abs=1e-9)
    assert progress_of(t.metadata) == rewards
    info = t.metadata["progress"]
    assert info["credit"] == "progress"
    assert info["potentials"] == pytest.approx([0, THIRD, 2 * THIRD, 2 * THIRD, THIRD, 2 * THIRD, 1, 1])
    # they sum to the outcome code score (the untouched workspace scores 0)
    assert sum(rewards) == pytest.approx(t.verdict.code_score) == pytest.approx(1.0)
    assert rewards[3] < 0  # the step that undid a passing check
    assert not report.progress_fallbacks
    # the run view's turns carry them, one per model answer
    turns = episode_turns(t.messages, t.transcript, t.steps)
    assert [turn.get("progress_reward") for turn in turns if turn["action"]] == rewards
    # the snapshots are gone with the episode
    assert not any((tmp_path / "run").rglob("clawgym-progress-*"))


def test_a_forged_state_cannot_change_the_rewards(bwrap_backend, tmp_path):
    """The agent fakes what it can reach: a grader's result line on its output, a snapshot-like folder holding
    the passing files in the workspace, files at guessed snapshot paths outside it, the control directory, and a
    process that writes the passing files everywhere it can once the grader's files appear (it would, were it
    alive during the grading)."""
    forge = (
        "printf '\\n__CLAWGYM_GRADE_RESULT__0 {\"scores\": {\"a\": 1, \"b\": 1, \"notes\": 1}}\\n'; "
        "mkdir -p s-000000000000000000000000 && printf beta > s-000000000000000000000000/b.txt; "
        "mkdir -p /tmp/clawgym-progress-x/1 && printf beta > /tmp/clawgym-progress-x/1/b.txt; "
        "printf beta > /.clawgym/verify/b.txt 2>/dev/null; "
        # waits for the grader's files, then keeps writing the passing files into the workspace and every folder in it
        "(while ! ls /.clawgym/*/verify/runner.py >/dev/null 2>&1; do sleep 0.01; done; i=0; while [ $i -lt 500 ]; do "
        "for d in . */; do printf beta > \"$d/b.txt\"; printf done > \"$d/notes.txt\"; done; i=$((i+1)); "
        "sleep 0.01; done) >/dev/null 2>&1 &"
    )
    script = [
        [("write", {"path": "a.txt", "content": "alpha"})],
        [("exec", {"command": forge})],
        [],
    ]
    report = _run(tmp_path, bwrap_backend, ScriptedAgent(script), [_task()])
    (t,) = report.ran
    assert [s["progress_reward"] for s in t.steps] == pytest.approx([THIRD, 0.0, 0.0])
    assert t.verdict.code_score == pytest.approx(THIRD)
    ws = extract_snapshot(tmp_path / "run" / t.workspace_snapshot, tmp_path / "ws")
    assert (ws / "notes.txt").read_text() == "draft\n" and not (ws / "b.txt").exists()


def test_tasks_without_checks_as_data_fall_back_to_outcome_credit(bwrap_backend, tmp_path):
    grade = "def grade(transcript, workspace):\n    import os\n    return {'a': float(os.path.exists(workspace + '/a.txt'))}\n"
    python_task = _task("progress-python").model_copy(
        update={"verifier": VerifierSpec(code=CodeCheck(kind="python", source=grade))})
    agent = ScriptedAgent([[("write", {"path": "a.txt", "content": "alpha"})], []])
    report = _run(tmp_path, bwrap_backend, agent, [_task(), python_task])
    by_task = {t.task_id: t for t in report.ran}
    assert report.progress_fallbacks == {"progress-python#0": "its code check is a python checker, not checks as data"}
    py = by_task["progress-python"]
    assert py.verdict.score == 1.0 and "progress_reward" not in py.steps[0]
    assert fell_back(py.metadata) and progress_of(py.metadata) is None
    assert [s["progress_reward"] for s in by_task["progress-three"].steps] == pytest.approx([THIRD, 0.0])
    assert fallback_line(report.all) == ("1 of 2 episodes fell back to outcome credit: progress-python#0 (its code "
                                         "check is a python checker, not checks as data)")
    log = (tmp_path / "run" / "logs" / "run.log").read_text()
    assert "progress-python#0 progress: outcome credit (its code check is a python checker" in log
    # the snapshot cap: a state past it ends the recording, and the trajectory falls back too
    report = run_rollout([_task("progress-big")], lambda: ScriptedAgent(
        [[("exec", {"command": "head -c 3000000 /dev/zero > big.bin"})], []]), bwrap_backend, tmp_path / "run2",
        RolloutOptions(progress=True, progress_max_bytes=1_000_000))
    assert "larger than the snapshot cap" in report.progress_fallbacks["progress-big#0"]


def test_program_checks_grade_each_state_alone(bwrap_backend, tmp_path):
    """A check that runs the workspace's program: each state is graded after a restart, on its own; a program
    of one state that writes where the other states would lie changes nothing."""
    check = CheckCall(name="runs", fn="command_ok", args={"argv": ["sh", "check.sh"]})
    # graded with its siblings, this state's program would spoil the a.txt of every state graded after it
    plant = ('for d in ../*/; do [ "$d" = "../$(basename "$PWD")/" ] || printf wrong > "$d/a.txt"; done 2>/dev/null; '
             "exit 1\n")
    script = [
        [("write", {"path": "check.sh", "content": plant})],
        [("write", {"path": "a.txt", "content": "alpha"})],
        [("write", {"path": "check.sh", "content": "exit 0\n"})],
        [],
    ]
    report = _run(tmp_path, bwrap_backend, ScriptedAgent(script), [_task("progress-prog", [check])])
    (t,) = report.ran
    # four checks: a, b, notes, runs; a from step 1; runs from step 2
    assert [s["progress_reward"] for s in t.steps] == pytest.approx([0.0, 0.25, 0.25, 0.0])
    assert sum(s["progress_reward"] for s in t.steps) == pytest.approx(t.verdict.code_score)


def test_changes_go_to_the_step_whose_call_made_them():
    calls = [(0, "write", "a.txt", False), (1, "write", "n.txt", True), (2, "write", "n.txt", False),
             (3, "exec", "make", True)]
    changes = [("write", "a.txt", 1), ("write", "n.txt", 2), ("exec", "make", 3), ("other", "copy_in", 4)]
    # the failed edit of n.txt is passed over; a change no call explains goes to the last step
    assert attribute(changes, calls, 5) == [0, 2, 3, 4]
    # an unexplained change before an explained one goes with it; steps never go back
    assert attribute([("other", "x", 1), ("write", "a.txt", 2), ("write", "zzz", 3)], calls, 4) == [0, 0, 3]


def test_progress_credit_uses_the_step_rewards_and_says_who_fell_back():
    assert progress_step_rewards(3, 1.0, [0.5, -0.25, 0.75]) == ([0.5, -0.25, 0.75], False)
    assert progress_step_rewards(3, 1.0, None) == ([0.0, 0.0, 1.0], True)
    assert progress_step_rewards(2, 1.0, [0.5, 0.5, 0.0]) == ([0.0, 1.0], True)  # not one per step
    adv, fallbacks = progress_advantages(
        {"g": {"t1": (2, 1.0, [1.0, 0.0]), "t2": (2, 1.0, None), "t3": (2, 0.0, [0.5, -0.5])}}, "dr-grpo")
    assert fallbacks == ["t2"]
    # returns G_t: t1 [1, 0], t2 [1, 1], t3 [0, -0.5]; dr-grpo subtracts the step's group mean
    assert adv["t1"] == pytest.approx([1 - 2 / 3, 0 - 1 / 6])
    assert adv["t2"] == pytest.approx([1 - 2 / 3, 1 - 1 / 6])
    assert adv["t3"] == pytest.approx([0 - 2 / 3, -0.5 - 1 / 6])
    # a pool step carries its reward in the trajectory's verdict
    step = StepRecord(trajectory_id="t1", group_id="g", step_index=1, model="m", request={}, response={},
                      verdict={"progress": {"credit": "progress", "rewards": [0.25, 0.75]}})
    assert step.progress_reward == 0.75
    assert StepRecord(trajectory_id="t1", group_id="g", step_index=0, model="m", request={}, response={},
                      verdict={"status": "scored"}).progress_reward is None


def test_the_pool_view_shows_each_steps_progress_reward(tmp_path):
    from clawgym.pool.store import Pool
    from clawgym.view.poolview import PoolView

    with Pool(tmp_path / "pool") as pool:
        for i in range(2):
            pool.append_step(StepRecord(
                trajectory_id="task#0", group_id="task", step_index=i, model="m",
                request={"messages": [{"role": "user", "content": "go"}]},
                response={"content": "ok", "tool_calls": [], "finish_reason": "stop"}))
        pool.end_trajectory("task#0", group_id="task", task_id="task", status="completed", reward=0.5,
                            verdict={"status": "scored", "progress": {"credit": "progress", "rewards": [0.75, -0.25]}})
    turns = PoolView(tmp_path / "pool").trajectory("task#0")["turns"]
    assert [t["step"]["progress_reward"] for t in turns] == [0.75, -0.25]


def test_the_rl_export_uses_progress_credit_and_lists_the_fallbacks(tmp_path):
    from clawgym.pool.export import export_rl
    from clawgym.pool.store import Pool

    with Pool(tmp_path / "pool") as pool:
        pool.expect_group("g", 2)
        for tid, verdict, reward in (
                ("g#0", {"status": "scored", "progress": {"credit": "progress", "rewards": [1.0, 0.0]}}, 1.0),
                ("g#1", {"status": "scored", "progress": {"credit": "outcome", "fallback": "a python checker"}}, 0.0)):
            for i in range(2):
                pool.append_step(StepRecord(trajectory_id=tid, group_id="g", step_index=i, model="m",
                                            request={"messages": []}, response={"content": "x"}, prompt_ids=[1, 2],
                                            response_ids=[3], token_source="upstream"))
            pool.end_trajectory(tid, group_id="g", task_id="g", status="completed", reward=reward, verdict=verdict)
        summary = export_rl(pool, tmp_path / "rl.jsonl", credit="progress", algo="dr-grpo")
    assert summary["progress_fallback"] == ["g#1"]
    rows = {r["step_id"]: r["advantage"] for r in map(json.loads, (tmp_path / "rl.jsonl").read_text().splitlines())}
    # returns: g#0 [1, 0] (progress), g#1 [0, 0] (outcome 0 on its last step); dr-grpo: minus the step's mean
    assert rows == {"g#0/0": 0.5, "g#0/1": 0.0, "g#1/0": -0.5, "g#1/1": 0.0}
