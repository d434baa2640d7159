"""Import PinchBench task files (github.com/pinchbench/skill, ``tasks/task_*.md`` + ``assets/``).

A task file is YAML front matter between the first two ``---`` lines, then a Markdown body split on ``## ``
headings: Prompt, Expected Behavior, Grading Criteria, Automated Checks (a python block defining
``grade(transcript, workspace_path)``), LLM Judge Rubric (``### Criterion N: Name (Weight: X%)`` blocks),
Additional Notes.

Choices worth knowing:

- Tasks are keyed by FILE STEM: two v1 files carry a front-matter ``id`` that is not their file name
  (kept as ``metadata["pinchbench_id"]``).
- Section text is stripped, and a trailing Markdown rule (``---``) used as a section separator is dropped, so
  it never ends up in the instruction or the rubric.
- Multi-session tasks (``sessions:`` in the front matter; v1: task_22_second_brain): PinchBench's runner
  sends every session prompt in order and never sends the ``## Prompt`` text, which is only a placeholder
  there. So ``instruction`` = the first session's prompt, ``sessions`` = the following ones, and the
  placeholder is kept as ``metadata["prompt_section"]``. Such a task does not need a ``## Prompt`` section.
- Hybrid weights come from ``grading_weights: {automated, llm_judge}`` with PinchBench's 0.5 / 0.5 default,
  always written explicitly so clawgym's own 0.7 / 0.3 default never applies.
- The checkout is untrusted: task files and assets are read only when they are regular files inside the
  tasks folder and inside ``assets/`` (itself inside the checkout), never through a symlink leading out (see
  :mod:`clawgym.importers.safe_read`). Linked assets (``inline_assets=False``) are written as an ``assets_dir``
  relative to the directory of the tasks file that will hold the tasks, which must contain ``assets/``.
"""

from __future__ import annotations

import ast
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from clawgym.core.errors import TaskImportError
from clawgym.core.records import (
    CodeCheck,
    Rubric,
    RubricRule,
    Session,
    Task,
    VerifierSpec,
    WorkspaceFile,
    WorkspaceSpec,
)
from clawgym.importers import ImportResult
from clawgym.importers.clawgym_folder import inline_file
from clawgym.importers.safe_read import file_kind, is_inside, read_inside, validation_message

SOURCE = "pinchbench"
MOUNT_DIR = "/workspace"
DEFAULT_TIMEOUT_SECONDS = 120.0
CHECK_TIMEOUT_SECONDS = 120.0
DEFAULT_HYBRID_WEIGHTS = (0.5, 0.5)  # PinchBench's default for hybrid tasks (automated, llm_judge)
GRADING_TYPES = ("automated", "llm_judge", "hybrid")

REQUIRES_NETWORK: dict[str, str] = {
    "task_02_stock": "looks up a live stock price",
    "task_06_events": "searches the web for upcoming conferences",
    "task_13_image_gen": "needs an image generation service",
    "task_14_humanizer": "installs the humanizer skill from the skill registry",
    "task_18_market_research": "web research on a market segment",
}
"""PinchBench v1 tasks (by file stem) that need the network or an outside service to be solved as intended."""

_KNOWN_FRONT_MATTER = {
    "id",
    "name",
    "category",
    "grading_type",
    "timeout_seconds",
    "workspace_files",
    "grading_weights",
    "multi_session",
    "sessions",
}
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_RULE = re.compile(r"^ {0,3}([-*_])( *\1){2,} *$")
_CHECKBOX = re.compile(r"^\s*[-*]\s+\[[ xX]\]\s+(.+?)\s*$")
_PYTHON_BLOCK = re.compile(
    r"^ {0,3}(`{3,}|~{3,})[ \t]*(?:python3?|py)\b[^\n]*\n(.*?)^ {0,3}\1[ \t]*$", re.M | re.S
)
_CRITERION = re.compile(
    r"^Criterion\s+\d+\s*:\s*(.+?)\s*\(\s*Weight\s*:\s*(\d+(?:\.\d+)?)\s*%\s*\)\s*$", re.I
)
_ANCHOR = re.compile(r"^\*\*\s*Score\s+(\d+(?:\.\d+)?)\s*:?\s*\*\*\s*:?\s*(.*)$", re.I)


# --------------------------------------------------------------------------------------------- markdown


def _clean(lines: list[str]) -> str:
    """Join, strip, and drop trailing Markdown rules (section separators, not content)."""
    text = "\n".join(lines).strip()
    while text:
        head, _, last = text.rpartition("\n")
        if not _RULE.match(last):
            break
        text = head.strip()
    return text


def _blocks(text: str, marker: str) -> list[tuple[str, list[str]]]:
    """Split `text` on lines starting with `marker` (e.g. "## ") outside fenced code blocks.

    Returns (heading, body lines) pairs; lines before the first heading are dropped.
    """
    blocks: list[tuple[str, list[str]]] = []
    fence: str | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2).strip():
                fence = None
        elif fence is None and line.startswith(marker):
            blocks.append((line[len(marker) :].strip(), []))
            continue
        if blocks:
            blocks[-1][1].append(line)
    return blocks


def _sections(body: str) -> dict[str, str]:
    """`## ` sections by title; the first of two sections with the same title wins."""
    sections: dict[str, str] = {}
    for title, lines in _blocks(body, "## "):
        sections.setdefault(title, _clean(lines))
    return sections


def _front_matter(text: str, where: str) -> tuple[dict[str, Any], str]:
    """(front matter mapping, body) of a task file; YAML errors name the line in the file."""
    lines = text.lstrip("\ufeff").split("\n")
    if not lines or lines[0].rstrip() != "---":
        raise TaskImportError(where, "no YAML front matter (the file must start with a '---' line)")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise TaskImportError(where, "YAML front matter is not closed by a second '---' line")
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = f" at line {mark.line + 2}" if mark is not None else ""  # +1: 0-based, +1: the opening '---'
        raise TaskImportError(where, f"invalid YAML front matter{line}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise TaskImportError(where, f"front matter must be a mapping, got {type(data).__name__}")
    return data, "\n".join(lines[end + 1 :])


# --------------------------------------------------------------------------------------------- parts


def _code_check(sections: dict[str, str], text: str, where: str) -> CodeCheck:
    """The `## Automated Checks` python block, compiled (never run) and checked to define grade()."""
    section = sections.get("Automated Checks")
    if section is None:
        raise TaskImportError(where, "no '## Automated Checks' section")
    m = _PYTHON_BLOCK.search(section)
    if m is None:
        raise TaskImportError(where, "no python code block in '## Automated Checks'")
    source = m.group(2)
    start = text.find(source)
    offset = text[:start].count("\n") if start >= 0 else 0
    try:
        compile(source, where, "exec", dont_inherit=True)
        tree = ast.parse(source)
    except SyntaxError as exc:
        line = offset + (exc.lineno or 0)
        raise TaskImportError(
            where, f"Automated Checks python does not parse (line {line}): {exc.msg}"
        ) from None
    except ValueError as exc:  # e.g. NUL bytes
        raise TaskImportError(where, f"Automated Checks python does not compile: {exc}") from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == "grade" for n in tree.body):
        raise TaskImportError(where, "Automated Checks python defines no grade() function")
    return CodeCheck(kind="python", source=source, timeout_seconds=CHECK_TIMEOUT_SECONDS)


def _score_anchors(lines: list[str]) -> dict[str, str]:
    """`**Score 0.75**: text` anchors -> {"0.75": text}; text runs until the next anchor."""
    bands: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        m = _ANCHOR.match(line.strip())
        if m:
            current = bands.setdefault(str(float(m.group(1))), [])
            current.append(m.group(2))
        elif current is not None:
            current.append(line)
    return {band: _clean(text) for band, text in bands.items()}


def _rubric(sections: dict[str, str], where: str) -> Rubric:
    text = sections.get("LLM Judge Rubric")
    if not text:
        raise TaskImportError(where, "no '## LLM Judge Rubric' section")
    rules = []
    for heading, lines in _blocks(text, "### "):
        m = _CRITERION.match(heading)
        if m is None:
            continue
        rules.append(
            RubricRule(
                name=m.group(1),
                weight=float(m.group(2)) / 100,
                description=_clean(lines),
                scores=_score_anchors(lines),
            )
        )
    return Rubric(rules=rules, text=text, expected_behavior=sections.get("Expected Behavior") or None)


def _weights(front: dict[str, Any], where: str) -> tuple[float, float]:
    """(automated, llm_judge) weights of a hybrid task."""
    weights = front.get("grading_weights")
    if weights is None:
        return DEFAULT_HYBRID_WEIGHTS
    if not isinstance(weights, dict):
        raise TaskImportError(where, f"grading_weights must be a mapping, got {weights!r}")
    out = []
    for key, default in zip(("automated", "llm_judge"), DEFAULT_HYBRID_WEIGHTS, strict=True):
        value = weights.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise TaskImportError(where, f"grading_weights.{key} must be a number >= 0, got {value!r}")
        out.append(float(value))
    return out[0], out[1]


def _verifier(
    grading_type: str, front: dict[str, Any], sections: dict[str, str], text: str, where: str
) -> VerifierSpec:
    if grading_type == "automated":
        return VerifierSpec(code=_code_check(sections, text, where))
    if grading_type == "llm_judge":
        return VerifierSpec(rubric=_rubric(sections, where))
    code_weight, rubric_weight = _weights(front, where)
    return VerifierSpec(
        code=_code_check(sections, text, where),
        rubric=_rubric(sections, where),
        code_weight=code_weight,
        rubric_weight=rubric_weight,
    )


@dataclass
class _Assets:
    """The checkout's assets folder and how tasks use it."""

    dir: Path
    real: str
    inline: bool
    problem: str | None = None  # why no asset can be read at all (assets/ leads out of the checkout)
    link_dir: str | None = None  # assets_dir of linked tasks, relative to the tasks file's directory
    link_problem: str | None = None  # why assets cannot be linked from there


def _assets(assets_dir: Path, inline: bool, assets_base: Path | None) -> _Assets:
    real = os.path.realpath(assets_dir)
    checkout = assets_dir.parent
    a = _Assets(assets_dir, real, inline)
    if not is_inside(real, os.path.realpath(checkout)):
        a.problem = (f"assets/ leads out of the checkout {checkout} (to {real}) through a symbolic link; "
                     "refusing to read assets from there")
    if not inline:
        base = Path(assets_base) if assets_base is not None else Path.cwd()
        rel = os.path.relpath(real, os.path.realpath(base))
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            a.link_problem = (f"--link-assets: the assets folder {real} is outside {base}, the tasks file's directory "
                              "(a tasks file may only use assets inside its own directory); write the tasks file "
                              "into the PinchBench checkout or a folder above it, or import without --link-assets")
        else:
            a.link_dir = rel
    return a


def _workspace(front: dict[str, Any], assets: _Assets, where: str) -> WorkspaceSpec:
    specs = front.get("workspace_files") or []
    if not isinstance(specs, list):
        raise TaskImportError(where, "workspace_files must be a list")
    files: list[WorkspaceFile] = []
    uses_assets = False
    for i, spec in enumerate(specs):
        if isinstance(spec, dict) and "path" in spec and "content" in spec:
            content = spec["content"]
            files.append(
                WorkspaceFile(path=str(spec["path"]), content="" if content is None else str(content))
            )
        elif isinstance(spec, dict) and "source" in spec and "dest" in spec:
            if assets.problem:
                raise TaskImportError(where, f"workspace_files[{i}]: {assets.problem}")
            source = str(spec["source"])
            asset = assets.dir / source
            if not is_inside(asset, assets.real):
                raise TaskImportError(where, f"workspace_files[{i}]: asset {source!r} is outside assets/")
            if not os.path.lexists(asset):
                raise TaskImportError(where, f"missing asset {source!r} (not found at {asset})")
            try:
                if assets.inline:
                    data, _ = read_inside(asset, assets.real, "assets/")
                    files.append(inline_file(str(spec["dest"]), data))
                else:
                    mode = os.stat(asset).st_mode
                    if not stat.S_ISREG(mode):
                        raise TaskImportError(str(asset), f"is not a regular file ({file_kind(mode)})")
                    if assets.link_problem:
                        raise TaskImportError(where, assets.link_problem)
                    files.append(WorkspaceFile(path=str(spec["dest"]), source=source))
                    uses_assets = True
            except TaskImportError as exc:
                if exc.path == where:
                    raise
                raise TaskImportError(where, f"workspace_files[{i}]: asset {source!r} {exc.message}") from None
            except OSError as exc:
                raise TaskImportError(where, f"workspace_files[{i}]: cannot read asset {source!r}: "
                                             f"{exc.strerror or exc}") from None
        else:
            raise TaskImportError(
                where, f"workspace_files[{i}] needs {{path, content}} or {{source, dest}}, got {spec!r}"
            )
    return WorkspaceSpec(
        files=files,
        mount_dir=MOUNT_DIR,
        assets_dir=assets.link_dir if uses_assets else None,
    )


def _sessions(front: dict[str, Any], where: str) -> list[Session]:
    """All sessions of a multi-session task (empty for a single-prompt task)."""
    raw = front.get("sessions")
    if not raw:
        if front.get("multi_session"):
            raise TaskImportError(where, "multi_session: true but no sessions")
        return []
    if not isinstance(raw, list):
        raise TaskImportError(where, "sessions must be a list")
    sessions = []
    for i, entry in enumerate(raw):
        # PinchBench's runner accepts a bare string, or a mapping with `prompt` (or `message`).
        if isinstance(entry, str):
            entry = {"prompt": entry}
        if not isinstance(entry, dict):
            raise TaskImportError(where, f"sessions[{i}] must be a mapping, got {entry!r}")
        prompt = str(entry.get("prompt") or entry.get("message") or "").strip()
        if not prompt:
            raise TaskImportError(where, f"sessions[{i}] has no prompt")
        try:
            sessions.append(
                Session(
                    id=str(entry.get("id") or f"session_{i + 1}"),
                    prompt=prompt,
                    new_session=bool(entry.get("new_session")),
                )
            )
        except ValidationError as exc:  # e.g. an id with a bidi override
            raise TaskImportError(where, f"invalid task: sessions[{i}].{validation_message(exc)}") from None
    return sessions


# --------------------------------------------------------------------------------------------- task


def _import_file(path: Path, assets: _Assets, tasks_real: str) -> Task:
    where = str(path)
    try:
        text = read_inside(path, tasks_real, "the tasks folder")[0].decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskImportError(where, f"cannot read: {exc}") from None
    front, body = _front_matter(text, where)
    sections = _sections(body)
    stem = path.stem

    grading_type = front.get("grading_type")
    if grading_type not in GRADING_TYPES:
        raise TaskImportError(
            where, f"unknown grading_type {grading_type!r} (expected one of {', '.join(GRADING_TYPES)})"
        )
    timeout = front.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise TaskImportError(where, f"timeout_seconds must be a positive number, got {timeout!r}")

    metadata: dict[str, Any] = {k: v for k, v in front.items() if k not in _KNOWN_FRONT_MATTER}
    metadata.update(
        pinchbench_id=str(front.get("id") or stem),
        name=str(front.get("name") or ""),
        file=path.name,
        grading_type=grading_type,
    )

    sessions = _sessions(front, where)
    prompt = sections.get("Prompt")
    if sessions:
        instruction, later = sessions[0].prompt, sessions[1:]
        metadata.update(multi_session=True, first_session_id=sessions[0].id)
        if prompt:
            metadata["prompt_section"] = prompt
    elif not prompt:
        raise TaskImportError(where, "no '## Prompt' section (or it is empty)")
    else:
        instruction, later = prompt, []

    if "grading_weights" in front:
        metadata["grading_weights"] = front["grading_weights"]
    metadata["grading_criteria"] = [
        m.group(1)
        for line in sections.get("Grading Criteria", "").splitlines()
        if (m := _CHECKBOX.match(line))
    ]
    if "Additional Notes" in sections:
        metadata["additional_notes"] = sections["Additional Notes"]
    metadata["requires_network"] = stem in REQUIRES_NETWORK
    if stem in REQUIRES_NETWORK:
        metadata["network_reason"] = REQUIRES_NETWORK[stem]

    try:
        verifier = _verifier(grading_type, front, sections, text, where)
        if verifier.rubric is None and sections.get("Expected Behavior"):
            metadata["expected_behavior"] = sections["Expected Behavior"]
        return Task(
            id=stem,
            source=SOURCE,
            category=str(front.get("category") or ""),
            instruction=instruction,
            sessions=later,
            workspace=_workspace(front, assets, where),
            verifier=verifier,
            timeout_seconds=float(timeout),
            metadata=metadata,
        )
    except ValidationError as exc:
        raise TaskImportError(where, f"invalid task: {validation_message(exc)}") from None


def _locate(root: Path) -> tuple[Path, Path]:
    """(tasks dir, assets dir) from a PinchBench checkout or its tasks/ folder."""
    if (root / "tasks").is_dir():
        return root / "tasks", root / "assets"
    return root, root.parent / "assets"


def import_pinchbench(root: Path, inline_assets: bool = True, assets_base: Path | None = None) -> ImportResult:
    """Import ``tasks/task_*.md`` (sorted, TASK_TEMPLATE.md skipped) from a PinchBench checkout or tasks folder.

    With `inline_assets`, ``{source, dest}`` files are read from ``<checkout>/assets/`` and inlined; otherwise
    they stay references (``WorkspaceFile.source``) with ``workspace.assets_dir`` the assets folder relative
    to `assets_base`, the directory of the tasks file to be written (default: the current directory), which
    must contain it. Either way a missing or unreadable asset is a failure of that task. Bad tasks never stop
    the others.
    """
    root = Path(root)
    result = ImportResult()
    if not root.is_dir():
        result.failures.append(TaskImportError(str(root), "not a directory"))
        return result
    tasks_dir, assets_dir = _locate(root)
    assets = _assets(assets_dir, inline_assets, assets_base)
    tasks_real = os.path.realpath(tasks_dir)
    for path in sorted(tasks_dir.glob("task_*.md")):
        if path.stem.upper() == "TASK_TEMPLATE":
            continue
        try:
            result.tasks.append(_import_file(path, assets, tasks_real))
        except TaskImportError as exc:
            result.failures.append(exc)
    return result


# --------------------------------------------------------------------------------------------- export


def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in `text`."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def export_task(task: Task) -> tuple[str, dict[str, bytes]]:
    """(the PinchBench task file, {asset path under assets/: bytes}) of a task: front matter, the prompt, a
    self-contained `grade()` (rendered from checks as data by
    :func:`clawgym.checks.render_grade_source`) and the rubric. Binary workspace files become assets
    (`assets/<task id>/<path>`), generated ones made now; asset-linked files, shell checks and multi-session tasks
    are not exported (ValueError)."""
    import base64

    from clawgym.checks import render_grade_source

    v = task.verifier
    if task.sessions:
        raise ValueError(f"task {task.id}: multi-session tasks are not exported")
    if v.code is not None and v.code.kind == "shell":
        raise ValueError(f"task {task.id}: a shell code check has no PinchBench grade()")
    files: list[dict[str, str]] = []
    assets: dict[str, bytes] = {}
    for f in task.workspace.files:
        if f.content is not None:
            files.append({"path": f.path, "content": f.content})
            continue
        if f.content_b64 is not None:
            data = base64.b64decode(f.content_b64)
        elif f.generate is not None:  # made now, as the sandbox would make it
            import tempfile

            from clawgym.workspace.materialize import write_files

            with tempfile.TemporaryDirectory() as tmp:
                made = write_files([f], Path(tmp))[0]
                if not made.is_file():
                    raise ValueError(f"task {task.id}: workspace file {f.path} is generated as a folder "
                                     f"({f.generate.kind}), which a PinchBench asset cannot be")
                data = made.read_bytes()
        else:
            raise ValueError(f"task {task.id}: workspace file {f.path} is an asset reference")
        source = f"{task.id}/{f.path}"
        assets[source] = data
        files.append({"source": source, "dest": f.path})
    grading_type = "hybrid" if v.code is not None and v.rubric is not None else (
        "automated" if v.code is not None else "llm_judge")
    front: dict[str, Any] = {"id": task.id, "name": str(task.metadata.get("name") or task.id),
                             "category": task.category or "", "grading_type": grading_type,
                             "timeout_seconds": task.timeout_seconds, "workspace_files": files}
    if grading_type == "hybrid":
        wc, wr = v.weights()
        front["grading_weights"] = {"automated": wc, "llm_judge": wr}
    out = ["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip("\n"), "---", "",
           "## Prompt", "", task.instruction.strip(), ""]
    if v.code is not None:
        source = render_grade_source(task)
        fence = _fence(source)
        out += ["## Automated Checks", "", f"{fence}python", source.rstrip("\n"), fence, ""]
    if v.rubric is not None:
        out += ["## LLM Judge Rubric", ""]
        total = sum(r.weight for r in v.rubric.rules) or 1.0
        for i, rule in enumerate(v.rubric.rules, start=1):
            out += [f"### Criterion {i}: {rule.name} (Weight: {100 * rule.weight / total:g}%)", ""]
            if rule.description:
                out += [rule.description, ""]
            out += [f"**Score {band}**: {text}" for band, text in rule.scores.items()] + [""]
    return "\n".join(out), assets


def write_export(task: Task, root: Path) -> Path:
    """Write one task under `root` as a PinchBench checkout (tasks/task_<id>.md, assets/); the task file."""
    text, assets = export_task(task)
    path = root / "tasks" / f"task_{task.id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    for rel, data in assets.items():
        (root / "assets" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "assets" / rel).write_bytes(data)
    return path


def export_pinchbench(tasks: list[Task], root: Path) -> list[Path]:
    """Write `tasks` as a PinchBench checkout under `root`, which :func:`import_pinchbench` reads back; the task
    files written."""
    return [write_export(task, root) for task in tasks]
