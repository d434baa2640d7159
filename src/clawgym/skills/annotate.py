"""Annotating skills: by an LLM through the project's client, or by rules offline.

The LLM is asked for one JSON object; the answer is validated against :data:`ANSWER_SCHEMA` (operation ids
from the taxonomy, booleans, an ISO language code...). A call that fails, an answer with no JSON object or one
that does not validate falls back to the rules (:mod:`clawgym.skills.rules`), and the annotations record why
(`annotated_by: rules`, `note: "llm:<model> failed: <reason>"`), so nothing is silently guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from clawgym.core.answer_json import AnswerJSONError, answer_json
from clawgym.core.atomic import write_text
from clawgym.core.taxonomy import Taxonomy, load_taxonomy
from clawgym.llm.client import LLMClient, LLMError
from clawgym.skills.catalog import load_catalog
from clawgym.skills.parse import with_annotations
from clawgym.skills.rules import MAX_OPERATIONS, rule_annotations
from clawgym.skills.skill import Skill, SkillAnnotations, SkillError

MAX_SKILL_CHARS = 8000
ANSWER_MAX_TOKENS = 300  # the JSON answer is about 120 tokens


def answer_schema(taxonomy: Taxonomy) -> dict[str, Any]:
    """The JSON Schema an LLM's annotation answer must satisfy."""
    return {
        "type": "object",
        "required": ["operations", "language", "summary", "auth_required", "has_risk", "required_env",
                     "text_only_compatible"],
        "additionalProperties": False,
        "properties": {
            "operations": {"type": "array", "minItems": 1, "maxItems": MAX_OPERATIONS, "uniqueItems": True,
                           "items": {"enum": [op.id for op in taxonomy.operations]}},
            "language": {"type": "string", "pattern": "^[a-z]{2}$"},
            "summary": {"type": "string", "minLength": 1, "maxLength": 300},
            "auth_required": {"type": "boolean"},
            "has_risk": {"type": "boolean"},
            "required_env": {"type": "array", "uniqueItems": True,
                             "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}},
            "text_only_compatible": {"type": "boolean"},
        },
    }


SYSTEM = "You annotate agent skills for a catalog of training tasks. Answer with one JSON object and nothing else."


def annotation_prompt(skill: Skill, taxonomy: Taxonomy) -> str:
    ops = "\n".join(f"- {op.id}: {op.description}" for op in taxonomy.operations)
    text = skill.text if len(skill.text) <= MAX_SKILL_CHARS else skill.text[:MAX_SKILL_CHARS] + "\n[...cut...]"
    return (
        f"Annotate the skill `{skill.name}` (an OpenClaw SKILL.md, shown at the end).\n\n"
        f"Operations to choose from (id: meaning):\n{ops}\n\n"
        "Answer with JSON only, with exactly these keys:\n"
        '{"operations": [1 to 4 operation ids from the list, the most central first],\n'
        ' "language": "ISO 639-1 code of the language the skill is written in, e.g. en",\n'
        ' "summary": "one sentence of at most 200 characters: the job the skill does",\n'
        ' "auth_required": true or false (needs an account, a login, an API key or a token),\n'
        ' "has_risk": true or false (can delete or overwrite data, send or publish on the user\'s behalf, spend '
        'money, or touch credentials or production systems),\n'
        ' "required_env": [names of environment variables the skill needs set],\n'
        ' "text_only_compatible": true or false (doable with file and shell tools alone: no browser, GUI, images '
        "or audio)}\n\n"
        f"SKILL.md:\n<<<\n{text}\n>>>"
    )


class AnnotationFailure(Exception):
    """Why an LLM's annotation was not used (the reason is recorded in the rules' annotations)."""


def _json_object(text: str) -> dict[str, Any]:
    try:
        return answer_json(text)
    except AnswerJSONError as exc:
        raise AnnotationFailure(f"answer has no JSON object: {exc.excerpt or exc.detail}") from None


def llm_annotations(skill: Skill, client: LLMClient, taxonomy: Taxonomy) -> SkillAnnotations:
    """Ask the model; raise AnnotationFailure with the reason when the call or the answer is unusable."""
    try:
        res = client.chat([{"role": "system", "content": SYSTEM},
                           {"role": "user", "content": annotation_prompt(skill, taxonomy)}],
                          temperature=0, max_tokens=ANSWER_MAX_TOKENS)
    except LLMError as exc:
        raise AnnotationFailure(f"call failed: {exc}") from None
    data = _json_object(res.content or "")
    errors = sorted(jsonschema.Draft202012Validator(answer_schema(taxonomy)).iter_errors(data),
                    key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = ".".join(str(p) for p in e.absolute_path) or "answer"
        raise AnnotationFailure(f"answer invalid: {where}: {e.message[:160]}")
    return SkillAnnotations(**data, annotated_by=f"llm:{client.model}")


def annotate_skill(skill: Skill, taxonomy: Taxonomy, client: LLMClient | None = None) -> SkillAnnotations:
    """By the LLM when a client is given (falling back to rules, with the reason), else by rules."""
    if client is None:
        return rule_annotations(skill, taxonomy)
    try:
        return llm_annotations(skill, client, taxonomy)
    except AnnotationFailure as exc:
        return rule_annotations(skill, taxonomy, note=f"llm:{client.model} failed: {exc}"[:300])


@dataclass
class AnnotateReport:
    annotated: dict[str, SkillAnnotations] = field(default_factory=dict)  # name -> what was written
    kept: list[str] = field(default_factory=list)  # already annotated, left as they were
    errors: list[SkillError] = field(default_factory=list)  # files that are not readable skills

    @property
    def fallbacks(self) -> dict[str, str]:
        """Skills the LLM could not annotate, with the reason."""
        return {n: a.note for n, a in self.annotated.items() if a.note}


def annotate_catalog(
    root: Path | None = None,
    *,
    taxonomy: Taxonomy | None = None,
    client: LLMClient | None = None,
    force: bool = False,
    names: list[str] | None = None,
    jobs: int = 4,
    write: bool = True,
    on_progress: Callable[[str, SkillAnnotations], None] | None = None,
) -> AnnotateReport:
    """Annotate the skills of a catalog that have no annotations (all of them with `force`; only `names` when
    given) and write each back into its SKILL.md (temp file + rename), unless `write` is False."""
    taxonomy = taxonomy or load_taxonomy()
    catalog = load_catalog(root, strict=False)
    report = AnnotateReport(errors=list(catalog.errors))
    if names:
        missing = sorted(set(names) - set(catalog.names))
        if missing:
            raise SkillError(str(catalog.root), None, None, f"no skill named {', '.join(map(repr, missing))}")
    todo = []
    for skill in catalog:
        if names and skill.name not in names:
            continue
        if skill.annotations is not None and not force:
            report.kept.append(skill.name)
            continue
        todo.append(skill)

    def one(skill: Skill) -> tuple[Skill, SkillAnnotations]:
        return skill, annotate_skill(skill, taxonomy, client)

    with ThreadPoolExecutor(max_workers=max(1, jobs if client is not None else 1)) as pool:
        for skill, ann in pool.map(one, todo):
            if write:
                write_text(skill.path, with_annotations(skill, ann))
            report.annotated[skill.name] = ann
            if on_progress:
                on_progress(skill.name, ann)
    return report
