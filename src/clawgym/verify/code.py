"""Code checks, run INSIDE the sandbox after the agent has ended.

Three kinds (see :class:`clawgym.core.records.CodeCheck`):

* `python`: PinchBench's `grade(transcript, workspace_path) -> dict[str, float]`. The grader source, a small
  runner and the transcript are written to the sandbox's control directory (never the workspace), and run with
  the sandbox's python3. The score is the mean of the returned values.
* `checks`: the task's checks as data. The current check library (one versioned file,
  :mod:`clawgym.checks`) and the check list (JSON) are written to the control directory, after the agent has
  ended, and the same runner evaluates each check against the library in a fresh namespace, once: a part that
  names another check (`ref`) gets the score that check got (raw, before the clamping here). A check returns its
  score, a missing or unparseable output being a 0 it returns on purpose; a check that raises (a bug, an argument
  of the wrong type, a function the library lacks) makes the grading `checker_failed` with the exception, never a
  silent 0. The result records the library version that graded it.
* `shell`: ClawGym's `reward/reward.sh`. The checker files are copied into the workspace only now, the entry
  runs from the workspace root with `OPENCLAW_REWARD_PAYLOAD` pointing at a JSON payload, and its last stdout
  line is the score. An optional sub-score command (ClawGym's `check.py`) names the individual checks.

A crash, a timeout, or output that is not a plain decimal score in [0, 1] scores 0 with status `checker_failed`
and the reason. Everything goes through the sandbox protocol (:mod:`clawgym.sandbox.base`), never host paths:
the checker files replace whatever the agent left at their paths (`Sandbox.copy_in`; in the built-in backends
:mod:`clawgym.sandbox.trusted_copy`), the grader's own files go where commands cannot change them
(`Sandbox.write_control_file`), Python in shell checks never imports from the workspace (CHECKER_ENV), and the
whole check runs against one deadline. A failure of the sandbox itself raises SandboxError; the rollout tells
whether it came from inside (the checker's failure) or from the infrastructure.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

from clawgym.core.records import CheckCall, CheckLibRef, CodeCheck, Task, WorkspaceFile
from clawgym.core.text import scrub
from clawgym.sandbox.base import Sandbox
from clawgym.sandbox.trusted_copy import checker_only_dirs

RESULT_MARKER = "__CLAWGYM_GRADE_RESULT__"
VERIFY_SUBDIR = "verify"

# Runs inside the sandbox with the sandbox's python3. Standard library only.
PY_RUNNER = r'''
import json, math, pathlib, sys, traceback
MARK = "__CLAWGYM_GRADE_RESULT__"

_CODE = {}

def _number(v):
    if isinstance(v, bool):
        v = float(v)
    if isinstance(v, (int, float)) and not math.isnan(v) and not math.isinf(v):
        return float(v)
    return None

_BUSY = object()

def _named(registry, tops, name, ws, memo):
    # a top-level check's score, evaluated once per grading: when it comes, or when a part names it first (ref)
    key = "\1" + name
    value = memo.get(key)
    if value is _BUSY:
        raise RecursionError("checks refer to each other in a cycle through " + repr(name))
    if key not in memo:
        if name not in tops:
            raise LookupError("no check is named " + repr(name))
        memo[key] = _BUSY
        try:
            memo[key] = _evaluate(registry, tops[name], ws, memo, tops)
        except BaseException:
            del memo[key]
            raise
    return memo[key]

def _evaluate(registry, call, ws, memo, tops):
    if call.get("ref") is not None:  # a part naming another check: the score that check gets
        return _named(registry, tops, call["ref"], ws, memo)
    fn = registry.get(call.get("fn"))
    if fn is None:
        raise LookupError("the check library has no check function " + repr(call.get("fn")))
    args = call.get("args") or {}
    parts = call.get("parts") or []
    if parts:  # a combinator: each part as a function, evaluated only when the combinator needs it
        return fn(*[(lambda p=p: _evaluate(registry, p, ws, memo, tops)) for p in parts], **args)
    # a check is a function of the workspace it grades: the same call twice on one workspace (a step's check
    # repeated as another check's gate, e.g. a test suite run) is evaluated once, and both see the same value
    key = call.get("fn") + "\0" + json.dumps(args, sort_keys=True)
    if key not in memo:
        memo[key] = fn(ws, **args)
    return memo[key]

def run_checks(spec_path, workspace):
    """The checks (JSON) evaluated against the check library, loaded into a fresh namespace."""
    try:
        with open(spec_path, encoding="utf-8") as fh:
            spec = json.load(fh)
        lib = spec["library"]
        if lib not in _CODE:
            with open(lib, encoding="utf-8") as fh:
                _CODE[lib] = compile(fh.read(), "checklib.py", "exec")
        ns = {"__name__": "clawgym_checklib"}
        exec(_CODE[lib], ns)
        registry = ns["REGISTRY"]
    except BaseException as exc:
        return {"error": "the check library failed to load: " + type(exc).__name__ + ": " + str(exc)[:300]}
    ws = pathlib.Path(workspace)
    scores = {}
    memo = {}
    tops = {str(call.get("name")): call for call in spec["checks"]}
    for call in spec["checks"]:
        name = str(call.get("name"))
        try:
            value = _named(registry, tops, name, ws, memo)
        except BaseException as exc:
            tb = traceback.format_exc().strip().splitlines()
            return {"error": "check " + repr(name) + " (" + str(call.get("fn")) + ") raised " + type(exc).__name__
                    + ": " + str(exc)[:300], "traceback": tb[-6:]}
        number = _number(value)
        if number is None:
            return {"error": "check " + repr(name) + " (" + str(call.get("fn")) + ") returned "
                    + type(value).__name__ + ", not a number"}
        scores[name] = number
    return {"scores": scores}

def run(src_path, transcript_path, workspace):
    if src_path.endswith(".json"):
        return run_checks(src_path, workspace)
    try:
        with open(transcript_path, encoding="utf-8") as fh:
            transcript = json.load(fh)
        ns = {"__name__": "clawgym_grader"}
        if src_path not in _CODE:
            with open(src_path, encoding="utf-8") as fh:
                _CODE[src_path] = compile(fh.read(), "grade.py", "exec")
        exec(_CODE[src_path], ns)  # a fresh namespace per workspace: no state carries over between gradings
        if not callable(ns.get("grade")):
            return {"error": "the check source defines no grade() function"}
        result = ns["grade"](transcript, workspace)
    except BaseException as exc:
        tb = traceback.format_exc().strip().splitlines()
        return {"error": "grade() raised " + type(exc).__name__ + ": " + str(exc)[:300], "traceback": tb[-6:]}
    if not isinstance(result, dict):
        return {"error": "grade() returned " + type(result).__name__ + ", not a dict"}
    scores, bad = {}, []
    for k, v in result.items():
        if isinstance(v, bool):
            v = float(v)
        if isinstance(v, (int, float)) and not math.isnan(v) and not math.isinf(v):
            scores[str(k)] = float(v)
        else:
            bad.append(str(k))
    if bad:
        return {"error": "grade() returned non-numeric values for: " + ", ".join(bad[:10])}
    return {"scores": scores}

# argv: (grade.py, transcript.json, workspace) triples; one result line per triple, in order
for i in range(1, len(sys.argv) - 2, 3):
    outcome = run(sys.argv[i], sys.argv[i + 1], sys.argv[i + 2])
    sys.stdout.flush()
    print("\n" + MARK + str(i // 3) + " " + json.dumps(outcome), flush=True)
'''


@dataclass
class CodeResult:
    status: str  # scored | checker_failed
    score: float = 0.0
    checks: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    output_tail: str = ""
    duration_s: float = 0.0
    checklib: CheckLibRef | None = None  # the check library that graded checks as data


def _tail(text: str, lines: int = 15, chars: int = 2000) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


def _clamp(checks: dict[str, float], notes: list[str]) -> dict[str, float]:
    out = {}
    for k, v in checks.items():
        c = min(1.0, max(0.0, v))
        if c != v:
            notes.append(f"check {k!r} returned {v}, clamped to {c}")
        out[k] = c
    return out


def _rewrite(text: str, task: Task, sandbox: Sandbox) -> str:
    """For backends that cannot mount at the task's mount dir (local), point hard-coded paths at the workdir."""
    if sandbox.workdir != task.workspace.mount_dir:
        return text.replace(task.workspace.mount_dir, sandbox.workdir)
    return text


def _control_file(sandbox: Sandbox, name: str, text: str) -> str:
    """Write a checker file where commands can read it but not change it (outside the workspace: the
    sandbox's control directory); its path inside the sandbox."""
    return sandbox.write_control_file(f"{VERIFY_SUBDIR}/{name}", text.encode("utf-8"))


def _json_text(obj: Any) -> str:
    """JSON of what the agent produced (a transcript, a payload), with text that cannot be UTF-8 (a file name
    that is not, a lone surrogate a model wrote) escaped rather than failing the grading."""
    text = json.dumps(obj, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(scrub(obj), ensure_ascii=False)
    return text


def run_python_check(
    check: CodeCheck, task: Task, sandbox: Sandbox, transcript: list[dict[str, Any]]
) -> CodeResult:
    return run_python_checks(check, task, sandbox, [(transcript, sandbox.workdir)])[0]


def grader_of(check: CodeCheck, task: Task, sandbox: Sandbox) -> str | list[CheckCall]:
    """What :func:`run_python_batch` grades a task's `python` or `checks` code check with: the grade() source,
    or the check list (JSON data), the task's mount dir pointed at the sandbox's workdir in either."""
    if check.kind == "checks":
        data = json.dumps([c.model_dump(mode="json") for c in check.checks], ensure_ascii=False)
        return [CheckCall.model_validate(c) for c in json.loads(_rewrite(data, task, sandbox))]
    return _rewrite(check.source or "", task, sandbox)


def library_mismatch(check: CodeCheck) -> tuple[str | None, list[str]]:
    """(why the task cannot be graded, notes) for a `checks` code check: a task written for a newer check library
    than this clawgym's cannot be (upgrade clawgym); one written for another version or source is graded with the
    current library, and the notes say so."""
    from clawgym.checks import current_checklib

    ref, _ = current_checklib()
    wrote = check.checklib
    if wrote is None or wrote == ref:
        return None, []
    if wrote.version > ref.version:
        return (f"the task was written for check library v{wrote.version}, newer than this clawgym's "
                f"v{ref.version}: upgrade clawgym"), []
    return None, [f"written for check library v{wrote.version} ({wrote.sha256[:12]}), graded with "
                  f"v{ref.version} ({ref.sha256[:12]})"]


def run_python_checks(
    check: CodeCheck, task: Task, sandbox: Sandbox, items: list[tuple[list[dict[str, Any]], str]]
) -> list[CodeResult]:
    """Grade several (transcript, workspace path inside the sandbox) pairs of one task with one process."""
    if check.kind == "checks":
        why, notes = library_mismatch(check)
        if why is not None:
            from clawgym.checks import current_checklib

            return [CodeResult(status="checker_failed", error=why, checklib=current_checklib()[0]) for _ in items]
    else:
        notes = []
    grader = grader_of(check, task, sandbox)
    results = run_python_batch(sandbox, [(grader, t, w) for t, w in items], check.timeout_seconds)
    for r in results:
        r.notes[:0] = notes
    return results


def run_python_batch(
    sandbox: Sandbox, items: list[tuple[str | list[CheckCall], list[dict[str, Any]], str]], timeout: float
) -> list[CodeResult]:
    """Grade (grader, transcript, workspace path inside the sandbox) triples with ONE python process. A grader is
    a grade() source or a check list (checks as data, see :func:`grader_of`): the current check library is then
    written to the control directory once, with each distinct check list.

    Python's start-up and imports dominate the cost of a grading; task validation grades many workspace
    states in one run this way. Each grading gets a fresh namespace. `timeout` covers the whole batch.
    """
    t0 = time.monotonic()
    argv = ["python3", "-I", _control_file(sandbox, "runner.py", PY_RUNNER)]
    sources: dict[str, str] = {}  # control file of each distinct grader text
    by_object: dict[int, str] = {}  # a grader passed for several items (every state of one task): encoded once
    library: tuple[CheckLibRef, str] | None = None

    def grade_file(grader: str | list[CheckCall]) -> str:
        nonlocal library
        if isinstance(grader, str):
            key, name, text = grader, f"grade{len(sources)}.py", grader
        else:
            if library is None:
                from clawgym.checks import current_checklib

                ref, lib_source = current_checklib()
                library = (ref, _control_file(sandbox, f"checklib_v{ref.version}.py", lib_source))
            text = json.dumps({"library": library[1], "checks": [c.model_dump(mode="json") for c in grader]},
                              ensure_ascii=False)
            key, name = text, f"checks{len(sources)}.json"
        if key not in sources:
            sources[key] = _control_file(sandbox, name, text)
        return sources[key]

    for i, (grader, transcript, workspace) in enumerate(items):
        grade_path = by_object.get(id(grader))
        if grade_path is None:
            grade_path = by_object[id(grader)] = grade_file(grader)
        argv += [grade_path, _control_file(sandbox, f"transcript{i}.json", _json_text(transcript)),
                 workspace]
    res = sandbox.exec(argv, cwd=sandbox.workdir, timeout=timeout)
    tail = _tail(res.stdout + "\n" + res.stderr)
    payloads: dict[int, dict] = {}
    for line in res.stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            idx, _, body = line[len(RESULT_MARKER):].partition(" ")
            try:
                payloads[int(idx)] = json.loads(body)
            except ValueError:
                pass
    results = []
    for i in range(len(items)):
        out = CodeResult(status="checker_failed", output_tail=tail, duration_s=time.monotonic() - t0,
                         checklib=library[0] if library is not None and not isinstance(items[i][0], str) else None)
        payload = payloads.get(i)
        if payload is None:
            out.error = (f"checker timed out after {timeout:g}s" if res.timed_out
                         else f"checker printed no result (exit code {res.exit_code})")
        elif "error" in payload:
            out.error = payload["error"]
            if payload.get("traceback"):
                out.output_tail = "\n".join(payload["traceback"])
        else:
            checks = _clamp(payload["scores"], out.notes)
            if not checks:
                out.error = "grade() returned no scores"
            else:
                out.status, out.checks = "scored", checks
                out.score = sum(checks.values()) / len(checks)
        results.append(out)
    return results


def _parse_subscores(stdout: str) -> dict[str, float] | None:
    text = stdout.strip()
    if not text:
        return None
    for candidate in (text, text.splitlines()[-1]):
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(data, dict):
            out = {}
            for k, v in data.items():
                if isinstance(v, bool):
                    out[str(k)] = float(v)
                elif isinstance(v, (int, float)) and math.isfinite(v):
                    out[str(k)] = float(v)
            return out or None
    return None


# What a shell checker may print as its score: a plain decimal (as Python prints a float: 1, 0.5, 1.0,
# 0.3333333333333333, 5e-05), nothing else. float() alone would also take `0_5` (= 5), ` +.5`, `nan`, `1e3`.
_SCORE = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\Z", re.ASCII)


def parse_score(line: str) -> tuple[float | None, str]:
    """(score, "") for a plain decimal in [0, 1]; (None, why) for anything else, which is then the checker's
    failure (`checker_failed`), never clamped into a passing score."""
    text = line.strip()
    if not _SCORE.match(text):
        return None, f"checker's last line is not a plain decimal score: {text[:80]!r}"
    value = float(text)
    if not 0.0 <= value <= 1.0:
        return None, f"checker printed {text[:80]}, outside [0, 1]"
    return value, ""


# The environment of shell checkers: Python must not import from the workspace (`python3 -c 'import json'`
# run from the workspace root would import an agent's json.py; a script's own folder, such as reward/, is
# searched first) nor from a user site-packages the agent may have filled under $HOME.
CHECKER_ENV = {"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
VERIFY_MARGIN_S = 30.0  # beyond the checker's own time limits: copying it in, reading its output


def run_shell_check(
    check: CodeCheck, task: Task, sandbox: Sandbox, transcript: list[dict[str, Any]], final_message: str,
    deadline: float | None = None,
) -> CodeResult:
    """Copy the checker in (over whatever the agent left at its paths), run it, parse its score.

    `deadline` (monotonic): when the whole verification must be over; each command gets what is left of it.
    """
    t0 = time.monotonic()
    if deadline is None:
        deadline = t0 + check.timeout_seconds * (2 if check.subscores_entry else 1) + VERIFY_MARGIN_S
    files = [
        WorkspaceFile(path=f.path, content=_rewrite(f.content, task, sandbox), mode=f.mode)
        if f.content is not None else f
        for f in check.files
    ]
    initial = [f.path for f in task.workspace.files] + list(task.workspace.directories)
    try:
        sandbox.copy_in(files, empty_dirs=checker_only_dirs(files, initial))
    except OSError as exc:  # e.g. a workspace the agent filled to its disk limit: its failure, scored 0
        return CodeResult(status="checker_failed", error=f"the checker could not be copied in: {exc}",
                          duration_s=time.monotonic() - t0)
    payload = {
        "task_id": task.id, "user_query": task.instruction, "metadata": task.metadata,
        "final_message": final_message, "transcript": transcript,
    }
    payload_path = _control_file(sandbox, "payload.json", _json_text(payload))
    env = {"OPENCLAW_REWARD_PAYLOAD": payload_path, "WORKSPACE": sandbox.workdir, **CHECKER_ENV}
    out = CodeResult(status="checker_failed")

    def left(limit: float) -> float:
        return min(limit, deadline - time.monotonic())

    budget = left(check.timeout_seconds)
    if budget <= 0:
        out.error = "verification ran out of time before the checker started"
        return out
    res = sandbox.exec(_rewrite(check.entry or "", task, sandbox), cwd=sandbox.workdir, env=env, timeout=budget)
    out.output_tail = _tail(res.stdout + "\n" + res.stderr)
    if check.subscores_entry:
        budget = left(check.timeout_seconds)
        sub = sandbox.exec(check.subscores_entry, cwd=sandbox.workdir, env=env, timeout=budget) if budget > 0 else None
        parsed = _parse_subscores(sub.stdout) if sub is not None and not sub.timed_out else None
        if parsed:
            out.checks = _clamp(parsed, out.notes)
        else:
            out.notes.append("sub-score command printed no JSON object of scores"
                             if sub is not None else "no time was left for the sub-score command")
    out.duration_s = time.monotonic() - t0
    if res.timed_out:
        out.error = f"checker timed out after {res.duration_s:.3g}s"
        return out
    lines = [ln.strip() for ln in res.stdout.splitlines() if ln.strip()]
    if not lines:
        out.error = f"checker printed nothing (exit code {res.exit_code})"
        return out
    value, why = parse_score(lines[-1])
    if value is None:
        out.error = f"{why} (exit code {res.exit_code})"
        return out
    if res.exit_code != 0:
        out.notes.append(f"checker exited with code {res.exit_code} after printing its score")
    out.status, out.score = "scored", value
    return out


def run_code_check(
    check: CodeCheck, task: Task, sandbox: Sandbox, transcript: list[dict[str, Any]], final_message: str = "",
    deadline: float | None = None,
) -> CodeResult:
    if check.kind in ("python", "checks"):
        return run_python_check(check, task, sandbox, transcript)
    return run_shell_check(check, task, sandbox, transcript, final_message, deadline)
