"""OpenClaw's own transcript, read from its SQLite state, converted to the transcript `grade()` reads.

OpenClaw (2026.7.2 and later) keeps sessions in `STATE/agents/main/agent/openclaw-agent.sqlite`, table
`transcript_events`: one JSON event per row (`event_json`, or zstd-compressed in `event_zstd` with its size in
`event_utf8_bytes`), ordered by `seq` within a `session_id`. Events are shaped like the JSONL sessions of older
versions (formats.md, section 4): a `session` event, then `message` events ({role, content, ...}) among
internal ones (`model_change`, `thinking_level_change`, `custom`...).

The conversion keeps the `session` event and every `message` event as OpenClaw wrote them, with two changes
PinchBench's checks need: string content becomes `[{"type": "text", "text": ...}]`, and every `toolCall`
gets a `params` alias of its `arguments`. Internal events are dropped (and counted).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AGENT_DB = Path("agents") / "main" / "agent" / "openclaw-agent.sqlite"


class TranscriptReadError(Exception):
    pass


@dataclass
class OpenClawTranscript:
    events: list[dict[str, Any]]  # converted: session + message events, every session in order
    sessions: list[str] = field(default_factory=list)  # OpenClaw session ids, in order
    dropped: dict[str, int] = field(default_factory=dict)  # internal events left out, by type
    compressed: int = 0  # rows that were zstd-compressed

    def messages(self, role: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == "message"
                and (role is None or (e.get("message") or {}).get("role") == role)]

    @property
    def final_message(self) -> str:
        for e in reversed(self.messages("assistant")):
            text = "".join(c.get("text", "") for c in e["message"].get("content") or [] if c.get("type") == "text")
            if text.strip():
                return text
        return ""

    @property
    def tool_calls(self) -> int:
        return sum(1 for e in self.messages("assistant") for c in e["message"].get("content") or []
                   if c.get("type") == "toolCall")

    @property
    def tool_errors(self) -> int:
        return sum(1 for e in self.messages("toolResult") if e["message"].get("isError"))


def _decode(row: sqlite3.Row, zstd: Any) -> dict[str, Any]:
    if row["event_json"] is not None:
        return json.loads(row["event_json"])
    blob = row["event_zstd"]
    if zstd is None:
        import zstandard

        zstd = zstandard.ZstdDecompressor()
    data = zstd.decompress(blob, max_output_size=int(row["event_utf8_bytes"] or 0) or 4 * 1024 * 1024)
    return json.loads(data.decode("utf-8"))


def read_raw_events(db_path: Path) -> list[tuple[str, int, dict[str, Any], bool]]:
    """(session id, seq, event, was compressed) of every transcript row, sessions in the order they began."""
    if not Path(db_path).is_file():
        raise TranscriptReadError(f"no OpenClaw transcript database at {db_path}")
    uri = f"file:{db_path}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise TranscriptReadError(f"cannot open {db_path}: {exc}") from None
    db.row_factory = sqlite3.Row
    try:
        rows = db.execute(
            "SELECT e.session_id, e.seq, e.event_json, e.event_zstd, e.event_utf8_bytes FROM transcript_events e "
            "JOIN (SELECT session_id, MIN(created_at) AS began FROM transcript_events GROUP BY session_id) s "
            "ON s.session_id = e.session_id ORDER BY s.began, e.session_id, e.seq"
        ).fetchall()
    except sqlite3.Error as exc:
        raise TranscriptReadError(f"{db_path}: cannot read transcript_events: {exc}") from None
    finally:
        db.close()
    out = []
    zstd = None
    for row in rows:
        if row["event_json"] is None and zstd is None:
            import zstandard

            zstd = zstandard.ZstdDecompressor()
        try:
            event = _decode(row, zstd)
        except Exception as exc:  # noqa: BLE001 - one bad row must name itself
            raise TranscriptReadError(
                f"{db_path}: transcript_events row session_id={row['session_id']} seq={row['seq']}: "
                f"cannot decode event: {type(exc).__name__}: {exc}") from None
        out.append((row["session_id"], row["seq"], event, row["event_json"] is None))
    return out


def _text_items(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def convert_events(raw: list[tuple[str, int, dict[str, Any], bool]]) -> OpenClawTranscript:
    events: list[dict[str, Any]] = []
    sessions: list[str] = []
    dropped: Counter = Counter()
    compressed = 0
    for sid, _, ev, was_compressed in raw:
        compressed += was_compressed
        kind = ev.get("type")
        if sid not in sessions:
            sessions.append(sid)
        if kind == "session":
            events.append(dict(ev))
            continue
        if kind != "message" or not isinstance(ev.get("message"), dict):
            dropped[str(kind)] += 1
            continue
        msg = dict(ev["message"])
        items = []
        for item in _text_items(msg.get("content")):
            if isinstance(item, dict) and item.get("type") == "toolCall":
                item = {**item, "params": item.get("arguments")}
            items.append(item)
        msg["content"] = items
        events.append({**ev, "message": msg})
    if events and events[0].get("type") != "session":
        events.insert(0, {"type": "session", "version": 3, "id": sessions[0] if sessions else "", "cwd": ""})
    return OpenClawTranscript(events=events, sessions=sessions, dropped=dict(dropped), compressed=compressed)


def read_transcript(state_dir: Path) -> OpenClawTranscript:
    """The converted transcript of every session in an OpenClaw state directory."""
    return convert_events(read_raw_events(Path(state_dir) / AGENT_DB))
