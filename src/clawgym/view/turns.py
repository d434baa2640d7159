"""Episodes and pool steps as turns of state, action and observation, the shape the trajectory page shows.

A *turn* is one model call: ``state`` (the messages the model saw that are new since the previous turn),
``action`` (its answer: text, reasoning and tool calls) and ``observation`` (the tool results that came back).
Run records carry OpenAI-shaped ``messages`` (the llm agent) or an OpenClaw ``transcript`` (the oracle, OpenClaw
itself); both become the same chat messages first. Pool steps each hold the whole conversation sent with the
call, so a step's state is what its request added to the previous step's request and answer.
"""

from __future__ import annotations

import json
from typing import Any

from clawgym.pool.export import text_content


def _text(content: Any) -> str:
    out = text_content(content)
    if out is None:
        return ""
    return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)


def _call(c: dict[str, Any]) -> dict[str, Any]:
    fn = c.get("function") or {}
    args = fn.get("arguments", c.get("arguments"))
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False, indent=1) if args is not None else ""
    return {"id": str(c.get("id") or ""), "name": str(fn.get("name") or c.get("name") or "?"), "arguments": args}


def message(m: dict[str, Any]) -> dict[str, Any]:
    """A chat message reduced to what the page shows (all strings)."""
    out = {"role": str(m.get("role") or "?"), "content": _text(m.get("content"))}
    if m.get("tool_calls"):
        out["tool_calls"] = [_call(c) for c in m["tool_calls"] if isinstance(c, dict)]
    for key in ("tool_call_id", "name"):
        if m.get(key):
            out[key] = str(m[key])
    if m.get("reasoning") or m.get("reasoning_content"):
        out["reasoning"] = str(m.get("reasoning") or m.get("reasoning_content"))
    if m.get("is_error"):
        out["is_error"] = True
    return out


def transcript_messages(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenClaw session events (type=message) as chat messages."""
    out: list[dict[str, Any]] = []
    for ev in transcript:
        msg = ev.get("message") if isinstance(ev, dict) else None
        if not isinstance(msg, dict):
            continue
        parts = msg.get("content")
        parts = parts if isinstance(parts, list) else [{"type": "text", "text": str(parts or "")}]
        text = "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text")
        role = msg.get("role")
        if role == "assistant":
            calls = [{"id": p.get("id"), "name": p.get("name"), "arguments": p.get("arguments")}
                     for p in parts if isinstance(p, dict) and p.get("type") == "toolCall"]
            thinking = "".join(str(p.get("thinking") or "") for p in parts
                               if isinstance(p, dict) and p.get("type") == "thinking")
            m: dict[str, Any] = {"role": "assistant", "content": text, "tool_calls": calls}
            if thinking:
                m["reasoning"] = thinking
            out.append(m)
        elif role == "toolResult":
            out.append({"role": "tool", "content": text, "tool_call_id": msg.get("toolCallId"),
                        "name": msg.get("toolName"), "is_error": bool(msg.get("isError"))})
        else:
            out.append({"role": str(role or "?"), "content": text})
    return out


def turns_of_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages split into turns: the messages before each assistant message, it, and its tool results."""
    turns: list[dict[str, Any]] = []
    state: list[dict[str, Any]] = []
    for raw in messages:
        m = message(raw)
        if m["role"] == "assistant":
            turns.append({"state": state, "action": m, "observation": []})
            state = []
        elif m["role"] == "tool" and turns and not state:
            turns[-1]["observation"].append(m)
        else:
            state.append(m)
    if state:
        turns.append({"state": state, "action": None, "observation": []})
    return turns


def episode_turns(messages: list[dict[str, Any]], transcript: list[dict[str, Any]],
                  steps: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """An episode's turns; with its `steps`, each turn with a model answer carries its step's progress reward
    (`progress_reward`, clawgym.verify.progress: the i-th answer is step i) when the episode has them."""
    turns = turns_of_messages(messages if messages else transcript_messages(transcript))
    answered = [t for t in turns if t["action"] is not None]
    for turn, step in zip(answered, steps or [], strict=False):  # the steps of an episode cut short may be fewer
        if isinstance(step, dict) and step.get("progress_reward") is not None:
            turn["progress_reward"] = step["progress_reward"]
    return turns


def step_turns(steps: list[Any]) -> list[dict[str, Any]]:
    """Pool steps (StepRecords of one trajectory, in order) as turns, one per step."""
    turns: list[dict[str, Any]] = []
    prev_len = 0
    for i, s in enumerate(steps):
        msgs = list(s.request.get("messages") or [])
        # the request resends the history: what is new is past the previous request and its answer
        start = prev_len + 1 if i and len(msgs) > prev_len else 0
        new = msgs[start:]
        obs: list[dict[str, Any]] = []
        while new and new[0].get("role") == "tool" and turns:
            obs.append(message(new.pop(0)))
        if turns:
            turns[-1]["observation"] = obs
        resp = s.response or {}
        action = message({"role": "assistant", "content": resp.get("content"), "tool_calls": resp.get("tool_calls"),
                          "reasoning": resp.get("reasoning")})
        action["finish_reason"] = str(resp.get("finish_reason"))
        turns.append({"state": [message(m) for m in new], "earlier": start, "action": action, "observation": []})
        prev_len = len(msgs)
    return turns
