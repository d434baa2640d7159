"""Episode transcripts in the OpenClaw session-event shape that PinchBench `grade()` checks read.

Line 1 is `{"type": "session", "version": 3, ...}`; every later entry is `{"type": "message", "id",
"parentId", "timestamp", "message": {role, content: [...]}}`. Assistant content items are `text` and
`toolCall {id, name, arguments}`; tool results are messages with role `toolResult`. Each toolCall also carries
`params`, an alias of `arguments` that some PinchBench v1 checks read.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TranscriptBuilder:
    def __init__(self, cwd: str, session_id: str | None = None):
        self.session_id = session_id or uuid.uuid4().hex
        self.events: list[dict[str, Any]] = [
            {"type": "session", "version": 3, "id": self.session_id, "timestamp": now_iso(), "cwd": cwd}
        ]
        self._last: str | None = None
        self._n = 0

    def _add(self, message: dict[str, Any]) -> dict[str, Any]:
        self._n += 1
        eid = f"e{self._n:04d}"
        event = {"type": "message", "id": eid, "parentId": self._last, "timestamp": now_iso(), "message": message}
        self._last = eid
        self.events.append(event)
        return event

    def user(self, text: str) -> None:
        self._add({"role": "user", "content": [{"type": "text", "text": text}]})

    def assistant(
        self,
        text: str = "",
        tool_calls: list[tuple[str, str, dict[str, Any]]] | None = None,
        *,
        model: str | None = None,
        usage: dict[str, Any] | None = None,
        stop_reason: str | None = None,
        thinking: str | None = None,
    ) -> None:
        content: list[dict[str, Any]] = []
        if thinking:
            content.append({"type": "thinking", "thinking": thinking})
        if text:
            content.append({"type": "text", "text": text})
        for call_id, name, args in tool_calls or []:
            content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args, "params": args})
        msg: dict[str, Any] = {"role": "assistant", "content": content}
        if model:
            msg["model"] = model
        if usage:
            msg["usage"] = usage
        msg["stopReason"] = stop_reason or ("toolUse" if tool_calls else "stop")
        self._add(msg)

    def tool_result(self, call_id: str, name: str, text: str, is_error: bool = False) -> None:
        self._add({
            "role": "toolResult", "toolCallId": call_id, "toolName": name,
            "content": [{"type": "text", "text": text}], "isError": is_error,
        })

    def to_jsonl(self) -> str:
        return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in self.events)
