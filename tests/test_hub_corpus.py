"""ClawGym's Hub corpus format (`RUC-AIBOX/ClawGym-Task`, `syn_task.jsonl`) imported into the records the folder
importer gives, on rows written from the real ClawGym folders of ../shared/datasets the way ClawGym-Agents'
`RL/data/build_dataset_from_hf.py` reverses (the Hub itself is not reachable here), and `--from-hub` through the
real huggingface_hub: from a Hugging Face cache laid out as the library keeps it, and refused in one line offline."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clawgym.core.jsonl import read_records
from clawgym.core.records import Task
from clawgym.importers import import_clawgym, import_clawgym_hub
from clawgym.importers.clawgym_hub import HUB_FILENAME, HUB_REPO, REWARD_SH_TEMPLATE, reward_script
from conftest import datasets_root, require

WORKSPACE = "/root/.openclaw/workspace"
PREFIX, SUFFIX = REWARD_SH_TEMPLATE.split("{hook}")


def cli(*args: Any, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m clawgym ARGS` with no Hugging Face setting of this machine's (cache, token, endpoint) but `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE"))}
    return subprocess.run([sys.executable, "-m", "clawgym", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**base, "COLUMNS": "200", **(env or {})})


def folder_set(name: str) -> Path:
    root = datasets_root() / name
    require(root.is_dir(), f"{name} not found at {root} (set CLAWGYM_DATASETS)")
    return root


def hub_row(folder: Path) -> dict[str, Any]:
    """The syn_task.jsonl row ClawGym's converter turns into `folder`: its reward.sh must be the converter's wrapper
    (the hook in its original `reward/test.py` form), check.py goes back to reward/test.py, input files listed in
    an order of their own (reward files first, workspace files in reverse)."""
    entry = json.loads((folder / "data_entry.json").read_text(encoding="utf-8"))
    sh = (folder / "reward" / "reward.sh").read_text(encoding="utf-8")
    assert sh.startswith(PREFIX) and sh.endswith(SUFFIX), f"{folder.name}: reward.sh is not the converter's wrapper"
    hook = sh[len(PREFIX):-len(SUFFIX)].replace(f"{WORKSPACE}/reward/check.py", "reward/test.py")
    files = []
    for p in sorted((folder / "reward").rglob("*")):
        if p.is_file() and p.name != "reward.sh":
            rel = "reward/" + p.relative_to(folder / "reward").as_posix()
            files.append({"file_path": "reward/test.py" if rel == "reward/check.py" else rel,
                          "content": p.read_text(encoding="utf-8")})
    inputs = folder / "input_files"
    if inputs.is_dir():
        files += [{"file_path": p.relative_to(inputs).as_posix(), "content": p.read_text(encoding="utf-8")}
                  for p in sorted(inputs.rglob("*"), reverse=True) if p.is_file()]
    meta = entry.get("metadata") or {}
    return {"prompt": entry["user_query"], "hook_code": hook, "input_files": files, "rule": meta.get("rule"),
            "origin_template": f"---\nid: {entry['task_id']}\nname: {folder.name}\ncategory: x\n---\n\n## Prompt\n\n"
                               f"{entry['user_query'][:80]}\n"}


def write_rows(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def same_but_source(a: Task, b: Task) -> None:
    assert a.id == b.id
    assert a.instruction == b.instruction
    assert a.workspace == b.workspace  # files in the same order, byte for byte, mount dir, directories
    assert a.verifier == b.verifier  # checker files, entry, subscores entry, timeout
    assert a.timeout_seconds == b.timeout_seconds
    assert a.model_dump(exclude={"source"}) == b.model_dump(exclude={"source"})
    assert (a.source, b.source) == ("clawgym-folder", "clawgym-hub")


# --------------------------------------------------------------------------------------------- equal records


@pytest.mark.parametrize("name", ["clawgym-eval", "clawgym-train-sample"])
def test_hub_rows_of_the_real_folders_import_to_the_folder_records(name: str, tmp_path: Path) -> None:
    root = folder_set(name)
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    by_folder = import_clawgym(root)
    assert by_folder.failures == [] and len(by_folder.tasks) == len(folders)
    rows = write_rows(tmp_path / HUB_FILENAME, [hub_row(f) for f in folders])
    by_row = import_clawgym_hub(rows)
    assert by_row.failures == []
    assert [t.id for t in by_row.tasks] == [t.id for t in by_folder.tasks]
    for a, b in zip(by_folder.tasks, by_row.tasks, strict=True):
        same_but_source(a, b)
        assert Task.model_validate_json(b.model_dump_json()) == b


def test_import_clawgym_hub_command_writes_the_folder_importers_tasks(tmp_path: Path) -> None:
    root = folder_set("clawgym-train-sample")
    rows = write_rows(tmp_path / HUB_FILENAME, [hub_row(f) for f in sorted(p for p in root.iterdir() if p.is_dir())])
    r = cli("import", "clawgym-hub", rows, "-o", tmp_path / "hub.jsonl")
    assert r.returncode == 0, r.stderr
    assert "imported 30 ClawGym corpus tasks" in r.stdout
    r = cli("import", "clawgym", root, "-o", tmp_path / "folders.jsonl")
    assert r.returncode == 0, r.stderr
    for a, b in zip(read_records(tmp_path / "folders.jsonl", Task), read_records(tmp_path / "hub.jsonl", Task),
                    strict=True):
        same_but_source(a, b)


# --------------------------------------------------------------------------------------------- the converter's rules


def test_rows_follow_the_converters_rules(tmp_path: Path) -> None:
    check = 'import json, sys\nprint(json.dumps({"ok": 1.0}))\n'
    rows = write_rows(tmp_path / "rows.jsonl", [
        # no origin_template id: task_NNNNN counting the rows that parse (the bad line below does not count)
        {"prompt": "Do it.", "hook_code": "python3 reward/test.py /root/.openclaw/workspace",
         "input_files": [{"file_path": "reward/test.py", "content": check}], "rule": None, "origin_template": ""},
        "{not json",
        # a path given twice keeps its last content; the row's own reward.sh is replaced by the wrapper; the rubric
        # and the fields later stages add are kept
        {"prompt": "Clean it.", "hook_code": "python3 /root/.openclaw/workspace/reward/test.py /root/.openclaw/workspace",
         "input_files": [{"file_path": "b/x.csv", "content": "old"}, {"file_path": "a.txt", "content": "a"},
                         {"file_path": "b/x.csv", "content": "new"}, {"file_path": "z.md", "content": "z"},
                         {"file_path": "reward/reward.sh", "content": "echo 1.0"},
                         {"file_path": "reward/test.py", "content": check}],
         "rule": {"eval_type": "llm_rubric", "rules": []}, "origin_template": "---\nid: clean_01\n---\n",
         "category": "Data", "macro_category": "Work", "hook_lang": "python"},
        # no hook: the converter's default hook runs reward/check.py
        {"prompt": "Chat.", "hook_code": None, "input_files": [{"file_path": "reward/check.py", "content": check}],
         "rule": None, "origin_template": "---\nname: chat\nid: chat_02\n---\n"},
    ])
    res = import_clawgym_hub(rows)
    assert [str(f) for f in res.failures] == [f"{rows}:2: not valid JSON (Expecting property name enclosed in double "
                                              "quotes at column 2)"]
    first, clean, chat = res.tasks
    assert first.id == "task_00000" and first.workspace.files == []
    assert first.metadata["input_mount_dir_given"] is False and first.workspace.mount_dir == WORKSPACE
    sh = {t.id: next(f.content for f in t.verifier.code.files if f.path == "reward/reward.sh") for t in res.tasks}
    wrapped = f"python3 {WORKSPACE}/reward/check.py {WORKSPACE}"
    assert sh == {t: REWARD_SH_TEMPLATE.format(hook=wrapped) for t in ("task_00000", "clean_01", "chat_02")}
    assert reward_script(None) == reward_script("python3 reward/test.py /root/.openclaw/workspace")

    assert [f.path for f in clean.workspace.files] == ["a.txt", "z.md", "b/x.csv"]  # the folder walk's order
    assert next(f.content for f in clean.workspace.files if f.path == "b/x.csv") == "new"
    assert [(f.path, f.mode) for f in clean.verifier.code.files] == [("reward/check.py", None),
                                                                     ("reward/reward.sh", 0o755)]
    assert clean.category == "Data" and clean.metadata["rule"] == {"eval_type": "llm_rubric", "rules": []}
    assert clean.metadata["macro_category"] == "Work" and clean.metadata["hook_lang"] == "python"
    assert clean.metadata["input_mount_dir_given"] is True and clean.metadata["folder"] == "clean_01"
    assert clean.verifier.code.subscores_entry == 'python3 reward/check.py "$PWD"'
    assert chat.id == "chat_02"


def test_bad_rows_are_failures_naming_line_and_field_and_the_rest_import(tmp_path: Path) -> None:
    good = {"prompt": "Do it.", "hook_code": "", "input_files": [{"file_path": "in/a.txt", "content": "a"}],
            "rule": None, "origin_template": "---\nid: good\n---\n"}
    rows = write_rows(tmp_path / "rows.jsonl", [
        good,
        ["not", "an", "object"],
        {**good, "prompt": "  "},
        {**good, "input_files": "in/a.txt"},
        {**good, "input_files": [{"file_path": "/etc/passwd", "content": "x"}]},
        {**good, "input_files": [{"file_path": "../escape.txt", "content": "x"}]},
        {**good, "input_files": [{"file_path": "in/a.bin", "content": None}]},
        {**good, "origin_template": 7},
        good,  # the same id again
        {**good, "input_files": [{"file_path": "reward/", "content": "x"}]},
    ])
    with rows.open("ab") as fh:  # a byte that is not UTF-8 fails its row only
        fh.write(b'{"prompt": "caf\xe9", "origin_template": "id: latin1"}\n')
    res = import_clawgym_hub(rows)
    assert [t.id for t in res.tasks] == ["good"]
    got = {int(f.path.rsplit(":", 1)[1]): f.message for f in res.failures}
    assert got[2] == "expected a JSON object, got list"
    assert got[3] == "prompt: missing or empty"
    assert got[4] == "input_files: must be a list, got str"
    assert got[5].startswith("input_files[0].file_path: ") and "relative" in got[5]
    assert got[6].startswith("input_files[0].file_path: ")
    assert got[7] == "input_files[0].content: must be a string, got NoneType"
    assert got[8] == "origin_template: must be a string, got int"
    assert got[9] == "task id 'good' already imported from line 1"
    assert got[10] == "input_files[0].file_path: must be a file's path, got 'reward/'"
    assert got[11].startswith("invalid task: instruction: not valid Unicode: a lone surrogate")
    assert all(str(f).startswith(f"{rows}:") for f in res.failures)


# --------------------------------------------------------------------------------------------- the Hub


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_from_hub_reads_the_hugging_face_cache_offline(tmp_path: Path) -> None:
    """huggingface_hub's own cache layout (refs/main -> snapshots/<commit>/FILE) answers `--from-hub` with
    HF_HUB_OFFLINE=1: the real hf_hub_download, no network."""
    pytest.importorskip("huggingface_hub")
    root = folder_set("clawgym-train-sample")
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo_dir = tmp_path / "hf" / "hub" / f"datasets--{HUB_REPO.replace('/', '--')}"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(commit)
    (repo_dir / "snapshots" / commit).mkdir(parents=True)
    write_rows(repo_dir / "snapshots" / commit / HUB_FILENAME,
               [hub_row(f) for f in sorted(p for p in root.iterdir() if p.is_dir())[:5]])
    r = cli("import", "clawgym-hub", "-o", tmp_path / "tasks.jsonl",
            env={"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr
    assert "imported 5 ClawGym corpus tasks" in r.stdout
    assert [t.source for t in read_records(tmp_path / "tasks.jsonl", Task)] == ["clawgym-hub"] * 5


def test_from_hub_unreachable_or_offline_is_one_line_naming_the_dataset(tmp_path: Path) -> None:
    pytest.importorskip("huggingface_hub")
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    r = cli("import", "clawgym-hub", "-o", tmp_path / "t.jsonl", env=env)
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.returncode == 1 and len(errors) == 1, r.stderr
    assert errors[0] == (f"error: the dataset {HUB_REPO} ({HUB_FILENAME}) is not in the Hugging Face cache and "
                         "HF_HUB_OFFLINE is set (unset it where the Hub is reachable); or give a downloaded "
                         f"{HUB_FILENAME} as the FILE argument")
    assert not (tmp_path / "t.jsonl").exists()

    # The Hub out of reach (a closed port stands for no network): huggingface_hub retries for ~20 s, quietly.
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": endpoint, "HF_HUB_OFFLINE": "0"}
    r = cli("import", "clawgym-hub", "--from-hub", "someone/ClawGym-Task-mirror", "-o", tmp_path / "t.jsonl", env=env)
    assert r.returncode == 1, r.stderr
    assert "Retry" not in r.stderr and "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: cannot reach the Hugging Face Hub at {endpoint} for the dataset "
                      f"someone/ClawGym-Task-mirror ({HUB_FILENAME}), and it is not in the Hugging Face cache (set "
                      "HF_ENDPOINT to a reachable mirror, or HF_HOME to a cache that holds it); or give a downloaded "
                      f"{HUB_FILENAME} as the FILE argument"], r.stderr


def test_a_file_and_from_hub_together_are_refused(tmp_path: Path) -> None:
    r = cli("import", "clawgym-hub", tmp_path / "x.jsonl", "--from-hub", HUB_REPO, "-o", tmp_path / "t.jsonl")
    assert r.returncode == 2 and "not both" in r.stderr
    r = cli("import", "clawgym-hub", tmp_path / "missing.jsonl", "-o", tmp_path / "t.jsonl")
    assert r.returncode == 1 and "no such file" in r.stderr
