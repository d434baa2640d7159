"""A skill in OpenClaw's format, and the annotations ClawGym adds to it.

A skill is a folder holding `SKILL.md`: YAML front matter between `---` lines (`name`, `description`, any other
keys) and a Markdown body that tells an agent how to do a job. OpenClaw reads its own runtime metadata from
`metadata.openclaw` (gating on `requires.env`, `requires.bins`, `os`...), and its embedded parser wants
`metadata` as a single-line JSON object. ClawGym's annotations live next to it, under `metadata.clawgym`:
OpenClaw ignores keys of `metadata` other than its own, so an annotated skill still loads in OpenClaw
unchanged, and the annotations travel with the skill wherever it is copied (a task's workspace included).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clawgym.core.errors import RecordError

SKILL_FILE = "SKILL.md"
SKILL_FILE_NAMES = ("SKILL.md", "skill.md")
"""File names a skill folder's main file may have (ClawHub accepts both)."""

ANNOTATION_KEY = "clawgym"
OPENCLAW_KEYS = ("openclaw", "clawdbot", "clawdis", "moltbot")
"""`metadata` keys OpenClaw reads its runtime metadata from (the first is current, the others legacy)."""


class SkillError(RecordError):
    """A SKILL.md that cannot be read or whose front matter is invalid, with its file, line and field."""


class SkillAnnotations(BaseModel):
    """What ClawGym knows about a skill (the fields the ClawGym paper annotates skills with, plus the atomic
    operations of the synthesis taxonomy the skill exercises). Stored in `metadata.clawgym`."""

    model_config = ConfigDict(extra="forbid")

    operations: list[str] = Field(
        min_length=1, max_length=6,
        description="Atomic operation ids of the synthesis taxonomy the skill exercises, most central first.")
    language: str = Field(pattern=r"^[a-z]{2}$", description="ISO 639-1 code of the language the skill is written in.")
    summary: str = Field(min_length=1, max_length=300, description="One sentence: the job the skill does.")
    auth_required: bool = Field(description="Needs an account, a login, an API key or a token to do its job.")
    has_risk: bool = Field(
        description="Can do harm that is hard to undo: deletes or overwrites data, sends or publishes on the "
                    "user's behalf, spends money, touches credentials or production systems.")
    required_env: list[str] = Field(default_factory=list, description="Environment variables the skill needs set.")
    text_only_compatible: bool = Field(
        description="Doable by a text-only agent with file and shell tools (no browser, GUI, images or audio).")
    annotated_by: str = Field(
        default="catalog", description="Who wrote the annotations: catalog (by hand), rules, or llm:<model>.")
    note: str | None = Field(default=None, description="Why the annotator fell back to rules, when it did.")

    @field_validator("operations", "required_env")
    @classmethod
    def _no_repeats(cls, v: list[str]) -> list[str]:
        seen: set[str] = set()
        for s in v:
            if not s.strip():
                raise ValueError("entries must not be blank")
            if s in seen:
                raise ValueError(f"{s!r} is listed twice")
            seen.add(s)
        return v

    def as_metadata(self) -> dict[str, Any]:
        """The JSON object written under `metadata.clawgym` (defaults left out)."""
        return self.model_dump(exclude_none=True)


@dataclass(frozen=True)
class Skill:
    """One parsed SKILL.md."""

    name: str
    description: str
    path: Path  # the SKILL.md file
    text: str  # the whole file, exactly as read
    body: str  # the Markdown after the front matter
    frontmatter: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)  # the `metadata` object (parsed from JSON if a string)
    annotations: SkillAnnotations | None = None

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def openclaw(self) -> dict[str, Any]:
        """OpenClaw's runtime metadata (`metadata.openclaw`, or a legacy alias), {} when absent."""
        for key in OPENCLAW_KEYS:
            value = self.metadata.get(key)
            if isinstance(value, dict):
                return value
        return {}

    @property
    def declared_env(self) -> list[str]:
        """Environment variables the skill's OpenClaw metadata requires (`requires.env`, `primaryEnv`)."""
        oc = self.openclaw
        requires = oc.get("requires") if isinstance(oc.get("requires"), dict) else {}
        names = [e for e in (requires.get("env") or []) if isinstance(e, str)]
        primary = oc.get("primaryEnv")
        if isinstance(primary, str) and primary not in names:
            names.append(primary)
        return names

    @property
    def declared_bins(self) -> list[str]:
        oc = self.openclaw
        requires = oc.get("requires") if isinstance(oc.get("requires"), dict) else {}
        return [b for key in ("bins", "anyBins") for b in (requires.get(key) or []) if isinstance(b, str)]
