"""The data pool: appends and queries, outcomes and curation, exports, crash safety, index rebuilds, the CLI.

Everything runs on real files in tmp_path; the crash test kills a real writer process with SIGKILL.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from clawgym.cli.pool_cmd import pool_app
from clawgym.pool import (
    Pool,
    PoolError,
    StepFilter,
    StepRecord,
    TrajectoryFilter,
    export_rl,
    export_sft,
    grpo_advantages,
)

TOOLS = [
    {"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["path"]}}},
    {"type": "function", "function": {"name": "exec", "description": "Run a command.", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
]


def make_step(tid: str, gid: str, idx: int, *, task: str | None = "task-1", ids: bool = True,
              status: str = "ok", final: bool = False) -> StepRecord:
    """A realistic step: the whole conversation so far in the request, a tool call (or a final answer)."""
    messages: list[dict] = [{"role": "system", "content": "You are an agent."},
                            {"role": "user", "content": [{"type": "text", "text": f"Do task {task}."}]}]
    for k in range(idx):
        call_id = f"call_{k}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "read", "arguments": {"path": f"f{k}.txt"}}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": f"contents of f{k}"})
    if final:
        response = {"content": "All done.", "reasoning": "I read the files.", "tool_calls": [],
                    "finish_reason": "stop"}
    else:
        response = {"content": None, "reasoning": None, "finish_reason": "tool_calls", "tool_calls": [
            {"id": f"call_{idx}", "type": "function",
             "function": {"name": "read", "arguments": json.dumps({"path": f"f{idx}.txt"})}}]}
    return StepRecord(
        trajectory_id=tid, group_id=gid, step_index=idx, task_id=task, model="smollm2-135m", policy_version="v1",
        request={"messages": messages, "tools": TOOLS, "params": {"temperature": 0.0}},
        response=response if status == "ok" else {"content": None, "reasoning": None, "tool_calls": [],
                                                  "finish_reason": None},
        prompt_ids=list(range(10 + idx)) if ids else None, response_ids=[7, 8, 9] if ids else None,
        logprobs=[-0.5, -0.25, -0.125] if ids else None, token_source="upstream" if ids else "none",
        token_check={"prompt_ids": 10 + idx, "match": True} if ids else {},
        usage={"prompt_tokens": 10 + idx, "completion_tokens": 3}, timings={"latency_s": 0.01},
        status=status, error=None if status == "ok" else "HTTP 500",
    )


def add_trajectory(pool: Pool, tid: str, gid: str, n: int, **kw) -> None:
    for i in range(n):
        assert pool.next_step_index(tid) == i
        pool.append_step(make_step(tid, gid, i, final=i == n - 1, **kw))


# ----------------------------------------------------------------------------------------- basics


def test_append_and_query(tmp_path: Path) -> None:
    with Pool(tmp_path / "pool") as pool:
        add_trajectory(pool, "t#0", "g", 3)
        add_trajectory(pool, "t#1", "g", 2, task="task-2")
        add_trajectory(pool, "u#0", "h", 1, task="task-3")
        assert pool.next_step_index("t#0") == 3 and pool.next_step_index("nope") == 0
        assert [s.step_id for s in pool.steps()] == ["t#0/0", "t#0/1", "t#0/2", "t#1/0", "t#1/1", "u#0/0"]
        assert [s.step_id for s in pool.steps(trajectory_id="t#1")] == ["t#1/0", "t#1/1"]
        assert [s.step_id for s in pool.steps(group_id="h")] == ["u#0/0"]
        assert [s.step_id for s in pool.steps(task_id="task-2")] == ["t#1/0", "t#1/1"]
        assert [s.step_id for s in pool.steps(limit=2, offset=3)] == ["t#1/0", "t#1/1"]
        step = pool.get_step("t#0/2")
        original = make_step("t#0", "g", 2, final=True)
        assert step.request == original.request and step.prompt_ids == original.prompt_ids
        assert step.response["content"] == "All done."
        # not ended yet: no outcome, not trainable
        assert step.reward is None and step.is_last is False and step.trainable is False
        with pytest.raises(PoolError, match="already in the pool"):
            pool.append_step(make_step("t#0", "g", 1))
        with pytest.raises(PoolError, match="no step"):
            pool.get_step("t#0/9")
        with pytest.raises(ValueError, match="step_id"):
            StepRecord.model_validate({**make_step("t#0", "g", 4).model_dump(), "step_id": "t#0/5"})
        st = pool.stats()
        assert st["steps"] == 6 and st["trajectories"] == 3 and st["ended"] == 0 and st["groups"] == 2
        assert st["token_sources"] == {"upstream": 6} and st["trainable_steps"] == 0
    # the stored line holds no pool-filled field
    line = (tmp_path / "pool" / "steps" / "000001.jsonl").read_text().splitlines()[0]
    assert "reward" not in json.loads(line) and json.loads(line)["step_id"] == "t#0/0"


def test_outcome_attaches_to_steps_and_group_readiness(tmp_path: Path) -> None:
    with Pool(tmp_path / "pool") as pool:
        pool.expect_group("g", 3)
        add_trajectory(pool, "a", "g", 2)
        add_trajectory(pool, "b", "g", 1)
        add_trajectory(pool, "x", "free", 1)
        add_trajectory(pool, "y", "free", 1)
        pool.end_trajectory("a", group_id="g", task_id="task-1", status="completed", reward=1.0,
                            verdict={"status": "scored", "score": 1.0, "passed": True})
        pool.end_trajectory("b", group_id="g", task_id="task-1", status="completed", reward=0.0)
        ready = {g["id"]: g["ready"] for g in pool.groups()}
        assert ready == {"g": False, "free": False}  # g expects 3 and has 2 ended; free has y running
        # the third sample of g died before its first model call: no step, but it ends and counts
        pool.end_trajectory("c", group_id="g", task_id="task-1", status="infra_error", reward=None)
        pool.end_trajectory("x", group_id="free", task_id=None, status="completed", reward=0.5)
        assert [g["id"] for g in pool.groups(ready_only=True)] == ["g"]
        pool.end_trajectory("y", group_id="free", task_id=None, status="timeout", reward=0.0)
        assert [g["id"] for g in pool.groups(ready_only=True)] == ["free", "g"]
        g = next(g for g in pool.groups() if g["id"] == "g")
        assert g["n_trajectories"] == 3 and g["n_ended"] == 3 and g["rewards"] == {"a": 1.0, "b": 0.0}

        steps = pool.steps(trajectory_id="a")
        assert [s.reward for s in steps] == [1.0, 1.0]
        assert steps[0].verdict == {"status": "scored", "score": 1.0, "passed": True}
        assert [s.is_last for s in steps] == [False, True]
        assert all(s.trainable and s.trajectory_status == "completed" for s in steps)
        assert pool.get_step("y/0").trainable is True  # a timeout is a scored sample
        trajs = {t["id"]: t for t in pool.trajectories()}
        assert trajs["c"]["n_steps"] == 0 and trajs["c"]["trainable"] is False and trajs["c"]["ended"]
        assert trajs["x"]["task"] == "task-1"  # from its steps, the end event had none
        st = pool.stats()
        assert st["ended"] == 5 and st["ready_groups"] == 2 and st["trainable_steps"] == 5
        assert st["trainable_trajectories"] == 4


def test_curation_flags_events_and_defaults(tmp_path: Path) -> None:
    with Pool(tmp_path / "pool") as pool:
        add_trajectory(pool, "a", "g", 3)
        add_trajectory(pool, "b", "g", 2)
        pool.append_step(make_step("b", "g", 2, status="error"))
        pool.end_trajectory("a", group_id="g", task_id="task-1", status="completed", reward=1.0)
        pool.end_trajectory("b", group_id="g", task_id="task-1", status="completed", reward=0.0)
        assert pool.get_step("b/2").trainable is False  # a failed call is never trainable by default
        assert pool.stats()["trainable_steps"] == 5

        ev = pool.curate(trajectory_id="a", quality="suspect", add_tags=["odd", "look"], note="loops", by="judge")
        assert ev["type"] == "curate" and ev["by"] == "judge" and ev["trajectory_id"] == "a"
        pool.curate(step_id="b/0", trainable=False, add_tags=["dup"])
        pool.curate(trajectory_id="a", remove_tags=["look"])
        a = pool.trajectories(trajectory_id="a")[0]
        assert a["quality"] == "suspect" and a["tags"] == ["odd"] and a["notes"][0]["note"] == "loops"
        assert [s.step_id for s in pool.steps(tag="odd")] == ["a/0", "a/1", "a/2"]
        assert [s.step_id for s in pool.steps(tag="dup")] == ["b/0"]
        assert pool.get_step("b/0").tags == ["dup"] and pool.get_step("a/1").quality == "suspect"
        assert [s.step_id for s in pool.steps(trainable=False)] == ["b/0", "b/2"]
        assert pool.stats()["trainable_steps"] == 4
        pool.curate(trajectory_id="b", trainable=False)
        assert [t["id"] for t in pool.trajectories(trainable=True)] == ["a"]
        pool.curate(step_id="b/1", trainable=True)  # a step's own flag wins over its trajectory's
        assert [s.step_id for s in pool.steps(trainable=True)] == ["a/0", "a/1", "a/2", "b/1"]
        assert pool.stats()["trainable_steps"] == 4

        log = pool.events()
        assert [e["type"] for e in log] == ["trajectory_end"] * 2 + ["curate"] * 5
        assert [e["seq"] for e in log] == list(range(1, 8)) and len(pool.events(2)) == 2
        assert [e["seq"] for e in pool.events(trajectory_id="b", type="curate")] == [4, 6, 7]
        with pytest.raises(PoolError, match="nothing to change"):
            pool.curate(trajectory_id="a")
        with pytest.raises(PoolError, match="no trajectory"):
            pool.curate(trajectory_id="zzz", quality="bad")
        with pytest.raises(PoolError, match="exactly one"):
            pool.curate(trajectory_id="a", step_id="a/0", quality="bad")
    lines = (tmp_path / "pool" / "events.jsonl").read_text().splitlines()
    assert len(lines) == 7 and json.loads(lines[-1])["step_id"] == "b/1"


def test_one_query_api_filters_sorts_and_pages(tmp_path: Path) -> None:
    """TrajectoryFilter / StepFilter (clawgym.pool.index): the filters of Pool's listings and of the viewer's."""
    with Pool(tmp_path / "pool") as pool:
        for tid, gid, n, reward in (("a_1", "g", 3, 1.0), ("a%2", "g", 1, 0.0), ("b", "h", 2, None), ("c", "h", 1, 0.5)):
            add_trajectory(pool, tid, gid, n)
            if tid != "b":
                pool.end_trajectory(tid, group_id=gid, task_id="task-1", status="completed", reward=reward)
        pool.curate(trajectory_id="c", quality="good", add_tags=["keep"])
        pool.curate(trajectory_id="a%2", trainable=False)

        def ids(**kw) -> list[str]:
            flt = TrajectoryFilter(**kw)
            got = pool.trajectory_ids(flt)
            assert pool.count_trajectories(flt) == len(got)
            assert [t["id"] for t in pool.trajectories(where=flt)] == got
            return got

        assert ids() == ["a%2", "a_1", "b", "c"]
        assert ids(q="_") == ["a_1"] and ids(q="%") == ["a%2"]  # LIKE's wildcards are escaped
        assert ids(unrated=True) == ["a%2", "a_1", "b"] and ids(quality="good") == ["c"]
        assert ids(trainable=True) == ["a_1", "c"] and ids(ended=False) == ["b"]
        assert ids(min_reward=0.5) == ["a_1", "c"] and ids(max_reward=0.5, group_id="g") == ["a%2"]
        assert ids(curated=True) == ["a%2", "c"] and ids(curated=False) == ["a_1", "b"]
        assert ids(ids=("c", "b", "zz")) == ["b", "c"] and ids(tag="keep") == ["c"]
        # sorted: NULLs last whatever the direction, ties by id; pages over the sorted ids
        assert pool.trajectory_ids(sort="reward", desc=True) == ["a_1", "c", "a%2", "b"]
        assert pool.trajectory_ids(sort="reward") == ["a%2", "c", "a_1", "b"]
        assert pool.trajectory_ids(sort="steps", desc=True, offset=1, limit=2) == ["b", "a%2"]
        assert pool.trajectory_ids(sort="no such column") == ["a%2", "a_1", "b", "c"]
        assert [t["id"] for t in pool.trajectories(where=TrajectoryFilter(group_id="h"), ended=True)] == ["c"]
        with pytest.raises(PoolError, match="'group_id' is given twice"):
            pool.trajectories(where=TrajectoryFilter(group_id="h"), group_id="g")

        flt = StepFilter(group_id="g", trainable=True)
        assert [s.step_id for s in pool.steps(where=flt)] == ["a_1/0", "a_1/1", "a_1/2"]
        assert [r.step_id for r in pool.iter_step_rows(where=flt, trajectory_id="a_1")] == ["a_1/0", "a_1/1", "a_1/2"]
        assert [s.step_id for s in pool.steps(where=StepFilter(quality="good"))] == ["c/0"]
        assert pool.groups(group_id="h") == [g for g in pool.groups() if g["id"] == "h"]
        assert pool.groups(group_id="h")[0]["rewards"] == {"c": 0.5} and pool.groups(group_id="zz") == []


def test_threads_append_concurrently(tmp_path: Path) -> None:
    with Pool(tmp_path / "pool", segment_bytes=20_000) as pool:
        def run(k: int) -> None:
            for i in range(30):
                pool.append_step(make_step(f"t{k}", "g", i))

        threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert pool.stats()["steps"] == 240 and pool.stats()["segments"] > 5
        for k in range(8):
            assert [s.step_index for s in pool.steps(trajectory_id=f"t{k}")] == list(range(30))


def test_second_writer_and_reader_share_a_pool(tmp_path: Path) -> None:
    root = tmp_path / "pool"
    gateway = Pool(root)
    add_trajectory(gateway, "a", "g", 2)
    reader = Pool(root, readonly=True)
    shell = Pool(root)  # e.g. `clawgym pool curate` while the gateway runs
    shell.curate(trajectory_id="a", quality="good")
    gateway.append_step(make_step("a", "g", 2))
    gateway.end_trajectory("a", group_id="g", task_id="task-1", status="completed", reward=1.0)
    shell.curate(step_id="a/2", add_tags=["late"])
    add_trajectory(gateway, "b", "g", 1)
    assert reader.stats()["steps"] == 4 and reader.get_step("a/2").tags == ["late"]
    assert reader.get_step("a/0").quality == "good" and reader.get_step("a/1").reward == 1.0
    assert [e["type"] for e in reader.events()] == ["curate", "trajectory_end", "curate"]
    with pytest.raises(PoolError, match="read-only"):
        reader.curate(trajectory_id="a", quality="bad")
    for p in (gateway, reader, shell):
        p.close()
    with Pool(root) as pool:
        assert pool.recovery["indexed_steps"] == 0 and pool.stats()["steps"] == 4


# ----------------------------------------------------------------------------------------- exports


def _build_groups(pool: Pool) -> None:
    # group A: four samples, rewards 1, 0, .5, .5; a3's steps have no token ids
    for tid, r in (("a0", 1.0), ("a1", 0.0), ("a2", 0.5), ("a3", 0.5)):
        add_trajectory(pool, tid, "A", 2, ids=tid != "a3")
        pool.end_trajectory(tid, group_id="A", task_id="task-1", status="completed", reward=r)
    # group B: equal rewards; group C: a single sample
    for tid in ("b0", "b1"):
        add_trajectory(pool, tid, "B", 1, task="task-2")
        pool.end_trajectory(tid, group_id="B", task_id="task-2", status="completed", reward=1.0)
    add_trajectory(pool, "c0", "C", 3, task="task-3")
    pool.end_trajectory("c0", group_id="C", task_id="task-3", status="completed", reward=0.25)
    # group D: expects 2, one still running
    pool.expect_group("D", 2)
    add_trajectory(pool, "d0", "D", 1, task="task-4")
    pool.end_trajectory("d0", group_id="D", task_id="task-4", status="completed", reward=1.0)
    add_trajectory(pool, "d1", "D", 1, task="task-4")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rl_export_grpo_advantages(tmp_path: Path) -> None:
    with Pool(tmp_path / "pool") as pool:
        _build_groups(pool)
        report = export_rl(pool, tmp_path / "rl.jsonl")
        rows = _rows(tmp_path / "rl.jsonl")
        adv = {r["trajectory_id"]: r["advantage"] for r in rows}
        # hand-computed, group A: mean 0.5, sample std sqrt((.25 + .25 + 0 + 0) / 3) = 0.40824829
        std = math.sqrt(0.5 / 3)
        assert std == pytest.approx(0.4082482905)
        assert adv["a0"] == pytest.approx(0.5 / (std + 1e-6), abs=1e-9) == pytest.approx(1.2247418, abs=1e-6)
        assert adv["a1"] == pytest.approx(-1.2247418, abs=1e-6) and adv["a2"] == 0.0
        assert adv["b0"] == adv["b1"] == 0.0 and adv["c0"] == 0.0 and adv["d0"] == 0.0  # std 0 / single
        assert "a3" not in adv and "d1" not in adv
        assert report["kept"] == len(rows) == 2 + 2 + 2 + 1 + 1 + 3 + 1
        assert report["dropped"] == {"no token ids": 2, "trajectory not ended": 1}
        # where the kept steps' ids came from is counted (issue #34: the export says so)
        assert sum(report["token_ids"].values()) == report["kept"]
        assert set(report["token_ids"]) == {"engine" if r["token_source"] == "upstream" else r["token_source"]
                                            for r in rows}
        r = next(r for r in rows if r["step_id"] == "a0/1")
        assert r["prompt_ids"] == list(range(11)) and r["response_ids"] == [7, 8, 9]
        assert r["response_mask"] == [1, 1, 1] and r["logprobs"] == [-0.5, -0.25, -0.125]
        assert r["reward"] == 1.0 and r["is_last"] is True and r["group_id"] == "A" and r["policy_version"] == "v1"
        assert [r["is_last"] for r in rows if r["trajectory_id"] == "c0"] == [False, False, True]

        # ready groups only: D is not ready
        report = export_rl(pool, tmp_path / "rl.jsonl", ready_groups_only=True)
        assert "d0" not in {r["trajectory_id"] for r in _rows(tmp_path / "rl.jsonl")}
        assert report["dropped"]["group not ready"] == 1

        # curation: a1 judged bad leaves the file and the baseline of A (now 1, .5, .5)
        pool.curate(trajectory_id="a1", quality="bad", by="judge")
        pool.curate(step_id="a0/0", trainable=False)
        report = export_rl(pool, tmp_path / "rl.jsonl", min_reward=0.5)
        rows = _rows(tmp_path / "rl.jsonl")
        adv = {r["trajectory_id"]: r["advantage"] for r in rows}
        want = grpo_advantages({"a0": 1.0, "a2": 0.5, "a3": 0.5})
        assert adv["a0"] == pytest.approx(want["a0"]) == pytest.approx(0.5 / (math.sqrt(1 / 12) + 1e-6) * 2 / 3)
        assert {r["step_id"] for r in rows if r["trajectory_id"] == "a0"} == {"a0/1"}
        assert "a1" not in adv and "c0" not in adv  # bad; below min_reward
        assert report["dropped"]["trajectory quality=bad"] == 2 and report["dropped"]["reward below min_reward"] == 3
        assert report["dropped"]["step curated not trainable"] == 1


def test_sft_export_loads_with_datasets(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    with Pool(tmp_path / "pool") as pool:
        _build_groups(pool)
        pool.curate(trajectory_id="b1", trainable=False)
        report = export_sft(pool, tmp_path / "sft.jsonl")
        assert report["kept"] == 7 and report["dropped"] == {"trajectory curated not trainable": 1,
                                                            "trajectory not ended": 1}
        rows = {r["trajectory_id"]: r for r in _rows(tmp_path / "sft.jsonl")}
        c0 = rows["c0"]
        assert c0["task_id"] == "task-3" and c0["reward"] == 0.25 and c0["tools"] == TOOLS
        roles = [m["role"] for m in c0["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
        assert c0["messages"][1]["content"] == "Do task task-3."  # content parts joined
        call = c0["messages"][2]["tool_calls"][0]
        assert call["function"] == {"name": "read", "arguments": '{"path": "f0.txt"}'}  # arguments as a string
        assert c0["messages"][-1] == {"role": "assistant", "content": "All done.",
                                      "reasoning_content": "I read the files."}
        assert rows["a0"]["messages"][-1]["content"] == "All done."
        # min_reward keeps only the good ones
        assert export_sft(pool, tmp_path / "good.jsonl", min_reward=1.0)["kept"] == 3
    ds = datasets.load_dataset("json", data_files=str(tmp_path / "sft.jsonl"), split="train",
                               cache_dir=str(tmp_path / "hf-cache"))
    assert ds.num_rows == 7 and set(ds.column_names) >= {"messages", "tools", "trajectory_id", "reward"}
    row = ds.filter(lambda r: r["trajectory_id"] == "c0")[0]
    assert [m["role"] for m in row["messages"]][-3:] == ["assistant", "tool", "assistant"]
    assert row["messages"][4]["tool_calls"][0]["function"]["name"] == "read"
    assert row["tools"][1]["function"]["name"] == "exec"


def test_export_is_atomic(tmp_path: Path) -> None:
    out = tmp_path / "rl.jsonl"
    out.write_text("previous\n")
    with Pool(tmp_path / "pool", segment_bytes=5_000) as pool:
        _build_groups(pool)
        segs = sorted((tmp_path / "pool" / "steps").glob("*.jsonl"))
        os.truncate(segs[len(segs) // 2], 0)  # the data under the index vanishes: the export fails part way
        with pytest.raises(PoolError, match="short read"):
            export_rl(pool, out)
    assert out.read_text() == "previous\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ----------------------------------------------------------------------------------------- crash safety

WRITER = textwrap.dedent("""
    import sys, threading
    from clawgym.pool import Pool
    sys.path.insert(0, sys.argv[2])
    from test_pool import make_step

    pool = Pool(sys.argv[1], segment_bytes=60_000)
    out_lock = threading.Lock()

    def run(k):
        i = 0
        while True:
            tid = f"w{k}-{i // 5}"
            pool.append_step(make_step(tid, f"g{k}", i % 5))
            with out_lock:
                print(f"{tid}/{i % 5}", flush=True)
            if i % 5 == 4:
                pool.end_trajectory(tid, group_id=f"g{k}", task_id="task-1", status="completed", reward=1.0)
            i += 1

    for k in range(3):
        threading.Thread(target=run, args=(k,), daemon=True).start()
    threading.Event().wait()
""")


def test_sigkill_writer_loses_no_completed_append(tmp_path: Path) -> None:
    root = tmp_path / "pool"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.Popen([sys.executable, str(script), str(root), str(Path(__file__).parent)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed: list[str] = []
    deadline = time.monotonic() + 20
    try:
        while len(printed) < 400 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            printed.append(line.strip())
        os.kill(proc.pid, signal.SIGKILL)
        rest, errors = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    printed += [x for x in rest.splitlines() if x]
    assert len(printed) >= 400, errors[-2000:]
    assert proc.returncode == -signal.SIGKILL

    # simulate the worst kill: a half-written line at the end of the last segment and of the event log
    segs = sorted((root / "steps").glob("*.jsonl"))
    assert len(segs) > 3
    whole = make_step("late", "g9", 0).stored_json()
    with open(segs[-1], "ab") as fh:
        fh.write(whole[: len(whole) // 2].encode())
    with open(root / "events.jsonl", "ab") as fh:
        fh.write(b'{"type": "trajectory_end", "traj')
    size_before = segs[-1].stat().st_size

    with Pool(root) as pool:
        rec = pool.recovery
        assert not rec["rebuilt"] and rec["bad_lines"] == []
        # (>=: the kill itself may, rarely, have torn the same line)
        assert rec["torn_bytes"][str(segs[-1])] >= len(whole) // 2
        assert rec["torn_bytes"][str(root / "events.jsonl")] >= len(b'{"type": "trajectory_end", "traj')
        assert segs[-1].stat().st_size <= size_before - len(whole) // 2
        assert segs[-1].stat().st_size == 0 or segs[-1].read_bytes().endswith(b"\n")
        stored = {s.step_id for s in pool.steps()}
        missing = [s for s in printed if s not in stored]
        assert not missing, f"{len(missing)} completed appends lost, e.g. {missing[:3]}"
        assert pool.stats()["steps"] == len(stored) >= len(printed)
        # every trajectory's steps are contiguous, so the writer can carry on numbering
        for t in pool.trajectories():
            assert [s.step_index for s in pool.steps(trajectory_id=t["id"])] == list(range(t["n_steps"]))
        last = pool.trajectories()[-1]
        tid, n = last["id"], pool.next_step_index(last["id"])
        pool.append_step(make_step(tid, last["group"], n))
        assert pool.get_step(f"{tid}/{n}").step_index == n
        before = _answers(pool)
        report = pool.rebuild_index()
        assert report["rebuilt"] and report["indexed_steps"] == len(stored) + 1 and report["bad_lines"] == []
        assert _answers(pool) == before


def test_unindexed_tail_is_caught_up(tmp_path: Path) -> None:
    """A writer killed after its JSONL write but before the index commit: the next open indexes the line."""
    root = tmp_path / "pool"
    with Pool(root) as pool:
        add_trajectory(pool, "a", "g", 2)
    seg = root / "steps" / "000001.jsonl"
    with open(seg, "a") as fh:
        fh.write(make_step("a", "g", 2).stored_json() + "\n")
    with open(root / "events.jsonl", "a") as fh:
        fh.write(json.dumps({"type": "trajectory_end", "trajectory_id": "a", "group_id": "g", "task_id": None,
                             "status": "completed", "reward": 0.5, "verdict": None,
                             "ended_at": "2026-01-01T00:00:00Z"}) + "\n")
    (root / "steps" / "000002.jsonl").touch()  # killed right after rolling to a new segment
    with Pool(root) as pool:
        assert pool.recovery["indexed_steps"] == 1 and pool.recovery["indexed_events"] == 1
        assert [s.reward for s in pool.steps(trajectory_id="a")] == [0.5] * 3
        assert pool.next_step_index("a") == 3
        pool.append_step(make_step("a", "g", 3))
        assert (root / "steps" / "000002.jsonl").stat().st_size > 0  # the writer carries on in the new one
        before = _answers(pool)
        pool.rebuild_index()
        assert _answers(pool) == before and before["stats"]["segments"] == 2


def _answers(pool: Pool) -> dict:
    st = pool.stats()
    st.pop("bytes")
    return {
        "steps": [s.model_dump() for s in pool.steps()],
        "trajectories": pool.trajectories(), "groups": pool.groups(), "events": pool.events(), "stats": st,
    }


def test_rebuild_index_gives_the_same_answers(tmp_path: Path) -> None:
    root = tmp_path / "pool"
    with Pool(root, segment_bytes=10_000) as pool:
        _build_groups(pool)
        pool.curate(trajectory_id="a1", quality="bad", add_tags=["x"], note="n")
        pool.curate(step_id="c0/1", trainable=False, add_tags=["y"])
        pool.end_trajectory("a2", group_id="A", task_id="task-1", status="completed", reward=0.75)  # re-scored
        before = _answers(pool)
        rl_before = export_rl(pool, tmp_path / "rl1.jsonl")
        report = pool.rebuild_index()
        assert report["indexed_steps"] == before["stats"]["steps"] == 15
        assert report["indexed_events"] == len(before["events"]) == 12
        assert _answers(pool) == before
        assert export_rl(pool, tmp_path / "rl2.jsonl") == {**rl_before, "path": str(tmp_path / "rl2.jsonl")}
    assert (tmp_path / "rl1.jsonl").read_bytes() == (tmp_path / "rl2.jsonl").read_bytes()
    # a deleted index is rebuilt on open; a garbage index is moved aside and rebuilt
    for p in root.glob("index.sqlite*"):
        p.unlink()
    with Pool(root) as pool:
        assert pool.recovery["rebuilt"] and _answers(pool) == before
    for p in root.glob("index.sqlite*"):
        p.unlink()
    (root / "index.sqlite").write_bytes(b"this is not a database" * 100)
    with Pool(root) as pool:
        assert pool.recovery["rebuilt"] and _answers(pool) == before
    assert list(root.glob("index.sqlite.corrupt-*"))


def test_bad_lines_are_skipped_and_reported(tmp_path: Path) -> None:
    root = tmp_path / "pool"
    with Pool(root) as pool:
        add_trajectory(pool, "a", "g", 2)
    seg = root / "steps" / "000001.jsonl"
    good = make_step("a", "g", 3).stored_json()
    bad_field = json.loads(make_step("a", "g", 4).stored_json())
    bad_field["step_index"] = "four"
    with open(seg, "a") as fh:
        fh.write('{"step_id": "a/2", garbled\n')
        fh.write(good + "\n")
        fh.write(json.dumps(bad_field) + "\n")
        fh.write(make_step("a", "g", 0).stored_json() + "\n")  # a duplicate
    with open(root / "events.jsonl", "a") as fh:
        fh.write('{"type": "explode"}\n')
    with Pool(root) as pool:
        errors = pool.recovery["bad_lines"]
        assert len(errors) == 4
        assert errors[0].startswith(f"{seg}:3: not valid JSON")
        assert errors[1].startswith(f"{seg}:5: step_index: ")
        assert errors[2].startswith(f"{seg}:6: step_id: duplicate step 'a/0' (first at steps/000001.jsonl:1)")
        assert errors[3].startswith(f"{root / 'events.jsonl'}:1: ")
        assert [s.step_id for s in pool.steps()] == ["a/0", "a/1", "a/3"]
        assert pool.stats()["bad_lines"] == 4
        assert [(b["file"], b["line"]) for b in pool.bad_lines()] == [
            ("events.jsonl", 1), ("steps/000001.jsonl", 3), ("steps/000001.jsonl", 5), ("steps/000001.jsonl", 6)]
        pool.append_step(make_step("a", "g", 4))  # the pool goes on
    with Pool(root) as pool:  # reported once, remembered; a rebuild finds them again
        assert pool.recovery["bad_lines"] == [] and pool.stats()["bad_lines"] == 4
        assert len(pool.rebuild_index()["bad_lines"]) == 4
        assert pool.get_step("a/4").step_index == 4


def test_open_errors(tmp_path: Path) -> None:
    with pytest.raises(PoolError, match="no such pool"):
        Pool(tmp_path / "missing", create=False)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "file.txt").write_text("x")
    with pytest.raises(PoolError, match="not a pool"):
        Pool(tmp_path / "other")
    with pytest.raises(PoolError, match="no such pool"):
        Pool(tmp_path / "missing", readonly=True)


# ----------------------------------------------------------------------------------------- CLI


def test_cli(tmp_path: Path) -> None:
    app = typer.Typer()
    app.add_typer(pool_app, name="pool")

    @app.callback()
    def _root() -> None:
        pass

    root = tmp_path / "pool"
    with Pool(root) as pool:
        _build_groups(pool)
    run = CliRunner().invoke
    r = run(app, ["pool", "stats", str(root), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["steps"] == 15
    r = run(app, ["pool", "list", str(root), "--group", "A", "--json"])
    assert [t["id"] for t in json.loads(r.stdout)] == ["a0", "a1", "a2", "a3"]
    r = run(app, ["pool", "list", str(root), "--trajectory", "c0", "--json"])
    assert [s["step_id"] for s in json.loads(r.stdout)] == ["c0/0", "c0/1", "c0/2"]
    r = run(app, ["pool", "list", str(root), "--not-trainable"])
    assert r.exit_code == 0 and "d1" in r.stdout and "a0" not in r.stdout
    r = run(app, ["pool", "show", str(root), "c0/2"])
    assert r.exit_code == 0 and "All done." in r.stdout and "upstream" in r.stdout and "f1.txt" in r.stdout
    r = run(app, ["pool", "curate", str(root), "--trajectory", "a1", "--quality", "bad", "--tag", "x",
                  "--note", "reward hacking"])
    assert r.exit_code == 0, r.output
    r = run(app, ["pool", "export", str(root), "--format", "rl", "-o", str(tmp_path / "rl.jsonl"), "--ready-only"])
    assert r.exit_code == 0 and "dropped 2: trajectory quality=bad" in r.stdout, r.output
    r = run(app, ["pool", "export", str(root), "--format", "sft", "-o", str(tmp_path / "sft.jsonl"),
                  "--min-reward", "1", "--json"])
    assert json.loads(r.stdout)["kept"] == 4  # a0, b0, b1, d0
    for args, msg, code in (
        (["stats", str(tmp_path / "nope")], "no such pool directory", 1),
        (["show", str(root), "zz/0"], "no step 'zz/0'", 1),
        (["curate", str(root), "--step", "a0/0"], "nothing to change", 1),
        (["curate", str(root), "--step", "a0/0", "--trajectory", "a0", "--quality", "x"], "exactly one", 2),
    ):
        r = run(app, ["pool", *args])
        assert r.exit_code == code and msg in r.output, (args, r.output)
