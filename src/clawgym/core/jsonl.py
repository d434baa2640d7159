"""JSONL reading and writing for every artifact.

Reading validates each line against its record type and reports the first problem as
``file:line: field: message``; a versioned record of an older form is migrated as it is read, one of a newer
form refused with a RecordVersionError (see :mod:`clawgym.core.versions`). In a task line every string must be
valid Unicode (no lone surrogate escape) and every number finite (no ``1e999``, ``NaN``, ``Infinity``): one pass
over the line's text decides whether the record must search its data for the field to name.

Appending writes each record as one whole line with a single ``write`` on an ``O_APPEND`` descriptor, so
concurrent writers never interleave and a crash can at worst lose the last record, never leave a half line: a
torn tail left by a killed process is cut back to the last newline when the file is next opened for appending.
Whole-file writes go to a temporary file that is renamed into place.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from clawgym.core.errors import RecordError, RecordVersionError
from clawgym.core.records import values_checked
from clawgym.core.text import scrub
from clawgym.core.versions import SCHEMA_VERSIONS, VERSION_INVALID, VERSION_NEWER, title

M = TypeVar("M", bound=BaseModel)


def _format_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<record>"


MAX_NESTING = 100
"""Deepest nesting of arrays and objects accepted in a record: far beyond any real record, and well inside what
the JSON parser (about 1,000 levels, then RecursionError) and pydantic's serializer (about 250) handle."""


def _too_deep(data: object, limit: int) -> bool:
    """Whether `data` nests arrays and objects more than `limit` levels deep (iterative: no recursion)."""
    stack = [(data, 1)]
    while stack:
        obj, depth = stack.pop()
        if depth > limit:
            return True
        children = obj.values() if isinstance(obj, dict) else obj
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""A JSON escape of a UTF-16 surrogate (U+D800-U+DFFF): the only way a valid UTF-8 line can put a lone surrogate
in a string. A pair (an emoji written as two escapes) matches too and is then found valid by the search."""


class _NotFinite(Exception):
    """A float literal the JSON parser would read as infinity (`1e999`), or NaN / Infinity / -Infinity."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite
    return value


def _refuse_constant(name: str) -> float:
    raise _NotFinite


def _load(line: str, checks_values: bool) -> tuple[Any, bool]:
    """(the line's JSON data, whether its strings and floats are known to be good).

    For a record type that checks its text and numbers (a task: records.CheckedTaskPart), the parser's float hooks see
    every float literal and a regular expression scans the text for surrogate escapes: one pass, a few percent of
    the reading time. A line they flag is read as usual and left to the record's own search, which names the
    field; any other line is known good and validated without that search."""
    if not checks_values:
        return json.loads(line), False
    try:
        data = json.loads(line, parse_float=_finite_float, parse_constant=_refuse_constant)
    except _NotFinite:
        return json.loads(line), False
    return data, _SURROGATE_ESCAPE.search(line) is None


def parse_line(line: str, model: type[M], path: str | os.PathLike, lineno: int) -> M:
    """Parse and validate one JSONL line, raising RecordError that names file, line and field.

    `line` may hold bytes that were not UTF-8, decoded with ``errors="surrogateescape"`` (as the readers here
    do): such a line is refused as not UTF-8 instead of being misread."""
    if not line.isascii():
        try:
            line.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = ord(line[exc.start])
            byte = f"byte 0x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else "a lone surrogate"
            raise RecordError(str(path), lineno, None, f"not valid UTF-8 ({byte} at column {exc.start + 1})") from None
    try:
        data, clean = _load(line, getattr(model, "checks_values", False))
    except json.JSONDecodeError as exc:
        raise RecordError(str(path), lineno, None, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise RecordError(str(path), lineno, None, f"nested too deeply (more than {MAX_NESTING} levels)") from None
    except ValueError:  # an integer too long for int() (json raises a plain ValueError, with a traceback)
        raise RecordError(str(path), lineno, None,
                          f"holds an integer of more than {sys.get_int_max_str_digits()} digits") from None
    if not isinstance(data, dict):
        raise RecordError(str(path), lineno, None, f"expected a JSON object, got {type(data).__name__}")
    if (line.count("[") + line.count("{") > MAX_NESTING) and _too_deep(data, MAX_NESTING):
        raise RecordError(str(path), lineno, None, f"nested too deeply (more than {MAX_NESTING} levels)")
    try:
        with values_checked() if clean else nullcontext():
            return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        loc = tuple(err.get("loc", ()))
        msg = err["msg"]
        if err["type"] in (VERSION_NEWER, VERSION_INVALID):  # raised by the record's migration, before its fields
            loc += ("schema_version",)
        elif err["type"] == "extra_forbidden" and getattr(model, "schema_kind", None) in SCHEMA_VERSIONS:
            kind = model.schema_kind  # type: ignore[attr-defined]
            msg += (f" (a typo, or a field of a newer clawgym: this one reads {title(kind)} schema_version "
                    f"{SCHEMA_VERSIONS[kind]})")
        error = RecordVersionError if err["type"] == VERSION_NEWER else RecordError
        raise error(str(path), lineno, _format_loc(loc), f"{msg}{more}") from None


def _lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line. Bytes that are not UTF-8 are kept as surrogate escapes, for
    parse_line to report that line alone; a path that cannot be read as a file is one RecordError."""
    try:
        fh = open(path, encoding="utf-8", errors="surrogateescape")
    except IsADirectoryError:
        raise RecordError(str(path), None, None, "is a directory, not a JSONL file") from None
    with fh:
        try:
            for lineno, line in enumerate(fh, start=1):
                if line.strip():
                    yield lineno, line
        except IsADirectoryError:  # some systems only fail at the first read
            raise RecordError(str(path), None, None, "is a directory, not a JSONL file") from None


class _UniqueKeys:
    """Refuses a record whose unique key (``model.unique_key``, e.g. a task's id) an earlier line already has."""

    def __init__(self, model: type[BaseModel], path: str | os.PathLike):
        self.key = getattr(model, "unique_key", None)
        self.path = str(path)
        self.seen: dict[object, int] = {}

    def check(self, record: BaseModel, lineno: int) -> None:
        if self.key is None:
            return
        value = getattr(record, self.key)
        first = self.seen.setdefault(value, lineno)
        if first != lineno:
            raise RecordError(self.path, lineno, self.key, f"{value!r} already defined at line {first}")


def iter_records(path: str | os.PathLike, model: type[M]) -> Iterator[M]:
    """Yield validated records; stop with RecordError at the first bad line. Blank lines are skipped.

    For a model with a `unique_key` (tasks: the id), a line repeating an earlier line's key is a bad line."""
    unique = _UniqueKeys(model, path)
    for lineno, line in _lines(path):
        record = parse_line(line, model, path, lineno)
        unique.check(record, lineno)
        yield record


def read_records(path: str | os.PathLike, model: type[M]) -> list[M]:
    return list(iter_records(path, model))


@dataclass
class LenientRead(Generic[M]):
    records: list[M]
    errors: list[RecordError]


def read_records_lenient(path: str | os.PathLike, model: type[M]) -> LenientRead[M]:
    """Read every good record and collect an error for each bad line, so that one bad task does not stop a run.

    A line repeating the `unique_key` of an earlier good line (a task id defined twice) is a bad line: the
    first is kept. A path that is not a readable file (a directory) raises RecordError."""
    records: list[M] = []
    errors: list[RecordError] = []
    unique = _UniqueKeys(model, path)
    for lineno, line in _lines(path):
        try:
            record = parse_line(line, model, path, lineno)
            unique.check(record, lineno)
        except RecordError as exc:
            errors.append(exc)
            continue
        records.append(record)
    return LenientRead(records, errors)


def record_json(record: BaseModel) -> str:
    """`record.model_dump_json()`; a record holding text that cannot be UTF-8 (a lone surrogate: a file name
    that is not UTF-8, an escape a model wrote) is written with that text escaped (:mod:`clawgym.core.text`)
    instead of failing, so one odd byte never loses a record or a run."""
    try:
        return record.model_dump_json()
    except PydanticSerializationError:
        return json.dumps(scrub(record.model_dump(mode="json")), ensure_ascii=False, separators=(",", ":"))


def dump_line(record: BaseModel) -> str:
    return record_json(record) + "\n"


def write_records(path: str | os.PathLike, records: Iterable[BaseModel]) -> int:
    """Write all records atomically: a temp file in the same directory, fsynced, then renamed over `path`."""
    from clawgym.core.atomic import write_lines

    return write_lines(path, (dump_line(r) for r in records))


def repair_torn_tail(path: str | os.PathLike) -> int:
    """Cut a trailing partial line (no final newline) left by a killed writer. Returns bytes removed."""
    path = Path(path)
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return 0
        # walk back to the last newline
        pos = size
        chunk = 65536
        keep = 0
        while pos > 0:
            start = max(0, pos - chunk)
            fh.seek(start)
            buf = fh.read(pos - start)
            idx = buf.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            pos = start
        fh.truncate(keep)
        return size - keep


class JsonlAppender:
    """Append records to a JSONL file, one whole line per write; safe to share between threads."""

    def __init__(self, path: str | os.PathLike, fsync: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.torn_bytes = repair_torn_tail(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._fsync = fsync
        self._lock = threading.Lock()

    def append(self, record: BaseModel) -> None:
        self.append_json(record_json(record))

    def append_json(self, text: str) -> None:
        """Append one record already serialised by `model_dump_json()` (no second validation)."""
        if "\n" in text:
            raise ValueError("a JSONL record must be one line")
        data = (text + "\n").encode("utf-8")
        with self._lock:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            if self._fsync:
                os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
