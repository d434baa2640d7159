"""Check primitives of the `data` generator group (aggregate, reconcile, extract, convert, file management).

Concatenated after checklib.py into every grade source, so it may use that module's helpers (_text, _num,
same, _read_table); stdlib only (plus yaml), every function takes `ws` first, returns a float in [0, 1] and
never raises for bad agent output. Names carry the `data_` prefix.
"""

import json as _data_json
import re as _data_re
from pathlib import Path as _DataPath

if "same" not in globals():  # imported on the host, not concatenated after checklib.py
    from clawgym.checks.checklib import (
        _has_number,
        _has_term,
        _leaves,
        _lookup,
        _num,
        _read_table,
        _text,
        _yaml_load,
        check,
        same,
    )


def _data_norm_path(value, base=""):
    """A path as written by an agent, made comparable: slashes, no ./, no leading base folder."""
    s = str(value).strip().strip('"').strip("'").replace("\\", "/")
    while s.startswith("./"):
        s = s[2:]
    s = _data_re.sub(r"/+", "/", s).lstrip("/")
    b = str(base or "").strip().strip("/")
    if b and s.startswith(b + "/"):
        s = s[len(b) + 1:]
    return s


@check
def data_path_rows(ws, path, header, rows, path_columns=(), base="", ordered=False, tol=0.01):
    """Like csv_rows, but the columns named in `path_columns` are compared as paths: a leading ./ and the
    folder `base` are ignored, so `docs/a.md` and `a.md` (relative to base=docs) are the same."""
    table = _read_table(ws, path)
    if table is None or not rows:
        return 0.0
    got_header, got_rows = table
    index = {h.casefold(): i for i, h in enumerate(got_header)}
    cols = []
    for h in header:
        if h.casefold() not in index:
            return 0.0
        cols.append(index[h.casefold()])
    pcols = {i for i, h in enumerate(header) if h in set(path_columns)}

    def norm(row):
        return [_data_norm_path(v, base) if i in pcols else v for i, v in enumerate(row)]

    got = [norm([r[c] if c < len(r) else "" for c in cols]) for r in got_rows]
    exp_rows = [norm([str(v) if v is not None else "" for v in r]) for r in rows]
    matched = 0
    if ordered:
        for exp, g in list(zip(exp_rows, got)):  # noqa: B905 (shorter `got` is fine)
            if all(same(g[j], exp[j], tol) for j in range(len(exp))):
                matched += 1
    else:
        pool = list(got)
        for exp in exp_rows:
            for i, g in enumerate(pool):
                if all(same(g[j], exp[j], tol) for j in range(len(exp))):
                    matched += 1
                    pool.pop(i)
                    break
    extra = max(0, len(got) - len(exp_rows))
    return max(0.0, min(1.0, matched / len(exp_rows) - 0.5 * extra / len(exp_rows)))


def _data_load(ws, path):
    """Parsed JSON (or YAML for .yaml/.yml files); None when missing or invalid."""
    text = _text(ws, path)
    if text is None:
        return None
    try:
        if str(path).lower().endswith((".yaml", ".yml")):
            return _yaml_load(text)
        return _data_json.loads(text)
    except Exception:  # the json or yaml parser on the agent's text alone: its errors are many
        return None


def _data_value_ok(got, exp, typed, tol):
    if exp is None:
        return got is None if typed else (got is None or str(got).strip() == "")
    if typed and isinstance(exp, (int, float)) and not isinstance(exp, bool):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return False
    if typed and isinstance(exp, bool):
        return got is exp
    if isinstance(exp, bool) or isinstance(got, bool):
        # YAML 1.1 reads an unquoted yes/no/on/off as a boolean: accept it for the string it was
        truthy = {"true": "true", "yes": "true", "y": "true", "on": "true",
                  "false": "false", "no": "false", "n": "false", "off": "false"}
        g, e = str(got).strip().casefold(), str(exp).strip().casefold()
        return truthy.get(g, g) == truthy.get(e, e)
    return same(got, exp, tol)


def _data_record_ok(got, exp, typed, tol):
    if not isinstance(got, dict):
        return False
    keys = {str(k).casefold(): k for k in got}
    for k, v in exp.items():
        gk = keys.get(str(k).casefold())
        if gk is None:
            if v is None and not typed:
                continue
            return False
        if not _data_value_ok(got[gk], v, typed, tol):
            return False
    return True


@check
def data_records(ws, path, records, ordered=False, typed=False, exact_keys=False, tol=0.01):
    """Partial credit for a JSON (or YAML) array of objects: the fraction of expected records found with
    equal fields, minus a penalty for extra records. `typed`: numbers must be numbers, nulls null.
    `exact_keys`: a record must have no keys beyond the expected ones."""
    got = _data_load(ws, path)
    if not isinstance(got, list) or not records:
        return 0.0

    def ok(g, e):
        if not _data_record_ok(g, e, typed, tol):
            return False
        if exact_keys and {str(k).casefold() for k in g} != {str(k).casefold() for k in e}:
            return False
        return True

    matched = 0
    if ordered:
        for e, g in list(zip(records, got)):  # noqa: B905
            matched += 1 if ok(g, e) else 0
    else:
        pool = list(got)
        for e in records:
            for i, g in enumerate(pool):
                if ok(g, e):
                    matched += 1
                    pool.pop(i)
                    break
    extra = max(0, len(got) - len(records))
    return max(0.0, min(1.0, matched / len(records) - 0.5 * extra / len(records)))


@check
def data_numbers_in_text(ws, path, numbers=(), words=(), tol=0.01):
    """Fraction of the expected numbers (found among the numbers written on their own in the file, with or
    without thousands separators or a currency sign, 2-20 also as words; not parts of dates, times or ids, see
    checklib._has_number) and words (case-insensitive, on number boundaries) the file holds."""
    text = _text(ws, path)
    if text is None or not (numbers or words):
        return 0.0
    ok = 0
    for n in numbers:
        v = _num(n)
        if v is not None and _has_number(text, v, tol + 1e-9):
            ok += 1
    hay = text.casefold()
    for w in words:
        if _has_term(hay, str(w).casefold()):
            ok += 1
    return ok / (len(numbers) + len(words))


@check
def data_removed_kept(ws, removed, kept):
    """(fraction of `removed` paths gone) x (fraction of `kept` {path: text} still there with that text)."""
    try:
        if not removed:
            return 0.0
        gone = sum(1 for p in removed if not (_DataPath(ws) / p).exists()) / len(removed)
        if not kept:
            return gone
        intact = 0
        for p, content in kept.items():
            t = _text(ws, p)
            if t is not None and t.strip() == str(content).strip():
                intact += 1
        return gone * intact / len(kept)
    except OSError:  # a path the agent made unreadable
        return 0.0


@check
def data_header_is(ws, path, header):
    """Fraction of the expected column names found at their expected position in the table's header."""
    table = _read_table(ws, path)
    if table is None or not header:
        return 0.0
    got = [h.strip().casefold() for h in table[0]]
    ok = sum(1 for i, h in enumerate(header) if i < len(got) and got[i] == str(h).strip().casefold())
    return ok / max(len(header), len(got))


def _data_typed_equal(got, exp, tol=0.01):
    if isinstance(exp, bool):
        return isinstance(got, bool) and got == exp
    if isinstance(exp, (int, float)):
        return isinstance(got, (int, float)) and not isinstance(got, bool) and same(got, exp, tol)
    if exp is None:
        return got is None
    if isinstance(exp, str):
        return isinstance(got, str) and same(got, exp, tol)
    if isinstance(exp, list):
        return isinstance(got, list) and len(got) == len(exp) and all(
            _data_typed_equal(g, e, tol) for g, e in list(zip(got, exp)))  # noqa: B905
    if isinstance(exp, dict):
        if not isinstance(got, dict):
            return False
        keys = {str(k).casefold(): k for k in got}
        return all(str(k).casefold() in keys and _data_typed_equal(got[keys[str(k).casefold()]], v, tol)
                   for k, v in exp.items())
    return same(got, exp, tol)


@check
def data_not_json(ws, path):
    """1 when the file exists, holds something and is not JSON text (a YAML file asked for must be written as
    YAML: JSON parses as YAML too, so a JSON input copied to the .yaml path would pass the content checks)."""
    text = _text(ws, path)
    if text is None or not text.strip():
        return 0.0
    try:
        _data_json.loads(text)
    except (ValueError, RecursionError):
        return 1.0
    return 0.0


@check
def data_config_types(ws, path, expected, tol=0.01):
    """Fraction of the expected leaves present with the same value AND the same type (bool, number, string,
    null, list) in a JSON or YAML file."""
    got = _data_load(ws, path)
    if got is None:
        return 0.0
    leaves = _leaves(expected)
    if not leaves:
        return 0.0
    ok = 0
    for p, v in leaves.items():
        try:
            if _data_typed_equal(_lookup(got, p) if p else got, v, tol):
                ok += 1
        except (KeyError, ValueError, TypeError):
            pass
    return ok / len(leaves)


@check
def data_config_keys(ws, path, keys):
    """For a JSON/YAML mapping: fraction of `keys` at its top level, minus a penalty for unexpected keys."""
    got = _data_load(ws, path)
    if not isinstance(got, dict) or not keys:
        return 0.0
    have = {str(k).casefold() for k in got}
    want = {str(k).casefold() for k in keys}
    score = len(have & want) / len(want) - 0.5 * len(have - want) / len(want)
    return max(0.0, min(1.0, score))
