"""A conversation to training token ids and labels, rendered exactly as the embedded server renders prompts.

The server (:mod:`clawgym.serve.chat_format`) renders a request with the model's chat template when that
template knows tools, else in the Hermes / Qwen style (tools in the system message, assistant calls as
`<tool_call>{json}</tool_call>`, results as `<tool_response>` user turns). Training uses the same function
(`_hermes_messages`, then `apply_chat_template`), so that what a trained model learns to write is what the server
parses back into tool calls, and the context of every assistant turn is token for token the prompt the server
would build for it.

Labels are -100 everywhere except on assistant turns: the assistant's content, its tool-call text and the
end-of-turn token the server stops on (not the template's newline after it, which the server never generates).
Every mask is verified before it is used: each contiguous trained span is decoded and must equal its assistant
turn's rendered text, the tokens before it must be the server's prompt for that turn, and a mismatch raises
:class:`MaskError` naming the record.

Records that carry the engine's own token ids (`steps: [{prompt_ids, response_ids}]`, or one step's
`prompt_ids` / `response_ids` at the top level, as in the data pool) are trained on those ids directly, the
mask being the response ids; consecutive steps whose prompt extends the previous step's ids share one sequence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from clawgym.core.errors import ClawgymError
from clawgym.serve.chat_format import (  # noqa: F401 - conversation_tokens: re-exported (train.windows)
    _hermes_messages,
    content_text,
    conversation_tokens,
    render_prompt,
    template_supports_tools,
)
from clawgym.serve.chat_format import render_conversation as _render

IGNORE = -100
_EOT_STRINGS = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<end_of_turn>", "<|end|>")


class MaskError(ClawgymError):
    """A record whose training mask could not be built or failed verification."""

    def __init__(self, record: str, message: str):
        self.record = record
        super().__init__(f"record {record}: {message}")


@dataclass
class TokenizedExample:
    input_ids: list[int]
    labels: list[int]
    record: str  # names the record in errors and reports: trajectory id, else file line
    spans: list[tuple[int, int]] = field(default_factory=list)  # trained token ranges [start, end)
    expected: list[str] = field(default_factory=list)  # the rendered text of each span's assistant turn

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def trained_tokens(self) -> int:
        return sum(1 for x in self.labels if x != IGNORE)


def end_of_turn_ids(tokenizer: Any) -> set[int]:
    """Token ids that end an assistant turn: the ones the server's engine stops generating on."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    unk = tokenizer.unk_token_id
    for special in _EOT_STRINGS:
        tid = tokenizer.convert_tokens_to_ids(special)
        if isinstance(tid, int) and tid >= 0 and tid != unk:
            ids.add(tid)
    return ids


def trained_spans(labels: list[int]) -> list[tuple[int, int]]:
    """Contiguous runs of trained positions, as [start, end) index pairs."""
    spans: list[tuple[int, int]] = []
    start = None
    for i, lab in enumerate(labels):
        if lab != IGNORE and start is None:
            start = i
        elif lab == IGNORE and start is not None:
            spans.append((start, i))
            start = None
    if start is not None:
        spans.append((start, len(labels)))
    return spans


def record_name(record: dict[str, Any]) -> str:
    for key in ("step_id", "trajectory_id", "id"):
        if record.get(key):
            return str(record[key])
    return f"line {record['_line']}" if "_line" in record else "<record>"


def _tools_of(record: dict[str, Any]) -> list[dict[str, Any]] | None:
    tools = record.get("tools")
    if isinstance(tools, str):
        tools = json.loads(tools)
    return tools or None


def _decode(tokenizer: Any, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _assistant_expected(tokenizer: Any, message: dict[str, Any], eot_text: str) -> str | None:
    """The text of an assistant turn as the Hermes rendering writes it (None for templates that render tools)."""
    if template_supports_tools(tokenizer):
        return None
    return _hermes_messages([message], None)[0]["content"] + eot_text


HISTORIES = ("exact", "final")


def tokenize_conversation(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                          record: str = "<record>", verify_prompts: bool = True, history: str = "exact",
                          template_kwargs: dict[str, Any] | None = None) -> list[TokenizedExample]:
    """Token ids and assistant-only labels of one conversation, verified.

    One example for the whole conversation when the chat template renders history the same way as the turn it
    prompts (every Hermes-style template, ChatML, Llama 3...). A template that renders earlier turns differently
    (Qwen3 drops the reasoning of turns before the last user query) gets, with `history="exact"`, one example per
    assistant turn, each in exactly the context the server gives it (about turns x the tokens); with
    `history="final"`, one example: the whole conversation as its final render shows it, every assistant turn
    trained where it stands there (its context is the final render's history, not the server's prompt for it).
    `verify_prompts` also checks, turn by turn, that the context tokens equal the server's prompt ids (one extra
    tokenization per turn; not done with `template_kwargs`, which the embedded server does not take).
    """
    if history not in HISTORIES:
        raise ValueError(f"unknown history {history!r}; use {' or '.join(HISTORIES)}")
    if template_kwargs:
        verify_prompts = False
    if not messages:
        raise MaskError(record, "no messages")
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if not turns:
        raise MaskError(record, "no assistant turn to train on")
    eot = end_of_turn_ids(tokenizer)
    try:
        full = _render(tokenizer, messages[: turns[-1] + 1], tools, False, template_kwargs)
        prefixes = [_render(tokenizer, messages[:i], tools, True, template_kwargs) for i in turns]
        # each turn as it renders when it is the last message, i.e. when the model writes it
        throughs = [_render(tokenizer, messages[: i + 1], tools, False, template_kwargs) for i in turns[:-1]]
    except Exception as exc:  # jinja's TemplateError, or a template that rejects the conversation
        raise MaskError(record, f"the chat template cannot render this conversation: {exc}") from exc
    if not all(full.startswith(p) for p in prefixes + throughs):
        # The template renders history differently from the turn being written (e.g. Qwen3 drops the reasoning
        # block from earlier turns).
        if history == "final":
            return [_final_render_example(tokenizer, messages, tools, turns, full, prefixes, record, eot,
                                          template_kwargs)]
        return [_turn_example(tokenizer, messages, tools, i, record, eot, verify_prompts, template_kwargs)
                for i in turns]
    enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), list(enc["offset_mapping"])
    starts: dict[int, int] = {}
    for k, (a, _) in enumerate(offsets):
        starts.setdefault(int(a), k)
    labels = [IGNORE] * len(ids)
    spans: list[tuple[int, int]] = []
    expected: list[str] = []
    for turn, prefix in zip(turns, prefixes, strict=True):
        s = starts.get(len(prefix))
        if s is None:
            raise MaskError(record, f"assistant turn at message {turn}: no token starts where the turn starts "
                                    f"(character {len(prefix)}); the tokenizer merges text across the turn boundary")
        t = next((k for k in range(s, len(ids)) if ids[k] in eot), None)
        end = len(ids) if t is None else t + 1
        if t is not None and any(ids[k] in eot for k in range(s, t)):
            raise MaskError(record, f"assistant turn at message {turn}: its content contains an end-of-turn token")
        labels[s:end] = ids[s:end]
        spans.append((s, end))
        text = full[offsets[s][0]: offsets[end - 1][1]]
        want = _assistant_expected(tokenizer, messages[turn], _decode(tokenizer, [ids[t]]) if t is not None else "")
        expected.append(want if want is not None else text)
        if verify_prompts:
            server = render_prompt(tokenizer, messages[:turn], tools)
            if ids[:s] != server:
                k = next((k for k, (a, b) in enumerate(zip(ids[:s], server, strict=False)) if a != b),
                         min(s, len(server)))
                raise MaskError(record, f"assistant turn at message {turn}: the training context differs from the "
                                        f"server's prompt at token {k} ({s} vs {len(server)} tokens)")
    example = TokenizedExample(ids, labels, record, spans, expected)
    verify_example(tokenizer, example)
    return [example]


def _header_candidates(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       turn: int, prompt: str, template_kwargs: dict[str, Any] | None) -> list[str]:
    """The generation prompt's text (what the template appends to prompt the assistant), and its shorter
    line-prefixes: the first line is the assistant header every turn of the final render starts with; the rest
    (Qwen3's empty reasoning block with `enable_thinking=False`) is there only where that render writes it."""
    bare = _render(tokenizer, messages[:turn], tools, False, template_kwargs)
    gen = prompt[len(bare):] if prompt.startswith(bare) else ""
    cands = [gen[: k + 1] for k, ch in enumerate(gen) if ch == "\n"] + [gen]
    return sorted({c for c in cands if c}, key=len, reverse=True)


def _final_render_example(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                          turns: list[int], full: str, prefixes: list[str], record: str, eot: set[int],
                          template_kwargs: dict[str, Any] | None) -> TokenizedExample:
    """One example of the whole final render, every assistant turn trained where it stands in it.

    A turn starts after its assistant header, found in order in the render (the first line of the generation
    prompt, then as much of the rest as the render writes there), and ends at its end-of-turn token; the turn's
    own content must be inside its span (a check that the right turn was found)."""
    enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), list(enc["offset_mapping"])
    starts: dict[int, int] = {}
    for k, (a, _) in enumerate(offsets):
        starts.setdefault(int(a), k)
    labels = [IGNORE] * len(ids)
    spans: list[tuple[int, int]] = []
    expected: list[str] = []
    cursor = 0
    for turn, prompt in zip(turns, prefixes, strict=True):
        cands = _header_candidates(tokenizer, messages, tools, turn, prompt, template_kwargs)
        if not cands:
            raise MaskError(record, f"assistant turn at message {turn}: the template's generation prompt is empty")
        at = full.find(cands[-1], cursor)
        if at < 0:
            raise MaskError(record, f"assistant turn at message {turn}: its header {cands[-1]!r} is not in the render")
        head = next(c for c in cands if full.startswith(c, at))
        s = starts.get(at + len(head))
        if s is None:
            raise MaskError(record, f"assistant turn at message {turn}: no token starts where the turn starts")
        t = next((k for k in range(s, len(ids)) if ids[k] in eot), None)
        end = len(ids) if t is None else t + 1
        labels[s:end] = ids[s:end]
        spans.append((s, end))
        text = full[offsets[s][0]: offsets[end - 1][1]]
        own = content_text(messages[turn].get("content")) or ""
        own = own.split("</think>")[-1].strip()
        if own and own[-40:] not in text:
            raise MaskError(record, f"assistant turn at message {turn}: its content is not in the span found for it "
                                    f"({text[:80]!r}...)")
        want = _assistant_expected(tokenizer, messages[turn], _decode(tokenizer, [ids[t]]) if t is not None else "")
        expected.append(want if want is not None else text)
        cursor = offsets[end - 1][1]
    example = TokenizedExample(ids, labels, record, spans, expected)
    verify_example(tokenizer, example)
    return example


def _turn_example(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, turn: int,
                  record: str, eot: set[int], verify_prompts: bool,
                  template_kwargs: dict[str, Any] | None = None) -> TokenizedExample:
    if template_kwargs:
        text = _render(tokenizer, messages[:turn], tools, True, template_kwargs)
        prompt = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    else:
        prompt = render_prompt(tokenizer, messages[:turn], tools)
    full = _render(tokenizer, messages[: turn + 1], tools, False, template_kwargs)
    ids = list(tokenizer(full, add_special_tokens=False)["input_ids"])
    if ids[: len(prompt)] != prompt:
        raise MaskError(record, f"assistant turn at message {turn}: the rendered turn does not extend the server's "
                                "prompt token for token")
    s = len(prompt)
    t = next((k for k in range(s, len(ids)) if ids[k] in eot), None)
    end = len(ids) if t is None else t + 1
    ids = ids[:end]
    labels = [IGNORE] * s + ids[s:end]
    text = _decode(tokenizer, ids[s:end])
    want = _assistant_expected(tokenizer, messages[turn], _decode(tokenizer, [ids[t]]) if t is not None else "")
    example = TokenizedExample(ids, labels, f"{record} turn {turn}", [(s, end)], [want if want is not None else text])
    verify_example(tokenizer, example)
    return example


def verify_example(tokenizer: Any, example: TokenizedExample) -> None:
    """Every contiguous trained span decodes to its assistant turn's rendered text, and nothing else is trained."""
    spans = trained_spans(example.labels)
    if spans != example.spans:
        raise MaskError(example.record, f"trained spans {spans} are not the assistant turns' {example.spans}")
    for k, ((s, e), want) in enumerate(zip(spans, example.expected, strict=True)):
        if example.labels[s:e] != example.input_ids[s:e]:
            raise MaskError(example.record, f"assistant turn {k + 1}: labels differ from the input ids")
        got = _decode(tokenizer, example.input_ids[s:e])
        if got != want:
            raise MaskError(example.record, f"assistant turn {k + 1}: the trained tokens decode to {got[:120]!r}..., "
                                            f"the turn renders as {want[:120]!r}...")


def _int_list(value: Any, what: str, record: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value):
        raise MaskError(record, f"{what} must be a list of token ids")
    return value


def tokenize_token_steps(steps: list[dict[str, Any]], record: str = "<record>",
                         vocab_size: int | None = None) -> list[TokenizedExample]:
    """Examples from the engine's own ids: the response ids are trained, prompts are context.

    A step whose prompt starts with the previous sequence (its prompt and response) continues that sequence;
    otherwise it starts a new one.
    """
    out: list[TokenizedExample] = []
    ids: list[int] = []
    labels: list[int] = []
    spans: list[tuple[int, int]] = []
    for k, step in enumerate(steps):
        prompt = _int_list(step.get("prompt_ids"), f"step {k}: prompt_ids", record)
        response = _int_list(step.get("response_ids"), f"step {k}: response_ids", record)
        if not prompt or not response:
            raise MaskError(record, f"step {k}: empty prompt_ids or response_ids")
        if vocab_size is not None and max(max(prompt), max(response)) >= vocab_size:
            raise MaskError(record, f"step {k}: a token id is beyond the model's vocabulary ({vocab_size}); the ids "
                                    "come from another tokenizer")
        if ids and prompt[: len(ids)] == ids:
            new = prompt[len(ids):]
        else:
            if ids:
                out.append(TokenizedExample(ids, labels, record, spans))
            ids, labels, spans, new = [], [], [], prompt
        ids = ids + new
        labels = labels + [IGNORE] * len(new)
        spans.append((len(ids), len(ids) + len(response)))
        ids = ids + response
        labels = labels + list(response)
    if ids:
        out.append(TokenizedExample(ids, labels, record, spans))
    return out


def sessions_of(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The conversation split where the system prompt is sent again: a fresh session (PinchBench `new_session`)
    that the model saw without the earlier turns."""
    if not messages or messages[0].get("role") != "system":
        return [messages]
    first = messages[0].get("content")
    out: list[list[dict[str, Any]]] = [[messages[0]]]
    for m in messages[1:]:
        if m.get("role") == "system" and m.get("content") == first:
            out.append([m])
        else:
            out[-1].append(m)
    return out


def _pool_step_messages(record: dict[str, Any]) -> tuple[list[dict[str, Any]], Any] | None:
    """The messages of a data-pool step (`request` + `response`) that has no token ids."""
    req, resp = record.get("request"), record.get("response")
    if not isinstance(req, dict) or not isinstance(resp, dict) or not req.get("messages"):
        return None
    reply: dict[str, Any] = {"role": "assistant", "content": resp.get("content") or None}
    if resp.get("tool_calls"):
        reply["tool_calls"] = resp["tool_calls"]
    elif reply["content"] is None:
        reply["content"] = ""
    return list(req["messages"]) + [reply], req.get("tools")


@dataclass
class RecordSource:
    """What one SFT record trains on: the engine's token steps, or its conversation's sessions (+ tools)."""

    name: str
    steps: list[dict[str, Any]] | None
    sessions: list[list[dict[str, Any]]]
    tools: list[dict[str, Any]] | None

    def session_name(self, k: int) -> str:
        return self.name if len(self.sessions) == 1 else f"{self.name} session {k + 1}"


def record_source(record: dict[str, Any], prefer_token_ids: bool = True) -> RecordSource:
    """Token-exact steps when the record carries them (and `prefer_token_ids`), else its messages (one session per
    fresh system prompt), else a data-pool step's request and response."""
    name = record_name(record)
    steps = record.get("steps")
    if steps is None and record.get("prompt_ids") is not None and record.get("response_ids") is not None:
        steps = [{"prompt_ids": record["prompt_ids"], "response_ids": record["response_ids"]}]
    messages = record.get("messages")
    tools = _tools_of(record)
    if not messages and (pool := _pool_step_messages(record)) is not None:
        messages, tools = pool[0], pool[1] or None
    if steps and (prefer_token_ids or not messages):
        return RecordSource(name, steps, [], tools)
    if not messages:
        raise MaskError(name, "neither messages nor token ids")
    parts = [p for p in sessions_of(messages) if any(m.get("role") == "assistant" for m in p)]
    if not parts:
        raise MaskError(name, "no assistant turn to train on")
    return RecordSource(name, None, parts, tools)


def tokenize_record(tokenizer: Any, record: dict[str, Any], verify_prompts: bool = True,
                    prefer_token_ids: bool = True, history: str = "exact",
                    template_kwargs: dict[str, Any] | None = None) -> list[TokenizedExample]:
    """Training examples of one SFT record (:func:`record_source`): its token steps, else one example per session
    (:func:`tokenize_conversation`)."""
    src = record_source(record, prefer_token_ids)
    if src.steps:
        return tokenize_token_steps(src.steps, src.name, vocab_size=len(tokenizer))
    out: list[TokenizedExample] = []
    for k, part in enumerate(src.sessions):
        out += tokenize_conversation(tokenizer, part, src.tools, src.session_name(k), verify_prompts=verify_prompts,
                                     history=history, template_kwargs=template_kwargs)
    return out
