"""`train sft` at its users' scale (#36): weights in bf16, gradient checkpointing, TensorBoard, long trajectories
kept whole (never cut from the end), Qwen3-style templates as one sequence, 2 processes equal to 1."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from clawgym.core.errors import ClawgymError
from clawgym.train.masks import IGNORE, tokenize_conversation, trained_spans

REPO = Path(__file__).resolve().parents[1]


def _call(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


TOOLS = [{"type": "function", "function": {"name": "read", "description": "Read a file.",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                          "required": ["path"]}}}]


def _long_trajectory(rounds: int = 6) -> list[dict]:
    """An agent trajectory: a task, `rounds` read calls each answered by a long file, a final answer."""
    msgs = [{"role": "system", "content": "You are a careful file agent. Use the tools."},
            {"role": "user", "content": "Count the lines that mention a deadline across the notes."}]
    for k in range(rounds):
        msgs.append({"role": "assistant", "content": f"Reading part {k}.",
                     "tool_calls": [_call(f"c{k}", "read", {"path": f"notes/part{k}.md"})]})
        body = "\n".join(f"- item {k}.{i}: " + ("deadline friday" if i % 3 == 0 else "no date") for i in range(30))
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": body})
    msgs.append({"role": "assistant", "content": "FINAL: 60 lines mention a deadline."})
    return msgs


def _sft_file(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _short_records(n: int = 2) -> list[dict]:
    return [{"trajectory_id": f"s{i}", "messages": [
        {"role": "system", "content": "You are a careful file agent."},
        {"role": "user", "content": f"Task {i}: summarise " + " ".join(f"w{i}_{k}" for k in range(25 + 5 * i))},
        {"role": "assistant", "content": f"Summary {i}: the words run from w{i}_0 to w{i}_{24 + 5 * i}."}]}
        for i in range(n)]


# ------------------------------------------------------------------------------------------- long trajectories


def test_a_trajectory_longer_than_the_window_trains_its_final_turn(tokenizer):
    """Fails on a680fe3, which cut the sequence at --max-len keeping the start: the final answer was never trained."""
    from clawgym.train.sft import build_examples

    msgs = _long_trajectory()
    [whole_ex] = tokenize_conversation(tokenizer, msgs, TOOLS)
    whole = len(whole_ex)
    max_len = whole * 2 // 3
    rec = {"trajectory_id": "long#0", "messages": msgs, "tools": TOOLS}
    examples, stats = build_examples([rec], tokenizer, max_len, verify="full")
    trained = [tokenizer.decode([t for t in ex.labels if t != IGNORE]) for ex in examples]
    assert any("FINAL: 60 lines mention a deadline." in t for t in trained), trained
    assert all(len(ex) <= max_len for ex in examples)
    turns = sum(1 for m in msgs if m["role"] == "assistant")
    # every assistant turn is trained exactly once: a prefix that fits, then one window per later turn
    assert sum(len(trained_spans(ex.labels)) for ex in examples) == turns
    assert stats.truncated == 1 and stats.windows == len(examples) >= 2
    assert stats.dropped_turns == stats.dropped_tokens == 0
    # a window keeps the head (system prompt, task) and ends with its turn
    last = next(ex for ex in examples if "FINAL" in tokenizer.decode(ex.input_ids))
    text = tokenizer.decode(last.input_ids)
    assert "careful file agent" in text and "Count the lines" in text and "part0.md" not in text
    assert trained_spans(last.labels) == [(last.spans[0][0], len(last))]

    # a window too small for any turn with its context: counted, never cut
    tiny, small = build_examples([rec], tokenizer, 120, verify="none")
    assert all(len(ex) <= 120 for ex in tiny) and small.dropped_turns > 0 and small.dropped_tokens > 0
    assert small.dropped_turns + sum(len(trained_spans(ex.labels)) for ex in tiny) == turns


def test_token_steps_longer_than_the_window_train_as_steps(tokenizer):
    from clawgym.train.sft import build_examples

    p1, r1 = list(range(10, 60)), [70, 71, 2]
    p2, r2 = p1 + r1 + list(range(80, 120)), [72, 73, 2]
    p3, r3 = p2 + r2 + list(range(130, 200)), [74, 75, 76, 2]
    p4, r4 = [10, 11, 12, 13], [77, 2]  # context management: the agent started over with a short prompt
    rec = {"trajectory_id": "steps#0", "steps": [{"prompt_ids": p, "response_ids": r}
                                                 for p, r in ((p1, r1), (p2, r2), (p3, r3), (p4, r4))]}
    examples, stats = build_examples([rec], tokenizer, len(p2) + len(r2) + 5)
    first, last = examples
    assert first.input_ids == p2 + r2 and [t for t in first.labels if t != IGNORE] == r1 + r2
    assert last.input_ids == p4 + r4 and [t for t in last.labels if t != IGNORE] == r4
    assert (stats.truncated, stats.dropped_turns, stats.dropped_tokens) == (1, 1, len(r3))
    assert stats.trained_tokens == len(r1 + r2 + r4)


# ------------------------------------------------------------------------------------------- Qwen3-style templates


@pytest.fixture(scope="module")
def qwen3_tokenizer(smol_dir, tmp_path_factory):
    """SmolLM2's tokenizer with a Qwen3 chat template (trl ships it; nothing downloaded), saved and loaded back."""
    import trl
    from transformers import AutoTokenizer

    path = tmp_path_factory.mktemp("qwen3tok")
    tok = AutoTokenizer.from_pretrained(str(smol_dir))
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    tok.save_pretrained(str(path))
    return AutoTokenizer.from_pretrained(str(path))


def _thinking_trajectory() -> list[dict]:
    msgs = [{"role": "system", "content": "You are a careful file agent."}]
    for q in range(3):  # three user queries, each answered after two tool rounds, reasoning on every turn
        msgs.append({"role": "user", "content": f"Question {q}: what does notes/q{q}.md say about the budget?"})
        for k in range(2):
            msgs.append({"role": "assistant", "content": f"<think>\nI should read part {k} of q{q}.\n</think>\n\n"
                                                         f"Reading part {k}.",
                         "tool_calls": [_call(f"c{q}{k}", "read", {"path": f"notes/q{q}.md"})]})
            msgs.append({"role": "tool", "tool_call_id": f"c{q}{k}", "content": f"budget line {q}.{k}: " + "x " * 40})
        msgs.append({"role": "assistant", "content": f"<think>\nBoth parts are read.\n</think>\n\nAnswer {q}: fine."})
    return msgs


def test_qwen3_template_trains_one_sequence_per_trajectory(qwen3_tokenizer):
    from clawgym.train.masks import conversation_tokens
    from clawgym.train.sft import build_examples

    msgs = _thinking_trajectory()
    rec = {"trajectory_id": "q3#0", "messages": msgs, "tools": TOOLS}
    own = conversation_tokens(qwen3_tokenizer, msgs, TOOLS)
    turns = sum(1 for m in msgs if m["role"] == "assistant")
    exact, _ = build_examples([rec], qwen3_tokenizer, 100_000, history="exact")
    final, stats = build_examples([rec], qwen3_tokenizer, 100_000, history="final")
    assert len(exact) == turns and sum(len(e) for e in exact) > 3 * own  # one example per turn: ~turns x
    [ex] = final
    assert len(ex) <= 1.2 * own and stats.tokens <= 1.2 * own
    assert len(trained_spans(ex.labels)) == turns
    texts = [qwen3_tokenizer.decode(ex.input_ids[s:e]) for s, e in ex.spans]
    # earlier turns as the final render shows them (reasoning dropped before the last query), the last ones whole
    assert texts[0].startswith("Reading part 0.") and texts[0].endswith("<|im_end|>")
    assert texts[-1].startswith("<think>\nBoth parts are read.") and "Answer 2: fine." in texts[-1]
    # enable_thinking passes through to the template
    off, _ = build_examples([rec], qwen3_tokenizer, 100_000, history="final", enable_thinking=False)
    assert len(off) == 1 and len(trained_spans(off[0].labels)) == turns


# ------------------------------------------------------------------------------------------- precision, memory, logs


def _run(model: Path | str, records: list[dict], out: Path, **kw):
    from transformers import AutoTokenizer

    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.sft import SFTOptions, build_examples, prepare_training, run_training

    opts = SFTOptions(model=str(model), max_len=256, batch_tokens=256, save_steps=0, warmup_ratio=0.0, lr=1e-2,
                      precision="fp32", **kw)
    tok = AutoTokenizer.from_pretrained(str(resolve_model_dir(str(model))))
    examples, stats = build_examples(records, tok, opts.max_len)
    prep = prepare_training(examples, out, opts, stats=stats, show_progress=False)
    return prep, run_training(prep)


def test_bf16_weights_load_in_bf16_and_train_a_step(smol_dir, tmp_path):
    import torch

    from clawgym.train.dtypes import resolve_dtype

    assert resolve_dtype("auto") == ("bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported()
                                     else "fp32")
    assert resolve_dtype("auto", full=True) == "fp32" and resolve_dtype("bf16", full=True) == "bf16"
    prep, res = _run(smol_dir, _short_records(1), tmp_path / "bf16", dtype="bf16", max_steps=1)
    params = dict(prep.trainer.model.named_parameters())
    base = [p.dtype for n, p in params.items() if "lora_" not in n]
    adapter = [p.dtype for n, p in params.items() if "lora_" in n]
    assert base and set(base) == {torch.bfloat16}
    assert adapter and set(adapter) == {torch.float32}  # the trained weights (and AdamW's state) stay fp32
    assert res.steps == 1 and res.first_loss is not None and math.isfinite(res.first_loss)
    meta = json.loads((tmp_path / "bf16" / "train.json").read_text())
    assert meta["dtype"] == "bf16" and meta["master_weights"].startswith("fp32")


def test_gradient_checkpointing_is_on_and_changes_no_loss(tiny_model, tmp_path):
    runs = {}
    for on in (False, True):
        prep, res = _run(tiny_model, _short_records(2), tmp_path / f"gc{on}", gradient_checkpointing=on,
                         max_steps=3, grad_accum=2)
        m = prep.trainer.model
        flag = getattr(m, "is_activation_checkpointing", None)
        assert (flag if flag is not None else m.is_gradient_checkpointing) is on
        runs[on] = [(r["loss"], r["grad_norm"]) for r in res.log]
    assert len(runs[True]) == 3
    for (a, ga), (b, gb) in zip(runs[False], runs[True], strict=True):  # steps 2, 3 follow the gradients
        assert a == pytest.approx(b, rel=1e-5) and ga == pytest.approx(gb, rel=1e-4)


def test_tensorboard_event_files_hold_the_loss(tiny_model, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "tb"
    _, res = _run(tiny_model, _short_records(2), out, report_to="tensorboard", max_steps=2)
    acc = EventAccumulator(str(out / "tensorboard"))
    acc.Reload()
    losses = [e.value for e in acc.Scalars("train/loss")]
    assert losses == pytest.approx([r["loss"] for r in res.log], rel=1e-5) and len(losses) == 2
    assert json.loads((out / "train.json").read_text())["tensorboard"] == str(out / "tensorboard")


def test_report_to_refuses_what_is_not_installed(tiny_model, tmp_path):
    from typer.testing import CliRunner

    from clawgym.cli.app import app
    from clawgym.train.reporting import check_report_to

    with pytest.raises(ClawgymError, match="use none, tensorboard, wandb"):
        check_report_to("mlflow")
    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    data = _sft_file(tmp_path / "d.jsonl", _short_records(1))
    res = CliRunner().invoke(app, ["train", "sft", str(data), "--model", str(tiny_model), "-o", str(tmp_path / "o"),
                                   "--report-to", "wandb"])
    assert res.exit_code != 0
    assert "--report-to wandb: the wandb package is not installed (pip install wandb)" in res.output
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------- processes


def test_two_processes_reach_the_loss_of_one_with_the_same_global_batch(smol_dir, tmp_path):
    """The real SmolLM2, LoRA, 3 steps: 2 gloo processes x 1 packed row = 1 process x 2 accumulated rows. Every
    step sees both rows (2 rows in all), so each logged loss must match: tolerance 1e-4 relative (fp32)."""
    data = _sft_file(tmp_path / "d.jsonl", _short_records(2))
    common = ["train", "sft", str(data), "--model", str(smol_dir), "--max-steps", "3", "--max-len", "256",
              "--batch-tokens", "256", "--warmup-ratio", "0", "--lr", "1e-3", "--save-steps", "0", "--threads", "1",
              "--precision", "fp32"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO / "src")}
    one = subprocess.run([sys.executable, "-m", "clawgym", *common, "-o", str(tmp_path / "one"), "--grad-accum", "2"],
                         capture_output=True, text=True, env=env, timeout=900)
    assert one.returncode == 0, one.stderr[-3000:]
    with socket.socket() as sock:  # a free port for the rendezvous (torchrun's own default may be taken)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                          str(port), "-m", "clawgym", *common, "-o", str(tmp_path / "two"), "--grad-accum", "1"],
                         capture_output=True, text=True, env=env, timeout=900)
    assert two.returncode == 0, (two.stdout[-2000:], two.stderr[-3000:])
    logs = {k: [json.loads(line) for line in (tmp_path / k / "log.jsonl").read_text().splitlines()]
            for k in ("one", "two")}
    assert [r["step"] for r in logs["two"]] == [1, 2, 3]  # written once, by rank 0
    for a, b in zip(logs["one"], logs["two"], strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4), (logs["one"], logs["two"])
        assert a["tokens"] == b["tokens"] and a["trained_tokens"] == b["trained_tokens"]
    assert logs["two"][-1]["loss"] < logs["two"][0]["loss"]
    meta = json.loads((tmp_path / "two" / "train.json").read_text())
    assert meta["processes"] == 2 and meta["compact_loss"] and meta["status"] == "done"
    assert (tmp_path / "two" / "final" / "adapter_config.json").exists()
