"""Tasks, trajectories and SFT data as a Hugging Face dataset folder: ``data/train-00000-of-00001.parquet`` and a
``README.md`` dataset card whose front matter names the split, the layout of a dataset repository on the Hub.
``datasets.load_dataset(DIR)`` reads it (and ``load_dataset("USER/NAME")`` once pushed); each kind's columns:

* ``tasks``: ``id``, ``source``, ``category``, ``instruction``, and ``task``, the whole Task record as JSON
  (``Task.model_validate_json(row["task"])`` gives it back);
* ``sft`` (`clawgym filter` or `clawgym import trajectories` output): ``id``, ``messages``, ``tools``, ``task_id``,
  ``score`` (the record's, or the imported line's) and ``record``, the record's other fields as JSON;
* ``trajectories`` (a run directory or trajectories.jsonl; the last record of each episode): ``id``,
  ``task_id``, ``agent``, ``model``, ``status``, ``score``, ``messages``, ``tools`` and ``trajectory``, the whole
  record as JSON. An OpenClaw transcript gives the messages the built-in agent would have exchanged
  (:func:`clawgym.train.filter.conversation_of`).

``messages`` is a list of structs as trl's SFTTrainer and OpenRLHF read it: ``role``, ``content``, ``tool_calls``
[{``id``, ``type``, ``function`` {``name``, ``arguments``}}], ``tool_call_id``, ``name``, ``reasoning_content``.
A column holds one schema, so every message has every field (absent ones read back as null: see
:func:`message_from_row`), ``arguments`` given as an object is written as its JSON text, content given as a list
of parts as its text, and other message fields are left out and counted. ``tools`` is the list of tool schemas
as a JSON string, the form trl accepts (schemas differ from tool to tool, which one Arrow struct cannot hold).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym.core.errors import ClawgymError

KINDS = ("tasks", "sft", "trajectories")
DATA_FILE = "data/train-00000-of-00001.parquet"
CARD = "README.md"
MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content")


class DatasetExportError(ClawgymError):
    pass


@dataclass
class DatasetExport:
    """What was written: the folder, the kind, the rows, the input's bad lines and what the schema left out."""

    path: Path
    kind: str
    rows: int = 0
    errors: list[str] = field(default_factory=list)
    left_out: Counter = field(default_factory=Counter)  # message fields the schema has no column for, by name
    reshaped: Counter = field(default_factory=Counter)  # content parts flattened, object arguments as JSON text


def _features(kind: str) -> Any:
    from datasets import Features, List, Value

    s = Value("string")
    call = {"id": s, "type": s, "function": {"name": s, "arguments": s}}
    message = {"role": s, "content": s, "tool_calls": List(call), "tool_call_id": s, "name": s,
               "reasoning_content": s}
    if kind == "tasks":
        cols = {"id": s, "source": s, "category": s, "instruction": s, "task": s}
    elif kind == "sft":
        cols = {"id": s, "messages": List(message), "tools": s, "task_id": s, "score": Value("float64"), "record": s}
    else:
        cols = {"id": s, "task_id": s, "agent": s, "model": s, "status": s, "score": Value("float64"),
                "messages": List(message), "tools": s, "trajectory": s}
    return Features(cols)


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def message_row(m: dict[str, Any], rep: DatasetExport) -> dict[str, Any]:
    """One message in the dataset's message schema (see the module docstring), counting what it changed."""
    from clawgym.serve.chat_format import content_text

    content = m.get("content")
    if content is not None and not isinstance(content, str):
        rep.reshaped["content parts as text"] += 1
        content = content_text(content)
    calls = None
    if m.get("tool_calls"):
        calls = []
        for c in m["tool_calls"]:
            fn = c.get("function") or {}
            if not isinstance(fn.get("arguments", ""), str):
                rep.reshaped["tool call arguments as JSON text"] += 1
            calls.append({"id": c.get("id"), "type": c.get("type", "function"),
                          "function": {"name": fn.get("name"), "arguments": _text(fn.get("arguments", "{}"))}})
    for key in m:
        if key not in MESSAGE_FIELDS:
            rep.left_out[key] += 1
    return {"role": m.get("role"), "content": content, "tool_calls": calls, "tool_call_id": m.get("tool_call_id"),
            "name": m.get("name"), "reasoning_content": _text(m.get("reasoning_content"))}


def message_from_row(m: dict[str, Any]) -> dict[str, Any]:
    """A message read back from the dataset: the fields it had (null ones dropped, `content` always kept)."""
    out = {k: v for k, v in m.items() if v is not None or k == "content"}
    if out.get("tool_calls"):
        out["tool_calls"] = [{k: v for k, v in c.items() if v is not None} for c in out["tool_calls"]]
    return out


def conversation_from_row(row: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages, tools) of an `sft` or `trajectories` row, as they were written."""
    return [message_from_row(m) for m in row["messages"]], json.loads(row["tools"] or "[]")


def _score(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _task_rows(path: Path, rep: DatasetExport) -> list[dict[str, Any]]:
    from clawgym.core.jsonl import read_records_lenient
    from clawgym.core.records import Task

    read = read_records_lenient(path, Task)
    rep.errors += [str(e) for e in read.errors]
    return [{"id": t.id, "source": t.source, "category": t.category, "instruction": t.instruction,
             "task": t.model_dump_json()} for t in read.records]


def _sft_rows(path: Path, rep: DatasetExport) -> list[dict[str, Any]]:
    from clawgym.train.masks import record_name
    from clawgym.train.openai_messages import conversation_lines

    rows = []
    for item in conversation_lines(path):
        if item.error is not None:
            rep.errors.append(str(item.error))
            continue
        rec = item.record
        rest = {k: v for k, v in rec.items() if k not in ("messages", "tools")}
        own = {**(rec.get("extra") if isinstance(rec.get("extra"), dict) else {}), **rest}  # an import's fields
        rows.append({"id": record_name({**rec, "_line": item.line}),
                     "messages": [message_row(m, rep) for m in rec["messages"]],
                     "tools": json.dumps(item.tools, ensure_ascii=False), "task_id": _text(own.get("task_id")),
                     "score": _score(own.get("score")), "record": json.dumps(rest, ensure_ascii=False)})
    return rows


def _trajectory_rows(path: Path, rep: DatasetExport) -> list[dict[str, Any]]:
    from clawgym.train.filter import FilterError, FilterReport, conversation_of, load_latest
    from clawgym.train.run_inputs import verdict_score

    report = FilterReport()
    try:
        latest = load_latest([path], report)
    except FilterError as exc:
        raise DatasetExportError(str(exc)) from None
    rep.errors += report.bad_lines
    rows = []
    for _, t in latest:
        conv = conversation_of(t)
        messages, tools = (conv[0], conv[1]) if conv is not None else ([], [])
        rows.append({"id": t.id, "task_id": t.task_id, "agent": t.agent, "model": t.model, "status": t.status,
                     "score": verdict_score(t.verdict), "messages": [message_row(m, rep) for m in messages],
                     "tools": json.dumps(tools, ensure_ascii=False), "trajectory": t.model_dump_json()})
    return rows


def _card(kind: str, rep: DatasetExport, source: str) -> str:
    from clawgym import __version__

    columns = ", ".join(f"`{c}`" for c in _features(kind))
    return (f"---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*.parquet\n"
            f"tags:\n- clawgym\n- agents\n- tool-use\n---\n\n# clawgym {kind}\n\n"
            f"{rep.rows} rows written by clawgym {__version__} (`clawgym export hf-dataset --kind {kind}`) from "
            f"`{source}`.\n\nColumns: {columns}. `messages` are OpenAI chat messages with `tool_calls`; `tools` is the "
            "list of tool schemas as a JSON string, as trl's SFTTrainer accepts it.\n\n```python\n"
            "from datasets import load_dataset\nds = load_dataset(\"PATH_OR_REPO\", split=\"train\")\n```\n")


def export_hf_dataset(source: str | os.PathLike, kind: str, out_dir: str | os.PathLike) -> DatasetExport:
    """Write `source` (tasks.jsonl, an SFT file, or a run directory / trajectories.jsonl) as the dataset folder
    `out_dir`; bad input lines are reported in the result and left out."""
    if kind not in KINDS:
        raise DatasetExportError(f"kind: unknown {kind!r}; choose {', '.join(KINDS)}")
    try:
        import datasets
    except ImportError:
        raise DatasetExportError("writing a Hugging Face dataset needs the datasets library (pip install "
                                 "'clawgym[train]', which brings it with trl; or pip install datasets)") from None

    src, out = Path(source), Path(out_dir)
    if not src.exists():
        raise DatasetExportError(f"{src}: no such file or directory")
    if kind != "trajectories" and not src.is_file():
        raise DatasetExportError(f"{src}: not a file (--kind {kind} reads a JSONL file)")
    rep = DatasetExport(path=out, kind=kind)
    rows = {"tasks": _task_rows, "sft": _sft_rows, "trajectories": _trajectory_rows}[kind](src, rep)
    if not rows:
        raise DatasetExportError(f"{src}: no {kind} record to export" + (f" (first error: {rep.errors[0]})" if rep.errors else ""))
    rep.rows = len(rows)
    ds = datasets.Dataset.from_list(rows, features=_features(kind))
    (out / "data").mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkstemp(prefix=".train.", suffix=".parquet", dir=out / "data")[1])
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        ds.to_parquet(str(tmp))
        os.replace(tmp, out / DATA_FILE)
    finally:
        tmp.unlink(missing_ok=True)
        if bars:
            datasets.enable_progress_bars()
    (out / CARD).write_text(_card(kind, rep, str(src)), encoding="utf-8")
    return rep
