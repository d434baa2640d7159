"""A generator's checks (:class:`clawgym.synth.ops.base.Check`) as the data a task stores
(:mod:`clawgym.checks`): named, validated against the check library, with the library version they are written for;
and the self-contained grade() source of a plan's checks.

The data is written compact, with the same grades (check library v3): a part that repeats one of the task's
top-level checks is a ref to it (`{"ref": name}`, its score, evaluated once), and a check that a workspace file
stays as it was (text_equals, docs_texts_equal with the file's own text) compares digests of its text
(text_digest_equals, docs_digests_equal): the text is in the workspace already."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from clawgym.checks.checklib import _sha256
from clawgym.checks.checklib_docs import _docs_norm
from clawgym.checks.library import CHECKLIB_SOURCE, current_checklib, json_data, render_checks, validate_call
from clawgym.core.records import CheckCall, CodeCheck
from clawgym.synth.ops.base import Check, StepPlan


@dataclass
class Ref(Check):
    """A part naming one of the task's top-level checks (`name`, as :func:`named_checks` names them): that check's
    score, evaluated once, instead of a copy of it."""

    fn: str = ""


def docs_digest(text: str) -> str:
    """What docs_digests_equal compares a file with: the sha256 of its text as docs_texts_equal normalises it."""
    return _sha256(_docs_norm(text))


def check_call(check: Check, name: str | None = None) -> CheckCall:
    """A generator's :class:`Check` as data, validated against the library (UnknownCheckError); a :class:`Ref`
    as `{"ref": name}`."""
    if isinstance(check, Ref):
        return CheckCall(ref=check.name)
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


def _size(data: Any) -> int:
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))


def _digested(call: CheckCall, kept: dict[str, str]) -> CheckCall:
    """`call` with each check that a file keeps its workspace text (`kept`: {path: text}) comparing digests."""
    if call.parts:
        return call.model_copy(update={"parts": [_digested(p, kept) for p in call.parts]})
    args = call.args
    if (call.fn == "text_equals" and set(args) <= {"path", "expected", "strip"} and isinstance(args.get("path"), str)
            and isinstance(args.get("expected"), str) and kept.get(args["path"]) == args["expected"]
            and args.get("strip", True) in (True, False)):
        strip = args.get("strip", True)
        text = args["expected"].strip() if strip else args["expected"]
        new = {"path": args["path"], "sha256": _sha256(text), **({"strip": strip} if "strip" in args else {})}
        return call.model_copy(update={"fn": "text_digest_equals", "args": new})
    specs = args.get("specs")
    if (call.fn == "docs_texts_equal" and set(args) == {"specs"} and isinstance(specs, dict) and specs
            and all(isinstance(t, str) and kept.get(p) == t for p, t in specs.items())):
        new = {"digests": {p: docs_digest(t) for p, t in specs.items()}}
        if _size(new) < _size(args):
            return call.model_copy(update={"fn": "docs_digests_equal", "args": new})
    return call


def _body(call: CheckCall) -> str:
    return json.dumps(call.model_dump(mode="json", exclude={"name"}), sort_keys=True, ensure_ascii=False)


def compact(calls: list[CheckCall], kept: dict[str, str] | None = None) -> list[CheckCall]:
    """The top-level checks `calls` in their compact form, scoring every workspace the same: a part that repeats
    another top-level check (the same body) names it instead (`ref`, when that is shorter), and with `kept`
    ({path: the text of a workspace file}) a check that such a file keeps its text compares digests. (A part is
    smaller than the check it is in, so a ref never names its own check nor closes a cycle.)"""
    if kept:
        calls = [_digested(c, kept) for c in calls]
    tops: dict[str, str] = {}
    for c in calls:
        tops.setdefault(_body(c), c.name or "")

    def refer(call: CheckCall, own: str) -> CheckCall:
        if call.ref is not None:
            return call
        target = tops.get(_body(call))
        if target is not None and target != own and _size({"ref": target}) < _size(call.model_dump(mode="json")):
            return CheckCall(ref=target)
        if not call.parts:
            return call
        return call.model_copy(update={"parts": [refer(p, own) for p in call.parts]})

    return [c.model_copy(update={"parts": [refer(p, c.name or "") for p in c.parts]}) if c.parts else c
            for c in calls]


def checks_code_check(plans: list[StepPlan], timeout_seconds: float = 120) -> CodeCheck:
    """The code check of a synthesized task: its steps' checks as data (compact, see :func:`compact`), with the
    library version it is written for."""
    ref, _ = current_checklib()
    texts: dict[str, set[str]] = {}
    for p in plans:
        for f in p.files:
            if f.content is not None:
                texts.setdefault(f.path, set()).add(f.content)
    kept = {path: next(iter(t)) for path, t in texts.items() if len(t) == 1}
    calls = [check_call(c, name) for name, c in named_checks(plans)]
    return CodeCheck(kind="checks", checks=compact(calls, kept), checklib=ref, timeout_seconds=timeout_seconds)


def _check_tuple(c: Check) -> tuple:
    return (c.fn, c.args, [_check_tuple(p) for p in c.parts])


def render_grade(plans: list[StepPlan]) -> str:
    """A self-contained grade() source of the steps' checks: the check-library functions it uses, then one
    lambda per check (the form synthesized tasks had before their checks were data)."""
    return render_checks(((name, _check_tuple(c)) for name, c in named_checks(plans)), CHECKLIB_SOURCE)
