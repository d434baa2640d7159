"""Baseline agents: `noop` does nothing (a verifier must score it 0), `oracle` replays the reference solution
(a verifier must score it 1). Together they check a task's verifier before any model is involved."""

from __future__ import annotations

import time

from clawgym.agent.base import Agent, AgentOutcome, EpisodeContext
from clawgym.agent.kind import SimpleKind, get_kind
from clawgym.agent.tools import ToolExecutor
from clawgym.agent.transcript import TranscriptBuilder
from clawgym.core.records import Task
from clawgym.sandbox.base import Sandbox


def _user_turns(task: Task) -> list[str]:
    return [task.instruction] + [s.prompt for s in task.sessions]


class NoopAgent:
    """Reads the request and answers nothing."""

    name = "noop"

    def run(self, task: Task, sandbox: Sandbox, ctx: EpisodeContext) -> AgentOutcome:
        tb = TranscriptBuilder(cwd=sandbox.mount_dir)
        for prompt in _user_turns(task):
            tb.user(prompt)
        return AgentOutcome(transcript=tb.events)


class OracleAgent:
    """Replays the task's reference solution through the same tools the LLM agent uses."""

    name = "oracle"

    def run(self, task: Task, sandbox: Sandbox, ctx: EpisodeContext) -> AgentOutcome:
        tb = TranscriptBuilder(cwd=sandbox.mount_dir)
        turns = _user_turns(task)
        tb.user(turns[0])
        if task.reference is None:
            return AgentOutcome(
                transcript=tb.events, status="skipped", error_kind="no_reference",
                error="the task has no reference solution to replay",
            )
        tools = ToolExecutor(sandbox, max_observation=ctx.max_observation, exec_timeout=ctx.exec_timeout)
        calls = errors = 0
        steps: list[dict] = []
        for i, step in enumerate(task.reference.steps):
            if time.monotonic() > ctx.deadline:
                return AgentOutcome(
                    transcript=tb.events, status="timeout", error_kind="episode_timeout",
                    error=f"episode time limit reached after {i} of {len(task.reference.steps)} steps",
                    tool_calls=calls, tool_errors=errors, steps=steps,
                )
            call_id = f"call_{i + 1}"
            tb.assistant(tool_calls=[(call_id, step.name, step.arguments)])
            t0 = time.monotonic()
            outcome = tools.call(step.name, step.arguments)
            steps.append({"tool": step.name, "tool_s": round(time.monotonic() - t0, 6), "is_error": outcome.is_error})
            calls += 1
            errors += outcome.is_error
            tb.tool_result(call_id, step.name, outcome.text, outcome.is_error)
        final = task.reference.final_message
        tb.assistant(final)
        for prompt in turns[1:]:  # multi-session: the reference's final message answers the last turn
            tb.user(prompt)
        if len(turns) > 1:
            tb.assistant(final)
        return AgentOutcome(transcript=tb.events, final_message=final, tool_calls=calls, tool_errors=errors, steps=steps)


class NoopKind(SimpleKind):
    name = "noop"
    agent_class = NoopAgent


class OracleKind(SimpleKind):
    name = "oracle"
    agent_class = OracleAgent


AGENTS = {"noop": NoopAgent, "oracle": OracleAgent}


def get_agent(name: str) -> Agent:
    """A fresh agent of a kind that needs no session (noop, oracle, a third-party SimpleKind), with its default
    settings; a model-driven kind is opened with clawgym.rollout.setup.agent_session."""
    kind = get_kind(name)
    if not isinstance(kind, SimpleKind):
        raise ValueError(f"agent {name!r} runs in a session (clawgym.rollout.setup.agent_session)")
    return kind.make_agent(kind.settings())
