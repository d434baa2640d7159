"""OpenAI chat messages and tool schemas as files of conversations hold them, checked: one JSON object a line,
``{"messages": [...], "tools": [...]}`` (OpenAI-messages files, the SFT records of `clawgym filter`).

Reading and checking a conversation is not training: `clawgym summary --stats` counts the tokens of such files,
`train` imports and exports them (:mod:`clawgym.train.openai_messages`), `hf` publishes them. Here, below all
of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym.core.errors import RecordError

ROLES = ("system", "developer", "user", "assistant", "tool")


class FieldProblem(Exception):
    """A problem with one field of a line."""

    def __init__(self, field: str, problem: str):
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")


def _content_ok(content: Any) -> bool:
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(p, str) or (isinstance(p, dict) and isinstance(p.get("type"), str)) for p in content)


def _check_tool_calls(calls: Any, where: str) -> list[str]:
    """The ids of a well-formed `tool_calls` list."""
    if not isinstance(calls, list):
        raise FieldProblem(where, "must be a list of tool calls")
    ids = []
    for k, call in enumerate(calls):
        at = f"{where}[{k}]"
        if not isinstance(call, dict):
            raise FieldProblem(at, "must be an object {id, type, function}")
        if call.get("type", "function") != "function":
            raise FieldProblem(f"{at}.type", f"must be 'function', got {call.get('type')!r}")
        fn = call.get("function")
        if not isinstance(fn, dict):
            raise FieldProblem(f"{at}.function", "missing, or not an object {name, arguments}")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise FieldProblem(f"{at}.function.name", "missing or empty")
        if not isinstance(fn.get("arguments", "{}"), (str, dict)):
            raise FieldProblem(f"{at}.function.arguments", "must be a JSON string or an object")
        if call.get("id") is not None:
            if not isinstance(call["id"], str):
                raise FieldProblem(f"{at}.id", "must be a string")
            ids.append(call["id"])
    return ids


def check_messages(messages: Any) -> None:
    """Raise :class:`FieldProblem` (field, problem) for the first thing wrong with a conversation."""
    if not isinstance(messages, list) or not messages:
        raise FieldProblem("messages", "missing, or not a non-empty list of messages")
    call_ids: set[str] = set()
    for i, m in enumerate(messages):
        at = f"messages[{i}]"
        if not isinstance(m, dict):
            raise FieldProblem(at, "must be an object {role, content, ...}")
        role = m.get("role")
        if role not in ROLES:
            raise FieldProblem(f"{at}.role", f"{role!r} is not one of {', '.join(ROLES)}")
        content = m.get("content")
        calls = m.get("tool_calls")
        if role == "assistant" and calls is not None:
            call_ids.update(_check_tool_calls(calls, f"{at}.tool_calls"))
        elif calls is not None:
            raise FieldProblem(f"{at}.tool_calls", f"only assistant messages call tools, this one is {role}")
        if content is None and not (role == "assistant" and calls):
            raise FieldProblem(f"{at}.content", "missing (only an assistant message with tool_calls may have none)")
        if content is not None and not _content_ok(content):
            raise FieldProblem(f"{at}.content", "must be a string, a list of content parts or null")
        if role == "tool":
            ref = m.get("tool_call_id")
            if ref is not None and not isinstance(ref, str):
                raise FieldProblem(f"{at}.tool_call_id", "must be a string")
            if ref and call_ids and ref not in call_ids:
                raise FieldProblem(f"{at}.tool_call_id", f"{ref!r} answers no earlier tool call")
    if not any(m.get("role") == "assistant" for m in messages):
        raise FieldProblem("messages", "no assistant turn to train on")


def check_tools(tools: Any) -> list[dict[str, Any]]:
    """The tool schemas of a line (a list, or that list as a JSON string); raise :class:`FieldProblem` when malformed."""
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as exc:
            raise FieldProblem("tools", f"a string that is not JSON ({exc.msg})") from None
    if not isinstance(tools, list):
        raise FieldProblem("tools", "must be a list of tool schemas")
    for k, tool in enumerate(tools):
        at = f"tools[{k}]"
        if not isinstance(tool, dict):
            raise FieldProblem(at, "must be an object {type: function, function: {name, parameters}}")
        fn = tool.get("function")
        if not isinstance(fn, dict):
            raise FieldProblem(f"{at}.function", "missing, or not an object {name, description, parameters}")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise FieldProblem(f"{at}.function.name", "missing or empty")
    return tools


@dataclass
class ConversationLine:
    """One non-blank line of a file of conversations: its record and tool schemas, or the error naming it."""

    line: int
    record: dict[str, Any] | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    error: RecordError | None = None


def conversation_lines(path: str | os.PathLike) -> Iterator[ConversationLine]:
    """Every line of a file of conversations (OpenAI-messages lines, or SFT records with messages), each checked
    (:func:`check_messages`, :func:`check_tools`)."""
    path = Path(path)
    with path.open(encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    raise FieldProblem("<line>", f"expected a JSON object, got {type(rec).__name__}")
                check_messages(rec.get("messages"))
                tools = check_tools(rec.get("tools") or [])
            except json.JSONDecodeError as exc:
                yield ConversationLine(lineno, error=RecordError(str(path), lineno, None, f"not valid JSON ({exc.msg})"))
            except FieldProblem as bad:
                yield ConversationLine(lineno, error=RecordError(str(path), lineno, bad.field, bad.problem))
            else:
                yield ConversationLine(lineno, rec, tools)
