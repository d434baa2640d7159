"""The RL update at its users' scale, on the real SmolLM2 (issue #36): PPO epochs x mini-batches of optimizer
steps (so the clip acts), the LR schedule, grad-norm clipping, KL to the old policy, bf16 weights with fp32 LoRA
master weights, gradient checkpointing, and TensorBoard events of the loop's metrics."""

from __future__ import annotations

import math

import pytest
import torch

from clawgym.train.rl_objective import ObjectiveConfig
from clawgym.train.rl_schedule import LRSchedule
from clawgym.train.rl_update import rl_update, split_mini_batches
from conftest import smollm_lora_policy


@pytest.fixture(scope="module")
def tokenizer():
    return smollm_lora_policy()[0]


def _rows(tok, engine_logprobs: bool = True) -> list[dict]:
    """Two GRPO groups of two samples: a good and a bad answer to each of two questions; one row carries the
    engine's logprobs (a behaviour policy other than the trainer's), the others none."""
    def enc(s):
        return tok.encode(s, add_special_tokens=False)

    p1, p2 = enc("Question: is the sky blue? Answer:"), enc("Question: is fire cold? Answer:")
    hot = enc(" No, it is hot.")
    rows = [{"prompt_ids": p1, "response_ids": enc(" Yes, it is."), "advantage": 1.0},
            {"prompt_ids": p1, "response_ids": enc(" No."), "advantage": -1.0},
            {"prompt_ids": p2, "response_ids": hot, "advantage": 0.7},
            {"prompt_ids": p2, "response_ids": enc(" Yes."), "advantage": -0.7}]
    if engine_logprobs:
        rows[2]["logprobs"] = [-1.0, -2.0, -0.5, -1.5, -0.2, -3.0][:len(hot)]
    return rows


def _trained(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def test_default_update_is_the_single_step_update_of_a680fe3(tokenizer):
    """With the defaults (one epoch, one mini-batch) the update is the one optimizer step on the whole batch the
    code of a680fe3 made: these numbers are what a680fe3's `rl_update` gives on the same rows and weights
    (recorded from a worktree of it; identical to the last digit)."""
    _, model = smollm_lora_policy(b_std=0.02)
    params = _trained(model)
    opt = torch.optim.AdamW(params, lr=1e-3)
    res = rl_update(model, opt, _rows(tokenizer), ObjectiveConfig("grpo"))
    after = torch.cat([p.detach().flatten() for p in params]).double()
    assert res.stats["optimizer_steps"] == 1 and len(res.steps) == 1 and res.stats["mini_batches"] == 1
    assert res.stats["loss"] == pytest.approx(0.06241247430443764, rel=1e-5)
    assert res.stats["grad_norm"] == pytest.approx(1.4348881244659424, rel=1e-5)
    assert res.stats["ratio_mean"] == pytest.approx(1.9303594827651978, rel=1e-5)
    assert res.stats["clip_fraction"] == pytest.approx(0.2)
    assert res.stats["tokens"] == 15
    assert float(after.sum()) == pytest.approx(-4.822148056829974, abs=2e-3)  # a second step would move it ~1
    assert float(after.abs().sum()) == pytest.approx(8709.026465280813, rel=1e-6)


def test_mini_batches_split_by_tokens_keep_groups_together(tokenizer):
    rows = _rows(tokenizer)
    parts = split_mini_batches(rows, 2)
    assert len(parts) == 2 and sorted(map(len, parts)) == [2, 2]
    for part in parts:  # each part is one question's group (token order)
        assert len({tuple(r["prompt_ids"]) for r in part}) == 1
    assert split_mini_batches(rows, 1) == [rows]  # one part: the rows as given
    assert len(split_mini_batches(rows[:1], 4)) == 1  # never an empty part


def test_mini_batch_steps_move_the_policy_so_the_clip_acts(tokenizer):
    """PPO's inner loop: the old policy is the one before the first step, so after it the ratios leave 1 and,
    with a high learning rate and advantages that push hard, the clip acts. One step on the same on-policy
    batch (the old default) never clips."""
    rows = _rows(tokenizer, engine_logprobs=False)
    cfg = ObjectiveConfig("grpo")
    _, model = smollm_lora_policy(b_std=0.02)
    one = rl_update(model, torch.optim.AdamW(_trained(model), lr=1e-2), rows, cfg)
    assert one.stats["optimizer_steps"] == 1 and one.stats["clip_fraction"] == 0.0
    assert one.stats["ratio_mean"] == pytest.approx(1.0, abs=1e-5) and one.stats["kl_old"] == pytest.approx(0, abs=1e-6)

    _, model = smollm_lora_policy(b_std=0.02)
    schedule = LRSchedule(1e-2, "cosine", warmup_steps=1, total_steps=4)
    res = rl_update(model, torch.optim.AdamW(_trained(model), lr=1e-2), rows, cfg, epochs=2, mini_batches=2,
                    lr_schedule=schedule, micro_batch_tokens=16)
    steps = res.steps
    assert [(s["epoch"], s["mini_batch"], s["step"]) for s in steps] == [(0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3)]
    assert res.stats["optimizer_steps"] == 4 and res.stats["mini_batches"] == 2
    assert res.stats["micro_batches"] >= 2  # 16 tokens: each mini-batch accumulates over micro-batches
    assert steps[0]["ratio_mean"] == pytest.approx(1.0, abs=1e-5) and steps[0]["clip_fraction"] == 0.0
    later = steps[1:]
    assert max(s["clip_fraction"] for s in later) > 0, later
    assert all(s["kl_old"] > 1e-4 for s in steps[2:]), steps  # the second epoch: its own rows already moved
    assert [s["lr"] for s in steps] == pytest.approx([schedule.lr_at(i) for i in range(4)])
    assert steps[0]["lr"] < steps[1]["lr"] == pytest.approx(1e-2)  # warmup, then the cosine decays
    assert steps[3]["lr"] < steps[2]["lr"] < steps[1]["lr"]
    assert res.epochs[-1]["clip_fraction"] == res.stats["clip_fraction"]


def test_each_step_is_clipped_to_max_grad_norm(tokenizer):
    _, model = smollm_lora_policy(b_std=0.02)
    params = _trained(model)
    frozen = torch.optim.SGD(params, lr=0.0)
    res = rl_update(model, frozen, _rows(tokenizer), max_grad_norm=0.01)
    clipped = float(torch.cat([p.grad.flatten() for p in params]).norm())
    assert res.stats["grad_norm"] > 0.1 and clipped == pytest.approx(0.01, rel=1e-3)
    res = rl_update(model, frozen, _rows(tokenizer), max_grad_norm=None)
    assert "grad_norm" not in res.stats
    assert float(torch.cat([p.grad.flatten() for p in params]).norm()) > 0.1


def test_lr_schedule_shapes_follow_transformers():
    from transformers import get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup

    assert LRSchedule(1e-4).inert and not LRSchedule(1e-4, warmup_steps=2).inert
    warm = LRSchedule(1.0, "constant", warmup_steps=3, total_steps=10)
    assert [warm.factor(i) for i in range(5)] == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0])
    p = torch.nn.Parameter(torch.zeros(1))
    for kind, make in (("linear", get_linear_schedule_with_warmup), ("cosine", get_cosine_schedule_with_warmup)):
        sched = LRSchedule(1.0, kind, warmup_steps=2, total_steps=10)
        ref = make(torch.optim.SGD([p], lr=1.0), 2, 10)
        for step in range(2, 10):  # after the warmup: transformers' curve
            assert sched.factor(step) == pytest.approx(ref.lr_lambdas[0](step)), (kind, step)
    assert LRSchedule(1.0, "cosine", 0, 4).factor(2) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="constant, linear, cosine"):
        LRSchedule(1.0, "step")


def test_bf16_weights_train_an_fp32_adapter_on_the_cpu(tokenizer, tmp_path):
    """`dtype=bf16`: the base loads in bf16 (half the memory), the LoRA adapter, its gradients and AdamW's state
    stay fp32 (the master weights); the update's loss is finite and the adapter moves. `auto` is fp32 on a CPU."""
    from clawgym.train.dtypes import resolve_dtype
    from clawgym.train.rl_loop import RLOptions, _trainable_model

    if not torch.cuda.is_available():
        assert resolve_dtype("auto") == "fp32"
    _, model, opt = _trainable_model(RLOptions(dtype="bf16", lr=1e-3), None, "cpu")
    frozen = [p for p in model.parameters() if not p.requires_grad]
    params = _trained(model)
    assert frozen and all(p.dtype == torch.bfloat16 for p in frozen)
    assert params and all(p.dtype == torch.float32 for p in params)
    before = torch.cat([p.detach().flatten() for p in params]).clone()
    res = rl_update(model, opt, _rows(tokenizer), ObjectiveConfig("grpo"))
    assert math.isfinite(res.stats["loss"]) and res.stats["loss"] != 0.0 and math.isfinite(res.stats["grad_norm"])
    assert all(p.grad.dtype == torch.float32 for p in params if p.grad is not None)
    state = [s for s in opt.state.values() if "exp_avg" in s]
    assert state and all(s["exp_avg"].dtype == torch.float32 for s in state)
    assert not torch.equal(before, torch.cat([p.detach().flatten() for p in params]))


@pytest.mark.parametrize("share_prefixes", [False, True], ids=["rows", "prefix-tree"])
def test_gradient_checkpointing_gives_the_same_loss_and_gradient(tokenizer, share_prefixes):
    """Recomputing the activations in the backward pass (the prefix tree's attention included) changes nothing
    but memory; the layers really do run again."""
    _, model = smollm_lora_policy(b_std=0.02)
    params = _trained(model)
    frozen = torch.optim.SGD(params, lr=0.0)
    # inside the checkpointed layer (transformers checkpoints the layer's forward, its own hooks stay outside)
    attn = model.get_base_model().model.layers[0].self_attn
    calls = {"n": 0}
    attn.register_forward_hook(lambda *a: calls.__setitem__("n", calls["n"] + 1))
    out = {}
    for gc in (False, True):
        calls["n"] = 0
        res = rl_update(model, frozen, _rows(tokenizer), max_grad_norm=None, share_prefixes=share_prefixes,
                        gradient_checkpointing=gc)
        out[gc] = (res.stats["loss"], torch.cat([p.grad.flatten() for p in params]).clone(), calls["n"])
    assert out[True][0] == pytest.approx(out[False][0], abs=1e-6)
    assert torch.allclose(out[True][1], out[False][1], atol=1e-6, rtol=1e-4)
    assert out[True][2] > out[False][2]  # the recomputation
    base = model.get_base_model()  # checkpointing is off again, as it was before the update
    assert not (base.is_activation_checkpointing if hasattr(base, "is_activation_checkpointing")
                else base.is_gradient_checkpointing)


def test_tensorboard_events_hold_the_loops_metrics(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from clawgym.train.rl_report import MetricsReport

    steps = [{"step": 4 + i, "epoch": i // 2, "mini_batch": i % 2, "loss": 0.1 * i, "clip_fraction": 0.05 * i,
              "lr": 1e-4} for i in range(4)]
    rows = [{"version": v, "mean_reward": 0.25 * (v + 1), "per_operation": {"toy": 0.5}, "statuses": {"done": 8},
             "skipped": "text is left out", "update_steps": steps} for v in range(2)]
    with MetricsReport(tmp_path, "tensorboard") as rep:
        for row in rows:
            rep.log_iteration(row, steps)
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"mean_reward", "per_operation/toy", "statuses/done", "update/clip_fraction", "update/lr"} <= tags
    assert [(e.step, e.value) for e in acc.Scalars("mean_reward")] == [(0, 0.25), (1, 0.5)]
    clip = acc.Scalars("update/clip_fraction")
    assert [e.step for e in clip][:4] == [4, 5, 6, 7] and clip[3].value == pytest.approx(0.15)


def test_bad_update_settings_are_refused_before_anything_loads(tmp_path):
    from clawgym.core.records import Task
    from clawgym.train.rl_loop import RLError, RLOptions, run_rl

    task = Task.model_validate({"id": "t", "instruction": "x", "verifier": {"code": {"kind": "python",
                                                                                      "source": "def grade(t, w): return {}"}}})
    for opts, msg in ((RLOptions(dtype="fp16"), "--dtype 'fp16': use auto, bf16, fp32"),
                      (RLOptions(report_to="mlflow"), "--report-to 'mlflow'"),
                      (RLOptions(lr_schedule="step"), "lr schedule 'step'"),
                      (RLOptions(mini_batches=0), "mini_batches 0")):
        with pytest.raises(RLError, match=msg):
            run_rl([task], tmp_path / "out", opts, backend=None)
    assert not (tmp_path / "out").exists()


def test_the_loop_steps_per_mini_batch_follows_its_schedule_and_logs_to_tensorboard(bwrap_backend, tmp_path):
    """`train rl` end to end (the embedded server with SmolLM2, real sandboxes and verifiers) with the update's
    options at scale: 2 epochs x 2 mini-batches, a cosine schedule with warmup (bf16 weights and checkpointing
    are tested above, on the loop's own model loading and on the update); its metrics row holds each optimizer step, state.json counts the steps (the schedule's position on
    resume), and the TensorBoard event files hold the iteration's and the steps' metrics."""
    import json

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from clawgym.train.rl_loop import RLOptions, run_rl
    from test_rl_loop import toy_task

    out = tmp_path / "rl"
    opts = RLOptions(samples=4, tasks_per_iter=2, iterations=1, temperature=1.0, max_turns=1, max_tokens=8,
                     lr=1e-3, jobs=4, seed=0, epochs=2, mini_batches=2, lr_schedule="cosine", warmup_steps=1,
                     report_to="tensorboard")
    [row] = run_rl([toy_task(i) for i in range(2)], out, opts, backend=bwrap_backend)
    steps = row["update_steps"]
    assert row["optimizer_steps"] == len(steps) == 4, row  # the v0 rollout of seed 0 has signal in both groups
    assert [(s["epoch"], s["mini_batch"]) for s in steps] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    schedule = LRSchedule(1e-3, "cosine", 1, 4)
    assert [s["lr"] for s in steps] == pytest.approx([schedule.lr_at(i) for i in range(4)])
    # the first step's old policy is the engine's logprobs: the trainer's, to float noise
    assert all(math.isfinite(s["loss"]) for s in steps) and abs(steps[0]["kl_old"]) < 1e-3
    assert json.loads((out / "state.json").read_text())["optimizer_steps"] == 4
    assert (out / "adapters" / "v1" / "adapter_model.safetensors").exists()
    acc = EventAccumulator(str(out / "tensorboard"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("mean_reward")] == [0]
    assert [e.step for e in acc.Scalars("update/lr")] == [0, 1, 2, 3]
