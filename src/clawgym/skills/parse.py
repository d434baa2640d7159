"""Reading SKILL.md files, and writing ClawGym's annotations back into their front matter.

Reading is lenient where OpenClaw and ClawHub are (extra front-matter keys are kept; a missing `name` falls back
to the folder's name; `metadata` may be a YAML mapping or a JSON string) and strict where a skill would be
useless (no front matter, no description, front matter that is not YAML). Every problem is a
:class:`SkillError` whose one-line message reads ``file:line: field: message``.

Writing touches only the `metadata` entry of the front matter: it becomes one line of JSON (what OpenClaw's
embedded parser reads) with `clawgym` set; every other line of the file is kept byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from clawgym.core.taxonomy import YamlSource, format_loc
from clawgym.skills.skill import ANNOTATION_KEY, Skill, SkillAnnotations, SkillError

MAX_SKILL_BYTES = 1_000_000


def _split(text: str, where: str) -> tuple[list[str], int, int]:
    """(lines with their ends, index of the opening `---` line, index of the closing one)."""
    lines = text.splitlines(keepends=True)
    first = 0
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    if not lines or lines[0].rstrip("\r\n").rstrip() != "---":
        raise SkillError(where, 1, "front matter",
                         "missing: a SKILL.md starts with a `---` line, YAML with name and description, and `---`")
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n").rstrip() in ("---", "..."):
            return lines, first, i
    raise SkillError(where, 1, "front matter", "no closing `---` line")


def _yaml(block: str, where: str, offset: int) -> YamlSource:
    loader = yaml.SafeLoader(block)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = offset + mark.line + 1 if mark is not None else offset
        raise SkillError(where, line, "front matter", f"invalid YAML: {exc.problem or 'syntax error'}") from None
    except yaml.YAMLError as exc:
        raise SkillError(where, offset, "front matter", f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return YamlSource(Path(where), data, root)


def parse_skill_text(text: str, path: Path, folder_name: str | None = None) -> Skill:
    """Parse the text of a SKILL.md at `path` (used for error messages and the folder-name fallback)."""
    where = str(path)
    lines, start, end = _split(text, where)
    src = _yaml("".join(lines[start + 1:end]), where, start + 1)

    def line(loc: tuple[str | int, ...]) -> int:
        got = src.line(loc)
        return start + 1 + got if got is not None else start + 1

    def fail(loc: tuple[str | int, ...], message: str) -> SkillError:
        return SkillError(where, line(loc), format_loc(loc), message)

    front = src.data if src.data is not None else {}
    if not isinstance(front, dict):
        raise SkillError(where, start + 2, "front matter", f"must be a mapping of keys, got {type(front).__name__}")
    name = front.get("name")
    if name is None:
        name = folder_name if folder_name is not None else path.parent.name
    elif not isinstance(name, str) or not name.strip():
        raise fail(("name",), "must be a non-empty string")
    desc = front.get("description")
    if desc is None:
        raise SkillError(where, start + 1, "description", "required (what the skill does and when to use it)")
    if not isinstance(desc, str) or not desc.strip():
        raise fail(("description",), "must be a non-empty string")
    meta = front.get("metadata")
    if meta is None:
        meta = {}
    elif isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except json.JSONDecodeError as exc:
            raise fail(("metadata",), f"not a JSON object: {exc.msg} (column {exc.colno})") from None
    if not isinstance(meta, dict):
        raise fail(("metadata",), f"must be an object, got {type(meta).__name__}")
    annotations = None
    if ANNOTATION_KEY in meta:
        raw = meta[ANNOTATION_KEY]
        if not isinstance(raw, dict):
            raise fail(("metadata", ANNOTATION_KEY), "must be an object")
        try:
            annotations = SkillAnnotations.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ("metadata", ANNOTATION_KEY, *(p for p in err["loc"] if isinstance(p, (str, int))))
            raise fail(loc, "unknown field" if err["type"] == "extra_forbidden" else err["msg"]) from None
    return Skill(
        name=name.strip(), description=" ".join(desc.split()), path=path, text=text,
        body="".join(lines[end + 1:]), frontmatter=front, metadata=meta, annotations=annotations,
    )


def parse_skill_md(path: Path) -> Skill:
    """Read and parse one SKILL.md file."""
    where = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_SKILL_BYTES:
            raise SkillError(where, None, None, f"too large ({size} bytes; at most {MAX_SKILL_BYTES})")
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SkillError(where, None, None, "file not found") from None
    except UnicodeDecodeError as exc:
        raise SkillError(where, None, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise SkillError(where, None, None, f"cannot read file: {exc.strerror or exc}") from None
    return parse_skill_text(text, path)


def metadata_line(metadata: dict[str, Any]) -> str:
    """`metadata` as OpenClaw's embedded parser wants it: one line of JSON."""
    return "metadata: " + json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))


def with_annotations(skill: Skill, annotations: SkillAnnotations) -> str:
    """The skill's file text with `metadata.clawgym` set to `annotations`; every other line unchanged.

    The `metadata` entry (its key line and any indented continuation lines) is replaced by one JSON line that
    keeps its other keys; a skill without `metadata` gets the line just before the closing `---`."""
    lines, start, end = _split(skill.text, str(skill.path))
    nl = "\r\n" if lines[start].endswith("\r\n") else "\n"
    merged = {k: v for k, v in skill.metadata.items() if k != ANNOTATION_KEY}
    merged[ANNOTATION_KEY] = annotations.as_metadata()
    new = metadata_line(merged) + nl
    first = next((i for i in range(start + 1, end) if lines[i].startswith("metadata:")), None)
    if first is None:
        out = lines[:end] + [new] + lines[end:]
    else:
        last = first + 1
        while last < end and (not lines[last].strip() or lines[last][:1] in (" ", "\t")):
            last += 1
        # blank lines that separated metadata from the next key are kept
        while last - 1 > first and not lines[last - 1].strip():
            last -= 1
        out = lines[:first] + [new] + lines[last:]
    text = "".join(out)
    if skill.text.startswith("\ufeff") and not text.startswith("\ufeff"):
        text = "\ufeff" + text
    return text
