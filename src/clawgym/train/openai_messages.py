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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym.core.errors import RecordError
from clawgym.llm.messages import (  # noqa: F401 - the conversation checks, re-exported for this module's users
    ROLES,
    ConversationLine,
    FieldProblem,
    check_messages,
    check_tools,
    conversation_lines,
)

FORMAT = "openai-messages"
FORMATS = (FORMAT,)


@dataclass
class MessagesImport:
    """The SFT records of the good lines, one error per bad line, and how many lines had no tool schemas."""

    records: list[dict[str, Any]] = field(default_factory=list)
    errors: list[RecordError] = field(default_factory=list)
    lines: int = 0
    without_tools: int = 0
    default_tools_used: int = 0


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
