"""Errors that carry the place of a problem so the CLI can print one clear line."""

from __future__ import annotations


class ClawgymError(Exception):
    """Base for errors the CLI reports as one line with a non-zero exit."""


class RecordError(ClawgymError):
    """A record that failed to parse or validate, with its file, line and field."""

    def __init__(self, path: str, line: int | None, field: str | None, message: str):
        self.path = path
        self.line = line
        self.field = field
        self.message = message
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


class RecordVersionError(RecordError):
    """A record written by a newer clawgym: its schema_version is above the one this clawgym reads."""


class TaskImportError(ClawgymError):
    """A task in an outside format that cannot be imported; names the file and the reason."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")
