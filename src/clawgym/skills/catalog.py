"""A catalog of skills: a folder of skill folders, each with its SKILL.md.

The shipped catalog is the repository's `skills/` (or the folder `$CLAWGYM_SKILLS` names). Any folder laid out
the way OpenClaw's skill directories or a ClawHub download are reads the same way: skill folders may be nested
at any depth (`skills/<group>/<skill>/SKILL.md`), and a skill's own subfolders (`scripts/`, `references/`) are
not searched for more skills.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from clawgym.core.taxonomy import Taxonomy
from clawgym.skills.parse import parse_skill_md
from clawgym.skills.skill import SKILL_FILE_NAMES, Skill, SkillError

SKILLS_ENV = "CLAWGYM_SKILLS"
REPO_SKILLS_DIR = Path(__file__).resolve().parents[3] / "skills"
IGNORED_DIRS = frozenset({".git", ".hg", ".svn", ".clawhub", ".clawdhub", "node_modules", "__pycache__", ".venv"})


def default_skills_dir() -> Path:
    """``$CLAWGYM_SKILLS`` if set, else the repository's ``skills/``."""
    env = os.environ.get(SKILLS_ENV)
    return Path(env) if env else REPO_SKILLS_DIR


def skill_file_in(folder: Path) -> Path | None:
    """The folder's SKILL.md (or skill.md), if it is a skill folder."""
    for name in SKILL_FILE_NAMES:
        p = folder / name
        if p.is_file():
            return p
    return None


def find_skill_files(root: Path) -> list[Path]:
    """Every skill file under `root` (root itself may be one skill folder), in sorted path order."""
    own = skill_file_in(root)
    if own is not None:
        return [own]
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS and not d.startswith("."))
        if here != root:
            f = skill_file_in(here)
            if f is not None:
                found.append(f)
                dirnames[:] = []  # a skill's own subfolders hold its resources, not more skills
    return sorted(found)


def line_of_key(skill: Skill, key: str) -> int | None:
    """1-based line of a top-level front-matter key (for error messages)."""
    for i, text in enumerate(skill.text.splitlines(), start=1):
        if i > 1 and text.rstrip() in ("---", "..."):
            return None
        if text.startswith(f"{key}:"):
            return i
    return None


@dataclass
class SkillCatalog:
    """The skills of one folder, by name, and the files that could not be read as skills."""

    root: Path
    skills: list[Skill] = field(default_factory=list)  # sorted by name
    errors: list[SkillError] = field(default_factory=list)

    def __iter__(self) -> Iterator[Skill]:
        return iter(self.skills)

    def __len__(self) -> int:
        return len(self.skills)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.skills]

    def get(self, name: str) -> Skill:
        for s in self.skills:
            if s.name == name:
                return s
        raise KeyError(f"no skill named {name!r} in {self.root}")

    def with_operation(self, operation: str) -> list[Skill]:
        return [s for s in self.skills if s.annotations and operation in s.annotations.operations]

    def annotated(self) -> list[Skill]:
        return [s for s in self.skills if s.annotations is not None]


def check_operations(skill: Skill, taxonomy: Taxonomy) -> None:
    """Every annotated operation id must exist in the taxonomy."""
    if skill.annotations is None:
        return
    known = {op.id for op in taxonomy.operations}
    for i, op in enumerate(skill.annotations.operations):
        if op not in known:
            raise SkillError(str(skill.path), line_of_key(skill, "metadata"), f"metadata.clawgym.operations[{i}]",
                             f"unknown operation id {op!r} (not in the taxonomy)")


def load_catalog(root: Path | str | None = None, taxonomy: Taxonomy | None = None,
                 strict: bool = True) -> SkillCatalog:
    """Read every skill under `root` (default :func:`default_skills_dir`).

    With `strict` the first problem raises; otherwise problems are collected in `errors` and the good skills
    kept. Two skills with the same name are a problem (the second one listed). With `taxonomy`, annotated
    operation ids are checked against it."""
    root = default_skills_dir() if root is None else Path(root)
    if not root.is_dir():
        raise SkillError(str(root), None, None, "no such skills folder")
    catalog = SkillCatalog(root=root)
    by_name: dict[str, Path] = {}
    for path in find_skill_files(root):
        try:
            skill = parse_skill_md(path)
            if skill.name in by_name:
                raise SkillError(str(path), line_of_key(skill, "name"), "name",
                                 f"duplicate skill name {skill.name!r} (also {by_name[skill.name]})")
            if taxonomy is not None:
                check_operations(skill, taxonomy)
        except SkillError as exc:
            if strict:
                raise
            catalog.errors.append(exc)
            continue
        by_name[skill.name] = path
        catalog.skills.append(skill)
    catalog.skills.sort(key=lambda s: s.name)
    return catalog
