"""The RL update sharded across processes (issue #36, `--fsdp`): `clawgym train rl-update --fsdp` under torchrun
(FSDP2 over gloo, 2 CPU processes) against one unsharded process on the same global batch, on the real SmolLM2,
with LoRA and with full fine-tuning, a KL term on (the reference: the adapter disabled, or a second model sharded
like the policy), and micro-batches dealt unevenly (one process runs padding passes).

Tolerances: the sharded run sums the same per-token terms as the single process in another order (each process's
micro-batches, then a reduce-scatter of each micro-batch's gradient; the global gradient norm from the shards'
sums of squares), so its losses, ratios, KL, entropy and gradient norms agree to fp32 round-off, amplified a
little by the step between: 1e-4 relative, as in tests/test_rl_processes.py, where the unsharded 2-process update
holds to the same bound, with an absolute floor of 1e-6: each statistic is a token mean of O(1) per-token terms
(fp32, ~30 tokens), and a GRPO step's loss cancels to ~1e-3, where relative error alone says nothing (measured
here: full fine-tuning's second-step loss 8.5e-5 relative, 1.1e-7 absolute; every other statistic within 1.2e-5
relative; LoRA's within 1e-7). The published weights are compared as that file does (Adam's first steps turn a
~0 gradient element's float noise into a +-lr step; measured: LoRA as the unsharded 2-process update, full
fine-tuning's weights within 1.8e-7 of the single process's)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from clawgym.train.rl_update import (
    assign_micro_batches,
    merge_continuations,
    split_mini_batches,
    tree_micro_batches,
)
from test_rl_processes import _batch

REPO = Path(__file__).resolve().parents[1]
MICRO = 12  # tokens per micro-batch: each of the 2 mini-batches is 3 micro-batches, dealt 1 and 2


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=1200)


def _one_and_sharded(tmp_path: Path, tok, extra: list[str], smol_dir: Path,
                     outs: tuple[str, str] = ("one", "two")) -> tuple[dict, dict]:
    """The update of the test batch in one unsharded process and in 2 sharded ones (written to `outs`); both
    metrics.json."""
    batch = tmp_path / "v0.jsonl"
    batch.write_text("".join(json.dumps(r) + "\n" for r in _batch(tok)))
    common = ["train", "rl-update", str(batch), "--model", str(smol_dir), "--mini-batches", "2",
              "--micro-batch-tokens", str(MICRO), "--kl-coef", "0.05", "--threads", "1", "--device", "cpu",
              "--seed", "3", *extra]
    one = _run([sys.executable, "-m", "clawgym", *common, "-o", str(tmp_path / outs[0])])
    assert one.returncode == 0, one.stderr[-3000:]
    with socket.socket() as sock:  # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    two = _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
                "-m", "clawgym", *common, "--fsdp", "-o", str(tmp_path / outs[1])])
    assert two.returncode == 0, (two.stdout[-2000:], two.stderr[-3000:])
    assert two.stdout.count("step(s) on") == 1  # rank 0 alone reports
    return tuple(json.loads((tmp_path / k / "metrics.json").read_text()) for k in outs)


def _same_steps(m1: dict, m2: dict) -> None:
    assert len(m1["steps"]) == len(m2["steps"]) == 2
    for a, b in zip(m1["steps"], m2["steps"], strict=True):
        for k in ("loss", "grad_norm", "ratio_mean", "ratio_max", "kl", "kl_old", "entropy"):
            assert a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-6), (k, m1["steps"], m2["steps"])
        assert a["clip_fraction"] == pytest.approx(b["clip_fraction"], abs=1e-6)
    assert m1["steps"][1]["kl"] > 0  # the KL term acted (after the first step the policy left its reference)
    s1, s2 = m1["stats"], m2["stats"]
    for k in ("tokens", "sequence_tokens", "computed_tokens", "micro_batches", "rows", "packed_rows", "rows_run",
              "optimizer_steps"):
        assert s1[k] == s2[k], k
    assert s2["engine_logprob_gap_mean"] == pytest.approx(s1["engine_logprob_gap_mean"], rel=1e-4)


def _sharded(s1: dict, s2: dict) -> None:
    """Each process held only its part of the parameters, trained weights and Adam's state; the one process all."""
    assert s2["fsdp"] is True and s2["processes"] == 2 and "fsdp" not in s1
    full = s1["param_numel"]
    assert s2["param_numel"] == full and s1["param_numel_local"] == [full]
    assert all(0 < n < full for n in s2["param_numel_local"]) and sum(s2["param_numel_local"]) == full
    assert sum(s2["trainable_numel_local"]) == s1["trainable_numel_local"][0]
    assert all(n < s1["trainable_numel_local"][0] for n in s2["trainable_numel_local"])
    assert sum(s2["optimizer_state_numel_local"]) == s1["optimizer_state_numel_local"][0] > 0
    assert all(n < s1["optimizer_state_numel_local"][0] for n in s2["optimizer_state_numel_local"])
    assert len(s2["peak_memory_mb"]) == 2 and all(m > 0 for m in s2["peak_memory_mb"])
    # one process was dealt fewer micro-batches in each mini-batch: it ran a padding pass in each
    assert s2["padding_passes"] == 2


def _dealt_unevenly(tok) -> None:
    """The batch's 2 mini-batches are dealt 1 and 2 micro-batches (the test's premise, from the update's own deal)."""
    for part in split_mini_batches(merge_continuations(_batch(tok)), 2):
        assert sorted(len(d) for d in assign_micro_batches(tree_micro_batches(part, MICRO), 2)) == [1, 2]


def _close(w1: dict[str, torch.Tensor], w2: dict[str, torch.Tensor], moved: list[str]) -> None:
    """Weights equal but for Adam's amplified float noise (see tests/test_rl_processes.py): few elements differ by
    more than 1e-5, and the update itself (the weights in `moved`, which start at 0 or are compared to their
    start) differs by well under 1% of its size."""
    assert w1.keys() == w2.keys() and w1
    diff = torch.cat([(w1[k].float() - w2[k].float()).flatten() for k in w1]).abs()
    assert float((diff > 1e-5).float().mean()) < 1e-3, int((diff > 1e-5).sum())
    upd = torch.cat([w1[k].float().flatten() for k in moved])
    upd_diff = torch.cat([(w1[k].float() - w2[k].float()).flatten() for k in moved])
    assert float(upd_diff.norm()) < 2e-3 * float(upd.norm()), float(upd_diff.norm() / upd.norm())


def test_sharded_lora_update_takes_the_single_process_steps(smol_dir, tokenizer, tmp_path):
    """LoRA (a trainable adapter on a frozen base, both sharded), KL to the adapter-disabled policy: 2 FSDP
    processes = 1 unsharded process, step by step; the published adapter (gathered to rank 0) loads with peft
    and equals the single process's, and so does its optimizer state; a run resumed from it (its Adam state
    sharded) again takes the single process's steps."""
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    _dealt_unevenly(tokenizer)
    m1, m2 = _one_and_sharded(tmp_path, tokenizer, ["--lr", "5e-3", "--lora-r", "8"], smol_dir)
    _same_steps(m1, m2)
    _sharded(m1["stats"], m2["stats"])
    w1, w2 = (load_file(str(tmp_path / k / "adapter" / "adapter_model.safetensors")) for k in ("one", "two"))
    _close(w1, w2, [k for k in w1 if "lora_B" in k])  # B starts at 0: all of it is the update
    o1, o2 = (torch.load(tmp_path / k / "adapter" / "optimizer.pt", weights_only=True) for k in ("one", "two"))
    assert o1["param_groups"][0]["params"] == o2["param_groups"][0]["params"] and o1["state"].keys() == o2["state"].keys()
    for i, st in o1["state"].items():
        assert float(st["step"]) == float(o2["state"][i]["step"]) == 2
        assert st["exp_avg"].shape == o2["state"][i]["exp_avg"].shape
    m_one = torch.cat([st["exp_avg"].flatten() for st in o1["state"].values()])
    m_two = torch.cat([st["exp_avg"].flatten() for st in o2["state"].values()])
    assert float((m_one - m_two).norm()) < 1e-4 * float(m_one.norm())
    # the adapter loads as a peft adapter and gives the single process's policy
    ids = torch.tensor([tokenizer.encode("Question: is the sky blue? Answer: Yes")])
    logits = []
    for k in ("one", "two"):
        base = AutoModelForCausalLM.from_pretrained(str(smol_dir), dtype=torch.float32)
        model = PeftModel.from_pretrained(base, str(tmp_path / k / "adapter")).eval()
        with torch.no_grad():
            logits.append(model(input_ids=ids).logits)
    assert float((logits[0] - logits[1]).abs().max()) < 1e-3
    # resumed from that adapter and its Adam state: each sharded process takes its shard of the moments, and the
    # steps are again the unsharded process's
    m3, m4 = _one_and_sharded(tmp_path, tokenizer, ["--lr", "5e-3", "--lora-r", "8", "--adapter",
                                                    str(tmp_path / "one" / "adapter")], smol_dir, ("one_r", "two_r"))
    _same_steps(m3, m4)
    o3, o4 = (torch.load(tmp_path / k / "adapter" / "optimizer.pt", weights_only=True) for k in ("one_r", "two_r"))
    assert {float(st["step"]) for st in o3["state"].values()} == {float(st["step"]) for st in o4["state"].values()} \
        == {4.0}
    v3, v4 = (torch.cat([st["exp_avg_sq"].flatten() for st in o["state"].values()]) for o in (o3, o4))
    assert float((v3 - v4).norm()) < 1e-4 * float(v3.norm())


def test_sharded_full_update_takes_the_single_process_steps(smol_dir, tokenizer, tmp_path):
    """Full fine-tuning (every weight trained and sharded) with KL to a reference model sharded the same way:
    2 FSDP processes = 1 unsharded process, step by step; the full weights gathered to rank 0 load with
    transformers and equal the single process's."""
    from safetensors.torch import load_file

    m1, m2 = _one_and_sharded(tmp_path, tokenizer, ["--full", "--lr", "1e-5"], smol_dir)
    _same_steps(m1, m2)
    _sharded(m1["stats"], m2["stats"])
    w1, w2 = (load_file(str(tmp_path / k / "weights" / "model.safetensors")) for k in ("one", "two"))
    base = load_file(str(smol_dir / "model.safetensors"))
    assert w1.keys() == w2.keys() and w1.keys() <= base.keys()
    for k in w1:  # what moved is the update: compare it, not the weights, to its size
        w1[k], w2[k] = w1[k].float() - base[k].float(), w2[k].float() - base[k].float()
    assert float(torch.cat([v.flatten() for v in w1.values()]).abs().max()) > 0  # the step moved the weights
    _close(w1, w2, list(w1))
    # the gathered weights load as a model, the LM head tied to the embedding again (saved once, as one process does)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tmp_path / "two" / "weights"), dtype=torch.float32)
    emb = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight is emb
    saved = load_file(str(tmp_path / "two" / "weights" / "model.safetensors"))["model.embed_tokens.weight"]
    assert torch.equal(emb, saved.float())


def test_train_rl_with_fsdp_shards_every_update_and_rank_0_publishes_the_gathered_adapter(bwrap_backend, smol_dir,
                                                                                           tmp_path):
    """`train rl --fsdp` under torchrun: rank 0 serves, rolls out and publishes; both processes take part in the
    sharded update and in gathering the adapter, which rank 0 publishes to the running server. Two iterations of
    the toy task against the same run in one unsharded process (the same seed gives the same first batch): the
    first update's gradient norm within 1e-3 relative (the engine's logprobs, the ratio's old policy, differ in
    the 6th digit, as in tests/test_rl_processes.py), each update sharded, and the second iteration rolled out by
    the published v1 (the gathered adapter loaded by the server) and v2 published from it."""
    from test_rl_loop import toy_task

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(toy_task(i).model_dump_json() + "\n" for i in range(2)))
    common = ["train", "rl", str(tasks), "-k", "4", "--tasks-per-iter", "2", "--iterations", "2", "--max-turns", "1",
              "--max-tokens", "8", "--lr", "1e-3", "--seed", "0", "-j", "4", "--sandbox", "bwrap", "--device", "cpu"]
    one = _run([sys.executable, "-m", "clawgym", *common, "--iterations", "1", "-o", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr[-3000:]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    two = _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
                "-m", "clawgym", *common, "--fsdp", "-o", str(tmp_path / "two")])
    assert two.returncode == 0, (two.stdout[-2000:], two.stderr[-3000:])
    assert two.stdout.count("published v2") == 1  # rank 0 alone reports
    m1 = json.loads((tmp_path / "one" / "metrics.jsonl").read_text().splitlines()[0])
    rows = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    assert [r["published"] for r in rows] == [1, 2]
    trained = [r for r in rows if r["optimizer_steps"]]
    assert trained[0] is rows[0]
    for r in trained:
        assert r["fsdp"] is True and r["processes"] == 2
        assert all(0 < n < r["param_numel"] for n in r["param_numel_local"])
    [s1], [s2] = m1["update_steps"], rows[0]["update_steps"]
    assert s1["grad_norm"] > 0 and s2["grad_norm"] == pytest.approx(s1["grad_norm"], rel=1e-3)
    assert rows[0]["tokens"] == m1["tokens"]
    # v1, the gathered adapter, made the second iteration's episodes (here it passes every one: nothing to learn,
    # so no step; v2 is still gathered and published by both processes together)
    assert rows[1]["behaviour_policy"] == 1 and rows[1]["episodes"] == 8
    steps = 0
    for v, r in zip((1, 2), rows, strict=True):  # the gathered adapters, their optimizer state in the one-process form
        steps += r["optimizer_steps"]
        d = tmp_path / "two" / "adapters" / f"v{v}"
        assert (d / "adapter_model.safetensors").exists()
        st = torch.load(d / "optimizer.pt", weights_only=True)["state"]
        assert st and all(float(s["step"]) == steps for s in st.values())
    assert json.loads((tmp_path / "two" / "state.json").read_text())["version"] == 2


def test_fsdp_in_one_process_is_refused_before_anything_loads(monkeypatch):
    from clawgym.train.rl_loop import RLError, RLOptions, _check_update_options

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(RLError, match="under torchrun with 2 or more"):
        _check_update_options(RLOptions(fsdp=True))
    monkeypatch.setenv("WORLD_SIZE", "2")
    _check_update_options(RLOptions(fsdp=True))
