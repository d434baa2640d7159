"""`clawgym skills import DIR`: bring any folder of SKILL.md skills into a catalog.

The source may be a user's OpenClaw skills (`~/.openclaw/skills`, `<workspace>/skills`), a ClawHub download or
a repository of skills: skill folders at any depth, with their supporting files. Each good skill is copied whole
to `DEST/<name>/` (its main file as `SKILL.md`), annotated by rules (or the LLM) when it has no annotations; a
folder that cannot be read as a skill is reported with its file, line and field, and the others still import.
Each skill lands by a rename of a fully written temporary folder, so an interrupted import leaves no half skill.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from clawgym.core.taxonomy import Taxonomy, load_taxonomy
from clawgym.llm.client import LLMClient
from clawgym.skills.annotate import annotate_skill
from clawgym.skills.catalog import IGNORED_DIRS, check_operations, find_skill_files, line_of_key
from clawgym.skills.parse import parse_skill_md, with_annotations
from clawgym.skills.skill import SKILL_FILE, Skill, SkillError


def slug(name: str) -> str:
    """A folder name for a skill name: lowercase letters, digits and hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass
class SkillImportResult:
    imported: list[Skill] = field(default_factory=list)  # as written in the destination
    skipped: dict[str, str] = field(default_factory=dict)  # name -> why (already in the catalog)
    errors: list[SkillError] = field(default_factory=list)


def _copy_skill(skill: Skill, text: str, dest_dir: Path) -> None:
    """Write the skill's folder to `dest_dir` (which must not exist) via a temporary sibling and a rename."""
    dest_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest_dir.name}.", dir=dest_dir.parent))
    try:
        def ignore(folder: str, names: list[str]) -> set[str]:
            skip = {n for n in names if n in IGNORED_DIRS}
            if Path(folder) == skill.folder:
                skip.add(skill.path.name)  # written below, annotated
            return skip

        shutil.copytree(skill.folder, tmp, ignore=ignore, dirs_exist_ok=True, symlinks=False)
        (tmp / SKILL_FILE).write_text(text, encoding="utf-8", newline="")
        os.replace(tmp, dest_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def import_skills(
    source: Path,
    dest: Path,
    *,
    taxonomy: Taxonomy | None = None,
    client: LLMClient | None = None,
    annotate: bool = True,
    overwrite: bool = False,
) -> SkillImportResult:
    """Import every skill under `source` into the catalog folder `dest`."""
    source, dest = Path(source), Path(dest)
    if not source.is_dir():
        raise SkillError(str(source), None, None, "no such folder")
    taxonomy = taxonomy or load_taxonomy()
    result = SkillImportResult()
    seen: dict[str, Path] = {}
    for path in find_skill_files(source):
        try:
            skill = parse_skill_md(path)
            folder = slug(skill.name)
            if not folder:
                raise SkillError(str(path), line_of_key(skill, "name"), "name",
                                 f"{skill.name!r} has no letters or digits to name a folder with")
            if folder in seen:
                raise SkillError(str(path), line_of_key(skill, "name"), "name",
                                 f"duplicate skill name {skill.name!r} (also {seen[folder]})")
            check_operations(skill, taxonomy)
        except SkillError as exc:
            result.errors.append(exc)
            continue
        seen[folder] = path
        target = dest / folder
        if target.exists() and not overwrite:
            result.skipped[skill.name] = f"already in the catalog at {target}"
            continue
        text = skill.text
        if skill.annotations is None and annotate:
            text = with_annotations(skill, annotate_skill(skill, taxonomy, client))
        if target.exists():
            old = target.with_name(f".{folder}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            _copy_skill(skill, text, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            _copy_skill(skill, text, target)
        result.imported.append(parse_skill_md(target / SKILL_FILE))
    return result
