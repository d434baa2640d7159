"""`clawgym export hf-dataset`: tasks, SFT data and trajectories written as a Hugging Face dataset folder that the
real `datasets.load_dataset` reads back (and trl takes as conversational), and `--push-to-hub` through the real
huggingface_hub upload code, refused in one line without a token, offline, or with the Hub out of reach."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_conversations import CONVERSATIONS, write_lines
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task, Trajectory, Verdict
from clawgym.hf.dataset import DATA_FILE, conversation_from_row
from conftest import datasets_root, require

pytest.importorskip("datasets")


def cli(*args: Any, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE"))}  # no token, cache...
    return subprocess.run([sys.executable, "-m", "clawgym", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**base, "COLUMNS": "200", **(env or {})})


def load(folder: Path, cache: Path):
    from datasets import load_dataset

    return load_dataset(str(folder), split="train", cache_dir=str(cache))


def test_tasks_dataset_loads_back_to_the_same_tasks(tmp_path: Path) -> None:
    root = datasets_root() / "clawgym-train-sample"
    require(root.is_dir(), f"clawgym-train-sample not found at {root} (set CLAWGYM_DATASETS)")
    assert cli("import", "clawgym", root, "-o", tmp_path / "tasks.jsonl").returncode == 0
    r = cli("export", "hf-dataset", tmp_path / "tasks.jsonl", "--kind", "tasks", "-o", tmp_path / "ds")
    assert r.returncode == 0, r.stderr
    assert "wrote 30 tasks rows" in r.stdout
    assert (tmp_path / "ds" / DATA_FILE).is_file() and (tmp_path / "ds" / "README.md").is_file()
    ds = load(tmp_path / "ds", tmp_path / "cache")
    tasks = list(read_records(tmp_path / "tasks.jsonl", Task))
    assert ds.column_names == ["id", "source", "category", "instruction", "task"]
    assert ds["id"] == [t.id for t in tasks] and ds["instruction"] == [t.instruction for t in tasks]
    assert [Task.model_validate_json(row["task"]) for row in ds] == tasks


def test_sft_dataset_loads_back_to_the_same_conversations(tmp_path: Path) -> None:
    from trl.data_utils import is_conversational

    src = write_lines(tmp_path / "in.jsonl", CONVERSATIONS)
    assert cli("import", "trajectories", src, "-o", tmp_path / "sft.jsonl").returncode == 0
    r = cli("export", "hf-dataset", tmp_path / "sft.jsonl", "--kind", "sft", "-o", tmp_path / "ds")
    assert r.returncode == 0, r.stderr
    assert "note: 1 content parts as text" in r.stderr  # one column, one type: a string
    ds = load(tmp_path / "ds", tmp_path / "cache")
    assert ds.column_names == ["id", "messages", "tools", "task_id", "score", "record"]
    want = [([dict(m) for m in c["messages"]], c["tools"]) for c in CONVERSATIONS]
    want[1][0][1] = {"role": "user", "content": "Reply with the word ready."}
    assert [conversation_from_row(row) for row in ds] == want
    assert ds["id"] == ["in.jsonl:1", "traj-b", "in.jsonl:3"]
    assert ds["task_id"] == [None, "greeting", None] and ds["score"] == [None, 1.0, None]
    assert json.loads(ds[1]["record"])["extra"] == {"id": "traj-b", "task_id": "greeting", "score": 1.0}
    assert all(is_conversational(row) for row in ds)  # what trl's SFTTrainer checks before rendering
    assert isinstance(ds[0]["tools"], str)  # the form trl's SFTTrainer json.loads


def test_trajectories_dataset_and_what_one_schema_reshapes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    odd = [dict(m) for m in CONVERSATIONS[0]["messages"]]
    odd[2] = {**odd[2], "tool_calls": [{**odd[2]["tool_calls"][0], "function": {"name": "read",
                                                                                "arguments": {"path": "a"}}}]}
    odd[3] = {**odd[3], "cache_control": {"type": "ephemeral"}}
    convs = [CONVERSATIONS[0]["messages"], odd]
    trajs = [Trajectory(id=f"t{k}#0", task_id=f"t{k}", agent="llm", model="m", sandbox="bwrap", status="completed",
                        verdict=Verdict(status="scored", score=1.0, passed=True), started_at="2026-07-01T00:00:00Z",
                        duration_s=1.0, messages=m, tools=TOOLS) for k, m in enumerate(convs)]
    (run / "trajectories.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in trajs) + "{bad\n")
    r = cli("export", "hf-dataset", run, "--kind", "trajectories", "-o", tmp_path / "ds")
    assert r.returncode == 1  # the bad line is reported, the others written
    assert f"{run / 'trajectories.jsonl'}:3" in r.stderr
    assert "note: 1 tool call arguments as JSON text" in r.stderr
    assert "message fields without a column, left out: cache_control (1)" in r.stderr
    ds = load(tmp_path / "ds", tmp_path / "cache")
    assert ds["id"] == ["t0#0", "t1#0"] and ds["score"] == [1.0, 1.0] and ds["agent"] == ["llm", "llm"]
    first, second = (conversation_from_row(row) for row in ds)
    assert first == (CONVERSATIONS[0]["messages"], TOOLS)
    assert second[0][2]["tool_calls"][0]["function"]["arguments"] == '{"path": "a"}'
    assert "cache_control" not in second[0][3]
    assert Trajectory.model_validate_json(ds[1]["trajectory"]) == trajs[1]


TOOLS = CONVERSATIONS[0]["tools"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_push_to_hub_is_refused_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("huggingface_hub")
    src = write_lines(tmp_path / "in.jsonl", CONVERSATIONS[:1])
    assert cli("import", "trajectories", src, "-o", tmp_path / "sft.jsonl").returncode == 0
    hf = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
    cases = [
        ({}, "no Hugging Face token (set HF_TOKEN, or run `hf auth login`)"),
        ({"HF_TOKEN": "hf_notarealtoken", "HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE is set (unset it to upload)"),
        ({"HF_TOKEN": "hf_notarealtoken", "HF_ENDPOINT": (ep := f"http://127.0.0.1:{_closed_port()}")},
         f"cannot reach the Hugging Face Hub at {ep} (set HF_ENDPOINT to a reachable one)"),
    ]
    for k, (env, why) in enumerate(cases):
        out = tmp_path / f"ds{k}"
        r = cli("export", "hf-dataset", tmp_path / "sft.jsonl", "--kind", "sft", "-o", out, "--push-to-hub",
                "someone/clawgym-sft", env={**hf, **env})
        errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert errors == [f"error: cannot push to the Hugging Face dataset someone/clawgym-sft: {why}; {out} is "
                          "written"], r.stderr
        assert (out / DATA_FILE).is_file()  # the dataset is written before the upload is tried


def test_bad_arguments(tmp_path: Path) -> None:
    r = cli("export", "hf-dataset", tmp_path / "x.jsonl", "--kind", "pairs", "-o", tmp_path / "ds")
    assert r.returncode == 2 and "--kind" in r.stderr
    r = cli("export", "hf-dataset", tmp_path / "x.jsonl", "--kind", "sft", "-o", tmp_path / "ds")
    assert r.returncode == 1 and "no such file" in r.stderr
    (tmp_path / "empty.jsonl").write_text("")
    r = cli("export", "hf-dataset", tmp_path / "empty.jsonl", "--kind", "tasks", "-o", tmp_path / "ds")
    assert r.returncode == 1 and "no tasks record to export" in r.stderr
