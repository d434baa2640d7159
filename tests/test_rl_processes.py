"""The RL update in several processes (issue #36): `clawgym train rl-update` under torchrun (gloo, 2 CPU
processes) against one process on the same global batch, on the real SmolLM2; and how the micro-batches of a
mini-batch are dealt to the processes."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from clawgym.train.rl_update import assign_micro_batches, tree_micro_batches

REPO = Path(__file__).resolve().parents[1]


def _batch(tok) -> list[dict]:
    """Rows as `train rl` keeps them (`batches/v<N>.jsonl`): two GRPO groups of three samples. The first group's
    rows carry the engine's logprobs (a behaviour policy other than the trainer's, so the clip acts from the first
    step); the second's do not (its old policy is the policy before the first step), and one of its samples is a
    two-call episode whose second prompt continues the first (packed into one row of two steps)."""
    def enc(s: str) -> list[int]:
        return tok.encode(s, add_special_tokens=False)

    p1, p2 = enc("Question: is the sky blue? Answer:"), enc("Question: what is 2 + 2? Answer:")
    rows = []
    for i, (text, adv) in enumerate([(" Yes, it is blue.", 1.1), (" No.", -0.6), (" It is green.", -0.5)]):
        ids = enc(text)
        rows.append({"prompt_ids": p1, "response_ids": ids, "advantage": adv, "group_id": "v0.sky",
                     "trajectory_id": f"v0.r1.sky#{i}", "step_index": 0, "policy_version": 0,
                     "logprobs": [-0.5 - 0.3 * (j % 4) for j in range(len(ids))]})
    first, tool, second = enc(" Let me compute."), enc(" Result: 4."), enc(" 4.")
    rows += [
        {"prompt_ids": p2, "response_ids": enc(" 4."), "advantage": 0.9, "group_id": "v0.add",
         "trajectory_id": "v0.r1.add#0", "step_index": 0, "policy_version": 0},
        {"prompt_ids": p2, "response_ids": enc(" 5, I think."), "advantage": -1.0, "group_id": "v0.add",
         "trajectory_id": "v0.r1.add#1", "step_index": 0, "policy_version": 0},
        {"prompt_ids": p2, "response_ids": first, "advantage": 0.1, "group_id": "v0.add",
         "trajectory_id": "v0.r1.add#2", "step_index": 0, "policy_version": 0},
        {"prompt_ids": p2 + first + tool, "response_ids": second, "advantage": 0.1, "group_id": "v0.add",
         "trajectory_id": "v0.r1.add#2", "step_index": 1, "policy_version": 0},
    ]
    return rows


def test_micro_batches_are_dealt_to_processes_whole_and_once(tokenizer):
    rows = _batch(tokenizer)
    groups = tree_micro_batches(rows, 20)  # small micro-batches: several per mini-batch
    assert len(groups) >= 3
    dealt = assign_micro_batches(groups, 2)
    assert dealt == assign_micro_batches(groups, 2)  # deterministic: every process computes the same deal
    assert all(dealt)  # both processes have work
    ran = [id(r) for mine in dealt for g in mine for r in g]
    assert sorted(ran) == sorted(id(r) for r in rows)  # every row once
    # fewer micro-batches than processes: the largest is halved until each process has one
    one = [rows[:3]]
    dealt = assign_micro_batches(one, 2)
    assert sorted(len(g) for mine in dealt for g in mine) == [1, 2] and [len(m) for m in dealt] == [1, 1]
    # more processes than rows: the extra ones get nothing (they still join the gradient sum)
    dealt = assign_micro_batches([rows[:2]], 3)
    assert [len(m) for m in dealt].count(0) == 1


def _run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)


def test_two_processes_take_the_single_process_steps_on_the_same_global_batch(smol_dir, tokenizer, tmp_path):
    """2 gloo processes x their share of each mini-batch = 1 process on the whole batch: two mini-batches (one
    optimizer step each, the clip acting), fp32. Every step's loss within 1e-4 relative, the same clip
    fraction, token counts and gradient norm, and the trained adapters equal (to Adam's amplified float noise,
    see below); each process ran only part of the batch.

    Before the summed-gradient update each process would have run the whole batch on its own (no command to run
    it, no `processes` or per-process counts in the statistics), or, given half the rows, normalized its loss
    by its half and stepped on its half's gradient: other losses per step, and ranks drifting apart."""
    batch = tmp_path / "v0.jsonl"
    batch.write_text("".join(json.dumps(r) + "\n" for r in _batch(tokenizer)))
    common = ["train", "rl-update", str(batch), "--model", str(smol_dir), "--mini-batches", "2", "--lr", "5e-3",
              "--lora-r", "8", "--threads", "1", "--device", "cpu", "--seed", "3"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO / "src")}
    one = _run([sys.executable, "-m", "clawgym", *common, "-o", str(tmp_path / "one")], env)
    assert one.returncode == 0, one.stderr[-3000:]
    with socket.socket() as sock:  # a free port for the rendezvous (torchrun's default may be taken)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    two = _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
                "-m", "clawgym", *common, "-o", str(tmp_path / "two")], env)
    assert two.returncode == 0, (two.stdout[-2000:], two.stderr[-3000:])
    m1, m2 = (json.loads((tmp_path / k / "metrics.json").read_text()) for k in ("one", "two"))
    assert m1.get("processes", 1) == 1 and m2["processes"] == 2 and m2["stats"]["processes"] == 2
    assert len(m1["steps"]) == len(m2["steps"]) == 2
    for a, b in zip(m1["steps"], m2["steps"], strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4), (m1["steps"], m2["steps"])
        assert a["clip_fraction"] == pytest.approx(b["clip_fraction"], abs=1e-6)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
        for k in ("ratio_mean", "ratio_max", "kl_old", "entropy"):
            assert a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-6), k
    assert any(s["clip_fraction"] > 0 for s in m1["steps"])  # the clip acted
    s1, s2 = m1["stats"], m2["stats"]
    for k in ("tokens", "sequence_tokens", "rows", "packed_rows", "rows_run", "optimizer_steps"):
        assert s1[k] == s2[k], k
    assert s2["engine_logprob_gap_mean"] == pytest.approx(s1["engine_logprob_gap_mean"], rel=1e-4)
    # the work was shared: no process ran the whole batch's forward tokens
    assert 0 < s2["computed_tokens_process_max"] < s2["computed_tokens"]
    from safetensors.torch import load_file

    w1, w2 = (load_file(str(tmp_path / k / "adapter" / "adapter_model.safetensors")) for k in ("one", "two"))
    assert w1.keys() == w2.keys() and w1
    # Adam's first steps divide each gradient element by its own size, so an element whose gradient is ~0 steps
    # by up to +-lr with a sign that float summation order decides: a few hundred of the 2.4 M adapter weights
    # differ that way between any two exact runs (one process with --no-share-prefixes against one with it
    # differs the same way); the rest agree to float precision
    diff = torch.cat([(w1[k] - w2[k]).flatten() for k in w1]).abs()
    assert float((diff > 1e-5).float().mean()) < 1e-3, int((diff > 1e-5).sum())
    b1 = torch.cat([w1[k].flatten() for k in w1 if "lora_B" in k])  # B starts at 0: all of it is the update
    b_diff = torch.cat([(w1[k] - w2[k]).flatten() for k in w1 if "lora_B" in k])
    assert float(b_diff.norm()) < 2e-3 * float(b1.norm()), float(b_diff.norm() / b1.norm())
    assert two.stdout.count("step(s) on") == 1  # one summary line, rank 0's


GUARD_SCRIPT = '''
import json, sys
import torch
import torch.distributed as dist
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
from clawgym.train.rl_update import broadcast_trainable, rl_update

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)  # a fresh adapter drawn differently in each process
model = get_peft_model(AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32),
                       LoraConfig(r=4, target_modules=["q_proj", "v_proj"], lora_dropout=0.0, init_lora_weights=False))
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
rows = [{"prompt_ids": [1, 2, 3], "response_ids": [4, 5], "advantage": 1.0},
        {"prompt_ids": [1, 2, 3], "response_ids": [6], "advantage": -1.0}]
seen = {}
for case, batch in (("rows", [dict(rows[0], advantage=1.0 + rank), rows[1]]), ("weights", rows)):
    try:
        rl_update(model, opt, batch)
        seen[case] = "ran"
    except ValueError as exc:
        seen[case] = str(exc)
broadcast_trainable(model)
res = rl_update(model, opt, rows, mini_batches=2)
flat = torch.cat([p.detach().flatten() for p in model.parameters() if p.requires_grad])
seen["after"] = [float(flat.double().sum()), res.stats["optimizer_steps"], res.stats["processes"]]
print("RESULT" + str(rank) + " " + json.dumps(seen), flush=True)
dist.destroy_process_group()
'''


def test_processes_holding_other_rows_or_weights_are_refused_and_a_broadcast_aligns_them(tiny_model, tmp_path):
    """Each process given other rows, or started from other weights, would step differently and drift apart
    silently: the update refuses both, in every process; after broadcast_trainable the processes end equal."""
    script = tmp_path / "guard.py"
    script.write_text(GUARD_SCRIPT)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO / "src")}
    proc = _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
                 str(script), str(tiny_model)], env)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    # the two processes print at once: their lines may run into each other, so each result is read where it starts
    decode = json.JSONDecoder().raw_decode
    seen = [decode(proc.stdout, m.end())[0] for m in re.finditer(r"RESULT\d+ ", proc.stdout)]
    assert len(seen) == 2, proc.stdout
    for s in seen:
        assert "different rows" in s["rows"], s
        assert "different weights" in s["weights"], s
        assert s["after"][1:] == [2, 2]
    assert seen[0]["after"][0] == seen[1]["after"][0]  # the same step in each: the same weights after it


def test_train_rl_under_torchrun_rolls_out_once_and_updates_in_every_process(bwrap_backend, smol_dir, tmp_path):
    """`train rl` under torchrun: rank 0 alone serves, rolls out and publishes; both processes take part in the
    update (rank 0 sends them the rows). One iteration of the toy task against the same run in one process (the
    same seed gives the same episodes, so the same batch): the same batch rows, the update's gradient norm within
    1e-3 relative (the engine's logprobs, the ratio's old policy, differ in the 6th digit) with `processes` 2,
    one published adapter, and one summary, printed by rank 0."""
    from test_rl_loop import toy_task

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(toy_task(i).model_dump_json() + "\n" for i in range(2)))
    common = ["train", "rl", str(tasks), "-k", "4", "--tasks-per-iter", "2", "--iterations", "1", "--max-turns", "1",
              "--max-tokens", "8", "--lr", "1e-3", "--seed", "0", "-j", "4", "--sandbox", "bwrap", "--device", "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO / "src")}
    one = _run([sys.executable, "-m", "clawgym", *common, "-o", str(tmp_path / "one")], env)
    assert one.returncode == 0, one.stderr[-3000:]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    two = _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
                "-m", "clawgym", *common, "-o", str(tmp_path / "two")], env)
    assert two.returncode == 0, (two.stdout[-2000:], two.stderr[-3000:])
    assert two.stdout.count("published v1") == 1  # rank 0 alone reports
    # the same episodes: the same tokens, rewards and advantages (the engine's logprobs of them differ in the
    # 6th digit: its batches formed in another order)
    keys = ("trajectory_id", "prompt_ids", "response_ids", "reward", "advantage", "policy_version")
    b1, b2 = ([{k: r[k] for k in keys} for r in map(json.loads, (tmp_path / d / "batches" / "v0.jsonl")
               .read_text().splitlines())] for d in ("one", "two"))
    assert b1 == b2 and b1
    m1, m2 = (json.loads((tmp_path / k / "metrics.jsonl").read_text().splitlines()[0]) for k in ("one", "two"))
    assert m1["episodes"] == m2["episodes"] == 8
    assert m1.get("processes", 1) == 1 and m2["processes"] == 2
    # the loss of one GRPO step is ~0 (ratios 1, advantages centred): its gradient is what moves the policy
    [s1], [s2] = m1["update_steps"], m2["update_steps"]
    assert s1["grad_norm"] > 0 and s2["grad_norm"] == pytest.approx(s1["grad_norm"], rel=1e-3)
    assert s2["entropy"] == pytest.approx(s1["entropy"], rel=1e-4)
    assert m2["tokens"] == m1["tokens"] and m2["optimizer_steps"] == m1["optimizer_steps"]
    assert (tmp_path / "two" / "adapters" / "v1" / "adapter_model.safetensors").exists()
    assert json.loads((tmp_path / "two" / "state.json").read_text())["version"] == 1
