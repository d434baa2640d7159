"""Human-readable renderings of tasks (Markdown), for reviewing what a synthesizer or importer produced."""

from __future__ import annotations

import base64
import re

from clawgym.core.records import Task, WorkspaceFile

_CHECK_NAME = re.compile(r"^\s+\('([^']+)', lambda ws, transcript:", re.M)


def check_names(task: Task) -> list[str]:
    """Named checks of a synthesized verifier: its checks as data, or the names read off a python grade() source
    rendered from them (empty when they cannot be)."""
    code = task.verifier.code
    if code is not None and code.kind == "checks":
        return [c.name or "" for c in code.checks]
    if code is None or code.kind != "python" or not code.source:
        return []
    return _CHECK_NAME.findall(code.source)


def _describe(f: WorkspaceFile) -> str:
    if f.content is not None:
        lines = f.content.count("\n") + (0 if f.content.endswith("\n") else 1)
        return f"text, {len(f.content.encode())} bytes, {lines} lines"
    if f.content_b64 is not None:
        return f"binary, {len(base64.b64decode(f.content_b64))} bytes"
    if f.source is not None:
        return f"asset {f.source}"
    assert f.generate is not None
    return f"generated {f.generate.kind}"


def task_markdown(task: Task, preview_lines: int = 6) -> str:
    out = [f"### {task.id}", ""]
    out.append(f"- **category**: {task.category or '-'} / {task.subcategory or '-'}")
    if task.operations:
        out.append(f"- **operations**: {' -> '.join(task.operations)}")
    if task.persona:
        out.append(f"- **persona**: {task.persona}")
    out += ["", "**Request**", "", *("> " + ln if ln else ">" for ln in task.instruction.splitlines()), ""]
    if task.workspace.files:
        out += [f"**Workspace** (mounted at `{task.workspace.mount_dir}`)", ""]
        for f in task.workspace.files:
            out.append(f"- `{f.path}` ({_describe(f)})")
        first = next((f for f in task.workspace.files if f.content), None)
        if first is not None and preview_lines:
            head = first.content.splitlines()[:preview_lines]
            out += ["", f"`{first.path}` begins:", "", "```", *head, "```"]
        out.append("")
    names = check_names(task)
    v = task.verifier
    kind = "code" if v.code and not v.rubric else ("rubric" if v.rubric and not v.code else "hybrid")
    out.append("")
    out.append(f"**Verifier**: {kind}" + (f"; checks: {', '.join(f'`{n}`' for n in names)}" if names else ""))
    if task.reference is not None:
        calls = ", ".join(s.name for s in task.reference.steps)
        out += ["", f"**Reference solution**: {len(task.reference.steps)} tool calls ({calls})"]
    return "\n".join(out) + "\n"
