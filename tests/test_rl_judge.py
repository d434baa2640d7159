"""Judge rewards in RL (issue #36): `train rl --judge-model` judges each episode of a task with a rubric as it
ends and trains on the hybrid score (0.7 code + 0.3 rubric); with progress credit the code part's step rewards
are weighted and the rubric's share goes to the last step, so they still sum to the episode's score.

The policy is the real SmolLM2 served by the embedded server; the judge is a real OpenAI-compatible HTTP server on
127.0.0.1 whose answers follow a fixed rule (tests/scripted_llm.py), so the expected reward is known."""

from __future__ import annotations

import json

import pytest

from clawgym.core.records import Task
from clawgym.llm import LLMClient
from clawgym.verify import Judge
from clawgym.verify.progress import progress_of
from conftest import require
from scripted_llm import ScriptedLLM

GRADE = """
def grade(transcript, workspace_path):
    text = " ".join(str(e.get("content") or e.get("text") or "") for e in transcript
                    if e.get("role") == "assistant" or e.get("type") == "message")
    return {"yes": float("yes" in text.lower())}
"""


def hybrid_task(i: int) -> Task:
    return Task.model_validate({
        "id": f"yes-politely-{i}", "instruction": "Is water wet? Reply with one word: Yes or No.",
        "operations": ["toy"],
        "verifier": {"code": {"kind": "python", "source": GRADE},
                     "rubric": {"rules": [{"name": "one_word", "description": "The reply is a single word.",
                                           "scores": {"1.0": "One word", "0.0": "More than one word"}}]}},
    })


@pytest.fixture(scope="module")
def model_ready():
    from clawgym.llm.models import resolve_model_dir

    try:
        resolve_model_dir("smollm2-135m")
    except Exception as exc:  # noqa: BLE001 (any failure to find the weights is the same skip)
        require(False, f"SmolLM2 weights not installed ({exc})")


def test_progress_rewards_of_a_judged_episode_sum_to_its_hybrid_score():
    verdict = {"score": 0.7 * 0.75 + 0.3 * 0.5, "code_score": 0.75, "rubric_score": 0.5, "weights": [0.7, 0.3],
               "progress": {"credit": "progress", "rewards": [0.5, -0.25, 0.5]}}
    rewards = progress_of(verdict)
    assert rewards == pytest.approx([0.35, -0.175, 0.35 + 0.15])
    assert sum(rewards) == pytest.approx(verdict["score"])
    # unjudged (code only) and the trajectory's own metadata: the code rewards as they are
    assert progress_of({**verdict, "rubric_score": None, "weights": [1.0, 0.0]}) == [0.5, -0.25, 0.5]
    assert progress_of({"progress": verdict["progress"]}) == [0.5, -0.25, 0.5]


def test_rl_rewards_judged_episodes_with_the_hybrid_score(model_ready, bwrap_backend, tmp_path):
    from clawgym.train.rl_loop import RLOptions, run_rl

    def judge_answer(body: dict) -> str:  # the transcript decides: a one-word reply gets 1, anything else 0
        user = body["messages"][1]["content"]
        return '{"score": 1, "reason": "one word"}' if "one word" in user else '{"score": 0, "reason": "long"}'

    with ScriptedLLM(responder=judge_answer) as llm:
        judge = Judge([LLMClient(llm.model, llm.base_url, backoff_base=0.01, max_retries=1)],
                      cache_dir=tmp_path / "judge_cache")
        opts = RLOptions(samples=2, tasks_per_iter=2, iterations=1, temperature=1.0, max_turns=1, max_tokens=8,
                         lr=1e-4, jobs=2, seed=0, judge=judge)
        rows = run_rl([hybrid_task(i) for i in range(2)], tmp_path / "rl", opts, backend=bwrap_backend)
        assert llm.requests  # judged over HTTP (episodes with the same reply share a cached judgment)
    assert [r["published"] for r in rows] == [1]
    trajs = [json.loads(x) for x in (tmp_path / "rl" / "rollouts" / "v0" / "trajectories.jsonl").read_text()
             .splitlines()]
    assert len(trajs) == 4
    for t in trajs:
        v = t["verdict"]
        assert t["metadata"]["judge"]["models"] == [llm.model]
        assert v["weights"] == [0.7, 0.3] and v["rubric_score"] in (0.0, 1.0)
        assert v["score"] == pytest.approx(0.7 * v["code_score"] + 0.3 * v["rubric_score"])
    # the batch trained on those scores: each row's reward is its episode's hybrid score
    by_id = {f"v0.r1.{t['id']}": t["verdict"]["score"] for t in trajs}
    batch = [json.loads(x) for x in (tmp_path / "rl" / "batches" / "v0.jsonl").read_text().splitlines()]
    assert batch and all(r["reward"] == pytest.approx(by_id[r["trajectory_id"]]) for r in batch)


def test_a_judge_with_no_endpoint_is_refused_before_anything_loads(tmp_path):
    import os
    import subprocess
    import sys

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(hybrid_task(0).model_dump_json() + "\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    r = subprocess.run([sys.executable, "-m", "clawgym", "train", "rl", str(tasks), "--judge-model", "gpt-judge",
                        "-o", str(tmp_path / "rl")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "judge model 'gpt-judge' is not a local model; give --judge-base-url" in r.stderr
    assert not (tmp_path / "rl").exists()
