"""The sandbox protocol and the backend registry (issue #19), on real parts: a third-party backend shipped as
its own distribution (a package and its dist-info with an entry point, put on sys.path; nothing in clawgym
edited or imported for it), found by name, and real oracle rollouts of the example tasks through it.

The third-party sandbox relays every protocol method to a bwrap sandbox and exposes nothing else (no host
workspace, no control directory path), so any part of clawgym that still reached for a host path would fail
here instead of working by accident."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from clawgym.agent import get_agent
from clawgym.agent.base import EpisodeContext
from clawgym.agent.baselines import OracleAgent
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task
from clawgym.rollout import RolloutOptions, run_rollout
from clawgym.sandbox import (
    ENTRY_POINT_GROUP,
    SandboxBackend,
    UnknownBackend,
    backend_names,
    check_backends,
    get_backend,
    register_backend,
)
from clawgym.sandbox.registry import unregister_backend
from conftest import REPO

EXAMPLES = REPO / "examples" / "tasks.jsonl"
DIST = "clawgym_thirdparty_sandbox"

THIRD_PARTY = '''
"""A sandbox backend from another distribution: it knows clawgym only through its public protocol."""

from clawgym.sandbox import Sandbox, SandboxBackend
from clawgym.sandbox.bwrap import BwrapBackend

CALLS = []  # protocol methods clawgym called, in order


class RelaySandbox(Sandbox):
    """Every protocol method relayed to a bwrap sandbox; nothing else."""

    backend = "thirdparty"

    def __init__(self, inner):
        super().__init__(inner.mount_dir, inner.limits)
        self.__inner = inner  # name-mangled: not an attribute clawgym could stumble on

    def _relay(self, name, *args, **kwargs):
        CALLS.append(name)
        return getattr(self.__inner, name)(*args, **kwargs)

    @property
    def workdir(self):
        return self.__inner.workdir

    def exec(self, command, **kw):
        return self._relay("exec", command, **kw)

    def kill_processes(self):
        return self._relay("kill_processes")

    def stop(self):
        self._stopped = True
        return self._relay("stop")

    def read_file(self, path, *, max_bytes=None):
        return self._relay("read_file", path, max_bytes=max_bytes)

    def write_file(self, path, data, mode=None):
        return self._relay("write_file", path, data, mode)

    def stat(self, path):
        return self._relay("stat", path)

    def list_dir(self, path="."):
        return self._relay("list_dir", path)

    def copy_in(self, files, *, assets_dir=None, empty_dirs=()):
        return self._relay("copy_in", files, assets_dir=assets_dir, empty_dirs=empty_dirs)

    def import_tree(self, src, dest="."):
        return self._relay("import_tree", src, dest)

    def clear_workspace(self):
        return self._relay("clear_workspace")

    def snapshot(self, dest, max_bytes=None):
        return self._relay("snapshot", dest, max_bytes)

    def write_control_file(self, name, data):
        return self._relay("write_control_file", name, data)

    # snapshot_archive and take_workspace: the protocol's defaults, built on snapshot and clear_workspace


class ThirdPartyBackend(SandboxBackend):
    def __init__(self):
        self._inner = BwrapBackend()

    def check(self):
        ok, why = self._inner.check()
        return ok, "relays to bwrap: " + why

    def start(self, workspace, **kwargs):
        return RelaySandbox(self._inner.start(workspace, **kwargs))
'''


@pytest.fixture
def third_party(tmp_path, monkeypatch):
    """A distribution declaring `thirdparty = clawgym_thirdparty_sandbox:ThirdPartyBackend` in the
    clawgym.sandbox_backends entry point group, on sys.path (its directory is returned)."""
    site = tmp_path / "site"
    (site / DIST).mkdir(parents=True)
    (site / DIST / "__init__.py").write_text(THIRD_PARTY)
    info = site / f"{DIST}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clawgym-thirdparty-sandbox\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nthirdparty = {DIST}:ThirdPartyBackend\n")
    monkeypatch.syspath_prepend(str(site))
    yield site
    unregister_backend("thirdparty")
    sys.modules.pop(DIST, None)


# ============================================================================================ registry


def test_unknown_backend_names_the_registered_ones():
    with pytest.raises(UnknownBackend, match=r"unknown sandbox backend 'vm'; registered: auto, bwrap, docker, local"):
        get_backend("vm")
    with pytest.raises(ValueError):  # a usage error, as the CLI reports it (exit code 2)
        get_backend("vm")


def test_a_decorated_backend_is_found_by_name_and_never_chosen_by_auto_unless_it_says_so():
    @register_backend("deco-test")
    class DecoBackend(SandboxBackend):
        def check(self):
            return True, "always"

        def start(self, workspace, **kwargs):
            raise AssertionError("not started here")

    try:
        assert DecoBackend.name == "deco-test" and "deco-test" in backend_names()
        assert isinstance(get_backend("deco-test"), DecoBackend)
        assert check_backends()["deco-test"] == (True, "always")
        assert get_backend("auto").name in ("bwrap", "docker")  # no auto_priority: not a candidate
    finally:
        unregister_backend("deco-test")
    assert "deco-test" not in backend_names()


@pytest.mark.parametrize("bad", ["", "auto", "two words", "a/b"])
def test_bad_backend_names_are_refused(bad):
    with pytest.raises(ValueError, match="bad sandbox backend name"):
        register_backend(bad)


def test_auto_never_picks_the_unisolated_local_backend(monkeypatch):
    from clawgym.sandbox import registry

    monkeypatch.setattr(registry, "_auto_candidates", lambda: [])
    with pytest.raises(registry.SandboxUnavailable, match="pass --sandbox local to run WITHOUT isolation"):
        get_backend("auto")
    assert get_backend("local").isolated is False and get_backend("local").auto_priority is None


# ============================================================================================ third party


def test_third_party_backend_is_found_through_its_entry_point(third_party, bwrap_backend):
    assert DIST not in sys.modules  # listing names loads nothing
    assert "thirdparty" in backend_names() and DIST not in sys.modules
    backend = get_backend("thirdparty")
    assert type(backend).__module__ == DIST and backend.name == "thirdparty"
    ok, why = check_backends()["thirdparty"]
    assert ok and why.startswith("relays to bwrap")


def test_sandbox_check_lists_the_third_party_backend(third_party, bwrap_backend):
    path = os.pathsep.join([str(third_party), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-m", "clawgym", "sandbox", "check"], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if "thirdparty" in line)
    assert "yes" in row and "relays to bwrap" in row


def test_oracle_rollout_through_a_third_party_backend_scores_1(third_party, bwrap_backend, tmp_path):
    tasks = list(read_records(EXAMPLES, Task))
    backend = get_backend("thirdparty")
    report = run_rollout(tasks, lambda: get_agent("oracle"), backend, tmp_path / "run", RolloutOptions(jobs=2))
    assert len(report.ran) == len(tasks) >= 8
    for t in report.ran:
        assert t.sandbox == "thirdparty" and t.status == "completed", (t.task_id, t.error)
        assert t.verdict.status == "scored" and t.verdict.score == 1.0, (t.task_id, t.verdict)
        assert (tmp_path / "run" / t.workspace_snapshot).stat().st_size > 0  # the protocol's default archive
    calls = set(sys.modules[DIST].CALLS)
    assert {"exec", "write_file", "read_file", "kill_processes", "snapshot", "write_control_file"} <= calls
    noop = run_rollout(tasks, lambda: get_agent("noop"), backend, tmp_path / "noop", RolloutOptions(jobs=2))
    assert all(t.verdict.status == "scored" and t.verdict.score == 0.0 for t in noop.ran)


def test_judge_and_shell_checker_through_a_third_party_sandbox(third_party, bwrap_backend, tmp_path):
    """The judge reads its evidence through the protocol (a link to a host file is refused there too), and a
    shell checker is copied in over what the agent left."""
    from clawgym.verify import Judge, verify_with_judge
    from scripted_llm import ScriptedLLM
    from test_judge import client_for, note_task
    from test_security_sandbox import shell_task, verify_in_thread

    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    backend = get_backend("thirdparty")
    task = note_task(rubric={"rules": [{"name": "polite", "description": "d", "file_path": "note.txt"},
                                       {"name": "planted", "description": "d", "file_path": "host.txt"},
                                       {"name": "folder", "description": "d", "file_path": "notes"}]})
    with ScriptedLLM(responder=lambda b: '{"score": 1}') as llm, backend.start(task.workspace) as sb:
        ctx = EpisodeContext(deadline=float("inf"))
        assert OracleAgent().run(task, sb, ctx).status == "completed"
        assert sb.exec(f"ln -s {secret} host.txt && mkdir notes && echo hi > notes/a.txt "
                       f"&& ln -s {secret} notes/b.txt && mkfifo notes/c").ok
        v = verify_with_judge(task, sb, [], "done", Judge(client_for(llm)))
        rules = {r.name: r for r in Judge(client_for(llm)).judge(task, sb, [], "").rules}
        sent = "".join(str(b) for b in llm.requests)
    assert v.status == "scored" and v.checks["exists"] == 1.0 and v.checks["rubric:polite"] == 1.0
    assert "leads outside the workspace" in rules["planted"].note and "TOP SECRET" not in sent
    assert "--- a.txt ---" in sent and "b.txt" not in sent
    shell = shell_task(steps=[{"name": "write", "arguments": {"path": "out.txt", "content": "42\n"}}])
    with backend.start(shell.workspace) as sb:
        assert sb.exec("mkdir -p reward && ln -s /etc/passwd reward/check.py").ok
        assert OracleAgent().run(shell, sb, EpisodeContext(deadline=float("inf"))).status == "completed"
        sb.kill_processes()
        assert verify_in_thread(shell, sb).score == 1.0

