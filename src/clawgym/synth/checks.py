"""A generator's checks (:class:`clawgym.synth.ops.base.Check`) as the data a task stores
(:mod:`clawgym.checks`): named, validated against the check library, with the library version they are written for;
and the self-contained grade() source of a plan's checks."""

from __future__ import annotations

from clawgym.checks.library import CHECKLIB_SOURCE, current_checklib, json_data, render_checks, validate_call
from clawgym.core.records import CheckCall, CodeCheck
from clawgym.synth.ops.base import Check, StepPlan


def check_call(check: Check, name: str | None = None) -> CheckCall:
    """A generator's :class:`Check` as data, validated against the library (UnknownCheckError)."""
    where = f"check {name or check.name!r}"
    call = CheckCall(name=name, fn=check.fn, args=json_data(check.args, f"{where} ({check.fn}) args"),
                     parts=[check_call(p) for p in check.parts])
    if name is not None:
        validate_call(call, where=where)
    return call


def named_checks(plans: list[StepPlan]) -> list[tuple[str, Check]]:
    """The steps' checks with unique names (a name a previous step used gets the prefix `stepN_`)."""
    out: list[tuple[str, Check]] = []
    seen: set[str] = set()
    for i, plan in enumerate(plans, start=1):
        for c in plan.checks:
            name = c.name if c.name not in seen else f"step{i}_{c.name}"
            seen.add(name)
            out.append((name, c))
    return out


def checks_code_check(plans: list[StepPlan], timeout_seconds: float = 120) -> CodeCheck:
    """The code check of a synthesized task: its steps' checks as data, with the library version it is written
    for."""
    ref, _ = current_checklib()
    return CodeCheck(kind="checks", checks=[check_call(c, name) for name, c in named_checks(plans)],
                     checklib=ref, timeout_seconds=timeout_seconds)


def _check_tuple(c: Check) -> tuple:
    return (c.fn, c.args, [_check_tuple(p) for p in c.parts])


def render_grade(plans: list[StepPlan]) -> str:
    """A self-contained grade() source of the steps' checks: the check-library functions it uses, then one
    lambda per check (the form synthesized tasks had before their checks were data)."""
    return render_checks(((name, _check_tuple(c)) for name, c in named_checks(plans)), CHECKLIB_SOURCE)
