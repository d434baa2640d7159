"""The record types of every clawgym artifact, defined once.

Each artifact file (tasks.jsonl, trajectories.jsonl, ...) holds one record type per line. Records are
validated on read and on write (see :mod:`clawgym.core.jsonl`); unknown fields are rejected so that a typo in a
hand-written task is an error instead of a silently ignored key. Task, Trajectory and Verdict carry a
`schema_version`: older forms are migrated as they are read, newer ones refused (see :mod:`clawgym.core.versions`).
"""

from __future__ import annotations

import math
import posixpath
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from clawgym.core.check_encoding import (  # noqa: F401  (hoist/expand/encode/decode: importable from here, as before)
    _NO_VALUES,
    MAX_EXPANDED_VALUE_BYTES,
    SHARED_VALUE_MIN_BYTES,
    decode_checks,
    decode_workspace_refs,
    encode_checks,
    encode_workspace_refs,
    expand_shared_values,
    hoist_shared_values,
    workspace_digest,
)
from clawgym.core.check_encoding import quoted as _show
from clawgym.core.versions import LEGACY_VERSION, SCHEMA_VERSIONS, migrate

DEFAULT_MOUNT_DIR = "/workspace"
DEFAULT_CODE_WEIGHT = 0.7
DEFAULT_RUBRIC_WEIGHT = 0.3


R = TypeVar("R", bound="Record")
_FROM_DATA: ContextVar[bool] = ContextVar("clawgym_record_from_data", default=False)
"""Set while a record is validated from data (model_validate*): a versioned record in it without schema_version
is then version 1; made in code (the constructor), it is in the current form."""


class Record(BaseModel):
    """Base of all records: strict about unknown keys, lenient about key order."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    unique_key: ClassVar[str | None] = None
    """A field no two lines of one file may share (tasks: the id); checked by clawgym.core.jsonl's readers."""

    @classmethod
    def model_validate(cls: type[R], obj: Any, **kwargs: Any) -> R:
        token = _FROM_DATA.set(True)
        try:
            return super().model_validate(obj, **kwargs)  # type: ignore[misc]
        finally:
            _FROM_DATA.reset(token)

    @classmethod
    def model_validate_json(cls: type[R], json_data: str | bytes | bytearray, **kwargs: Any) -> R:
        token = _FROM_DATA.set(True)
        try:
            return super().model_validate_json(json_data, **kwargs)  # type: ignore[misc]
        finally:
            _FROM_DATA.reset(token)

    @classmethod
    def model_validate_strings(cls: type[R], obj: Any, **kwargs: Any) -> R:
        token = _FROM_DATA.set(True)
        try:
            return super().model_validate_strings(obj, **kwargs)  # type: ignore[misc]
        finally:
            _FROM_DATA.reset(token)


def _version_maximum(schema: dict[str, Any], cls: type) -> None:
    """JSON Schema: a versioned record's schema_version is at most the version this clawgym reads."""
    prop = schema.get("properties", {}).get("schema_version")
    kind = getattr(cls, "schema_kind", None)
    if isinstance(prop, dict) and kind in SCHEMA_VERSIONS:
        prop["maximum"] = SCHEMA_VERSIONS[kind]


class Versioned(Record):
    """A record written to files on its own, with a `schema_version` (see :mod:`clawgym.core.versions`).

    Made in code (the constructor), a record is in the current form of its type. Validated from data
    (`model_validate`, `model_validate_json`: a file's line), a record without `schema_version` is version 1
    and is migrated, nested records included; a newer version is refused."""

    model_config = ConfigDict(json_schema_extra=_version_maximum)
    schema_kind: ClassVar[str]
    """The record type's key in clawgym.core.versions.SCHEMA_VERSIONS and MIGRATIONS."""
    minor_fields: ClassVar[frozenset[str]] = frozenset()
    """Fields added without a version bump: written only when they differ from their default, so that an older
    clawgym reads every record that does not use them (see clawgym.core.versions)."""

    schema_version: int = Field(
        default=LEGACY_VERSION, ge=LEGACY_VERSION,
        description="The form this record is written in; absent: 1 (written before versions existed).",
    )

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        if isinstance(data, dict) and "schema_version" not in data and not _FROM_DATA.get():
            return {**data, "schema_version": SCHEMA_VERSIONS[cls.schema_kind]}  # made in code: the current form
        return migrate(cls.schema_kind, data)

    @model_serializer(mode="wrap")
    def _omit_unused_minor_fields(self, handler: SerializerFunctionWrapHandler):
        # no return annotation: with one, pydantic would take it as the serialization schema of the record
        data = handler(self)
        for name in self.minor_fields:
            if name in data and getattr(self, name) == type(self).model_fields[name].get_default(
                    call_default_factory=True):
                del data[name]
        return data


def _check_relative_path(path: str) -> str:
    """A workspace path must stay inside the workspace: relative, normalised, no `..`."""
    if not path or path.startswith("/"):
        raise ValueError(f"must be a relative path inside the workspace, got {_show(path)}")
    if "\x00" in path:
        raise ValueError(f"must not contain a NUL character, got {_show(path)}")
    norm = posixpath.normpath(path)
    if norm == ".." or norm.startswith("../"):
        raise ValueError(f"must not leave the workspace, got {_show(path)}")
    return norm


# Mount dirs: the sandbox's own system directories (shadowing them hands the checker a program the task wrote, or
# hides the system the agent relies on) and the control directory of the sandboxes (clawgym.sandbox.base.CTL_DIR,
# where the supervisor and the checker files live) are refused, with everything under them. /var/tmp is a private
# scratch tmpfs in every sandbox, like /tmp, and stays allowed.
CONTROL_DIR = "/.clawgym"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/sys", "/dev",
               "/boot", "/var", "/opt", CONTROL_DIR)
ALLOWED_UNDER_SYSTEM_DIRS = ("/var/tmp",)
_MOUNT_COMPONENT = re.compile(r"[A-Za-z0-9._+@~-]+")
MAX_MOUNT_DIR = 1024


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


def _check_mount_dir(v: str) -> str:
    """An absolute, normalised directory of the sandbox that is neither / nor a system or control directory."""
    if not v.startswith("/"):
        raise ValueError(f"must be an absolute path, got {_show(v)}")
    if len(v) > MAX_MOUNT_DIR:
        raise ValueError(f"is {len(v)} characters long; at most {MAX_MOUNT_DIR}")
    parts = v[1:].split("/")
    if parts and parts[-1] == "" and len(parts) > 1:  # one trailing slash is harmless
        parts.pop()
    for part in parts:
        if part in ("", ".", ".."):
            raise ValueError(f"must be a normalised path (no '//', '.' or '..' components), got {_show(v)}")
        if not _MOUNT_COMPONENT.fullmatch(part):
            raise ValueError(
                f"may only use letters, digits and . _ + @ ~ - in its components, got {_show(v)}"
            )
    norm = "/" + "/".join(parts)
    if norm == "/":
        raise ValueError("must not be / (the whole sandbox)")
    if any(_under(norm, top) for top in SYSTEM_DIRS) and not any(_under(norm, ok) for ok in ALLOWED_UNDER_SYSTEM_DIRS):
        raise ValueError(
            f"{norm} is or lies under a system or control directory of the sandbox ({', '.join(SYSTEM_DIRS)}; "
            "only /var/tmp is allowed there); use e.g. /workspace, /tmp/..., /root/... or /home/..."
        )
    return norm


def _check_assets_dir(v: str | None) -> str | None:
    """Assets come from inside the tasks file's directory: a relative path without `..` (materialize also
    refuses one that leads out through a symlink)."""
    if v is None:
        return None
    if not v or v.startswith("/") or "\x00" in v:
        raise ValueError(
            f"must be a relative path inside the tasks file's directory, got {_show(v)} (absolute paths are refused: "
            "a task file must not copy host files into its workspace)"
        )
    if ".." in v.split("/"):
        raise ValueError(f"must not leave the tasks file's directory ('..'), got {_show(v)}")
    return posixpath.normpath(v)


MAX_TASK_ID_BYTES = 200
"""A task id names files and directories (workspaces, snapshots, logs; a file name is at most 255 bytes):
200 bytes of UTF-8 leaves room for the episode suffix and temp-file affixes. Real ids are under 30."""


def _check_task_id(v: str) -> str:
    size = len(v.encode("utf-8", "surrogatepass"))
    if size > MAX_TASK_ID_BYTES:
        raise ValueError(f"too long: {size} bytes; a task id names files, so it is at most {MAX_TASK_ID_BYTES} bytes")
    if v in (".", ".."):
        raise ValueError(f"{v!r} cannot be a task id (it names files)")
    bad = next((c for c in v if c in "/\\"), None)
    if bad is not None:
        raise ValueError(f"must not contain {bad!r} (a task id names files and appears in one-line messages)")
    return _check_id(v)


# Ids (task ids, session ids, check and rubric-rule names, tool names, sources, categories, operations, skills) are
# shown to people, group results and name files: two different ids must never print the same. So an id is in NFC
# (refused otherwise, never rewritten: the file is what the author wrote) and holds no character that prints as
# nothing or as something else: controls (Cc), format characters (Cf: bidi overrides and isolates, zero-width
# spaces and joiners, the BOM, soft hyphens, tags), surrogates (Cs), private-use (Co) and unassigned (Cn) code
# points (unassigned in this Python's Unicode database), line and paragraph separators (Zl, Zp), and spaces other
# than U+0020 (no-break, thin, ideographic: Zs). Letters of every script stay allowed; look-alike letters of
# different scripts (Latin a, Cyrillic а) are not caught.
_NOT_IN_IDS = {
    "Cc": "a control character", "Cf": "an invisible format character (bidi control, zero-width, BOM, ...)",
    "Cs": "a surrogate", "Co": "a private-use character", "Cn": "an unassigned code point",
    "Zl": "a line separator", "Zp": "a paragraph separator", "Zs": "a space that is not U+0020",
}


def _char(c: str) -> str:
    """`c` as `U+XXXX NAME`: never the character itself, which may be the trick (an override turning the line)."""
    name = unicodedata.name(c, "")
    return f"U+{ord(c):04X}" + (f" {name}" if name else "")


def _first_not_nfc(v: str) -> int:
    """Index of the character where `v` (not in NFC) first stops being NFC: the one that composes or reorders."""
    nfc = unicodedata.normalize("NFC", v)
    start = next((i for i, (a, b) in enumerate(zip(v, nfc, strict=False)) if a != b), min(len(v), len(nfc)))
    for end in range(start, min(len(v), start + 32)):  # bounded: ids other than task ids have no length limit
        if not unicodedata.is_normalized("NFC", v[start:end + 1]):
            return end
    return min(start, len(v) - 1)


def _check_id(v: str) -> str:
    """An id must print as itself (see _NOT_IN_IDS); the error names the character as U+XXXX.

    The characters refused are exactly those `str.isprintable` refuses (categories C and Z but U+0020), so the
    common case costs two C calls."""
    if v.isprintable():
        if v.isascii() or unicodedata.is_normalized("NFC", v):
            return v
        at = _first_not_nfc(v)
        raise ValueError(f"is not in Unicode NFC form ({_char(v[at])} at character {at + 1}); write it in NFC, "
                         f"{_show(unicodedata.normalize('NFC', v))}, so that ids that look the same are the same")
    at = next(i for i, c in enumerate(v) if not c.isprintable())
    kind = _NOT_IN_IDS.get(unicodedata.category(v[at]), "not printable")
    raise ValueError(f"must not contain {_char(v[at])} at character {at + 1}, {kind}: an id must print as itself, "
                     "so that two different ids never look the same")


Id = Annotated[str, AfterValidator(_check_id)]
"""A string that identifies something and is shown to people: see _check_id."""


# --------------------------------------------------------------------------------------------- text and numbers

# Every string of a task (values and keys, down into metadata, check args and generator params) must be valid
# Unicode, and every float finite. A lone surrogate (`"\ud800"` in the JSON) passes every str field but can never
# be written as UTF-8: the task would be read, then fail as an infrastructure error each time it is sent to a
# sandbox or written to a file. A number such as `1e999` is valid JSON but reads as infinity; NaN and Infinity are
# not JSON at all, but Python's parser takes them.
BAD_VALUE = "clawgym_bad_value"
"""The pydantic error type of a string that is not valid Unicode or a float that is not finite."""

Loc = tuple[str | int, ...]
_VALUES_CHECKED: ContextVar[bool] = ContextVar("clawgym_values_checked", default=False)
"""Set while the data being validated is known to hold no bad string or float (see values_checked)."""


def text_problem(s: str) -> str | None:
    """Why `s` is not valid Unicode text (None when it is): a lone surrogate, which no UTF-8 file can hold."""
    if s.isascii():
        return None
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"not valid Unicode: a lone surrogate U+{ord(s[exc.start]):04X} at character {exc.start + 1} "
                "(text must be writable as UTF-8)")
    return None


def _loc_key(key: object) -> str | int:
    """A dict key as a part of an error's field path: shown quoted when printing it as is could mislead."""
    if isinstance(key, str) and key.isprintable() and len(key) <= 80:
        return key
    return _show(key) if isinstance(key, str) else repr(key)


_LEAVES = (int, bool, type(None))


def _all_good(data: Any) -> bool:
    """Whether every string and float in `data` is good: the quick search, without field paths. A task holds
    hundreds of values (a CSV's cells are strings in a list), so the exact JSON types are tested first."""
    stack = [data]
    while stack:
        obj = stack.pop()
        t = type(obj)
        if t is str:
            if not obj.isascii() and text_problem(obj):
                return False
        elif t is list:
            stack.extend(obj)
        elif t is dict:
            for k in obj:
                if type(k) is not str or not k.isascii():  # a key that needs a look
                    stack.append(k)
            stack.extend(obj.values())
        elif t in _LEAVES:
            continue
        elif t is float or isinstance(obj, float):
            if not math.isfinite(obj):
                return False
        elif isinstance(obj, str):
            if text_problem(obj):
                return False
        elif isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
        elif isinstance(obj, Record):  # a part built in code, passed as is
            stack.extend(obj.__dict__.values())
    return True


def find_bad_value(data: Any) -> tuple[Loc, str] | None:
    """The field path and problem of the first string (value or key) that is not valid Unicode, or float that is
    not finite, in `data` (JSON data: dicts, lists, strings, numbers; and records, as their fields). Iterative, so
    any nesting the JSON reader accepted is walked; the paths are only built when something is wrong."""
    if _all_good(data):
        return None
    stack: list[tuple[Loc, Any]] = [((), data)]
    while stack:
        loc, obj = stack.pop()
        if isinstance(obj, str):
            problem = text_problem(obj)
        elif isinstance(obj, float):
            problem = None if math.isfinite(obj) else f"not a finite number (reads as {obj})"
        elif isinstance(obj, (dict, Record)):
            items = obj.items() if isinstance(obj, dict) else obj.__dict__.items()
            problem = next((f"a key is {p}" for k, _ in items if isinstance(k, str) and (p := text_problem(k))), None)
            stack.extend((loc + (_loc_key(k),), v) for k, v in reversed(list(items)))
        elif isinstance(obj, (list, tuple)):
            stack.extend((loc + (i,), obj[i]) for i in range(len(obj) - 1, -1, -1))
            continue
        else:
            continue
        if problem is not None:
            return loc, problem
    return None


@contextmanager
def values_checked() -> Iterator[None]:
    """Within it, task records skip their search for bad strings and floats: the caller vouches there are none
    (clawgym.core.jsonl does, for a file's line, with one scan of its text and a float hook of the JSON parser)."""
    token = _VALUES_CHECKED.set(True)
    try:
        yield
    finally:
        _VALUES_CHECKED.reset(token)


class TaskPart(Record):
    """Base of the records a task is made of, the task included: a float field that is NaN or infinite is refused
    (`allow_inf_nan=False`). Free-form data (metadata, check args, generator params) is searched by the
    CheckedTaskPart that holds it."""

    model_config = ConfigDict(allow_inf_nan=False)


class CheckedTaskPart(TaskPart):
    """A task part that can be read on its own (Task, and the workspace and verifier of RECORD_TYPES): every
    string in it, keys included, must be valid Unicode and every float finite, down into free-form data and into
    parts built in code; the first that is not is refused with its field path. It is searched once, by the
    outermost such record; a file's line is searched only when one pass over its text finds it may need it."""

    checks_values: ClassVar[bool] = True
    """Read by clawgym.core.jsonl: lines of this record type get the one-pass check of their text and numbers."""

    @model_validator(mode="wrap")
    @classmethod
    def _valid_text_and_numbers(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        if _VALUES_CHECKED.get():
            return handler(data)
        bad = find_bad_value(data)
        if bad is not None:
            loc, problem = bad
            raise ValidationError.from_exception_data(cls.__name__, [InitErrorDetails(
                type=PydanticCustomError(BAD_VALUE, "{problem}", {"problem": problem}), loc=loc, input=None)])
        with values_checked():
            return handler(data)


MAX_CHECK_TIMEOUT_SECONDS = 3600.0
"""Longest a task's checker may run (CodeCheck.timeout_seconds). Real checkers take seconds and are given 60 to
120; an hour is 30 times that and still ends. Verification waits for the checker (twice, with a sub-score command)
before the next episode of its worker starts, so a task file must not be able to make that wait endless (1e999
reads as infinity) or years long (1e9)."""

MAX_TASK_TIMEOUT_SECONDS = 24 * 3600.0
"""Longest wall-time budget of one episode (Task.timeout_seconds). Real tasks ask 60 to 900 s; a day leaves room
for long-horizon tasks while every episode, and so every rollout, still ends. A run that needs longer sets its
own episode timeout (`clawgym rollout --episode-timeout`), which is not read from the task file."""


# --------------------------------------------------------------------------------------------- workspace


class GeneratedContent(TaskPart):
    """A file produced by a named generator from structured parameters (see clawgym.workspace.generators).

    Kinds: `csv` (header, rows), `json` (data), `yaml` (data), `xlsx` (sheets: {name: rows}),
    `ics` (events), `eml` (headers, body, attachments), `sqlite` (tables or sql), `git` (a repository
    built from a list of commits; the file path names the repository directory).
    """

    kind: Literal["csv", "json", "yaml", "xlsx", "ics", "eml", "sqlite", "git"]
    params: dict[str, Any] = Field(default_factory=dict)


class WorkspaceFile(TaskPart):
    """One file of a workspace. Exactly one of `content`, `content_b64`, `source` or `generate` is set."""

    path: str = Field(description="Path relative to the workspace root.")
    content: str | None = Field(default=None, description="Inline UTF-8 text.")
    content_b64: str | None = Field(default=None, description="Inline bytes, base64-encoded.")
    source: str | None = Field(
        default=None, description="Asset path, relative to the workspace spec's assets_dir, copied verbatim."
    )
    generate: GeneratedContent | None = Field(default=None, description="Content made by a generator.")
    mode: int | None = Field(default=None, description="Unix permission bits, e.g. 493 (0o755) for scripts.")

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        return _check_relative_path(v)

    @field_validator("source")
    @classmethod
    def _relative_source(cls, v: str | None) -> str | None:
        return None if v is None else _check_relative_path(v)

    @model_serializer(mode="wrap")
    def _written_without_unset(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo):
        # a file is written with the one way it is given (and its mode if set), not three nulls beside it
        data = handler(self)
        if info.mode == "json":
            for key in ("content", "content_b64", "source", "generate", "mode"):
                if data.get(key) is None:
                    data.pop(key, None)
        return data

    @model_validator(mode="after")
    def _exactly_one_source(self) -> WorkspaceFile:
        given = [k for k in ("content", "content_b64", "source", "generate") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"file {self.path!r} needs exactly one of content, content_b64, source, generate; got {given or 'none'}"
            )
        return self


class WorkspaceSpec(CheckedTaskPart):
    files: list[WorkspaceFile] = Field(default_factory=list)
    directories: list[str] = Field(default_factory=list, description="Empty directories to create.")
    mount_dir: str = Field(
        default=DEFAULT_MOUNT_DIR, description="Absolute path where the workspace appears inside the sandbox."
    )
    assets_dir: str | None = Field(
        default=None,
        description="Directory that `source` paths are relative to: a relative path inside the tasks file's directory.",
    )

    @field_validator("mount_dir")
    @classmethod
    def _absolute_mount(cls, v: str) -> str:
        return _check_mount_dir(v)

    @field_validator("assets_dir")
    @classmethod
    def _assets_inside(cls, v: str | None) -> str | None:
        return _check_assets_dir(v)

    @field_validator("directories")
    @classmethod
    def _relative_dirs(cls, v: list[str]) -> list[str]:
        return [_check_relative_path(d) for d in v]


# --------------------------------------------------------------------------------------------- verifier


def _use_in_schema(schema: dict[str, Any], cls: type) -> None:
    """JSON Schema of a written check (:func:`encode_checks`, :func:`encode_workspace_refs`): `use` names shared
    values, `rows_from` the check lending its rows, `{"refs": "others", "except": [...]}` names the other checks,
    `workspace_digests` the workspace files whose digests a docs_digests_equal compares."""
    props = schema.setdefault("properties", {})
    props["use"] = {
        "type": "object", "additionalProperties": {"type": "string"},
        "description": "Arguments given by name from the code check's `values` (argument -> value name)."}
    props["rows_from"] = {
        "type": "string", "description": "`args.rows` are the rows of this top-level check, cut to `args.header`."}
    props["refs"] = {"const": "others", "description": "A part naming every other top-level check, in order."}
    props["except"] = {"type": "array", "items": {"type": "string"},
                       "description": "With `refs`: the other checks it does not name."}
    props["workspace_digests"] = {
        "type": "array", "items": {"type": "string"},
        "description": "docs_digests_equal: `args.digests` of these files of the task's workspace."}


def _values_in_schema(schema: dict[str, Any], cls: type) -> None:
    """JSON Schema of a written code check: `values` holds the argument values its checks share."""
    props = schema.setdefault("properties", {})
    props["values"] = {
        "type": "object", "description": "Argument values two or more checks give alike, each written once "
                                         "(checks name them in `use`)."}
    props["workspace_texts"] = {
        "const": True, "description": "Arguments may hold {\"workspace_text\": PATH}: the text of that file of "
                                      "the task's workspace."}


class CheckCall(TaskPart):
    """One check as data: the check-library function `fn` (registered with `clawgym.checks.checklib.check`)
    called as `fn(ws, **args)`, or, with `parts`, the combinator `fn` (all_of, min_of, mean_of, gated) over the
    parts' scores, each part evaluated only when the combinator needs it. `args` are JSON data, never code. A
    task's top-level checks carry a `name` (the sub-score's name); parts need none.

    A part may instead be `{"ref": NAME}` alone: the score of the task's top-level check NAME (evaluated once per
    grading, whichever names it first), instead of a copy of that check (check library v3). A ref to a name the
    task lacks, to the check it is part of, or in a cycle is refused with the task (:class:`CodeCheck`). `ref`
    is a minor addition (clawgym.core.versions)."""

    model_config = ConfigDict(json_schema_extra=_use_in_schema)

    name: str | None = Field(default=None, min_length=1, max_length=200)
    fn: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    args: dict[str, Any] = Field(default_factory=dict)
    parts: list[CheckCall] = Field(default_factory=list)
    ref: str | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("name", "ref")
    @classmethod
    def _printable_name(cls, v: str | None) -> str | None:
        return None if v is None else _check_id(v)

    @model_validator(mode="after")
    def _fn_or_ref(self) -> CheckCall:
        if self.ref is not None:
            if self.fn is not None or self.args or self.parts or self.name is not None:
                raise ValueError(f"a part naming another check (ref {self.ref!r}) holds nothing else: no name, fn, "
                                 "args or parts")
        elif self.fn is None:
            raise ValueError("a check needs `fn` (a check-library function), or, as a part, `ref` (the name of "
                             "another check of the task)")
        return self

    def refs(self) -> set[str]:
        """The names of the checks this one names (its parts' refs, at any depth)."""
        return {self.ref} if self.ref is not None else set().union(*(p.refs() for p in self.parts))

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler):
        # written without the fields at their defaults: a task holds many checks
        data = handler(self)
        for key in ("name", "fn", "args", "parts", "ref"):
            if key in data and not data[key]:
                del data[key]
        return data


def _check_refs(checks: list[CheckCall]) -> None:
    """ValueError for a ref (a part naming another check) to a name no check of the list has, to the check it is
    part of, or in a cycle: each would have no score to give."""
    names = {c.name for c in checks}
    graph = {c.name: c.refs() for c in checks}
    for name, targets in graph.items():
        for target in sorted(targets):
            if target == name:
                raise ValueError(f"check {name!r} refers to itself (ref {target!r})")
            if target not in names:
                raise ValueError(f"check {name!r} refers to {target!r}, which is no check of this task")
    done: set[str | None] = set()
    for start in graph:  # depth first from each check: a name met again on the current path closes a cycle
        if start in done:
            continue
        path: list[str | None] = [start]
        stack: list[tuple[str | None, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        while stack:
            node, todo = stack[-1]
            nxt = next(todo, None)
            if nxt is None:
                stack.pop()
                path.pop()
                done.add(node)
            elif nxt in path:
                cycle = path[path.index(nxt):] + [nxt]
                raise ValueError("checks refer to each other in a cycle: " + " -> ".join(map(repr, cycle)))
            elif nxt not in done:
                stack.append((nxt, iter(sorted(graph[nxt]))))
                path.append(nxt)


class CheckLibRef(TaskPart):
    """A version of the check library: its CHECKLIB_VERSION and the sha256 of its source
    (`clawgym.checks.current_checklib`)."""

    version: int = Field(ge=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class CodeCheck(TaskPart):
    """A programmatic check run inside the sandbox after the agent ends.

    `python`: `source` defines `grade(transcript, workspace_path) -> dict[str, float]` (PinchBench shape); the
    score is the mean of the values. `checks`: the task's checks as data (`checks`, see :class:`CheckCall`),
    evaluated inside the sandbox against the current check library, which is copied into the control directory
    at grading time; `checklib` records the library version the task was written for (the verdict records the one
    that graded it). `shell`: `entry` is a shell command run from the workspace root (ClawGym's
    `bash reward/reward.sh`); its last stdout line is the score in [0, 1]. `files` are copied into the workspace
    only after the agent has finished, so the agent never sees them.

    `checks` and `checklib` are a minor addition (see clawgym.core.versions): written only for kind `checks`.
    Their written form is shorter than the checks in memory (:func:`encode_checks`; in a task, also
    :func:`encode_workspace_refs`) and reads back into them: graders only ever get the full form.
    """

    model_config = ConfigDict(json_schema_extra=_values_in_schema)

    kind: Literal["python", "shell", "checks"]
    source: str | None = None
    entry: str | None = None
    subscores_entry: str | None = Field(
        default=None,
        description="Optional shell command whose stdout is a JSON object of named sub-scores (e.g. ClawGym's check.py).",
    )
    files: list[WorkspaceFile] = Field(default_factory=list)
    timeout_seconds: float = Field(
        default=120.0, gt=0, le=MAX_CHECK_TIMEOUT_SECONDS,
        description=f"Wall-time limit of the checker's commands, at most {MAX_CHECK_TIMEOUT_SECONDS:.0f} s.")
    checks: list[CheckCall] = Field(default_factory=list)
    checklib: CheckLibRef | None = None

    @model_validator(mode="after")
    def _kind_fields(self) -> CodeCheck:
        if self.kind == "python" and not self.source:
            raise ValueError("a python code check needs `source` defining grade(transcript, workspace_path)")
        if self.kind == "shell" and not self.entry:
            raise ValueError("a shell code check needs `entry`, the command to run")
        if self.kind == "checks":
            if not self.checks or self.checklib is None:
                raise ValueError("a `checks` code check needs `checks` (the named checks) and `checklib` (the "
                                 "check library version it was written for)")
            names = [c.name for c in self.checks]
            if any(not n for n in names):
                raise ValueError("every check of a `checks` code check needs a `name`")
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"check names must be unique: {', '.join(map(repr, dup[:5]))}")
            _check_refs(self.checks)
        elif self.checks or self.checklib is not None:
            raise ValueError(f"`checks` and `checklib` belong to a code check of kind `checks`, not {self.kind!r}")
        return self

    @model_validator(mode="before")
    @classmethod
    def _decode_checks(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("values" in data or isinstance(data.get("checks"), list)):
            data = dict(data)
            data["checks"] = decode_checks(data.get("checks"), data.pop("values", _NO_VALUES))
        return data

    @model_serializer(mode="wrap")
    def _omit_unused_checks(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo):
        # a minor addition: python and shell checks are written as before
        data = handler(self)
        if not self.checks and self.checklib is None:
            data.pop("checks", None)
            data.pop("checklib", None)
        elif info.mode == "json":
            for key in ("source", "entry", "subscores_entry"):
                if data.get(key) is None:
                    data.pop(key, None)
            if not data.get("files"):
                data.pop("files", None)
            if data.get("timeout_seconds") == type(self).model_fields["timeout_seconds"].default:
                del data["timeout_seconds"]
            data["checks"], values = encode_checks(data["checks"])
            if values:
                data["values"] = values
        return data


class RubricRule(TaskPart):
    """One rubric criterion, scored on the five bands 0, .25, .5, .75, 1."""

    name: Id
    description: str = ""
    file_path: str | None = Field(default=None, description="Workspace file the rule is judged against.")
    weight: float = Field(default=1.0, ge=0)
    scores: dict[str, str] = Field(default_factory=dict, description="Band (e.g. '1.0') -> what earns it.")


class Rubric(TaskPart):
    rules: list[RubricRule] = Field(default_factory=list)
    text: str | None = Field(default=None, description="Free-form rubric as written by the task author.")
    expected_behavior: str | None = None
    eval_input: str | None = None


class VerifierSpec(CheckedTaskPart):
    code: CodeCheck | None = None
    rubric: Rubric | None = None
    code_weight: float | None = Field(default=None, ge=0, description="Defaults to 0.7 when a rubric exists, else 1.")
    rubric_weight: float | None = Field(default=None, ge=0, description="Defaults to 0.3 when code exists, else 1.")
    pass_threshold: float = Field(default=1.0, ge=0, le=1, description="A final score >= this counts as a pass.")

    @model_serializer(mode="wrap")
    def _written_without_defaults(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo):
        # a synthesized task's verifier is its code check: no `"rubric": null, "code_weight": null, ...` beside it
        data = handler(self)
        if info.mode == "json" and self.code is not None and self.code.kind == "checks":
            for key in ("rubric", "code_weight", "rubric_weight", "pass_threshold"):
                if key in data and data[key] == type(self).model_fields[key].default:
                    del data[key]
        return data

    @model_validator(mode="after")
    def _something_to_check(self) -> VerifierSpec:
        if self.code is None and self.rubric is None:
            raise ValueError("a verifier needs a code check, a rubric, or both")
        return self

    def weights(self) -> tuple[float, float]:
        """(code weight, rubric weight), normalised to sum to 1 over the parts that exist."""
        if self.code is not None and self.rubric is not None:
            wc = DEFAULT_CODE_WEIGHT if self.code_weight is None else self.code_weight
            wr = DEFAULT_RUBRIC_WEIGHT if self.rubric_weight is None else self.rubric_weight
            total = wc + wr
            return (wc / total, wr / total) if total > 0 else (0.5, 0.5)
        return (1.0, 0.0) if self.code is not None else (0.0, 1.0)


# --------------------------------------------------------------------------------------------- task


class ToolCall(TaskPart):
    """A call of one of the agent's tools (OpenClaw names: read, write, edit, exec, ls)."""

    name: Id
    arguments: dict[str, Any] = Field(default_factory=dict)


class ReferenceSolution(TaskPart):
    steps: list[ToolCall] = Field(default_factory=list)
    final_message: str = ""


class Session(TaskPart):
    """One user turn of a multi-session task (PinchBench `sessions`)."""

    id: Id
    prompt: str
    new_session: bool = False


class Task(Versioned, CheckedTaskPart):
    schema_kind: ClassVar[str] = "task"
    unique_key: ClassVar[str | None] = "id"

    id: str = Field(min_length=1, description=(
        "Unique in its file; at most 200 bytes, in NFC, without '/', '\\', control, invisible (format), private-use "
        "or unassigned characters, line separators or spaces other than U+0020."))
    source: Id = Field(default="clawgym", description="Where the task came from: synth, pinchbench, clawgym-folder, ...")
    category: Id = ""
    subcategory: Id = ""
    operations: list[Id] = Field(default_factory=list)
    persona: str | None = None
    skills: list[Id] = Field(default_factory=list)
    instruction: str = Field(min_length=1, description="The user's request, exactly as the agent receives it.")
    sessions: list[Session] = Field(default_factory=list, description="Further user turns, for multi-session tasks.")
    workspace: WorkspaceSpec = Field(default_factory=WorkspaceSpec)
    verifier: VerifierSpec
    reference: ReferenceSolution | None = None
    timeout_seconds: float = Field(default=600.0, gt=0, le=MAX_TASK_TIMEOUT_SECONDS,
                                   description="Wall-time budget of one episode, at most 86400 s (24 h).")
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _file_name_safe_id(cls, v: str) -> str:
        return _check_task_id(v)

    @model_validator(mode="before")
    @classmethod
    def _workspace_refs(cls, data: Any) -> Any:
        return decode_workspace_refs(data)

    @model_serializer(mode="wrap")
    def _written_with_workspace_refs(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo):
        # what a check copies from the workspace is named, not copied (encode_workspace_refs); the minor fields as
        # Versioned writes them
        data = handler(self)
        for name in self.minor_fields:
            if name in data and getattr(self, name) == type(self).model_fields[name].get_default(
                    call_default_factory=True):
                del data[name]
        return encode_workspace_refs(data) if info.mode == "json" else data


# --------------------------------------------------------------------------------------------- outcomes

VerdictStatus = Literal["scored", "checker_failed", "unscored", "infra_error"]


class Verdict(Versioned):
    """The verifier's judgement of one episode.

    `scored`: the checks ran. `checker_failed`: the checker crashed, timed out or printed no number; this is the
    agent's failure (usually missing output) and scores 0, with the reason in `error`. `unscored`: nothing could
    be scored yet (e.g. a rubric-only task with no judge configured). `infra_error`: the sandbox or host failed;
    such an episode is never counted as a model failure.
    """

    schema_kind: ClassVar[str] = "verdict"
    status: VerdictStatus
    checks: dict[str, float] = Field(default_factory=dict, description="Named sub-scores in [0, 1].")
    code_score: float | None = None
    rubric_score: float | None = None
    score: float = Field(default=0.0, ge=0, le=1)
    passed: bool = False
    weights: tuple[float, float] = (1.0, 0.0)
    error: str | None = None
    notes: list[str] = Field(default_factory=list)
    output_tail: str = Field(default="", description="Last lines of the checker's output, for debugging.")
    duration_s: float = 0.0
    checklib: CheckLibRef | None = Field(
        default=None, description="The check library that graded a task whose checks are data (kind `checks`).")

    minor_fields: ClassVar[frozenset[str]] = frozenset({"checklib"})


TrajectoryStatus = Literal["completed", "agent_error", "timeout", "skipped", "infra_error"]


class ErrorInfo(Record):
    kind: str
    message: str


class Trajectory(Versioned):
    """One episode: an agent on a task in a sandbox, with its transcript and verdict."""

    schema_kind: ClassVar[str] = "trajectory"

    id: str = Field(description="Episode id: '<task_id>#<sample>'.")
    task_id: str
    sample: int = 0
    agent: str
    model: str | None = None
    sandbox: str
    status: TrajectoryStatus
    error: ErrorInfo | None = None
    transcript: list[dict[str, Any]] = Field(
        default_factory=list, description="OpenClaw session events (type=session, then type=message entries)."
    )
    final_message: str = ""
    tool_calls: int = 0
    tool_errors: int = 0
    verdict: Verdict | None = None
    started_at: str
    duration_s: float
    workspace_snapshot: str | None = Field(
        default=None, description="Final workspace (a .tar.gz, or a directory in older runs), relative to the run dir."
    )
    messages: list[dict[str, Any]] = Field(
        default_factory=list, description="The chat messages exchanged with the model (OpenAI shape), all sessions."
    )
    tools: list[dict[str, Any]] = Field(default_factory=list, description="Tool schemas offered to the model.")
    steps: list[dict[str, Any]] = Field(
        default_factory=list, description="One entry per model call: latency, attempts, usage, finish reason, timings."
    )
    usage: dict[str, Any] = Field(default_factory=dict, description="Token usage summed over the episode.")
    attempts: int = Field(default=1, description="Episode attempts, counting those retried after infrastructure errors.")
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def score(self) -> float | None:
        return self.verdict.score if self.verdict and self.verdict.status in ("scored", "checker_failed") else None


RECORD_TYPES: dict[str, type[Record]] = {
    "task": Task,
    "trajectory": Trajectory,
    "verdict": Verdict,
    "workspace": WorkspaceSpec,
    "verifier": VerifierSpec,
}
