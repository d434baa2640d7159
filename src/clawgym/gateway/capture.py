"""What the gateway keeps of one model call: the request as the agent sent it, the response as the upstream
gave it (assembled from stream chunks when streamed), and the token ids — the upstream's own, or, when it has
none, ids re-made with the model's chat template and checked against the upstream's token counts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

# Fields the gateway adds to a request to capture tokens; removed again from what the agent sees unless the agent
# asked for them itself.
TOKEN_FIELDS = ("return_token_ids", "logprobs")


@dataclass
class Assembled:
    """A chat completion response put together from a full body or from stream chunks."""

    id: str | None = None
    model: str | None = None
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    prompt_ids: list[int] | None = None
    response_ids: list[int] | None = None
    logprobs: list[float] | None = None
    # the other choices of a request with n > 1, by index (each its own step in the pool); this one is choice 0
    others: dict[int, Assembled] = field(default_factory=dict)

    def _choice(self, index: Any) -> Assembled:
        """Where choice `index` is assembled: this object for choice 0 (or an unindexed one), else its own."""
        if not isinstance(index, int) or index == 0:
            return self
        if index not in self.others:
            self.others[index] = Assembled()
        return self.others[index]

    def choices(self) -> list[Assembled]:
        """Every choice, in index order, each with the response's shared fields (id, model, prompt ids)."""
        out = [self]
        for i in sorted(self.others):
            other = self.others[i]
            other.id, other.model = other.id or self.id, other.model or self.model
            if other.prompt_ids is None:
                other.prompt_ids = self.prompt_ids
            out.append(other)
        return out

    def add_full(self, data: dict[str, Any]) -> None:
        self.id, self.model = data.get("id"), data.get("model")
        self.usage = data.get("usage") or {}
        self.prompt_ids = data.get("prompt_token_ids")
        choices = data.get("choices") or [{}]
        for ch in choices[1:]:
            if isinstance(ch, dict):
                self._choice(ch.get("index")).add_choice(ch, self.prompt_ids)
        self.add_choice(choices[0] if isinstance(choices[0], dict) else {}, self.prompt_ids)

    def add_choice(self, ch: dict[str, Any], prompt_ids: list[int] | None) -> None:
        """One choice of a full (not streamed) response."""
        self.prompt_ids = prompt_ids
        msg = ch.get("message") or {}
        if msg.get("content"):
            self.content.append(msg["content"])
        r = msg.get("reasoning_content") or msg.get("reasoning")
        if r:
            self.reasoning.append(r)
        for i, tc in enumerate(msg.get("tool_calls") or []):
            self.tool_calls[i] = tc
        self.finish_reason = ch.get("finish_reason")
        if ch.get("token_ids") is not None:
            self.response_ids = list(ch["token_ids"])
        if self.prompt_ids is None and ch.get("prompt_token_ids") is not None:
            self.prompt_ids = list(ch["prompt_token_ids"])
        lp = ch.get("logprobs")
        if isinstance(lp, dict) and lp.get("content"):
            self.logprobs = [e.get("logprob") for e in lp["content"]]

    def add_chunk(self, data: dict[str, Any]) -> None:
        self.id = self.id or data.get("id")
        self.model = self.model or data.get("model")
        if data.get("usage"):
            self.usage = data["usage"]
        if data.get("prompt_token_ids") is not None:
            self.prompt_ids = list(data["prompt_token_ids"])
        for ch in data.get("choices") or []:
            self._choice(ch.get("index")).add_delta(ch)

    def add_delta(self, ch: dict[str, Any]) -> None:
        """One choice's part of a stream chunk (each choice's text is kept apart: n > 1 streams interleave)."""
        delta = ch.get("delta") or {}
        if delta.get("content"):
            self.content.append(delta["content"])
        r = delta.get("reasoning_content") or delta.get("reasoning")
        if r:
            self.reasoning.append(r)
        for tc in delta.get("tool_calls") or []:
            idx = tc.get("index", len(self.tool_calls))
            slot = self.tool_calls.setdefault(idx, {"id": None, "type": "function",
                                                    "function": {"name": "", "arguments": ""}})
            if tc.get("id"):
                slot["id"] = tc["id"]
            if tc.get("type"):
                slot["type"] = tc["type"]
            fn = tc.get("function") or {}
            if fn.get("name"):
                slot["function"]["name"] += fn["name"]
            if fn.get("arguments"):
                slot["function"]["arguments"] += fn["arguments"]
        if ch.get("finish_reason"):
            self.finish_reason = ch["finish_reason"]
        if ch.get("token_ids"):
            self.response_ids = (self.response_ids or []) + list(ch["token_ids"])
        if ch.get("prompt_token_ids") is not None and self.prompt_ids is None:
            self.prompt_ids = list(ch["prompt_token_ids"])
        lp = ch.get("logprobs")
        if isinstance(lp, dict) and lp.get("content"):
            self.logprobs = (self.logprobs or []) + [e.get("logprob") for e in lp["content"]]

    def message(self) -> dict[str, Any]:
        """The assistant message, OpenAI shape, as the agent assembles it."""
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.reasoning:
            msg["reasoning_content"] = "".join(self.reasoning)
        if self.tool_calls:
            msg["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        return msg

    def response_record(self) -> dict[str, Any]:
        return {
            "id": self.id, "content": "".join(self.content) or None, "reasoning": "".join(self.reasoning) or None,
            "tool_calls": [self.tool_calls[i] for i in sorted(self.tool_calls)], "finish_reason": self.finish_reason,
        }


def strip_added(data: dict[str, Any], asked: dict[str, bool], chunk: bool) -> dict[str, Any]:
    """Remove from an upstream body (or chunk) the token fields the agent did not ask for itself."""
    if not asked.get("return_token_ids"):
        data.pop("prompt_token_ids", None)
        for ch in data.get("choices") or []:
            ch.pop("token_ids", None)
            ch.pop("prompt_token_ids", None)
    if not asked.get("logprobs"):
        for ch in data.get("choices") or []:
            if "logprobs" in ch:
                if chunk:
                    ch.pop("logprobs")
                else:
                    ch["logprobs"] = None
    return data


def retokenize(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               response: dict[str, Any], usage: dict[str, Any]) -> tuple[list[int], list[int], dict[str, Any]]:
    """(prompt ids, response ids, check) re-made with the model's chat template, for upstreams that give no ids.

    The response ids are what the template renders for the assistant turn after the prompt, up to and including
    its end-of-turn token; `check` compares both lengths with the upstream's reported token counts.
    """
    from clawgym.serve.chat_format import render_prompt

    prompt_ids = render_prompt(tokenizer, messages, tools)
    assistant = {"role": "assistant", "content": response.get("content") or ""}
    if response.get("tool_calls"):
        assistant["tool_calls"] = response["tool_calls"]
    full = render_full(tokenizer, messages + [assistant], tools)
    if full[: len(prompt_ids)] == prompt_ids:
        response_ids = full[len(prompt_ids):]
    else:  # the template renders the last turn differently with a generation prompt; fall back to plain text
        response_ids = tokenizer.encode(response.get("content") or "", add_special_tokens=False)
    eos = tokenizer.eos_token_id
    if eos in response_ids:  # drop what the template adds after the end-of-turn token (a newline)
        response_ids = response_ids[: response_ids.index(eos) + 1]
    check = {
        "prompt_tokens_reported": usage.get("prompt_tokens"), "prompt_ids": len(prompt_ids),
        "completion_tokens_reported": usage.get("completion_tokens"), "response_ids": len(response_ids),
    }
    # engines differ on whether the end-of-turn token they stopped at counts as generated (vLLM: yes; llama.cpp:
    # no): the response ids hold it either way, so one fewer reported is a match, and the check says which
    ends = bool(response_ids) and response_ids[-1] == eos
    reported = check["completion_tokens_reported"]
    check["end_token_counted"] = None if reported is None else reported == len(response_ids)
    check["match"] = (check["prompt_tokens_reported"] == len(prompt_ids)
                      and (reported == len(response_ids) or (ends and reported == len(response_ids) - 1)))
    return prompt_ids, response_ids, check


def render_full(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    from clawgym.serve.chat_format import _hermes_messages, content_text, template_supports_tools

    if template_supports_tools(tokenizer):
        msgs = [{**m, "content": content_text(m.get("content"))} for m in messages]
        ids = tokenizer.apply_chat_template(msgs, tools=tools or None, add_generation_prompt=False, tokenize=True,
                                            return_dict=False)
    else:
        ids = tokenizer.apply_chat_template(_hermes_messages(messages, tools), add_generation_prompt=False,
                                            tokenize=True, return_dict=False)
    return list(ids["input_ids"] if isinstance(ids, dict) else ids)


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON (orjson: the gateway re-serializes every body and chunk it passes on)."""
    return orjson.dumps(obj)


def loads(data: bytes | str) -> Any:
    """JSON to Python; raises ValueError on bad input (orjson.JSONDecodeError is one)."""
    return orjson.loads(data)
