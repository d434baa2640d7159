"""RL advantages and losses as plug-ins (clawgym.rl): a third-party distribution (made by tests/plugin_dist.py,
nothing in clawgym edited or imported for it) declares a rank-based advantage and a loss in the
``clawgym.rl_advantages`` / ``clawgym.rl_losses`` entry point groups; the RL export of a real pool and the update
of the real SmolLM2 + LoRA use them by name. The built-in presets' values are pinned in tests/test_credit.py and
tests/test_rl_objective.py."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from clawgym.pool import Pool, export_rl
from clawgym.pool.credit import outcome_advantages, step_advantages
from clawgym.rl import ADVANTAGES, LOSSES, PRESETS, algos, resolve_preset
from clawgym.train.rl_objective import ObjectiveConfig, build_batch, policy_loss, token_logps
from clawgym.train.rl_update import rl_update
from conftest import smollm_lora_policy
from plugin_dist import install_dist
from test_pool import make_step

RANK_SOURCE = '''
from clawgym.rl import register_advantage, register_loss


@register_advantage("rank")
def rank(values, eps):
    """Centered ranks in [-0.5, 0.5] (ties share their mean rank): only the order of the rewards counts."""
    n = len(values)
    if n < 2:
        return [0.0] * n
    order = sorted(range(n), key=lambda i: values[i])
    ranks = [0.0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return [r / (n - 1) - 0.5 for r in ranks]


def sign(values, eps):
    """Not decorated: its entry point alone makes it an advantage (+1 above the group mean, -1 below)."""
    mean = sum(values) / len(values)
    return [(v > mean) - (v < mean) for v in values]


@register_loss("token-sum")
def token_sum(per_token, batch, norm, cfg):
    return (per_token * batch.response_mask).sum()
'''


@pytest.fixture
def rank_plugin(tmp_path, monkeypatch):
    install_dist(tmp_path / "site", monkeypatch, "clawgym-rank-advantage", {"rankplug.algos": RANK_SOURCE},
                 {"clawgym.rl_advantages": {"rank": "rankplug.algos:rank", "sign": "rankplug.algos:sign"},
                  "clawgym.rl_losses": {"token-sum": "rankplug.algos:token_sum"}})
    yield
    ADVANTAGES.remove("rank")
    ADVANTAGES.remove("sign")
    LOSSES.remove("token-sum")


def test_presets_are_one_table_of_an_advantage_and_a_loss():
    assert {a: (p.advantage, p.loss) for a, p in PRESETS.items()} == {
        "grpo": ("grpo", "seq-mean-token-mean"), "dr-grpo": ("dr-grpo", "token-sum-norm"),
        "rloo": ("rloo", "token-mean"), "reinforce++": ("reinforce-pp", "token-mean")}
    assert algos() == ["grpo", "dr-grpo", "rloo", "reinforce++"]
    with pytest.raises(ValueError, match=r"unknown RL preset 'rank'; choose one of grpo, dr-grpo, rloo, reinforce\+\+$"):
        resolve_preset("rank")


def test_a_third_party_advantage_is_listed_without_importing_it(rank_plugin):
    assert algos() == ["grpo", "dr-grpo", "rloo", "reinforce++", "rank", "sign"]
    assert "rankplug.algos" not in sys.modules
    assert resolve_preset("rank").loss == "token-mean"  # not a preset: the default loss
    assert "token-sum" in LOSSES.names() and "rankplug.algos" not in sys.modules
    groups = {"g": {"a": 1.0, "b": 0.0, "c": 0.5, "d": 0.25}, "h": {"x": 1.0}}
    assert outcome_advantages(groups, "sign") == {"a": 1, "b": -1, "c": 1, "d": -1, "x": 0}
    assert step_advantages({"g": {"a": [0.0, 1.0], "b": [0.0]}}, "rank") == {"a": [0.5, 0.0], "b": [-0.5]}


def _pool(root: Path, tok) -> tuple[list[int], dict[str, list[int]]]:
    """One group of four one-step trajectories answering a question with real token ids; rewards 1, 0, .5, .25."""
    text = tok.apply_chat_template([{"role": "user", "content": "Is the sky blue? Answer Yes or No."}],
                                   add_generation_prompt=True, tokenize=False)
    prompt = tok.encode(text, add_special_tokens=False)
    answers = {w: tok.encode(w, add_special_tokens=False) for w in ("Yes", "No", "Maybe", "Perhaps")}
    with Pool(root) as pool:
        for (word, resp), reward in zip(answers.items(), (1.0, 0.0, 0.5, 0.25), strict=True):
            tid = f"t#{word}"
            step = make_step(tid, "g", 0, final=True).model_copy(update={
                "prompt_ids": prompt, "response_ids": resp, "logprobs": None,
                "token_check": {"prompt_ids": len(prompt), "match": True}})
            pool.append_step(step)
            pool.end_trajectory(tid, group_id="g", task_id="task-1", status="completed", reward=reward)
    return prompt, answers


@pytest.fixture(scope="module")
def smollm_lora():
    # imported now, before a test puts the plug-in's distribution on sys.path: plugin_dist swaps sys.modules for
    # the test, which a package as large as trl's (pandas) cannot be first imported under
    import trl.trainer.utils  # noqa: F401

    return smollm_lora_policy()


def test_rl_export_and_update_use_the_third_party_advantage_by_name(rank_plugin, smollm_lora, tmp_path):
    tok, model = smollm_lora
    prompt, answers = _pool(tmp_path / "pool", tok)
    out = tmp_path / "rl.jsonl"
    with Pool(tmp_path / "pool", readonly=True) as pool:
        report = export_rl(pool, out, algo="rank")
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        # ranks of 1, 0, .5, .25 are 3, 0, 2, 1: (rank / 3) - .5
        expected = {"t#Yes": 0.5, "t#No": -0.5, "t#Maybe": 1 / 6, "t#Perhaps": -1 / 6}
        assert report["algo"] == "rank" and report["kept"] == 4
        assert {r["trajectory_id"]: r["advantage"] for r in rows} == pytest.approx(expected)
        export_rl(pool, tmp_path / "step.jsonl", algo="rank", credit="step")  # one step each: the same values
        step_rows = [json.loads(line) for line in (tmp_path / "step.jsonl").read_text().splitlines()]
        assert {r["trajectory_id"]: r["advantage"] for r in step_rows} == pytest.approx(expected)

    def logp(resp: list[int]) -> float:
        b = build_batch([{"prompt_ids": prompt, "response_ids": resp, "advantage": 0.0}])
        with torch.no_grad():
            lp, _ = token_logps(model, b)
        return float((lp * b.response_mask).sum())

    before = {w: logp(ids) for w, ids in answers.items()}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    stats = [rl_update(model, opt, rows, ObjectiveConfig("rank")).stats for _ in range(3)]
    after = {w: logp(ids) for w, ids in answers.items()}
    assert after["Yes"] > before["Yes"] + 0.1, (before, after)  # the best-ranked answer gains
    assert after["No"] < before["No"] - 0.1, (before, after)  # the worst-ranked one loses
    assert stats[0]["tokens"] == sum(len(a) for a in answers.values()) and stats[0]["ratio_mean"] == pytest.approx(1.0)


def test_a_third_party_loss_aggregates_the_token_losses(rank_plugin):
    b = build_batch([{"prompt_ids": [1, 2], "response_ids": [3, 4], "advantage": 1.0,
                      "logprobs": [math.log(0.25), math.log(0.5)]}])
    logps = torch.tensor([[0.0, 0.0, math.log(0.5), math.log(0.5)]])
    # token losses -min(2, 1.2) = -1.2 and -1: the built-in token mean -1.1, the plug-in's sum -2.2
    assert float(policy_loss(logps, b, ObjectiveConfig("rank"))[0]) == pytest.approx(-1.1)
    assert float(policy_loss(logps, b, ObjectiveConfig("rank", loss="token-sum"))[0]) == pytest.approx(-2.2)
    with pytest.raises(Exception, match="unknown RL loss 'nope'"):
        policy_loss(logps, b, ObjectiveConfig("grpo", loss="nope"))
