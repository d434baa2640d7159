"""Checks as data, and the check library as one versioned file: the grading contract every stage shares.

A synthesized task stores its checks as data: `CodeCheck(kind="checks", checks=[{name, fn, args, parts}],
checklib={version, sha256})` (:class:`clawgym.core.records.CheckCall`). `fn` names a function of the check
library registered with `@check` (:mod:`clawgym.checks.checklib` and its checklib_*.py extensions, concatenated into
ONE source, :data:`CHECKLIB_SOURCE`); `args` are JSON data; a combinator (all_of, min_of, mean_of, gated) takes
its parts, each evaluated only when it needs it. A part may instead name another of the task's checks
(`{"ref": name}`): its score, evaluated once per grading, instead of a copy of it (a gate on the task's other
checks costs a name each). An unknown `fn` or arguments that are not JSON data fail when the task is made
(:func:`validate_call`), not when it is graded; a ref to an unknown name, to its own check or in a cycle fails
when the task is read (:class:`clawgym.core.records.CodeCheck`).

Third-party check functions need no edit of clawgym: a distribution declares a check-library extension in the
entry point group ``clawgym.checks`` (:data:`EXTENSIONS`, see :func:`library_source`).

At grading time the current library is written to the sandbox's control directory, after the agent has ended, and
the grader there evaluates the check list against it (:mod:`clawgym.verify.code`): a fix to the library reaches
every task already written. The task records the library version it was written for; the verdict records the
one that graded it (:func:`current_checklib`). A task written for a NEWER library than this clawgym has is
`checker_failed` ("upgrade clawgym"); an older one is graded with the current library, with a note.

Tasks with a `python` grade() source (imported, third-party, or synthesized before checks were data) grade as
they always did. :func:`render_grade_source` renders a self-contained grade() (the library subset a task uses,
then one lambda per check) for exporting to PinchBench's format.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import math
import re
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from clawgym.core.records import CheckCall, CheckLibRef, Task
from clawgym.core.registry import Registry

COMBINATORS = frozenset({"all_of", "min_of", "mean_of", "gated"})
"""Library functions that combine parts (`parts`, each a function giving a score) instead of reading `ws`."""


def _checklib_source() -> str:
    """checklib.py followed by every checklib_*.py extension (sorted), as one stdlib-only source."""
    here = Path(__file__).parent
    files = [here / "checklib.py"] + sorted(here.glob("checklib_*.py"))
    return "\n\n".join(f.read_text(encoding="utf-8") for f in files)


CHECKLIB_SOURCE = _checklib_source()
"""The built-in check library (tests may replace it to stand for another version); graders import it with the
installed extensions appended (:func:`library_source`)."""

_VERSION_LINE = re.compile(r"^CHECKLIB_VERSION = (\d+)\s*$", re.M)


class UnknownCheckError(ValueError):
    """A check names a function the check library does not register, or its arguments are not JSON data."""


def library_version(source: str) -> int:
    """The CHECKLIB_VERSION a library source states."""
    m = _VERSION_LINE.search(source)
    if m is None:
        raise ValueError("the check library source states no CHECKLIB_VERSION")
    return int(m.group(1))


@functools.lru_cache(maxsize=4)
def _ref(source: str) -> CheckLibRef:
    return CheckLibRef(version=library_version(source), sha256=hashlib.sha256(source.encode("utf-8")).hexdigest())


def _is_module(name: str, obj: Any) -> None:
    if not isinstance(obj, ModuleType):
        raise TypeError(f"check-library extension {name!r} must name a module (\"package.module\"), "
                        f"not a {type(obj).__name__}")


EXTENSIONS: Registry[ModuleType] = Registry("check-library extension", "clawgym.checks", check=_is_module)
"""Check-library extensions of other distributions, by name: each a module of STANDARD-LIBRARY-ONLY functions
registered with ``@check`` (``@check(runs_program=True)`` for one that runs a program), declared as::

    [project.entry-points."clawgym.checks"]
    my-checks = "my_package.my_checks"

Its source is appended to the built-in library (:func:`library_source`) as the checklib_*.py extensions are: it
uses the library's names (``check``, ``_text``, ``same`` ...) directly, importing them on the host only (``try:
from clawgym.checks.checklib import check ... except ImportError: pass``, as checklib_sys.py does)."""

_SOURCES: dict[tuple, str] = {}
_SOURCES_LOCK = threading.Lock()


def _extension_sources(builtin: str) -> list[tuple[str, str]]:
    """(name, source) of each extension, sorted by name; ValueError for one that redefines a name of the
    library (a built-in check function or helper) or of another extension: appended to the library it would
    replace it for every check."""
    _, defs, registered, _ = _index(builtin)
    taken = {n: "the built-in check function" if n in registered else "a name of the check library" for n in defs}
    out = []
    for name, module in EXTENSIONS.items():
        source = inspect.getsource(module)
        _, ext_defs, ext_registered, _ = _library_index(source)
        clash = sorted(n for n in ext_defs if n in taken)
        if clash:
            raise ValueError(f"check-library extension {name!r} ({module.__name__}) redefines {clash[0]!r}, "
                             f"{taken[clash[0]]}: give its functions names of their own")
        if not ext_registered:
            raise ValueError(f"check-library extension {name!r} ({module.__name__}) registers no check function "
                             "(decorate them with @check)")
        taken.update({n: f"defined by the extension {name!r}" for n in ext_defs})
        out.append((name, source))
    return out


def library_source() -> str:
    """The check library graders get: :data:`CHECKLIB_SOURCE` (checklib.py and its checklib_*.py), then the source
    of each installed extension (:data:`EXTENSIONS`, sorted by name). Its sha256, which tasks and verdicts record
    (:func:`current_checklib`), covers the extensions: a task written with an extension records a sha256 that
    tells it apart from the built-in library's; the version is the built-in library's CHECKLIB_VERSION.
    Extensions are looked up once per `sys.path` (an entry point scan costs milliseconds; checks are validated
    by the thousand)."""
    key = (id(CHECKLIB_SOURCE), CHECKLIB_SOURCE, tuple(sys.path))
    with _SOURCES_LOCK:
        if key in _SOURCES:
            return _SOURCES[key]
    extensions = _extension_sources(CHECKLIB_SOURCE)
    source = CHECKLIB_SOURCE + "".join(f"\n\n# check-library extension {name!r}\n{text}" for name, text in extensions)
    with _SOURCES_LOCK:
        _SOURCES.clear()
        _SOURCES[key] = source
    return source


def current_checklib() -> tuple[CheckLibRef, str]:
    """(the version and sha256 of the check library, its source): what grades tasks now."""
    source = library_source()
    return _ref(source), source


# --------------------------------------------------------------------------------------------- the library's index


def _decorators(node: ast.stmt) -> dict[str, dict[str, Any]]:
    """{decorator name: its constant keyword arguments} (`@check` and `@check(runs_program=True)`)."""
    out: dict[str, dict[str, Any]] = {}
    for d in getattr(node, "decorator_list", []):
        if isinstance(d, ast.Name):
            out[d.id] = {}
        elif isinstance(d, ast.Call) and isinstance(d.func, ast.Name):
            out[d.func.id] = {k.arg: k.value.value for k in d.keywords
                              if k.arg is not None and isinstance(k.value, ast.Constant)}
    return out


Index = tuple[dict[str, str], dict[str, tuple[int, str, set[str]]], frozenset[str], frozenset[str]]


def _library_index(source: str) -> Index:
    """({imported name: import line}, {top-level name: (order, source, names it uses)}, registered check
    functions, those of them that run a program) of the library. A definition's source and the names it uses
    leave out its decorators (`@check` registers it; a rendered grade() calls it by name)."""
    tree = ast.parse(source)
    # ast.get_source_segment splits the whole source again for every node: split it once here, the same way
    # (line ends \r\n, \r or \n only; columns are UTF-8 byte offsets)
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", source)

    def segment(node: ast.stmt) -> str:
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        end_col = node.end_col_offset if node.end_col_offset is not None else len(lines[last].encode())
        if first == last:
            return lines[first].encode()[node.col_offset:end_col].decode()
        return (lines[first].encode()[node.col_offset:].decode() + "".join(lines[first + 1:last])
                + lines[last].encode()[:end_col].decode())

    imports: dict[str, str] = {}
    defs: dict[str, tuple[int, str, set[str]]] = {}
    registered: set[str] = set()
    programs: set[str] = set()
    for order, node in enumerate(tree.body):
        text = segment(node)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if isinstance(node, ast.ImportFrom):
                    line = f"from {node.module} import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                else:
                    line = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                imports.setdefault(bound, line)
            continue
        decorators = _decorators(node)
        deco = getattr(node, "decorator_list", [])
        used = {n.id for part in ast.iter_child_nodes(node) if not any(part is d for d in deco)
                for n in ast.walk(part) if isinstance(n, ast.Name)}
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defs[node.name] = (order, text, used)
            if "check" in decorators:
                registered.add(node.name)
                if decorators["check"].get("runs_program") is True:
                    programs.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    defs[target.id] = (order, text, used)
    return imports, defs, frozenset(registered), frozenset(programs)


@functools.lru_cache(maxsize=4)
def _index(source: str) -> Index:
    return _library_index(source)


def registered_checks(source: str | None = None) -> frozenset[str]:
    """The names of the check functions the library (`source`, default the current one) registers."""
    return _index(source if source is not None else library_source())[2]


def program_checks(source: str | None = None) -> frozenset[str]:
    """The check functions of the library (`source`, default the current one) that run a program (a test suite,
    a script, a query): registered with ``@check(runs_program=True)``."""
    return _index(source if source is not None else library_source())[3]


def library_subset(names: set[str], source: str | None = None) -> str:
    """Only the check-library definitions `names` need (transitively), for a self-contained grade()."""
    imports_, defs, _, _ = _index(source if source is not None else library_source())
    todo, keep = list(names), set()
    while todo:
        name = todo.pop()
        if name in keep or name not in defs:
            continue
        keep.add(name)
        todo.extend(defs[name][2] - keep)
    parts = sorted((defs[n][0], defs[n][1]) for n in keep)
    seen: set[str] = set()
    body = [text for _, text in parts if not (text in seen or seen.add(text))]
    uses = set(names).union(*(defs[n][2] for n in keep))
    imports = sorted({line for name, line in imports_.items() if name in uses})
    return "\n".join(imports) + "\n\n\n" + "\n\n\n".join(body) + "\n"


# --------------------------------------------------------------------------------------------- checks as data


_SCALARS = (str, int, bool, type(None))  # by exact type: the common case (a synthesized task's args hold thousands)


def json_data(value: Any, where: str) -> Any:
    """`value` as JSON data (tuples become lists); UnknownCheckError for anything JSON cannot carry as it is."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UnknownCheckError(f"{where}: {value!r} is not JSON data")
        return value
    if value is None or isinstance(value, (bool, int, str)):  # a subclass (an IntEnum, a str subclass)
        return value
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _SCALARS else json_data(v, where) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise UnknownCheckError(f"{where}: a mapping with keys that are not strings is not JSON data")
        return {k: v if type(v) in _SCALARS else json_data(v, where) for k, v in value.items()}
    raise UnknownCheckError(f"{where}: a {type(value).__name__} is not JSON data")


def validate_call(call: CheckCall, source: str | None = None, where: str = "") -> None:
    """UnknownCheckError unless every function `call` names (parts included) is a registered check function of the
    library, combinators have parts and the other functions none. A part that names another check (`ref`) is
    checked with the task's check list (:class:`clawgym.core.records.CodeCheck`)."""
    if call.ref is not None:
        return
    known = registered_checks(source)
    where = where or f"check {call.name!r}"
    if call.fn not in known:
        raise UnknownCheckError(f"{where}: the check library (v{library_version(source or library_source())}) "
                                f"has no check function {call.fn!r} (register it with @check)")
    if call.fn in COMBINATORS and not call.parts:
        raise UnknownCheckError(f"{where}: the combinator {call.fn!r} needs `parts`")
    if call.parts and call.fn not in COMBINATORS:
        raise UnknownCheckError(f"{where}: {call.fn!r} is not a combinator and takes no `parts`")
    for i, part in enumerate(call.parts):
        validate_call(part, source, f"{where} part {i + 1}")


def inline_refs(checks: list[CheckCall]) -> list[CheckCall]:
    """The checks with every part that names another check (`ref`) replaced by a copy of that check (the form of
    checks before refs, which a grader of check library v2 evaluates: the same scores). The refs must be valid
    (a validated :class:`clawgym.core.records.CodeCheck`'s are)."""
    by_name = {c.name: c for c in checks}

    def expand(call: CheckCall) -> CheckCall:
        if call.ref is not None:
            target = expand(by_name[call.ref])
            return target.model_copy(update={"name": None})
        if not call.parts:
            return call
        return call.model_copy(update={"parts": [expand(p) for p in call.parts]})

    return [expand(c) for c in checks]


# --------------------------------------------------------------------------------------------- grade() sources

GRADE_TAIL = '''

CHECKS = [
{checks}
]


def grade(transcript, workspace_path):
    ws = Path(workspace_path)
    scores = {{}}
    for name, fn in CHECKS:
        try:
            value = float(fn(ws, transcript))
        except Exception:
            value = 0.0
        scores[name] = max(0.0, min(1.0, value))
    return scores
'''


# the tail of a grade() whose checks name other checks (refs): each check is evaluated once, when it comes or when
# a check names it first, and a ref is the value that check got (a check that raises scores 0, and so does each
# check naming it, as a copy of it would)
GRADE_TAIL_REFS = '''

CHECKS = [
{checks}
]


def grade(transcript, workspace_path):
    ws = Path(workspace_path)
    by_name = dict(CHECKS)
    done = {{}}

    def ref(name):
        if name not in done:
            done[name] = by_name[name](ws, transcript, ref)
        return done[name]

    scores = {{}}
    for name, _ in CHECKS:
        try:
            value = float(ref(name))
        except Exception:
            value = 0.0
        scores[name] = max(0.0, min(1.0, value))
    return scores
'''

REF = "<ref>"
"""The `fn` of a call tuple (fn, args, parts) that names another check: (REF, {"name": name}, [])."""


def _expr(fn: str, args: dict[str, Any], parts: list) -> str:
    if fn == REF:
        return f"ref({args['name']!r})"
    if parts:  # each part as a function: a combinator evaluates only the parts that can change its value
        return f"{fn}(" + ", ".join(f"lambda: {_expr(*p)}" for p in parts) + ")"
    return f"{fn}(ws, **{args!r})"


def _fns_of(call: tuple) -> set[str]:
    fn, _, parts = call
    if fn == REF:
        return set()
    return {fn}.union(*(_fns_of(p) for p in parts)) if parts else {fn}


def _has_ref(call: tuple) -> bool:
    return call[0] == REF or any(_has_ref(p) for p in call[2])


def render_checks(named: Iterable[tuple[str, tuple]], source: str) -> str:
    """A self-contained grade() source: the library subset the calls (fn, args, parts) use, one lambda each."""
    named = list(named)
    refs = any(_has_ref(call) for _, call in named)
    lines = []
    used: set[str] = {"Path"}
    for name, call in named:
        used |= _fns_of(call)
        lines.append(f"    ({name!r}, lambda ws, transcript{', ref' if refs else ''}: {_expr(*call)}),")
    _, defs, _, _ = _index(source)
    missing = {n for n in used - {"Path"} if n not in defs}
    if missing:
        raise UnknownCheckError(f"checks use functions the check library lacks: {', '.join(sorted(missing))}")
    return library_subset(used, source) + (GRADE_TAIL_REFS if refs else GRADE_TAIL).format(checks="\n".join(lines))


def _call_tuple(c: CheckCall) -> tuple:
    if c.ref is not None:
        return (REF, {"name": c.ref}, [])
    return (c.fn, c.args, [_call_tuple(p) for p in c.parts])


def render_grade_source(task: Task) -> str:
    """A self-contained PinchBench `grade(transcript, workspace_path)` source for the task's code check: a
    `python` check's own source; for checks as data, the subset of the current check library they use and one
    lambda per check; a check naming another (`ref`) gets the value that check got, each evaluated once. (The
    rendered grade() scores a check that raises as 0, as PinchBench graders do; graded here, checks as data
    report it as checker_failed.)"""
    code = task.verifier.code
    if code is None or code.kind == "shell":
        raise ValueError(f"task {task.id}: only a python or checks code check renders as a grade() source")
    if code.kind == "python":
        return code.source or ""
    for call in code.checks:
        validate_call(call)
    return render_checks(((c.name or "", _call_tuple(c)) for c in code.checks), library_source())
