"""OpenAI chat messages and tools to a prompt, and generated text back to content and tool calls.

When the model's chat template knows about tools (it mentions `tools`), it renders them itself. Otherwise the
tools are described in the system message the way Hermes / Qwen 2.5 templates do, assistant tool calls are
written back as `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` and tool results travel as user
turns wrapped in `<tool_response>`. The same convention is parsed out of what the model generates.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"

HERMES_TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}}\n</tool_call>"
)


def content_text(content: Any) -> str:
    """The text of an OpenAI message content: a string, or a list of parts of which the text ones count."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text"):
                parts.append(str(p.get("text", "")))
            elif isinstance(p, str):
                parts.append(p)
        return "".join(parts)
    return str(content)


def template_supports_tools(tokenizer: Any) -> bool:
    template = getattr(tokenizer, "chat_template", None) or ""
    return isinstance(template, str) and "tools" in template


def _hermes_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    preamble = None
    if tools:
        preamble = HERMES_TOOLS_PREAMBLE.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
    for m in messages:
        role = m.get("role")
        text = content_text(m.get("content"))
        if role in ("system", "developer"):
            out.append({"role": "system", "content": text})
        elif role == "assistant":
            calls = []
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function", {}) if isinstance(tc, dict) else {}
                args = fn.get("arguments", "{}")
                try:
                    args_obj = json.loads(args) if isinstance(args, str) else args
                except json.JSONDecodeError:
                    args_obj = args
                calls.append(f"{TOOL_CALL_OPEN}\n{json.dumps({'name': fn.get('name'), 'arguments': args_obj}, ensure_ascii=False)}\n{TOOL_CALL_CLOSE}")
            out.append({"role": "assistant", "content": "\n".join([text] * bool(text) + calls)})
        elif role == "tool":
            body = f"<tool_response>\n{text}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1]["content"].startswith("<tool_response>"):
                out[-1]["content"] += "\n" + body  # consecutive tool results share one turn, as in Qwen's template
            else:
                out.append({"role": "user", "content": body})
        else:
            out.append({"role": "user", "content": text})
    if preamble:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"].rstrip() + "\n\n" + preamble}
        else:
            out.insert(0, {"role": "system", "content": preamble})
    return out


def render_prompt(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> list[int]:
    """Token ids of the prompt for `messages` (+ `tools`), ending with the assistant generation prompt."""
    if template_supports_tools(tokenizer):
        msgs = [{**m, "content": content_text(m.get("content"))} for m in messages]
        ids = tokenizer.apply_chat_template(msgs, tools=tools or None, add_generation_prompt=True, tokenize=True,
                                            return_dict=False)
    else:
        ids = tokenizer.apply_chat_template(_hermes_messages(messages, tools), add_generation_prompt=True,
                                            tokenize=True, return_dict=False)
    if isinstance(ids, dict):  # some tokenizers return a BatchEncoding regardless
        ids = ids["input_ids"]
    return list(ids)


def render_conversation(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                        generation_prompt: bool, template_kwargs: dict[str, Any] | None = None) -> str:
    """The text of `messages` (+ `tools`) rendered as :func:`render_prompt` renders a prompt -- what training
    tokenizes (`clawgym.train.masks`) and `summary --stats` counts (`template_kwargs`, e.g. Qwen3's
    `enable_thinking`, go to the chat template as extra variables)."""
    kw = template_kwargs or {}
    if template_supports_tools(tokenizer):
        msgs = [{**m, "content": content_text(m.get("content"))} for m in messages]
        return tokenizer.apply_chat_template(msgs, tools=tools or None, add_generation_prompt=generation_prompt,
                                             tokenize=False, **kw)
    return tokenizer.apply_chat_template(_hermes_messages(messages, tools), add_generation_prompt=generation_prompt,
                                         tokenize=False, **kw)


def conversation_tokens(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                        template_kwargs: dict[str, Any] | None = None) -> int:
    """How many tokens the whole conversation is, rendered as training renders it (chat template, tools)."""
    text = render_conversation(tokenizer, messages, tools, generation_prompt=False, template_kwargs=template_kwargs)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class ParsedOutput:
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_NAME_RE = re.compile(r'"name"\s*:\s*"([^"]+)"')


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def _one_call(body: str) -> dict[str, Any] | None:
    """An OpenAI tool call from the JSON inside <tool_call>; None when not even a tool name can be found.

    Arguments that are not valid JSON are passed on as the raw text, so the agent sees a malformed call (and can
    say so to the model) instead of the call silently turning into chat text.
    """
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        m = _NAME_RE.search(body)
        if not m:
            return None
        raw = body[body.find("arguments") :] if "arguments" in body else ""
        raw = raw.split(":", 1)[1].strip().rstrip("}").strip() if ":" in raw else ""
        return {"id": new_call_id(), "type": "function", "function": {"name": m.group(1), "arguments": raw}}
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return {"id": new_call_id(), "type": "function", "function": {"name": obj["name"], "arguments": args_text}}


def parse_output(text: str, tools_offered: bool) -> ParsedOutput:
    """Split generated text into chat content and tool calls (only when tools were offered)."""
    if not tools_offered or TOOL_CALL_OPEN not in text:
        return ParsedOutput(content=text)
    calls = []
    for m in _CALL_RE.finditer(text):
        call = _one_call(m.group(1))
        if call is not None:
            calls.append(call)
    if not calls:
        return ParsedOutput(content=text)
    content = text[: text.find(TOOL_CALL_OPEN)].strip()
    return ParsedOutput(content=content, tool_calls=calls)


def safe_content_prefix(text: str) -> int:
    """How much of partially generated text can be streamed as content now.

    Everything before a `<tool_call>` tag, holding back a tail that could be the start of one.
    """
    i = text.find(TOOL_CALL_OPEN)
    if i >= 0:
        return i
    for k in range(min(len(TOOL_CALL_OPEN) - 1, len(text)), 0, -1):
        if TOOL_CALL_OPEN.startswith(text[-k:]):
            return len(text) - k
    return len(text)
