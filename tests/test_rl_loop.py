"""`clawgym train rl` end to end on real parts: the embedded server with the real SmolLM2 weights, the gateway and
the pool, real bwrap sandboxes and verifiers, LoRA updates, hot-loaded adapters. A toy task with a verifiable
reward (say "yes"): after two iterations the rewarded answer is more likely under the published policy."""

from __future__ import annotations

import json

import pytest
import torch

from clawgym.core.records import Task
from conftest import require

GRADE = '''
def grade(transcript, workspace_path):
    said = [e["message"] for e in transcript if e.get("type") == "message" and e["message"].get("role") == "assistant"]
    text = " ".join(p.get("text", "") for m in said for p in (m.get("content") or []) if isinstance(p, dict))
    return {"said_yes": 1.0 if "yes" in text.lower() else 0.0}
'''


def toy_task(i: int) -> Task:
    return Task.model_validate({
        "id": f"say-yes-{i}", "instruction": "Is water wet? Reply with one word: Yes or No.",
        "operations": ["toy"], "verifier": {"code": {"kind": "python", "source": GRADE}},
    })


@pytest.fixture(scope="module")
def model_ready():
    from clawgym.llm.models import resolve_model_dir

    try:
        resolve_model_dir("smollm2-135m")
    except Exception as exc:
        require(False, f"SmolLM2 weights not installed ({exc})")


def _logp(adapter, prompt_ids: list[int], response_ids: list[int]) -> float:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.rl_objective import build_batch, token_logps

    model = AutoModelForCausalLM.from_pretrained(str(resolve_model_dir("smollm2-135m")), dtype=torch.float32)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, str(adapter))
    b = build_batch([{"prompt_ids": prompt_ids, "response_ids": response_ids, "advantage": 0.0}])
    with torch.no_grad():
        lp, _ = token_logps(model.eval(), b)
    return float((lp * b.response_mask).sum())


def test_rl_loop_publishes_versions_and_makes_the_rewarded_answer_likelier(model_ready, bwrap_backend, tmp_path):
    from clawgym.pool import Pool
    from clawgym.train.rl_loop import RLOptions, run_rl

    out = tmp_path / "rl"
    tasks = [toy_task(i) for i in range(2)]
    opts = RLOptions(samples=4, tasks_per_iter=2, iterations=2, temperature=1.0, max_turns=1, max_tokens=8,
                     lr=1e-3, jobs=4, seed=0)
    rows = run_rl(tasks, out, opts, backend=bwrap_backend)
    assert [r["published"] for r in rows] == [1, 2]
    assert json.loads((out / "state.json").read_text())["version"] == 2
    assert (out / "adapters" / "v1" / "adapter_config.json").exists()
    assert (out / "adapters" / "v2" / "adapter_model.safetensors").exists()
    assert (out / "metrics.png").stat().st_size > 0
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["version"] for m in metrics] == [0, 1]
    for m in metrics:
        assert m["episodes"] == 8 and m["staleness_max"] == 0 and "kl" in m and "clip_fraction" in m
        assert m["per_operation"].keys() == {"toy"}

    with Pool(out / "pool") as pool:
        steps = pool.steps()
        versions = {s.policy_version for s in steps}
        rewarded = [t for t in pool.trajectories() if t["reward"] == 1.0 and t["id"].startswith("v0.")]
    assert versions == {"0", "1"}
    assert rewarded, "no episode of the first policy said yes: the toy task gives no learning signal"
    # the rewarded behaviour is likelier under the published policy: the probability that it gives one of the
    # answers that earned the reward under the first policy (the prompt is the one the engine saw) rises
    import math

    answers = {tuple(s.response_ids): s.prompt_ids for s in steps if s.trajectory_id in {t["id"] for t in rewarded}}
    before = sum(math.exp(_logp(None, p, list(r))) for r, p in answers.items())
    after = sum(math.exp(_logp(out / "adapters" / "v2", p, list(r))) for r, p in answers.items())
    assert after > before, (before, after)
    assert metrics[1]["mean_reward"] >= metrics[0]["mean_reward"], metrics

    # a rerun has nothing left to do, and changes nothing
    assert run_rl(tasks, out, opts, backend=bwrap_backend) == []
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2


@pytest.mark.slow
def test_kill_9_mid_iteration_then_rerun_gives_the_same_versions_and_no_duplicate_episode(model_ready, bwrap_backend,
                                                                                          tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from clawgym.pool import Pool

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(toy_task(i).model_dump_json() + "\n" for i in range(2)))
    out = tmp_path / "rl"
    cmd = [sys.executable, "-m", "clawgym", "train", "rl", str(tasks), "-k", "4", "--tasks-per-iter", "2",
           "--iterations", "2", "--max-turns", "1", "--max-tokens", "8", "--lr", "1e-3", "--sandbox", "bwrap",
           "-o", str(out)]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    progress = out / "rollouts" / "v1" / "trajectories.jsonl"
    deadline = time.monotonic() + 900
    try:
        while not (progress.exists() and progress.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, "iteration 1 never started"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert json.loads((out / "state.json").read_text())["version"] == 1  # v1 published, its rollout cut short

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((out / "state.json").read_text())["version"] == 2
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["version"] for m in metrics] == [0, 1] and [m["published"] for m in metrics] == [1, 2]
    assert (out / "adapters" / "v1").is_dir() and (out / "adapters" / "v2").is_dir()
    # every episode of iteration 1 is in its batch once, whichever start of the iteration ran it
    rows = [json.loads(x) for x in (out / "batches" / "v1.jsonl").read_text().splitlines()]
    by_episode: dict[str, set[str]] = {}
    for r in rows:
        episode = r["trajectory_id"].split(".", 2)[2]
        by_episode.setdefault(episode, set()).add(r["trajectory_id"])
    assert len(by_episode) == 8 and all(len(v) == 1 for v in by_episode.values()), by_episode
    with Pool(out / "pool") as pool:
        kept = [t for t in pool.trajectories(ended=True, trainable=True) if t["id"].startswith("v1.")]
    assert len(kept) == 8
