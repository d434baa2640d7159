"""Check primitives of the `docs` generators (documents, mail, calendars, contacts, plans, notes, trackers).

STANDARD LIBRARY ONLY. This file is concatenated after checklib.py into every task's grade source, so it may
use checklib's helpers (`_text`, `_num`, `same`, `_read_table`, `csv_rows`, `_unfold_ics`); the guarded import
below only makes it importable on its own on the host. Every function takes the workspace root first,
returns a float in [0, 1] and never raises on bad agent output; a missing file scores 0.
"""

import datetime as _docs_dt
import json as _docs_json
import posixpath as _docs_posixpath
import re as _docs_re
from pathlib import Path as _DocsPath

try:  # on the host; inside a grade source these names are already defined by checklib.py
    from clawgym.checks.checklib import (  # noqa: F401
        _has_number,
        _has_term,
        _num,
        _numbers_in,
        _read_table,
        _sha256,
        _text,
        _unfold_ics,
        check,
        csv_rows,
        match_rows,
        same,
    )
except ImportError:  # pragma: no cover - inside the sandbox
    pass

def _docs_norm(text):
    """Case-folded, whitespace-collapsed text without markdown emphasis and backticks."""
    text = str(text).replace("**", "").replace("__", "").replace("`", "")
    return _docs_re.sub(r"\s+", " ", text).strip().casefold()


def _docs_numbers(text):
    return _numbers_in(text)


_DOCS_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
                "november", "december"]


def _docs_date_has(hay, iso):
    """The date (ISO) written in any common way: 2026-03-12, 12 March (2026), March 12th, 12 Mar, 12/03, 3/12."""
    try:
        d = _docs_dt.date.fromisoformat(iso.strip())
    except ValueError:
        return False
    h = _docs_norm(hay)
    if d.isoformat() in h:
        return True
    mon = _DOCS_MONTHS[d.month - 1][:3]
    day = rf"0?{d.day}(st|nd|rd|th)?"
    pats = [rf"\b{day}\s+(of\s+)?{mon}[a-z]*\.?", rf"\b{mon}[a-z]*\.?\s+{day}\b",
            rf"(?<![\d/]){d.day:02d}/{d.month:02d}(?!/?\d{{1,2}}\b)|(?<![\d/])0?{d.day}/0?{d.month}/(20)?{d.year % 100}\b",
            rf"(?<![\d/])0?{d.month}/0?{d.day}/(20)?{d.year % 100}\b", rf"(?<![\d.]){d.day:02d}\.{d.month:02d}\.{d.year}"]
    return any(_docs_re.search(p, h) for p in pats)


def _docs_time_has(hay, hhmm):
    """A time of day (HH:MM) written as 14:00, 14.00, 14h00, 2pm, 2:00 p.m. ..."""
    try:
        hh, mm = (int(x) for x in hhmm.strip().split(":"))
    except ValueError:
        return False
    h = _docs_norm(hay)
    if _docs_re.search(rf"(?<!\d)0?{hh}[:.h]{mm:02d}(?!\d)", h):
        return True
    h12 = hh % 12 or 12
    ampm = "a" if hh < 12 else "p"
    mins = "" if mm == 0 else f"[:.]{mm:02d}"
    opt = "([:.]00)?" if mm == 0 else mins
    return bool(_docs_re.search(rf"(?<!\d){h12}{opt}\s*{ampm}\.?m\b", h))


def _docs_has(hay, needle):
    """`needle` occurs in `hay` (normalised); "date:YYYY-MM-DD" and "time:HH:MM" needles match common spellings.

    A needle that begins or ends with a digit matches only on number boundaries (checklib._has_term: "6" is not
    in "2026", "12" not in "2026-03-12"), and a numeric needle also matches the same number written another way
    (1234.5 = 1,234.50 = $1,234.50) or, from 2 to 20, as a word ("six"). So a count of 6 is found in "6",
    "6 orders", "six orders", "(6)", but not in a date, a time, an amount like 1.6 or 7,600, or an id."""
    if isinstance(needle, str) and needle.startswith("date:"):
        return _docs_date_has(hay, needle[5:])
    if isinstance(needle, str) and needle.startswith("time:"):
        return _docs_time_has(hay, needle[5:])
    n = _docs_norm(needle)
    if not n:
        return True
    h = _docs_norm(hay)
    if _has_term(h, n):
        return True
    v = _num(str(needle).strip())
    if v is not None and _docs_re.search(r"\d", str(needle)):
        return _has_number(h, v)
    return False


@check
def docs_text_has(ws, path, needles):
    """Fraction of `needles` in the file (normalised; numbers may be written with separators or a currency)."""
    text = _text(ws, path)
    if text is None or not needles:
        return 0.0
    return sum(1 for n in needles if _docs_has(text, n)) / len(needles)


@check
def docs_regex(ws, path, pattern):
    """1 when the regular expression (searched, multi-line, case-insensitive) matches the file."""
    text = _text(ws, path)
    if text is None:
        return 0.0
    try:
        return 1.0 if _docs_re.search(pattern, text, _docs_re.I | _docs_re.M) else 0.0
    except _docs_re.error:
        return 0.0


def _docs_sections(text):
    """[(level, title, body)] of a markdown text; the text before the first heading is level 0, title ''."""
    out = []
    level, title, body = 0, "", []
    fence = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fence = not fence
        m = None if fence else _docs_re.match(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            out.append((level, title, "\n".join(body)))
            level, title, body = len(m.group(1)), m.group(2), []
        else:
            body.append(line)
    out.append((level, title, "\n".join(body)))
    return out


def _docs_heading_key(title):
    t = _docs_norm(title)
    t = _docs_re.sub(r"^\d+(\.\d+)*[.)]?\s+", "", t)  # "2. Budget" -> "budget"
    return t.rstrip(":").strip()


def _docs_section_text(text, heading):
    """The body of the first section whose title equals `heading` (or, failing that, contains it), down to the
    next heading of the same or a higher level; None when there is no such section."""
    secs = _docs_sections(text)
    want = _docs_heading_key(heading)
    idx = next((i for i, s in enumerate(secs) if s[0] and _docs_heading_key(s[1]) == want), None)
    if idx is None:
        idx = next((i for i, s in enumerate(secs) if s[0] and want in _docs_heading_key(s[1])), None)
    if idx is None:
        return None
    level = secs[idx][0]
    parts = [secs[idx][2]]
    for lv, title, body in secs[idx + 1:]:
        if lv <= level:
            break
        parts.append(title + "\n" + body)
    return "\n".join(parts)


@check
def docs_section_has(ws, path, heading, needles):
    """Fraction of `needles` found inside the section titled `heading` (0 when the section is missing)."""
    text = _text(ws, path)
    if text is None or not needles:
        return 0.0
    body = _docs_section_text(text, heading)
    if body is None:
        return 0.0
    return sum(1 for n in needles if _docs_has(body, n)) / len(needles)


@check
def docs_sections_have(ws, path, sections):
    """Mean over `sections` ({heading: [needles]}) of docs_section_has; a section with no needles only has to
    exist."""
    text = _text(ws, path)
    if text is None or not sections:
        return 0.0
    total = 0.0
    for heading, needles in sections.items():
        body = _docs_section_text(text, heading)
        if body is None:
            continue
        total += 1.0 if not needles else sum(1 for n in needles if _docs_has(body, n)) / len(needles)
    return total / len(sections)


@check
def docs_headings(ws, path, present=(), absent=()):
    """Fraction of heading conditions met: each of `present` is a heading of the file (any level, numbering and
    case ignored), none of `absent` is."""
    text = _text(ws, path)
    if text is None or not (present or absent):
        return 0.0
    heads = [_docs_heading_key(t) for lv, t, _ in _docs_sections(text) if lv]
    ok = sum(1 for h in present if _docs_heading_key(h) in heads)
    ok += sum(1 for h in absent if _docs_heading_key(h) not in heads)
    return ok / (len(present) + len(absent))


@check
def docs_word_count(ws, path, max_words, min_words=1):
    """1 within [min_words, max_words] words; above the limit the score falls linearly to 0 at twice it."""
    text = _text(ws, path)
    if text is None:
        return 0.0
    n = len(_docs_re.findall(r"[\w'’.,€$£%-]*\w[\w'’.,€$£%-]*", text))
    if n < min_words:
        return 0.0
    if n <= max_words:
        return 1.0
    return max(0.0, 1.0 - (n - max_words) / float(max_words))


@check
def docs_md_links(ws, path, targets):
    """Fraction of `targets` (workspace paths) linked from the markdown file `path` ([text](link), relative to
    the file's folder or to the workspace root; <...> and #anchors ignored)."""
    text = _text(ws, path)
    if text is None or not targets:
        return 0.0
    base = _docs_posixpath.dirname(path)
    links = set()
    for m in _docs_re.finditer(r"\]\(\s*<?([^)>\s]+)>?(?:\s+\"[^\"]*\")?\s*\)", text):
        link = m.group(1).split("#")[0].replace("%20", " ")
        if not link:
            continue
        links.add(_docs_posixpath.normpath(_docs_posixpath.join(base, link)))
        links.add(_docs_posixpath.normpath(link.lstrip("/")))
    for m in _docs_re.finditer(r"\[\[([^\]|#]+)", text):  # wiki links [[note]] resolve by file name
        links.add("wiki:" + m.group(1).strip().casefold())
    found = 0
    for t in targets:
        t = _docs_posixpath.normpath(t)
        stem = _docs_posixpath.splitext(_docs_posixpath.basename(t))[0].casefold()
        if t in links or "wiki:" + stem in links or "wiki:" + _docs_posixpath.basename(t).casefold() in links:
            found += 1
    return found / len(targets)


def _docs_md_table(text, header):
    """(header, rows) of the first markdown pipe table whose header has every column of `header`."""
    want = [h.casefold() for h in header]
    block = []
    blocks = []
    for line in text.splitlines() + [""]:
        s = line.strip()
        if s.startswith("|") or (s.count("|") >= 2 and block):
            block.append(s)
        elif block:
            blocks.append(block)
            block = []
    for block in blocks:
        rows = []
        for s in block:
            cells = [c.strip() for c in s.strip("|").split("|")]
            if all(_docs_re.fullmatch(r":?-{2,}:?", c) or c == "" for c in cells):
                continue
            rows.append([c.replace("**", "").replace("`", "").strip() for c in cells])
        if not rows:
            continue
        head = [c.casefold() for c in rows[0]]
        if all(w in head for w in want):
            return rows[0], rows[1:]
    return None


def _docs_table(ws, path, header):
    if str(path).lower().endswith((".md", ".markdown", ".txt")):
        text = _text(ws, path)
        if text is None:
            return None
        return _docs_md_table(text, header)
    return _read_table(ws, path)


@check
def docs_table_rows(ws, path, header, rows, ordered=False, tol=0.01):
    """csv_rows for a CSV/TSV/xlsx file, or for the first markdown pipe table of a .md/.txt file that has the
    columns of `header`."""
    if not rows:
        return 0.0
    try:
        table = _docs_table(ws, path, header)
    except OSError:
        return 0.0
    if table is None:
        return 0.0
    return match_rows(table[0], table[1], header, rows, ordered, tol)


@check
def docs_table_before(ws, path, column, pairs, start_col, end_col):
    """Dependencies respected: fraction of `pairs` [before, after] (values of `column`) where the row `after`
    starts (ISO date in `start_col`) strictly after the row `before` ends (`end_col`)."""
    if not pairs:
        return 0.0
    try:
        table = _docs_table(ws, path, [column, start_col, end_col])
    except OSError:
        return 0.0
    if table is None:
        return 0.0
    head, rows = table
    idx = {h.strip().casefold(): i for i, h in enumerate(head)}
    try:
        c, s, e = idx[column.casefold()], idx[start_col.casefold()], idx[end_col.casefold()]
    except KeyError:
        return 0.0
    spans = {}
    for r in rows:
        try:
            spans[_docs_norm(r[c])] = (_docs_dt.date.fromisoformat(r[s].strip()), _docs_dt.date.fromisoformat(r[e].strip()))
        except (IndexError, ValueError):
            continue
    ok = 0
    for a, b in pairs:
        a, b = _docs_norm(a), _docs_norm(b)
        if a in spans and b in spans and spans[b][0] > spans[a][1] and spans[b][0] <= spans[b][1]:
            ok += 1
    return ok / len(pairs)


def _docs_bool(v):
    if isinstance(v, bool):
        return v
    s = str(v).strip().casefold()
    if s in ("true", "yes", "y", "1"):
        return True
    if s in ("false", "no", "n", "0", ""):
        return False
    return None


def _docs_load_records(ws, path):
    """A list of dicts from a JSON file (a list of objects, {"items"/...: [...]}, or {key: {...}}) or a table."""
    text = _text(ws, path)
    if text is None:
        return None
    if str(path).lower().endswith(".json"):
        try:
            data = _docs_json.loads(text)
        except ValueError:
            return None
        if isinstance(data, dict):
            lists = [v for v in data.values() if isinstance(v, list)]
            if len(data) == 1 and lists:
                data = lists[0]
            elif all(isinstance(v, dict) for v in data.values()):
                data = [dict(v, __key__=k) for k, v in data.items()]
            else:
                return None
        if not isinstance(data, list):
            return None
        return [d for d in data if isinstance(d, dict)]
    table = _read_table(ws, path)
    if table is None:
        return None
    head, rows = table
    return [{h: (r[i] if i < len(r) else "") for i, h in enumerate(head)} for r in rows]


def _docs_get(rec, field):
    for k, v in rec.items():
        if str(k).strip().casefold() == field.casefold():
            return v
    return None


def _docs_key_of(v):
    s = str(v).strip().replace("\\", "/")
    return _docs_posixpath.basename(s).casefold()


@check
def docs_records(ws, path, key, records, fields):
    """Fraction of the expected (record, field) values right in a JSON list of objects or a table: records are
    matched on `key` (compared by file name, so `inbox/a.eml` = `a.eml`); booleans accept true/yes/1.
    With fields=[] it is the fraction of expected keys present (minus extras)."""
    got = _docs_load_records(ws, path)
    if not got or not records:
        return 0.0
    by_key = {}
    for g in got:
        k = _docs_get(g, key)
        if k is None:
            k = g.get("__key__")
        if k is not None:
            by_key.setdefault(_docs_key_of(k), g)
    if not fields:
        hit = sum(1 for r in records if _docs_key_of(r[key]) in by_key)
        extra = max(0, len(by_key) - len(records))
        return max(0.0, (hit - 0.5 * extra) / len(records))
    total, ok = 0, 0
    for r in records:
        g = by_key.get(_docs_key_of(r[key]))
        for f in fields:
            total += 1
            if g is None:
                continue
            want, have = r.get(f), _docs_get(g, f)
            if isinstance(want, bool):
                ok += _docs_bool(have) is want
            elif have is not None and same(have, want):
                ok += 1
    return ok / total if total else 0.0


_DOCS_EML_SEEN = {}  # file bytes -> parsed message: several checks of a task read the same .eml


def _docs_parse_eml(ws, path):
    p = _DocsPath(ws) / path
    try:
        if not p.is_file():
            return None
        raw = p.read_bytes()
    except OSError:
        return None
    if raw not in _DOCS_EML_SEEN:
        _DOCS_EML_SEEN[raw] = _docs_parse_eml_bytes(raw)
    return _DOCS_EML_SEEN[raw]


_DOCS_EML_POLICY = []  # made on first use: see _docs_eml_policy


def _docs_eml_policy():
    """email.policy.default, except that each distinct header (name, value) is parsed only once: the email
    package parses a message's Content-Type again at every step (8 times for a plain mail), and that parsing
    is most of the cost of reading a mail. Same header objects, same results."""
    if not _DOCS_EML_POLICY:
        from email import policy
        from email.headerregistry import HeaderRegistry

        class _ParseOnce(HeaderRegistry):
            def __init__(self):
                super().__init__()
                self.parsed = {}

            def __call__(self, name, value):
                if (name, value) not in self.parsed:
                    self.parsed[(name, value)] = super().__call__(name, value)
                return self.parsed[(name, value)]

        _DOCS_EML_POLICY.append(policy.default.clone(header_factory=_ParseOnce()))
    return _DOCS_EML_POLICY[0]


def _docs_parse_eml_bytes(raw):
    try:
        import email

        msg = email.message_from_bytes(raw, policy=_docs_eml_policy())
        body_part = msg.get_body(preferencelist=("plain", "html"))
        try:
            body = body_part.get_content() if body_part is not None else ""
        except Exception:  # the email parser on the agent's message: its errors are many
            body = ""
        if not msg.is_multipart() and (not body or "\ufffd" in body or _docs_re.search("[\udc80-\udcff]", body)):
            head, sep, rest = raw.replace(b"\r\n", b"\n").partition(b"\n\n")
            cte = str(msg.get("content-transfer-encoding", "")).strip().casefold()
            if sep and cte not in ("base64", "quoted-printable"):
                body = rest.decode("utf-8", errors="replace")
        return {
            "from": str(msg.get("from", "")), "to": str(msg.get("to", "")), "cc": str(msg.get("cc", "")),
            "subject": str(msg.get("subject", "")), "body": str(body or ""),
        }
    except Exception:  # the email parser on the agent's bytes alone: its errors are many
        return None


@check
def docs_eml(ws, path, to=(), subject_has=(), body_has=(), from_has=(), not_to=()):
    """Fraction of the expected parts of an .eml that are right: recipients (To/Cc), subject and body needles
    (numbers may be written with separators or a currency sign), sender needles, and recipients that must
    NOT be there."""
    m = _docs_parse_eml(ws, path)
    if m is None:
        return 0.0
    rcpt = (m["to"] + " " + m["cc"]).casefold()
    parts, ok = 0, 0
    for a in to:
        parts += 1
        ok += a.casefold() in rcpt
    for a in not_to:
        parts += 1
        ok += a.casefold() not in rcpt
    for s in subject_has:
        parts += 1
        ok += _docs_has(m["subject"], s)
    for s in body_has:
        parts += 1
        ok += _docs_has(m["body"], s)
    for s in from_has:
        parts += 1
        ok += s.casefold() in m["from"].casefold()
    return ok / parts if parts else 1.0


@check
def docs_eml_each(ws, specs):
    """Mean of docs_eml over `specs`: [{path, to, subject_has, body_has, ...}]."""
    if not specs:
        return 0.0
    total = 0.0
    for s in specs:
        args = dict(s)
        p = args.pop("path")
        total += docs_eml(ws, p, **args)
    return total / len(specs)


@check
def docs_files_have(ws, specs):
    """Mean over `specs` ({path: [needles]}) of the fraction of needles in each file (a file with no needles
    only has to exist)."""
    if not specs:
        return 0.0
    total = 0.0
    for p, needles in specs.items():
        text = _text(ws, p)
        if text is None:
            continue
        total += 1.0 if not needles else sum(1 for n in needles if _docs_has(text, n)) / len(needles)
    return total / len(specs)


def _docs_row_file_ok(text, own, others, lack=()):
    """A row's file: it holds every one of its row's values and none of the other rows' (nor of `lack`)."""
    if text is None or not text.strip():
        return False
    if not all(_docs_has(text, n) for n in own) or any(_docs_has(text, n) for n in others):
        return False
    folded = text.casefold()
    return not any(str(n).casefold() in folded for n in lack)


@check
def docs_row_files(ws, specs, lack=()):
    """Fraction of `specs` ({path: [its row's values, other rows' values]}) whose file is that row's file: it
    holds all of its row's values and none of the other rows' values, nor any of `lack` (e.g. unfilled
    placeholders). A format check ("one file per row", "no placeholders left") counts a file only when its
    content is right: an empty file, the request or the data file copied to every path earns nothing."""
    if not specs:
        return 0.0
    ok = sum(1 for p, (own, others) in specs.items() if _docs_row_file_ok(_text(ws, p), own, others, lack))
    return ok / len(specs)


@check
def docs_row_values(ws, specs):
    """Mean over `specs` ({path: [its row's values, other rows' values]}) of the fraction of its row's values
    the file holds; a file holding another row's values scores 0 (a copy of the whole data is no row's file)."""
    if not specs:
        return 0.0
    total = 0.0
    for p, (own, others) in specs.items():
        text = _text(ws, p)
        if text is None or not own or any(_docs_has(text, n) for n in others):
            continue
        total += sum(1 for n in own if _docs_has(text, n)) / len(own)
    return total / len(specs)


@check
def docs_files_lack(ws, paths, needles):
    """Fraction of the files that exist and contain none of `needles` (e.g. unfilled {{placeholders}})."""
    if not paths:
        return 0.0
    ok = 0
    for p in paths:
        text = _text(ws, p)
        if text is not None and text.strip() and not any(str(n).casefold() in text.casefold() for n in needles):
            ok += 1
    return ok / len(paths)


def _docs_ics_events(ws, path):
    text = _text(ws, path)
    if text is None:
        return None
    out = []
    for block in _docs_re.findall(r"BEGIN:VEVENT(.*?)END:VEVENT", _unfold_ics(text), _docs_re.S):
        fields = {}
        for line in block.strip().splitlines():
            name, _, value = line.partition(":")
            fields.setdefault(name.split(";")[0].strip().upper(), value.strip())
        out.append(fields)
    return out


def _docs_ics_time(value):
    v = value.strip().rstrip("Zz")
    for fmt in ("%Y%m%dT%H%M%S", "%Y%m%dT%H%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"):
        try:
            return _docs_dt.datetime.strptime(v, fmt)
        except ValueError:
            pass
    return None


@check
def docs_ics_free(ws, path, summary, busy, day_start="09:00", day_end="17:00"):
    """Fraction of the events whose SUMMARY contains `summary` that are inside working hours on a weekday and
    overlap none of `busy` ([[start, end] ISO local times]); 0 when there is no such event."""
    events = _docs_ics_events(ws, path)
    if not events:
        return 0.0
    spans = []
    for s, e in busy:
        try:
            spans.append((_docs_dt.datetime.fromisoformat(s), _docs_dt.datetime.fromisoformat(e)))
        except ValueError:
            pass
    h0 = _docs_dt.time.fromisoformat(day_start)
    h1 = _docs_dt.time.fromisoformat(day_end)
    mine = [f for f in events if summary.casefold() in f.get("SUMMARY", "").casefold()]
    if not mine:
        return 0.0
    ok = 0
    for f in mine:
        a, b = _docs_ics_time(f.get("DTSTART", "")), _docs_ics_time(f.get("DTEND", ""))
        if a is None or b is None or b <= a or a.date() != b.date() or a.weekday() >= 5:
            continue
        if a.time() < h0 or b.time() > h1:
            continue
        if any(a < e and s < b for s, e in spans):
            continue
        ok += 1
    return ok / len(mine)


@check
def docs_tracker_rows(ws, path, rows, task_col="task", extra_penalty=True):
    """A task tracker: fraction of expected rows found, each {task: [keywords], other column: value}; the task
    cell must contain every keyword, other cells must be equal (dates as ISO). Extra rows cost half a row unless
    extra_penalty is false (for checks on a subset of the rows)."""
    table = _read_table(ws, path) if not str(path).lower().endswith(".md") else None
    if table is None and str(path).lower().endswith(".md"):
        text = _text(ws, path)
        table = _docs_md_table(text, [task_col]) if text is not None else None
    if table is None or not rows:
        return 0.0
    head, got_rows = table
    idx = {h.strip().casefold(): i for i, h in enumerate(head)}
    cols = sorted({k for r in rows for k in r})
    if any(c.casefold() not in idx for c in cols):
        return 0.0
    pool = [{c: (g[idx[c.casefold()]] if idx[c.casefold()] < len(g) else "") for c in cols} for g in got_rows]
    matched = 0
    for exp in rows:
        for i, g in enumerate(pool):
            good = True
            for c, want in exp.items():
                if c == task_col:
                    good = all(_has_term(_docs_norm(g[c]), _docs_norm(k)) for k in want)
                else:
                    good = same(g[c], want)
                if not good:
                    break
            if good:
                matched += 1
                pool.pop(i)
                break
    extra = max(0, len(got_rows) - len(rows)) if extra_penalty else 0
    return max(0.0, min(1.0, matched / len(rows) - 0.5 * extra / len(rows)))


@check
def docs_csv_unique(ws, path, column, expected_count):
    """1 when the table has exactly `expected_count` rows and no two share `column` (case-insensitive);
    otherwise the fraction of distinct values over max(rows, expected)."""
    table = _read_table(ws, path)
    if table is None or expected_count <= 0:
        return 0.0
    head, rows = table
    idx = {h.casefold(): i for i, h in enumerate(head)}.get(column.casefold())
    if idx is None or not rows:
        return 0.0
    vals = [_docs_norm(r[idx]) if idx < len(r) else "" for r in rows]
    distinct = len({v for v in vals if v})
    return min(1.0, distinct / max(len(rows), expected_count))


@check
def docs_line_number(ws, path, label, value, tol=0.01):
    """1 when a line that mentions `label` (normalised) also holds the number `value` (any format)."""
    text = _text(ws, path)
    if text is None:
        return 0.0
    want = _docs_norm(label)
    for line in text.splitlines():
        if _has_term(_docs_norm(line), want):
            for x in _docs_numbers(line):
                if same(x, value, tol):
                    return 1.0
    return 0.0


@check
def docs_paths_absent(ws, paths):
    """Fraction of `paths` that do not exist (combine with a positive check: on an untouched workspace this is
    often 1)."""
    if not paths:
        return 0.0
    return sum(1 for p in paths if not (_DocsPath(ws) / p).exists()) / len(paths)


@check
def docs_texts_equal(ws, specs):
    """Fraction of files ({path: expected text}) whose text equals the expected one after normalising
    whitespace, case and markdown emphasis."""
    if not specs:
        return 0.0
    ok = 0
    for p, want in specs.items():
        text = _text(ws, p)
        if text is not None and _docs_norm(text) == _docs_norm(want):
            ok += 1
    return ok / len(specs)


@check
def docs_digests_equal(ws, digests):
    """docs_texts_equal against digests ({path: sha256 of the expected text as _docs_norm normalises it}): the
    same score, without the texts in the task."""
    if not digests:
        return 0.0
    ok = 0
    for p, want in digests.items():
        text = _text(ws, p)
        if text is not None and _sha256(_docs_norm(text)) == want:
            ok += 1
    return ok / len(digests)


@check
def docs_moved(ws, moves):
    """`moves`: {old path: new path}: the fraction whose old path is gone and whose new path is a file."""
    if not moves:
        return 0.0
    ok = 0
    for old, new in moves.items():
        if not (_DocsPath(ws) / old).exists() and (_DocsPath(ws) / new).is_file():
            ok += 1
    return ok / len(moves)


@check
def docs_ics_has(ws, path, needles):
    """Fraction of `needles` in an .ics file after unfolding its continuation lines (case-insensitive)."""
    text = _text(ws, path)
    if text is None or not needles:
        return 0.0
    hay = _unfold_ics(text).casefold()
    return sum(1 for n in needles if _has_term(hay, str(n).casefold())) / len(needles)


@check
def docs_files_sections(ws, specs):
    """Mean over files ({path: {heading: [needles]}}) of docs_sections_have."""
    if not specs:
        return 0.0
    return sum(docs_sections_have(ws, p, secs) for p, secs in specs.items()) / len(specs)


@check
def docs_order(ws, path, needles):
    """Fraction of consecutive pairs of `needles` that come in the given order. A needle's position is the first
    line that equals it (ignoring heading marks, bullets and links), else the first line containing it."""
    text = _text(ws, path)
    if text is None or not needles:
        return 0.0
    lines = [_docs_norm(ln) for ln in text.splitlines()]
    bare = [_docs_re.sub(r"^(#+|[-*+]|\d+[.)])\s*", "", ln).strip() for ln in lines]
    bare = [_docs_re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", ln) for ln in bare]

    def pos(n):
        n = _docs_norm(n)
        exact = next((i for i, ln in enumerate(bare) if ln == n), None)
        if exact is not None:
            return exact
        return next((i for i, ln in enumerate(lines) if _has_term(ln, n)), -1)

    at = [pos(n) for n in needles]
    if len(needles) == 1:
        return 1.0 if at[0] >= 0 else 0.0
    ok = sum(1 for a, b in zip(at, at[1:], strict=False) if a >= 0 and b >= 0 and a < b)
    return ok / (len(needles) - 1)


# ---------------------------------------------------------------------------------------------------------
# Checks computed from a file as the agent wrote it in an earlier step (so a free-form document that is right
# but worded differently from the reference still gets a fair next step).


def _docs_plain_lines(text):
    """Non-empty lines without markdown heading marks, bullets and emphasis, normalised."""
    out = []
    for ln in text.splitlines():
        s = _docs_re.sub(r"^\s*(#+|[-*+]|\d+[.)]|>)\s*", "", ln)
        s = _docs_norm(s)
        if s and not _docs_re.fullmatch(r"[|:\-\s=_*#]+", s):
            out.append(s)
    return out


@check
def docs_replaced(ws, src, out, old, new, drop_with=()):
    """`out` is a copy of `src` in which every `old` became `new`: 1 when `out` has no `old` and holds `new`
    at least as often as `src` held `old` (not counting lines of `src` that mention `drop_with`, which were to
    be removed); partial credit for some of them."""
    s, o = _text(ws, src), _text(ws, out)
    if s is None or o is None:
        return 0.0
    drop = [d.casefold() for d in drop_with]
    # at least once: a source without the figure (e.g. written empty) must not make an empty copy "corrected"
    want = max(1, sum(ln.count(old) for ln in s.splitlines() if not any(d in ln.casefold() for d in drop)))
    if old in o:
        return 0.0 if want == 0 else max(0.0, 1.0 - o.count(old) / want) * 0.5
    return 1.0 if want == 0 else min(1.0, o.count(new) / want)


@check
def docs_kept_lines(ws, src, out, replace=None, drop_with=(), skip=()):
    """Fraction of the lines of `src` (after the `replace` {old: new} substitutions, without lines containing
    any of `drop_with` or `skip`) that are still in `out` (normalised, markdown marks ignored)."""
    s, o = _text(ws, src), _text(ws, out)
    if s is None or o is None:
        return 0.0
    for a, b in (replace or {}).items():
        s = s.replace(a, b)
    drop = [_docs_norm(d) for d in list(drop_with) + list(skip)]
    want = [ln for ln in _docs_plain_lines(s) if not any(d and d in ln for d in drop)]
    if not want:  # nothing to keep: only when the source has text (an empty source keeps nothing for anyone)
        return 1.0 if s.strip() and o.strip() else 0.0
    have = "\n".join(_docs_plain_lines(o))
    return sum(1 for ln in want if ln in have) / len(want)


@check
def docs_no_line_with(ws, path, needles):
    """1 when the file exists and no line mentions any of `needles` (case-insensitive)."""
    text = _text(ws, path)
    if text is None:
        return 0.0
    hay = _docs_norm(text)
    return 0.0 if any(_has_term(hay, _docs_norm(n)) for n in needles) else 1.0


def _docs_headings_of(text, levels=(2, 3)):
    seen = []
    for lv, title, _ in _docs_sections(text):
        t = title.strip()
        if lv in levels and t and t not in seen:
            seen.append(t)
    return seen


@check
def docs_lists_headings(ws, out, heading, src, limit=10):
    """The section `heading` of `out` names every ##/### heading of `src` (the first `limit`)."""
    s, o = _text(ws, src), _text(ws, out)
    if s is None or o is None:
        return 0.0
    heads = _docs_headings_of(s)[:limit]
    body = _docs_section_text(o, heading)
    if body is None:
        return 0.0
    if not heads:
        return 1.0
    return sum(1 for h in heads if _docs_has(body, h)) / len(heads)


def _docs_amounts(text):
    vals = []
    for m in _docs_re.finditer(r"(?<![\w./:-])(\d{1,3}(?:,\d{3})+\.\d{2}|\d+\.\d{2})(?![\w/:-]|[.,]\d)", text):
        v = float(m.group(1).replace(",", ""))
        if v not in vals:
            vals.append(v)
    return sorted(vals, reverse=True)


@check
def docs_lists_top_amounts(ws, out, heading, src, k=3):
    """The section `heading` of `out` lists the k largest two-decimal amounts found in `src`."""
    s, o = _text(ws, src), _text(ws, out)
    if s is None or o is None:
        return 0.0
    top = _docs_amounts(s)[:k]
    body = _docs_section_text(o, heading)
    if body is None:
        return 0.0
    if not top:
        return 1.0
    return sum(1 for v in top if any(abs(v - x) <= 0.005 for x in _docs_numbers(body))) / len(top)


@check
def docs_eml_has_file(ws, path, src):
    """Fraction of the lines of `src` (normalised, markdown marks ignored) found in the body of the .eml."""
    m, s = _docs_parse_eml(ws, path), _text(ws, src)
    if m is None or s is None:
        return 0.0
    want = _docs_plain_lines(s)
    if not want:  # an empty document: there is nothing to have pasted
        return 0.0
    have = "\n".join(_docs_plain_lines(m["body"]))
    return sum(1 for ln in want if ln in have) / len(want)


def _docs_add_workdays(d, n):
    while d.weekday() >= 5:
        d += _docs_dt.timedelta(days=1)
    while n > 0:
        d += _docs_dt.timedelta(days=1)
        if d.weekday() < 5:
            n -= 1
    return d


@check
def docs_tracker_from_headings(ws, out, src, prefix, owners, start, step, part="all", limit=10):
    """A tracker with one row per ##/### heading of `src` (first `limit`, in order): task `prefix` + heading,
    owners taking turns, due dates from `start` every `step` working days, status open. `part`: "rows" (tasks
    only, extra rows cost), "owners", "dates" (due and status) or "all"."""
    s = _text(ws, src)
    if s is None or _text(ws, out) is None:
        return 0.0
    heads = _docs_headings_of(s)[:limit]
    if not heads:
        return 0.0
    try:
        d0 = _docs_dt.date.fromisoformat(start)
    except ValueError:
        return 0.0
    rows = []
    for i, h in enumerate(heads):
        r = {"task": [prefix + h]}
        if part in ("owners", "all"):
            r["owner"] = owners[i % len(owners)]
        if part in ("dates", "all"):
            r["due"] = _docs_add_workdays(d0, i * step).isoformat()
            r["status"] = "open"
        rows.append(r)
    return docs_tracker_rows(ws, out, rows)
