"""Hostile task content (tracker issue 17, items 6-10): what a task file or a task folder brings must never reach
the host, and bad input must end in a one-line `file:line` error with the other tasks still run.

Each test is one attack. They run the CLI as a user does (a `python -m clawgym` process) where the CLI path
matters, with the bwrap backend for rollouts.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from clawgym.core.errors import RecordError
from clawgym.core.jsonl import read_records, read_records_lenient
from clawgym.core.records import Task, Trajectory, WorkspaceSpec
from clawgym.workspace.materialize import WorkspaceError, materialize

SECRET = "TOP-SECRET-host-credential-9f3c1e"


def cli(*args, cwd=None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env={**os.environ, "COLUMNS": "400"})


def task(tid: str, **workspace) -> dict:
    """A tiny task the oracle solves: write done.txt; the check prints 1 when it exists."""
    return {
        "id": tid, "instruction": "Write done.txt.",
        "workspace": workspace,
        "verifier": {"code": {"kind": "shell", "entry": "test -f done.txt && echo 1 || echo 0"}},
        "reference": {"steps": [{"name": "write", "arguments": {"path": "done.txt", "content": "ok"}}]},
    }


def line(d: dict) -> bytes:
    return json.dumps(d).encode() + b"\n"


@pytest.fixture
def host_secret(tmp_path: Path) -> Path:
    """A directory outside the task's directory holding a secret, as ~/.ssh or ~/.aws would."""
    d = tmp_path / "host"
    d.mkdir()
    (d / "credentials").write_text(SECRET)
    return d


def tree_text(root: Path) -> str:
    """Everything under `root` (files, not following symlinks), as text, to look for the secret."""
    out = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            if p.is_file() and not p.is_symlink():
                out.append(p.read_bytes().decode("utf-8", "replace"))
    return "\n".join(out)


def rollout(tasks: Path, run_dir: Path) -> subprocess.CompletedProcess:
    return cli("rollout", tasks, "--agent", "oracle", "--sandbox", "bwrap", "-j", "2", "--infra-retries", "1",
               "-o", run_dir, timeout=300)


def ran(run_dir: Path) -> dict[str, list[Trajectory]]:
    by_task: dict[str, list[Trajectory]] = {}
    for t in read_records(run_dir / "trajectories.jsonl", Trajectory):
        by_task.setdefault(t.task_id, []).append(t)
    return by_task


def assert_one_line_error(stderr: str, expected: str) -> None:
    assert "Traceback" not in stderr, stderr
    hits = [ln for ln in stderr.splitlines() if expected in ln]
    assert hits, f"{expected!r} not in:\n{stderr}"


# ----------------------------------------------------------------------------------------- 6: assets_dir


def test_assets_dir_absolute_path_cannot_copy_host_secret(tmp_path, host_secret):
    tasks = tmp_path / "tasks" / "tasks.jsonl"
    tasks.parent.mkdir()
    leak = {"files": [{"path": "stolen.txt", "source": "credentials"}]}
    tasks.write_bytes(
        line(task("abs", assets_dir=str(host_secret), **leak))
        + line(task("dotdot", assets_dir="../host", **leak))
        + line(task("good", files=[{"path": "a.txt", "content": "a"}]))
    )
    out = tmp_path / "ws"
    r = cli("workspace", "build", tasks, "--out", out)
    assert r.returncode == 1
    assert_one_line_error(r.stderr, f"{tasks}:1: workspace.assets_dir:")
    assert_one_line_error(r.stderr, f"{tasks}:2: workspace.assets_dir:")
    assert (out / "good" / "a.txt").read_text() == "a"
    assert SECRET not in tree_text(out)
    assert not (out / "abs").exists() and not (out / "dotdot").exists()


def test_assets_dir_symlink_leading_out_cannot_copy_host_secret(tmp_path, host_secret):
    base = tmp_path / "tasks"
    base.mkdir()
    (base / "assets").symlink_to(host_secret)  # a relative, innocent-looking assets dir that is a link out
    spec = WorkspaceSpec.model_validate({"assets_dir": "assets", "files": [{"path": "x", "source": "credentials"}]})
    with pytest.raises(WorkspaceError, match="assets_dir"):
        materialize(spec, tmp_path / "ws", base_dir=base)
    assert SECRET not in tree_text(tmp_path / "ws")


def test_asset_tree_symlink_to_host_secret_is_refused(tmp_path, host_secret):
    base = tmp_path / "tasks"
    (base / "assets" / "docs").mkdir(parents=True)
    (base / "assets" / "docs" / "readme.md").write_text("hi")
    (base / "assets" / "docs" / "creds").symlink_to(host_secret / "credentials")
    spec = WorkspaceSpec.model_validate({"assets_dir": "assets", "files": [{"path": "docs", "source": "docs"}]})
    with pytest.raises(WorkspaceError, match="creds"):
        materialize(spec, tmp_path / "ws", base_dir=base)
    # nothing was left that points at the host file either
    assert not any(p.is_symlink() for p in (tmp_path / "ws").rglob("*"))


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a device needs root")
def test_asset_device_node_or_fifo_is_refused_not_read(tmp_path):
    tasks = tmp_path / "tasks" / "tasks.jsonl"
    (tasks.parent / "assets").mkdir(parents=True)
    os.mknod(tasks.parent / "assets" / "zero", 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: endless
    os.mkfifo(tasks.parent / "assets" / "pipe")
    (tasks.parent / "assets" / "dir").mkdir()
    os.mkfifo(tasks.parent / "assets" / "dir" / "pipe")
    tasks.write_bytes(b"".join(line(task(name, assets_dir="assets", files=[{"path": "x", "source": name}]))
                               for name in ("zero", "pipe", "dir")) + line(task("good")))
    r = cli("workspace", "build", tasks, "--out", tmp_path / "ws", timeout=60)  # read /dev/zero for ever before
    assert r.returncode == 1
    for name in ("zero", "pipe", "dir"):
        assert_one_line_error(r.stderr, f"error: {name}: x: ")
    assert r.stderr.count("not a regular file") == 3, r.stderr
    assert sorted(p.name for p in (tmp_path / "ws").iterdir()) == ["good"]


def _clawgym_folder(datasets: Path, dest: Path, name: str = "task_0308") -> Path:
    folder = dest / name
    shutil.copytree(datasets / "clawgym-train-sample" / name, folder)
    return folder


def test_import_clawgym_refuses_symlink_to_host_secret(datasets, tmp_path, host_secret):
    src = tmp_path / "src"
    bad = _clawgym_folder(datasets, src)
    _clawgym_folder(datasets, src, "task_0176")
    (bad / "input_files" / "notes.txt").symlink_to(host_secret / "credentials")
    out = tmp_path / "tasks.jsonl"
    r = cli("import", "clawgym", src, "-o", out, timeout=120)
    assert r.returncode == 0, r.stderr
    assert_one_line_error(r.stderr, "notes.txt")
    assert "symbolic link" in r.stderr
    assert SECRET not in out.read_text()
    assert [t.id for t in read_records(out, Task)] == ["task_0176"]


def test_import_clawgym_refuses_symlinked_data_entry(datasets, tmp_path, host_secret):
    src = tmp_path / "src"
    bad = _clawgym_folder(datasets, src)
    (host_secret / "entry.json").write_text(json.dumps({"task_id": "x", "user_query": "q", "token": SECRET}))
    (bad / "data_entry.json").unlink()
    (bad / "data_entry.json").symlink_to(host_secret / "entry.json")
    from clawgym.importers import import_clawgym

    res = import_clawgym(src)
    assert res.tasks == [] and len(res.failures) == 1
    assert "symbolic link" in str(res.failures[0])


def test_import_clawgym_refuses_fifo_without_hanging(datasets, tmp_path):
    src = tmp_path / "src"
    bad = _clawgym_folder(datasets, src)
    _clawgym_folder(datasets, src, "task_0176")
    os.mkfifo(bad / "input_files" / "stuck.csv")
    os.mkfifo(bad / "reward" / "check.py.fifo")
    out = tmp_path / "tasks.jsonl"
    r = cli("import", "clawgym", src, "-o", out, timeout=60)  # hung for ever before
    assert r.returncode == 0, r.stderr
    assert_one_line_error(r.stderr, "stuck.csv")
    assert "not a regular file" in r.stderr
    assert [t.id for t in read_records(out, Task)] == ["task_0176"]


def test_import_pinchbench_refuses_assets_symlinked_out_of_the_checkout(datasets, tmp_path):
    pb = tmp_path / "pb"
    shutil.copytree(datasets / "pinchbench-v1" / "tasks", pb / "tasks")
    host_assets = tmp_path / "host"  # e.g. a home directory: the checkout's assets/ is a link to it
    shutil.copytree(datasets / "pinchbench-v1" / "assets", host_assets)
    (host_assets / "ai_blog.txt").write_text(SECRET)
    (pb / "assets").symlink_to(host_assets)
    from clawgym.importers import import_pinchbench

    res = import_pinchbench(pb)
    failed = {Path(f.path).stem: str(f) for f in res.failures}
    assert {"task_14_humanizer", "task_19_spreadsheet_summary", "task_21_openclaw_comprehension"} <= set(failed)
    assert "leads out of the checkout" in failed["task_14_humanizer"]
    assert SECRET not in "".join(t.model_dump_json() for t in res.tasks)
    assert "task_09_files" in {t.id for t in res.tasks}  # tasks without assets still import


def test_import_pinchbench_link_assets_writes_a_relative_assets_dir(datasets, tmp_path):
    pb = tmp_path / "pb"
    shutil.copytree(datasets / "pinchbench-v1", pb)
    out = pb / "tasks.jsonl"
    r = cli("import", "pinchbench", pb, "-o", out, "--link-assets", timeout=120)
    assert r.returncode == 0, r.stderr
    linked = [t for t in read_records(out, Task) if t.workspace.assets_dir]
    assert linked and {t.workspace.assets_dir for t in linked} == {"assets"}
    ws = tmp_path / "ws"
    r = cli("workspace", "build", out, "--out", ws)
    assert r.returncode == 0, r.stderr
    # elsewhere, the assets dir would be outside the tasks file's directory: refused at import, not at run
    (tmp_path / "other").mkdir()
    r = cli("import", "pinchbench", pb, "-o", tmp_path / "other" / "t.jsonl", "--link-assets", timeout=120)
    assert_one_line_error(r.stderr, "task_19_spreadsheet_summary.md: --link-assets: ")
    assert "outside" in r.stderr
    assert {t.workspace.assets_dir for t in read_records(tmp_path / "other" / "t.jsonl", Task)} == {None}


# ----------------------------------------------------------------------------------------- 7: mount_dir


@pytest.mark.parametrize("mount", [
    "/", "/usr", "/usr/bin", "/bin", "/sbin/x", "/lib", "/lib64", "/lib/x86_64-linux-gnu", "/etc", "/etc/ssh",
    "/proc/self", "/sys/fs", "/dev/shm", "/boot", "/var", "/var/lib/dpkg", "/opt", "/opt/app",
    "/.clawgym", "/.clawgym/out",
    "/tmp/../etc", "/workspace/../usr/bin", "//usr", "/workspace/./x", "/workspace//x", "workspace",
    "/work\nspace", "/work\x00space", "/workspace:/etc",
])
def test_mount_dir_refuses_system_dirs(mount):
    with pytest.raises(ValueError, match="mount_dir"):
        Task.model_validate(task("t", mount_dir=mount))


def test_mount_dir_refuses_the_control_directory_of_the_sandboxes():
    from clawgym.sandbox.base import CTL_DIR

    with pytest.raises(ValueError, match="mount_dir"):
        Task.model_validate(task("t", mount_dir=CTL_DIR))


@pytest.mark.parametrize("mount", ["/workspace", "/root/.openclaw/workspace", "/tmp/ws", "/var/tmp/ws",
                                   "/home/user/work", "/srv/data", "/workspace/"])
def test_mount_dir_still_accepts_the_mount_dirs_tasks_use(mount):
    assert Task.model_validate(task("t", mount_dir=mount)).workspace.mount_dir == mount.rstrip("/")


def test_mount_dir_of_every_real_task_is_accepted(datasets):
    from clawgym.importers import import_clawgym, import_pinchbench

    repo = Path(__file__).resolve().parents[1]
    assert len(import_clawgym(datasets / "clawgym-train-sample").tasks) == 30
    assert len(import_pinchbench(datasets / "pinchbench-v1").tasks) == 22
    for f in (repo / "benchmarks" / "synth-bench-200" / "tasks.jsonl", repo / "examples" / "tasks.jsonl"):
        read = read_records_lenient(f, Task)
        assert read.errors == [] and read.records


def test_mount_dir_refused_in_a_tasks_file_is_a_file_line_error(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(line(task("a", mount_dir="/tmp/../etc")) + line(task("b")))
    r = cli("validate", tasks)
    assert r.returncode == 1
    assert_one_line_error(r.stderr, f"{tasks}:1: workspace.mount_dir:")
    assert "1 valid task records, 1 bad lines" in r.stdout


# ----------------------------------------------------------------------------------------- 8: bad lines


def test_tasks_file_invalid_utf8_line_reports_file_line_and_runs_the_rest(tmp_path, bwrap_backend):
    tasks = tmp_path / "tasks.jsonl"
    bad = line(task("bad")).replace(b"Write done.txt.", b"Write \xff\xfe done.txt.")
    tasks.write_bytes(line(task("a")) + bad + line(task("b")))
    r = rollout(tasks, tmp_path / "run")
    assert r.returncode == 1
    assert_one_line_error(r.stderr, f"{tasks}:2: not valid UTF-8")
    by_task = ran(tmp_path / "run")
    assert sorted(by_task) == ["a", "b"]
    assert all(t.status == "completed" and t.score == 1.0 for ts in by_task.values() for t in ts)


def test_tasks_file_nested_100k_deep(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    deep = b'{"id": "deep", "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    tasks.write_bytes(line(task("a")) + deep + line(task("b")))
    r = cli("workspace", "build", tasks, "--out", tmp_path / "ws")
    assert r.returncode == 1
    assert_one_line_error(r.stderr, f"{tasks}:2: ")
    assert "nested too deeply" in r.stderr
    assert (tmp_path / "ws" / "a").is_dir() and (tmp_path / "ws" / "b").is_dir()
    # moderately deep (but within the limit of the JSON parser) in a field pydantic walks: also one line
    mid = task("mid")
    v: list = []
    for _ in range(900):
        v = [v]
    mid["metadata"] = {"v": v}
    tasks.write_bytes(line(task("a")) + line(mid))
    read = read_records_lenient(tasks, Task)
    assert [t.id for t in read.records] == ["a"] and len(read.errors) == 1
    assert str(read.errors[0]).startswith(f"{tasks}:2: ")


def test_tasks_file_is_a_directory(tmp_path):
    d = tmp_path / "tasks.jsonl"
    d.mkdir()
    for args in (["rollout", d, "--agent", "noop", "--sandbox", "bwrap", "-o", tmp_path / "run"],
                 ["validate", d], ["workspace", "build", d, "--out", tmp_path / "ws"], ["show", d]):
        r = cli(*args)
        assert r.returncode != 0, args
        assert_one_line_error(r.stderr, f"{d}: is a directory")
        assert len([ln for ln in r.stderr.splitlines() if ln.strip()]) == 1, r.stderr
    with pytest.raises(RecordError, match="is a directory"):
        read_records(d, Task)


# ----------------------------------------------------------------------------------------- 9: duplicate ids


def test_duplicate_task_ids_refused_with_both_lines(tmp_path, bwrap_backend):
    tasks = tmp_path / "tasks.jsonl"
    second = task("a")
    second["instruction"] = "Write done.txt, again."
    tasks.write_bytes(line(task("a")) + line(task("b")) + b"\n" + line(second))
    r = rollout(tasks, tmp_path / "run")
    assert r.returncode == 1
    assert_one_line_error(r.stderr, f"{tasks}:4: id: 'a' already defined at line 1")
    by_task = ran(tmp_path / "run")
    assert sorted(by_task) == ["a", "b"] and len(by_task["a"]) == 1  # the first kept, run once
    # the library readers agree: lenient keeps the first, strict stops at the duplicate
    read = read_records_lenient(tasks, Task)
    assert [t.instruction for t in read.records if t.id == "a"] == ["Write done.txt."]
    with pytest.raises(RecordError, match="already defined at line 1"):
        read_records(tasks, Task)
    # trajectories legitimately repeat ids (retries, resumed runs): no such check there
    assert len(read_records(tmp_path / "run" / "trajectories.jsonl", Trajectory)) == 2


# ----------------------------------------------------------------------------------------- 10: long ids


def test_5000_char_task_id_refused_at_load(tmp_path, bwrap_backend):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(line(task("x" * 5000)) + line(task("a")))
    r = rollout(tasks, tmp_path / "run")
    assert r.returncode == 1
    assert_one_line_error(r.stderr, f"{tasks}:1: id:")
    assert "x" * 300 not in r.stderr  # the id is not echoed back
    by_task = ran(tmp_path / "run")
    assert list(by_task) == ["a"] and by_task["a"][0].status == "completed"


@pytest.mark.parametrize("tid", ["a/b", "../up", ".", "..", "a\nb", "a\x00b", "tab\there", "é" * 150])
def test_task_id_that_cannot_name_a_file_refused_at_load(tid):
    with pytest.raises(ValueError, match="id"):
        Task.model_validate(task(tid))


def test_longest_real_task_ids_fit(datasets):
    from clawgym.importers import import_clawgym, import_pinchbench

    ids = [t.id for t in import_clawgym(datasets / "clawgym-train-sample").tasks]
    ids += [t.id for t in import_pinchbench(datasets / "pinchbench-v1").tasks]
    assert len(ids) == 52 and max(map(len, ids)) < 200
    assert Task.model_validate(task("t" * 200)).id == "t" * 200


# ----------------------------------------------------------------------------------------- 12: timeouts


def raw_line(d: dict, **literals: str) -> bytes:
    """`line(d)` with each string value `"@NAME@"` replaced by the JSON text `literals[NAME]` (a number such as
    `1e999`, which json.dumps cannot write, or NaN)."""
    out = line(d)
    for name, text in literals.items():
        out = out.replace(f'"@{name}@"'.encode(), text.encode())
    return out


def checker_timeout(tid: str, value: object) -> dict:
    d = task(tid)
    d["verifier"]["code"]["timeout_seconds"] = value
    return d


def task_timeout(tid: str, value: object) -> dict:
    return {**task(tid), "timeout_seconds": value}


def test_checker_timeout_of_1e999_or_1e9_refused_at_load(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(
        raw_line(checker_timeout("c-inf", "@x@"), x="1e999")  # valid JSON, read as infinity
        + line(checker_timeout("c-1e9", 1e9))
        + raw_line(checker_timeout("c-nan", "@x@"), x="NaN")
        + raw_line(task_timeout("t-inf", "@x@"), x="1e999")
        + line(task_timeout("t-1e9", 1e9))
        + raw_line(task_timeout("t-infinity", "@x@"), x="-Infinity")
        + line({**checker_timeout("at-caps", 3600), "timeout_seconds": 24 * 3600})  # the caps themselves
        + line(task("good"))
    )
    r = cli("validate", tasks)
    assert r.returncode == 1
    for n in (1, 2, 3):
        assert_one_line_error(r.stderr, f"{tasks}:{n}: verifier.code.timeout_seconds: ")
    for n in (4, 5, 6):
        assert_one_line_error(r.stderr, f"{tasks}:{n}: timeout_seconds: ")
    assert r.stderr.count("finite") == 4, r.stderr  # 1e999, NaN, 1e999, -Infinity
    assert "2 valid task records, 6 bad lines" in r.stdout
    read = read_records_lenient(tasks, Task)
    assert [t.id for t in read.records] == ["at-caps", "good"]
    from clawgym.core.records import MAX_CHECK_TIMEOUT_SECONDS, MAX_TASK_TIMEOUT_SECONDS

    assert (MAX_CHECK_TIMEOUT_SECONDS, MAX_TASK_TIMEOUT_SECONDS) == (3600, 24 * 3600)


@pytest.mark.parametrize(("field", "place"), [
    ("verifier.code_weight", lambda d: d["verifier"].update(code_weight="@x@", rubric={"text": "t"})),
    ("verifier.rubric.rules[0].weight",
     lambda d: d["verifier"].update(rubric={"rules": [{"name": "r", "weight": "@x@"}]})),
    ("metadata.difficulty", lambda d: d.update(metadata={"difficulty": "@x@"})),
    ("metadata.scores[1]", lambda d: d.update(metadata={"scores": [0.5, "@x@"]})),
    ("reference.steps[0].arguments.n", lambda d: d["reference"]["steps"][0]["arguments"].update(n="@x@")),
    ("workspace.files[0].generate.params.data.x",
     lambda d: d.update(workspace={"files": [{"path": "a.json", "generate": {"kind": "json",
                                                                             "params": {"data": {"x": "@x@"}}}}]})),
])
@pytest.mark.parametrize("literal", ["1e999", "NaN", "-Infinity"])
def test_non_finite_number_anywhere_in_a_task_refused_at_load(tmp_path, field, place, literal):
    bad = task("bad")
    place(bad)
    _only_the_bad_line_refused(tmp_path, raw_line(bad, x=literal), field, "finite")


# ----------------------------------------------------------------------------------------- 13: lone surrogates


def test_lone_surrogate_in_task_metadata_refused_at_load(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    emoji = task("emoji")
    emoji["instruction"] = "Write done.txt \U0001f600."  # json.dumps writes a surrogate *pair* escape: valid
    tasks.write_bytes(line({**task("bad"), "metadata": {"note": "caf\ud800"}}) + line(task("good")) + line(emoji))
    assert b"\\ud800" in tasks.read_bytes() and b"\\ud83d\\ude00" in tasks.read_bytes()
    r = cli("validate", tasks)
    assert r.returncode == 1
    assert_one_line_error(r.stderr, f"{tasks}:1: metadata.note: ")
    assert "U+D800" in r.stderr
    assert "2 valid task records, 1 bad lines" in r.stdout
    read = read_records_lenient(tasks, Task)
    assert [t.id for t in read.records] == ["good", "emoji"]
    for t in read.records:  # what loads can be written again (the lone surrogate could not)
        t.model_dump_json()


CHECKS_VERIFIER = {"code": {"kind": "checks", "checklib": {"version": 1, "sha256": "0" * 64},
                            "checks": [{"name": "c", "fn": "file_exists", "args": {"path": "@s@"}}]}}


@pytest.mark.parametrize(("field", "place"), [
    ("instruction", lambda d: d.update(instruction="@s@")),
    ("metadata.tags[2]", lambda d: d.update(metadata={"tags": ["a", "b", "@s@"]})),
    ("metadata.deep.er", lambda d: d.update(metadata={"deep": {"er": "@s@"}})),
    ("metadata", lambda d: d.update(metadata={"\udc80key": 1})),  # a key
    ("workspace.files[0].content", lambda d: d.update(workspace={"files": [{"path": "a.txt", "content": "@s@"}]})),
    ("workspace.files[0].path", lambda d: d.update(workspace={"files": [{"path": "@s@", "content": "x"}]})),
    ("verifier.code.checks[0].args.path", lambda d: d.update(verifier=json.loads(json.dumps(CHECKS_VERIFIER)))),
    ("verifier.code.entry", lambda d: d["verifier"]["code"].update(entry="@s@")),
    ("reference.steps[0].arguments.content", lambda d: d["reference"]["steps"][0]["arguments"].update(content="@s@")),
    ("sessions[0].prompt", lambda d: d.update(sessions=[{"id": "s", "prompt": "@s@"}])),
])
def test_lone_surrogate_anywhere_in_a_task_refused_with_its_field_path(tmp_path, field, place):
    bad = task("bad")
    place(bad)
    _only_the_bad_line_refused(tmp_path, raw_line(bad, s='"x\\udc80y"'), field, "U+DC80")


# ----------------------------------------------------------------------------------------- 14: invisible ids


def test_task_id_with_bidi_override_or_zero_width_char_refused_at_load(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(
        line(task("invoice\u202efdp.exe"))  # prints as "invoiceexe.pdf"
        + line(task("a\u200bb"))  # prints as "ab"
        + line(task("cafe\u0301"))  # prints as "café", but is not the NFC "café" below
        + line(task("ab")) + line(task("caf\u00e9"))
    )
    r = cli("validate", tasks)
    assert r.returncode == 1
    assert_one_line_error(r.stderr, f"{tasks}:1: id: ")
    assert_one_line_error(r.stderr, f"{tasks}:2: id: ")
    assert_one_line_error(r.stderr, f"{tasks}:3: id: ")
    assert "U+202E" in r.stderr and "U+200B" in r.stderr and "U+0301" in r.stderr and "NFC" in r.stderr
    assert "\u202e" not in r.stderr and "\u200b" not in r.stderr  # the error does not replay the trick
    assert "2 valid task records, 3 bad lines" in r.stdout


@pytest.mark.parametrize("char", [
    "\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u200e", "\u200f", "\u061c",  # bidi controls and marks
    "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\U000e0041",  # zero-width, BOM, soft hyphen, tag
    "\x85", "\x7f", "\u2028", "\u2029",  # controls, line and paragraph separators
    "\ue000", "\U000f0000",  # private use
    "\u0378", "\U000e0080",  # unassigned
    "\u00a0", "\u3000", "\u2009",  # spaces that print as a space but are not one
])
def test_id_with_invisible_or_lookalike_character_refused_naming_it(char):
    with pytest.raises(ValueError, match=f"id\\n.*U\\+{ord(char):04X}"):
        Task.model_validate(task(f"task{char}1"))


def test_id_not_in_nfc_refused_naming_the_character():
    with pytest.raises(ValueError, match=r"id\n.*NFC.*U\+030A"):
        Task.model_validate(task("A\u030angstrom"))  # Å as A + combining ring
    with pytest.raises(ValueError, match=r"id\n.*NFC.*U\+212B"):
        Task.model_validate(task("\u212bngstrom"))  # the Angstrom sign, whose NFC is U+00C5


@pytest.mark.parametrize(("field", "place"), [
    ("sessions[0].id", lambda d, v: d.update(sessions=[{"id": v, "prompt": "p"}])),
    ("verifier.code.checks[0].name", lambda d, v: d.update(verifier={"code": {
        "kind": "checks", "checklib": {"version": 1, "sha256": "0" * 64},
        "checks": [{"name": v, "fn": "file_exists", "args": {"path": "done.txt"}}]}})),
    ("verifier.rubric.rules[0].name", lambda d, v: d["verifier"].update(rubric={"rules": [{"name": v}]})),
    ("reference.steps[0].name", lambda d, v: d["reference"]["steps"][0].update(name=v)),
    ("category", lambda d, v: d.update(category=v)),
    ("subcategory", lambda d, v: d.update(subcategory=v)),
    ("source", lambda d, v: d.update(source=v)),
    ("operations[1]", lambda d, v: d.update(operations=["ok", v])),
    ("skills[0]", lambda d, v: d.update(skills=[v])),
])
def test_other_ids_of_a_task_with_bidi_override_or_zero_width_char_refused(tmp_path, field, place):
    tasks = tmp_path / "tasks.jsonl"
    lines = b""
    for n, char in enumerate(("\u202e", "\u200d", "e\u0301")):
        bad = task(f"bad{n}")
        place(bad, f"name{char}x")
        lines += line(bad)
    tasks.write_bytes(lines + line(task("good")))
    read = read_records_lenient(tasks, Task)
    assert [t.id for t in read.records] == ["good"]
    assert [str(e).split(": ")[1] for e in read.errors] == [field] * 3, read.errors
    assert "U+202E" in str(read.errors[0]) and "U+200D" in str(read.errors[1]) and "NFC" in str(read.errors[2])


@pytest.mark.parametrize("tid", ["caf\u00e9", "\u65e5\u672c\u8a9e\u30bf\u30b9\u30af", "\u0437\u0430\u0434\u0430\u0447\u0430-1",
                                 "Analysis & Reasoning", "\u0645\u0647\u0645\u0629", "a b", "emoji-\U0001f600"])
def test_ids_in_any_script_still_accepted(tid):
    t = Task.model_validate({**task(tid), "category": tid, "operations": [tid], "skills": [tid]})
    assert t.id == tid


# ----------------------------------------------------------------------------------------- 12-14: importers


def _entry(folder: Path) -> dict:
    return json.loads((folder / "data_entry.json").read_text())


def test_import_clawgym_refuses_infinite_timeout_bidi_id_and_lone_surrogate(datasets, tmp_path):
    src = tmp_path / "src"
    good = _clawgym_folder(datasets, src, "task_0176")
    inf, rlo, surrogate = (_clawgym_folder(datasets, src, name) for name in ("task_0308", "task_0439", "task_0492"))
    (inf / "data_entry.json").write_text(json.dumps({**_entry(inf), "timeout_seconds": "@x@"}).replace('"@x@"', "1e999"))
    (rlo / "data_entry.json").write_text(json.dumps({**_entry(rlo), "task_id": "task\u202e0439"}))
    (surrogate / "data_entry.json").write_text(json.dumps({**_entry(surrogate), "note": "x\ud800"}))
    from clawgym.importers import import_clawgym

    res = import_clawgym(src)
    assert [t.id for t in res.tasks] == [good.name]
    failed = {Path(f.path).parent.name: str(f) for f in res.failures}
    assert set(failed) == {inf.name, rlo.name, surrogate.name}, failed
    assert all(Path(f.path).name == "data_entry.json" for f in res.failures)
    assert "timeout_seconds" in failed[inf.name] and "finite" in failed[inf.name]
    assert "id" in failed[rlo.name] and "U+202E" in failed[rlo.name]
    assert "U+D800" in failed[surrogate.name]


def test_import_pinchbench_refuses_infinite_timeout_and_bidi_ids(datasets, tmp_path):
    pb = tmp_path / "pb"
    shutil.copytree(datasets / "pinchbench-v1", pb)
    tasks = pb / "tasks"
    f = tasks / "task_09_files.md"
    f.write_text(f.read_text().replace("timeout_seconds: 120", "timeout_seconds: .inf", 1))
    f = tasks / "task_22_second_brain.md"
    f.write_text(f.read_text().replace("  - id: conversation", '  - id: "conver\\u202esation"', 1))
    (tasks / "task_00_sanity.md").rename(tasks / "task_00_sa\u200dnity.md")
    from clawgym.importers import import_pinchbench

    before = import_pinchbench(datasets / "pinchbench-v1")  # the sample's own failures (a missing asset) stay
    res = import_pinchbench(pb)
    failed = {Path(f.path).name: str(f) for f in res.failures}
    ours = {"task_09_files.md", "task_22_second_brain.md", "task_00_sa\u200dnity.md"}
    assert set(failed) == ours | {Path(f.path).name for f in before.failures}, failed
    assert "timeout_seconds" in failed["task_09_files.md"] and "finite" in failed["task_09_files.md"]
    assert "U+202E" in failed["task_22_second_brain.md"]
    assert "U+200D" in failed["task_00_sa\u200dnity.md"]
    assert len(res.tasks) == len(before.tasks) - 3


# ----------------------------------------------------------------------------------------- bad lines, more


def test_import_clawgym_file_name_not_utf8_is_a_failure_not_a_crash(datasets, tmp_path):
    src = tmp_path / "src"
    bad = _clawgym_folder(datasets, src)
    _clawgym_folder(datasets, src, "task_0176")
    with open(os.fsencode(bad / "input_files") + b"/\xff.txt", "wb") as fh:  # read back as a lone surrogate
        fh.write(b"x")
    out = tmp_path / "tasks.jsonl"
    r = cli("import", "clawgym", src, "-o", out, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    assert_one_line_error(r.stderr, f"{bad / 'input_files'}/")
    assert "U+DCFF" in r.stderr
    assert [t.id for t in read_records(out, Task)] == ["task_0176"]


def test_tasks_file_5000_digit_number_is_a_file_line_error(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(raw_line({**task("big"), "metadata": {"n": "@n@"}}, n="1" * 5000) + line(task("good")))
    r = cli("validate", tasks)
    assert r.returncode == 1
    assert_one_line_error(r.stderr, f"{tasks}:1: ")
    assert "1 valid task records, 1 bad lines" in r.stdout


def _only_the_bad_line_refused(tmp_path, bad_line: bytes, field: str, says: str) -> None:
    """A tasks file of `bad_line` then a good task: the good one loads, the bad one is one `file:1: field:` error
    that says `says`."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(bad_line + line(task("good")))
    read = read_records_lenient(tasks, Task)
    assert [t.id for t in read.records] == ["good"]
    assert len(read.errors) == 1 and str(read.errors[0]).startswith(f"{tasks}:1: {field}: "), read.errors
    assert says in str(read.errors[0])
