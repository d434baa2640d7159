"""Agent kinds as plug-ins: a third-party distribution (made on the fly, tests/plugin_dist.py) declares two agent
kinds in the `clawgym.agents` entry point group, nothing in clawgym edited or imported for them, and
`clawgym rollout --agent NAME` runs them for real in bwrap sandboxes on the example tasks, where they score.

`replayer` is a SimpleKind: a scripted agent that replays the task's reference steps through clawgym's tools,
with a setting of its own (`max_steps`). `mounted-replay` brings a session: it writes each task's steps to a host
directory and mounts it read-only into every sandbox, where its agent reads them with a command."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawgym.agent import get_agent
from clawgym.agent.kind import AGENT_KINDS, AgentSpec, agent_kinds, get_kind
from clawgym.agent.recipe import AgentRecipe
from clawgym.core.jsonl import read_records
from clawgym.core.records import Task, Trajectory
from clawgym.rollout import RolloutOptions, run_rollout

# imported before install_dist copies sys.modules (a module first imported under the copy is not the one pickle
# and the import machinery find afterwards)
from clawgym.rollout import executor as _executor  # noqa: F401
from clawgym.rollout.setup import agent_session
from plugin_dist import install_dist

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "tasks.jsonl"
DIST = "cgtest_agents"

KINDS = '''
"""A third party's agent kinds (tests/test_agent_plugins.py)."""

from __future__ import annotations

import json
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from clawgym.agent import AgentOutcome, ToolExecutor, TranscriptBuilder
from clawgym.agent.kind import AgentKind, AgentSession, SimpleKind
from clawgym.rollout.recipe import AgentRecipe
from clawgym.sandbox.base import Mount

REPLAY_MOUNT = "/replay"


@dataclass(frozen=True)
class ReplaySettings:
    max_steps: int | None = None  # replay only the first N reference steps


class Replayer:
    """Replays the task's reference steps through clawgym's tools: given, or read inside the sandbox."""

    def __init__(self, settings: ReplaySettings = ReplaySettings(), name: str = "replayer",
                 from_mount: bool = False) -> None:
        self.settings, self.name, self.from_mount = settings, name, from_mount

    def run(self, task, sandbox, ctx):
        tb = TranscriptBuilder(cwd=sandbox.mount_dir)
        tb.user(task.instruction)
        if self.from_mount:
            res = sandbox.exec(f"cat {REPLAY_MOUNT}/{task.id}.json")
            if res.exit_code != 0:
                return AgentOutcome(transcript=tb.events, status="agent_error", error_kind="no_steps",
                                    error=res.stderr)
            steps = json.loads(res.stdout)
        else:
            steps = [{"name": s.name, "arguments": s.arguments} for s in task.reference.steps]
        tools = ToolExecutor(sandbox, max_observation=ctx.max_observation, exec_timeout=ctx.exec_timeout)
        steps = steps[: self.settings.max_steps]
        for i, step in enumerate(steps):
            tb.assistant(tool_calls=[(f"call_{i}", step["name"], step["arguments"])])
            outcome = tools.call(step["name"], step["arguments"])
            tb.tool_result(f"call_{i}", step["name"], outcome.text, outcome.is_error)
        final = task.reference.final_message
        tb.assistant(final)
        for s in task.sessions:
            tb.user(s.prompt)
            tb.assistant(final)
        return AgentOutcome(transcript=tb.events, final_message=final, tool_calls=len(steps))


class ReplayKind(SimpleKind):
    settings = ReplaySettings
    agent_class = Replayer


class MountedReplayKind(AgentKind):
    """Brings a session: the steps of every task in a host directory, mounted read-only into each sandbox."""

    settings = ReplaySettings

    @contextmanager
    def session(self, spec, run_dir, tasks, options, announce=None):
        own = self.settings_of(spec)
        steps_dir = Path(tempfile.mkdtemp(prefix="replay-"))
        try:
            for t in tasks:
                steps = [{"name": s.name, "arguments": s.arguments} for s in t.reference.steps]
                (steps_dir / f"{t.id}.json").write_text(json.dumps(steps))
            steps_dir.chmod(0o755)
            options.mounts = [Mount(target=REPLAY_MOUNT, source=steps_dir)]
            yield AgentSession(lambda: Replayer(own, name=self.name, from_mount=True),
                               settings={"replay_max_steps": own.max_steps})
        finally:
            shutil.rmtree(steps_dir, ignore_errors=True)


NOT_A_KIND = object()
'''


@pytest.fixture
def third_party(tmp_path_factory, monkeypatch) -> Iterator[Path]:
    site = tmp_path_factory.mktemp("site")
    names = {"replayer": "ReplayKind", "mounted-replay": "MountedReplayKind", "not-a-kind": "NOT_A_KIND"}
    yield install_dist(site, monkeypatch, "cgtest-agents", {f"{DIST}.kinds": KINDS},
                       {"clawgym.agents": {n: f"{DIST}.kinds:{attr}" for n, attr in names.items()}})
    for name in names:  # what this process loaded goes with the distribution
        AGENT_KINDS.remove(name)


def _clawgym(site: Path, *args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(site), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "clawgym", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200"})


def test_built_in_kinds_and_their_errors():
    assert {"llm", "noop", "openclaw", "oracle"} <= set(agent_kinds())
    assert get_kind("openclaw").settings_of(AgentSpec(name="openclaw", settings={"budget_steps": 3})).budget_steps == 3
    with pytest.raises(TypeError, match="has no setting bogus"):
        get_kind("openclaw").settings_of(AgentSpec(name="openclaw", settings={"bogus": 1}))
    with pytest.raises(ValueError, match="unknown agent 'nope'; choose from llm, noop, openclaw, oracle"):
        get_kind("nope")
    with pytest.raises(ValueError, match="runs in a session"):
        get_agent("llm")
    missing = get_kind("openclaw").node_check({"version": "0.0.0-not-installed"})  # a cluster node's check
    assert missing["ok"] is False and "is not installed on this node" in missing["check"]
    assert get_kind("noop").node_check({}) == {"ok": True, "check": "ok"}
    with pytest.raises(TypeError, match="positional"):
        AgentSpec("oracle")  # type: ignore[misc]  # keyword-only: no 12 positional arguments


def test_third_party_kinds_are_found_through_their_entry_points(third_party):
    assert {"replayer", "mounted-replay"} <= set(agent_kinds())
    assert DIST not in sys.modules  # listing names loads nothing
    kind = get_kind("replayer")
    assert type(kind).__module__ == f"{DIST}.kinds" and kind.name == "replayer"
    assert get_agent("replayer").name == "replayer"  # a SimpleKind needs no session
    options = RolloutOptions()
    with agent_session(AgentSpec(name="replayer", settings={"max_steps": 2}), Path("unused"), [], options):
        pass
    recipe = pickle.loads(pickle.dumps(options.recipe))  # what a remote worker gets, and builds the agent from
    assert isinstance(recipe, AgentRecipe) and recipe.name == "replayer" and recipe.settings == {"max_steps": 2}
    assert recipe.build().settings.max_steps == 2 and recipe.mounts() == []
    with pytest.raises(TypeError, match="must be an AgentKind subclass"):
        get_kind("not-a-kind")


def test_rollout_cli_runs_a_third_party_agent_kind(third_party, bwrap_backend, tmp_path):
    run = tmp_path / "run"
    r = _clawgym(third_party, "rollout", str(EXAMPLES), "--agent", "replayer", "--sandbox", "bwrap", "-j", "2",
                 "-o", str(run))
    assert r.returncode == 0, r.stderr
    trajs = list(read_records(run / "trajectories.jsonl", Trajectory))
    assert len(trajs) == len(list(read_records(EXAMPLES, Task))) >= 8
    for t in trajs:
        assert t.agent == "replayer" and t.sandbox == "bwrap" and t.status == "completed", (t.task_id, t.error)
        assert t.verdict.status == "scored" and t.verdict.score == 1.0, (t.task_id, t.verdict)
    assert json.loads((run / "run.json").read_text())["agent"] == "replayer"
    bad = _clawgym(third_party, "rollout", str(EXAMPLES), "--agent", "nope", "-o", str(tmp_path / "x"))
    assert bad.returncode == 2
    assert "unknown agent 'nope'; choose from llm, mounted-replay, noop, not-a-kind, openclaw, oracle, replayer" \
        in bad.stderr


def test_a_kind_brings_its_session_mounts_and_settings(third_party, bwrap_backend, tmp_path):
    tasks = list(read_records(EXAMPLES, Task))[:3]
    scores = {}
    for max_steps in (None, 0):  # its own setting: 0 replays nothing, and the verifier must give 0
        spec = AgentSpec(name="mounted-replay", settings={"max_steps": max_steps})
        options = RolloutOptions(jobs=3)
        run = tmp_path / f"run-{max_steps}"
        with agent_session(spec, run, tasks, options) as session:
            assert [m.target for m in options.mounts] == ["/replay"] and options.recipe is None
            report = run_rollout(tasks, session.factory, bwrap_backend, run, options, settings=session.settings)
        assert all(t.status == "completed" and t.agent == "mounted-replay" for t in report.ran), \
            [(t.task_id, t.error) for t in report.ran]
        scores[max_steps] = [t.verdict.score for t in report.ran]
        assert json.loads((run / "run.json").read_text())["replay_max_steps"] == max_steps
    assert scores == {None: [1.0] * 3, 0: [0.0] * 3}
