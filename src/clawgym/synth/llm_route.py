"""LLM-backed synthesis: a model writes the whole task, the project validates it and keeps only what passes.

Either route (persona, skill) turns its context into :class:`Brief`s: who asks (a persona), the scenario
(category, subcategory), the operations the task must exercise, and files to place in the workspace as they are
(a skill's folder). For each brief, the model is asked for one JSON object (:data:`ANSWER_SCHEMA`): the request
in the persona's voice, the workspace files, a `grade(transcript, workspace_path)` function and a reference
solution as tool calls (optionally a partial solution and rubric rules). Then, in order:

1. parse: one JSON object matching the schema, a task record that validates, a grade() that parses (parsed with
   `ast` on the host, never executed there);
2. static answer-leak check: a file the reference writes must not already sit, verbatim, in the request or in
   the workspace;
3. duplicate check against the tasks kept so far (embeddings, cosine >= 0.90 within the category);
4. validation IN A SANDBOX (:func:`clawgym.synth.validate.validate_candidate`: the reference scores 1.0, the
   untouched workspace 0 on every check, a partial solution, if given, strictly between) — the reference's
   commands and the grade() code are the model's programs and run only there;
5. a screen of the reference for reaching outside the workspace (network tools, host paths): such a task is
   rejected even when the sandbox contained it;
6. the LLM review: the model (or another) judges the task for answer leaks and factual errors.

A failure at 1-6 goes back to the model as a message in the same conversation, for up to `max_repairs` repair
rounds (3); the last failure is the rejection reason. Infrastructure failures (endpoint down, sandbox broken) are
not the model's: they are rejected as such without a repair. Every model call goes through
:class:`clawgym.llm.LLMClient` (retries, concurrency limit); tokens are counted per task and in the yield
report.

Kept tasks and rejections are written in brief order, whatever order the briefs finish in: with the same seed
and a deterministic model the files are the same bytes for any `jobs` and either executor. On a Ray cluster
(`executor`), step 4 (the sandbox validation) runs on the nodes (a Ray task per candidate, one sandbox slot
each); the model calls, the checks around them and the writing stay here.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import Field, ValidationError

from clawgym.core.answer_json import AnswerJSONError, answer_json
from clawgym.core.errors import ClawgymError
from clawgym.core.jsonl import JsonlAppender, read_records_lenient
from clawgym.core.records import (
    CodeCheck,
    Record,
    ReferenceSolution,
    Rubric,
    RubricRule,
    Task,
    ToolCall,
    VerifierSpec,
    WorkspaceFile,
    WorkspaceSpec,
)
from clawgym.llm.client import LLMClient, LLMError
from clawgym.sandbox.base import SandboxBackend, SandboxError
from clawgym.synth.yield_report import Tokens, YieldReport

MAX_REPAIRS = 3
TOOLS = ("read", "write", "edit", "exec", "ls")
LEAK_MIN_CHARS = 40  # shorter reference outputs ("42", "done") may legitimately appear in the inputs
INFRA_REASONS = ("llm_error", "infra_error")  # not the model's fault: no repair is asked for

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["instruction", "files", "grade_source", "reference"],
    "properties": {
        "instruction": {"type": "string", "minLength": 20,
                        "description": "The user's request, in the persona's voice, naming exact paths and formats."},
        "files": {
            "type": "array", "maxItems": 40,
            "items": {"type": "object", "required": ["path", "content"],
                      "properties": {"path": {"type": "string", "minLength": 1}, "content": {"type": "string"}}},
        },
        "grade_source": {"type": "string", "minLength": 30,
                         "description": "Python, standard library only, defining grade(transcript, workspace_path) "
                                        "-> dict[str, float]."},
        "reference": {
            "type": "object", "required": ["steps"],
            "properties": {
                "steps": {"type": "array", "minItems": 1, "maxItems": 60, "items": {"$ref": "#/$defs/step"}},
                "final_message": {"type": "string"},
            },
        },
        "partial_steps": {"type": "array", "items": {"$ref": "#/$defs/step"}},
        "expected_behavior": {"type": "string"},
        "rubric": {
            "type": "array", "maxItems": 6,
            "items": {"type": "object", "required": ["name", "description"],
                      "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                                     "file_path": {"type": ["string", "null"]}}},
        },
    },
    "$defs": {
        "step": {"type": "object", "required": ["name", "arguments"],
                 "properties": {"name": {"enum": list(TOOLS)}, "arguments": {"type": "object"}}},
    },
}

SYSTEM_PROMPT = """You write verifiable training tasks for a personal AI agent. The agent works in a folder of \
files (its workspace) through four tools: read {path}, write {path, content}, edit {path, oldText, newText} and \
exec {command} (a shell command run in the workspace, with python3, no network). You answer with ONE JSON object \
and nothing else, with these keys:
- "instruction": the user's request, written by the persona in their own voice. It names the exact input and \
output paths and formats. It never contains the answer.
- "files": the input files the agent needs, [{"path": relative path, "content": text}], with realistic content.
- "grade_source": Python 3, standard library only, defining grade(transcript, workspace_path) that returns a \
dict of check name -> float in [0, 1]. Use at least two checks. Each check reads files under workspace_path. \
Every check must give 0 on the untouched workspace and 1 after the reference solution.
- "reference": {"steps": [{"name": "write"|"edit"|"exec"|"read", "arguments": {...}}], "final_message": text}: \
tool calls that solve the task completely.
- optional "partial_steps": a deliberately incomplete solution that earns some but not all checks.
- optional "expected_behavior": what a good agent does, in one paragraph.
- optional "rubric": [{"name", "description", "file_path"}] for qualities code cannot check.
Solutions stay inside the workspace: no network, no paths outside it."""

REVIEW_PROMPT = """You review a synthesized task for an AI agent before it is used for training. Check two \
things:
1. answer leak: does the request or any input file already give away the expected result (so the agent could \
copy it without doing the work)?
2. factual errors: is anything in the request, the files, the checks or the reference solution wrong (wrong \
numbers, a check that contradicts the request, impossible dates)?
Answer with JSON only: {"answer_leak": true|false, "factual_errors": ["..."], "verdict": "accept"|"reject", \
"reason": "one sentence"}.

TASK
Request:
<<<
{instruction}
>>>
Input files:
{files}
grade() checks:
<<<
{grade}
>>>
Reference solution:
{reference}
"""


class LLMSynthError(ClawgymError):
    """The LLM route cannot run (bad options, an output of another route, an unsafe sandbox)."""


# --------------------------------------------------------------------------------------------- briefs


@dataclass
class Brief:
    """What one LLM-written task is about. Made by a route (persona, skill); the model writes the rest."""

    id: str  # the task id it becomes
    category: str
    subcategory: str = ""
    operations: list[str] = field(default_factory=list)  # operation ids
    operation_notes: list[str] = field(default_factory=list)  # "id: what it means", shown to the model
    persona: str | None = None  # one-sentence persona summary
    persona_tone: str = ""
    skills: list[str] = field(default_factory=list)
    skill_files: list[WorkspaceFile] = field(default_factory=list)  # placed in the workspace as they are
    skill_notes: list[str] = field(default_factory=list)  # "skills/x/SKILL.md: what the skill does"
    context: str = ""  # anything else the route wants the model to know
    source: str = "synth-persona-llm"
    seed: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)


def brief_prompt(brief: Brief) -> str:
    """The user message that asks for the task of `brief`."""
    lines = [f"Write one task (brief {brief.id})."]
    if brief.persona:
        lines.append(f"Persona (the user who asks): {brief.persona}")
    if brief.persona_tone:
        lines.append(f"Their writing style: {brief.persona_tone}")
    lines.append(f"Scenario: {brief.category}" + (f" / {brief.subcategory}" if brief.subcategory else ""))
    if brief.operation_notes:
        lines.append("The task chains these operations, in this order, each using the previous one's output:")
        lines += [f"- {n}" for n in brief.operation_notes]
    if brief.skill_notes:
        lines.append("These skills are already in the workspace (do not list them in \"files\"); the request "
                     "should need them and the reference should read them first:")
        lines += [f"- {n}" for n in brief.skill_notes]
    if brief.context:
        lines.append(brief.context)
    lines.append("Answer with the JSON object only.")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- parsing


class Failure(Exception):
    """A candidate that fails a step; `reason` is a stable code, `detail` what the model is told."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def extract_json(text: str) -> Any:
    """The JSON object of an answer (see :func:`clawgym.core.answer_json.answer_json`); Failure('bad_json')."""
    try:
        return answer_json(text)
    except AnswerJSONError as exc:
        raise Failure("bad_json", str(exc)) from None


def _schema_error(err: jsonschema.ValidationError) -> str:
    where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
    return f"{where}: {err.message[:300]}"


def parse_answer(text: str) -> dict[str, Any]:
    data = extract_json(text)
    errors = sorted(jsonschema.Draft202012Validator(ANSWER_SCHEMA).iter_errors(data), key=lambda e: list(e.path))
    if errors:
        raise Failure("schema", "; ".join(_schema_error(e) for e in errors[:5]))
    return data


def _check_grade_source(src: str) -> None:
    """Parse (never run) the grade source on the host: a syntax error or a missing grade() is fed back at once."""
    try:
        tree = ast.parse(src)
    except SyntaxError as exc:
        raise Failure("bad_grade", f"grade_source line {exc.lineno}: {exc.msg}") from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == "grade" and len(n.args.args) >= 2 for n in tree.body):
        raise Failure("bad_grade", "grade_source defines no top-level grade(transcript, workspace_path)")


def _validation_message(exc: ValidationError) -> str:
    e = exc.errors()[0]
    loc = ".".join(str(p) for p in e.get("loc", ()))
    return f"{loc}: {e.get('msg', '')}"[:400]


def build_task(brief: Brief, answer: dict[str, Any], model: str) -> tuple[Task, list[ToolCall]]:
    """The task record of an answer, and its partial solution ([] when none was given)."""
    _check_grade_source(answer["grade_source"])
    reserved = {f.path for f in brief.skill_files}
    try:
        files = [WorkspaceFile(path=f["path"], content=f["content"]) for f in answer["files"]]
        clash = sorted({f.path for f in files} & reserved)
        if clash:
            raise Failure("bad_record", f"files: {clash[0]} is a skill file already in the workspace; leave it out")
        paths = [f.path for f in files]
        dupes = sorted({p for p in paths if paths.count(p) > 1})
        if dupes:
            raise Failure("bad_record", f"files: {dupes[0]} is listed twice")
        steps = [ToolCall(name=s["name"], arguments=s["arguments"]) for s in answer["reference"]["steps"]]
        partial = [ToolCall(name=s["name"], arguments=s["arguments"]) for s in answer.get("partial_steps") or []]
        rubric = None
        if answer.get("rubric") or answer.get("expected_behavior"):
            rubric = Rubric(rules=[RubricRule(name=r["name"], description=r["description"],
                                              file_path=r.get("file_path") or None)
                                   for r in answer.get("rubric") or []],
                            expected_behavior=answer.get("expected_behavior"))
            if not rubric.rules:
                rubric = None
        task = Task(
            id=brief.id, source=brief.source, category=brief.category, subcategory=brief.subcategory,
            operations=list(brief.operations), persona=brief.persona, skills=list(brief.skills),
            instruction=answer["instruction"].strip(),
            workspace=WorkspaceSpec(files=list(brief.skill_files) + files),
            verifier=VerifierSpec(code=CodeCheck(kind="python", source=answer["grade_source"], timeout_seconds=60),
                                  rubric=rubric),
            reference=ReferenceSolution(steps=steps, final_message=answer["reference"].get("final_message") or "Done."),
            timeout_seconds=900,
            metadata={**brief.metadata, "generator": "llm", "model": model},
        )
    except ValidationError as exc:
        raise Failure("bad_record", _validation_message(exc)) from None
    return task, partial


# --------------------------------------------------------------------------------------------- static checks


def answer_leaks(task: Task) -> str | None:
    """A reference output that is already in the request or in an input file, verbatim (None: no leak)."""
    inputs = [("the request", task.instruction)] + [(f.path, f.content) for f in task.workspace.files if f.content]
    for step in task.reference.steps if task.reference else []:
        content = step.arguments.get("content") if step.name == "write" else None
        if not isinstance(content, str) or len(content.strip()) < LEAK_MIN_CHARS:
            continue
        needle = content.strip()
        for where, text in inputs:
            if needle in text:
                return f"the content the reference writes to {step.arguments.get('path')} is already in {where}"
    return None


_NETWORK = re.compile(r"\b(curl|wget|nc|ncat|netcat|ssh|scp|rsync|ftp|telnet|socket|urllib|http\.client|"
                      r"requests\.(get|post)|httpx|aiohttp)\b|/dev/(tcp|udp)/")
_ABS_PATH = re.compile(r"(?<![\w./~-])(/[A-Za-z][\w.-]*(?:/[\w.-]+)*)")
_ALLOWED_PREFIXES = ("/usr/", "/bin/", "/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/tmp")


def unsafe_reference(task: Task) -> str | None:
    """What in the reference reaches outside the workspace (network tools, host paths), or None.

    The sandbox contains such commands anyway (no network, its own file system); a task whose solution tries
    is still unfit to train on: it teaches exactly that."""
    mount = task.workspace.mount_dir.rstrip("/")
    for step in task.reference.steps if task.reference else []:
        if step.name not in ("exec", "bash"):
            continue
        cmd = str(step.arguments.get("command", ""))
        m = _NETWORK.search(cmd)
        if m:
            return f"reference command uses the network ({m.group(0)!r}): {cmd[:160]!r}"
        for p in _ABS_PATH.findall(cmd):
            if p == mount or p.startswith(mount + "/") or p.startswith(_ALLOWED_PREFIXES) or p in ("/usr", "/bin"):
                continue
            return f"reference command touches a path outside the workspace ({p}): {cmd[:160]!r}"
    return None


# --------------------------------------------------------------------------------------------- review


def _grade_text(task: Task) -> str:
    """The task's grade() as a reviewer reads it (rendered from its checks when they are data)."""
    code = task.verifier.code
    if code is None or code.kind == "shell":
        return ""
    from clawgym.checks import render_grade_source

    return render_grade_source(task)


def review_messages(task: Task) -> list[dict[str, str]]:
    files = "\n".join(f"--- {f.path}\n{(f.content or '[binary]')[:1500]}" for f in task.workspace.files
                      if not f.path.startswith("skills/")) or "(none)"
    ref = "\n".join(f"- {s.name} {json.dumps(s.arguments)[:600]}" for s in task.reference.steps) if task.reference else ""
    fields = {"instruction": task.instruction, "files": files, "reference": ref,
              "grade": _grade_text(task)[:4000]}
    # one pass over the template (its JSON example has braces; the task's texts may contain "{files}")
    prompt = re.sub(r"\{(instruction|files|grade|reference)\}", lambda m: fields[m.group(1)], REVIEW_PROMPT)
    return [{"role": "user", "content": prompt}]


def parse_review(text: str) -> tuple[bool, str]:
    """(accepted, why). Raises Failure('review_unparsed') when the answer holds no review."""
    try:
        data = extract_json(text)
    except Failure:
        data = None
    if not isinstance(data, dict) or not ({"answer_leak", "factual_errors", "verdict"} & set(data)):
        raise Failure("review_unparsed", f"the review holds no JSON verdict: {(text or '')[:160]!r}")
    leak = data.get("answer_leak") in (True, "true", "yes")
    errors = [str(e) for e in data.get("factual_errors") or [] if str(e).strip()] \
        if isinstance(data.get("factual_errors"), list) else []
    verdict = str(data.get("verdict", "")).strip().lower()
    reason = str(data.get("reason", "")).strip()
    if leak:
        return False, "answer_leak: " + (reason or "the reviewer found the answer in the request or inputs")
    if errors:
        return False, "factual_error: " + "; ".join(errors)[:400]
    if verdict == "reject":
        return False, "rejected: " + (reason or "no reason given")
    return True, reason


# --------------------------------------------------------------------------------------------- one brief


@dataclass
class Settings:
    """How candidates are generated and checked."""

    model: str
    max_repairs: int = MAX_REPAIRS
    temperature: float = 0.7
    max_tokens: int = 4096
    review_max_tokens: int = 512
    review: bool = True  # the LLM review (answer leaks, factual errors)
    call_timeout: float | None = None  # per call, else the client's


@dataclass
class Round:
    round: int
    reason: str | None  # None: passed
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "reason": self.reason, "detail": self.detail}


@dataclass
class Outcome:
    brief: Brief
    task: Task | None
    reason: str | None = None
    detail: str = ""
    rounds: list[Round] = field(default_factory=list)
    generation: Tokens = field(default_factory=Tokens)
    review: Tokens = field(default_factory=Tokens)
    last_answer: str = ""


class Rejection(Record):
    """One line of `<output>.rejected.jsonl`: a brief whose task was not kept, and why."""

    id: str
    category: str = ""
    reason: str
    detail: str = ""
    rounds: list[dict[str, Any]] = Field(default_factory=list)
    tokens: dict[str, int] = Field(default_factory=dict)
    brief: dict[str, Any] = Field(default_factory=dict)
    last_answer: str = Field(default="", description="The model's last answer, clipped, for inspection.")


def feedback(failure: Failure) -> str:
    return (f"The task failed a check ({failure.reason}): {failure.detail}\n"
            "Fix it and answer with the complete corrected JSON object only.")


def _validation_failure(v, had_partial: bool) -> Failure | None:
    """The sandbox validation's verdict as a Failure (None: passed)."""
    if v.ok or (v.reason == "partial_not_between" and not had_partial):
        return None
    detail = v.detail
    oracle = v.oracle
    if v.reason == "reference_below_1" and oracle is not None and oracle.output_tail:
        detail += f"\ngrader output (last lines):\n{oracle.output_tail[-800:]}"
    if v.reason == "noop_above_0":
        detail += " (these checks must give 0 before the agent acts: check that the output exists first)"
    return Failure(v.reason or "invalid", detail[:1500])


def validate_here(cand: Any, backend: SandboxBackend) -> Any:
    """Step 4 in a sandbox of `backend` (here, or on a cluster node): a broken sandbox is an `infra_error`."""
    from clawgym.synth.validate import Validation, validate_candidate

    try:
        return validate_candidate(cand, backend)
    except SandboxError as exc:
        return Validation(False, "infra_error", str(exc))


class ExecutorValidator:
    """`validator(candidate) -> Validation` where an executor runs work (a Ray cluster's nodes, one sandbox slot
    each): :func:`validate_here` with the backend of that place; a validation the executor could not run anywhere
    (its nodes lost) is an `infra_error`. `describe()` is the yield report's `executor` section."""

    def __init__(self, executor: Any, sandbox: str):
        self.calls = executor.sandbox_calls(validate_here, sandbox, what="validation")

    def __call__(self, cand: Any) -> Any:
        from clawgym.rollout.executor import WorkLost
        from clawgym.synth.validate import Validation

        try:
            return self.calls(cand)
        except WorkLost as exc:
            return Validation(False, "infra_error", str(exc))

    def describe(self) -> dict[str, Any]:
        """The executor, its nodes' checks, validations per node, nodes lost."""
        info = dict(self.calls.describe())
        by_node, lost = info.pop("by_node", {}), info.pop("lost", [])
        return {**info, "validations_by_node": by_node, "lost": lost}

    def cancel(self) -> None:
        """Ctrl-C: stop every validation in flight."""
        self.calls.cancel()

    def close(self) -> None:
        """Release what the calls hold (a backend made for them)."""
        self.calls.close()


class Generator:
    """Turns briefs into kept tasks or rejections (thread-safe; one instance per run)."""

    def __init__(self, client: LLMClient, backend: SandboxBackend, settings: Settings,
                 review_client: LLMClient | None = None, dedup=None, embedder=None,
                 validator: Callable[[Any], Any] | None = None):
        """`validator(candidate) -> Validation`: where the sandbox validation runs (default: here, with
        `backend`; an executor's nodes with :class:`ExecutorValidator`)."""
        self.validator = validator or (lambda cand: validate_here(cand, backend))
        self.client = client
        self.review_client = review_client or client
        self.backend = backend
        self.settings = settings
        self.dedup = dedup  # a clawgym.synth.dedup.DedupIndex, or None
        self.embedder = embedder
        # called with (round, failure, whether a repair is asked for) on every failure met
        self.on_failure: Callable[[int, Failure, bool], None] | None = None

    def _fail(self, out: Outcome, rnd: int, reason: str, detail: str, repair: bool = False) -> None:
        out.rounds.append(Round(rnd, reason, detail[:1500]))
        if not repair:
            out.reason, out.detail = reason, detail
        if self.on_failure:
            self.on_failure(rnd, Failure(reason, detail), repair)

    def _call(self, client: LLMClient, messages: list[dict], tokens: Tokens, max_tokens: int, seed: int):
        params: dict[str, Any] = {"temperature": self.settings.temperature, "max_tokens": max_tokens, "seed": seed}
        res = client.chat(messages, **params)
        tokens.add(res.usage)
        return res

    def _embedding(self, task: Task):
        from clawgym.synth.dedup import task_text

        return self.embedder.encode([task_text(task)])[0]

    def run(self, brief: Brief) -> Outcome:
        """The outcome of one brief; never raises (a bug of ours is counted as `internal_error`)."""
        try:
            return self._run(brief)
        except Exception as exc:  # noqa: BLE001 (one brief must not stop the run: a bug of ours is counted as internal_error)
            out = Outcome(brief, None)
            self._fail(out, 0, "internal_error", f"{type(exc).__name__}: {exc}"[:1000])
            return out

    def _run(self, brief: Brief) -> Outcome:
        from clawgym.synth.compose import Candidate
        from clawgym.synth.ops.base import StepPlan

        s = self.settings
        out = Outcome(brief, None)
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": brief_prompt(brief)}]
        last_answer = ""
        for rnd in range(s.max_repairs + 1):
            try:
                res = self._call(self.client, messages, out.generation, s.max_tokens, brief.seed * 31 + rnd)
            except LLMError as exc:
                self._fail(out, rnd, "llm_error", str(exc))
                return out
            last_answer = res.content or ""
            messages.append({"role": "assistant", "content": last_answer})
            emb = None
            try:
                task, partial = build_task(brief, parse_answer(last_answer), self.client.model)
                leak = answer_leaks(task)
                if leak:
                    raise Failure("answer_leak", leak)
                if self.dedup is not None and self.embedder is not None:
                    emb = self._embedding(task)
                    near = self.dedup.nearest(task.category, emb)
                    if near is not None and near[1] >= self.dedup.threshold:
                        raise Failure("duplicate", f"the request is too close to task {near[0]} (cosine "
                                                   f"{near[1]:.3f}); write a clearly different task")
                plan = StepPlan(operation="+".join(brief.operations) or "llm", instruction=task.instruction,
                                checks=[], steps=list(task.reference.steps), partial=partial)
                cand = Candidate(task=task, plans=[plan], fingerprint=hashlib.sha256(
                    task.model_dump_json().encode()).hexdigest()[:20])
                v = self.validator(cand)
                if v.reason == "infra_error":
                    self._fail(out, rnd, "infra_error", v.detail)
                    return out
                failure = _validation_failure(v, bool(partial))
                if failure:
                    raise failure
                unsafe = unsafe_reference(task)
                if unsafe:
                    raise Failure("unsafe_reference", unsafe)
                if s.review:
                    self._review(task, out, brief.seed)
            except Failure as f:
                final = f.reason == "review_unparsed" or rnd == s.max_repairs
                self._fail(out, rnd, f.reason, f.detail, repair=not final)
                if final:
                    out.last_answer = last_answer
                    return out
                messages.append({"role": "user", "content": feedback(f)})
                continue
            except LLMError as exc:  # the review's endpoint failed
                self._fail(out, rnd, "llm_error", str(exc))
                return out
            if self.dedup is not None and emb is not None:
                match = self.dedup.add([task.id], [task.category], emb[None, :])[0]
                if match is not None:  # a task kept meanwhile by another worker says the same
                    self._fail(out, rnd, "duplicate",
                               f"too close to task {match.duplicate_of} (cosine {match.similarity:.3f})")
                    out.last_answer = last_answer
                    return out
            out.rounds.append(Round(rnd, None))
            meta = {**task.metadata, "repair_rounds": rnd,
                    "tokens": {"generation": out.generation.as_dict(), "review": out.review.as_dict()},
                    "validation": {"reference": v.oracle.score if v.oracle else None,
                                   "noop": v.noop.score if v.noop else None,
                                   "partial": v.partial.score if (v.partial and partial) else None}}
            out.task = task.model_copy(update={"metadata": meta})
            return out
        return out  # not reached: the loop returns on its last round

    def _review(self, task: Task, out: Outcome, seed: int) -> None:
        """The LLM review; asks once more when the answer cannot be read. Raises Failure when it rejects."""
        messages = review_messages(task)
        for attempt in range(2):
            res = self._call(self.review_client, messages, out.review, self.settings.review_max_tokens,
                             seed * 31 + 7 + attempt)
            try:
                ok, why = parse_review(res.content)
            except Failure:
                if attempt == 1:
                    raise
                messages = messages + [{"role": "assistant", "content": res.content or ""},
                                       {"role": "user", "content": "Answer with the JSON object only."}]
                continue
            if not ok:
                kind, _, rest = why.partition(": ")
                raise Failure(f"review_{kind}", rest or why)
            return


# --------------------------------------------------------------------------------------------- the run


def rejected_path(output: Path) -> Path:
    return output.with_name(output.name + ".rejected.jsonl")


def yield_path(output: Path) -> Path:
    return output.with_name(output.name + ".yield.json")


def _brief_dict(b: Brief) -> dict[str, Any]:
    return {"category": b.category, "subcategory": b.subcategory, "operations": b.operations,
            "persona": b.persona, "skills": b.skills, "seed": b.seed, "metadata": b.metadata}


def generate_tasks(  # noqa: C901, PLR0915 (the run's driver: resume, dedup, the workers and the report, in brief order)
    briefs: Sequence[Brief],
    output: Path,
    client: LLMClient,
    backend: SandboxBackend,
    settings: Settings,
    *,
    jobs: int = 4,
    review_client: LLMClient | None = None,
    dedup: bool = True,
    dedup_against: Sequence[Path] = (),
    threshold: float | None = None,
    embedder=None,
    route: str = "persona",
    on_progress: Callable[[int, int], None] | None = None,
    validator: Callable[[Any], Any] | None = None,
) -> YieldReport:
    """Work on every brief whose id is in neither `output` nor `output.rejected.jsonl` (resumable); append kept
    tasks to `output`, rejections to `output.rejected.jsonl` (both in brief order), and write the yield report
    to `output.yield.json`. With `dedup`, candidates are compared with the tasks already in `output` and
    `dedup_against` files, and with each other. `validator`: see :class:`Generator`."""
    if backend.name == "local":
        raise LLMSynthError("the LLM route runs model-written programs: it needs an isolating sandbox "
                            "(bwrap or docker), not 'local'")
    report = YieldReport(route=route, model=settings.model)
    done: set[str] = set()
    existing: list[Task] = []
    if output.exists():
        read = read_records_lenient(output, Task)
        if read.errors:
            raise LLMSynthError(f"cannot resume: {read.errors[0]}")
        existing = read.records
        done |= {t.id for t in existing}
        report.resumed_kept = len(existing)
    rpath = rejected_path(output)
    if rpath.exists():
        read_r = read_records_lenient(rpath, Rejection)
        if read_r.errors:
            raise LLMSynthError(f"cannot resume: {read_r.errors[0]}")
        done |= {r.id for r in read_r.records}
        report.resumed_rejected = len(read_r.records)
    todo = [b for b in briefs if b.id not in done]
    index = None
    if dedup:
        from clawgym.synth.dedup import (
            DEFAULT_THRESHOLD,
            DedupIndex,
            Embedder,
            EmbeddingCache,
            dedup_tasks,
            default_cache_path,
        )

        if embedder is None:
            embedder = Embedder(precision="auto")
            embedder.cache = EmbeddingCache(default_cache_path(embedder.precision))
        index = DedupIndex(threshold if threshold is not None else DEFAULT_THRESHOLD, embedder.dim)
        prior = list(existing)
        for path in dedup_against:
            if not path.exists():
                raise LLMSynthError(f"{path}: no such file")
            read_o = read_records_lenient(path, Task)
            if read_o.errors:
                raise LLMSynthError(str(read_o.errors[0]))
            prior += read_o.records
        if prior:
            dedup_tasks(prior, embedder, index=index)
    gen = Generator(client, backend, settings, review_client=review_client, dedup=index, embedder=embedder,
                    validator=validator)
    lock = threading.Lock()

    def on_failure(rnd: int, f: Failure, repair: bool) -> None:
        with lock:
            report.failure(rnd, f.reason, f.detail)
            report.repair_requests += repair

    gen.on_failure = on_failure
    total = len(briefs)
    finished = len(briefs) - len(todo)
    if on_progress:
        on_progress(finished, total)
    appender = JsonlAppender(output)
    rejects = JsonlAppender(rpath)
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="llm-synth") as pool:
            queue = list(enumerate(todo))
            pending: dict[Any, int] = {}  # future -> brief position
            done_out: dict[int, Outcome] = {}  # finished, waiting for the briefs before them to be written
            written = 0
            # how far ahead of the first unwritten brief work may go (bounds what waits in memory)
            window = max(1, jobs) * 8
            try:
                while queue or pending:
                    while queue and len(pending) < max(1, jobs) * 2 and queue[0][0] - written < window:
                        i, b = queue.pop(0)
                        pending[pool.submit(gen.run, b)] = i
                    finished_now, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                    for fut in finished_now:
                        done_out[pending.pop(fut)] = fut.result()
                        finished += 1
                        if on_progress:
                            on_progress(finished, total)
                    while written in done_out:
                        o: Outcome = done_out.pop(written)
                        written += 1
                        with lock:
                            report.generation.merge(o.generation)
                            report.judge.merge(o.review)
                            rounds = o.rounds[-1].round if o.rounds else 0
                            report.outcome(o.brief.category, o.task is not None, rounds, o.reason)
                        if o.task is not None:
                            appender.append(o.task)
                        else:
                            rejects.append(Rejection(
                                id=o.brief.id, category=o.brief.category, reason=o.reason or "unknown",
                                detail=o.detail[:2000], rounds=[r.as_dict() for r in o.rounds],
                                tokens={"generation": o.generation.prompt + o.generation.completion,
                                        "review": o.review.prompt + o.review.completion},
                                brief=_brief_dict(o.brief), last_answer=o.last_answer[:4000]))
            except BaseException:
                if validator is not None and hasattr(validator, "cancel"):
                    validator.cancel()  # validations in flight on a cluster
                for fut in pending:
                    fut.cancel()
                raise
    finally:
        appender.close()
        rejects.close()
        if validator is not None and hasattr(validator, "describe"):
            report.executor = validator.describe()
        from clawgym.core.atomic import write_json

        write_json(yield_path(output), report.as_dict())
    return report


# --------------------------------------------------------------------------------------------- persona briefs


def persona_briefs(n: int, seed: int, *, categories: list[str] | None = None, operations: list[str] | None = None,
                   max_ops: int | None = None, taxonomy_path: Path | None = None,
                   personas_path: Path | None = None) -> list[Brief]:
    """Briefs 0..n-1 of a seed for the persona route: subcategories in turn (every one is covered), a persona
    whose needs fit it, 1..max_ops (default 3) of its operations. The same seed gives the same briefs."""
    from clawgym.core.taxonomy import load_taxonomy
    from clawgym.synth.personas import load_personas, persona_summary

    tax = load_taxonomy(taxonomy_path)
    personas = load_personas(personas_path, tax)
    subs = [s for c in tax.categories for s in c.subcategories
            if not categories or c.id in categories or c.name in categories]
    if operations:
        unknown = [o for o in operations if o not in {op.id for op in tax.operations}]
        if unknown:
            raise LLMSynthError(f"unknown operation {unknown[0]!r}")
        subs = [s for s in subs if set(s.operations) & set(operations)]
    if not subs:
        raise LLMSynthError("no subcategory fits the given --categories / --operations")
    cap = max(1, max_ops or 3)
    briefs = []
    for i in range(n):
        rng = random.Random(f"clawgym-llm-synth:{seed}:{i}")
        sub = subs[i % len(subs)]
        pool = [o for o in sub.operations if not operations or o in operations]
        k = min(len(pool), rng.randint(1, cap))
        ops = rng.sample(pool, k)
        fitting = [p for p in personas if sub.id in p.subcategories] or personas
        persona = rng.choice(fitting)
        cat = tax.category_of(sub.id)
        briefs.append(Brief(
            id=f"llm-persona-s{seed}-{i:06d}", category=cat.name, subcategory=sub.name, operations=ops,
            operation_notes=[f"{o}: {tax.operation(o).description}" for o in ops],
            persona=persona_summary(persona), persona_tone=persona.tone + (
                f" ({persona.writing_quirks})" if persona.writing_quirks else ""),
            context=f"The persona typically has files like: {', '.join(persona.files[:5])}.",
            source="synth-persona-llm", seed=seed * 1_000_003 + i,
            metadata={"persona_id": persona.id, "category_id": cat.id, "subcategory_id": sub.id, "route": "persona"},
        ))
    return briefs


def synthesize_llm(
    briefs: Sequence[Brief],
    output: Path,
    settings: Settings,
    *,
    base_url: str | None = None,
    sandbox: str = "bwrap",
    jobs: int = 4,
    request_timeout: float = 600.0,
    dedup: bool = True,
    dedup_against: Sequence[Path] = (),
    threshold: float | None = None,
    route: str = "persona",
    announce: Callable[[Any], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    executor: Any = None,
) -> YieldReport:
    """:func:`generate_tasks` with its parts set up: the model's endpoint (`base_url`, else the embedded server
    for a local model, logged to `<output>.server.log`), the client and the sandbox backend. `executor`: an
    entered executor (Ray's) to validate on its nodes (None: here)."""
    from clawgym.llm.endpoint import model_endpoint
    from clawgym.sandbox import get_backend

    try:
        backend = get_backend(sandbox)
    except ValueError as exc:
        raise LLMSynthError(str(exc)) from None
    if executor is not None:  # keep the cluster's sandbox slots busy: a generation thread per slot at least
        jobs = max(jobs, executor.capacity())
    try:
        with model_endpoint(settings.model, base_url, log_path=output.with_name(output.name + ".server.log"),
                            on_start=announce) as url:
            client = LLMClient(settings.model, url, max_concurrency=max(1, jobs), timeout=request_timeout)
            validator = None
            try:
                validator = ExecutorValidator(executor, backend.name) if executor is not None else None
                return generate_tasks(briefs, output, client, backend, settings, jobs=jobs, dedup=dedup,
                                      dedup_against=dedup_against, threshold=threshold, route=route,
                                      on_progress=on_progress, validator=validator)
            finally:
                if validator is not None:
                    validator.close()
                client.close()
    finally:
        backend.close()


# --------------------------------------------------------------------------------------------- skill briefs


def skill_briefs(n: int, seed: int, *, skills_dir: Path | None = None, skills: list[str] | None = None,
                 taxonomy_path: Path | None = None, personas_path: Path | None = None) -> list[Brief]:
    """Briefs 0..n-1 of a seed for the skill route: primary skills in turn (those named, else every eligible
    one of the catalog), up to one supporting skill sharing an operation, the primary skill's annotated
    operations, a persona whose subcategories use one of them. The skills' folders go into the workspace at
    `skills/<name>/` as the template skill route places them (:func:`clawgym.synth.skill_route.skill_files`)."""
    from clawgym.skills.importer import slug
    from clawgym.synth.personas import persona_summary
    from clawgym.synth.skill_route import WORKSPACE_SKILLS_DIR, SkillRouteConfig, load_state

    st = load_state(SkillRouteConfig(
        skills_dir=str(skills_dir) if skills_dir else None, taxonomy_path=str(taxonomy_path) if taxonomy_path else None,
        personas_path=str(personas_path) if personas_path else None, primary=tuple(skills or ())))
    tax = st.taxonomy
    known_ops = {o.id for o in tax.operations}
    briefs = []
    for i in range(n):
        rng = random.Random(f"clawgym-llm-synth-skill:{seed}:{i}")
        primary = st.primary[i % len(st.primary)]
        ops = [o for o in primary.annotations.operations if o in known_ops][:3] or ["generate_from_template"]
        others = [s for s in st.skills if s.name != primary.name and set(s.annotations.operations) & set(ops)]
        used = [primary] + ([rng.choice(others)] if others and rng.random() < 0.5 else [])
        subs = [s for o in ops for s in tax.subcategories_for(o)] if ops[0] in known_ops else tax.subcategories
        sub = rng.choice(subs or tax.subcategories)
        fitting = [p for p in st.personas if sub.id in p.subcategories] or st.personas
        persona = rng.choice(fitting)
        cat = tax.category_of(sub.id)
        briefs.append(Brief(
            id=f"llm-skill-s{seed}-{i:06d}", category=cat.name, subcategory=sub.name, operations=ops,
            operation_notes=[f"{o}: {tax.operation(o).description}" for o in ops if o in known_ops],
            persona=persona_summary(persona), persona_tone=persona.tone,
            skills=[s.name for s in used], skill_files=[f for s in used for f in st.files[s.name]],
            skill_notes=[f"{WORKSPACE_SKILLS_DIR}/{slug(s.name)}/SKILL.md: {s.annotations.summary}" for s in used],
            context=f"The task is grounded in the skill {primary.name!r}: the agent needs what its SKILL.md says.",
            source="synth-skill-llm", seed=seed * 1_000_003 + i,
            metadata={"persona_id": persona.id, "category_id": cat.id, "subcategory_id": sub.id, "route": "skill",
                      "skills": {"primary": primary.name, "supporting": [s.name for s in used[1:]]}},
        ))
    return briefs
