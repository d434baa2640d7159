"""Skills in OpenClaw's SKILL.md format: parsing, the catalog, importing, and ClawGym's annotations."""

from clawgym.skills.annotate import AnnotateReport, annotate_catalog, annotate_skill, llm_annotations
from clawgym.skills.catalog import SkillCatalog, default_skills_dir, find_skill_files, load_catalog
from clawgym.skills.importer import SkillImportResult, import_skills
from clawgym.skills.parse import parse_skill_md, parse_skill_text, with_annotations
from clawgym.skills.rules import rule_annotations
from clawgym.skills.skill import Skill, SkillAnnotations, SkillError

__all__ = [
    "AnnotateReport", "Skill", "SkillAnnotations", "SkillCatalog", "SkillError", "SkillImportResult",
    "annotate_catalog", "annotate_skill", "default_skills_dir", "find_skill_files", "import_skills",
    "llm_annotations", "load_catalog", "parse_skill_md", "parse_skill_text", "rule_annotations",
    "with_annotations",
]
