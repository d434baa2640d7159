"""The built-in LLM agent: OpenAI chat completions with native `tools`, the tools run in the episode's sandbox.

The loop: send the conversation, run every tool call the model makes (in order) and append the results, until
the model answers without a tool call. Malformed calls (arguments that are not JSON, an unknown tool, a missing
argument) become error observations the model can recover from, and are counted. Limits: turns, completion
tokens per call, total tokens, the episode's wall time, observation size.

Multi-session tasks (PinchBench `sessions`): after the model's final answer, the next session's prompt is sent;
a session with `new_session` starts from a fresh conversation. The transcript keeps every turn of every session.

Endpoint failures that survive the client's retries make the episode an infrastructure error (retried by the
rollout, never scored); exhausting a limit or overflowing the context is the model's failure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clawgym.agent.base import AgentOutcome, EpisodeContext
from clawgym.agent.tools import ToolExecutor
from clawgym.agent.transcript import TranscriptBuilder
from clawgym.core.records import Task
from clawgym.llm.client import LLMClient, LLMError
from clawgym.sandbox.base import Sandbox, SandboxError

SYSTEM_PROMPT = (
    "You are a personal assistant agent working for the user in their workspace, the directory {workdir}. "
    "Do the task by calling the tools: ls to list a directory, read to read a file, write to create or overwrite "
    "a file, edit to replace exact text in a file, exec to run a shell command (python3, git, sed, ... are "
    "available; there is no network). Paths are relative to the workspace. Check your work. When the task is "
    "done, reply with a short summary of what you did, without calling a tool."
)


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }}


# OpenClaw's tool names and argument names, so trajectories look like OpenClaw's and train the same habits.
TOOL_SCHEMAS: list[dict[str, Any]] = [
    _fn("read", "Read a text file of the workspace. Optional 1-based line offset and line limit.", {
        "path": {"type": "string", "description": "File path, relative to the workspace."},
        "offset": {"type": "integer", "description": "First line to read (1-based)."},
        "limit": {"type": "integer", "description": "Maximum number of lines."},
    }, ["path"]),
    _fn("write", "Create or overwrite a file with the given content.", {
        "path": {"type": "string"}, "content": {"type": "string"},
    }, ["path", "content"]),
    _fn("edit", "Replace exact text in a file: oldText must occur exactly once.", {
        "path": {"type": "string"}, "oldText": {"type": "string"}, "newText": {"type": "string"},
    }, ["path", "oldText", "newText"]),
    _fn("exec", "Run a shell command in the workspace and return its output and exit code.", {
        "command": {"type": "string"},
        "workdir": {"type": "string", "description": "Directory to run in, relative to the workspace."},
        "timeout": {"type": "number", "description": "Seconds before the command is killed."},
    }, ["command"]),
    _fn("ls", "List a directory of the workspace.", {
        "path": {"type": "string", "description": "Directory, relative to the workspace (default: the root)."},
    }, []),
]


@dataclass
class AgentLimits:
    max_turns: int = 30  # model calls per session
    max_completion_tokens: int = 1024  # per call
    max_total_tokens: int | None = None  # prompt + completion over the episode
    max_observation: int = 20_000  # characters of one tool result
    temperature: float = 0.0
    top_p: float | None = None


class LLMAgent:
    name = "llm"

    def __init__(self, client: LLMClient, limits: AgentLimits | None = None, system_prompt: str = SYSTEM_PROMPT,
                 tools: list[dict[str, Any]] | None = None, seed: int | None = None,
                 route: Callable[[Task, EpisodeContext], str] | None = None, route_secret: str | None = None):
        """`route(task, ctx)`, when given, is the base URL of the episode's model calls (e.g. the gateway's
        per-trajectory URL, so every call is recorded under the episode). `route_secret`: the rollout gateway's
        secret; each call then carries its route's key (clawgym.gateway.route_key) as its bearer token, so the
        gateway takes it on that trajectory's route and nowhere else."""
        self.client = client
        self.route = route
        self.route_secret = route_secret
        self.limits = limits or AgentLimits()
        self.system_prompt = system_prompt
        self.tools = tools or TOOL_SCHEMAS
        self.seed = seed

    def _params(self, ctx: EpisodeContext) -> dict[str, Any]:
        p: dict[str, Any] = {"max_tokens": self.limits.max_completion_tokens, "temperature": self.limits.temperature}
        if self.limits.top_p is not None:
            p["top_p"] = self.limits.top_p
        if self.seed is not None:
            p["seed"] = self.seed + ctx.sample
        return p

    def _route_auth(self, base_url: str) -> dict[str, Any]:
        """The chat() argument that sends the key of the route `base_url` instead of the client's API key."""
        if self.route_secret is None:
            return {}
        from clawgym.gateway.routes import route_key

        return {"extra_headers": {"Authorization": f"Bearer {route_key(self.route_secret, base_url)}"}}

    def run(self, task: Task, sandbox: Sandbox, ctx: EpisodeContext) -> AgentOutcome:
        client = self.client.routed(self.route(task, ctx)) if self.route else self.client
        auth = self._route_auth(client.base_url) if self.route else {}
        tb = TranscriptBuilder(cwd=sandbox.mount_dir)
        tools = ToolExecutor(sandbox, max_observation=min(ctx.max_observation, self.limits.max_observation),
                             exec_timeout=ctx.exec_timeout)
        system = {"role": "system", "content": self.system_prompt.format(workdir=sandbox.mount_dir)}
        prompts = [(task.instruction, False)] + [(s.prompt, s.new_session) for s in task.sessions]
        messages: list[dict[str, Any]] = [system]
        all_messages: list[dict[str, Any]] = [system]  # every session's messages, for training data
        steps: list[dict[str, Any]] = []
        state = {"calls": 0, "errors": 0, "malformed": 0, "prompt": 0, "completion": 0}
        final = ""
        model_name = self.client.model

        def outcome(status: str = "completed", kind: str | None = None, error: str | None = None) -> AgentOutcome:
            return AgentOutcome(
                transcript=tb.events, final_message=final, status=status, error_kind=kind, error=error,
                tool_calls=state["calls"], tool_errors=state["errors"], model=model_name,
                messages=all_messages, tools=self.tools, steps=steps,
                usage={"prompt_tokens": state["prompt"], "completion_tokens": state["completion"],
                       "total_tokens": state["prompt"] + state["completion"], "model_calls": len(steps)},
                metadata={"malformed_tool_calls": state["malformed"]},
            )

        for session_index, (prompt, fresh) in enumerate(prompts):
            if fresh:
                messages = [system]
            user = {"role": "user", "content": prompt}
            messages.append(user)
            all_messages.append(user)
            tb.user(prompt)
            for turn in range(self.limits.max_turns + 1):
                if turn == self.limits.max_turns:
                    return outcome("agent_error", "max_turns",
                                   f"no final answer after {self.limits.max_turns} model calls in session {session_index + 1}")
                if ctx.time_left() <= 0:
                    return outcome("timeout", "episode_timeout", "the episode's wall-time limit was reached")
                t0 = time.monotonic()
                try:
                    res = client.chat(messages, self.tools, deadline=ctx.deadline, **auth, **self._params(ctx))
                except LLMError as exc:
                    if exc.kind == "deadline":
                        return outcome("timeout", "episode_timeout", str(exc))
                    if exc.status == 400:  # the request was refused: context overflow or similar
                        return outcome("agent_error", "model_request_refused", str(exc))
                    return outcome("infra_error", f"llm_{exc.kind}", str(exc))
                model_name = res.model or model_name
                state["prompt"] += res.usage.get("prompt_tokens", 0)
                state["completion"] += res.usage.get("completion_tokens", 0)
                step = {
                    "session": session_index, "turn": turn, "latency_s": round(res.latency_s, 4),
                    "attempts": res.attempts, "finish_reason": res.finish_reason, "usage": res.usage,
                    "tool_calls": len(res.tool_calls),
                }
                if res.prompt_token_ids is not None:
                    step["prompt_token_ids"] = res.prompt_token_ids
                if res.token_ids is not None:
                    step["token_ids"] = res.token_ids
                steps.append(step)
                msg = res.message()
                messages.append(msg)
                all_messages.append(msg)
                parsed_calls = []
                for tc in res.tool_calls:
                    fn = tc.get("function") or {}
                    parsed_calls.append((tc.get("id") or f"call_{state['calls']}", fn.get("name") or "",
                                         fn.get("arguments")))
                tb.assistant(
                    res.content, [(cid, name, _args_for_transcript(raw)) for cid, name, raw in parsed_calls],
                    model=model_name, usage=res.usage, thinking=res.reasoning,
                    stop_reason="toolUse" if parsed_calls else ("length" if res.finish_reason == "length" else "stop"),
                )
                if not parsed_calls:
                    final = res.content
                    break
                t_tools = time.monotonic()
                for cid, name, raw in parsed_calls:
                    try:
                        text, is_error, malformed = self._run_tool(tools, name, raw)
                    except SandboxError as exc:  # the runner decides whose fault it is; the steps are kept
                        return outcome("sandbox_lost", "sandbox_lost", str(exc))
                    state["calls"] += 1
                    state["errors"] += is_error
                    state["malformed"] += malformed
                    tool_msg = {"role": "tool", "tool_call_id": cid, "content": text}
                    messages.append(tool_msg)
                    all_messages.append(tool_msg)
                    tb.tool_result(cid, name, text, is_error)
                step["tool_s"] = round(time.monotonic() - t_tools, 4)
                step["model_s"] = round(t_tools - t0, 4)
                total = state["prompt"] + state["completion"]
                if self.limits.max_total_tokens and total >= self.limits.max_total_tokens:
                    return outcome("agent_error", "max_total_tokens",
                                   f"the episode used {total} tokens (limit {self.limits.max_total_tokens})")
        return outcome()

    @staticmethod
    def _run_tool(tools: ToolExecutor, name: str, raw: Any) -> tuple[str, bool, bool]:
        """(observation, is_error, malformed) for one tool call as the model wrote it."""
        if isinstance(raw, dict):
            args = raw
        else:
            text = raw if isinstance(raw, str) else ""
            try:
                args = json.loads(text) if text.strip() else {}
            except json.JSONDecodeError as exc:
                return (f"Error: the arguments of '{name}' are not valid JSON ({exc.msg} at character {exc.pos}); "
                        f"send a JSON object, e.g. {{\"path\": \"notes.txt\"}}", True, True)
        outcome = tools.call(name, args)
        return outcome.text, outcome.is_error, outcome.malformed


def _args_for_transcript(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        obj = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except json.JSONDecodeError:
        return {"_raw": raw}
    return obj if isinstance(obj, dict) else {"_raw": raw}
