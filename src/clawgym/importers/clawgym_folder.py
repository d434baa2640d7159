"""Import ClawGym RL task folders (github.com/ClawGym/ClawGym-Agents, ``RL/data/``).

A task folder holds ``data_entry.json`` (``task_id``, ``user_query``, ``input_mount_dir?``,
``metadata: {category, grading_type}``), an optional ``input_files/`` tree mirrored into the workspace and
``reward/`` (``reward.sh`` plus helpers such as ``check.py``) which is copied in only after the agent ends.
Everything is inlined into the Task so that the record is self-contained.

A task folder is untrusted: only regular files inside it are read (see :mod:`clawgym.importers.safe_read`); a
symlink leading out of the folder (to a host secret), a FIFO (which would hang the import) or a device makes
that task a failure naming the file.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clawgym.core.errors import TaskImportError
from clawgym.core.records import CodeCheck, Task, VerifierSpec, WorkspaceFile, WorkspaceSpec, text_problem
from clawgym.importers import ImportResult
from clawgym.importers.safe_read import check_inside, is_inside, read_inside, validation_message

SOURCE = "clawgym-folder"
DATA_ENTRY = "data_entry.json"
REWARD_SCRIPT = "reward/reward.sh"
CHECK_SCRIPT = "reward/check.py"
# ClawGym's reward.sh scripts hard-code this path, so it is the mount dir when data_entry does not name one.
CLAWGYM_MOUNT_DIR = "/root/.openclaw/workspace"
REWARD_TIMEOUT_SECONDS = 120.0
EXEC_MODE = 0o755
_KNOWN_KEYS = {"task_id", "user_query", "input_mount_dir", "metadata", "timeout_seconds"}
_KNOWN_METADATA_KEYS = {"category", "grading_type"}


def inline_file(path: str, data: bytes, mode: int | None = None) -> WorkspaceFile:
    """A WorkspaceFile holding `data`: as text when it is valid UTF-8, else base64 (both byte-exact)."""
    try:
        return WorkspaceFile(path=path, content=data.decode("utf-8"), mode=mode)
    except UnicodeDecodeError:
        return WorkspaceFile(path=path, content_b64=base64.b64encode(data).decode("ascii"), mode=mode)


def walk_order(path: str) -> tuple[tuple[int, str], ...]:
    """The sort key of the order :func:`_walk` lists a folder's files in (os.walk, sorted, top down): a folder's
    own files by name, then each subfolder's by name. Importers that get files as a list sort them by it, so that
    the same task gives the same record."""
    parts = path.split("/")
    return (*((1, d) for d in parts[:-1]), (0, parts[-1]))


def _walk(base: Path, folder_real: str, prefix: str = "") -> tuple[list[WorkspaceFile], list[str]]:
    """Every file under `base` inlined (path = prefix + path relative to base), and the empty directories.

    Each file must be a regular file resolving inside the task folder `folder_real`; a directory symlink
    leading out of it is refused too (one inside it is not followed, as before)."""
    files: list[WorkspaceFile] = []
    empty_dirs: list[str] = []
    check_inside(base, folder_real, "the task folder")
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        here = Path(dirpath)
        for name in dirnames:
            if (here / name).is_symlink():
                check_inside(here / name, folder_real, "the task folder")
        rel_dir = here.relative_to(base).as_posix()
        if not dirnames and not filenames and rel_dir != ".":
            empty_dirs.append(prefix + rel_dir)
        for name in sorted(filenames):
            full = here / name
            rel = full.relative_to(base).as_posix()
            problem = text_problem(rel)  # a name that is not UTF-8 comes back with a lone surrogate
            if problem:
                raise TaskImportError(str(full), f"its name is {problem}; a task's file names must be UTF-8")
            data, mode = read_inside(full, folder_real)
            files.append(inline_file(prefix + rel, data, EXEC_MODE if mode & 0o111 else None))
    return files, empty_dirs


def _task_folders(root: Path) -> list[Path]:
    """`root` itself when it is a task folder, else its non-hidden subfolders sorted by name.

    A folder with reward/ or input_files/ but no data_entry.json is still one (broken) task folder.
    """
    if any((root / name).exists() for name in (DATA_ENTRY, "reward", "input_files")):
        return [root]
    return sorted(
        (p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name
    )


def _read_data_entry(path: Path, folder_real: str) -> dict[str, Any]:
    if not os.path.lexists(path):
        raise TaskImportError(str(path), f"no {DATA_ENTRY}")
    try:
        raw, _ = read_inside(path, folder_real)
    except OSError as exc:
        raise TaskImportError(str(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        entry = json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise TaskImportError(
            str(path), f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except UnicodeDecodeError as exc:
        raise TaskImportError(str(path), f"not UTF-8: {exc}") from None
    except RecursionError:
        raise TaskImportError(str(path), "invalid JSON: nested too deeply") from None
    if not isinstance(entry, dict):
        raise TaskImportError(str(path), f"must hold a JSON object, got {type(entry).__name__}")
    return entry


def _timeout(entry: dict[str, Any], meta: dict[str, Any], where: str) -> float | None:
    value = entry.get("timeout_seconds", meta.get("timeout_seconds"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise TaskImportError(where, f"timeout_seconds must be a positive number, got {value!r}")
    return float(value)


def clawgym_task(entry: dict[str, Any], name: str, where: str, files: list[WorkspaceFile], dirs: list[str],
                 reward_files: list[WorkspaceFile], source: str = SOURCE) -> Task:
    """The Task of one ClawGym task, from what its folder holds: the data_entry.json object `entry`, the workspace
    `files` and empty `dirs` (input_files/, in walk order) and the checker files (reward/, paths `reward/...`, with
    reward.sh). `name` is the folder's name (the id when the entry names none); problems are reported against
    `where`. The Hub corpus importer (:mod:`clawgym.importers.clawgym_hub`) builds the same inputs from a row, so a
    task gives the same record from either."""
    query = entry.get("user_query")
    if not isinstance(query, str) or not query.strip():
        raise TaskImportError(where, "user_query missing or empty")
    meta = entry.get("metadata") or {}
    if not isinstance(meta, dict):
        raise TaskImportError(where, f"metadata must be an object, got {type(meta).__name__}")

    raw_id = entry.get("task_id")
    task_id = str(raw_id) if raw_id not in (None, "") else name
    grading_type = meta.get("grading_type")
    metadata: dict[str, Any] = {k: v for k, v in entry.items() if k not in _KNOWN_KEYS}
    metadata.update({k: v for k, v in meta.items() if k not in _KNOWN_METADATA_KEYS})
    metadata.update(
        grading_type=grading_type,
        folder=name,
        input_mount_dir_given="input_mount_dir" in entry,
    )
    if grading_type != "automated":
        metadata["grading_note"] = (
            f"grading_type is {grading_type!r}, not 'automated'; imported with the reward.sh check only"
        )
    # reward.sh is run with `bash`, but keep it executable for checkers that call it directly.
    reward_files = [
        f.model_copy(update={"mode": EXEC_MODE}) if f.path == REWARD_SCRIPT else f for f in reward_files
    ]
    code = CodeCheck(
        kind="shell",
        entry=f"bash {REWARD_SCRIPT}",
        subscores_entry=f'python3 {CHECK_SCRIPT} "$PWD"' if any(f.path == CHECK_SCRIPT for f in reward_files)
        else None,
        files=reward_files,
        timeout_seconds=REWARD_TIMEOUT_SECONDS,
    )
    fields: dict[str, Any] = {}
    timeout = _timeout(entry, meta, where)
    if timeout is not None:
        fields["timeout_seconds"] = timeout
    try:
        return Task(
            id=task_id,
            source=source,
            category=str(meta.get("category") or ""),
            instruction=query,
            workspace=WorkspaceSpec(
                files=files,
                directories=dirs,
                mount_dir=entry.get("input_mount_dir") or CLAWGYM_MOUNT_DIR,
            ),
            verifier=VerifierSpec(code=code),
            metadata=metadata,
            **fields,
        )
    except ValidationError as exc:
        raise TaskImportError(where, f"invalid task: {validation_message(exc)}") from None


def _import_folder(folder: Path) -> Task:
    """One task folder as a Task; raises TaskImportError naming the offending file."""
    entry_path = folder / DATA_ENTRY
    folder_real = os.path.realpath(folder)
    entry = _read_data_entry(entry_path, folder_real)
    reward_sh = folder / REWARD_SCRIPT
    if not reward_sh.is_file():
        raise TaskImportError(str(reward_sh), "no reward/reward.sh")
    try:
        input_dir = folder / "input_files"
        files, dirs = _walk(input_dir, folder_real) if input_dir.is_dir() else ([], [])
        reward_files, _ = _walk(folder / "reward", folder_real, prefix="reward/")
    except OSError as exc:
        raise TaskImportError(str(exc.filename or folder), f"cannot read: {exc.strerror or exc}") from None
    return clawgym_task(entry, folder.name, str(entry_path), files, dirs, reward_files)


def import_clawgym(root: Path) -> ImportResult:
    """Import one ClawGym task folder (has data_entry.json) or a folder of them, sorted by folder name.

    Bad tasks become failures (file + reason) and never stop the others: a missing or malformed
    data_entry.json, an empty user_query, a missing reward/reward.sh, or a task id seen before.
    """
    root = Path(root)
    result = ImportResult()
    if not root.is_dir():
        result.failures.append(TaskImportError(str(root), "not a directory"))
        return result
    root_real = os.path.realpath(root)
    for folder in _task_folders(root):
        if not is_inside(folder, root_real):
            result.failures.append(TaskImportError(
                str(folder), f"is a symbolic link leading out of {root} (to {os.path.realpath(folder)}); not followed"
            ))
            continue
        try:
            result.add(_import_folder(folder), str(folder / DATA_ENTRY), str(folder))
        except TaskImportError as exc:
            result.failures.append(exc)
    return result
