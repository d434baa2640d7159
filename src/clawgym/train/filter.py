"""Verifier-filtered trajectories to SFT conversations (`clawgym filter`).

Each kept trajectory becomes one JSON line ``{"messages", "tools", "trajectory_id", "task_id", "score", ...}``
holding the conversation exactly as the built-in LLM agent sends it to a model: OpenAI chat messages (system,
user, assistant with `tool_calls`, `role: tool` results) and the tool schemas offered.

Trajectories of the LLM agent carry those messages (`Trajectory.messages`). Agents that record only an OpenClaw
transcript -- the `oracle`, which replays a task's reference solution and is the teacher of our SFT data -- are
converted: the system prompt is the LLM agent's own (:data:`clawgym.agent.llm.SYSTEM_PROMPT` with the workspace
directory of the transcript's session event), every `toolCall` becomes an assistant `tool_calls` entry with JSON
arguments, every `toolResult` a `role: tool` message, and the tools are :data:`clawgym.agent.llm.TOOL_SCHEMAS`.

Selection: the last record of each trajectory id in a run wins (a resumed run appends); then status, the
pool's curation, score (`verdict.score` of a scored or checker_failed verdict: the re-scored verdict of
`verdicts.jsonl` when the run has a current one, else the rollout's), the presence of a conversation, and at
most K per task (the best scores, ties by id). Every dropped trajectory is counted under one reason; where
each score came from, and why a trajectory fell back to the rollout's, is counted too. How scores and
curation are read from a run directory: :mod:`clawgym.train.run_inputs`.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym.core.atomic import write_json, write_lines
from clawgym.core.errors import ClawgymError, RecordError
from clawgym.core.jsonl import read_records_lenient
from clawgym.core.records import DEFAULT_MOUNT_DIR, Trajectory
from clawgym.train.run_inputs import SCORE_SOURCES, load_verdicts, open_curation, run_dir_of, verdict_score

TRAJECTORIES = "trajectories.jsonl"

# Why a trajectory was not kept; in the order the checks run.
DROP_REASONS = (
    "status",  # its status is not one of the wanted ones (infra_error, skipped, timeout, ...)
    "curated_out",  # the run's pool marks it (or one of its steps) not trainable, or of a dropped quality
    "unscored",  # no score: no verdict, or a verdict that is unscored / an infrastructure error
    "below_min_score",
    "no_messages",  # neither chat messages nor an OpenClaw transcript with an assistant turn (noop, ...)
    "no_assistant_turn",  # a conversation without any assistant message to learn from
    "over_max_per_task",
)


class FilterError(ClawgymError):
    pass


@dataclass
class FilterOptions:
    min_score: float = 1.0
    statuses: Sequence[str] | None = ("completed",)  # None: any status that has a score
    max_per_task: int | None = None
    token_ids: bool = False  # also carry the engine's token ids of each model call, when every call has them
    scores: str = "auto"  # auto | verdicts | rollout: where scores come from (clawgym.train.run_inputs)
    curation: bool = True  # respect the run's pool curation
    drop_quality: Sequence[str] = ("bad",)  # qualities (trajectory or step) curated out


@dataclass
class FilterReport:
    read: int = 0  # distinct trajectories read (after last-record-per-id)
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    bad_lines: list[str] = field(default_factory=list)
    per_task: Counter = field(default_factory=Counter)
    by_source: Counter = field(default_factory=Counter)  # messages | transcript
    output: str | None = None
    # scores: where the score of each trajectory that reached the score check came from (verdicts | rollout),
    # why one fell back to the rollout's (no_verdict | stale_verdict), the verdict files read, and their
    # verdicts for episodes the runs do not hold
    score_sources: Counter = field(default_factory=Counter)
    score_fallback: Counter = field(default_factory=Counter)
    verdict_files: list[str] = field(default_factory=list)
    verdicts_unmatched: int = 0
    judged: int = 0  # kept trajectories whose score includes a judged rubric
    # curation: the pools read, why each curated-out trajectory was, and trajectories the pools do not hold
    pools: list[str] = field(default_factory=list)
    curated: Counter = field(default_factory=Counter)
    not_in_pool: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "read": self.read, "kept": self.kept, "dropped": dict(sorted(self.dropped.items())),
            "bad_lines": self.bad_lines, "tasks": len(self.per_task), "per_task": dict(sorted(self.per_task.items())),
            "by_source": dict(sorted(self.by_source.items())), "output": self.output,
            "scores": {"sources": dict(sorted(self.score_sources.items())),
                       "fallback": dict(sorted(self.score_fallback.items())), "verdict_files": self.verdict_files,
                       "verdicts_unmatched": self.verdicts_unmatched, "kept_judged": self.judged},
            "curation": {"pools": self.pools, "curated_out": dict(sorted(self.curated.items())),
                         "not_in_pool": self.not_in_pool},
        }


# --------------------------------------------------------------------------------------------- conversion


def _text_of(content: Any) -> str:
    """The text of OpenClaw message content: a string, or the `text` items of a list (thinking is left out)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for item in content:
        if isinstance(item, dict) and item.get("type") == "text":
            parts.append(str(item.get("text", "")))
        elif isinstance(item, str):
            parts.append(item)
    return "".join(parts)


def transcript_to_messages(transcript: list[dict[str, Any]], system_prompt: str | None = None) -> list[dict[str, Any]]:
    """OpenAI chat messages equivalent to an OpenClaw transcript, as the built-in LLM agent would have sent them.

    The system prompt (default: the LLM agent's) is formatted with the workspace directory of the session event.
    """
    if system_prompt is None:
        from clawgym.agent.llm import SYSTEM_PROMPT

        system_prompt = SYSTEM_PROMPT
    cwd = next((e.get("cwd") for e in transcript if e.get("type") == "session" and e.get("cwd")), DEFAULT_MOUNT_DIR)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt.format(workdir=cwd)}]
    for event in transcript:
        if event.get("type") != "message":
            continue
        msg = event.get("message") or {}
        role = msg.get("role")
        content = msg.get("content")
        if role == "user":
            messages.append({"role": "user", "content": _text_of(content)})
        elif role == "assistant":
            text = _text_of(content)
            calls = []
            for item in content if isinstance(content, list) else []:
                if isinstance(item, dict) and item.get("type") == "toolCall":
                    args = item.get("arguments", item.get("params", {}))
                    if isinstance(args, dict) and set(args) == {"_raw"}:  # a malformed call, kept as the model wrote it
                        args_text = str(args["_raw"])
                    else:
                        args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                    calls.append({"id": str(item.get("id") or f"call_{len(calls) + 1}"), "type": "function",
                                  "function": {"name": str(item.get("name", "")), "arguments": args_text}})
            # "" beside tool calls, never null: what the agent sends every engine (llama.cpp refuses null), so the
            # conversation trained on is the one the model is served (a chat template renders both the same)
            out: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                out["tool_calls"] = calls
            messages.append(out)
        elif role == "toolResult":
            messages.append({"role": "tool", "tool_call_id": str(msg.get("toolCallId", "")), "content": _text_of(content)})
    return messages


def _has_tool_calls(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("role") == "assistant" and m.get("tool_calls") for m in messages)


def conversation_of(traj: Trajectory) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str] | None:
    """(messages, tools, source) of a trajectory; None when it has no conversation with an assistant turn."""
    from clawgym.agent.llm import TOOL_SCHEMAS

    if traj.messages:
        messages = [dict(m) for m in traj.messages]
        tools = list(traj.tools) or (list(TOOL_SCHEMAS) if _has_tool_calls(messages) else [])
        source = "messages"
    elif any(e.get("type") == "message" and (e.get("message") or {}).get("role") == "assistant"
             for e in traj.transcript):
        messages = transcript_to_messages(traj.transcript)
        tools = list(TOOL_SCHEMAS)
        source = "transcript"
    else:
        return None
    # Trailing user or tool messages (an episode cut by a limit) teach nothing: the loss is on assistant turns.
    while messages and messages[-1].get("role") != "assistant":
        messages.pop()
    return messages, tools, source


def _token_steps(traj: Trajectory) -> list[dict[str, Any]] | None:
    """The engine's token ids of every model call, when every call has them."""
    steps = [s for s in traj.steps if "prompt_token_ids" in s or "token_ids" in s or "latency_s" in s]
    if not steps or not all(s.get("prompt_token_ids") and s.get("token_ids") for s in steps):
        return None
    return [{"prompt_ids": list(s["prompt_token_ids"]), "response_ids": list(s["token_ids"])} for s in steps]


# --------------------------------------------------------------------------------------------- selection


def trajectories_path(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p / TRAJECTORIES if p.is_dir() else p


def load_latest(paths: Iterable[str | os.PathLike], report: FilterReport | None = None) -> list[tuple[str, Trajectory]]:
    """(run, trajectory) for the last record of each trajectory id of each run, in order of first appearance."""
    out: list[tuple[str, Trajectory]] = []
    for path in paths:
        file = trajectories_path(path)
        if not file.exists():
            raise FilterError(f"{file}: no such file (give run directories or trajectories.jsonl files)")
        read = read_records_lenient(file, Trajectory)
        if report is not None:
            report.bad_lines += [str(e) for e in read.errors]
        latest: dict[str, Trajectory] = {}
        for t in read.records:
            latest[t.id] = t  # dicts keep first-insertion order; a later record replaces the value in place
        run = str(Path(path))
        out += [(run, t) for t in latest.values()]
    return out


def _select(run_trajs: list[tuple[str, Trajectory]], opts: FilterOptions, rep: FilterReport,
            wanted: set[str] | None, verdicts: Any, curation: Any) -> list[dict[str, Any]]:
    """The candidate records of one run (before --max-per-task), counting every drop in `rep`."""
    out: list[dict[str, Any]] = []
    missing: list[tuple[str, str]] = []  # (trajectory id, why it has no current verdict), for --scores verdicts
    for run, traj in run_trajs:
        rep.read += 1
        if wanted is not None and traj.status not in wanted:
            rep.dropped["status"] += 1
            continue
        if curation is not None:
            why = curation.why_out(traj)
            if why is None:
                rep.not_in_pool += 1
            elif why:
                rep.curated[why] += 1
                rep.dropped["curated_out"] += 1
                continue
        verdict, source = traj.verdict, "rollout"
        if verdicts is not None:
            rec, why = verdicts.lookup(traj)
            if rec is not None:
                verdict, source = rec.verdict, "verdicts"
            else:
                rep.score_fallback[why] += 1
                missing.append((traj.id, why))
        rep.score_sources[source] += 1
        score = verdict_score(verdict)
        if score is None:
            rep.dropped["unscored"] += 1
            continue
        if score < opts.min_score:
            rep.dropped["below_min_score"] += 1
            continue
        conv = conversation_of(traj)
        if conv is None:
            rep.dropped["no_messages"] += 1
            continue
        messages, tools, source_kind = conv
        if not any(m.get("role") == "assistant" for m in messages):
            rep.dropped["no_assistant_turn"] += 1
            continue
        rec_out: dict[str, Any] = {
            "messages": messages, "tools": tools, "trajectory_id": traj.id, "task_id": traj.task_id,
            "score": score, "score_source": source, "judged": verdict.rubric_score is not None,
            "status": traj.status, "agent": traj.agent, "model": traj.model, "run": run, "source": source_kind,
        }
        if opts.token_ids:
            steps = _token_steps(traj)
            if steps:
                rec_out["steps"] = steps
        out.append(rec_out)
    if opts.scores == "verdicts" and missing:
        first, why = missing[0]
        what = "no verdict" if why == "no_verdict" else "a stale verdict (the episode ran again after re-scoring)"
        raise FilterError(f"{verdicts.path}: {len(missing)} trajectories have no current re-scored verdict "
                          f"(--scores verdicts); first: {first}: {what}; run `clawgym verify` again, or use "
                          "--scores auto to fall back to the rollout's verdicts")
    return out


def filter_trajectories(paths: Sequence[str | os.PathLike], options: FilterOptions | None = None,
                        report: FilterReport | None = None) -> tuple[list[dict[str, Any]], FilterReport]:
    """The SFT records of the kept trajectories, and counts of what was kept and dropped and why."""
    opts = options or FilterOptions()
    rep = report or FilterReport()
    if opts.scores not in SCORE_SOURCES:
        raise FilterError(f"scores: unknown source {opts.scores!r}; choose {', '.join(SCORE_SOURCES)}")
    wanted = None if not opts.statuses or "any" in opts.statuses else set(opts.statuses)
    candidates: list[dict[str, Any]] = []
    for path in paths:
        run_trajs = load_latest([path], rep)
        run_dir = run_dir_of(path)
        verdicts = None
        if opts.scores != "rollout" and run_dir is not None:
            verdicts = load_verdicts(run_dir)
        if opts.scores == "verdicts" and verdicts is None:
            where = (f"no {run_dir / 'verdicts.jsonl'}" if run_dir is not None
                     else "not a run directory or its trajectories.jsonl, so no verdicts.jsonl")
            raise FilterError(f"{path}: {where} (--scores verdicts): run `clawgym verify` on the run first, or use "
                              "--scores auto")
        if verdicts is not None:
            rep.verdict_files.append(str(verdicts.path))
            rep.bad_lines += verdicts.bad_lines
            rep.verdicts_unmatched += verdicts.unmatched(t.id for _, t in run_trajs)
        curation = open_curation(run_dir, opts.drop_quality) if opts.curation and run_dir is not None else None
        if curation is not None:
            rep.pools.append(str(curation.pool_dir))
        try:
            candidates += _select(run_trajs, opts, rep, wanted, verdicts, curation)
        finally:
            if curation is not None:
                curation.close()
    if opts.max_per_task is not None:
        by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for rec in candidates:
            by_task[rec["task_id"]].append(rec)
        keep: set[int] = set()
        for recs in by_task.values():
            best = sorted(recs, key=lambda r: (-r["score"], r["trajectory_id"], r["run"]))[: opts.max_per_task]
            keep.update(id(r) for r in best)
        over = sum(1 for r in candidates if id(r) not in keep)
        if over:
            rep.dropped["over_max_per_task"] += over
        candidates = [r for r in candidates if id(r) in keep]
    for rec in candidates:
        rep.per_task[rec["task_id"]] += 1
        rep.by_source[rec["source"]] += 1
        rep.judged += int(rec["judged"])
    rep.kept = len(candidates)
    return candidates, rep


def write_jsonl_atomic(path: str | os.PathLike, rows: Iterable[dict[str, Any]]) -> int:
    """Write JSON rows, one per line, atomically (temp file, fsync, rename); returns the row count."""
    return write_lines(path, (json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def filter_to_file(paths: Sequence[str | os.PathLike], output: str | os.PathLike,
                   options: FilterOptions | None = None, fmt: str = "clawgym") -> FilterReport:
    """`clawgym filter`: write the kept conversations to `output` (atomically) and its report next to it.

    `fmt` ``clawgym`` writes the SFT records (messages, tools, trajectory id, task, score, ...); ``openai-messages``
    only their ``messages`` and ``tools``, as OpenRLHF and trl read them (:mod:`clawgym.train.openai_messages`)."""
    from clawgym.train.openai_messages import FORMATS, to_openai_messages

    if fmt != "clawgym" and fmt not in FORMATS:
        raise FilterError(f"format: unknown {fmt!r}; choose clawgym or {', '.join(FORMATS)}")
    opts = options or FilterOptions()
    records, rep = filter_trajectories(paths, opts)
    write_jsonl_atomic(output, records if fmt == "clawgym" else [to_openai_messages(r) for r in records])
    rep.output = str(output)
    report_path = Path(str(output) + ".report.json")
    settings = {"min_score": opts.min_score, "statuses": list(opts.statuses or ["any"]),
                "max_per_task": opts.max_per_task, "token_ids": opts.token_ids, "scores": opts.scores,
                "curation": opts.curation, "drop_quality": list(opts.drop_quality), "inputs": [str(p) for p in paths],
                "format": fmt}
    write_json(report_path, {**rep.as_dict(), "options": settings})
    return rep


def read_sft_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of an SFT file (one JSON object per line), with a clear error for a bad line."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordError(str(path), lineno, None, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(rec, dict):
                raise RecordError(str(path), lineno, None, "expected a JSON object")
            if not (rec.get("messages") or rec.get("steps") or rec.get("prompt_ids") or rec.get("request")):
                raise RecordError(str(path), lineno, None,
                                  "needs `messages`, token ids (`steps` / `prompt_ids`) or a pool step's `request`")
            rec.setdefault("_line", lineno)
            out.append(rec)
    return out
