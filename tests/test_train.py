"""Filter, masks, SFT and export on real parts: oracle trajectories from bwrap sandboxes, SmolLM2's real tokenizer
and chat template, a tiny random Llama built from SmolLM2's config, trl + peft training on CPU, the embedded server
serving the exported model, and one agent episode with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawgym.agent.llm import SYSTEM_PROMPT, TOOL_SCHEMAS
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task, Trajectory
from clawgym.serve.chat_format import parse_output, render_prompt
from clawgym.train.filter import (
    FilterOptions,
    filter_to_file,
    filter_trajectories,
    read_sft_records,
    transcript_to_messages,
)
from clawgym.train.masks import (
    IGNORE,
    MaskError,
    TokenizedExample,
    end_of_turn_ids,
    tokenize_conversation,
    tokenize_record,
    tokenize_token_steps,
    trained_spans,
    verify_example,
)

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "tasks.jsonl"


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def examples() -> list[Task]:
    return read_records(EXAMPLES, Task)


@pytest.fixture(scope="module")
def oracle_run(examples, bwrap_backend, tmp_path_factory) -> Path:
    from clawgym.agent import get_agent
    from clawgym.rollout import RolloutOptions, run_rollout

    run_dir = tmp_path_factory.mktemp("oracle") / "run"
    report = run_rollout(examples, lambda: get_agent("oracle"), bwrap_backend, run_dir,
                         RolloutOptions(jobs=4, keep_workspaces=False))
    assert all(t.status == "completed" and t.score == 1.0 for t in report.ran), [t.error for t in report.ran]
    return run_dir


@pytest.fixture(scope="module")
def sft_file(oracle_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sft") / "sft.jsonl"
    rep = filter_to_file([oracle_run], out, FilterOptions(min_score=1.0))
    assert rep.kept == 8
    return out


def _conversation() -> tuple[list[dict], list[dict]]:
    """Two sessions: text + parallel tool calls, consecutive tool results, a lone call, answers."""
    call = lambda cid, name, args: {"id": cid, "type": "function",  # noqa: E731
                                    "function": {"name": name, "arguments": json.dumps(args)}}
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT.format(workdir="/workspace")},
        {"role": "user", "content": "Tidy notes.md and tell me how many lines it has."},
        {"role": "assistant", "content": "Let me look first.",
         "tool_calls": [call("c1", "ls", {"path": "."}), call("c2", "read", {"path": "notes.md", "limit": 5})]},
        {"role": "tool", "tool_call_id": "c1", "content": "notes.md\nold/"},
        {"role": "tool", "tool_call_id": "c2", "content": "# Notes\n- a  \n- b"},
        {"role": "assistant", "content": None,
         "tool_calls": [call("c3", "edit", {"path": "notes.md", "oldText": "- a  ", "newText": "- a"})]},
        {"role": "tool", "tool_call_id": "c3", "content": "Edited notes.md (1 replacement) — ünïcode ✓"},
        {"role": "assistant", "content": "Done: trailing spaces removed; notes.md has 3 lines."},
        {"role": "user", "content": "Thanks! And the old/ folder?"},
        {"role": "assistant", "content": "It is empty; I left it alone."},
    ]
    return messages, TOOL_SCHEMAS


# ------------------------------------------------------------------------------------------------ masks


def test_mask_trains_exactly_the_assistant_turns_as_the_server_renders_them(tokenizer):
    messages, tools = _conversation()
    [ex] = tokenize_conversation(tokenizer, messages, tools, record="conv-1")
    assistant_at = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    eot = end_of_turn_ids(tokenizer)
    # Independently: for each assistant turn, the server's prompt ids, then the turn's tokens up to and including
    # the end-of-turn token the engine stops on.
    expected: set[int] = set()
    for i in assistant_at:
        prompt = render_prompt(tokenizer, messages[:i], tools)
        assert ex.input_ids[: len(prompt)] == prompt  # the training context is the server's prompt, token for token
        end = next(k for k in range(len(prompt), len(ex.input_ids)) if ex.input_ids[k] in eot)
        expected.update(range(len(prompt), end + 1))
    trained = {k for k, lab in enumerate(ex.labels) if lab != IGNORE}
    assert trained == expected  # every trained token is an assistant token, and no assistant token is left out
    assert all(ex.labels[k] == ex.input_ids[k] for k in trained)
    spans = trained_spans(ex.labels)
    assert len(spans) == len(assistant_at) == 4
    for (s, e), i in zip(spans, assistant_at, strict=True):
        text = tokenizer.decode(ex.input_ids[s:e], skip_special_tokens=False)
        assert text.endswith("<|im_end|>") and tokenizer.decode(ex.input_ids[s - 3:s]).endswith("assistant\n")
        # what the model learns to write parses back into the same message
        parsed = parse_output(text[: -len("<|im_end|>")], tools_offered=True)
        want = messages[i]
        assert parsed.content == (want["content"] or "")
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed.tool_calls] == \
            [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in want.get("tool_calls", [])]
    # system prompt, tools preamble, user turns and tool results are context only
    decoded_context = tokenizer.decode([t for t, lab in zip(ex.input_ids, ex.labels, strict=True) if lab == IGNORE])
    assert "<tools>" in decoded_context and "<tool_response>" in decoded_context and "Tidy notes.md" in decoded_context


def test_mask_verification_names_the_record(tokenizer):
    messages, tools = _conversation()
    [ex] = tokenize_conversation(tokenizer, messages, tools, record="traj-7#0")
    bad = TokenizedExample(ex.input_ids, list(ex.labels), ex.record, ex.spans, ex.expected)
    s, _ = bad.spans[1]
    bad.labels[s - 1] = bad.input_ids[s - 1]  # train one context token too many
    with pytest.raises(MaskError, match="traj-7#0"):
        verify_example(tokenizer, bad)
    bad = TokenizedExample(ex.input_ids, list(ex.labels), "traj-8#1", ex.spans, list(ex.expected))
    bad.expected[0] = "something else<|im_end|>"
    with pytest.raises(MaskError, match=r"traj-8#1: assistant turn 1"):
        verify_example(tokenizer, bad)
    # an assistant turn whose text merges with the template's newline cannot be trained as the server prompts it
    odd = messages[:2] + [{"role": "assistant", "content": "\n\nleading newlines"}]
    with pytest.raises(MaskError, match="odd-record"):
        tokenize_record(tokenizer, {"trajectory_id": "odd-record", "messages": odd, "tools": tools})
    with pytest.raises(MaskError, match="no assistant turn"):
        tokenize_conversation(tokenizer, messages[:2], tools, record="x")


def test_token_exact_records_train_on_the_engine_ids(tokenizer):
    p1, r1 = [1, 10, 11, 12], [20, 21, 2]
    p2 = p1 + r1 + [13, 14]  # the next call extends the conversation: one sequence
    r2 = [22, 2]
    p3 = [1, 10, 99]  # a fresh context (e.g. re-rendered differently): a new sequence
    r3 = [23, 2]
    rec = {"trajectory_id": "t#0", "steps": [{"prompt_ids": p1, "response_ids": r1},
                                             {"prompt_ids": p2, "response_ids": r2},
                                             {"prompt_ids": p3, "response_ids": r3}]}
    a, b = tokenize_record(tokenizer, rec)
    assert a.input_ids == p2 + r2 and b.input_ids == p3 + r3
    assert [t for t, lab in zip(a.input_ids, a.labels, strict=True) if lab != IGNORE] == r1 + r2
    assert trained_spans(a.labels) == [(4, 7), (9, 11)] and trained_spans(b.labels) == [(3, 5)]
    # one pool step at the top level
    [c] = tokenize_record(tokenizer, {"step_id": "t#0/0", "prompt_ids": p1, "response_ids": r1})
    assert c.labels == [IGNORE] * 4 + r1
    with pytest.raises(MaskError, match="another tokenizer"):
        tokenize_token_steps([{"prompt_ids": [1, 10**7], "response_ids": [2]}], "far", vocab_size=len(tokenizer))


def test_templates_that_render_tools_themselves(tokenizer):
    """With a chat template that knows tools the server lets the template render them; so does training. A template
    that renders history differently from the turn being written (Qwen3's reasoning blocks) gets one example per
    turn, each in exactly the server's context."""
    import copy

    import trl

    messages, tools = _conversation()
    templates = Path(trl.__file__).parent / "chat_templates"
    turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    qwen25 = copy.deepcopy(tokenizer)
    qwen25.chat_template = (templates / "qwen2_5.jinja").read_text()
    [ex] = tokenize_conversation(qwen25, messages, tools, record="q25")
    assert len(ex.spans) == 4 and "<tools>" in qwen25.decode(ex.input_ids[: ex.spans[0][0]])
    for (s, _), i in zip(ex.spans, turns, strict=True):
        assert ex.input_ids[:s] == render_prompt(qwen25, messages[:i], tools)
    qwen3 = copy.deepcopy(tokenizer)
    qwen3.chat_template = (templates / "qwen3.jinja").read_text()
    exs = tokenize_conversation(qwen3, messages, tools, record="q3")
    assert [e.record for e in exs] == [f"q3 turn {i}" for i in turns]
    for e, i in zip(exs, turns, strict=True):
        [(s, end)] = e.spans
        assert e.input_ids[:s] == render_prompt(qwen3, messages[:i], tools) and end == len(e.input_ids)
        assert qwen3.decode(e.input_ids[s:end]).startswith("<think>")


def test_fresh_sessions_and_pool_steps_become_their_own_examples(tokenizer):
    messages, tools = _conversation()
    # a fresh session (the system prompt sent again) is trained without the earlier turns, as the model saw it
    fresh = messages[:8] + [messages[0]] + messages[8:]
    a, b = tokenize_record(tokenizer, {"trajectory_id": "multi#0", "messages": fresh, "tools": tools})
    assert (a.record, b.record) == ("multi#0 session 1", "multi#0 session 2")
    assert len(a.spans) == 3 and len(b.spans) == 1
    assert b.input_ids[: len(render_prompt(tokenizer, [messages[0], messages[8]], tools))] == \
        render_prompt(tokenizer, [messages[0], messages[8]], tools)
    # a data-pool step without token ids: its request and response
    step = {"step_id": "t#0/2", "request": {"messages": messages[:5], "tools": tools},
            "response": {"content": None, "tool_calls": messages[5]["tool_calls"], "finish_reason": "tool_calls"},
            "prompt_ids": None, "response_ids": None}
    [c] = tokenize_record(tokenizer, step)
    assert c.record == "t#0/2" and len(c.spans) == 2  # both assistant turns of the request and the response
    assert tokenizer.decode(c.input_ids[c.spans[-1][0]:c.spans[-1][1]]).startswith('<tool_call>\n{"name": "edit"')


def test_packed_attention_equals_separate_sequences_and_compact_loss_equals_full_loss(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    from clawgym.train.attention import register
    from clawgym.train.sft import compact_causal_lm_loss, load_base_config

    name = register()
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model), config=load_base_config(tiny_model),
                                                 attn_implementation=name).eval()
    g = torch.Generator().manual_seed(0)
    seqs = [torch.randint(3, 40000, (n,), generator=g).tolist() for n in (37, 120, 5, 64)]
    labels = [[IGNORE] * (len(s) // 2) + s[len(s) // 2:] for s in seqs]
    batch = DataCollatorForLanguageModeling(pad_token_id=2, padding_free=True)(
        [{"input_ids": s, "labels": lab} for s, lab in zip(seqs, labels, strict=True)])
    with torch.no_grad():
        ref = torch.cat([model(input_ids=torch.tensor([s]), use_cache=False).logits[0] for s in seqs])
        packed = model(**{k: v for k, v in batch.items() if k != "labels"}, use_cache=False).logits[0]
        assert torch.allclose(packed, ref, atol=1e-4), (packed - ref).abs().max()
        # the compact loss (LM head on trained positions only) is the usual mean next-token loss
        loss, n, _ = compact_causal_lm_loss(model, dict(batch))
        full = model(**{k: v for k, v in batch.items() if k != "labels"}, use_cache=False).logits[0, :-1]
        tgt = batch["labels"][0, 1:]
        want = torch.nn.functional.cross_entropy(full[tgt != IGNORE], tgt[tgt != IGNORE])
        assert n == int((tgt != IGNORE).sum()) and torch.allclose(loss, want, atol=1e-5)


# ------------------------------------------------------------------------------------------------ filter


def test_filter_turns_oracle_transcripts_into_agent_conversations(oracle_run, examples, tokenizer, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    path = run / "trajectories.jsonl"
    path.write_text((oracle_run / "trajectories.jsonl").read_text())
    trajs = {t.id: t for t in read_records(path, Trajectory)}
    assert all(not t.messages for t in trajs.values())  # the oracle records only an OpenClaw transcript
    # a later record of the same id wins: this one now fails its verifier
    worse = next(iter(trajs.values())).model_dump()
    worse["verdict"]["score"], worse["verdict"]["passed"] = 0.5, False
    with open(path, "a") as fh:
        fh.write(json.dumps(worse) + "\n")
    # the same run given twice counts every trajectory twice, for --max-per-task
    records, rep = filter_trajectories([run, path], FilterOptions(min_score=1.0, max_per_task=1))
    assert rep.read == 16 and rep.kept == 7
    assert rep.dropped == {"below_min_score": 2, "over_max_per_task": 7}
    assert worse["id"] not in {r["trajectory_id"] for r in records}
    by_task = {t.id: t for t in examples}
    for rec in records:
        task = by_task[rec["task_id"]]
        msgs = rec["messages"]
        assert rec["tools"] == TOOL_SCHEMAS and rec["score"] == 1.0 and rec["source"] == "transcript"
        assert msgs[0] == {"role": "system", "content": SYSTEM_PROMPT.format(workdir=task.workspace.mount_dir)}
        assert msgs[1] == {"role": "user", "content": task.instruction}
        calls = [c for m in msgs if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == \
            [(s.name, s.arguments) for s in task.reference.steps]
        results = [m for m in msgs if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in results] == [c["id"] for c in calls]
        assert msgs[-1] == {"role": "assistant", "content": task.reference.final_message}
        [ex] = tokenize_record(tokenizer, rec)  # verified against the server's rendering
        assert len(trained_spans(ex.labels)) == len(calls) + 1
    # statuses, and trajectories without a conversation (noop) are dropped with their reason
    noop = Trajectory.model_validate({**worse, "id": "noop#0", "agent": "noop", "transcript": worse["transcript"][:2],
                                      "verdict": {**worse["verdict"], "score": 1.0}})
    timeout = Trajectory.model_validate({**worse, "id": "late#0", "status": "timeout"})
    other = tmp_path / "other.jsonl"
    other.write_text(noop.model_dump_json() + "\n" + timeout.model_dump_json() + "\n")
    _, rep = filter_trajectories([other], FilterOptions(min_score=0.0))
    assert rep.dropped == {"no_messages": 1, "status": 1}
    _, rep = filter_trajectories([other], FilterOptions(min_score=0.0, statuses=("any",)))
    assert rep.dropped == {"no_messages": 1} and rep.kept == 1


def test_oracle_conversation_is_what_the_llm_agent_sends(examples, bwrap_backend, oracle_run, tmp_path):
    """The built-in LLM agent, fed the reference solution as model turns, exchanges the same messages that the
    filter derives from the oracle's transcript (tool-call ids aside)."""
    from clawgym.agent import LLMAgent
    from clawgym.llm import LLMClient
    from clawgym.rollout import RolloutOptions, run_rollout
    from scripted_llm import ScriptedLLM, turns_from_reference

    tasks = examples[:2]
    with ScriptedLLM({t.instruction: turns_from_reference(t) for t in tasks}) as llm:
        client = LLMClient(llm.model, llm.base_url)
        report = run_rollout(tasks, lambda: LLMAgent(client), bwrap_backend, tmp_path / "run",
                             RolloutOptions(jobs=2, keep_workspaces=False))
    oracle = {t.task_id: t for t in read_records(oracle_run / "trajectories.jsonl", Trajectory)}

    def strip(msgs):
        out = []
        for m in msgs:
            m = {k: v for k, v in m.items() if k != "tool_call_id"}
            if m.get("tool_calls"):
                m["tool_calls"] = [{"name": c["function"]["name"], "args": json.loads(c["function"]["arguments"])}
                                   for c in m["tool_calls"]]
            out.append(m)
        return out

    for t in report.ran:
        assert t.status == "completed" and t.messages
        assert strip(transcript_to_messages(oracle[t.task_id].transcript)) == strip(t.messages)
        assert t.tools == TOOL_SCHEMAS


def test_filter_command_writes_atomically(oracle_run, tmp_path):
    import typer
    from typer.testing import CliRunner

    from clawgym.cli.train_cmd import filter_cmd, train_app

    app = typer.Typer()
    app.command("filter")(filter_cmd)
    app.add_typer(train_app, name="train")
    out = tmp_path / "data" / "sft.jsonl"
    res = CliRunner().invoke(app, ["filter", str(oracle_run), "--min-score", "0.5", "--status", "completed",
                                   "--max-per-task", "1", "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["kept"] == len(read_sft_records(out)) >= 7 and rep["tasks"] == 8
    assert sorted(p.name for p in out.parent.iterdir()) == ["sft.jsonl", "sft.jsonl.report.json"]
    res = CliRunner().invoke(app, ["filter", str(tmp_path / "nowhere"), "-o", str(out)])
    assert res.exit_code == 1 and "no such file" in res.output


# ------------------------------------------------------------------------------------------------ SFT


def _eval_loss(model_dir: Path, examples: list[TokenizedExample], adapter: Path | None = None) -> float:
    import torch
    from transformers import AutoModelForCausalLM

    from clawgym.train.sft import compact_causal_lm_loss, load_base_config

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), config=load_base_config(model_dir)).eval()
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    total = n = 0
    with torch.no_grad():
        for ex in examples:
            loss, k, _ = compact_causal_lm_loss(model, {"input_ids": torch.tensor([ex.input_ids]),
                                                        "labels": torch.tensor([ex.labels])})
            total += float(loss) * k
            n += k
    return total / n


@pytest.fixture(scope="module")
def trained(tiny_model, sft_file, tmp_path_factory):
    """A few LoRA steps on the oracle conversations (cut to 2048 tokens), resumed once from a checkpoint."""
    from clawgym.train.sft import SFTOptions, TrainError, train_sft

    out = tmp_path_factory.mktemp("train") / "run"
    opts = SFTOptions(model=str(tiny_model), max_steps=4, lr=2e-2, max_len=2048, batch_tokens=4096, lora_r=8,
                      save_steps=2, warmup_ratio=0.0, verify="full")
    first = train_sft(sft_file, out, opts, show_progress=False)
    assert first.steps == 4 and (out / "checkpoint-4").is_dir() and (out / "final" / "adapter_config.json").exists()
    with pytest.raises(TrainError, match="--resume"):
        train_sft(sft_file, out, opts, show_progress=False)
    opts.resume, opts.max_steps = True, 6
    second = train_sft(sft_file, out, opts, show_progress=False)
    return out, first, second


def test_sft_lowers_the_loss_packs_without_padding_and_resumes(trained, tiny_model, sft_file, tokenizer):
    from clawgym.train.sft import build_examples

    out, first, second = trained
    assert first.padded_tokens == first.tokens > 0  # packed: not a single padding token computed
    assert first.data.records == 8 and first.data.truncated > 0 and first.data.dropped_no_trained_tokens == 0
    assert second.resumed_from and second.resumed_from.endswith("checkpoint-4") and second.steps == 6
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert all(r["tokens_per_s"] > 0 and r["trained_tokens"] > 0 for r in rows)
    meta = json.loads((out / "train.json").read_text())
    assert meta["status"] == "done" and meta["attention"] == "clawgym_sdpa_varlen" and meta["compact_loss"]
    examples, _ = build_examples(read_sft_records(sft_file), tokenizer, 2048)
    before = _eval_loss(tiny_model, examples)
    after = _eval_loss(tiny_model, examples, adapter=out / "final")
    assert after < before - 0.05, (before, after)


def test_export_serve_and_run_an_agent_episode(trained, tiny_model, examples, bwrap_backend, tmp_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from clawgym.agent import AgentLimits, LLMAgent
    from clawgym.llm import LLMClient
    from clawgym.rollout import RolloutOptions, run_rollout
    from clawgym.serve import ServerProcess
    from clawgym.train.sft import export_model, load_base_config

    out, _, _ = trained
    model_dir = export_model(out, tmp_path / "exported")
    files = {p.name for p in model_dir.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja"} <= files
    assert "quantization_config" not in json.loads((model_dir / "config.json").read_text())
    # the merged weights compute what base + adapter compute
    ids = torch.tensor([[1, 520, 2000, 31, 7]])
    merged = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model), config=load_base_config(tiny_model))
    adapted = PeftModel.from_pretrained(base, str(out / "final")).eval()
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, adapted(ids).logits, atol=1e-4)

    task = examples[0]
    with ServerProcess(str(model_dir), log_path=tmp_path / "server.log") as server:
        client = LLMClient(str(model_dir), server.base_url, timeout=120)
        agent = LLMAgent(client, AgentLimits(max_turns=2, max_completion_tokens=24))
        report = run_rollout([task], lambda: agent, bwrap_backend, tmp_path / "run",
                             RolloutOptions(jobs=1, keep_workspaces=False))
        client.close()
    [t] = report.ran
    assert t.status in ("completed", "agent_error"), t.error
    assert t.verdict is not None and t.verdict.status in ("scored", "checker_failed")
    assert [m["role"] for m in t.messages[:3]] == ["system", "user", "assistant"]
    assert t.usage["model_calls"] >= 1 and t.model
    stored = read_records(tmp_path / "run" / "trajectories.jsonl", Trajectory)
    assert [s.id for s in stored] == [t.id]
