"""Check primitives of the `sys` operations (configs, logs, scripts, audits, repositories). STDLIB ONLY.

Concatenated after checklib.py into every task's grade() source, so it uses checklib's helpers (_text, same,
data_matches, _read_table) directly; on the host they are imported below. Same conventions as checklib: the
workspace root `ws` first, a float in [0, 1] back, never an exception for bad agent output.
"""

import configparser
import json
import re
import subprocess
import tempfile
from pathlib import Path

try:  # on the host; inside a grade() source these names come from checklib.py just above
    from clawgym.checks.checklib import (
        _forkable,
        _has_term,
        _read_table,
        _run_command,
        _run_forked,
        _text,
        _yaml_load,
        check,
        data_matches,
        match_rows,
    )
except ImportError:  # pragma: no cover - the embedded copy
    pass

_SYS_TS = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2})?)(?:[.,]\d+)?\s*(?:Z|UTC|[+-]\d{2}:?\d{2})?$")


def _sys_norm(v):
    """Timestamps in any ISO-like spelling -> 'YYYY-MM-DD HH:MM:SS'; containers recursively."""
    if isinstance(v, str):
        m = _SYS_TS.match(v.strip())
        if m:
            t = m.group(2)
            return f"{m.group(1)} {t if len(t) == 8 else t + ':00'}"
        return v
    if isinstance(v, list):
        return [_sys_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _sys_norm(x) for k, x in v.items()}
    return v


def _sys_unquote(v):
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1]
    return v


def sys_config_load(ws, path, fmt):
    """The parsed config (yaml/json: as is; ini: {section: {key: value}}; env: {KEY: value}); None if unreadable."""
    text = _text(ws, path)
    if text is None:
        return None
    try:
        if fmt == "json":
            return json.loads(text)
        if fmt == "yaml":
            return _yaml_load(text)
        if fmt == "ini":
            cp = configparser.ConfigParser(interpolation=None)
            cp.read_string(text)
            return {s: dict(cp.items(s)) for s in cp.sections()}
        if fmt == "env":
            out = {}
            for line in text.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("export "):
                    line = line[7:].strip()
                key, eq, value = line.partition("=")
                if not eq or not key.strip():
                    return None
                value = value.strip()
                if value[:1] not in "'\"" and " #" in value:
                    value = value.split(" #", 1)[0]
                out[key.strip()] = _sys_unquote(value)
            return out
    except Exception:  # the json, yaml or ini parser on the agent's text alone: its errors are many
        return None
    return None


def _sys_has(obj, path):
    """True when the leaf path ('/a/b', keys case-insensitive) exists in obj."""
    for key in [p for p in path.split("/") if p]:
        if not isinstance(obj, dict):
            return False
        hit = [k for k in obj if str(k).casefold() == key.casefold()]
        if not hit:
            return False
        obj = obj[hit[0]]
    return True


@check
def sys_config_matches(ws, path, fmt, expected=None, absent=None, tol=0.01):
    """Fraction of the expected leaves found with their value plus the `absent` key paths ('/sec/key')
    that are gone; 0 when the file does not parse (or parses to something that is not a mapping)."""
    got = sys_config_load(ws, path, fmt)
    if not isinstance(got, dict):
        return 0.0
    expected = expected or {}
    absent = absent or []
    n_exp = len(_sys_leaf_count(expected)) if expected else 0
    total = n_exp + len(absent)
    if not total:
        return 0.0
    score = data_matches(got, expected, tol) * n_exp if expected else 0.0
    score += sum(1 for a in absent if not _sys_has(got, a))
    return score / total


def _sys_leaf_count(obj, prefix=""):
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            out += _sys_leaf_count(v, f"{prefix}/{k}")
        return out or [prefix]
    return [prefix]


@check
def sys_json_matches(ws, path, expected, tol=0.01):
    """json_matches with timestamps normalised on both sides ('2026-03-01T08:00:00Z' == '2026-03-01 08:00:00')."""
    text = _text(ws, path)
    if text is None:
        return 0.0
    try:
        got = json.loads(text)
    except ValueError:
        return 0.0
    return data_matches(_sys_norm(got), _sys_norm(expected), tol)


@check
def sys_table_rows(ws, path, header, rows, ordered=False, tol=0.01):
    """csv_rows with timestamps normalised (a 'T' or ' ' separator, seconds, fractions and 'Z' do not matter)."""
    try:
        table = _read_table(ws, path)
    except OSError:
        return 0.0
    if table is None or not rows:
        return 0.0
    return match_rows(table[0], table[1], header, rows, ordered, tol, norm=_sys_norm)


@check(runs_program=True)
def sys_script_table(ws, argv, header, rows, ordered=False, cwd=".", timeout=60, tol=0.01, stage=None):
    """Run a command whose argv holds '{out}' (a fresh temporary CSV path); score the table it writes there
    like csv_rows. `stage`: a workspace folder copied to a temporary place first, named by '{stage}' in argv (so
    a script that changes files runs on pristine input). 0 when the command fails or writes nothing. The
    temporary place is removed afterwards (a grader that checks many workspaces must not fill its /tmp)."""
    import shutil

    tmp = None
    try:
        tmp = tempfile.mkdtemp(prefix="sys-grade-")
        out = str(Path(tmp) / "out.csv")
        staged = ""
        if stage:
            staged = str(Path(tmp) / "stage" / Path(stage).name)
            shutil.copytree(str(Path(ws) / stage), staged)
        args = [a.replace("{out}", out).replace("{stage}", staged) for a in argv]
        code, _ = _run_command(args, str(Path(ws) / cwd), timeout)
        if code != 0 or not rows:
            return 0.0
        table = _read_table(Path(tmp), "out.csv")
        if table is None:
            return 0.0
        return match_rows(table[0], table[1], header, rows, ordered, tol, norm=_sys_norm)
    except (OSError, subprocess.SubprocessError, UnicodeError):  # cannot copy or run, a timeout
        return 0.0
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def _sys_records(ws, path):
    text = _text(ws, path)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict):  # {"violations": [...]} or {"findings": [...]}: take the first list of objects
        lists = [v for v in data.values() if isinstance(v, list)]
        data = lists[0] if lists else None
    if not isinstance(data, list):
        return None
    return [r for r in data if isinstance(r, dict)]


def _sys_rec_key(rec, fields):
    low = {str(k).strip().casefold(): v for k, v in rec.items()}
    return tuple(str(low.get(f.casefold(), "")).strip().casefold() for f in fields)


def _sys_rec_eq(have, want, path_fields):
    for i, (h, w) in enumerate(zip(have, want, strict=False)):
        if h == w:
            continue
        if i in path_fields and (h.endswith("/" + w) or h.lstrip("./") == w):
            continue
        return False
    return True


@check
def sys_findings(ws, path, expected, fields=("rule", "item"), mode="recall", path_fields=()):
    """A JSON list of finding objects (or an object holding one). recall: fraction of `expected` ({field: value})
    present, fields compared case-insensitively as whole values (a field named in `path_fields` may carry a
    leading folder: 'repo/app/x.py' matches 'app/x.py'); precision: fraction of the listed findings that are
    expected (0 when the list is empty or missing)."""
    got = _sys_records(ws, path)
    if not got or not expected:
        return 0.0
    pf = {i for i, f in enumerate(fields) if f in path_fields}
    want = [_sys_rec_key(e, fields) for e in expected]
    have = [_sys_rec_key(g, fields) for g in got]
    if mode == "precision":
        return sum(1 for h in have if any(_sys_rec_eq(h, w, pf) for w in want)) / len(have)
    pool = list(have)
    hit = 0
    for w in want:
        j = next((i for i, h in enumerate(pool) if _sys_rec_eq(h, w, pf)), None)
        if j is not None:
            pool.pop(j)
            hit += 1
    return hit / len(want)


@check
def sys_text_findings(ws, path, findings, window=2):
    """`findings`: [[needle, [[any-of keywords], ...]], ...]: fraction of findings whose needle (e.g. a file path)
    occurs on a line that has, within `window` lines around it, one keyword of every group."""
    text = _text(ws, path)
    if text is None or not findings:
        return 0.0
    lines = text.casefold().splitlines()
    ok = 0
    for needle, groups in findings:
        n = needle.casefold()
        for i, line in enumerate(lines):
            if not _has_term(line, n):
                continue
            near = "\n".join(lines[max(0, i - window): i + window + 1])
            if all(any(_has_term(near, k.casefold()) for k in grp) for grp in groups):
                ok += 1
                break
    return ok / len(findings)


_SYS_CASE_RUNNER = r'''
import datetime, json, math, sys
sys.path.insert(0, ".")
sys.dont_write_bytecode = True


def raises(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as exc:
        return type(exc).__name__
    return None


ns = {"datetime": datetime, "date": datetime.date, "raises": raises}
try:
    exec(sys.argv[1], ns)
except Exception:
    print(json.dumps([False] * len(json.loads(sys.argv[2]))))
    raise SystemExit(0)
out = []
for call, want in json.loads(sys.argv[2]):
    try:
        got = eval(call, ns)
        exp = eval(want, ns)
        if isinstance(exp, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
            out.append(math.isclose(got, exp, rel_tol=1e-6, abs_tol=1e-6))
        else:
            out.append(got == exp and type(got) is type(exp))
    except BaseException:
        out.append(False)
print(json.dumps(out))
'''


_SYS_CASES_SEEN = {}  # (workspace, cwd, setup, cases) -> score: checks of one grading that run the same cases


@check(runs_program=True)
def sys_py_cases(ws, cwd, setup, cases, timeout=60):
    """Run `setup` (e.g. 'from pkg.mod import f') then each case [call expr, expected expr] in one fresh python3
    (cwd on sys.path); the fraction of cases whose result equals the expected value (same type). The same
    cases on the same workspace run once per grading (several checks of a task may ask for them)."""
    if not cases:
        return 0.0
    key = (str(ws), cwd, setup, json.dumps(cases), timeout)
    if key not in _SYS_CASES_SEEN:
        _SYS_CASES_SEEN[key] = _sys_py_cases(ws, cwd, setup, cases, timeout)
    return _SYS_CASES_SEEN[key]


def _sys_py_cases(ws, cwd, setup, cases, timeout):
    try:
        root = str(Path(ws) / cwd)
        argv = [_SYS_CASE_RUNNER, setup, json.dumps(cases)]
        if _forkable(root):  # as `python3 -B -c` would, in a fork of this process (no start-up to pay)
            import builtins
            import sys

            def child():
                sys.dont_write_bytecode = True
                sys.path.insert(0, "")
                sys.argv = ["-c", *argv[1:]]
                exec(compile(argv[0], "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
                return 0

            stdout = _run_forked(child, root, timeout, capture=True)[1].decode("utf-8", "replace")
        else:
            stdout = subprocess.run(["python3", "-B", "-c", *argv], cwd=root, capture_output=True, text=True,
                                    timeout=timeout).stdout
        res = json.loads(stdout.strip().splitlines()[-1])
        if not isinstance(res, list) or len(res) != len(cases):
            return 0.0
        return sum(1 for x in res if x is True) / len(cases)
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):  # no result line, a timeout
        return 0.0


@check(runs_program=True)
def sys_git_clean(ws, repo):
    """1 when the repository's working tree has no uncommitted changes to tracked files (untracked ignored)."""
    try:
        r = subprocess.run(["git", "-C", str(Path(ws) / repo), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=30)
        return 1.0 if r.returncode == 0 and not r.stdout.strip() else 0.0
    except (OSError, subprocess.SubprocessError, UnicodeError):  # no git or repository, a timeout
        return 0.0


@check
def sys_changed(ws, path, original):
    """1 when the file exists and its text differs from `original` (whitespace at the ends ignored)."""
    text = _text(ws, path)
    return 1.0 if text is not None and text.strip() != original.strip() else 0.0


@check
def sys_text_any(ws, path, groups):
    """`groups`: [[alternative, ...], ...]: fraction of groups with at least one alternative in the file."""
    text = _text(ws, path)
    if text is None or not groups:
        return 0.0
    hay = text.casefold()
    return sum(1 for g in groups if any(_has_term(hay, str(a).casefold()) for a in g)) / len(groups)
