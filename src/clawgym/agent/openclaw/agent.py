"""The OpenClaw agent: the real OpenClaw runtime, unmodified, run headless inside the episode's sandbox.

Per episode: write `openclaw.json` (its provider = the gateway route of this trajectory, through the in-sandbox
relay) and the prompt into the sandbox's state mount, run `openclaw agent exec` once per user turn of the task
(PinchBench multi-session tasks: one OpenClaw session per prompt, each a fresh session, as `agent exec` runs
one isolated session), then read OpenClaw's own transcript from its SQLite state and join the gateway's step
records of this trajectory to it.

Statuses: OpenClaw's exit 0 is `completed`; its exit 2, or the episode's wall time running out, `timeout`; a
call refused by the gateway's budget ends the episode as `agent_error` (`budget_steps`, `budget_tokens`,
`budget_wall_time`); an upstream that failed (steps recorded with an error and no answer) is an
`infra_error`, as is an OpenClaw that died without saying why and without a single model call; any other
failure is OpenClaw's own error, `agent_error`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clawgym.agent.base import AgentOutcome, EpisodeContext
from clawgym.agent.openclaw.config import (
    STATE_MOUNT,
    launch_argv,
    launch_env,
    openclaw_config,
    relay_url,
)
from clawgym.agent.openclaw.transcript import OpenClawTranscript, TranscriptReadError, read_transcript
from clawgym.core.records import Task
from clawgym.gateway.routes import route_key
from clawgym.sandbox.base import Sandbox

SHUTDOWN_GRACE_S = 20.0  # beyond OpenClaw's own --timeout, before the sandbox kills it


@dataclass
class OpenClawSettings:
    model: str  # the model id OpenClaw sends (the upstream's served name)
    max_tokens: int = 1024  # completion tokens per call (the provider model's maxTokens)
    context_window: int = 32768
    thinking: str = "off"
    version: str = ""
    # the secret OpenClaw's bearer token is derived from: OpenClaw gets only the key of its own route,
    # route_key(api_key, route), never api_key itself (the rollout gateway's route secret; on a cluster the
    # gateway's token, which is also its route secret there; see clawgym.gateway.routes)
    api_key: str = "clawgym"


class OpenClawAgent:
    name = "openclaw"

    def __init__(self, settings: OpenClawSettings, *, route: Callable[[Task, EpisodeContext], str],
                 steps_of: Callable[[str], list[Any]] | None = None,
                 spend_of: Callable[[str], dict] | None = None):
        """`route(task, ctx)`: the gateway path of the episode's calls (`/t/<trajectory>/g/<group>/v1`);
        `steps_of(trajectory_id)`: the gateway's step records of a trajectory (from the pool);
        `spend_of(trajectory_id)`: what the gateway's budget book says the trajectory spent."""
        self.settings = settings
        self.route = route
        self.steps_of = steps_of
        self.spend_of = spend_of

    def run(self, task: Task, sandbox: Sandbox, ctx: EpisodeContext) -> AgentOutcome:
        state_host = sandbox.mounts.get(STATE_MOUNT)
        if state_host is None:
            return AgentOutcome(transcript=[], status="infra_error", error_kind="openclaw_mounts",
                                error="the sandbox was started without the OpenClaw mounts (see clawgym.agent.openclaw.kind)")
        ws = sandbox.workdir
        route = self.route(task, ctx)
        cfg = openclaw_config(base_url=relay_url(route), model=self.settings.model, workspace=ws,
                              max_tokens=self.settings.max_tokens, context_window=self.settings.context_window,
                              api_key=route_key(self.settings.api_key, route))
        (state_host / "openclaw.json").write_text(json.dumps(cfg, indent=2) + "\n")
        (state_host / "oc").mkdir(exist_ok=True)
        prompts = [task.instruction] + [s.prompt for s in task.sessions]
        runs: list[dict[str, Any]] = []
        status, kind, error = "completed", None, None
        for n, prompt in enumerate(prompts):
            (state_host / f"prompt-{n}.md").write_text(prompt)
            left = ctx.time_left()
            if left <= 1:
                status, kind, error = "timeout", "episode_timeout", "the episode's wall-time limit was reached"
                break
            argv = launch_argv(n, workspace=ws, timeout_s=int(left), thinking=self.settings.thinking)
            t0 = time.monotonic()
            res = sandbox.exec(argv, cwd=ws, env=launch_env(ws), timeout=left + SHUTDOWN_GRACE_S)
            run = {"session": n, "exit_code": res.exit_code, "duration_s": round(time.monotonic() - t0, 3),
                   "timed_out": res.timed_out, "limit": res.limit}
            result = _read_json(state_host / f"result-{n}.json")
            if result is not None:
                run["result"] = {k: result.get(k) for k in ("ok", "status", "error", "usage", "assistantTurns",
                                                            "toolSummary", "sessionId", "model")}
            err_tail = _tail(state_host / f"stderr-{n}.log")
            runs.append(run)
            if res.exit_code == 0 and not res.timed_out:
                continue
            spend = self.spend_of(ctx.trajectory_id) if self.spend_of else {}
            if spend.get("exceeded"):
                status, kind, error = "agent_error", f"budget_{spend['exceeded']}", spend.get("message")
            elif res.timed_out or res.exit_code == 2 or ctx.time_left() <= 0:
                status, kind, error = "timeout", "episode_timeout", "OpenClaw did not finish within the episode's wall time"
            elif res.exit_code == 97:
                status, kind, error = "infra_error", "openclaw_relay", f"the gateway relay did not start: {_tail(state_host / f'relay-{n}.err')}"
            elif res.limit == "memory":
                status, kind, error = "agent_error", "openclaw_memory", "OpenClaw was killed by the sandbox's memory limit"
            else:
                msg = ((result or {}).get("error") or {}).get("message") if isinstance((result or {}).get("error"), dict) else None
                status, kind = "agent_error", "openclaw_error"
                error = msg or f"OpenClaw exited with {res.exit_code}: {err_tail[-600:]}"
            run["stderr_tail"] = err_tail[-2000:]
            break
        try:
            tr = read_transcript(state_host / "oc")
        except TranscriptReadError as exc:
            tr = OpenClawTranscript(events=[])
            if status == "completed":
                status, kind, error = "agent_error", "openclaw_transcript", str(exc)
        steps_raw = self.steps_of(ctx.trajectory_id) if self.steps_of else []
        steps, join = join_steps(steps_raw, tr)
        upstream_failed = [s for s in steps_raw if getattr(s, "status", "ok") == "error"]
        if status == "agent_error" and kind == "openclaw_error" and upstream_failed:
            status, kind = "infra_error", "llm_upstream"
            error = f"the model endpoint failed: {upstream_failed[-1].error}"
        if status == "agent_error" and kind == "openclaw_error" and not steps_raw and not tr.messages("assistant"):
            status, kind = "infra_error", "openclaw_crashed"
        messages, tools = conversation(steps_raw)
        usage = _sum_usage(steps_raw)
        return AgentOutcome(
            transcript=tr.events, final_message=tr.final_message, status=status, error_kind=kind, error=error,
            tool_calls=tr.tool_calls, tool_errors=tr.tool_errors,
            model=next((s.model for s in steps_raw), self.settings.model), messages=messages, tools=tools,
            steps=steps, usage=usage,
            metadata={"openclaw": {"version": self.settings.version, "runs": runs, "sessions": tr.sessions,
                                   "dropped_events": tr.dropped, "compressed_events": tr.compressed,
                                   "step_join": join,
                                   "budget": self.spend_of(ctx.trajectory_id) if self.spend_of else None}},
        )


def _read_json(path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _tail(path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _sum_usage(steps: list[Any]) -> dict[str, Any]:
    p = sum((s.usage or {}).get("prompt_tokens") or 0 for s in steps)
    c = sum((s.usage or {}).get("completion_tokens") or 0 for s in steps)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c, "model_calls": len(steps)}


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw
    return raw


def _step_signature(step: Any) -> tuple[str, list[tuple[str, Any]]]:
    r = step.response or {}
    calls = [((tc.get("function") or {}).get("name") or "", _args((tc.get("function") or {}).get("arguments")))
             for tc in r.get("tool_calls") or []]
    return (r.get("content") or "").strip(), calls


def _event_signature(event: dict) -> tuple[str, list[tuple[str, Any]]]:
    items = event["message"].get("content") or []
    text = "".join(c.get("text", "") for c in items if c.get("type") == "text").strip()
    calls = [(c.get("name") or "", c.get("arguments")) for c in items if c.get("type") == "toolCall"]
    return text, calls


def join_steps(steps: list[Any], tr: OpenClawTranscript) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One trajectory step entry per gateway step (token ids included), each matched, in order, to the assistant
    message of OpenClaw's transcript that holds the same answer (text and tool calls with their arguments).

    Returns (entries, report): report counts steps, assistant messages and matches."""
    assistants = tr.messages("assistant")
    entries: list[dict[str, Any]] = []
    j = matched = 0
    for s in sorted(steps, key=lambda s: s.step_index):
        entry: dict[str, Any] = {
            "step_id": s.step_id, "index": s.step_index, "status": s.status, "model": s.model,
            "latency_s": (s.timings or {}).get("latency_s"), "ttft_s": (s.timings or {}).get("ttft_s"),
            "usage": s.usage, "finish_reason": (s.response or {}).get("finish_reason"),
            "tool_calls": len((s.response or {}).get("tool_calls") or []), "token_source": s.token_source,
            "event_id": None,
        }
        if s.prompt_ids is not None:
            entry["prompt_token_ids"] = s.prompt_ids
        if s.response_ids is not None:
            entry["token_ids"] = s.response_ids
        if s.error:
            entry["error"] = s.error
        if s.status == "ok":
            sig = _step_signature(s)
            for k in range(j, len(assistants)):
                if _event_signature(assistants[k]) == sig:
                    entry["event_id"] = assistants[k].get("id")
                    matched += 1
                    j = k + 1
                    break
        entries.append(entry)
    ok = sum(1 for s in steps if s.status == "ok")
    report = {"steps": len(steps), "ok_steps": ok, "assistant_messages": len(assistants), "matched": matched,
              "complete": matched == ok == len(assistants)}
    return entries, report


def conversation(steps: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The chat messages exactly as OpenClaw sent them (system prompt, user turns with its internal context,
    tool results) plus the model's answers, and the tool schemas: per OpenClaw session, the last call's request
    and its answer. A call with another first user message than the call before starts a new session."""
    ok = sorted((s for s in steps if s.status == "ok"), key=lambda s: s.step_index)
    groups: list[list[Any]] = []
    for s in ok:
        if groups and _first_user(groups[-1][-1]) == _first_user(s):
            groups[-1].append(s)
        else:
            groups.append([s])
    messages: list[dict[str, Any]] = []
    for g in groups:
        last = g[-1]
        r = last.response or {}
        answer: dict[str, Any] = {"role": "assistant", "content": r.get("content")}
        if r.get("tool_calls"):
            answer["tool_calls"] = r["tool_calls"]
        messages += list((last.request or {}).get("messages") or []) + [answer]
    tools = list((ok[0].request or {}).get("tools") or []) if ok else []
    return messages, tools


def _first_user(step: Any) -> Any:
    return next((m.get("content") for m in (step.request or {}).get("messages") or [] if m.get("role") == "user"), None)
