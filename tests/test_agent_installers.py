"""Agent kinds bring their installers: `clawgym agents install NAME` runs the installer of any registered kind
that has one (`AgentKind.installer`), and `clawgym agents check` reports every installable kind.

A third-party distribution (made on the fly, tests/plugin_dist.py; nothing in clawgym edited for it) declares
`toy-runtime`, a kind whose installer puts a small runtime (a shell script) in a directory and checks it by
running it; `plain` has nothing to install; `not-a-kind` is a broken entry. OpenClaw's installer sits behind the
same hook, its messages unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawgym.agent.kind import AGENT_KINDS, get_installer, installable_kinds
from clawgym.agent.openclaw.install import DEFAULT_VERSION, OpenClawInstaller, check
from clawgym.core.registry import UnknownPlugin
from plugin_dist import install_dist

REPO = Path(__file__).resolve().parents[1]
DIST = "cgtest_installers"

KINDS = '''
"""A third party's agent kinds, one with a runtime to install (tests/test_agent_installers.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from clawgym.agent import NoopAgent
from clawgym.agent.kind import AgentInstaller, InstallCheck, SimpleKind
from clawgym.core.errors import ClawgymError

PINNED = "1.2.0"
VERSIONS = ("1.2.0", "1.3.0")


def runtime_home() -> Path:
    return Path(os.environ["CGTEST_RUNTIME_HOME"])


class ToyInstaller(AgentInstaller):
    """Installs toy-runtime VERSION as RUNTIME_HOME/VERSION/run.sh, with what the install was asked in
    install.json."""

    def install(self, version=None, *, force=False, offline=False, npm_cache=None, progress=None):
        version = version or PINNED
        if version not in VERSIONS:
            raise ClawgymError(f"toy-runtime has no version {version} (there are {', '.join(VERSIONS)})")
        root = runtime_home() / version
        info = root / "install.json"
        if info.exists() and not force:
            return f"toy-runtime {version} is installed: {root}"
        if progress is not None:
            progress(f"installing toy-runtime {version} ...")
        installs = json.loads(info.read_text())["installs"] if info.exists() else 0
        root.mkdir(parents=True, exist_ok=True)
        (root / "run.sh").write_text(f"#!/bin/sh\\necho toy-runtime {version}\\n")
        info.write_text(json.dumps({"version": version, "offline": offline, "installs": installs + 1,
                                    "npm_cache": None if npm_cache is None else str(npm_cache)}))
        return f"installed toy-runtime {version}: {root}"

    def check(self):
        rows = []
        for info in sorted(runtime_home().glob("*/install.json")):
            version = json.loads(info.read_text())["version"]
            res = subprocess.run(["sh", str(info.parent / "run.sh")], capture_output=True, text=True, timeout=30)
            ok = res.returncode == 0 and res.stdout.strip() == f"toy-runtime {version}"
            rows.append({"part": f"toy-runtime {version}", "ok": ok, "version": version,
                         "details": str(info.parent) if ok else f"does not run: {res.stderr.strip()}"})
        ready = any(r["ok"] and r["version"] == PINNED for r in rows)
        if not any(r["version"] == PINNED for r in rows):
            rows.append({"part": f"toy-runtime {PINNED}", "ok": False, "version": "",
                         "details": "not installed: clawgym agents install toy-runtime"})
        return InstallCheck(rows, ready=ready)


class ToyKind(SimpleKind):
    agent_class = NoopAgent

    def installer(self):
        return ToyInstaller()


class PlainKind(SimpleKind):
    agent_class = NoopAgent


NOT_A_KIND = object()
'''


@pytest.fixture
def third_party(tmp_path_factory, monkeypatch) -> Iterator[Path]:
    site = tmp_path_factory.mktemp("site")
    names = {"toy-runtime": "ToyKind", "plain": "PlainKind", "not-a-kind": "NOT_A_KIND"}
    monkeypatch.setenv("CGTEST_RUNTIME_HOME", str(tmp_path_factory.mktemp("runtimes")))
    yield install_dist(site, monkeypatch, "cgtest-installers", {f"{DIST}.kinds": KINDS},
                       {"clawgym.agents": {n: f"{DIST}.kinds:{attr}" for n, attr in names.items()}})
    for name in names:  # what this process loaded goes with the distribution
        AGENT_KINDS.remove(name)


def _clawgym(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(site), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "clawgym", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200", **env})


def test_built_in_installers():
    assert installable_kinds() == ["openclaw"]  # noop, oracle, llm: nothing to install
    assert isinstance(get_installer("openclaw"), OpenClawInstaller)
    with pytest.raises(UnknownPlugin, match="^unknown agent 'nope'; installable: openclaw$"):
        get_installer("nope")
    with pytest.raises(UnknownPlugin, match="^agent 'llm' has nothing to install; installable: openclaw$"):
        get_installer("llm")


def test_openclaws_installer_behind_the_hook(tmp_path):
    """OpenClaw's check and install as the hook runs them, on an empty cache: the rows of its check, not ready;
    an offline install from an empty npm cache announces itself, then fails with npm's reason (one line of
    `agents install`, exit 1)."""
    inst = OpenClawInstaller(home=tmp_path / "home")
    got = inst.check()
    assert got.rows == check(tmp_path / "home") and not got.ready
    assert {"part": f"openclaw {DEFAULT_VERSION}", "ok": False, "version": "",
            "details": "not installed: clawgym agents install openclaw"} in got.rows
    r = _clawgym(tmp_path, "agents", "install", "openclaw", "--offline", "--npm-cache", str(tmp_path / "npm"),
                 CLAWGYM_HOME=str(tmp_path / "home"))
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"installing openclaw {DEFAULT_VERSION} (npm, about a minute the first time) ...\n"
                               f"error: npm install openclaw@{DEFAULT_VERSION} failed (offline: is the package in "
                               "npm's cache?):\n"), r.stderr
    assert not (tmp_path / "home" / "agents" / "openclaw" / DEFAULT_VERSION).exists()


def test_agents_install_runs_a_third_party_kinds_installer(third_party):
    home = Path(os.environ["CGTEST_RUNTIME_HOME"])
    r = _clawgym(third_party, "agents", "install", "toy-runtime")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"installed toy-runtime 1.2.0: {home / '1.2.0'}\n" and r.stderr == "installing toy-runtime 1.2.0 ...\n"
    run = subprocess.run(["sh", str(home / "1.2.0" / "run.sh")], capture_output=True, text=True, timeout=30)
    assert run.stdout == "toy-runtime 1.2.0\n"
    again = _clawgym(third_party, "agents", "install", "toy-runtime")
    assert again.returncode == 0 and again.stderr == ""
    assert again.stdout == f"toy-runtime 1.2.0 is installed: {home / '1.2.0'}\n"
    assert json.loads((home / "1.2.0" / "install.json").read_text())["installs"] == 1
    # the command's options reach the installer
    forced = _clawgym(third_party, "agents", "install", "toy-runtime", "--version", "1.2.0", "--force", "--offline",
                      "--npm-cache", str(home / "cache"))
    assert forced.returncode == 0, forced.stderr
    assert json.loads((home / "1.2.0" / "install.json").read_text()) == {
        "version": "1.2.0", "offline": True, "installs": 2, "npm_cache": str(home / "cache")}
    # its errors, and the kinds that have nothing to install
    bad = _clawgym(third_party, "agents", "install", "toy-runtime", "--version", "9.9")
    assert (bad.returncode, bad.stderr) == (1, "error: toy-runtime has no version 9.9 (there are 1.2.0, 1.3.0)\n")
    for name, message in (("nope", "unknown agent 'nope'"), ("plain", "agent 'plain' has nothing to install"),
                          ("noop", "agent 'noop' has nothing to install")):
        r = _clawgym(third_party, "agents", "install", name)
        assert (r.returncode, r.stderr) == (2, f"error: {message}; installable: openclaw, toy-runtime\n"), r.stderr
    broken = _clawgym(third_party, "agents", "install", "not-a-kind")
    assert broken.returncode == 1 and "must be an AgentKind subclass" in broken.stderr


def test_agents_check_reports_every_installable_kind(third_party):
    home = Path(os.environ["CGTEST_RUNTIME_HOME"])
    openclaw = get_installer("openclaw").check()
    before = _clawgym(third_party, "agents", "check", "--json")
    assert before.returncode == 1  # toy-runtime's pinned version is missing
    assert json.loads(before.stdout) == openclaw.rows + [
        {"part": "toy-runtime 1.2.0", "ok": False, "version": "",
         "details": "not installed: clawgym agents install toy-runtime"}]
    assert _clawgym(third_party, "agents", "install", "toy-runtime").returncode == 0
    after = _clawgym(third_party, "agents", "check", "--json")
    assert json.loads(after.stdout) == openclaw.rows + [
        {"part": "toy-runtime 1.2.0", "ok": True, "version": "1.2.0", "details": str(home / "1.2.0")}]
    assert after.returncode == (0 if openclaw.ready else 1)  # ready when every installable kind is
    (home / "1.2.0" / "run.sh").write_text("exit 3\n")  # a runtime that no longer runs
    broken = _clawgym(third_party, "agents", "check")
    assert broken.returncode == 1 and "toy-runtime 1.2.0" in broken.stdout and "does not run" in broken.stdout
