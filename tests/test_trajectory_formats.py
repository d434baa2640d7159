"""Trajectories in and out in the OpenAI-messages form ClawGym-Trajectory, OpenRLHF and trl use: `import
trajectories` into SFT records, the real `train sft` data path on them (SmolLM2's real tokenizer: the loss on
every assistant turn and nothing else), `export trajectories` / `filter --format openai-messages` back out, and
`summary --stats` on the conversation files (tokens, rounds, tool calls, the ones longer than the window)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_conversations import CONVERSATIONS, call, read_lines, write_lines
from clawgym.agent.llm import TOOL_SCHEMAS
from clawgym.core.records import Trajectory, Verdict
from clawgym.train.filter import read_sft_records
from clawgym.train.masks import IGNORE, trained_spans
from clawgym.train.openai_messages import read_openai_messages, to_openai_messages
from conftest import embedded_model_dir


def cli(*args: Any, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded_model_dir()))


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    src = write_lines(tmp_path / "trajectories.openai.jsonl", CONVERSATIONS)
    r = cli("import", "trajectories", src, "--format", "openai-messages", "-o", tmp_path / "sft.jsonl")
    assert r.returncode == 0, r.stderr
    assert "imported 3 trajectories (11 assistant turns)" in r.stdout
    return tmp_path / "sft.jsonl"


# --------------------------------------------------------------------------------------------- in and out


def test_import_then_export_gives_the_same_lines(imported: Path, tmp_path: Path) -> None:
    records = read_sft_records(imported)  # what `train sft` reads
    assert [r["trajectory_id"] for r in records] == ["trajectories.openai.jsonl:1", "traj-b",
                                                     "trajectories.openai.jsonl:3"]
    assert all(r["tools"] == TOOL_SCHEMAS for r in records)
    r = cli("export", "trajectories", imported, "--format", "openai-messages", "-o", tmp_path / "back.jsonl")
    assert r.returncode == 0, r.stderr
    assert read_lines(tmp_path / "back.jsonl") == CONVERSATIONS


def test_bad_lines_are_named_and_the_others_imported(tmp_path: Path) -> None:
    good = CONVERSATIONS[1]
    msgs = good["messages"]
    src = write_lines(tmp_path / "in.jsonl", [
        good,
        "{oops",
        {"messages": msgs[:2], "tools": TOOL_SCHEMAS},
        {"messages": [*msgs[:2], {"role": "robot", "content": "x"}]},
        {"messages": [*msgs[:2], {"role": "assistant", "content": None, "tool_calls": [{"type": "function",
                                                                                        "function": {"arguments": "{}"}}]}]},
        {"messages": [*msgs[:2], {"role": "assistant", "content": None, "tool_calls": [call("a", "ls", path=".")]},
                      {"role": "tool", "tool_call_id": "b", "content": "x"}, {"role": "assistant", "content": "ok"}]},
        {"messages": msgs, "tools": [{"type": "function", "function": {"description": "no name"}}]},
        {"messages": msgs, "tools": "[not json"},
        {"messages": msgs},  # no tools: imported, counted
    ])
    out = tmp_path / "sft.jsonl"
    r = cli("import", "trajectories", src, "--format", "openai-messages", "-o", out)
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {src}:2: not valid JSON (Expecting property name enclosed in double quotes at column 2)",
        f"error: {src}:3: messages: no assistant turn to train on",
        f"error: {src}:4: messages[2].role: 'robot' is not one of system, developer, user, assistant, tool",
        f"error: {src}:5: messages[2].tool_calls[0].function.name: missing or empty",
        f"error: {src}:6: messages[3].tool_call_id: 'b' answers no earlier tool call",
        f"error: {src}:7: tools[0].function.name: missing or empty",
        f"error: {src}:8: tools: a string that is not JSON (Expecting value)",
    ], r.stderr
    assert "imported 2 trajectories" in r.stdout and "(7 bad lines)" in r.stdout
    assert "1 lines have no `tools`" in r.stderr
    assert [len(rec["messages"]) for rec in read_lines(out)] == [3, 3]

    # --tools gives the lines without tools a default list (ClawGym's SFT script passes OpenClaw's to every line)
    (tmp_path / "tools.json").write_text(json.dumps({"tools": TOOL_SCHEMAS}))
    res = read_openai_messages(src, default_tools=TOOL_SCHEMAS)
    assert res.records[-1]["tools"] == TOOL_SCHEMAS and res.default_tools_used == 1
    r = cli("import", "trajectories", src, "--tools", tmp_path / "tools.json", "-o", out)
    assert r.returncode == 1 and "given the --tools schemas" in r.stderr
    assert read_lines(out)[-1]["tools"] == TOOL_SCHEMAS
    r = cli("import", "trajectories", src, "--format", "sharegpt", "-o", out)
    assert r.returncode == 2 and "--format" in r.stderr


def test_filter_writes_openai_messages(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    trajs = [Trajectory(id=f"task-{k}#0", task_id=f"task-{k}", agent="llm", model="m", sandbox="bwrap",
                        status="completed", verdict=Verdict(status="scored", score=1.0 - 0.5 * (k == 1), passed=k != 1),
                        started_at="2026-07-01T00:00:00Z", duration_s=1.0, messages=c["messages"], tools=c["tools"])
             for k, c in enumerate(CONVERSATIONS)]
    (run / "trajectories.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in trajs))
    r = cli("filter", run, "--min-score", "1.0", "--format", "openai-messages", "-o", tmp_path / "out.jsonl")
    assert r.returncode == 0, r.stderr
    assert read_lines(tmp_path / "out.jsonl") == [{"messages": c["messages"], "tools": c["tools"]}
                                                  for k, c in enumerate(CONVERSATIONS) if k != 1]
    assert json.loads((tmp_path / "out.jsonl.report.json").read_text())["options"]["format"] == "openai-messages"
    r = cli("filter", run, "--format", "parquet", "-o", tmp_path / "x.jsonl")
    assert r.returncode == 2 and "--format" in r.stderr


# --------------------------------------------------------------------------------------------- the training data


def _non_assistant_texts(messages: list[dict[str, Any]]) -> list[str]:
    from clawgym.serve.chat_format import content_text

    return [content_text(m["content"]) for m in messages if m["role"] != "assistant"]


def test_train_sft_data_trains_every_assistant_turn_and_nothing_else(imported: Path, tokenizer, tmp_path: Path) -> None:
    """The examples `train sft` builds (read_sft_records + build_examples, verify full) from the imported file: one
    trained span per assistant turn, each the turn's own text, tool calls and end-of-turn token; no system, user or
    tool text trained. Then the records go back out unchanged."""
    from clawgym.train.sft import build_examples

    records = read_sft_records(imported)
    examples, stats = build_examples(records, tokenizer, max_len=100_000, verify="full")
    assert stats.examples == len(records) == 3 and stats.truncated == 0
    for rec, ex in zip(records, examples, strict=True):
        turns = [m for m in rec["messages"] if m["role"] == "assistant"]
        spans = trained_spans(ex.labels)
        assert len(spans) == len(turns)
        trained = [tokenizer.decode(ex.input_ids[s:e]) for s, e in spans]
        context = tokenizer.decode([t for t, lab in zip(ex.input_ids, ex.labels, strict=True) if lab == IGNORE])
        for text, turn in zip(trained, turns, strict=True):
            assert text.endswith("<|im_end|>")
            if turn.get("content"):
                assert text.startswith(turn["content"])
            calls = [json.loads(c) for c in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", text)]
            assert calls == [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                             for c in turn.get("tool_calls") or []]
        for other in _non_assistant_texts(rec["messages"]):
            assert other in context
            assert not any(other in t for t in trained)
        assert '"name": "edit"' in context  # the tool schemas are in the context, not trained
        assert all(lab == IGNORE for lab in ex.labels[: spans[0][0]])
    r = cli("export", "trajectories", imported, "-o", tmp_path / "back.jsonl")
    assert r.returncode == 0, r.stderr
    back = read_lines(tmp_path / "back.jsonl")
    assert [(b["messages"], b["tools"]) for b in back] == [(c["messages"], c["tools"]) for c in CONVERSATIONS]
    assert [to_openai_messages(rec) for rec in records] == CONVERSATIONS


def test_summary_stats_measure_the_conversations_and_name_the_long_ones(imported: Path, tokenizer) -> None:
    from clawgym.train.sft import build_examples

    lengths = [len(ex) for ex in build_examples(read_sft_records(imported), tokenizer, max_len=100_000)[0]]
    window = sorted(lengths)[1] + 1  # the two short ones fit, the long one does not
    r = cli("summary", imported, "--stats", "--tokenizer", "smollm2-135m", "--max-len", window, "--json")
    assert r.returncode == 0, r.stderr
    (s,) = json.loads(r.stdout)
    st = s["stats"]
    assert (s["agent"], s["episodes"], st["episodes"]) == ("imported", 3, 3)
    assert st["rounds"] == pytest.approx(11 / 3)
    assert st["tool_calls"] == pytest.approx((3 + 0 + 6) / 3)
    assert st["tools_used"] == ["exec", "ls", "read", "write"] and st["tool_types"] == pytest.approx((3 + 0 + 1) / 3)
    # tokens are the training sequences' lengths: the window check speaks of what `train sft --max-len` would window
    assert st["tokens"] == pytest.approx(sum(lengths) / 3) and st["max_tokens"] == max(lengths)
    assert st["window"] == window
    assert st["over_window"] == [{"name": "trajectories.openai.jsonl:3", "tokens": max(lengths)}]

    r = cli("summary", imported, "--stats", "--tokenizer", "smollm2-135m", "--max-len", window)
    assert r.returncode == 0, r.stderr
    assert "conversation statistics" in r.stdout and "tool types" in r.stdout
    assert "tokens: the tokenizer and chat template of smollm2-135m" in r.stdout
    assert (f"1 of 3 conversations in {imported} are longer than {window:,} tokens (`train sft --max-len {window}` "
            f"trains them as windows, each ending at an assistant turn): trajectories.openai.jsonl:3 "
            f"({max(lengths):,})") in r.stderr
    r = cli("summary", imported, "--stats", "--json")
    assert r.returncode == 0, r.stderr
    approx = json.loads(r.stdout)[0]["stats"]
    assert approx["over_window"] == [] and 0 < approx["tokens"]
    r = cli("summary", imported, "--stats")
    assert "approximated as characters / 4 (no --tokenizer)" in r.stdout


def test_a_short_train_sft_run_on_the_imported_file(imported: Path, tokenizer, tmp_path: Path) -> None:
    """The real `train sft` (LoRA, SmolLM2-135M, 2 steps); the long conversation is reported as longer than
    --max-len and trained as windows (never cut from the end), as `summary --max-len` says beforehand."""
    from clawgym.train.sft import build_examples

    lengths = [len(ex) for ex in build_examples(read_sft_records(imported), tokenizer, max_len=100_000)[0]]
    max_len = sorted(lengths)[1] + 1
    r = cli("train", "sft", imported, "--model", "smollm2-135m", "-o", tmp_path / "sft", "--max-steps", 2,
            "--max-len", max_len, "--batch-tokens", max_len, "--save-steps", 0, "--threads", 2)
    assert r.returncode == 0, r.stderr
    assert "data: 3 records -> 3 sequences" in r.stderr
    assert "1 longer than --max-len -> 1 windows, 6 turns (172 tokens) fit no window" in r.stderr
    assert "trained 2 steps" in r.stdout
    assert (tmp_path / "sft" / "final" / "adapter_config.json").exists()
