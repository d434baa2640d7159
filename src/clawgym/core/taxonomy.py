"""The scenario and operation taxonomy that persona-driven task synthesis samples from.

A taxonomy file (YAML) has three lists:

- ``operation_categories``: ``{id, name, description}``; groups of atomic operations.
- ``operations``: atomic operations ``{id, name, category, description, file_kinds, skill_patterns}``; what the
  agent must do to the workspace. ``category`` is an operation category id; ``file_kinds`` are workspace formats
  (:data:`FILE_KINDS`); ``skill_patterns`` (optional) are regular expressions whose matches in a skill's text are
  evidence that the skill does the operation (:mod:`clawgym.skills.rules`). An operation is synthesized by the
  generator of the same id (:data:`clawgym.synth.ops.OPERATIONS`, which a third party extends).
- ``categories``: scenario categories ``{id, name, description, subcategories}``; each subcategory is
  ``{id, name, description, operations}`` where ``operations`` are the atomic operation ids that fit it.

The shipped file (``clawgym/core/data/taxonomy.yaml``) has 9 scenario categories, 43 subcategories,
7 operation categories and 26 atomic operations, but those counts are not required of a user's own file.
What is required: every id is snake_case and unique within its kind (subcategory ids across all categories),
no list is empty, every reference resolves, every operation category holds an operation and every operation
is used by at least one subcategory. A problem raises :class:`TaxonomyError` whose one-line message reads
``file:line: field: message``, with the line of the offending entry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from clawgym.core.errors import ClawgymError

DEFAULT_TAXONOMY_PATH = Path(__file__).resolve().parent / "data" / "taxonomy.yaml"

FILE_KINDS: frozenset[str] = frozenset(
    {"csv", "json", "yaml", "md", "txt", "eml", "ics", "xlsx", "sqlite", "git", "py", "log", "ini", "html"}
)
"""Workspace formats an operation may name in ``file_kinds``."""

ID_PATTERN = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"


# --------------------------------------------------------------------------------------------- errors


class SynthDataError(ClawgymError):
    """A problem in a synthesis data file (taxonomy, personas), with its file, line and field."""

    def __init__(self, path: str, line: int | None, field: str | None, message: str):
        self.path = path
        self.line = line
        self.field = field
        self.message = message
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


class TaxonomyError(SynthDataError):
    """A taxonomy file that cannot be read, or whose entries or references are invalid."""


# --------------------------------------------------------------------------------------------- YAML with lines


class YamlSource:
    """A parsed YAML document together with its node tree, so that any data path can be mapped to a line."""

    def __init__(self, path: Path, data: Any, root: yaml.Node | None):
        self.path = path
        self.data = data
        self.root = root

    def node_at(self, loc: Sequence[str | int]) -> yaml.Node | None:
        """The deepest node along ``loc`` (mapping keys and list indexes) that exists in the document.

        For a mapping key the key's node is returned (its line is where the field is written); for a
        missing key, the enclosing entry.
        """
        node = self.root
        found = node
        for i, part in enumerate(loc):
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                match = next(((k, v) for k, v in node.value if getattr(k, "value", None) == part), None)
                if match is None:
                    break
                key, node = match
                # the key's line for the last step (the field itself); the value's node to descend further
                found = key if i == len(loc) - 1 else node
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node = node.value[part]
                found = node
            else:
                break
        return found

    def line(self, loc: Sequence[str | int]) -> int | None:
        """1-based line of the deepest node along ``loc``."""
        node = self.node_at(loc)
        return None if node is None else node.start_mark.line + 1


def read_yaml(path: Path, error: type[SynthDataError]) -> YamlSource:
    """Read one YAML document keeping its node tree; any I/O or syntax problem raises ``error``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(str(path), None, None, "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(str(path), None, None, f"cannot read file: {exc}") from None
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = exc.problem or "syntax error"
        if exc.context:
            started = f" started at line {exc.context_mark.line + 1}" if exc.context_mark is not None else ""
            what += f" ({exc.context}{started})"
        raise error(str(path), line, None, f"invalid YAML: {what}") from None
    except yaml.YAMLError as exc:
        raise error(str(path), None, None, f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return YamlSource(path, data, root)


def format_loc(loc: Iterable[str | int]) -> str:
    """('categories', 2, 'subcategories', 0, 'id') -> 'categories[2].subcategories[0].id'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<document>"


def raise_validation(
    src: YamlSource, exc: ValidationError, base: Sequence[str | int], error: type[SynthDataError]
) -> NoReturn:
    """Re-raise the first pydantic error of an entry at ``base`` as ``error`` naming file, line and field."""
    err = exc.errors()[0]
    loc = (*base, *(p for p in err.get("loc", ()) if isinstance(p, (str, int))))
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    msg = err["msg"]
    if err.get("type") == "extra_forbidden":
        msg = "unknown field"
    raise error(str(src.path), src.line(loc), format_loc(loc), f"{msg}{more}") from None


# --------------------------------------------------------------------------------------------- models


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    id: str = Field(pattern=ID_PATTERN, description="snake_case, unique within its kind.")
    name: str = Field(min_length=1)
    description: str = Field(min_length=1)


def _no_repeats(values: list[str], what: str) -> list[str]:
    seen: set[str] = set()
    for v in values:
        if v in seen:
            raise ValueError(f"{what} {v!r} is listed twice")
        seen.add(v)
    return values


class OperationCategory(_Entry):
    """A group of atomic operations, e.g. ``file_management``."""


class Operation(_Entry):
    """An atomic operation: one thing the agent must do to the workspace."""

    category: str = Field(pattern=ID_PATTERN, description="Id of the operation category.")
    file_kinds: list[str] = Field(min_length=1, description="Workspace formats the operation works on.")
    skill_patterns: list[str] = Field(default_factory=list, description=(
        "Regular expressions, matched case-insensitively from a word boundary, whose matches in a skill's name, "
        "description or body are evidence that the skill does this operation."))

    @field_validator("file_kinds")
    @classmethod
    def _known_kinds(cls, v: list[str]) -> list[str]:
        for kind in v:
            if kind not in FILE_KINDS:
                raise ValueError(f"unknown file kind {kind!r} (known: {', '.join(sorted(FILE_KINDS))})")
        return _no_repeats(v, "file kind")

    @field_validator("skill_patterns")
    @classmethod
    def _patterns_compile(cls, v: list[str]) -> list[str]:
        for pattern in v:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"skill pattern {pattern!r} is not a regular expression: {exc}") from None
        return _no_repeats(v, "skill pattern")


class Subcategory(_Entry):
    """A scenario subcategory and the atomic operations that fit it."""

    operations: list[str] = Field(min_length=1, description="Ids of the atomic operations that fit.")

    @field_validator("operations")
    @classmethod
    def _unique_ops(cls, v: list[str]) -> list[str]:
        return _no_repeats(v, "operation")


class Category(_Entry):
    """A scenario category, e.g. ``Productivity & Collaboration``."""

    subcategories: list[Subcategory] = Field(min_length=1)


class Taxonomy(BaseModel):
    """A validated taxonomy with lookups by id. Lookups of an unknown id raise KeyError."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    operation_categories: list[OperationCategory] = Field(min_length=1)
    operations: list[Operation] = Field(min_length=1)
    categories: list[Category] = Field(min_length=1)

    _ops: dict[str, Operation] = PrivateAttr(default_factory=dict)
    _op_cats: dict[str, OperationCategory] = PrivateAttr(default_factory=dict)
    _cats: dict[str, Category] = PrivateAttr(default_factory=dict)
    _subs: dict[str, Subcategory] = PrivateAttr(default_factory=dict)
    _cat_of: dict[str, Category] = PrivateAttr(default_factory=dict)
    _subs_for: dict[str, list[Subcategory]] = PrivateAttr(default_factory=dict)

    def model_post_init(self, __context: Any) -> None:
        self._op_cats.update({c.id: c for c in self.operation_categories})
        self._ops.update({o.id: o for o in self.operations})
        self._cats.update({c.id: c for c in self.categories})
        for cat in self.categories:
            for sub in cat.subcategories:
                self._subs[sub.id] = sub
                self._cat_of[sub.id] = cat
                for op in sub.operations:
                    self._subs_for.setdefault(op, []).append(sub)

    # -- lookups

    @property
    def subcategories(self) -> list[Subcategory]:
        """All subcategories, in file order."""
        return [s for c in self.categories for s in c.subcategories]

    def operation(self, id: str) -> Operation:
        try:
            return self._ops[id]
        except KeyError:
            raise KeyError(f"unknown operation {id!r}") from None

    def operation_category(self, id: str) -> OperationCategory:
        try:
            return self._op_cats[id]
        except KeyError:
            raise KeyError(f"unknown operation category {id!r}") from None

    def operations_in(self, operation_category_id: str) -> list[Operation]:
        self.operation_category(operation_category_id)
        return [o for o in self.operations if o.category == operation_category_id]

    def category(self, id: str) -> Category:
        try:
            return self._cats[id]
        except KeyError:
            raise KeyError(f"unknown category {id!r}") from None

    def subcategory(self, id: str) -> Subcategory:
        try:
            return self._subs[id]
        except KeyError:
            raise KeyError(f"unknown subcategory {id!r}") from None

    def category_of(self, subcategory_id: str) -> Category:
        try:
            return self._cat_of[subcategory_id]
        except KeyError:
            raise KeyError(f"unknown subcategory {subcategory_id!r}") from None

    def subcategories_for(self, operation_id: str) -> list[Subcategory]:
        """The subcategories that list this operation (every operation of a loaded taxonomy has one)."""
        self.operation(operation_id)
        return list(self._subs_for.get(operation_id, []))

    def has_subcategory(self, id: str) -> bool:
        return id in self._subs


# --------------------------------------------------------------------------------------------- loading


def _check_references(src: YamlSource, tax: Taxonomy) -> None:
    """Ids unique, references resolve, nothing unused; raise TaxonomyError at the first problem."""

    def fail(loc: tuple[str | int, ...], message: str) -> NoReturn:
        raise TaxonomyError(str(src.path), src.line(loc), format_loc(loc), message)

    def unique(entries: Iterable[tuple[tuple[str | int, ...], str]], what: str) -> None:
        first: dict[str, tuple[str | int, ...]] = {}
        for loc, value in entries:
            if value in first:
                fail(loc, f"duplicate {what} {value!r} (first defined at line {src.line(first[value])})")
            first[value] = loc

    unique(((("operation_categories", i, "id"), c.id) for i, c in enumerate(tax.operation_categories)),
           "operation category id")
    unique(((("operations", i, "id"), o.id) for i, o in enumerate(tax.operations)), "operation id")
    unique(((("categories", i, "id"), c.id) for i, c in enumerate(tax.categories)), "category id")
    unique(((("categories", i, "name"), c.name) for i, c in enumerate(tax.categories)), "category name")
    unique(((("categories", i, "subcategories", j, "id"), s.id)
            for i, c in enumerate(tax.categories) for j, s in enumerate(c.subcategories)), "subcategory id")

    op_cat_ids = {c.id for c in tax.operation_categories}
    for i, op in enumerate(tax.operations):
        if op.category not in op_cat_ids:
            fail(("operations", i, "category"), f"unknown operation category {op.category!r} in operation {op.id!r}")

    op_ids = {o.id for o in tax.operations}
    used: set[str] = set()
    for i, cat in enumerate(tax.categories):
        for j, sub in enumerate(cat.subcategories):
            for k, op_id in enumerate(sub.operations):
                if op_id not in op_ids:
                    fail(("categories", i, "subcategories", j, "operations", k),
                         f"unknown operation id {op_id!r} in subcategory {sub.id!r}")
                used.add(op_id)

    for i, oc in enumerate(tax.operation_categories):
        if not any(o.category == oc.id for o in tax.operations):
            fail(("operation_categories", i, "id"), f"operation category {oc.id!r} has no operations")
    for i, op in enumerate(tax.operations):
        if op.id not in used:
            fail(("operations", i, "id"), f"operation {op.id!r} is used by no subcategory")


def load_taxonomy(path: Path | str | None = None) -> Taxonomy:
    """Load and validate a taxonomy file (default: the packaged ``clawgym/core/data/taxonomy.yaml``)."""
    path = DEFAULT_TAXONOMY_PATH if path is None else Path(path)
    src = read_yaml(path, TaxonomyError)
    if not isinstance(src.data, dict):
        got = "an empty file" if src.data is None else type(src.data).__name__
        raise TaxonomyError(str(path), src.line(()), None,
                            f"expected a mapping with operation_categories, operations, categories; got {got}")
    try:
        tax = Taxonomy.model_validate(src.data)
    except ValidationError as exc:
        raise_validation(src, exc, (), TaxonomyError)
    _check_references(src, tax)
    return tax
