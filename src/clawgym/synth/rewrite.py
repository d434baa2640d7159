"""The LLM rewrite pass (`--rewrite-model M` on `synth persona` and `synth skill`): an OpenAI-compatible model
rewrites a validated task's request in its persona's voice, and the rewrite is kept only when it is safe.

A rewrite is kept when
  * the model answered (else `model_error`) with JSON `{"request": "..."}` (else `unparsable`);
  * it is not empty (`empty`), not the original (`unchanged`), and its length is within
    [MIN_RATIO, MAX_RATIO] times the original's (`too_short`, `too_long`);
  * every constant of the task (:func:`constants`) appears in it verbatim (`lost_constant`, with the first
    missing one);
  * the task with the new request validates again in a sandbox, exactly as a new candidate is validated
    (`invalid_after_rewrite`, with validation's reason): the echo-request cheat reads the request's text, so a
    rewrite can make a sound task unsound.
A rejected rewrite leaves the task as it was (it is still written); the yield is the share of tasks whose
rewrite was kept. A kept one records `metadata.rewrite = {model, original_sha256, constants}`.

Where it runs: in the synthesis workers (:func:`clawgym.synth.pipeline.work`), right after a chunk's candidates
validated, because they hold the candidate (validation needs its plans) and the sandboxes: the model is asked
for the chunk's rewrites on a few threads, and the rewritten candidates are validated again as one batch. The
parent then sees the final task, so duplicate and near-duplicate removal compare the text that is written, and
the run's index-order writing and resume are untouched (tasks are written whole). A run without
`--rewrite-model` runs none of this and writes the same bytes as before.

Its yield with a real model is unmeasured: the tests use a scripted model server.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clawgym.core.records import Task

if TYPE_CHECKING:
    from clawgym.llm.client import LLMClient
    from clawgym.synth.personas import Persona

MIN_RATIO = 0.5
MAX_RATIO = 3.0
MIN_CONSTANT_CHARS = 2  # shorter check arguments ("a", "3") are not constants: they appear everywhere
THREADS = 4  # model calls in flight per worker
REASONS = ("model_error", "unparsable", "empty", "unchanged", "too_short", "too_long", "lost_constant",
           "invalid_after_rewrite")


@dataclass(frozen=True)
class RewriteConfig:
    """What a worker needs to rewrite: the model, its endpoint (resolved by the parent), and call settings."""

    model: str
    base_url: str
    temperature: float = 0.7
    max_tokens: int = 2048
    timeout: float = 120.0
    max_retries: int = 2


# ----------------------------------------------------------------------------------------------- constants


def _pattern(c: str) -> re.Pattern:
    """`c` verbatim, not as part of a longer word or number (so "3" is not found in "2023")."""
    left = r"(?<![\w.])" if re.match(r"\w", c) else ""
    right = r"(?!\w|\.\d)" if re.search(r"\w$", c) else ""
    return re.compile(left + re.escape(c) + right)


def appears(constant: str, text: str) -> bool:
    return _pattern(constant).search(text) is not None


def _arg_values(value: Any) -> list[str]:
    """Every string and number in a check argument (nested lists and dicts included), as text."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, int | float):
        return [str(value)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _arg_values(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _arg_values(v)]
    return []


def _check_values(task: Task) -> list[str]:
    code = task.verifier.code
    if code is None or code.kind != "checks":
        return []
    out: list[str] = []

    def walk(call) -> None:
        for v in call.args.values():
            out.extend(_arg_values(v))
        for p in call.parts:
            walk(p)

    for c in code.checks or []:
        walk(c)
    return out


def constants(task: Task) -> list[str]:
    """The spans of the request the checks depend on, in order, each once: the request's backtick-quoted spans,
    then the strings and numbers of the check arguments, then the workspace's file paths — the last two only
    where they appear verbatim in the request (a value the request does not state cannot be lost; expected
    answers must not be stated at all). Check values shorter than MIN_CONSTANT_CHARS are left out."""
    text = task.instruction
    found: list[str] = [s for s in re.findall(r"`([^`\n]+)`", text) if s.strip()]
    for s in _check_values(task):
        s = s.strip()
        if len(s) >= MIN_CONSTANT_CHARS and appears(s, text):
            found.append(s)
    for f in task.workspace.files:
        if appears(f.path, text):
            found.append(f.path)
    return list(dict.fromkeys(found))


# ----------------------------------------------------------------------------------------------- the model


def persona_voice(task: Task, persona: Persona | None) -> str:
    if persona is None:
        return task.persona or "a busy professional"
    lines = [f"{persona.name}, {persona.occupation} ({persona.domain}) in {persona.location}.",
             f"Tone: {persona.tone}"]
    if persona.writing_quirks:
        lines.append(f"Writing quirks: {persona.writing_quirks}")
    return "\n".join(lines)


def rewrite_messages(task: Task, persona: Persona | None, consts: list[str]) -> list[dict[str, str]]:
    keep = "\n".join(f"- {c}" for c in consts) or "- (none)"
    system = (
        "You rewrite a user's request to an AI assistant so that it reads as this person wrote it, in their "
        "voice: their tone, writing quirks and occupation.\n\n"
        f"The person:\n{persona_voice(task, persona)}\n\n"
        "Rules: ask for exactly the same work, with the same files, names and values; do not add steps, "
        "answers or hints; every constant listed by the user must appear in your rewrite verbatim (same "
        "characters, same case). Answer with JSON only: {\"request\": \"<the rewritten request>\"}."
    )
    user = f"The request:\n{task.instruction}\n\nConstants that must appear verbatim:\n{keep}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_rewrite(text: str) -> str | None:
    """The rewritten request of a model answer, or None when it is not `{"request": "..."}`."""
    from clawgym.core.answer_json import AnswerJSONError, answer_json

    try:
        data = answer_json(text or "")
    except (AnswerJSONError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("request"), str):
        return data["request"].strip()
    return None


def check_rewrite(original: str, new: str, consts: list[str]) -> tuple[str | None, str]:
    """(None, "") when the text of a rewrite may be kept (validation still to come), else (reason, detail)."""
    if not new.strip():
        return "empty", ""
    if new.strip() == original.strip():
        return "unchanged", ""
    if len(new) < MIN_RATIO * len(original):
        return "too_short", f"{len(new)} chars for {len(original)}"
    if len(new) > MAX_RATIO * len(original):
        return "too_long", f"{len(new)} chars for {len(original)}"
    for c in consts:
        if not appears(c, new):
            return "lost_constant", c
    return None, ""


def ask(client: LLMClient, cfg: RewriteConfig, task: Task, persona: Persona | None) -> dict:
    """One rewrite, before validation: {"text": new request, "constants": [...]} or {"reason", "detail"}."""
    from clawgym.llm.client import LLMError

    consts = constants(task)
    try:
        res = client.chat(rewrite_messages(task, persona, consts), temperature=cfg.temperature,
                          max_tokens=cfg.max_tokens)
    except LLMError as exc:
        return {"reason": "model_error", "detail": str(exc)[:300]}
    new = parse_rewrite(res.content or "")
    if new is None:
        return {"reason": "unparsable", "detail": (res.content or "")[:200]}
    reason, detail = check_rewrite(task.instruction, new, consts)
    if reason:
        return {"reason": reason, "detail": detail[:300]}
    return {"text": new, "constants": consts}


def rewritten(task: Task, new: str, model: str, consts: list[str]) -> Task:
    meta = {**task.metadata, "rewrite": {"model": model,
                                         "original_sha256": hashlib.sha256(task.instruction.encode()).hexdigest(),
                                         "constants": len(consts)}}
    return task.model_copy(update={"instruction": new, "metadata": meta})


def rewrite_candidates(cands: list, client: LLMClient, cfg: RewriteConfig, personas: dict[str, Persona],
                       validate) -> tuple[list, list[dict]]:
    """Rewrite validated candidates: (the candidates to write, each rewritten or as it was, and per candidate
    {"kept": bool, "reason", "detail"}). `validate(cands) -> [Validation]` validates the rewritten ones as a
    batch."""
    def one(c):
        if c.task.sessions:  # further turns would have to be rewritten consistently: not done
            return {"reason": "multi_session", "detail": c.task.id}
        return ask(client, cfg, c.task, personas.get(c.task.metadata.get("persona_id", "")))

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        answers = list(pool.map(one, cands))
    outcomes: list[dict] = [{"kept": False, "reason": a.get("reason"), "detail": a.get("detail", "")}
                            for a in answers]
    todo = [i for i, a in enumerate(answers) if "text" in a]
    new = [dataclasses.replace(cands[i], task=rewritten(cands[i].task, answers[i]["text"], cfg.model,
                                                        answers[i]["constants"])) for i in todo]
    verdicts = validate(new) if new else []
    result = list(cands)
    for i, cand, v in zip(todo, new, verdicts, strict=True):
        if v is not None and not v.ok:
            outcomes[i] = {"kept": False, "reason": "invalid_after_rewrite", "detail": f"{v.reason}: {v.detail}"[:300]}
        else:
            result[i] = cand
            outcomes[i] = {"kept": True, "reason": None, "detail": ""}
    return result, outcomes


@dataclass
class RewriteReport:
    """The report's `rewrite` section: over the tasks this run wrote."""

    model: str
    attempted: int = 0
    kept: int = 0
    rejected: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, outcome: dict) -> None:
        self.attempted += 1
        if outcome.get("kept"):
            self.kept += 1
        else:
            reason = outcome.get("reason") or "unknown"
            self.rejected[reason] += 1
            self.examples.setdefault(reason, outcome.get("detail", ""))

    def as_dict(self) -> dict:
        return {"model": self.model, "attempted": self.attempted, "kept": self.kept,
                "yield": round(self.kept / self.attempted, 4) if self.attempted else None,
                "rejected": dict(self.rejected), "examples": self.examples}
