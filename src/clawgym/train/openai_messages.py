"""The OpenAI-messages format of agent trajectories, in and out: one JSON object a line, ``{"messages": [...],
"tools": [...]}``, as ClawGym-Trajectory, OpenRLHF (``--input_key messages --multiturn --apply_chat_template``)
and trl's SFTTrainer read them. Messages are OpenAI chat messages (``system`` / ``developer``, ``user``,
``assistant`` with ``tool_calls`` [{``id``, ``type``: function, ``function`` {``name``, ``arguments``}}], ``tool``
with ``tool_call_id``); ``tools`` the OpenAI tool schemas offered ({``type``: function, ``function`` {``name``,
``description``, ``parameters``}}), a list or, as trl accepts it, that list as a JSON string.

**In** (:func:`read_openai_messages`): every line is checked, and a bad one is an error ``FILE:LINE: field:
problem`` while the others are still read. A good line becomes the SFT record `clawgym train sft` takes
(:func:`clawgym.train.filter.read_sft_records`): its messages and tools as they are, ``trajectory_id`` (the line's
``id`` / ``trajectory_id``, else ``FILE:LINE``), ``source`` and ``origin``, and the line's other fields in
``extra``. Training puts the loss on every assistant turn of it (:mod:`clawgym.train.masks`). Lines without
``tools`` take the default list when one is given (ClawGym's own SFT script passes OpenClaw's tool list to every
line rather than storing it), else train without tool schemas, and are counted.

**Out** (:func:`to_openai_messages`): ``messages`` and ``tools`` of any SFT record (of `clawgym filter` or of an
import), plus the ``extra`` fields an import kept, so that a file imported and exported again is the same.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym.core.errors import RecordError

FORMAT = "openai-messages"
FORMATS = (FORMAT,)
ROLES = ("system", "developer", "user", "assistant", "tool")


class FieldProblem(Exception):
    """A problem with one field of a line."""

    def __init__(self, field: str, problem: str):
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")


@dataclass
class MessagesImport:
    """The SFT records of the good lines, one error per bad line, and how many lines had no tool schemas."""

    records: list[dict[str, Any]] = field(default_factory=list)
    errors: list[RecordError] = field(default_factory=list)
    lines: int = 0
    without_tools: int = 0
    default_tools_used: int = 0


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


def sft_record(row: Any, origin: str, default_tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The SFT record of one line (`origin` = ``FILE:LINE``); raise :class:`FieldProblem` for the first problem."""
    if not isinstance(row, dict):
        raise FieldProblem("<line>", f"expected a JSON object, got {type(row).__name__}")
    check_messages(row.get("messages"))
    given = row.get("tools")
    tools = check_tools(given) if given is not None else list(default_tools or [])
    rid = row.get("id") or row.get("trajectory_id")
    extra = {k: v for k, v in row.items() if k not in ("messages", "tools")}
    return {"messages": row["messages"], "tools": tools,
            "trajectory_id": str(rid) if isinstance(rid, (str, int)) and not isinstance(rid, bool) else origin,
            "source": FORMAT, "origin": origin, "tools_given": given is not None, "extra": extra}


def read_openai_messages(path: str | os.PathLike, default_tools: list[dict[str, Any]] | None = None) -> MessagesImport:
    """Every line of an OpenAI-messages file as an SFT record, or as an error naming its line and field."""
    path = Path(path)
    res = MessagesImport()
    with path.open(encoding="utf-8", errors="surrogateescape") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            res.lines += 1
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                res.errors.append(RecordError(str(path), lineno, None, f"not valid JSON ({exc.msg} at column {exc.colno})"))
                continue
            except RecursionError:
                res.errors.append(RecordError(str(path), lineno, None, "not valid JSON: nested too deeply"))
                continue
            try:
                rec = sft_record(row, f"{path.name}:{lineno}", default_tools)
                json.dumps(rec, ensure_ascii=False).encode("utf-8")  # a lone surrogate cannot be written back
            except FieldProblem as bad:
                res.errors.append(RecordError(str(path), lineno, bad.field, bad.problem))
                continue
            except UnicodeEncodeError:
                res.errors.append(RecordError(str(path), lineno, None, "not UTF-8 (or a lone surrogate escape)"))
                continue
            if not rec["tools_given"]:
                res.without_tools += 1
                res.default_tools_used += bool(default_tools)
            res.records.append(rec)
    return res


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


def load_tools(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Tool schemas from a JSON file: a list, or an object holding one under ``tools``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(str(path), None, None, f"cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise RecordError(str(path), exc.lineno, None, f"not valid JSON ({exc.msg})") from None
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    try:
        return check_tools(data)
    except FieldProblem as bad:
        raise RecordError(str(path), None, bad.field, bad.problem) from None


def to_openai_messages(record: dict[str, Any]) -> dict[str, Any]:
    """An SFT record as an OpenAI-messages line: its messages and tools, and the fields its import kept."""
    tools = record.get("tools") or []
    if isinstance(tools, str):
        tools = json.loads(tools)
    return {"messages": record["messages"], "tools": tools, **(record.get("extra") or {})}
