"""User personas that persona-driven task synthesis samples from.

A personas file is YAML: either a list of persona mappings, or a mapping ``{version: 1, personas: [...]}``.
Each persona is validated as :class:`Persona` (unknown fields are errors); ids must be unique, and so must
the (occupation, domain, name) triple. Given a :class:`~clawgym.core.taxonomy.Taxonomy`, every
``subcategories`` id must exist in it. A problem raises :class:`PersonaError` whose one-line message reads
``file:line: field: message`` with the line of the offending entry (for a missing field: the persona's
first line). See ``personas/README.md`` for the schema and how to add your own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from clawgym.core.taxonomy import (
    ID_PATTERN,
    SynthDataError,
    Taxonomy,
    YamlSource,
    format_loc,
    raise_validation,
    read_yaml,
)

PERSONAS_ENV = "CLAWGYM_PERSONAS"
REPO_PERSONAS_PATH = Path(__file__).resolve().parents[3] / "personas" / "personas.yaml"


class PersonaError(SynthDataError):
    """A personas file that cannot be read, or a persona that is invalid, duplicated or unresolved."""


def _short_strings(v: list[str], what: str) -> list[str]:
    seen: set[str] = set()
    for s in v:
        if not s.strip():
            raise ValueError(f"{what} must not be blank")
        if s in seen:
            raise ValueError(f"{what} {s!r} is listed twice")
        seen.add(s)
    return v


class Persona(BaseModel):
    """A user persona: who they are, how they write, what they work with and where they need help."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    id: str = Field(pattern=ID_PATTERN, description="snake_case, unique in the file.")
    name: str = Field(min_length=1, description="Full name.")
    age: int = Field(ge=10, le=110, strict=True)
    occupation: str = Field(min_length=1)
    domain: str = Field(min_length=1, description="Industry or field.")
    location: str = Field(min_length=1, description="City, country.")
    goals: list[str] = Field(min_length=1, max_length=5, description="What they are trying to achieve.")
    tone: str = Field(min_length=1, description="How they write requests.")
    writing_quirks: str | None = Field(default=None, description="Habits of their writing, if any.")
    tools: list[str] = Field(min_length=1, description="Software they live with.")
    files: list[str] = Field(min_length=1, description="Files they typically have (paths or globs).")
    interests: list[str] = Field(min_length=1, max_length=5)
    subcategories: list[str] = Field(min_length=1, max_length=8, description="Taxonomy subcategory ids.")

    @field_validator("goals", "tools", "files", "interests", "subcategories")
    @classmethod
    def _clean_lists(cls, v: list[str], info: ValidationInfo) -> list[str]:
        return _short_strings(v, info.field_name.rstrip("s"))


def default_personas_path() -> Path:
    """``$CLAWGYM_PERSONAS`` if set, else the repository's ``personas/personas.yaml``."""
    env = os.environ.get(PERSONAS_ENV)
    return Path(env) if env else REPO_PERSONAS_PATH


def _entries(src: YamlSource) -> tuple[list, tuple[str | int, ...]]:
    """The list of persona entries and its location in the document."""
    data = src.data
    if isinstance(data, list):
        return data, ()
    if isinstance(data, dict):
        extra = sorted(set(data) - {"version", "personas"}, key=str)
        if extra:
            loc = (str(extra[0]),)
            raise PersonaError(str(src.path), src.line(loc), format_loc(loc), "unknown field")
        if not isinstance(data.get("personas"), list):
            loc = ("personas",)
            raise PersonaError(str(src.path), src.line(loc), "personas", "expected a list of personas")
        return data["personas"], ("personas",)
    got = "an empty file" if data is None else type(data).__name__
    raise PersonaError(str(src.path), src.line(()), None,
                       f"expected a list of personas (or a mapping with `personas:`), got {got}")


def load_personas(path: Path | str | None = None, taxonomy: Taxonomy | None = None) -> list[Persona]:
    """Load and validate personas (default path: :func:`default_personas_path`).

    With ``taxonomy``, every subcategory id a persona names must exist in it.
    """
    path = default_personas_path() if path is None else Path(path)
    src = read_yaml(path, PersonaError)
    entries, base = _entries(src)
    if not entries:
        raise PersonaError(str(path), src.line(base), format_loc(base) if base else None, "no personas")

    def fail(loc: tuple[str | int, ...], message: str) -> NoReturn:
        raise PersonaError(str(path), src.line(loc), format_loc(loc), message)

    personas: list[Persona] = []
    first_id: dict[str, int] = {}
    first_triple: dict[tuple[str, str, str], int] = {}
    for i, entry in enumerate(entries):
        loc = (*base, i)
        if not isinstance(entry, dict):
            fail(loc, f"expected a persona mapping, got {type(entry).__name__}")
        try:
            p = Persona.model_validate(entry)
        except ValidationError as exc:
            raise_validation(src, exc, loc, PersonaError)
        if p.id in first_id:
            fail((*loc, "id"), f"duplicate persona id {p.id!r} (first defined at line {first_id[p.id]})")
        first_id[p.id] = src.line(loc) or 0
        triple = (p.occupation.casefold(), p.domain.casefold(), p.name.casefold())
        if triple in first_triple:
            fail(loc, f"persona {p.id!r} repeats the occupation, domain and name of the persona at line "
                      f"{first_triple[triple]}")
        first_triple[triple] = src.line(loc) or 0
        if taxonomy is not None:
            for k, sub in enumerate(p.subcategories):
                if not taxonomy.has_subcategory(sub):
                    fail((*loc, "subcategories", k), f"unknown subcategory {sub!r} in persona {p.id!r}")
        personas.append(p)
    return personas


def persona_summary(p: Persona) -> str:
    """One sentence describing the persona, as stored in ``Task.persona``."""
    goals = [g.rstrip(".") for g in p.goals]
    wants = goals[0] if len(goals) == 1 else ", ".join(goals[:-1]) + " and " + goals[-1]
    tools = p.tools[:4]
    uses = tools[0] if len(tools) == 1 else ", ".join(tools[:-1]) + " and " + tools[-1]
    return (f"{p.name}, {p.age}, {p.occupation} ({p.domain}) in {p.location}, who wants to {wants} and works "
            f"with {uses} (writing style: {p.tone.rstrip('.')}).")


def split_personas(path: Path | str | None, out_dir: Path | str) -> tuple[Path, Path, int, int]:
    """Write two persona files with disjoint personas (`personas_train.yaml`, `personas_test.yaml`: sorted by
    id, even positions in the first, odd in the second), for train and held-out task sets that share no persona.
    Returns both paths and sizes. Files already holding the same text are left alone (reruns resume)."""
    import yaml

    from clawgym.core.atomic import write_text

    src = Path(path) if path else default_personas_path()
    load_personas(src)  # a bad file fails here with its file:line: field message
    data = yaml.safe_load(src.read_text())
    personas = sorted(data["personas"], key=lambda p: p["id"])
    halves = (personas[0::2], personas[1::2])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = (out / "personas_train.yaml", out / "personas_test.yaml")
    for dest, half in zip(paths, halves, strict=True):
        text = yaml.safe_dump({"version": data.get("version", 1), "personas": half}, sort_keys=False,
                              allow_unicode=True)
        if not dest.exists() or dest.read_text() != text:
            write_text(dest, text)
    return paths[0], paths[1], len(halves[0]), len(halves[1])
