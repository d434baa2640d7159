"""The rubric judge: an LLM scores each rubric rule of a task on five bands (0, 0.25, 0.5, 0.75, 1).

How a task is judged (:meth:`Judge.judge`):

* Every rule is judged on its own, in its own model call (several run at once). A rule that names a workspace
  file (`file_path`) is judged against that file only; a missing file scores 0 for that rule without calling
  the model. Any other rule is judged against the agent's final answer and a compact rendering of the
  transcript (tool calls and results, truncated). A free-text rubric (`Rubric.text` / `expected_behavior`
  without rules) is judged as one rule named `rubric`.
* The model is asked, PinchBench-style, for a JSON object only: `{"score": <band>, "reason": "..."}`. The
  answer is parsed with PinchBench's fallbacks (see :func:`parse_judgment`): the whole text as JSON, a fenced
  code block, the JSON objects in the text (the last one that holds a score wins, as in PinchBench), then a
  `Score: x` line. The value is snapped to the nearest band (ties go to the lower band).
* An answer that cannot be parsed is asked for once more (the bad answer and a reminder of the format are
  sent back). If that fails too, or the endpoint fails for good, the rule is an ERROR, and so is the task's
  rubric score: never a silent 0.
* `samples=k` asks each judge model k times (temperature > 0, seeds `seed + i`); several judge models (a list
  of clients) are averaged too. Every sample's score is kept, for calibration.
* Rubric score = the weighted mean of the rule scores (rule `weight`; equal weights when all are 0).
* Judge calls are cached on disk by a hash of (model, messages, sampling parameters, sample index), one JSON
  file per hash written atomically, so re-scoring a run costs nothing the second time. Failed calls are never
  cached. Tokens spent (and those saved by the cache) are counted.

The pieces live in modules of their own, re-exported here: answer parsing (:mod:`clawgym.verify.judge_answer`),
the results (:mod:`clawgym.verify.judge_result`), the cache (:mod:`clawgym.verify.judge_cache`) and the
evidence shown to the judge (:mod:`clawgym.verify.judge_evidence`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym.core.records import Rubric, RubricRule, Task
from clawgym.sandbox.base import WorkspaceReader
from clawgym.verify.judge_answer import BANDS, Parsed, parse_judgment, snap_to_band, to_unit
from clawgym.verify.judge_cache import CACHE_VERSION, JudgeCache
from clawgym.verify.judge_evidence import _clip, read_evidence_file, render_transcript, workspace_reader
from clawgym.verify.judge_result import JudgeResult, JudgeSample, RuleResult, _short

if TYPE_CHECKING:  # the client pulls in openai; keep `import clawgym.verify` light
    from clawgym.llm.client import LLMClient

FREE_TEXT_RULE = "rubric"

SYSTEM_PROMPT = (
    "You are a grading function. Your ONLY job is to output a single JSON object.\n"
    "- Judge the ONE criterion you are given, from the evidence shown, and nothing else.\n"
    "- Be a strict evaluator: reserve 1 for work that fully meets the criterion.\n"
    "- Do NOT write any prose, markdown or code fences outside the JSON object.\n"
    'Answer format: {"score": S, "reason": "one short sentence"} where S is one of 0, 0.25, 0.5, 0.75, 1.'
)
ANSWER_FORMAT = (
    "Respond with ONLY this JSON object (no markdown, no code fences, no extra text):\n"
    '{"score": <0, 0.25, 0.5, 0.75 or 1>, "reason": "<one short sentence>"}'
)
REASK = (
    "Your answer could not be read. Reply again with ONLY the JSON object "
    '{"score": <0, 0.25, 0.5, 0.75 or 1>, "reason": "<one short sentence>"} and nothing else.'
)


def rubric_rules(rubric: Rubric) -> list[RubricRule]:
    """The rules to judge: the rubric's own, or its free text (or expected behaviour) as one rule."""
    if rubric.rules:
        return list(rubric.rules)
    text = (rubric.text or "").strip() or (rubric.expected_behavior or "").strip()
    if not text:
        return []
    return [RubricRule(name=FREE_TEXT_RULE, description=text)]


def _bands_text(rule: RubricRule) -> str:
    desc = rule.description or ""
    if not rule.scores or re.search(r"score\s*1(?:\.0)?\b", desc, re.I):
        return ""  # none given, or already written out in the description (PinchBench's criteria)
    by_band: dict[float, str] = {}
    for k, v in rule.scores.items():
        try:
            by_band[snap_to_band(float(k))] = v
        except ValueError:
            continue
    lines = [f"- {b:g}: {by_band.get(b, '(in between the neighbouring bands)')}" for b in reversed(BANDS)]
    return "Bands:\n" + "\n".join(lines)


@dataclass
class _Call:
    content: str
    usage: dict[str, int]
    cached: bool


class Judge:
    """Scores a task's rubric with one or more judge models (see the module docstring).

    `client`: the LLMClient of the judge model, or a list of them (several judge models, averaged).
    `samples`: answers asked of each model per rule. `temperature`: default 0 for one sample, 0.7 for
    several; sample i uses seed `seed + i`. `cache_dir`: where judge answers are cached (None: no cache).
    """

    def __init__(
        self,
        client: LLMClient | Sequence[LLMClient],
        samples: int = 1,
        cache_dir: Path | None = None,
        *,
        temperature: float | None = None,
        seed: int = 0,
        max_tokens: int = 200,
        max_workers: int = 8,
        max_file_chars: int = 8000,
        max_transcript_chars: int = 6000,
        max_answer_chars: int = 3000,
        reask: bool = True,
    ):
        self.clients = list(client) if isinstance(client, (list, tuple)) else [client]
        if not self.clients:
            raise ValueError("a judge needs at least one model client")
        if samples < 1:
            raise ValueError("samples must be >= 1")
        self.samples = samples
        self.temperature = temperature if temperature is not None else (0.0 if samples == 1 else 0.7)
        self.seed = seed
        self.max_tokens = max_tokens
        self.max_workers = max_workers
        self.max_file_chars = max_file_chars
        self.max_transcript_chars = max_transcript_chars
        self.max_answer_chars = max_answer_chars
        self.reask = reask
        self.cache = JudgeCache(cache_dir) if cache_dir is not None else None
        self._lock = threading.Lock()
        self.usage = {"requests": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0,
                      "cached_prompt_tokens": 0, "cached_completion_tokens": 0}

    @property
    def models(self) -> list[str]:
        return [c.model for c in self.clients]

    # -- prompts ------------------------------------------------------------------------------------------
    def _messages(self, task: Task, rubric: Rubric, rule: RubricRule, evidence: str) -> list[dict[str, Any]]:
        parts = ["## The task given to the agent", task.instruction.strip()]
        for s in task.sessions:
            parts.append(f"(later message from the user) {s.prompt.strip()}")
        if rubric.expected_behavior and rule.name != FREE_TEXT_RULE:
            parts += ["## Expected behavior", rubric.expected_behavior.strip()]
        if rubric.eval_input:
            parts += ["## Notes for the grader", rubric.eval_input.strip()]
        parts += [f"## The criterion to judge: {rule.name}", (rule.description or rule.name).strip()]
        bands = _bands_text(rule)
        if bands:
            parts.append(bands)
        parts += [evidence, ANSWER_FORMAT]
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]

    def _evidence(self, rule: RubricRule, workspace: WorkspaceReader, transcript: list[dict[str, Any]],
                  final_message: str) -> tuple[str | None, str]:
        if rule.file_path:
            text, note = read_evidence_file(workspace, rule.file_path, self.max_file_chars)
            if text is None:
                return None, note
            runs = re.findall(r"`{3,}", text)
            fence = "`" * max([3] + [len(r) + 1 for r in runs])  # longer than any fence inside the file
            return (f"## Evidence: the file `{rule.file_path}` in the agent's final workspace\n"
                    f"{fence}\n{text}\n{fence}"), ""
        answer = _clip(final_message.strip(), self.max_answer_chars) or "(the agent gave no final answer)"
        steps = render_transcript(transcript, self.max_transcript_chars)
        return (f"## Evidence: the agent's final answer\n{answer}\n\n"
                f"## Evidence: what the agent did (tool calls and results, truncated)\n{steps}"), ""

    # -- calls --------------------------------------------------------------------------------------------
    def _params(self, sample: int) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.temperature > 0:
            params["seed"] = self.seed + sample
        return params

    def _call(self, client: LLMClient, messages: list[dict[str, Any]], sample: int) -> _Call:
        params = self._params(sample)
        key = JudgeCache.key(client.model, messages, params, sample) if self.cache is not None else None
        if self.cache is not None and key is not None:
            hit = self.cache.get(key)
            if hit is not None and isinstance(hit.get("content"), str):
                usage = hit.get("usage") or {}
                with self._lock:
                    self.usage["cached"] += 1
                    self.usage["cached_prompt_tokens"] += int(usage.get("prompt_tokens", 0))
                    self.usage["cached_completion_tokens"] += int(usage.get("completion_tokens", 0))
                return _Call(hit["content"], {}, True)
        res = client.chat(messages, **params)  # LLMError propagates: a failed call is never cached
        usage = {k: int(res.usage.get(k, 0)) for k in ("prompt_tokens", "completion_tokens")}
        with self._lock:
            self.usage["requests"] += 1
            self.usage["prompt_tokens"] += usage["prompt_tokens"]
            self.usage["completion_tokens"] += usage["completion_tokens"]
        if self.cache is not None and key is not None:
            self.cache.put(key, {"model": client.model, "sample": sample, "params": params,
                                 "content": res.content, "usage": usage, "finish_reason": res.finish_reason,
                                 "created": time.time()})
        return _Call(res.content, usage, False)

    def _sample(self, client: LLMClient, messages: list[dict[str, Any]], sample: int, rule: str) -> JudgeSample:
        from clawgym.llm.client import LLMError

        out = JudgeSample(model=client.model, sample=sample, status="error")
        spent = {"prompt_tokens": 0, "completion_tokens": 0}
        try:
            first = self._call(client, messages, sample)
            out.calls, out.cache_hits = int(not first.cached), int(first.cached)
            for k in spent:
                spent[k] += first.usage.get(k, 0)
            parsed = parse_judgment(first.content, rule)
            out.answer, out.cached = _short(first.content, 500), first.cached
            if parsed.score is None and self.reask:
                again = messages + [{"role": "assistant", "content": first.content},
                                    {"role": "user", "content": REASK}]
                second = self._call(client, again, sample)
                out.calls += int(not second.cached)
                out.cache_hits += int(second.cached)
                for k in spent:
                    spent[k] += second.usage.get(k, 0)
                first_error = parsed.error
                parsed = parse_judgment(second.content, rule)
                out.reasked, out.answer, out.cached = True, _short(second.content, 500), out.cached and second.cached
                if parsed.score is None:
                    parsed.error = f"unparseable judge answer, also after a re-ask ({first_error}; then {parsed.error})"
        except LLMError as exc:
            out.error, out.usage = f"judge call failed: {exc}", spent
            return out
        out.usage = spent
        if parsed.score is None:
            out.error = parsed.error or "unparseable judge answer"
            return out
        out.status, out.score, out.raw_score = "ok", parsed.score, parsed.raw
        out.reason, out.method = _short(parsed.reason, 300), parsed.method
        return out

    # -- a task -------------------------------------------------------------------------------------------
    def judge(self, task: Task, workspace: Path | str | WorkspaceReader, transcript: list[dict[str, Any]],
              final_message: str = "") -> JudgeResult:
        """Judge `task`'s rubric on the final workspace and the episode's transcript and final answer.
        `workspace`: the live sandbox (read through the sandbox protocol), or a host directory holding it (a
        snapshot)."""
        t0 = time.monotonic()
        result = JudgeResult(status="none", models=self.models, samples=self.samples)
        rubric = task.verifier.rubric
        if rubric is None:
            return result
        rules = rubric_rules(rubric)
        files = workspace_reader(workspace, task.workspace.mount_dir)
        if not rules:
            result.status, result.error = "error", "the rubric has no rules and no text to judge"
            return result
        jobs: list[tuple[int, LLMClient, list[dict[str, Any]], int]] = []
        for i, rule in enumerate(rules):
            rr = RuleResult(name=rule.name, weight=rule.weight, file_path=rule.file_path, status="scored")
            result.rules.append(rr)
            evidence, note = self._evidence(rule, files, transcript, final_message)
            if evidence is None:
                rr.status, rr.score, rr.note = "missing_file", 0.0, note
                continue
            messages = self._messages(task, rubric, rule, evidence)
            for client in self.clients:
                for s in range(self.samples):
                    jobs.append((i, client, messages, s))
        if jobs:
            workers = max(1, min(self.max_workers, len(jobs)))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="judge") as pool:
                futures = [(i, pool.submit(self._sample, c, m, s, rules[i].name)) for i, c, m, s in jobs]
                for i, fut in futures:
                    result.rules[i].samples.append(fut.result())
        usage = {"requests": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for rr in result.rules:
            for s in rr.samples:
                usage["prompt_tokens"] += s.usage.get("prompt_tokens", 0)
                usage["completion_tokens"] += s.usage.get("completion_tokens", 0)
                usage["requests"] += s.calls
                usage["cached"] += s.cache_hits
            if rr.status == "missing_file":
                continue
            per_model = []
            for model in dict.fromkeys(s.model for s in rr.samples):
                vals = [s.score for s in rr.samples if s.model == model and s.status == "ok" and s.score is not None]
                if vals:
                    per_model.append(sum(vals) / len(vals))
            if not per_model:
                rr.status = "error"
                rr.error = next((s.error for s in rr.samples if s.error), "no judge answer")
            else:
                rr.score = sum(per_model) / len(per_model)
        result.usage = usage
        failed = [r for r in result.rules if r.status == "error"]
        if failed:
            result.status = "error"
            result.error = "; ".join(f"rule {r.name!r}: {r.error}" for r in failed)
        else:
            total_w = sum(r.weight for r in result.rules)
            if total_w > 0:
                score = sum(r.weight * (r.score or 0.0) for r in result.rules) / total_w
            else:
                score = sum(r.score or 0.0 for r in result.rules) / len(result.rules)
            result.status, result.score = "scored", min(1.0, max(0.0, score))
        result.duration_s = time.monotonic() - t0
        return result


def verify_with_judge(task: Task, sandbox, transcript: list[dict[str, Any]], final_message: str = "",
                      judge: Judge | None = None):
    """:func:`clawgym.verify.verify_episode` with the rubric judged: the judge reads the live workspace as the
    agent left it (before any checker file is copied in), then the code check runs in the sandbox, and the two
    are combined (see :func:`clawgym.verify.scoring.combine_judged`). Without a judge, exactly verify_episode.
    Raises SandboxError when the sandbox fails."""
    from clawgym.verify.code import run_code_check
    from clawgym.verify.scoring import combine_judged

    judged = None
    if judge is not None and task.verifier.rubric is not None:
        judged = judge.judge(task, sandbox, transcript, final_message)
    code = None
    if task.verifier.code is not None:
        code = run_code_check(task.verifier.code, task, sandbox, transcript, final_message)
    return combine_judged(task.verifier, code, judged)


__all__ = [
    "ANSWER_FORMAT", "BANDS", "CACHE_VERSION", "FREE_TEXT_RULE", "REASK", "SYSTEM_PROMPT", "Judge", "JudgeCache",
    "JudgeResult", "JudgeSample", "Parsed", "RuleResult", "parse_judgment", "read_evidence_file",
    "render_transcript", "rubric_rules", "snap_to_band", "to_unit", "verify_with_judge", "workspace_reader",
]
