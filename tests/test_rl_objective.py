"""The RL objective (clawgym.train.rl_objective / rl_update): masks, the clipped loss against hand-computed
values, and updates of the real SmolLM2 + LoRA that make the rewarded answer more likely."""

from __future__ import annotations

import math

import pytest
import torch

from clawgym.train.rl_objective import ObjectiveConfig, build_batch, policy_loss
from clawgym.train.rl_update import micro_batches, rl_update
from conftest import smollm_lora_policy

TOOL_RESULT = [901, 902, 903]  # stand-in ids of a tool result inside the prompt


def test_mask_covers_only_response_tokens_never_prompt_or_tool_results():
    rows = [
        {"prompt_ids": [1, 2, *TOOL_RESULT, 4], "response_ids": [7, 8], "advantage": 1.0, "logprobs": [-1.0, -2.0]},
        {"prompt_ids": [1, *TOOL_RESULT], "response_ids": [9, 10, 11], "advantage": -0.5},
    ]
    b = build_batch(rows, pad_id=0)
    # left-padded: every row ends at the last position
    assert b.input_ids.tolist() == [[1, 2, 901, 902, 903, 4, 7, 8], [0, 1, 901, 902, 903, 9, 10, 11]]
    assert b.response_mask.tolist() == [[0, 0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 1, 1, 1]]
    for i, row in enumerate(b.input_ids.tolist()):
        for pos, tok in enumerate(row):
            if tok in TOOL_RESULT:
                assert b.response_mask[i, pos] == 0
    assert b.advantages.tolist()[1] == [0, 0, 0, 0, 0, -0.5, -0.5, -0.5]
    assert b.old_logps.tolist()[0][6:] == [-1.0, -2.0] and b.has_old_logps.tolist() == [1.0, 0.0]
    assert b.attention_mask.tolist()[1] == [0, 1, 1, 1, 1, 1, 1, 1]


def test_bad_rows_are_refused():
    with pytest.raises(ValueError, match="2 logprobs for 3 response tokens"):
        build_batch([{"prompt_ids": [1], "response_ids": [2, 3, 4], "advantage": 1, "logprobs": [0, 0]}])
    with pytest.raises(ValueError, match="empty response"):
        build_batch([{"prompt_ids": [1], "response_ids": [], "advantage": 1}])


def _one_row_batch(advantage: float, old: list[float]):
    return build_batch([{"prompt_ids": [1, 2], "response_ids": [3, 4], "advantage": advantage, "logprobs": old}])


def _logps(values: list[float]) -> torch.Tensor:
    return torch.tensor([[0.0, 0.0, *values]])


def test_clipped_loss_by_hand_positive_advantage():
    # policy .5 and .5 where the engine had .25 and .5: ratios 2 and 1; clip at 1.2
    b = _one_row_batch(1.0, [math.log(0.25), math.log(0.5)])
    loss, st = policy_loss(_logps([math.log(0.5), math.log(0.5)]), b, ObjectiveConfig("grpo"))
    # token losses -min(2, 1.2) = -1.2 and -1; grpo: mean over the sequence's tokens
    assert float(loss) == pytest.approx(-1.1)
    assert st["ratio_mean"] == pytest.approx(1.5) and st["ratio_max"] == pytest.approx(2.0)
    assert st["clip_fraction"] == pytest.approx(0.5) and st["tokens"] == 2
    assert st["engine_logprob_gap_max"] == pytest.approx(math.log(2))
    loss, _ = policy_loss(_logps([math.log(0.5), math.log(0.5)]), b, ObjectiveConfig("dr-grpo", max_response_len=4))
    assert float(loss) == pytest.approx(-2.2 / 4)


def test_clipped_loss_by_hand_negative_advantage_is_not_clipped_upwards():
    b = _one_row_batch(-1.0, [math.log(0.25), math.log(0.5)])
    loss, st = policy_loss(_logps([math.log(0.5), math.log(0.5)]), b, ObjectiveConfig("grpo"))
    # -min(-2, -1.2) = 2 and -min(-1, -1) = 1: a negative advantage keeps the full ratio
    assert float(loss) == pytest.approx(1.5) and st["clip_fraction"] == 0.0


def test_kl_term_by_hand():
    b = _one_row_batch(0.0, [math.log(0.5), math.log(0.5)])
    logps = _logps([math.log(0.5), math.log(0.5)])
    ref = _logps([math.log(0.25), math.log(0.5)])
    loss, st = policy_loss(logps, b, ObjectiveConfig("rloo", kl_coef=0.5), ref_logps=ref)
    d = math.log(0.25) - math.log(0.5)  # ref - logp on the first token; 0 on the second
    k3 = math.exp(d) - d - 1
    assert st["kl"] == pytest.approx(k3 / 2)
    assert float(loss) == pytest.approx(0.5 * k3 / 2)  # advantage 0: only the KL term, token-mean


def test_micro_batches_stay_within_the_token_budget():
    rows = [{"prompt_ids": [1] * n, "response_ids": [2], "advantage": 0.0} for n in (9, 3, 5, 2, 7)]
    groups = micro_batches(rows, 20)
    assert sorted(len(g) for g in groups) and sum(len(g) for g in groups) == 5
    for g in groups:
        width = max(len(r["prompt_ids"]) + 1 for r in g)
        assert width * len(g) <= 20 or len(g) == 1


@pytest.fixture(scope="module")
def smollm_lora():
    return smollm_lora_policy()


def test_rl_updates_make_the_rewarded_answer_more_likely(smollm_lora):
    tok, model = smollm_lora
    text = tok.apply_chat_template([{"role": "user", "content": "Is the sky blue? Answer Yes or No."}],
                                   add_generation_prompt=True, tokenize=False)
    prompt = tok.encode(text, add_special_tokens=False)
    yes = tok.encode("Yes", add_special_tokens=False)
    no = tok.encode("No", add_special_tokens=False)

    def logp(resp: list[int]) -> float:
        from clawgym.train.rl_objective import token_logps

        b = build_batch([{"prompt_ids": prompt, "response_ids": resp, "advantage": 0.0}])
        with torch.no_grad():
            lp, _ = token_logps(model, b)
        return float((lp * b.response_mask).sum())

    # a group of four samples: two said Yes (reward 1), two said No (reward 0): GRPO advantages +-0.866
    rows = [{"prompt_ids": prompt, "response_ids": r, "advantage": a}
            for r, a in ((yes, 0.866), (yes, 0.866), (no, -0.866), (no, -0.866))]
    before_yes, before_no = logp(yes), logp(no)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    stats = []
    for _ in range(3):
        res = rl_update(model, opt, rows, ObjectiveConfig("grpo", kl_coef=0.01), epochs=1)
        stats.append(res.stats)
    after_yes, after_no = logp(yes), logp(no)
    assert after_yes > before_yes + 0.1, (before_yes, after_yes)
    assert after_no < before_no - 0.1, (before_no, after_no)
    # each update starts on-policy (its rows carry no engine logprobs): ratio 1, nothing clipped
    assert all(s["ratio_mean"] == pytest.approx(1.0, abs=1e-4) and s["clip_fraction"] == 0.0 for s in stats)
    assert stats[-1]["kl"] > 0 and stats[0]["tokens"] == 2 * len(yes) + 2 * len(no)


def test_engine_logprobs_are_the_behaviour_policy_and_the_gap_is_reported(smollm_lora):
    tok, model = smollm_lora
    prompt = tok.encode("The capital of France is", add_special_tokens=False)
    resp = tok.encode(" Paris", add_special_tokens=False)
    from clawgym.train.rl_objective import token_logps

    b = build_batch([{"prompt_ids": prompt, "response_ids": resp, "advantage": 1.0}])
    with torch.no_grad():
        lp, _ = token_logps(model, b)
    own = [float(x) for x in lp[0, len(prompt):len(prompt) + len(resp)]]
    stale = [x - 0.5 for x in own]  # an engine that found these tokens less likely (an older policy)
    row = {"prompt_ids": prompt, "response_ids": resp, "advantage": 1.0, "logprobs": stale}
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    res = rl_update(model, opt, [row], ObjectiveConfig("grpo"))
    assert res.stats["engine_logprob_gap_mean"] == pytest.approx(0.5, abs=1e-3)
    assert res.stats["ratio_mean"] == pytest.approx(math.exp(0.5), rel=1e-3)
    assert res.stats["clip_fraction"] == 1.0  # ratio 1.65 > 1.2 with a positive advantage


def test_logprobs_of_a_row_do_not_depend_on_its_batch_mates(smollm_lora):
    """Left padding with explicit position ids: a short row scores the same alone and beside a long one."""
    from clawgym.train.rl_objective import token_logps

    tok, model = smollm_lora
    short = {"prompt_ids": tok.encode("Hi there, how", add_special_tokens=False),
             "response_ids": tok.encode(" are you", add_special_tokens=False), "advantage": 0.0}
    long = {"prompt_ids": tok.encode("A much longer prompt that goes on and on about the weather in", add_special_tokens=False),
            "response_ids": tok.encode(" Paris today and tomorrow", add_special_tokens=False), "advantage": 0.0}
    with torch.no_grad():
        alone, _ = token_logps(model.eval(), build_batch([short]))
        both, _ = token_logps(model, build_batch([short, long]))
    n = len(short["response_ids"])
    assert both[0, -n:].tolist() == pytest.approx(alone[0, -n:].tolist(), abs=1e-4)
    assert both[0, :-n].abs().sum() == 0


# -- packing the steps of a trajectory into one row, skipping rows without signal -----------------------------------

def _tiny_llama():
    """A small randomly initialized Llama (transformers' own model code): the packing is arithmetic on the
    token ids, the same for any causal LM, and a small one keeps the exact comparison quick."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    return LlamaForCausalLM(cfg).float()


def _trajectory_rows(gen: torch.Generator) -> list[dict]:
    """Three steps of one conversation (each prompt = the previous prompt + response + a tool result), one
    step of another trajectory whose next prompt does not continue it (re-rendered history), and a group whose
    advantages are all 0."""
    def ids(n):
        return torch.randint(3, 97, (n,), generator=gen).tolist()

    def lp(n):
        return (-torch.rand(n, generator=gen) * 3).tolist()

    p1, r1, t1, r2, t2, r3 = ids(9), ids(4), ids(5), ids(3), ids(6), ids(5)
    rows = [
        {"trajectory_id": "a", "step_index": 0, "policy_version": "0", "prompt_ids": p1, "response_ids": r1,
         "logprobs": lp(4), "advantage": 0.8},
        {"trajectory_id": "a", "step_index": 1, "policy_version": "0", "prompt_ids": p1 + r1 + t1,
         "response_ids": r2, "logprobs": lp(3), "advantage": 0.8},
        {"trajectory_id": "a", "step_index": 2, "policy_version": "0", "prompt_ids": p1 + r1 + t1 + r2 + t2,
         "response_ids": r3, "logprobs": lp(5), "advantage": [0.8, 0.5, 0.1, -0.2, 0.3]},
    ]
    q1, s1 = ids(7), ids(4)
    rows += [
        {"trajectory_id": "b", "step_index": 0, "policy_version": "0", "prompt_ids": q1, "response_ids": s1,
         "logprobs": lp(4), "advantage": -0.6},
        {"trajectory_id": "b", "step_index": 1, "policy_version": "0", "prompt_ids": q1 + ids(4) + ids(3),
         "response_ids": ids(6), "logprobs": lp(6), "advantage": -0.6},
        {"trajectory_id": "c", "step_index": 0, "policy_version": "0", "prompt_ids": ids(8), "response_ids": ids(5),
         "logprobs": lp(5), "advantage": 0.0},
    ]
    return rows


def test_packing_keeps_every_step_and_trains_only_the_models_tokens():
    from clawgym.train.rl_update import merge_continuations

    rows = _trajectory_rows(torch.Generator().manual_seed(1))
    packed = merge_continuations(rows)
    assert len(packed) == 4  # a's three steps in one row; b's two stay apart (no continuation); c alone
    a = next(r for r in packed if r["trajectory_id"] == "a")
    assert a["steps"] == 3 and a["prompt_ids"] == rows[0]["prompt_ids"]
    seq = a["prompt_ids"] + a["response_ids"]
    assert seq == rows[2]["prompt_ids"] + rows[2]["response_ids"]  # the last step's whole conversation
    trained = [t for t, m in zip(a["response_ids"], a["response_mask"], strict=True) if m]
    assert trained == rows[0]["response_ids"] + rows[1]["response_ids"] + rows[2]["response_ids"]
    b = build_batch([a])
    assert int(b.response_mask.sum()) == 12 and b.steps == 3  # the tool results between the steps: untrained


@pytest.mark.parametrize("share_prefixes", [False, True], ids=["rows", "prefix-tree"])
@pytest.mark.parametrize("algo", ["grpo", "dr-grpo", "rloo"])
def test_packed_update_has_the_loss_and_gradient_of_the_steps_one_by_one(algo, share_prefixes):
    rows = _trajectory_rows(torch.Generator().manual_seed(2))
    cfg = ObjectiveConfig(algo=algo, clip_low=0.2, clip_high=0.2, max_response_len=16)

    # by the formula, each step its own sequence (nothing packed, nothing skipped)
    model = _tiny_llama()
    per_step, n_tokens = [], 0
    for r in rows:
        ids = torch.tensor([r["prompt_ids"] + r["response_ids"]])
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
        k = len(r["response_ids"])
        lp = logp[-k:].gather(-1, torch.tensor(r["response_ids"])[:, None])[:, 0]
        adv = torch.tensor(r["advantage"] if isinstance(r["advantage"], list) else [r["advantage"]] * k)
        ratio = torch.exp(lp - torch.tensor(r["logprobs"]))
        tok = -torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv)
        per_step.append(tok)
        n_tokens += k
    if algo == "grpo":
        ref_loss = sum(t.mean() for t in per_step) / len(per_step)
    elif algo == "dr-grpo":
        ref_loss = sum(t.sum() for t in per_step) / (len(per_step) * 16)
    else:
        ref_loss = sum(t.sum() for t in per_step) / n_tokens
    ref_loss.backward()
    ref_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    model = _tiny_llama()  # the same weights (same seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    res = rl_update(model, opt, rows, cfg, micro_batch_tokens=40, max_grad_norm=None, share_prefixes=share_prefixes)
    assert res.stats["packed_rows"] == 4 and res.stats["rows_run"] == 3  # c has no signal: not run
    if share_prefixes:  # b's two steps start with the same prompt: its tokens run once
        assert res.stats["computed_tokens"] < res.stats["sequence_tokens"]
    assert res.stats["micro_batches"] >= 2
    assert res.stats["loss"] == pytest.approx(float(ref_loss.detach()), abs=1e-5)
    for n, p in model.named_parameters():
        if n in ref_grads:
            assert torch.allclose(p.grad, ref_grads[n], atol=1e-6, rtol=1e-4), n


def test_update_device_is_resolved_before_anything_loads():
    from clawgym.train.rl_loop import RLError, train_device

    assert train_device("cpu") == "cpu"
    assert train_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(RLError, match="choose auto, cpu, cuda or cuda:N"):
        train_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RLError, match="no CUDA GPU"):
            train_device("cuda:0")


def test_batch_moves_whole_to_the_policys_device():
    b = build_batch([{"prompt_ids": [1, 2], "response_ids": [3], "advantage": 1.0, "logprobs": [-0.5]}])
    m = b.to("meta")  # every tensor moves (a GPU update would fail on the first one left behind)
    for name in ("input_ids", "attention_mask", "response_mask", "old_logps", "has_old_logps", "advantages",
                 "step_weights"):
        assert getattr(m, name).device.type == "meta", name
    assert m.steps == b.steps and b.input_ids.device.type == "cpu"


def test_train_rl_refuses_a_gpu_it_cannot_see(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    from typer.testing import CliRunner

    from clawgym.cli.app import app

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("")
    res = CliRunner().invoke(app, ["train", "rl", str(tasks), "--device", "cuda", "-o", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert "--device cuda: torch sees no CUDA GPU here" in res.output
    assert not (tmp_path / "out").exists()


def test_bf16_update_follows_the_fp32_gradient(smollm_lora):
    """Mixed precision (`--train-precision bf16`): the forward passes in bf16 under autocast, the trained weights,
    gradients and loss in fp32. Same rows, same weights: the loss and the gradient's direction match fp32's."""
    tok, model = smollm_lora
    text = tok.apply_chat_template([{"role": "user", "content": "List three primary colours."}],
                                   add_generation_prompt=True, tokenize=False)
    prompt = tok.encode(text, add_special_tokens=False)
    rows = [{"prompt_ids": prompt, "response_ids": tok.encode(r, add_special_tokens=False), "advantage": a}
            for r, a in (("Red, yellow and blue.", 1.0), ("Green.", -1.0))]
    params = [p for p in model.parameters() if p.requires_grad]
    frozen = torch.optim.SGD(params, lr=0.0)  # a step that changes nothing: both passes see the same weights
    grads, losses = {}, {}
    for precision in ("fp32", "bf16"):
        res = rl_update(model, frozen, rows, ObjectiveConfig("grpo"), precision=precision, max_grad_norm=None)
        grads[precision] = torch.cat([p.grad.flatten() for p in params])
        losses[precision] = res.stats["loss"]
        assert all(p.dtype == torch.float32 for p in params) and grads[precision].dtype == torch.float32
    cos = torch.nn.functional.cosine_similarity(grads["fp32"], grads["bf16"], dim=0)
    assert float(cos) > 0.98, float(cos)
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=0.05, abs=1e-3)
    with pytest.raises(ValueError, match="fp32 or bf16"):
        rl_update(model, frozen, rows, precision="fp16")
