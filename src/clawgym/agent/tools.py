"""The agent's tools, with OpenClaw's names and argument names, executed in the episode's sandbox.

`read {path, offset?, limit?}`, `write {path, content}`, `edit {path, oldText, newText}` or
`edit {path, edits: [{oldText, newText}]}`, `exec {command, workdir?, timeout?, env?}` (alias `bash`) and
`ls {path?}`. Paths are relative to the workspace or absolute under its mount dir; anything else is refused.
A bad call (unknown tool, missing or mistyped argument) returns an error observation the model can recover
from; it never raises.
"""

from __future__ import annotations

import errno
import posixpath
from dataclasses import dataclass
from typing import Any

from clawgym.core.text import printable
from clawgym.sandbox.base import Sandbox, SandboxPathError

TOOL_ALIASES = {"bash": "exec", "read_file": "read", "write_file": "write", "edit_file": "edit", "list": "ls"}
DEFAULT_MAX_OBSERVATION = 20_000


# what the model is told when a command hit a sandbox limit
_LIMIT_NOTES = {
    "file_size": "[command killed: file size limit exceeded]",
    "disk": "[no space left: the workspace reached the sandbox's disk limit]",
    "memory": "[command killed: the sandbox's memory limit was reached]",
    "processes": "[command not started or killed: the sandbox's process limit was reached]",
}
# errors of a host-side file operation that come from what the agent did (a full workspace, a bad name), told to
# the model like a failed command; any other OSError is the host's
_AGENT_OS_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG, errno.EACCES, errno.EPERM, errno.EEXIST,
                    errno.ENOTEMPTY, errno.ELOOP, errno.EFBIG, errno.EROFS}


@dataclass
class ToolOutcome:
    text: str
    is_error: bool = False
    malformed: bool = False  # the call itself was wrong: unknown tool, missing or mistyped argument


class ToolArgumentError(Exception):
    pass


class MalformedCall(ToolArgumentError):
    """A call that does not fit the tool's schema (as opposed to a well-formed call that fails)."""


def _arg(args: dict[str, Any], name: str, kind: type | tuple[type, ...], required: bool = True) -> Any:
    if name not in args or args[name] is None:
        if required:
            raise MalformedCall(f"missing required argument '{name}'")
        return None
    value = args[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise MalformedCall(f"argument '{name}' must be {expected}, got {type(value).__name__}")
    return value


class ToolExecutor:
    """Runs tool calls against one sandbox."""

    def __init__(self, sandbox: Sandbox, max_observation: int = DEFAULT_MAX_OBSERVATION, exec_timeout: float = 120.0):
        self.sandbox = sandbox
        self.max_observation = max_observation
        self.exec_timeout = exec_timeout

    def _clip(self, text: str) -> str:
        if len(text) <= self.max_observation:
            return text
        cut = len(text) - self.max_observation
        return text[: self.max_observation] + f"\n[... {cut} more characters truncated]"

    def _path(self, path: str) -> str:
        """A workspace-relative path, or ToolArgumentError for paths outside the workspace."""
        if not path.strip():
            raise ToolArgumentError("empty path")
        if path.startswith("/"):
            norm = posixpath.normpath(path)
            for base in {self.sandbox.mount_dir, self.sandbox.workdir}:
                if norm == base or norm.startswith(base.rstrip("/") + "/"):
                    return posixpath.relpath(norm, base)
            raise ToolArgumentError(f"path {path} is outside the workspace {self.sandbox.mount_dir}")
        rel = posixpath.normpath(path)
        if rel == ".." or rel.startswith("../"):
            raise ToolArgumentError(f"path {path} is outside the workspace")
        return rel

    def call(self, name: str, args: Any) -> ToolOutcome:
        """Run one tool call. What it says back is recorded and sent to the model, so text that cannot be UTF-8
        (a lone surrogate the model wrote into a path, echoed in an error) is escaped (`core.text.printable`)."""
        out = self._call(name, args)
        out.text = printable(out.text)
        return out

    def _call(self, name: str, args: Any) -> ToolOutcome:
        tool = TOOL_ALIASES.get(name, name)
        handler = getattr(self, f"_tool_{tool}", None)
        if handler is None:
            return ToolOutcome(f"Error: unknown tool '{name}'. Available tools: read, write, edit, exec, ls.", True, True)
        if not isinstance(args, dict):
            return ToolOutcome(f"Error: arguments of '{name}' must be a JSON object", True, True)
        try:
            return handler(args)
        except MalformedCall as exc:
            return ToolOutcome(f"Error: {tool}: {exc}", True, True)
        except ToolArgumentError as exc:
            return ToolOutcome(f"Error: {tool}: {exc}", True)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            return ToolOutcome(f"Error: {tool}: {exc.strerror or exc}: {args.get('path', '')}", True)
        except SandboxPathError as exc:  # outside the workspace, a FIFO, a link to the host...
            return ToolOutcome(f"Error: {tool}: {exc}", True)
        except UnicodeDecodeError:
            return ToolOutcome(f"Error: {tool}: {args.get('path')} is not a UTF-8 text file", True)
        except UnicodeEncodeError:  # a lone surrogate in a path or text the model wrote as a JSON escape
            return ToolOutcome(f"Error: {tool}: the arguments hold text that is not valid Unicode", True)
        except OSError as exc:
            if exc.errno not in _AGENT_OS_ERRORS:
                raise
            return ToolOutcome(f"Error: {tool}: {exc.strerror or exc}: {args.get('path', '')}", True)

    # -- tools ------------------------------------------------------------------------------------------
    def _tool_read(self, args: dict[str, Any]) -> ToolOutcome:
        rel = self._path(_arg(args, "path", str))
        offset = _arg(args, "offset", int, required=False) or 1
        limit = _arg(args, "limit", int, required=False)
        text = self.sandbox.read_file(rel).decode("utf-8")
        lines = text.splitlines(keepends=True)
        start = max(offset, 1) - 1
        chunk = lines[start : start + limit] if limit else lines[start:]
        out = "".join(chunk)
        if limit and start + limit < len(lines):
            out += f"\n[{len(lines) - start - limit} more lines; continue with offset={start + limit + 1}]"
        return ToolOutcome(self._clip(out))

    def _tool_write(self, args: dict[str, Any]) -> ToolOutcome:
        rel = self._path(_arg(args, "path", str))
        content = _arg(args, "content", str)
        self.sandbox.write_file(rel, content)
        return ToolOutcome(f"Wrote {len(content.encode())} bytes to {rel}")

    def _tool_edit(self, args: dict[str, Any]) -> ToolOutcome:
        rel = self._path(_arg(args, "path", str))
        if "edits" in args:
            edits = _arg(args, "edits", list)
            pairs = []
            for i, e in enumerate(edits):
                if not isinstance(e, dict):
                    raise MalformedCall(f"edits[{i}] must be an object with oldText and newText")
                pairs.append((_arg(e, "oldText", str), _arg(e, "newText", str)))
        else:
            pairs = [(_arg(args, "oldText", str), _arg(args, "newText", str))]
        text = self.sandbox.read_file(rel).decode("utf-8")
        for i, (old, new) in enumerate(pairs):
            if not old:
                raise ToolArgumentError("oldText must not be empty")
            count = text.count(old)
            if count == 0:
                return ToolOutcome(f"Error: edit: oldText #{i + 1} not found in {rel}", True)
            if count > 1:
                return ToolOutcome(f"Error: edit: oldText #{i + 1} occurs {count} times in {rel}; make it unique", True)
            text = text.replace(old, new, 1)
        self.sandbox.write_file(rel, text)
        return ToolOutcome(f"Edited {rel} ({len(pairs)} replacement{'s' if len(pairs) != 1 else ''})")

    def _tool_exec(self, args: dict[str, Any]) -> ToolOutcome:
        command = _arg(args, "command", str)
        workdir = _arg(args, "workdir", str, required=False)
        timeout = _arg(args, "timeout", (int, float), required=False)
        env = _arg(args, "env", dict, required=False) or {}
        cwd = self.sandbox.mount_dir
        if workdir:
            cwd = posixpath.join(self.sandbox.mount_dir, self._path(workdir))
        timeout = min(float(timeout), self.exec_timeout) if timeout else self.exec_timeout
        try:
            res = self.sandbox.exec(command, cwd=cwd, timeout=timeout, env={str(k): str(v) for k, v in env.items()})
        except ValueError as exc:
            raise ToolArgumentError(str(exc)) from None
        parts = []
        if res.stdout:
            parts.append(res.stdout.rstrip("\n"))
        if res.stderr:
            parts.append(res.stderr.rstrip("\n"))
        if res.timed_out:
            parts.append(f"[command timed out after {timeout:g}s and was killed]")
        elif res.limit in _LIMIT_NOTES:
            parts.append(_LIMIT_NOTES[res.limit])
        if res.truncated:
            parts.append("[output truncated]")
        parts.append(f"[exit code {res.exit_code}]")
        return ToolOutcome(self._clip("\n".join(parts)), is_error=res.exit_code != 0)

    def _tool_ls(self, args: dict[str, Any]) -> ToolOutcome:
        rel = self._path(_arg(args, "path", str, required=False) or ".")
        try:
            entries = self.sandbox.list_dir(rel)
        except FileNotFoundError:
            return ToolOutcome(f"Error: ls: no such directory: {rel}", True)
        except NotADirectoryError:
            return ToolOutcome(f"Error: ls: not a directory: {rel}", True)
        lines = []
        for entry in entries:  # a name that is not UTF-8 is shown escaped (\xNN), never dropped
            name = printable(entry.name)
            if entry.kind == "link":
                lines.append(f"{name} -> {printable(entry.target or '')}")
            elif entry.kind == "dir":
                lines.append(name + "/")
            else:
                lines.append(f"{name}  ({entry.size} bytes)")
        return ToolOutcome(self._clip("\n".join(lines) or "(empty directory)"))
