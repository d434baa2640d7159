"""`--credit gae` (Agent-R1's step-level GAE with a critic): GAE against hand-computed values, the export's step
rewards (a dropped step hands its reward back, fallbacks listed), the value head's states against each step's own
forward pass of the real SmolLM2 with a LoRA adapter, the head fitted and carried across versions, and `train rl
--credit gae` end to end in real sandboxes."""

from __future__ import annotations

import json

import pytest
import torch

from clawgym.pool.credit import gae, kept_step_rewards
from clawgym.pool.records import StepRecord
from clawgym.train.rl_loop import RLError, RLOptions, _check_update_options
from clawgym.train.value_head import FILE, ValueHead, fill_gae, fit, state_features, whiten
from test_rl_loop import model_ready, toy_task  # noqa: F401  (the module's fixture)


def test_gae_equals_the_hand_computed_recursion():
    r, v, g, lam = [0.25, 0.5, -0.25, 0.5], [0.1, 0.2, 0.3, 0.4], 0.9, 0.8
    d3 = 0.5 + 0.0 - 0.4  # V_T = 0: the episode is over
    d2 = -0.25 + g * 0.4 - 0.3
    d1 = 0.5 + g * 0.3 - 0.2
    d0 = 0.25 + g * 0.2 - 0.1
    a3 = d3
    a2 = d2 + g * lam * a3
    a1 = d1 + g * lam * a2
    a0 = d0 + g * lam * a1
    adv, targets = gae(r, v, g, lam)
    assert adv == pytest.approx([a0, a1, a2, a3])
    assert targets == pytest.approx([a0 + 0.1, a1 + 0.2, a2 + 0.3, a3 + 0.4])
    # lambda 1 and no critic: the returns to go; lambda 0: the one-step TD errors
    assert gae(r, [0.0] * 4, 1.0, 1.0)[0] == pytest.approx([1.0, 0.75, 0.25, 0.5])
    assert gae(r, v, g, 0.0)[0] == pytest.approx([d0, d1, d2, d3])
    with pytest.raises(ValueError, match="3 rewards but 2 values"):
        gae([1, 2, 3], [0, 0])


def test_a_dropped_step_keeps_the_discounted_return():
    # rewards [0, 1, 0, 1], step 1 and 3 dropped, gamma 0.9: the return from step 0 is 0.9 + 0.9^3 = 1.629
    kept = kept_step_rewards([0.0, 1.0, 0.0, 1.0], [0, 2], 0.9)
    assert kept == pytest.approx({0: 0.9, 2: 0.9})
    adv, _ = gae([kept[0], kept[2]], [0.0, 0.0], 0.9, 1.0, gaps=[2])
    assert adv == pytest.approx([0.9 + 0.9**3, 0.9])
    with pytest.raises(ValueError, match="one positive gap"):
        gae([1.0, 1.0], [0.0, 0.0], gaps=[0])


def test_a_dropped_step_hands_its_reward_to_the_kept_step_before_it():
    rewards = [0.5, 0.25, -0.25, 0.5]
    assert kept_step_rewards(rewards, [0, 1, 2, 3]) == {0: 0.5, 1: 0.25, 2: -0.25, 3: 0.5}
    assert kept_step_rewards(rewards, [0, 2]) == {0: 0.75, 2: 0.25}  # step 3's reward is not lost with it
    assert kept_step_rewards(rewards, [1]) == {1: 0.5}  # step 0's belongs to no trained decision
    assert kept_step_rewards(rewards, []) == {}


def test_the_gae_export_writes_step_rewards_and_lists_the_fallbacks(tmp_path):
    from clawgym.pool.export import export_rl
    from clawgym.pool.store import Pool

    with Pool(tmp_path / "pool") as pool:
        pool.expect_group("g", 2)
        for tid, verdict, reward in (
                ("g#0", {"status": "scored", "progress": {"credit": "progress", "rewards": [0.5, 0.25, 0.25]}}, 1.0),
                ("g#1", {"status": "scored", "progress": {"credit": "outcome", "fallback": "a python checker"}}, 0.5)):
            for i in range(3):
                pool.append_step(StepRecord(
                    trajectory_id=tid, group_id="g", step_index=i, model="m", request={"messages": []},
                    response={"content": "x"}, prompt_ids=[1, 2, 3 + i],
                    # the last step of each trajectory has no token ids: dropped, its reward handed back
                    response_ids=[3] if i < 2 else None, token_source="upstream" if i < 2 else "none"))
            pool.end_trajectory(tid, group_id="g", task_id="g", status="completed", reward=reward, verdict=verdict)
        summary = export_rl(pool, tmp_path / "rl.jsonl", credit="gae")
    assert summary["progress_fallback"] == ["g#1"] and summary["dropped"] == {"no token ids": 2}
    rows = {r["step_id"]: r for r in map(json.loads, (tmp_path / "rl.jsonl").read_text().splitlines())}
    assert {k: r["step_reward"] for k, r in rows.items()} == {"g#0/0": 0.5, "g#0/1": 0.5, "g#1/0": 0.0, "g#1/1": 0.5}
    assert all(r["advantage"] is None for r in rows.values())


def test_a_gae_export_cannot_be_trained_without_its_values(tmp_path):
    from clawgym.train.rl_update_run import read_batch

    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps({"prompt_ids": [1], "response_ids": [2], "advantage": None, "step_reward": 1.0}) + "\n")
    with pytest.raises(RLError, match="row 1: advantage is null"):
        read_batch(path)


def test_gae_refuses_a_sharded_policy(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RLError, match="--credit gae with --fsdp"):
        _check_update_options(RLOptions(credit="gae", fsdp=True))
    with pytest.raises(RLError, match="--gae-lambda 1.5"):
        _check_update_options(RLOptions(credit="gae", gae_lambda=1.5))


@pytest.fixture(scope="module")
def lora_policy(model_ready):  # noqa: F811
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from clawgym.llm.models import resolve_model_dir

    path = str(resolve_model_dir("smollm2-135m"))
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32),
                           LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    return model.eval(), AutoTokenizer.from_pretrained(path)


def _trajectory(tok, tid: str, turns: list[str]) -> list[dict]:
    """Rows of a trajectory whose every prompt is the one before plus its response and a tool result."""
    rows, prompt = [], tok("Task: tidy the folder.").input_ids
    for i, text in enumerate(turns):
        response = tok(f" call {i}").input_ids
        rows.append({"trajectory_id": tid, "step_index": i, "prompt_ids": list(prompt), "response_ids": response})
        prompt = prompt + response + tok(text).input_ids
    return rows


def test_one_pass_per_trajectory_gives_each_steps_own_state(lora_policy):
    model, tok = lora_policy
    rows = _trajectory(tok, "t0", [" ok: 3 files", " ok: moved", " error: no such file"])
    rows.append({"trajectory_id": "t1", "step_index": 0, "prompt_ids": tok("Another task.").input_ids,
                 "response_ids": [5]})
    rows.insert(1, rows.pop())  # out of order: put back in step order per trajectory
    # another sample of t0's task: the same first prompt, then other tool results (a shared prefix in the tree)
    rows += _trajectory(tok, "t2", [" ok: 2 files", " error: permission denied"])
    with torch.no_grad():
        alone = [model(input_ids=torch.tensor([r["prompt_ids"]]), output_hidden_states=True).hidden_states[-1][0, -1]
                 for r in rows]
    for budget in (8192, 40):  # one tree, or a tree per few chains
        feats = state_features(model, rows, max_tokens=budget)
        for i, a in enumerate(alone):
            assert torch.allclose(feats[i], a, atol=2e-4), (budget, i, float((feats[i] - a).abs().max()))
    # the adapter is part of the state: the base model's differ
    with model.disable_adapter(), torch.no_grad():
        base = state_features(model, rows)
    assert float((base - feats).abs().max()) > 1e-2


def test_the_value_head_learns_the_returns_and_gae_fills_the_batch(lora_policy, tmp_path):
    model, tok = lora_policy
    rows = []
    for k in range(6):  # six trajectories of three steps; rewards that depend on what the tool said
        outcomes = [" ok" if (k + j) % 2 else " error" for j in range(3)]
        traj = _trajectory(tok, f"t{k}", [f"{o}: step {j}" for j, o in enumerate(outcomes)])
        for j, r in enumerate(traj):
            r["step_reward"] = 0.5 if (k + j) % 2 else 0.0
        rows += traj
    head = ValueHead(model.config.hidden_size)
    stats = fill_gae(rows, model, head, gamma=1.0, lam=0.9, value_steps=300)
    # a zero head: the raw advantages are the lambda-returns, the targets too; then whitened over the batch
    by_traj: dict[str, list[dict]] = {}
    for r in rows:
        by_traj.setdefault(r["trajectory_id"], []).append(r)
    raw = []
    for traj in by_traj.values():
        want, _ = gae([r["step_reward"] for r in traj], [0.0] * len(traj), 1.0, 0.9)
        assert [r["value_target"] for r in traj] == pytest.approx(want)
        assert all(r["value"] == 0.0 for r in traj)
        raw += want
    assert [r["advantage"] for r in sum(by_traj.values(), [])] == pytest.approx(whiten(raw))
    adv = torch.tensor([r["advantage"] for r in rows])
    assert abs(float(adv.mean())) < 1e-6 and abs(float(adv.std(unbiased=False)) - 1) < 1e-3
    assert stats["value_loss_after"] < 0.2 * stats["value_loss_before"], stats
    assert stats["value_pass_s"] >= 0 and stats["value_explained_variance"] == pytest.approx(0.0, abs=1e-6)
    # the fitted head now predicts: the next update's values are not zero and explain the same targets
    targets = torch.tensor([r["value_target"] for r in rows])
    again = [dict(r, advantage=None) for r in rows]
    stats2 = fill_gae(again, model, head, gamma=1.0, lam=0.9, value_steps=0)
    assert stats2["value_explained_variance"] > 0.5, stats2
    assert [r["value"] for r in again] != [0.0] * len(again)
    # saved and loaded as it is; a head of another width is refused
    head.save(tmp_path)
    back = ValueHead.load_or_new(tmp_path, model.config.hidden_size)
    feats = state_features(model, rows)
    assert torch.equal(back(feats), head(feats))
    assert torch.equal(ValueHead.load_or_new(None, 8)(torch.ones(2, 8)), torch.zeros(2))
    with pytest.raises(ValueError, match="hidden size 576, the policy's is 8"):
        ValueHead.load_or_new(tmp_path, 8)
    assert fit(head, feats[:0], targets[:0]) == {"value_loss_before": 0.0, "value_loss_after": 0.0}
    with pytest.raises(ValueError, match="without a step_reward"):
        fill_gae([{"prompt_ids": [1], "response_ids": [2]}], model, head)


def test_a_nan_reward_cannot_poison_the_critic(lora_policy):
    model, tok = lora_policy
    head = ValueHead(model.config.hidden_size)
    rows = _trajectory(tok, "t0", [" ok", " ok"])
    for r, reward in zip(rows, [0.5, float("nan")], strict=True):
        r["step_reward"] = reward
    with pytest.raises(ValueError, match=r"row 2 \(no step id\): step_reward nan is not a finite number"):
        fill_gae(rows, model, head)
    # a fit that diverges leaves the head as it was
    feats = state_features(model, rows)
    before = {k: v.clone() for k, v in head.state_dict().items()}
    out = fit(head, feats, torch.tensor([1.0, 2.0]), lr=1e30, steps=5)
    assert out["value_fit_diverged"] and all(torch.equal(v, head.state_dict()[k]) for k, v in before.items())
    # rows without a trajectory id are each their own one-step trajectory
    lone = [{"trajectory_id": None, "prompt_ids": r["prompt_ids"], "response_ids": [5], "step_reward": 1.0}
            for r in rows]
    fill_gae(lone, model, ValueHead(model.config.hidden_size), whiten_advantages=False, value_steps=0)
    assert [r["value_target"] for r in lone] == [1.0, 1.0]


def test_the_head_of_a_full_weights_version_is_not_taken_for_model_weights(model_ready, tmp_path):  # noqa: F811
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.rl_loop import _save_full

    tiny = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=1))
    head = ValueHead(16)
    torch.nn.init.ones_(head.linear.weight)
    dest = tmp_path / "weights" / "v1"
    _save_full(tiny, AutoTokenizer.from_pretrained(str(resolve_model_dir("smollm2-135m"))), dest, value_head=head)
    # a weights loader reads every *.safetensors at the top of the directory (vLLM, SGLang, the embedded engine)
    assert sorted(p.name for p in dest.glob("*.safetensors")) == ["model.safetensors"]
    assert torch.equal(ValueHead.load_or_new(dest, 16)(torch.ones(1, 16)), torch.tensor([16.0]))


def test_train_rl_with_gae_fills_the_advantages_and_carries_the_critic(model_ready, bwrap_backend, tmp_path):  # noqa: F811
    from clawgym.train.rl_loop import run_rl

    out = tmp_path / "rl"
    tasks = [toy_task(i) for i in range(2)]  # python checkers: no checks as data, so outcome rewards on the last step
    opts = RLOptions(samples=4, tasks_per_iter=2, iterations=1, temperature=1.0, max_turns=1, max_tokens=8,
                     lr=1e-3, jobs=4, seed=0, credit="gae")
    rows = run_rl(tasks, out, opts, backend=bwrap_backend)
    # resumed for a second version: the head fitted in iteration 0 is loaded from v1's directory
    rows += run_rl(tasks, out, RLOptions(**{**vars(opts), "iterations": 2}), backend=bwrap_backend)
    assert [r["published"] for r in rows] == [1, 2]
    for m in rows:
        assert m["progress_fallback"] == 8 and m["value_pass_s"] > 0 and "value_loss_after" in m
    assert rows[0]["value_mean"] == 0.0 and rows[1]["value_mean"] != 0.0  # v1's head: fitted, saved, reloaded
    assert (out / "adapters" / "v1" / FILE).is_file() and (out / "adapters" / "v2" / FILE).is_file()
    batch = [json.loads(x) for x in (out / "batches" / "v0.jsonl").read_text().splitlines()]
    assert batch and all(isinstance(r["advantage"], float) and "value_target" in r for r in batch)
    # one step per episode with the outcome reward on it, V_T = 0, a zero head: the targets are the rewards
    assert all(r["value_target"] == pytest.approx(r["step_reward"]) == pytest.approx(r["reward"]) for r in batch)
