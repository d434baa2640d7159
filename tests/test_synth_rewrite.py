"""The LLM rewrite pass (`--rewrite-model`, clawgym.synth.rewrite), against the scripted model server on
127.0.0.1 (real HTTP, real client, real sandboxes and validation)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clawgym.core.jsonl import read_records
from clawgym.core.records import Task
from clawgym.synth.pipeline import synthesize
from clawgym.synth.rewrite import RewriteConfig, check_rewrite, constants
from scripted_llm import ScriptedLLM

SEED = 3
N = 3


def _request_of(body: dict) -> tuple[str, list[str]]:
    """The original request and the constants of a rewrite call, from its user message."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    m = re.match(r"The request:\n(.*)\n\nConstants that must appear verbatim:\n(.*)\Z", user, re.S)
    assert m, user[:200]
    consts = [line[2:] for line in m.group(2).splitlines() if line != "- (none)"]
    return m.group(1), consts


def keep_all(body: dict):
    req, _ = _request_of(body)
    return json.dumps({"request": "Hi, quick favour from me today, if you have a moment. " + req})


def drop_a_path(body: dict):
    req, consts = _request_of(body)
    path = next((c for c in consts if "." in c and " " not in c), None)
    assert path is not None, consts
    return json.dumps({"request": "Hi there, when you get a chance: " + req.replace(path, "that file")})


def no_answer(body: dict):
    return None  # the scripted server answers 404: a model error


def _run(tmp_path: Path, name: str, responder=None) -> tuple[list[Task], dict, Path]:
    out = tmp_path / name
    if responder is None:
        synthesize(N, SEED, out, jobs=1)
    else:
        with ScriptedLLM(responder=responder) as server:
            synthesize(N, SEED, out, jobs=1, rewrite=RewriteConfig(model="scripted-model", base_url=server.base_url,
                                                                   max_retries=0, timeout=30))
    report = json.loads(out.with_name(out.name + ".report.json").read_text())
    return read_records(out, Task), report, out


@pytest.fixture(scope="module")
def plain(tmp_path_factory, bwrap_backend):
    return _run(tmp_path_factory.mktemp("plain"), "plain.jsonl")


def test_constants_of_a_hand_made_task():
    task = Task.model_validate({
        "id": "t", "instruction": "Read `data/sales.csv`, keep rows where region is North and write the total "
                                  "to out/total.txt (top 3 only). Leave notes.md alone.",
        "workspace": {"files": [{"path": "data/sales.csv", "content": "a,b\n"},
                                {"path": "notes.md", "content": "x"},
                                {"path": "unused.txt", "content": "y"}]},
        "verifier": {"code": {"kind": "checks", "checklib": {"version": 1, "sha256": "0" * 64}, "checks": [
            {"name": "total", "fn": "all_of", "parts": [
                {"fn": "file_equals", "args": {"path": "out/total.txt", "expected": "1234"}},
                {"fn": "rows_where", "args": {"column": "region", "value": "North", "n": 3, "flag": True,
                                              "x": "a"}}]},
        ]}},
    })
    # backtick spans; check values stated in the request (not "1234", never stated; not "a", too short; not
    # True); workspace paths stated in the request (not unused.txt); each once
    assert constants(task) == ["data/sales.csv", "out/total.txt", "region", "North", "notes.md"]
    # "3" is not a constant (shorter than 2 characters), and matching is by whole word / number
    tail = " Thanks so much, this really helps me with the quarterly review, as always."
    assert check_rewrite(task.instruction, "Please read data/sales.csv, region North, out/total.txt, notes.md."
                         + tail, constants(task)) == (None, "")
    assert check_rewrite(task.instruction, "Please read data/sales.csvx, region North, out/total.txt, notes.md."
                         + tail, constants(task)) == ("lost_constant", "data/sales.csv")
    assert check_rewrite(task.instruction, "Read it.", constants(task))[0] == "too_short"
    assert check_rewrite(task.instruction, task.instruction * 4, constants(task))[0] == "too_long"


def test_kept_rewrite_is_written_with_metadata_and_counted(tmp_path, plain):
    base, _, _ = plain
    tasks, report, _ = _run(tmp_path, "kept.jsonl", keep_all)
    assert [t.id for t in tasks] == [t.id for t in base]
    for t, b in zip(tasks, base, strict=True):
        assert t.instruction.startswith("Hi, quick favour") and t.instruction.endswith(b.instruction)
        rw = t.metadata["rewrite"]
        assert rw["model"] == "scripted-model" and len(rw["original_sha256"]) == 64
    rw = report["rewrite"]
    assert rw["attempted"] == N and rw["kept"] == N and rw["yield"] == 1.0 and rw["rejected"] == {}


def test_dropped_path_is_rejected_and_the_original_written(tmp_path, plain):
    base, _, base_out = plain
    tasks, report, out = _run(tmp_path, "dropped.jsonl", drop_a_path)
    assert out.read_bytes() == base_out.read_bytes()  # every rewrite rejected: the same file as without
    assert all("rewrite" not in t.metadata for t in tasks)
    rw = report["rewrite"]
    assert rw["attempted"] == N and rw["kept"] == 0 and rw["yield"] == 0.0
    assert rw["rejected"] == {"lost_constant": N} and rw["examples"]["lost_constant"]


def test_model_error_is_counted(tmp_path, plain):
    _, _, base_out = plain
    _, report, out = _run(tmp_path, "error.jsonl", no_answer)
    assert out.read_bytes() == base_out.read_bytes()
    rw = report["rewrite"]
    assert rw["kept"] == 0 and rw["rejected"] == {"model_error": N} and "404" in rw["examples"]["model_error"]


def test_without_rewrite_no_model_is_called_and_nothing_is_recorded(tmp_path, bwrap_backend, plain):
    """No --rewrite-model: no request reaches a model (even with one listening and OPENAI_BASE_URL pointing at
    it), no task carries rewrite metadata, the report has no rewrite section, and the file is the same bytes
    as the module's plain run of the same seed."""
    tasks, report, base_out = plain
    assert "rewrite" not in report and all("rewrite" not in t.metadata for t in tasks)
    out = tmp_path / "again.jsonl"
    with ScriptedLLM(responder=keep_all) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
        code = (f"from pathlib import Path; from clawgym.synth.pipeline import synthesize; "
                f"synthesize({N}, {SEED}, Path({str(out)!r}), jobs=1)")
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        assert server.requests == []
    assert out.read_bytes() == base_out.read_bytes()


def test_cli_rewrite_model(tmp_path, bwrap_backend):
    out = tmp_path / "cli.jsonl"
    with ScriptedLLM(responder=keep_all) as server:
        r = subprocess.run([sys.executable, "-m", "clawgym", "synth", "persona", "-n", "2", "--seed", str(SEED),
                            "-o", str(out), "--jobs", "1", "--no-dedup", "--rewrite-model", "scripted-model",
                            "--base-url", server.base_url], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "rewrite (scripted-model): kept 2 of 2" in r.stdout
    report = json.loads(out.with_name(out.name + ".report.json").read_text())
    assert report["rewrite"]["kept"] == 2


def test_skill_route_rewrite(tmp_path, bwrap_backend):
    from clawgym.synth.skill_route import synthesize_skill_tasks

    out = tmp_path / "skill.jsonl"
    with ScriptedLLM(responder=keep_all) as server:
        synthesize_skill_tasks(2, SEED, out, jobs=1, rewrite=RewriteConfig(model="scripted-model",
                                                                          base_url=server.base_url, max_retries=0))
    tasks = read_records(out, Task)
    assert len(tasks) == 2 and all(t.metadata["rewrite"]["model"] == "scripted-model" for t in tasks)
    report = json.loads(out.with_name(out.name + ".report.json").read_text())
    assert report["rewrite"]["kept"] == 2 and "by_primary_skill" in report
