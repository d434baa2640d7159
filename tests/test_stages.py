"""Stages that hand their results on, as a user chains them: `clawgym rollout` -> `clawgym verify` (the rubric
judge) -> `clawgym filter` -> `clawgym train sft`; `clawgym pool curate` -> `clawgym filter`; `clawgym rollout
--judge-model`. Every command is a real `python -m clawgym` process; the sandboxes are real bwrap sandboxes, the
agent and judge models a real HTTP server on 127.0.0.1 replaying scripted answers (tests/scripted_llm.py), the
SFT a real trl + peft run on a tiny random model with SmolLM2's tokenizer and config."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clawgym.core.jsonl import read_records
from clawgym.core.records import Task, Trajectory
from clawgym.train.filter import FilterOptions, filter_trajectories, read_sft_records
from clawgym.verify.rescore import read_verdicts
from conftest import REPO, require
from scripted_llm import ScriptedLLM, turns_from_reference

NOTE_GRADE = """
from pathlib import Path
def grade(transcript, workspace_path):
    p = Path(workspace_path) / "note.txt"
    text = p.read_text().lower() if p.exists() else ""
    return {"exists": float(p.exists()), "thanks": float("thank" in text)}
"""

# the judge's band for each task's note: ana's is warm, bo's is judged curt; both pass every code check
JUDGED = {"thank-ana": 1.0, "thank-bo": 0.0, "thank-cy": 1.0}


def note_task(tid: str) -> Task:
    """A hybrid task: write a thank-you note; code checks it exists and thanks, one rubric rule judges its tone."""
    return Task.model_validate({
        "id": tid, "instruction": f"Write a short thank-you note in note.txt. (task {tid})",
        "workspace": {"files": [{"path": "README.md", "content": "my notes\n"}]},
        "verifier": {"code": {"kind": "python", "source": NOTE_GRADE}, "rubric": {"rules": [{
            "name": "warm", "description": "The note thanks warmly.", "file_path": "note.txt",
            "scores": {"1.0": "Warm thanks", "0.0": "Curt"}}]}},
        "reference": {"steps": [{"name": "write", "arguments": {"path": "note.txt",
                                                                "content": f"Thank you so much! ({tid})\n"}}],
                      "final_message": "I wrote the note to note.txt."},
    })


def judge_answer(body: dict) -> str | None:
    """The scripted judge: a judge request names its task in the prompt; anything else is not a judge call."""
    prompt = body["messages"][1]["content"] if len(body.get("messages", [])) > 1 else ""
    if "## The criterion to judge" not in prompt:
        return None
    tid = next(t for t in JUDGED if f"(task {t})" in prompt)
    return json.dumps({"score": JUDGED[tid], "reason": "scripted"})


def is_judge_call(body: dict) -> bool:
    return judge_answer(body) is not None


def clawgym(*args, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env={**os.environ, "COLUMNS": "200", "OPENAI_BASE_URL": ""})


def write_tasks(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(note_task(t).model_dump_json() + "\n" for t in ids))
    return path


def one_line_error(stderr: str, *needles: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    for n in needles:
        assert n in lines[0], (n, stderr)


# --------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """The smallest SFT model of tests/test_train.py: a random 2-layer Llama with SmolLM2's config, narrowed,
    and SmolLM2's real tokenizer and chat template."""
    from clawgym.llm.models import ModelError, resolve_model_dir

    try:
        smol = resolve_model_dir("smollm2-135m")
    except ModelError as exc:
        require(False, f"the embedded model is not available: {exc}")
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from clawgym.train.sft import load_base_config

    cfg = load_base_config(smol)
    cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size = 2, 64, 128
    cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim = 4, 2, 16
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny") / "tiny-smollm2"
    LlamaForCausalLM(cfg).save_pretrained(str(path))
    AutoTokenizer.from_pretrained(str(smol)).save_pretrained(str(path))
    return path


@pytest.fixture(scope="module")
def judged_run(bwrap_backend, tmp_path_factory) -> Path:
    """An oracle rollout of two hybrid tasks (no judge: both score 1.0 on their code checks), then `clawgym
    verify` with the scripted judge: ana's note 0.7 + 0.3 x 1.0, bo's 0.7 + 0.3 x 0.0."""
    root = tmp_path_factory.mktemp("stages")
    tasks = write_tasks(root / "tasks.jsonl", ["thank-ana", "thank-bo"])
    run = root / "run"
    r = clawgym("rollout", tasks, "--agent", "oracle", "--sandbox", "bwrap", "-j", "2", "-o", run)
    assert r.returncode == 0, r.stderr
    rolled = {t.task_id: t for t in read_records(run / "trajectories.jsonl", Trajectory)}
    assert {k: (t.verdict.score, t.verdict.rubric_score) for k, t in rolled.items()} == \
        {"thank-ana": (1.0, None), "thank-bo": (1.0, None)}
    with ScriptedLLM(responder=judge_answer) as llm:
        r = clawgym("verify", run, "--judge-model", llm.model, "--base-url", llm.base_url, "--sandbox", "bwrap")
        assert r.returncode == 0, r.stderr
        assert sum(map(is_judge_call, llm.requests)) == 2
    scored = {v.task_id: v.verdict for v in read_verdicts(run)}
    assert scored["thank-ana"].score == pytest.approx(1.0) and scored["thank-ana"].rubric_score == 1.0
    assert scored["thank-bo"].score == pytest.approx(0.7) and scored["thank-bo"].rubric_score == 0.0
    return run


def copy_run(run: Path, dest: Path) -> Path:
    shutil.copytree(run, dest, symlinks=True)
    return dest


# --------------------------------------------------------------------------------------------- the chain


def test_rollout_verify_filter_train_the_judge_decides_what_is_trained(judged_run, tiny_model, tmp_path):
    # before the judge's verdicts count: both trajectories pass --min-score 0.9 on the rollout's code-only scores
    records, rep = filter_trajectories([judged_run], FilterOptions(min_score=0.9, scores="rollout"))
    assert sorted(r["task_id"] for r in records) == ["thank-ana", "thank-bo"]
    # `clawgym filter` reads RUN_DIR/verdicts.jsonl: bo's judged 0.7 is below 0.9
    sft = tmp_path / "sft.jsonl"
    r = clawgym("filter", judged_run, "--min-score", "0.9", "-o", sft)
    assert r.returncode == 0, r.stderr
    assert f"scores: the re-scored verdicts of {judged_run / 'verdicts.jsonl'}; 1 of the 1 kept include a judged " \
        "rubric" in r.stdout, r.stdout
    assert "warning" not in r.stderr, r.stderr
    [rec] = read_sft_records(sft)
    assert (rec["task_id"], rec["score"], rec["score_source"], rec["judged"]) == ("thank-ana", 1.0, "verdicts", True)
    report = json.loads(Path(f"{sft}.report.json").read_text())
    assert report["dropped"] == {"below_min_score": 1}
    assert report["scores"] == {"sources": {"verdicts": 2}, "fallback": {}, "verdict_files":
                                [str(judged_run / "verdicts.jsonl")], "verdicts_unmatched": 0, "kept_judged": 1}
    assert report["options"]["scores"] == "auto"
    # and training sees exactly what the judge let through
    out = tmp_path / "sft-run"
    r = clawgym("train", "sft", sft, "--model", tiny_model, "-o", out, "--max-steps", "1", "--max-len", "2048",
                "--batch-tokens", "4096", "--lora-r", "8", "--save-steps", "0", "--warmup-ratio", "0",
                "--verify", "full", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    meta = json.loads((out / "train.json").read_text())
    assert meta["status"] == "done" and meta["data"]["records"] == 1 and meta["data"]["examples"] == 1
    assert (out / "final" / "adapter_config.json").exists()


def test_stale_partial_and_foreign_verdicts_fall_back_per_trajectory_or_fail_on_demand(judged_run, tmp_path):
    run = copy_run(judged_run, tmp_path / "run")
    trajs = run / "trajectories.jsonl"
    # bo's episode ran again after `clawgym verify` (a resumed rollout retried it): its verdict is stale
    bo = next(t for t in read_records(trajs, Trajectory) if t.task_id == "thank-bo")
    rerun = bo.model_copy(update={"started_at": "2099-01-01T00:00:00.000Z"})
    with open(trajs, "a") as fh:
        fh.write(rerun.model_dump_json() + "\n")
    # a verdict for an episode this run does not hold, and a garbled line
    verdicts = run / "verdicts.jsonl"
    lines = verdicts.read_text().splitlines()
    foreign = json.loads(lines[0]) | {"id": "someone-else#0", "task_id": "someone-else"}
    verdicts.write_text("\n".join([*lines, json.dumps(foreign), "{garbled"]) + "\n")

    sft = tmp_path / "sft.jsonl"
    r = clawgym("filter", run, "--min-score", "0.9", "-o", sft, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    # per trajectory: ana from verdicts.jsonl, bo (stale) from the rollout's code-only 1.0, so kept
    assert sorted((x["task_id"], x["score_source"]) for x in read_sft_records(sft)) == \
        [("thank-ana", "verdicts"), ("thank-bo", "rollout")]
    assert rep["scores"]["sources"] == {"rollout": 1, "verdicts": 1}
    assert rep["scores"]["fallback"] == {"stale_verdict": 1} and rep["scores"]["verdicts_unmatched"] == 1
    assert "1 trajectories scored by the rollout's verdicts instead of verdicts.jsonl (1 whose verdict is stale" \
        in r.stderr, r.stderr
    assert "1 verdicts in" in r.stderr and "for episodes the run does not hold" in r.stderr
    assert f"skipped bad line: {verdicts}:4: not valid JSON" in r.stderr, r.stderr

    # --scores verdicts: every score from verdicts.jsonl, or a one-line error naming the file and the episode
    r = clawgym("filter", run, "--min-score", "0.9", "-o", tmp_path / "strict.jsonl", "--scores", "verdicts")
    assert r.returncode == 1
    one_line_error(r.stderr, f"{verdicts}: 1 trajectories have no current re-scored verdict",
                   "first: thank-bo#0: a stale verdict")
    assert not (tmp_path / "strict.jsonl").exists()
    # a partial re-scoring (`verify --task thank-ana`): bo has no verdict at all, and falls back as such
    [ana_line] = [ln for ln in lines if json.loads(ln)["task_id"] == "thank-ana"]
    verdicts.write_text(ana_line + "\n")
    _, rep2 = filter_trajectories([run], FilterOptions(min_score=0.0))
    assert dict(rep2.score_fallback) == {"no_verdict": 1} and dict(rep2.score_sources) == {"rollout": 1, "verdicts": 1}
    # verdicts written before `trajectory_started_at` existed: matched on the rollout verdict they recorded
    old = json.loads(ana_line)
    del old["trajectory_started_at"]
    verdicts.write_text(json.dumps(old) + "\n")
    _, rep3 = filter_trajectories([run], FilterOptions(min_score=0.0))
    assert dict(rep3.score_sources) == {"rollout": 1, "verdicts": 1}
    old["previous"]["duration_s"] += 1.0  # ... and told apart from an earlier attempt by that verdict
    verdicts.write_text(json.dumps(old) + "\n")
    _, rep3 = filter_trajectories([run], FilterOptions(min_score=0.0))
    assert dict(rep3.score_fallback) == {"no_verdict": 1, "stale_verdict": 1}
    # --scores rollout never reads the file; an unknown source is refused
    _, rep4 = filter_trajectories([run], FilterOptions(min_score=0.0, scores="rollout"))
    assert dict(rep4.score_sources) == {"rollout": 2} and rep4.verdict_files == []
    r = clawgym("filter", run, "-o", tmp_path / "x.jsonl", "--scores", "judge")
    assert r.returncode == 2
    one_line_error(r.stderr, "--scores: unknown value 'judge'")
    # no verdicts.jsonl at all with --scores verdicts
    verdicts.unlink()
    r = clawgym("filter", run, "-o", tmp_path / "x.jsonl", "--scores", "verdicts")
    assert r.returncode == 1
    one_line_error(r.stderr, f"no {verdicts} (--scores verdicts)")


# --------------------------------------------------------------------------------------------- curation


def test_pool_curation_keeps_curated_out_trajectories_out_of_the_sft_data(bwrap_backend, tmp_path):
    from clawgym.pool import Pool

    ids = ["thank-ana", "thank-bo", "thank-cy"]
    tasks = write_tasks(tmp_path / "tasks.jsonl", ids)
    run = tmp_path / "run"
    scripts = {note_task(t).instruction: turns_from_reference(note_task(t)) for t in ids}
    with ScriptedLLM(scripts) as llm:
        r = clawgym("rollout", tasks, "--agent", "llm", "--model", llm.model, "--base-url", llm.base_url,
                    "--sandbox", "bwrap", "-j", "3", "-o", run)
        assert r.returncode == 0, r.stderr
    assert all(t.verdict.score == 1.0 for t in read_records(run / "trajectories.jsonl", Trajectory))
    with Pool(run / "pool", create=False, readonly=True) as pool:
        first_step_of_cy = pool.steps(trajectory_id="thank-cy#0")[0].step_id
    # ana's trajectory is marked bad; one step of cy's is marked not trainable; bo's is left alone
    r = clawgym("pool", "curate", run / "pool", "--trajectory", "thank-ana#0", "--quality", "bad")
    assert r.returncode == 0, r.stderr
    r = clawgym("pool", "curate", run / "pool", "--step", first_step_of_cy, "--not-trainable")
    assert r.returncode == 0, r.stderr

    sft = tmp_path / "sft.jsonl"
    r = clawgym("filter", run, "--min-score", "1", "-o", sft)
    assert r.returncode == 0, r.stderr
    assert [x["trajectory_id"] for x in read_sft_records(sft)] == ["thank-bo#0"]
    assert f"curation: {run / 'pool'}: curated out 1 step not trainable, 1 trajectory quality=bad; 0 not in the " \
        "pool" in r.stdout, r.stdout
    report = json.loads(Path(f"{sft}.report.json").read_text())
    assert report["dropped"] == {"curated_out": 2}
    assert report["curation"]["curated_out"] == {"step not trainable": 1, "trajectory quality=bad": 1}
    # the same run without the pool's word: everything passes the verifier
    r = clawgym("filter", run, "--min-score", "1", "-o", sft, "--no-curation", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kept"] == 3
    # --drop-quality none keeps ana's ("bad" is then only a label); the step flagged not trainable still counts
    _, rep = filter_trajectories([run], FilterOptions(min_score=1.0, drop_quality=()))
    assert rep.kept == 2 and dict(rep.curated) == {"step not trainable": 1}
    # a trajectory curated back in comes back
    with Pool(run / "pool", create=False) as pool:
        pool.curate(step_id=first_step_of_cy, trainable=True)
    _, rep = filter_trajectories([run], FilterOptions(min_score=1.0))
    assert rep.kept == 2 and dict(rep.curated) == {"trajectory quality=bad": 1}


# --------------------------------------------------------------------------------------------- rollout --judge-model


def test_rollout_judges_each_episode_as_it_ends(bwrap_backend, tmp_path):
    from clawgym.pool import Pool

    ids = ["thank-ana", "thank-bo"]
    tasks = write_tasks(tmp_path / "tasks.jsonl", ids)
    run = tmp_path / "run"
    scripts = {note_task(t).instruction: turns_from_reference(note_task(t)) for t in ids}
    with ScriptedLLM(scripts, responder=judge_answer) as llm:
        # the judge is the agent's own model: reached where the agent reaches it (no --judge-base-url)
        r = clawgym("rollout", tasks, "--agent", "llm", "--model", llm.model, "--base-url", llm.base_url,
                    "--judge-model", llm.model, "--sandbox", "bwrap", "-j", "2", "-o", run)
        assert r.returncode == 0, r.stderr
        assert f"judge {llm.model} x1: 2 calls, 0 from the cache" in r.stderr, r.stderr
        assert sum(map(is_judge_call, llm.requests)) == 2
        by_task = {t.task_id: t for t in read_records(run / "trajectories.jsonl", Trajectory)}
        # the hybrid verdict `clawgym verify` would give, in the episode's own record
        ana, bo = by_task["thank-ana"], by_task["thank-bo"]
        assert (ana.verdict.status, ana.verdict.code_score, ana.verdict.rubric_score) == ("scored", 1.0, 1.0)
        assert ana.verdict.score == pytest.approx(1.0) and ana.verdict.passed
        assert bo.verdict.score == pytest.approx(0.7) and bo.verdict.checks["rubric:warm"] == 0.0
        assert not any("rubric not judged" in n for n in bo.verdict.notes)
        assert bo.metadata["judge"]["models"] == [llm.model] and bo.metadata["judge"]["status"] == "scored"
        info = json.loads((run / "run.json").read_text())
        assert info["judge"]["models"] == [llm.model] and info["judge"]["cache"] == str(run / "judge_cache")
        # judge calls are not the agent's steps: the pool holds the agent's 2 calls per episode only
        with Pool(run / "pool", create=False, readonly=True) as pool:
            assert pool.stats()["steps"] == 4
            assert [t["reward"] for t in pool.trajectories()] == [pytest.approx(1.0), pytest.approx(0.7)]
        # `clawgym verify` afterwards agrees, from the judge cache: not one more judge call
        r = clawgym("verify", run, "--judge-model", llm.model, "--judge-base-url", llm.base_url, "--sandbox",
                    "bwrap", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["summary"]["judge"]["requests"] == 0
        assert sum(map(is_judge_call, llm.requests)) == 2
    assert {v.task_id: round(v.verdict.score, 6) for v in read_verdicts(run)} == {"thank-ana": 1.0, "thank-bo": 0.7}
    # filter keeps what the judge passed, straight from the rollout's records
    (run / "verdicts.jsonl").unlink()
    records, rep = filter_trajectories([run], FilterOptions(min_score=0.9))
    assert [r["task_id"] for r in records] == ["thank-ana"] and rep.judged == 1
    assert dict(rep.score_sources) == {"rollout": 2}


def test_rollout_judge_options_are_checked_before_anything_runs(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", ["thank-ana"])
    r = clawgym("rollout", tasks, "--agent", "oracle", "--judge-model", "gpt-4.1", "-o", tmp_path / "a")
    assert r.returncode == 2
    one_line_error(r.stderr, "judge model 'gpt-4.1' is not a local model; give --judge-base-url")
    r = clawgym("rollout", tasks, "--agent", "oracle", "--judge-model", "smollm2-135m", "--executor", "ray",
                "-o", tmp_path / "b")
    assert r.returncode == 2
    one_line_error(r.stderr, "--judge-model judges episodes where they run: it needs --executor local")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_resumed_rollout_names_the_episodes_it_did_without_a_judge(judged_run, tmp_path):
    run = copy_run(judged_run, tmp_path / "run")
    tasks = json.loads((run / "run.json").read_text())["tasks"]
    with ScriptedLLM(responder=judge_answer) as llm:
        r = clawgym("rollout", tasks, "--agent", "oracle", "--sandbox", "bwrap", "-o", run, "--judge-model",
                    llm.model, "--judge-base-url", llm.base_url)
        assert r.returncode == 0, r.stderr
        assert llm.requests == []  # nothing left to run: nothing judged now
    assert "resuming: 2 episodes already done" in r.stderr
    assert "warning: 2 episodes of tasks with a rubric were done before this run without a judge (first: " \
        f"thank-ana#0); `clawgym verify {run} --judge-model {llm.model}` judges them" in r.stderr, r.stderr
