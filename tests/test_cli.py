"""The CLI as a user runs it: a real `python -m clawgym` process, its exit codes, stdout and stderr."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import clawgym
from clawgym import __version__
from clawgym.checks import CHECKLIB_SOURCE
from clawgym.checks.checklib import CHECKLIB_VERSION
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task, Trajectory


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=600, env={**__import__("os").environ, "COLUMNS": "200"})


def test_schema_command():
    r = cli("schema", "task")
    assert r.returncode == 0
    schema = json.loads(r.stdout)
    assert schema["title"] == "Task" and "instruction" in schema["properties"]
    r = cli("schema", "nope")
    assert r.returncode == 2 and "unknown record 'nope'" in r.stderr


def test_validate_reports_every_bad_line(tmp_path):
    p = tmp_path / "tasks.jsonl"
    good = {"id": "a", "instruction": "x", "verifier": {"code": {"kind": "shell", "entry": "echo 1"}}}
    p.write_text("\n".join([json.dumps(good), "{oops", json.dumps({**good, "id": ""})]) + "\n")
    r = cli("validate", p)
    assert r.returncode == 1
    assert f"{p}:2: not valid JSON" in r.stderr
    assert f"{p}:3: id: String should have at least 1 character" in r.stderr
    assert "1 valid task records, 2 bad lines" in r.stdout


def test_import_reports_unimportable_tasks_and_imports_the_rest(datasets, tmp_path):
    src = tmp_path / "tasks"
    shutil.copytree(datasets / "clawgym-train-sample", src)
    (src / "task_0076" / "reward" / "reward.sh").unlink()
    out = tmp_path / "tasks.jsonl"
    r = cli("import", "clawgym", src, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "task_0076" in r.stderr and "reward.sh" in r.stderr
    assert len(read_records(out, Task)) == 29
    assert cli("import", "clawgym", src, "-o", out, "--strict").returncode == 1


def test_import_pinchbench_offline_only(datasets, tmp_path):
    out = tmp_path / "pb.jsonl"
    r = cli("import", "pinchbench", datasets / "pinchbench-v1", "-o", out, "--offline-only")
    assert r.returncode == 0, r.stderr
    ids = {t.id for t in read_records(out, Task)}
    assert "task_02_stock" not in ids and "task_09_files" in ids and len(ids) == 17
    assert "GPT4.pdf" in r.stderr


def test_rollout_runs_good_tasks_reports_bad_lines_and_resumes(datasets, tmp_path, bwrap_backend):
    tasks = tmp_path / "tasks.jsonl"
    assert cli("import", "clawgym", datasets / "clawgym-train-sample", "-o", tasks).returncode == 0
    lines = tasks.read_text().splitlines()[:3]
    broken = json.loads(lines[1])
    del broken["verifier"]
    tasks.write_text("\n".join([lines[0], "{not json", json.dumps(broken), lines[2]]) + "\n")
    run_dir = tmp_path / "run"
    r = cli("rollout", tasks, "--agent", "noop", "--sandbox", "bwrap", "-j", "2", "-o", run_dir)
    assert r.returncode == 1
    assert f"{tasks}:2: not valid JSON" in r.stderr
    assert f"{tasks}:3: verifier: Field required" in r.stderr
    trajs = read_records(run_dir / "trajectories.jsonl", Trajectory)
    assert len(trajs) == 2 and all(t.status == "completed" for t in trajs)
    assert "mean" in r.stdout and "errors by kind" in r.stdout
    assert (run_dir / "logs" / "run.log").exists()
    # run.json's provenance: the tasks file's digest (as it was run), the source, the check library, the packages
    prov = json.loads((run_dir / "run.json").read_text())["provenance"]
    assert prov["tasks_file"] == str(tasks) and prov["tasks_sha256"] == hashlib.sha256(tasks.read_bytes()).hexdigest()
    assert prov["checklib"] == {"version": CHECKLIB_VERSION,
                                "sha256": hashlib.sha256(CHECKLIB_SOURCE.encode()).hexdigest()}
    assert prov["packages"]["clawgym"] == __version__ and prov["packages"]["python"] == platform.python_version()
    assert prov["packages"]["pydantic"] == importlib.metadata.version("pydantic")
    head = subprocess.run(["git", "-C", str(Path(clawgym.__file__).parent), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode == 0:  # a git checkout (else no source is recorded)
        assert prov["source"]["git_commit"] == head.stdout.strip() and isinstance(prov["source"]["git_dirty"], bool)

    r = cli("rollout", tasks, "--agent", "noop", "--sandbox", "bwrap", "-o", run_dir)
    assert "resuming: 2 episodes already done" in r.stderr
    assert len(read_records(run_dir / "trajectories.jsonl", Trajectory)) == 2

    r = cli("rollout", tasks, "--agent", "oracle", "--sandbox", "bwrap", "-o", run_dir)
    assert r.returncode == 2 and "holds a run of agent 'noop'" in r.stderr

    r = cli("summary", run_dir, "--json")
    assert r.returncode == 0
    (s,) = json.loads(r.stdout)
    assert s["agent"] == "noop" and s["episodes"] == 2 and s["mean_score"] == 0.0


@pytest.mark.parametrize("bad_args, message", [
    (["--agent", "gpt"], "unknown agent 'gpt'"),
    (["--sandbox", "vm"], "unknown sandbox backend 'vm'"),
])
def test_rollout_rejects_bad_options(tmp_path, bad_args, message):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("")
    r = cli("rollout", tasks, "-o", tmp_path / "run", *bad_args)
    assert r.returncode == 2 and message in r.stderr


def test_workspace_build(datasets, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    assert cli("import", "clawgym", datasets / "clawgym-train-sample" / "task_0308", "-o", tasks).returncode == 0
    r = cli("workspace", "build", tasks, "--out", tmp_path / "ws")
    assert r.returncode == 0, r.stderr
    src = datasets / "clawgym-train-sample" / "task_0308" / "input_files" / "input" / "teams.yaml"
    assert (tmp_path / "ws" / "task_0308" / "input" / "teams.yaml").read_bytes() == src.read_bytes()
    assert not (tmp_path / "ws" / "task_0308" / "reward").exists()


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_ctrl_c_stops_running_sandboxes_at_once(tmp_path, backend, request):
    """Ctrl-C during a rollout ends it promptly, leaves no sandbox behind and no half-written record."""
    import os
    import signal
    import socket
    import time

    b = request.getfixturevalue(f"{backend}_backend")
    marker = f"clawgym-ctrlc-{os.getpid()}-{backend}"
    task = Task.model_validate({
        "id": "long", "instruction": "wait",
        "verifier": {"code": {"kind": "python", "source": "def grade(t, w): return {'a': 1.0}"}},
        "reference": {"steps": [{"name": "exec", "arguments": {"command": f"sleep 300 # {marker}"}}]},
    })
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(task.model_dump_json() + "\n")
    run_dir = tmp_path / "run"
    # Ctrl-C from a terminal: SIGINT at its default disposition in the child even when this test runs where
    # SIGINT is ignored (a CI job started in the background inherits SIG_IGN, and Python then installs no handler)
    proc = subprocess.Popen([sys.executable, "-m", "clawgym", "rollout", str(tasks), "--agent", "oracle",
                             "--sandbox", backend, "-o", str(run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def sandboxes_alive() -> int:
        if backend == "docker":
            from clawgym.sandbox.docker import OWNER_LABEL
            from clawgym.sandbox.sweep import parse_label

            # the low-level listing: `containers.list` inspects each container after listing, and a container the
            # rollout removes in between makes it raise NotFound
            mine = 0
            for c in b.client.api.containers(all=True, filters={"label": OWNER_LABEL}):
                who = parse_label((c.get("Labels") or {}).get(OWNER_LABEL, ""))
                mine += who is not None and who.host == socket.gethostname() and who.pid == proc.pid
            return mine
        out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
        return len(out.split())

    deadline = time.monotonic() + 60
    while sandboxes_alive() == 0:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    time.sleep(0.5)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 20
    assert proc.returncode == 130
    deadline = time.monotonic() + 15
    while sandboxes_alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sandboxes_alive() == 0
    path = run_dir / "trajectories.jsonl"
    assert not path.exists() or read_records(path, Trajectory) == []


def test_show_renders_tasks_as_markdown(tmp_path):
    from pathlib import Path

    out = tmp_path / "tasks.md"
    REPO = Path(__file__).resolve().parents[1]
    r = cli("show", REPO / "examples" / "tasks.jsonl", "--limit", "2", "-o", out)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.count("\n### ") + text.startswith("### ") == 2
    assert "**Request**" in text and "**Reference solution**" in text


def test_cli_modules_import_alone():
    """Every module of clawgym.cli imports on its own in a fresh interpreter, and none but the app loads the app:
    no import cycles between the command modules."""
    import pkgutil

    import clawgym.cli

    names = sorted(m.name for m in pkgutil.iter_modules(clawgym.cli.__path__))
    assert {"app", "common", "options", "synth_cmd", "skills_cmd"} <= set(names)
    for name in names:
        check = f"import sys, clawgym.cli.{name}; assert {name!r} == 'app' or 'clawgym.cli.app' not in sys.modules"
        r = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"clawgym.cli.{name}: {r.stderr}"
