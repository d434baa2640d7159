"""Checks as data, and the check library as one versioned file: the grading contract every stage shares.

A synthesized task stores its checks as data: `CodeCheck(kind="checks", checks=[{name, fn, args, parts}],
checklib={version, sha256})` (:class:`clawgym.core.records.CheckCall`). `fn` names a function of the check
library registered with `@check` (:mod:`clawgym.checks.checklib` and its checklib_*.py extensions, concatenated into
ONE source, :data:`CHECKLIB_SOURCE`); `args` are JSON data; a combinator (all_of, min_of, mean_of, gated) takes
its parts, each evaluated only when it needs it. An unknown `fn` or arguments that are not JSON data fail when the
task is made (:func:`validate_call`), not when it is graded.

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
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from clawgym.core.records import CheckCall, CheckLibRef, Task

COMBINATORS = frozenset({"all_of", "min_of", "mean_of", "gated"})
"""Library functions that combine parts (`parts`, each a function giving a score) instead of reading `ws`."""


def _checklib_source() -> str:
    """checklib.py followed by every checklib_*.py extension (sorted), as one stdlib-only source."""
    here = Path(__file__).parent
    files = [here / "checklib.py"] + sorted(here.glob("checklib_*.py"))
    return "\n\n".join(f.read_text(encoding="utf-8") for f in files)


CHECKLIB_SOURCE = _checklib_source()
"""The check library: the one file graders import (tests may replace it to stand for another version)."""

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


def current_checklib() -> tuple[CheckLibRef, str]:
    """(the version and sha256 of the check library, its source): what grades tasks now."""
    return _ref(CHECKLIB_SOURCE), CHECKLIB_SOURCE


# --------------------------------------------------------------------------------------------- the library's index


def _decorators(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
    return set()


def _library_index(source: str) -> tuple[dict[str, str], dict[str, tuple[int, str, set[str]]], frozenset[str]]:
    """({imported name: import line}, {top-level name: (order, source, names it uses)}, registered check
    functions) of the library. A definition's source and the names it uses leave out its decorators (`@check`
    registers it; a rendered grade() calls it by name)."""
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
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    defs[target.id] = (order, text, used)
    return imports, defs, frozenset(registered)


@functools.lru_cache(maxsize=4)
def _index(source: str) -> tuple[dict[str, str], dict[str, tuple[int, str, set[str]]], frozenset[str]]:
    return _library_index(source)


def registered_checks(source: str | None = None) -> frozenset[str]:
    """The names of the check functions the library (`source`, default the current one) registers."""
    return _index(source if source is not None else CHECKLIB_SOURCE)[2]


def library_subset(names: set[str], source: str | None = None) -> str:
    """Only the check-library definitions `names` need (transitively), for a self-contained grade()."""
    imports_, defs, _ = _index(source if source is not None else CHECKLIB_SOURCE)
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
    library, combinators have parts and the other functions none."""
    known = registered_checks(source)
    where = where or f"check {call.name!r}"
    if call.fn not in known:
        raise UnknownCheckError(f"{where}: the check library (v{library_version(source or CHECKLIB_SOURCE)}) "
                                f"has no check function {call.fn!r} (register it with @check)")
    if call.fn in COMBINATORS and not call.parts:
        raise UnknownCheckError(f"{where}: the combinator {call.fn!r} needs `parts`")
    if call.parts and call.fn not in COMBINATORS:
        raise UnknownCheckError(f"{where}: {call.fn!r} is not a combinator and takes no `parts`")
    for i, part in enumerate(call.parts):
        validate_call(part, source, f"{where} part {i + 1}")


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


def _expr(fn: str, args: dict[str, Any], parts: list) -> str:
    if parts:  # each part as a function: a combinator evaluates only the parts that can change its value
        return f"{fn}(" + ", ".join(f"lambda: {_expr(*p)}" for p in parts) + ")"
    return f"{fn}(ws, **{args!r})"


def _fns_of(call: tuple) -> set[str]:
    fn, _, parts = call
    return {fn}.union(*(_fns_of(p) for p in parts)) if parts else {fn}


def render_checks(named: Iterable[tuple[str, tuple]], source: str) -> str:
    lines = []
    used: set[str] = {"Path"}
    for name, call in named:
        used |= _fns_of(call)
        lines.append(f"    ({name!r}, lambda ws, transcript: {_expr(*call)}),")
    _, defs, _ = _index(source)
    missing = {n for n in used - {"Path"} if n not in defs}
    if missing:
        raise UnknownCheckError(f"checks use functions the check library lacks: {', '.join(sorted(missing))}")
    return library_subset(used, source) + GRADE_TAIL.format(checks="\n".join(lines))


def _call_tuple(c: CheckCall) -> tuple:
    return (c.fn, c.args, [_call_tuple(p) for p in c.parts])


def render_grade_source(task: Task) -> str:
    """A self-contained PinchBench `grade(transcript, workspace_path)` source for the task's code check: a
    `python` check's own source; for checks as data, the subset of the current check library they use and one
    lambda per check. (The rendered grade() scores a check that raises as 0, as PinchBench graders do; graded
    here, checks as data report it as checker_failed.)"""
    code = task.verifier.code
    if code is None or code.kind == "shell":
        raise ValueError(f"task {task.id}: only a python or checks code check renders as a grade() source")
    if code.kind == "python":
        return code.source or ""
    for call in code.checks:
        validate_call(call)
    return render_checks(((c.name or "", _call_tuple(c)) for c in code.checks), CHECKLIB_SOURCE)
