"""Agent conversations in OpenAI-messages form, shared by the tests of the trajectory formats and of the Hugging
Face datasets: multi-turn, with tool calls (parallel ones too), tool results, content parts and a long one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawgym.agent.llm import TOOL_SCHEMAS


def call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


SYSTEM = "You are a personal agent working in /root/.openclaw/workspace. Use the tools; be brief."
CONVERSATIONS: list[dict[str, Any]] = [
    {  # three assistant turns: one call, two calls at once, then the answer
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Total the amounts in input/expenses.csv into output/total.txt."},
            {"role": "assistant", "content": None, "tool_calls": [call("call_1", "read", path="input/expenses.csv")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "date,amount\n2026-01-02,12.50\n2026-01-03,7.25\n"},
            {"role": "assistant", "content": "The total is 19.75; writing it now.",
             "tool_calls": [call("call_2", "write", path="output/total.txt", content="19.75\n"),
                            call("call_3", "exec", command="cat output/total.txt")]},
            {"role": "tool", "tool_call_id": "call_2", "content": "wrote 6 bytes to output/total.txt"},
            {"role": "tool", "tool_call_id": "call_3", "content": "19.75\n[exit code 0]"},
            {"role": "assistant", "content": "Done: output/total.txt holds 19.75."},
        ],
        "tools": TOOL_SCHEMAS,
    },
    {  # content as parts, a field of its own (kept through the round trip), one text-only answer
        "id": "traj-b", "task_id": "greeting", "score": 1.0,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": [{"type": "text", "text": "Reply with the word ready."}]},
            {"role": "assistant", "content": "ready"},
        ],
        "tools": TOOL_SCHEMAS,
    },
    {  # long: six rounds of listing a big folder
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Find every CSV file under data/ and count them."},
            *[m for k in range(6) for m in (
                {"role": "assistant", "content": None, "tool_calls": [call(f"c{k}", "ls", path=f"data/part{k}")]},
                {"role": "tool", "tool_call_id": f"c{k}",
                 "content": "\n".join(f"file_{k}_{i:03d}.{'csv' if i % 3 else 'txt'}" for i in range(90))},
            )],
            {"role": "assistant", "content": "There are 360 CSV files under data/."},
        ],
        "tools": TOOL_SCHEMAS,
    },
]


def write_lines(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
