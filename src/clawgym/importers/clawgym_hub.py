"""Import ClawGym's task corpus in its Hugging Face form: the dataset ``RUC-AIBOX/ClawGym-Task``, one file
``syn_task.jsonl`` of ~13.5K tasks, one JSON object per line::

    {"prompt": "user query ...",
     "hook_code": "python3 reward/test.py /root/.openclaw/workspace",
     "input_files": [{"file_path": "reward/test.py", "content": "..."}, {"file_path": "input/data.csv", ...}],
     "rule": null,
     "origin_template": "---\\nid: task_00_xyz\\n..."}

ClawGym-Agents' ``RL/data/build_dataset_from_hf.py`` turns each row into a task folder, and this importer reads a
row as that folder would read (:func:`clawgym.importers.clawgym_folder.clawgym_task` builds both), so a task gives
the same record either way, `source` aside (``clawgym-hub``):

* the task id is the ``id:`` line of ``origin_template`` (else ``task_NNNNN``, N counting the rows that parse);
* ``input_files`` under ``reward/`` are the checker (``reward/test.py`` becomes ``reward/check.py``), the others
  the workspace; ``reward/reward.sh`` is ClawGym's wrapper around ``hook_code`` (rewritten to run
  ``/root/.openclaw/workspace/reward/check.py``), averaging the JSON dict of sub-scores it prints;
* ``data_entry.json`` would hold ``user_query`` = ``prompt``, ``metadata`` {``category``: "", ``grading_type``:
  automated, ``rule`` when given} and ``input_mount_dir`` when there are input files.

Where the converter is silent, it is followed: a path given twice keeps its last content, a row's own
``reward/reward.sh`` is replaced by the wrapper, and the rubric in ``rule`` stays in `metadata` (the reward.sh
check is the verifier). Fields later stages add (``category``, ``hook_lang``, ``macro_category``, ``action``) are
kept, which the converter drops: ``category`` as the task's category, the others in `metadata`.

A bad row is one failure ``FILE:LINE: field: problem``; the other rows still import.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clawgym.core.errors import TaskImportError
from clawgym.core.records import WorkspaceFile
from clawgym.importers import ImportResult
from clawgym.importers.clawgym_folder import (
    CHECK_SCRIPT,
    CLAWGYM_MOUNT_DIR,
    REWARD_SCRIPT,
    clawgym_task,
    inline_file,
    walk_order,
)
from clawgym.importers.safe_read import validation_message

SOURCE = "clawgym-hub"
HUB_REPO = "RUC-AIBOX/ClawGym-Task"
HUB_FILENAME = "syn_task.jsonl"
REWARD_DIR = "reward/"
# What ClawGym's converter writes as reward/reward.sh around the hook (RL/data/build_dataset_from_hf.py).
REWARD_SH_TEMPLATE = (
    "#!/usr/bin/env bash\nset -euo pipefail\n\n{hook} | python3 -c 'import json, sys; raw = sys.stdin.read()"
    ".strip(); data = json.loads(raw); print(sum(float(v) for v in data.values()) / len(data) if isinstance(data, "
    "dict) and data else float(data) if isinstance(data, (int, float)) else 0.0)'\n"
)
_ROW_KEYS = {"prompt", "hook_code", "input_files", "rule", "origin_template", "category"}


def task_id_of(origin_template: str) -> str:
    """The value of the template's first ``id:`` line, as ClawGym's converter reads it ("" when there is none)."""
    for line in origin_template.split("\n"):
        line = line.strip()
        if line.startswith("id:"):
            return line.split(":", 1)[1].strip()
    return ""


def reward_script(hook_code: str | None) -> str:
    """ClawGym's reward.sh for a row's hook: the hook made to run reward/check.py by its absolute path."""
    ws = CLAWGYM_MOUNT_DIR
    if not hook_code:
        hook = f"python3 {ws}/{CHECK_SCRIPT} {ws}"
    else:
        hook = hook_code.replace(f"{ws}/{REWARD_DIR}", REWARD_DIR).replace("reward/test.py", CHECK_SCRIPT)
        hook = hook.replace(CHECK_SCRIPT, f"{ws}/{CHECK_SCRIPT}")
    return REWARD_SH_TEMPLATE.format(hook=hook)


def _optional_str(row: dict[str, Any], key: str, where: str) -> str:
    value = row.get(key)
    if value is not None and not isinstance(value, str):
        raise TaskImportError(where, f"{key}: must be a string, got {type(value).__name__}")
    return value or ""


def _files(row: dict[str, Any], where: str) -> tuple[list[WorkspaceFile], list[WorkspaceFile]]:
    """(workspace files, checker files) of a row's input_files, each list in the folder importer's order."""
    entries = row.get("input_files") or []
    if not isinstance(entries, list):
        raise TaskImportError(where, f"input_files: must be a list, got {type(entries).__name__}")
    workspace: dict[str, WorkspaceFile] = {}
    checker: dict[str, WorkspaceFile] = {}
    for i, f in enumerate(entries):
        field = f"input_files[{i}]"
        if not isinstance(f, dict):
            raise TaskImportError(where, f"{field}: must be an object {{file_path, content}}")
        path, content = f.get("file_path"), f.get("content")
        if not isinstance(path, str) or not path.strip("/") or path.endswith("/"):
            raise TaskImportError(where, f"{field}.file_path: must be a file's path, got {path!r}")
        if not isinstance(content, str):
            raise TaskImportError(where, f"{field}.content: must be a string, got {type(content).__name__}")
        try:
            wf = inline_file(path, content.encode("utf-8", "surrogateescape"))  # the path comes back normalized
        except ValidationError as exc:
            raise TaskImportError(where, f"{field}.file_path: {validation_message(exc).split(': ', 1)[-1]}") from None
        target = workspace
        if wf.path.startswith(REWARD_DIR):
            target = checker
            if wf.path == "reward/test.py":
                wf = wf.model_copy(update={"path": CHECK_SCRIPT})
            if wf.path == REWARD_SCRIPT:  # the converter writes its own wrapper over it
                continue
        target[wf.path] = wf
    checker[REWARD_SCRIPT] = inline_file(REWARD_SCRIPT, reward_script(_optional_str(row, "hook_code", where)).encode())
    return ([workspace[p] for p in sorted(workspace, key=walk_order)],
            [checker[p] for p in sorted(checker, key=walk_order)])


def _entry(row: dict[str, Any], task_id: str, has_inputs: bool, where: str) -> dict[str, Any]:
    """The data_entry.json ClawGym's converter writes for a row, plus the fields it drops."""
    prompt = row.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise TaskImportError(where, "prompt: missing or empty")
    category = _optional_str(row, "category", where)
    entry: dict[str, Any] = {"task_id": task_id, "user_query": prompt,
                             "metadata": {"category": category, "grading_type": "automated"}}
    if row.get("rule"):
        entry["metadata"]["rule"] = row["rule"]
    if has_inputs:
        entry["input_mount_dir"] = CLAWGYM_MOUNT_DIR
    entry.update({k: v for k, v in row.items() if k not in _ROW_KEYS and k not in entry})
    return entry


def task_from_row(row: Any, index: int, where: str):
    """The Task of one corpus row; `index` counts the rows parsed before it (for the fallback id). Raises
    TaskImportError naming `where` (``FILE:LINE``) and the field."""
    if not isinstance(row, dict):
        raise TaskImportError(where, f"expected a JSON object, got {type(row).__name__}")
    task_id = task_id_of(_optional_str(row, "origin_template", where)) or f"task_{index:05d}"
    files, reward_files = _files(row, where)
    entry = _entry(row, task_id, bool(files), where)
    return clawgym_task(entry, task_id, where, files, [], reward_files, source=SOURCE)


def import_clawgym_hub(path: Path) -> ImportResult:
    """Import every row of a ``syn_task.jsonl`` file; each bad row is a failure ``FILE:LINE: field: problem``, and a
    task id seen before is one too (ClawGym's converter keeps the first as well)."""
    path = Path(path)
    result = ImportResult()
    try:
        fh = path.open(encoding="utf-8", errors="surrogateescape")  # a bad byte fails its row, not the file
    except OSError as exc:
        result.failures.append(TaskImportError(str(path), f"cannot read: {exc.strerror or exc}"))
        return result
    parsed = 0
    with fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                result.failures.append(TaskImportError(where, f"not valid JSON ({exc.msg} at column {exc.colno})"))
                continue
            except RecursionError:
                result.failures.append(TaskImportError(where, "not valid JSON: nested too deeply"))
                continue
            parsed += 1
            try:
                result.add(task_from_row(row, parsed - 1, where), where, f"line {lineno}")
            except TaskImportError as exc:
                result.failures.append(exc)
    return result


def download_corpus(repo_id: str = HUB_REPO, filename: str = HUB_FILENAME, revision: str | None = None) -> Path:
    """The local path of the corpus file, downloaded from the Hugging Face Hub or taken from its cache; a
    :class:`clawgym.core.hub.HubError` line (naming the dataset and what to set) when neither can give it."""
    from clawgym.core.hub import download_file

    return download_file(repo_id, filename, revision=revision,
                         instead=f"give a downloaded {filename} as the FILE argument")
