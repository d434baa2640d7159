"""What the rubric judge is shown: workspace files read through the sandbox protocol's WorkspaceReader (the
live sandbox or a host snapshot), and a compact rendering of the transcript."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from clawgym.core.fstree import MAX_DEPTH
from clawgym.sandbox.base import SandboxPathError, WorkspaceReader


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"


def workspace_reader(workspace: Path | str | WorkspaceReader, mount_dir: str | None) -> WorkspaceReader:
    """What the judge reads files through: the live sandbox (the protocol's file methods), or, for a host
    directory (a workspace snapshot being re-scored), the same no-follow host access the built-in backends
    use, with absolute links under the task's mount dir mapped back into it."""
    if isinstance(workspace, (str, os.PathLike)):
        from clawgym.sandbox.hostdir import HostWorkspace

        return HostWorkspace(Path(os.path.realpath(workspace)), (mount_dir,) if mount_dir else ())
    return workspace


def _read_text(files: WorkspaceReader, path: str, size: int, limit: int) -> str:
    data = files.read_file(path, max_bytes=limit * 4 + 4096)
    if b"\x00" in data[:8192]:
        return f"(binary file, {size} bytes; not shown)"
    return _clip(data.decode("utf-8", errors="replace"), limit)


MAX_LISTED_DIRS = 10_000  # directories listed to find evidence files (a workspace is the agent's)


def _files_under(files: WorkspaceReader, top: str) -> list[tuple[str, int]]:
    """(path relative to `top`, size) of the regular files under the directory `top`, in path order; links
    are not followed, and a directory that cannot be listed is skipped."""
    found: list[tuple[tuple[str, ...], int]] = []
    stack: list[tuple[str, ...]] = [()]  # iterative and bounded: the agent chose the depth
    listed = 0
    while stack and listed < MAX_LISTED_DIRS:
        rel = stack.pop()
        listed += 1
        try:
            entries = files.list_dir("/".join((top, *rel)))
        except (OSError, SandboxPathError):
            continue
        for e in entries:
            if e.kind == "dir" and len(rel) < MAX_DEPTH:
                stack.append((*rel, e.name))
            elif e.kind == "file":
                found.append(((*rel, e.name), e.size))
    return [("/".join(parts), size) for parts, size in sorted(found)]


def read_evidence_file(workspace: WorkspaceReader, rel: str, limit: int) -> tuple[str | None, str]:
    """(text to show the judge, note). Text None: the file is missing or not readable as the agent's work
    (the rule scores 0 without a model call), and the note says why. Links are followed as the sandbox
    would, only while they stay in the workspace; only regular files are read, at most `limit` characters."""
    try:
        st = workspace.stat(rel)
    except SandboxPathError:
        return None, f"{rel} leads outside the workspace: scored 0 without calling the judge"
    except OSError:
        st = None
    if st is None:
        return None, f"{rel} does not exist in the final workspace: scored 0 without calling the judge"
    if st.kind == "dir":
        parts, used = [], 0
        for sub, size in _files_under(workspace, rel):
            if used >= limit:
                parts.append("[... more files not shown ...]")
                break
            try:
                chunk = _read_text(workspace, f"{rel.rstrip('/')}/{sub}", size, max(200, (limit - used) // 2))
            except (OSError, SandboxPathError):
                continue
            parts.append(f"--- {sub} ---\n{chunk}")
            used += len(chunk)
        return ("\n".join(parts) or "(an empty directory)"), ""
    if st.kind != "file":
        return None, f"{rel} is not a regular file: scored 0 without calling the judge"
    try:
        return _read_text(workspace, rel, st.size, limit), ""
    except SandboxPathError as exc:
        return None, f"{rel} cannot be read ({exc}): scored 0 without calling the judge"
    except OSError as exc:
        return None, f"{rel} cannot be read ({exc.strerror or exc}): scored 0 without calling the judge"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    out = []
    for item in content or []:
        if isinstance(item, dict) and item.get("type") == "text":
            out.append(str(item.get("text", "")))
        elif isinstance(item, str):
            out.append(item)
    return "\n".join(out)


def render_transcript(transcript: list[dict[str, Any]], max_chars: int = 6000, arg_chars: int = 300,
                      result_chars: int = 400, text_chars: int = 1200) -> str:
    """A compact rendering of an OpenClaw transcript for the judge: user turns, the assistant's text, each tool
    call with its arguments (long strings cut) and each tool result (cut). When the whole is too long, the
    first lines (the request) and as many of the last ones as fit are kept, with the gap marked."""
    lines: list[str] = []
    for ev in transcript:
        if ev.get("type") != "message":
            continue
        msg = ev.get("message") or {}
        role = msg.get("role")
        if role == "user":
            lines.append(f"USER: {_clip(_text_of(msg.get('content')).strip(), text_chars)}")
        elif role == "assistant":
            for item in msg.get("content") or []:
                if not isinstance(item, dict):
                    continue
                if item.get("type") == "text" and str(item.get("text", "")).strip():
                    lines.append(f"ASSISTANT: {_clip(str(item['text']).strip(), text_chars)}")
                elif item.get("type") == "toolCall":
                    args = item.get("arguments", item.get("params", {}))
                    if isinstance(args, dict):
                        args = {k: (_clip(v, arg_chars) if isinstance(v, str) else v) for k, v in args.items()}
                    lines.append(f"CALL {item.get('name')}({_clip(json.dumps(args, ensure_ascii=False), arg_chars * 3)})")
        elif role == "toolResult":
            flag = " (error)" if msg.get("isError") else ""
            text = _text_of(msg.get("content")).strip()
            lines.append(f"RESULT {msg.get('toolName', '')}{flag}: {_clip(text, result_chars)}")
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text or "(no messages)"
    head: list[str] = []
    used = 0
    for line in lines[:1]:
        head.append(_clip(line, max_chars // 4))
        used += len(head[-1]) + 1
    tail: list[str] = []
    for line in reversed(lines[1:]):
        if used + len(line) + 1 > max_chars - 60:
            break
        tail.append(line)
        used += len(line) + 1
    omitted = len(lines) - len(head) - len(tail)
    return "\n".join(head + [f"[... {omitted} earlier lines omitted ...]"] + list(reversed(tail)))
