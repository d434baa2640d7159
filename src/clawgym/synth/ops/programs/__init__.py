"""The reference programs of the operations (:attr:`clawgym.synth.ops.base.StepPlan.program`), one real Python
file each, so that ruff lints them and a test compiles them (a shell program, such as
write_automation_script_tidy.sh, is read as it is and run by its test).

A program file is a docstring (what it computes, for whom), optionally ``# ruff: noqa: ...`` lines, one blank line
and then the program exactly as a task's reference runs it. The request's constants (paths, column names, dates)
are markers in it: a string literal ``'{name}'``, which :func:`render` replaces with ``repr`` of the value, the way
the program would be written with those constants.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
_MARKER = re.compile(r"'\{([a-z_]+)\}'")


@functools.cache
def source(name: str) -> str:
    """The program of ``<name>.py`` (its docstring, ruff directives and the blank line after them left out)."""
    text = (HERE / f"{name}.py").read_text(encoding="utf-8")
    tree = ast.parse(text)
    doc = tree.body[0] if tree.body else None
    if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)):
        raise ValueError(f"{name}.py: a program file starts with its docstring")
    lines = text.splitlines(keepends=True)[doc.end_lineno:]
    while lines and lines[0].startswith("# ruff: "):
        lines.pop(0)
    if not lines or lines[0].strip():
        raise ValueError(f"{name}.py: one blank line between the docstring (and ruff directives) and the program")
    return "".join(lines[1:])


def render(name: str, /, **values: object) -> str:
    """The program ``<name>.py`` with each marker ``'{key}'`` replaced by ``repr(values[key])``; every value must
    have its marker and every marker a value."""
    text = source(name)
    if set(values) != markers(name):
        raise KeyError(f"{name}.py has the markers {sorted(markers(name))}, not {sorted(values)}")
    return _MARKER.sub(lambda m: repr(values[m.group(1)]), text)


@functools.cache
def markers(name: str) -> frozenset[str]:
    """The names of the markers of ``<name>.py``."""
    return frozenset(_MARKER.findall(source(name)))
