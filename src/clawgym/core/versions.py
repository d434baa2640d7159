"""Schema versions of the records clawgym writes to files, and the migrations that read older forms.

`Task`, `Trajectory` and `Verdict` (:mod:`clawgym.core.records`) carry `schema_version`, a whole number per
record type; :data:`SCHEMA_VERSIONS` holds the current one of each.

Reading and writing:

* Every record is written in the current form of its type, with its `schema_version`. A record made in code is in
  the current form; a record read from a file is brought to it as it is read, so rewriting a file upgrades it.
* A record without `schema_version` is version 1, the form from before versions existed. An older record is
  brought to the current form by :data:`MIGRATIONS`: one small function per step (version n to n + 1), applied in
  order by the models' ``model_validator(mode="before")`` (:func:`migrate`).
* A record with a newer `schema_version` than this clawgym knows (written by a newer clawgym) is refused, in one
  line that names the record type, its version and the version this clawgym reads, and says to upgrade clawgym.
  The JSONL readers (:mod:`clawgym.core.jsonl`) report it as ``FILE:LINE: schema_version: ...``; the lenient
  readers go on with the other lines.
* Unknown fields are refused in every version (``extra="forbid"``): a typo in a hand-written task stays an error.
  The message says the field may also come from a newer clawgym.

Changing a record's form:

* A breaking change (a field renamed, removed, retyped or given another meaning, or a new field that an older
  clawgym must not ignore) bumps the type's version in :data:`SCHEMA_VERSIONS` and registers the function that
  turns the previous form into the new one in :data:`MIGRATIONS`. A migration takes the record as a plain dict
  (JSON data) and returns the new dict; it must not change the dict it is given (copy a nested dict before
  changing it). An older clawgym then refuses the new files with the upgrade message instead of misreading them.
* A minor addition (a new optional field whose default keeps the old meaning) keeps the version: its name goes in
  the model's `minor_fields`, and a record is written without it while it holds its default. An older clawgym
  reads every newer record that does not use the addition; one that uses it is refused there as having an unknown
  field (which it would otherwise silently ignore).
* What an older clawgym may ignore goes in `metadata` (tasks and trajectories), a free-form object every version
  reads.

Version 2 of all three types only adds `schema_version` itself: the step from version 1 changes nothing else. A
clawgym from before versions refuses version-2 records (`schema_version` is an unknown field to it).

Minor additions in version 2 (no bump; an older clawgym reads every record that does not use them):

* Task: a code check of kind `checks` (the checks as data, `checks` and `checklib`, written only for that kind),
  which an older clawgym refuses as an unknown kind and unknown fields rather than misgrading it. Tasks with a
  `python` grade() source keep their form and bytes.
* Task: a part of such a check may name another check (`{"ref": name}`, :class:`clawgym.core.records.CheckCall`,
  written for check library v3); a clawgym from before refuses it as an unknown field (and its library as newer).
* Task: such a code check may write an argument value its checks share once (`values`, which each check names in
  `use`: :func:`clawgym.core.records.hoist_shared_values`); a clawgym from before refuses `values` as an unknown
  field. Unset fields of a workspace file and of a `checks` code check are no longer written as nulls (every
  version reads them absent as unset).
* Task: a `checks` code check may be written shorter (`rows_from`, `{"refs": "others"}`, `workspace_digests`,
  `"workspace_texts": true` with `{"workspace_text": PATH}`: :mod:`clawgym.core.check_encoding`), and its verifier
  without its default fields; a clawgym from before refuses the first as unknown fields and reads the second.
* Verdict: `checklib`, the check library that graded a task whose checks are data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_core import PydanticCustomError

LEGACY_VERSION = 1
"""The version of a record that carries no `schema_version` (written before versions existed)."""

SCHEMA_VERSIONS: dict[str, int] = {"task": 2, "trajectory": 2, "verdict": 2}
"""The current schema version of each versioned record type."""

Migration = Callable[[dict[str, Any]], dict[str, Any]]


def _only_the_version_field(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 to 2: version 2 adds `schema_version` (set by :func:`migrate`) and changes nothing else."""
    return data


MIGRATIONS: dict[str, dict[int, Migration]] = {
    "task": {1: _only_the_version_field},
    "trajectory": {1: _only_the_version_field},
    "verdict": {1: _only_the_version_field},
}
"""Per record type, the migration from each version (the key) to the next."""

VERSION_NEWER = "schema_version_newer"
VERSION_INVALID = "schema_version_invalid"
"""The pydantic error types of a refused `schema_version` (clawgym.core.jsonl names the field from them)."""


def title(kind: str) -> str:
    """The record type's name as messages show it: Task, Trajectory, Verdict."""
    return kind.capitalize()


def check_registry() -> None:
    """Every record type has a migration for each step from version 1 to its current version."""
    for kind, current in SCHEMA_VERSIONS.items():
        missing = [v for v in range(LEGACY_VERSION, current) if v not in MIGRATIONS.get(kind, {})]
        if missing:
            raise RuntimeError(f"{title(kind)}: no migration from schema_version {missing[0]} to {missing[0] + 1}")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def migrate(kind: str, data: Any) -> Any:
    """`data` (a record of type `kind` as plain JSON data) in the current form of its type.

    Anything but a dict is returned as it is, for the model's own validation to judge. Raises a pydantic error of
    type VERSION_NEWER for a record newer than this clawgym reads, VERSION_INVALID for a `schema_version` that is
    not a whole number of at least 1."""
    if not isinstance(data, dict):
        return data
    current = SCHEMA_VERSIONS[kind]
    version = data.get("schema_version", LEGACY_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version < LEGACY_VERSION:
        raise PydanticCustomError(VERSION_INVALID, "must be a whole number of at least 1, got {got}",
                                  {"got": _shown(version)})
    if version > current:
        raise PydanticCustomError(
            VERSION_NEWER,
            "{record} schema_version {version} is newer than this clawgym reads ({current}): upgrade clawgym",
            {"record": title(kind), "version": version, "current": current},
        )
    if version == current:
        return data
    steps = MIGRATIONS[kind]
    while version < current:
        data = {**steps[version](dict(data)), "schema_version": version + 1}
        version += 1
    return data


check_registry()
