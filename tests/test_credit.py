"""Credit assignment (clawgym.pool.credit): every preset and both credit modes against hand-computed values,
and the RL export of a real pool with them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgym.cli.app import app
from clawgym.pool import Pool
from clawgym.pool.credit import (
    discounted_returns,
    outcome_advantages,
    outcome_step_rewards,
    step_advantages,
)
from test_pool import add_trajectory

EPS = 1e-6
# one group of four: rewards 1, 0, .5, .5 -> mean .5, sample std sqrt((.25 + .25) / 3)
GROUP = {"A": {"a": 1.0, "b": 0.0, "c": 0.5, "d": 0.5}}
STD = math.sqrt(0.5 / 3)


def test_outcome_grpo_by_hand():
    adv = outcome_advantages(GROUP, "grpo")
    assert adv["a"] == pytest.approx(0.5 / (STD + EPS)) == pytest.approx(1.2247418, abs=1e-6)
    assert adv["b"] == pytest.approx(-1.2247418, abs=1e-6)
    assert adv["c"] == adv["d"] == 0.0


def test_outcome_dr_grpo_by_hand():
    assert outcome_advantages(GROUP, "dr-grpo") == {"a": 0.5, "b": -0.5, "c": 0.0, "d": 0.0}


def test_outcome_rloo_by_hand():
    adv = outcome_advantages(GROUP, "rloo")
    # a: 1 - (0 + .5 + .5) / 3; b: 0 - (1 + .5 + .5) / 3; c: .5 - (1 + 0 + .5) / 3
    assert adv["a"] == pytest.approx(2 / 3) and adv["b"] == pytest.approx(-2 / 3)
    assert adv["c"] == pytest.approx(0.0) and adv["d"] == pytest.approx(0.0)


def test_outcome_reinforce_pp_normalizes_over_the_batch_by_hand():
    groups = {"G1": {"a": 1.0, "b": 0.0}, "G2": {"c": 1.0, "d": 1.0, "e": 0.0}}
    adv = outcome_advantages(groups, "reinforce++")
    # group baselines: .5, -.5 | 1/3, 1/3, -2/3; batch mean 0, sample std sqrt((.25+.25+1/9+1/9+4/9)/4)
    std = math.sqrt((0.5 + 6 / 9) / 4)
    assert std == pytest.approx(0.5400617, abs=1e-6)
    assert adv["a"] == pytest.approx(0.5 / (std + EPS)) == pytest.approx(0.9258184, abs=1e-5)
    assert adv["e"] == pytest.approx((-2 / 3) / (std + EPS))
    assert sum(adv.values()) == pytest.approx(0.0, abs=1e-9)


def test_single_samples_and_equal_rewards_give_zero():
    for algo in ("grpo", "dr-grpo", "rloo", "reinforce++"):
        assert outcome_advantages({"g": {"x": 1.0}}, algo) == {"x": 0.0}
        assert outcome_advantages({"g": {"x": 0.5, "y": 0.5}}, algo) == {"x": 0.0, "y": 0.0}


def test_unknown_preset_is_refused():
    with pytest.raises(ValueError, match="unknown RL preset 'ppo'"):
        outcome_advantages(GROUP, "ppo")


def test_discounted_returns_by_hand():
    assert discounted_returns([0, 0, 1], 0.5) == [0.25, 0.5, 1.0]
    assert discounted_returns([1, 2, 3], 1.0) == [6.0, 5.0, 3.0]
    assert outcome_step_rewards(3, 0.7) == [0.0, 0.0, 0.7] and outcome_step_rewards(0, 1.0) == []


# step credit: x has 3 steps and reward 1, y one step and reward 0, z two steps and reward 1; gamma .5
# returns: x [.25, .5, 1], y [0], z [.5, 1]; step 0 over {x, y, z}, step 1 over {x, z}, step 2 over {x}
STEP_GROUP = {"g": {"x": outcome_step_rewards(3, 1.0), "y": outcome_step_rewards(1, 0.0),
                    "z": outcome_step_rewards(2, 1.0)}}


def test_step_credit_dr_grpo_by_hand():
    adv = step_advantages(STEP_GROUP, "dr-grpo", gamma=0.5)
    assert adv["x"] == pytest.approx([0.0, -0.25, 0.0])
    assert adv["y"] == pytest.approx([-0.25])
    assert adv["z"] == pytest.approx([0.25, 0.25])


def test_step_credit_grpo_by_hand():
    adv = step_advantages(STEP_GROUP, "grpo", gamma=0.5)
    # step 0: (.25, 0, .5), mean .25, std .25; step 1: (.5, 1), mean .75, std sqrt(.125); step 2: alone -> 0
    s1 = math.sqrt(0.125)
    assert adv["x"] == pytest.approx([0.0, -0.25 / (s1 + EPS), 0.0])
    assert adv["y"] == pytest.approx([-0.25 / (0.25 + EPS)])
    assert adv["z"] == pytest.approx([0.25 / (0.25 + EPS), 0.25 / (s1 + EPS)])


def test_step_credit_with_gamma_1_and_equal_lengths_is_outcome_credit():
    groups = {"g": {t: outcome_step_rewards(2, r) for t, r in GROUP["A"].items()}}
    for algo in ("grpo", "dr-grpo", "rloo", "reinforce++"):
        steps = step_advantages(groups, algo, gamma=1.0)
        flat = outcome_advantages(GROUP, algo)
        for t in GROUP["A"]:
            if algo == "reinforce++":  # the batch is every step here, not every trajectory: same up to scale
                assert math.copysign(1, steps[t][0]) == math.copysign(1, flat[t]) or flat[t] == 0
            else:
                assert steps[t] == pytest.approx([flat[t], flat[t]])


def _pool_with_lengths(root: Path) -> None:
    with Pool(root) as pool:
        for tid, n, r in (("x", 3, 1.0), ("y", 1, 0.0), ("z", 2, 1.0)):
            add_trajectory(pool, tid, "g", n)
            pool.end_trajectory(tid, group_id="g", task_id="task-1", status="completed", reward=r)


def _export(root: Path, out: Path, *args: str) -> dict[str, list[float]]:
    res = CliRunner().invoke(app, ["pool", "export", str(root), "--format", "rl", "-o", str(out), "--json", *args])
    assert res.exit_code == 0, res.output
    got: dict[str, list[float]] = {}
    for line in out.read_text().splitlines():
        row = json.loads(line)
        got.setdefault(row["trajectory_id"], []).append((row["step_index"], row["advantage"]))
    return {t: [a for _, a in sorted(v)] for t, v in got.items()}


def test_pool_export_step_credit_and_presets_match_hand_values(tmp_path):
    root = tmp_path / "pool"
    _pool_with_lengths(root)
    adv = _export(root, tmp_path / "rl.jsonl", "--credit", "step", "--algo", "dr-grpo", "--gamma", "0.5")
    assert adv["x"] == pytest.approx([0.0, -0.25, 0.0]) and adv["y"] == pytest.approx([-0.25])
    assert adv["z"] == pytest.approx([0.25, 0.25])
    # outcome credit, rloo: x 1 - (0 + 1) / 2 = .5, y 0 - 1 = -1, z .5, on every step
    adv = _export(root, tmp_path / "rl.jsonl", "--algo", "rloo")
    assert adv == {"x": [0.5, 0.5, 0.5], "y": [-1.0], "z": [0.5, 0.5]}


def test_pool_export_refuses_unknown_preset(tmp_path):
    root = tmp_path / "pool"
    _pool_with_lengths(root)
    res = CliRunner().invoke(app, ["pool", "export", str(root), "--format", "rl", "-o", str(tmp_path / "o.jsonl"),
                                   "--algo", "ppo"])
    assert res.exit_code != 0 and "--algo 'ppo'" in res.output
    assert not (tmp_path / "o.jsonl").exists()
