"""JSON Schema export of the records, and validation of plain data against it."""

from __future__ import annotations

from typing import Any

import jsonschema

from clawgym.core.records import RECORD_TYPES


def record_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one record type, by name (task, trajectory, verdict, ...)."""
    try:
        model = RECORD_TYPES[name]
    except KeyError:
        raise KeyError(f"unknown record {name!r}; known: {', '.join(sorted(RECORD_TYPES))}") from None
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema.setdefault("title", model.__name__)
    return schema


def validate_data(name: str, data: Any) -> None:
    """Validate plain JSON data against the exported schema (for tools that do not use pydantic)."""
    jsonschema.validate(data, record_schema(name), cls=jsonschema.Draft202012Validator)
