"""Check primitives for synthesized verifiers. STANDARD LIBRARY ONLY (plus optional yaml/openpyxl).

The check library is this file followed by the checklib_*.py extensions, as ONE versioned source
(:data:`CHECKLIB_VERSION`, and the sha256 of the source). A synthesized task stores its checks as data
(`CodeCheck(kind="checks")`: `[{name, fn, args, parts}]` naming functions registered here with :func:`check`)
and the library version it was written for; at grading time the library is copied into the sandbox's control
directory (after the agent has ended) and the checks are evaluated against it (:mod:`clawgym.verify.code`), so a
fix here reaches every task already written. A PinchBench export renders a self-contained `grade()` with the
subset of the library a task uses (:func:`clawgym.checks.render_grade_source`). The library is also
importable on the host for tests.

Every check function takes the workspace root `ws` (a pathlib.Path) first, returns a float in [0, 1] with
partial credit where it makes sense, and decides on purpose what the agent's output earns: a missing or
unreadable/unparseable output file is a 0 it returns. Its `try` blocks hold only the reading or parsing of the
agent's output and catch only what that raises (OSError for reading, json's ValueError, the subprocess errors of
a program the agent wrote; the yaml, openpyxl and email parsers, whose errors are many, in a `try` around the
parse call alone). Anything else a check raises (a bug, an argument of the wrong type) propagates: the grader
reports it as `checker_failed` with the exception, not as a silent 0.

Values are compared after normalisation: strings stripped and case-folded, numbers (also numbers written as
text, with thousands separators or a currency sign) within a relative/absolute tolerance.

Checks that run python (a test suite with pytest, a script the agent wrote, expression cases) run it in a fork
of the grading process rather than a fresh `python3` whenever the result is the same (see _forkable): a
python start-up costs more than most of these runs, and a grader process grades many workspaces.
"""

import csv
import io
import json
import re
from pathlib import Path

# The version of the check library (this file and the checklib_*.py extensions), recorded with the sha256 of their
# source in run.json, in each task written with checks as data (the version it was written for) and in each
# verdict graded with it. Bump it when a check can score the same workspace differently, or when a grader of the
# previous version cannot evaluate what tasks written for this one hold. Version 2: checks as data (the registry
# below), and a check's own errors propagate instead of scoring 0. Version 3: a part may name another check of the
# task (`{"ref": name}`, its score, evaluated once) instead of repeating it; text_digest_equals and
# docs_digests_equal compare a file with the sha256 of its expected text instead of carrying the text.
CHECKLIB_VERSION = 3

REGISTRY = {}
"""The check functions a task's checks may name (`fn`), by name: registered with @check."""

RUNS_PROGRAM = set()
"""The check functions registered with @check(runs_program=True): they run a program (a test suite, a script, a
query), the costly checks, which a cheap gate leaves out. The host reads the same set from the decorators in the
source (clawgym.checks.library.program_checks), without importing it."""


def check(fn=None, *, runs_program=False):
    """Register `fn` as a check function (or a combinator over parts) that a task's checks may name. Written
    `@check`, or `@check(runs_program=True)` for a check that runs a program."""

    def register(f):
        REGISTRY[f.__name__] = f
        if runs_program:
            RUNS_PROGRAM.add(f.__name__)
        return f

    return register(fn) if fn is not None else register


_NUM = re.compile(r"^[-+]?[$€£]?\s*[-+]?\d[\d,]*(\.\d+)?%?$")


def _text(ws, path):
    try:
        p = Path(ws) / path
        if not p.is_file():
            return None
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _num(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        s = v.strip()
        if _NUM.match(s):
            s = s.replace(",", "").replace("$", "").replace("€", "").replace("£", "").replace(" ", "").rstrip("%")
            try:
                return float(s)
            except ValueError:
                return None
    return None


def _identifier(v):
    """Digits that name something rather than count it: phone numbers, zip codes, ids with leading zeros."""
    s = str(v).strip()
    return s[:1] == "+" or (len(s) > 1 and s[0] == "0" and s[1:2].isdigit()) or (s.isdigit() and len(s) >= 7)


def same(a, b, tol=0.01):
    """Equal after normalisation: numbers within an absolute `tol`; identifiers and text compared as text."""
    na, nb = _num(a), _num(b)
    if na is not None and nb is not None and not (_identifier(a) or _identifier(b)):
        return abs(na - nb) <= tol + 1e-9
    if a is None or b is None:
        return (a is None or str(a).strip() == "") and (b is None or str(b).strip() == "")
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return a == b
    return str(a).strip().casefold() == str(b).strip().casefold()


# Where a needle begins or ends with a digit it must not be a piece of a longer number, a date, a time, a
# version or an identifier: "6" is not found in "2026", "2026-06-06", "16:00", "1.6", "v6" or "INV-1006", and
# "INV-100" is not found in "INV-1006". Found: "6", "$6", "6 orders", "(6)", "6.", "6,", "6%", "total: 6".
_TERM_PRE = r"(?<!\w)(?<!\d[.,:/])(?<!\w-)"
_TERM_POST = r"(?!\w)(?![.,:/]\d)(?!-\w)"
# A number written on its own in text (with an optional sign, currency and thousands separators).
_NUM_IN_TEXT = re.compile(_TERM_PRE + r"[-+]?(?:[$€£]\s?)?\d[\d,]*(?:\.\d+)?" + _TERM_POST)
# Small whole numbers spelled out ("six orders") count as the number. "one" does not: it is too often a
# pronoun ("no one", "one of them") for its presence to say anything about a count of 1.
_NUM_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten",
              11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen", 16: "sixteen",
              17: "seventeen", 18: "eighteen", 19: "nineteen", 20: "twenty"}


def _has_term(hay, term):
    """`term` occurs in `hay` (compared as given: normalise both first), on number boundaries where it begins
    or ends with a digit (see _TERM_PRE)."""
    if not term:
        return True
    if not (term[0].isdigit() or term[-1].isdigit()):
        return term in hay
    pattern = (_TERM_PRE if term[0].isdigit() else "") + re.escape(term) + (_TERM_POST if term[-1].isdigit() else "")
    return re.search(pattern, hay) is not None


def _numbers_in(text):
    """The numbers written on their own in `text` (1,234.50 and $1234.5 alike; parts of dates, times, versions
    and identifiers are not numbers of the text)."""
    out = []
    for m in _NUM_IN_TEXT.finditer(str(text)):
        v = _num(m.group(0).rstrip(",").replace(" ", ""))
        if v is not None:
            out.append(v)
    return out


def _has_number(text, value, tol=0.005):
    """The number `value` is written in `text` on its own, in any format (1234.5 = 1,234.50 = $1,234.50), or,
    for a whole number from 2 to 20, as a word ("six")."""
    if any(abs(x - value) <= tol for x in _numbers_in(text)):
        return True
    word = _NUM_WORDS.get(int(value)) if float(value).is_integer() else None
    return word is not None and re.search(rf"\b{word}\b", str(text).casefold()) is not None


@check
def file_exists(ws, path, min_bytes=1):
    try:
        p = Path(ws) / path
        return 1.0 if p.is_file() and p.stat().st_size >= min_bytes else 0.0
    except OSError:
        return 0.0


@check
def text_has(ws, path, needles, case=False, all_or_nothing=False):
    """Fraction of `needles` (strings) that occur in the file."""
    text = _text(ws, path)
    if text is None or not needles:
        return 0.0
    hay = text if case else text.casefold()
    found = sum(1 for n in needles if _has_term(hay, str(n) if case else str(n).casefold()))
    if all_or_nothing:
        return 1.0 if found == len(needles) else 0.0
    return found / len(needles)


@check
def text_has_none(ws, path, needles, case=False):
    """1 when the file exists and holds none of `needles` (e.g. removed jargon), else the fraction absent."""
    text = _text(ws, path)
    if text is None or not needles:
        return 0.0
    hay = text if case else text.casefold()
    absent = sum(1 for n in needles if not _has_term(hay, str(n) if case else str(n).casefold()))
    return absent / len(needles)


@check
def text_equals(ws, path, expected, strip=True):
    text = _text(ws, path)
    if text is None:
        return 0.0
    if strip:
        return 1.0 if text.strip() == expected.strip() else 0.0
    return 1.0 if text == expected else 0.0


def _sha256(text):
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@check
def text_digest_equals(ws, path, sha256, strip=True):
    """text_equals against the sha256 (hex, of the UTF-8 text) of the expected text, stripped as text_equals
    strips it: the same score, without the text in the task (a file that must stay as it was)."""
    text = _text(ws, path)
    if text is None:
        return 0.0
    return 1.0 if _sha256(text.strip() if strip else text) == sha256 else 0.0


def _read_table(ws, path):
    """(header, rows as lists) from csv, tsv or xlsx; None when unreadable."""
    p = Path(ws) / path
    if not p.is_file():
        return None
    if p.suffix.lower() == ".xlsx":
        try:
            import openpyxl

            wb = openpyxl.load_workbook(p, read_only=True, data_only=True)
            ws_ = wb.worksheets[0]
            rows = [["" if c is None else c for c in r] for r in ws_.iter_rows(values_only=True)]
            rows = [r for r in rows if any(str(c).strip() for c in r)]
        except Exception:  # openpyxl on the agent's bytes (or no openpyxl): the parser's errors are many
            return None
    else:
        text = _text(ws, path)
        if text is None:
            return None
        # the delimiter is the one the header line uses most (csv.Sniffer is slow and often guesses wrong)
        head = text.lstrip("\ufeff").split("\n", 1)[0]
        delim = max(",;\t|", key=head.count) if any(d in head for d in ",;\t|") else ","
        rows = [r for r in csv.reader(io.StringIO(text.lstrip("\ufeff")), delimiter=delim) if any(c.strip() for c in r)]
    if not rows:
        return None
    return [str(h).strip() for h in rows[0]], rows[1:]


def match_rows(got_header, got_rows, header, rows, ordered=False, tol=0.01, norm=None):
    """Partial credit for table rows: the fraction of expected `rows` found among `got_rows` (cells matched
    by column name, case-insensitive), minus a penalty for unexpected extra rows; 0 if a column is missing.
    `norm`, when given, rewrites every cell (as stripped text) on both sides before comparing."""
    if not rows:
        return 0.0
    index = {str(h).strip().casefold(): i for i, h in enumerate(got_header)}
    cols = []
    for h in header:
        if h.casefold() not in index:
            return 0.0
        cols.append(index[h.casefold()])
    got = [[r[c] if c < len(r) else "" for c in cols] for r in got_rows]
    if norm is not None:
        got = [[norm(str(x).strip()) for x in g] for g in got]
        rows = [[norm(str(x)) for x in r] for r in rows]
    matched = 0
    if ordered:
        for exp, g in zip(rows, got, strict=False):
            if all(same(a, b, tol) for a, b in zip(g, exp, strict=False)):
                matched += 1
    else:
        pool = list(got)
        for exp in rows:
            for i, g in enumerate(pool):
                if all(same(a, b, tol) for a, b in zip(g, exp, strict=False)):
                    matched += 1
                    pool.pop(i)
                    break
    extra = max(0, len(got) - len(rows))
    return max(0.0, min(1.0, matched / len(rows) - 0.5 * extra / len(rows)))


@check
def csv_rows(ws, path, header, rows, key=None, ordered=False, tol=0.01):
    """match_rows over a CSV/TSV/xlsx file. `key`: column names that identify a row (the rest must match too).
    `ordered`: rows must come in order."""
    table = _read_table(ws, path)
    if table is None:
        return 0.0
    return match_rows(table[0], table[1], header, rows, ordered, tol)


@check
def column_matches(ws, path, column, pattern):
    """Fraction of the rows whose `column` matches the regular expression `pattern` (0 when no rows)."""
    table = _read_table(ws, path)
    if table is None:
        return 0.0
    header, rows = table
    idx = {h.casefold(): i for i, h in enumerate(header)}.get(column.casefold())
    if idx is None or not rows:
        return 0.0
    rx = re.compile(pattern)
    return sum(1 for r in rows if idx < len(r) and rx.fullmatch(str(r[idx]).strip())) / len(rows)


def _leaves(obj, prefix=""):
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out.update(_leaves(v, f"{prefix}/{k}"))
        return out or {prefix: {}}
    if isinstance(obj, list) and obj and all(isinstance(x, (dict, list)) for x in obj):
        out = {}
        for i, v in enumerate(obj):
            out.update(_leaves(v, f"{prefix}[{i}]"))
        return out
    return {prefix: obj}


def _lookup(obj, path):
    """Value at a leaf path as made by _leaves; KeyError when absent. Keys match case-insensitively."""
    for part in re.findall(r"/([^/\[]+)|\[(\d+)\]", path):
        key, idx = part
        if key:
            if not isinstance(obj, dict):
                raise KeyError(path)
            if key in obj:
                obj = obj[key]
            else:
                alt = [k for k in obj if str(k).casefold() == key.casefold()]
                if not alt:
                    raise KeyError(path)
                obj = obj[alt[0]]
        else:
            if not isinstance(obj, list) or int(idx) >= len(obj):
                raise KeyError(path)
            obj = obj[int(idx)]
    return obj


def _same_leaf(a, b, tol):
    if isinstance(b, list) and isinstance(a, list):
        if len(a) != len(b):
            return False
        pool = list(a)
        for x in b:
            hit = next((i for i, y in enumerate(pool) if same(y, x, tol)), None)
            if hit is None:
                return False
            pool.pop(hit)
        return True
    return same(a, b, tol)


def data_matches(got, expected, tol=0.01):
    """Fraction of the expected structure's leaves found with an equal value in `got`."""
    leaves = _leaves(expected)
    if not leaves:
        return 0.0
    ok = 0
    for path, val in leaves.items():
        try:
            if _same_leaf(_lookup(got, path) if path else got, val, tol):
                ok += 1
        except KeyError:
            pass
    return ok / len(leaves)


@check
def json_matches(ws, path, expected, tol=0.01):
    text = _text(ws, path)
    if text is None:
        return 0.0
    try:
        got = json.loads(text)
    except ValueError:
        return 0.0
    return data_matches(got, expected, tol)


def _yaml_load(text):
    """yaml.safe_load(text), parsed by libyaml when PyYAML has it (the same safe loader, many times faster)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@check
def yaml_matches(ws, path, expected, tol=0.01):
    text = _text(ws, path)
    if text is None:
        return 0.0
    try:
        got = _yaml_load(text)
    except Exception:  # the yaml parser on the agent's text alone: its errors are many
        return 0.0
    return data_matches(got, expected, tol)


@check
def files_moved(ws, moves):
    """`moves`: {old path: [new path, expected text]}: fraction moved with content intact and old gone."""
    if not moves:
        return 0.0
    ok = 0
    for old, (new, content) in moves.items():
        if (Path(ws) / old).exists():
            continue
        text = _text(ws, new)
        if text is not None and text.strip() == content.strip():
            ok += 1
    return ok / len(moves)


@check
def paths_exist(ws, paths):
    if not paths:
        return 0.0
    return sum(1 for p in paths if (Path(ws) / p).exists()) / len(paths)


def _unfold_ics(text):
    return re.sub(r"\r?\n[ \t]", "", text)


@check
def ics_events(ws, path, events, tol_minutes=0):
    """Fraction of expected events (dicts with summary/dtstart/dtend/location substrings) present."""
    text = _text(ws, path)
    if text is None or not events:
        return 0.0
    blocks = re.findall(r"BEGIN:VEVENT(.*?)END:VEVENT", _unfold_ics(text), re.S | re.I)
    parsed = []
    for b in blocks:
        fields = {}
        for line in b.strip().splitlines():
            name, _, value = line.partition(":")
            fields[name.split(";")[0].strip().upper()] = value.strip().replace("\\,", ",").replace("\\;", ";")
        parsed.append(fields)
    found = 0
    for exp in events:
        for f in parsed:
            if all(str(v).casefold().replace("-", "").replace(":", "") in
                   f.get(k.upper(), "").casefold().replace("-", "").replace(":", "") for k, v in exp.items()):
                found += 1
                break
    return found / len(events)


@check
def eml_message(ws, path, to=None, subject_has=(), body_has=()):
    """Fraction of the expected parts of a drafted email (.eml) that are right."""
    p = Path(ws) / path
    if not p.is_file():
        return 0.0
    try:
        import email
        from email import policy

        msg = email.message_from_bytes(p.read_bytes(), policy=policy.default)
        body_part = msg.get_body(preferencelist=("plain", "html"))
        body = body_part.get_content() if body_part is not None else ""
        if "\ufffd" in body or not body.strip():  # no or wrong charset header: read the raw bytes as UTF-8
            raw = p.read_bytes()
            body = raw.split(b"\n\n", 1)[-1].split(b"\r\n\r\n", 1)[-1].decode("utf-8", "replace")
        subject = str(msg.get("subject", ""))
        rcpt = " ".join(str(msg.get(h, "")) for h in ("to", "cc"))
    except Exception:  # the email parser on the agent's bytes alone: its errors are many
        return 0.0
    parts, ok = 0, 0
    if to:
        for addr in to:
            parts += 1
            ok += addr.casefold() in rcpt.casefold()
    for s in subject_has:
        parts += 1
        ok += _has_term(subject.casefold(), s.casefold())
    for s in body_has:
        parts += 1
        ok += _has_term(body.casefold(), s.casefold())
    return ok / parts if parts else 1.0


@check(runs_program=True)
def sqlite_rows(ws, path, sql, expected, tol=0.01):
    """Fraction of expected result rows that a query on the database returns."""
    import sqlite3

    p = Path(ws) / path
    if not p.is_file():
        return 0.0
    try:
        con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        got = [list(r) for r in con.execute(sql).fetchall()]
        con.close()
    except (sqlite3.Error, OSError):  # not a database, or not one with the table the query reads
        return 0.0
    if not expected:
        return 1.0 if not got else 0.0
    pool, ok = list(got), 0
    for exp in expected:
        hit = next((i for i, g in enumerate(pool) if len(g) == len(exp) and all(same(a, b, tol) for a, b in zip(g, exp, strict=False))), None)
        if hit is not None:
            ok += 1
            pool.pop(hit)
    return ok / len(expected)


@check(runs_program=True)
def command_ok(ws, argv, cwd=".", timeout=60):
    """1 when the command exits 0 (e.g. a test suite), else 0."""
    import subprocess

    try:
        r = subprocess.run(argv, cwd=str(Path(ws) / cwd), capture_output=True, timeout=timeout)
        return 1.0 if r.returncode == 0 else 0.0
    except (OSError, subprocess.SubprocessError):  # no such program or folder, or a timeout
        return 0.0


def _run_forked(child, cwd, timeout, capture=False):
    """Run `child()` in a forked copy of this process, as a fresh `python3` would run it but without paying
    python's start-up and imports again: working directory `cwd`, stdin and stderr on /dev/null, stdout read
    back here when `capture` (else /dev/null); child()'s return value (or SystemExit's code) is the exit code.
    Returns (exit code, stdout bytes); exit code None when `timeout` passed (the child is then killed). Raises
    OSError/AttributeError where this process cannot fork."""
    import gc
    import os
    import select
    import sys
    import time

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()  # nothing buffered here may be written twice
        except (OSError, ValueError):  # a closed or broken stream
            pass
    r, w = os.pipe()
    gc.freeze()  # the child's garbage collector leaves this process's objects alone: no copy of their pages
    try:
        pid = os.fork()
    except BaseException:
        gc.unfreeze()
        os.close(r)
        os.close(w)
        raise
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(r)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(w if capture else null, 1)
            os.dup2(null, 2)
            os.chdir(cwd)
            code = child()
        except SystemExit as exc:
            code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            code = 1
        finally:
            try:
                sys.stdout.flush()
            except BaseException:
                pass
            os._exit(code if isinstance(code, int) and 0 <= code <= 255 else 1)
    gc.unfreeze()
    os.close(w)  # the child holds the other end until it exits: EOF here means it is done
    deadline = time.monotonic() + timeout
    chunks = []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                break
            data = os.read(r, 65536)
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(r)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), b"".join(chunks)
        if time.monotonic() >= deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None, b"".join(chunks)
        time.sleep(0.0005)


def _forkable(root, recursive=True):
    """True when a fork of this grader runs python code from `root` exactly as a fresh `python3` would: this
    process can fork, `python3` is this interpreter, no PYTHON* variable or user site that a fresh interpreter
    would heed and this one ignores (`python3 -I`), and no module this process has already imported could be
    shadowed by a file or folder in `root` (or, when `recursive`, anywhere under it)."""
    import os
    import shutil
    import site
    import sys

    if not hasattr(os, "fork") or not os.path.isdir(root) or os.environ.get("PYTHONPATH"):
        return False
    if sys.flags.ignore_environment and any(k.startswith("PYTHON") for k in os.environ):
        return False
    exe = shutil.which("python3")
    if not exe or os.path.realpath(exe) != os.path.realpath(sys.executable):
        return False
    try:
        if sys.flags.no_user_site and os.path.isdir(site.getusersitepackages()):
            return False
    except (OSError, AttributeError, ValueError):
        return False
    loaded = {m.partition(".")[0] for m in list(sys.modules)}
    seen = 0
    for _, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", "__pycache__")]
        seen += len(dirnames) + len(filenames)
        if seen > 5000:
            return False
        if (set(dirnames) | {f.partition(".")[0] for f in filenames}) & loaded:
            return False
        if not recursive:
            break
    return True


def _run_command(argv, cwd, timeout):
    """subprocess.run(argv, cwd=cwd, capture_output=True, timeout=timeout) -> (exit code, stdout bytes); exit
    code None after a timeout. `python3 SCRIPT.py ARGS` runs in a fork of this process instead, the script as
    `__main__` with its folder first on sys.path, as a fresh interpreter would run it (see _forkable), without
    its start-up; a SCRIPT.py that does not exist gets python3's exit code 2 at once."""
    import os
    import subprocess
    import sys

    script = argv[1] if len(argv) > 1 and argv[0] == "python3" else ""
    path = os.path.join(cwd, script)
    if script.endswith(".py") and os.path.isdir(cwd) and not os.path.lexists(path):
        return 2, b""  # python3's answer to a script that is not there ("can't open file"), without starting it
    if script.endswith(".py") and os.path.isfile(path) and _forkable(os.path.dirname(os.path.realpath(path)), False):
        import atexit
        import builtins
        import gc
        import importlib.machinery
        import threading
        import types

        def child():
            sys.argv = list(argv[1:])
            sys.path.insert(0, os.path.dirname(os.path.realpath(script)))
            main = types.ModuleType("__main__")
            where = os.path.abspath(script)
            main.__dict__.update(__file__=where, __cached__=None, __builtins__=builtins, __annotations__={},
                                 __loader__=importlib.machinery.SourceFileLoader("__main__", where))
            sys.modules["__main__"] = main
            try:
                with open(script, "rb") as fh:
                    code = compile(fh.read(), main.__file__, "exec")
                exec(code, main.__dict__)
            finally:  # what the interpreter does at exit: wait for threads, atexit, close what is left open
                for t in threading.enumerate():
                    if t is not threading.main_thread() and not t.daemon:
                        t.join()
                atexit._run_exitfuncs()
                main.__dict__.clear()  # files the script left open are flushed and closed
                gc.collect()
            return 0

        try:
            return _run_forked(child, cwd, timeout, capture=True)
        except OSError:
            pass
    try:
        r = subprocess.run(argv, cwd=cwd, capture_output=True, timeout=timeout)
        return r.returncode, r.stdout
    except subprocess.TimeoutExpired:
        return None, b""


@check(runs_program=True)
def pytest_passes(ws, cwd=".", args=(), timeout=60):
    """1 when `python3 -m pytest ARGS` exits 0 in `cwd` (the test suite passes), else 0.

    Runs pytest in a fork of this process with pytest imported once, with `cwd` first on sys.path as
    `python3 -m` puts it: the same pytest on the same files, without the ~0.3 s of start-up and import per
    run. Runs the real command where a fork would not behave the same (see _forkable)."""
    import os
    import sys

    root = str(Path(ws) / cwd)
    if not os.path.isdir(root):
        return 0.0
    try:
        import pytest

        try:  # pytest.main imports its built-in plugins: import them here once, for every fork
            import importlib

            from _pytest.config import default_plugins

            for name in default_plugins:
                importlib.import_module("_pytest." + name)
        except (ImportError, AttributeError):
            pass
        use_fork = _forkable(root)
    except ImportError:  # no pytest here: the command says so
        use_fork = False
    if not use_fork:
        return command_ok(ws, ["python3", "-m", "pytest", *args], cwd, timeout)

    def child():
        sys.path.insert(0, os.getcwd())
        sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *args]
        return int(pytest.main(list(args)))

    try:
        code, _ = _run_forked(child, root, timeout)
    except (OSError, AttributeError):  # this process cannot fork
        return 0.0
    return 1.0 if code == 0 else 0.0


@check(runs_program=True)
def command_output_has(ws, argv, needles, cwd=".", timeout=60):
    """Fraction of `needles` in the stdout of a command (e.g. a script the agent wrote)."""
    import subprocess

    try:
        r = subprocess.run(argv, cwd=str(Path(ws) / cwd), capture_output=True, timeout=timeout, text=True)
    except (OSError, subprocess.SubprocessError, UnicodeError):  # no such program, a timeout, output not UTF-8
        return 0.0
    if r.returncode != 0 or not needles:
        return 0.0
    out = r.stdout.casefold()
    return sum(1 for n in needles if _has_term(out, str(n).casefold())) / len(needles)


@check(runs_program=True)
def git_commits_since(ws, repo, base_count, message_has=()):
    """1 when the repository has more commits than `base_count` (and the newest mentions message_has)."""
    import subprocess

    try:
        r = subprocess.run(["git", "-C", str(Path(ws) / repo), "log", "--format=%s%n%b"], capture_output=True,
                           text=True, timeout=30)
        n = subprocess.run(["git", "-C", str(Path(ws) / repo), "rev-list", "--count", "HEAD"], capture_output=True,
                           text=True, timeout=30)
        if r.returncode or n.returncode or int(n.stdout.strip()) <= base_count:
            return 0.0
    except (OSError, subprocess.SubprocessError, ValueError):  # no git or repository, a timeout, not UTF-8
        return 0.0
    if not message_has:
        return 1.0
    head = r.stdout.casefold()
    return sum(1 for m in message_has if _has_term(head, m.casefold())) / len(message_has)


def _value(score):
    """A combinator's part: a score, or a function giving it (evaluated only when the combinator needs it)."""
    return score() if callable(score) else score


@check
def all_of(*scores):
    """1 only when every score is 1 (for checks that need several conditions at once); the parts after the
    first one below 1 are not evaluated."""
    if not scores:
        return 0.0
    for s in scores:
        if _value(s) < 1.0:
            return 0.0
    return 1.0


@check
def min_of(*scores):
    """The lowest score; the parts after one scoring 0 are not evaluated."""
    low = None
    for s in scores:
        v = _value(s)
        low = v if low is None else min(low, v)
        if low <= 0.0:
            return low
    return 0.0 if low is None else low


@check
def mean_of(*scores):
    return sum(_value(s) for s in scores) / len(scores) if scores else 0.0


@check
def gated(score, *content):
    """A form check's `score` counted only as far as the content it is about is right: `score` times the
    lowest of the `content` scores, which are evaluated first (`score` is not, when the content is all wrong).
    A file at the right path, short enough, in the right syntax, with nothing right in it earns nothing (an
    empty file, the request or an input copied to every output path)."""
    if not content:
        return 0.0
    low = min_of(*content)
    return _value(score) * low if low > 0.0 else 0.0
