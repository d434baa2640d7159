"""One-step asynchronous rollouts (issue #36): with `--async-rollouts --max-staleness 1`, iteration v + 1's
episodes are made by policy v while v's update runs; their steps are stamped with the policy that made them and
trained one version stale; a run stopped and continued rolls out the same way (the policy of an iteration's
episodes is fixed by the iteration)."""

from __future__ import annotations

import json

import pytest

from clawgym.train.rl_loop import RLError, RLOptions, _behaviour_version, run_rl
from test_rl_loop import model_ready, toy_task  # noqa: F401 (model_ready: a fixture used by name)


def test_the_policy_of_an_iteration_is_fixed_by_the_iteration():
    sync, overlapped = RLOptions(), RLOptions(async_rollouts=True, max_staleness=1)
    assert [_behaviour_version(n, sync) for n in range(4)] == [0, 1, 2, 3]
    assert [_behaviour_version(n, overlapped) for n in range(4)] == [0, 0, 1, 2]


def test_async_rollouts_without_staleness_are_refused(bwrap_backend, tmp_path):
    with pytest.raises(RLError, match="need --max-staleness 1 or more"):
        run_rl([toy_task(0)], tmp_path / "rl", RLOptions(async_rollouts=True), backend=bwrap_backend)
    assert not (tmp_path / "rl" / "state.json").exists()


def test_async_rollouts_overlap_the_update_and_train_one_version_stale(model_ready, bwrap_backend, tmp_path):  # noqa: F811
    from clawgym.pool import Pool

    out = tmp_path / "rl"
    tasks = [toy_task(i) for i in range(2)]
    opts = RLOptions(samples=2, tasks_per_iter=2, iterations=2, temperature=1.0, max_turns=1, max_tokens=8,
                     lr=1e-3, jobs=2, seed=0, async_rollouts=True, max_staleness=1)
    rows = run_rl(tasks, out, opts, backend=bwrap_backend)
    assert [r["published"] for r in rows] == [1, 2]
    # iteration 0 is made by the initial policy, and so is iteration 1 (made during v0's update)
    assert [r["behaviour_policy"] for r in rows] == [0, 0]
    assert [r["overlapped_next_rollout"] for r in rows] == [True, False]
    assert [r["staleness_max"] for r in rows] == [0, 1] and rows[1]["staleness_mean"] == 1.0
    batch1 = [json.loads(x) for x in (out / "batches" / "v1.jsonl").read_text().splitlines()]
    assert batch1 and {r["staleness"] for r in batch1} == {1}
    with Pool(out / "pool") as pool:
        stamped = {(s.group_id.split(".")[0], s.policy_version) for s in pool.steps()}
    assert stamped == {("v0", "0"), ("v1", "0")}

    # continued to 3 versions in a new process: iteration 2 is made by policy 1, which the fresh server is given
    # again (its adapter was retired when v2 was published)
    rows = run_rl(tasks, out, RLOptions(**{**vars(opts), "iterations": 3}), backend=bwrap_backend)
    assert [(r["version"], r["behaviour_policy"], r["staleness_max"]) for r in rows] == [(2, 1, 1)]
    with Pool(out / "pool") as pool:
        assert {s.policy_version for s in pool.steps() if s.group_id.startswith("v2.")} == {"1"}
    assert json.loads((out / "state.json").read_text())["version"] == 3
