"""Generators: structured parameters -> realistic files (csv, json, yaml, xlsx, ics, eml, sqlite, git).

Every generator is deterministic: the same params give the same bytes (or, for `git`, the same commit hashes),
so a task's workspace is reproducible and its checker can rely on exact content. Nothing reads the clock.

Params are validated strictly: a missing or unknown key raises :class:`ValueError` naming it, so a typo in a
task is an error instead of a silently different file.
"""

from __future__ import annotations

import base64
import binascii
import csv
import datetime as dt
import hashlib
import io
import json
import mimetypes
import os
import posixpath
import re
import shutil
import sqlite3
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from contextlib import closing
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr, parsedate_to_datetime
from pathlib import Path
from typing import Any

import yaml

Generator = Callable[[dict[str, Any], Path], None]

#: Stands in for "now" wherever a format wants a timestamp and the params give none.
FIXED_EPOCH = dt.datetime(2025, 1, 1, 0, 0, 0, tzinfo=dt.timezone.utc)

# --------------------------------------------------------------------------------------------- helpers


def _check_keys(kind: str, params: dict[str, Any], required: Iterable[str], optional: Iterable[str]) -> None:
    required = list(required)
    missing = [k for k in required if k not in params]
    if missing:
        raise ValueError(f"{kind}: missing required param(s) {', '.join(map(repr, missing))}")
    unknown = sorted(set(params) - set(required) - set(optional))
    if unknown:
        allowed = ", ".join(sorted([*required, *optional]))
        raise ValueError(f"{kind}: unknown param(s) {', '.join(map(repr, unknown))} (allowed: {allowed})")


def _expect(kind: str, name: str, value: Any, types: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, types):
        raise ValueError(f"{kind}: param {name!r} must be {what}, got {type(value).__name__}")
    return value


def _rows(kind: str, name: str, value: Any) -> list[list[Any]]:
    _expect(kind, name, value, list, "a list of rows")
    for i, row in enumerate(value):
        if not isinstance(row, (list, tuple)):
            raise ValueError(f"{kind}: {name}[{i}] must be a list of cell values, got {type(row).__name__}")
    return [list(r) for r in value]


def _parse_iso(kind: str, name: str, value: Any) -> dt.datetime | dt.date:
    """ISO date ("2026-03-01") -> date; ISO date-time, optionally with "Z" or an offset -> datetime."""
    _expect(kind, name, value, str, "an ISO date or date-time string")
    text = value.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return dt.date.fromisoformat(text)
        if text.endswith(("Z", "z")):  # fromisoformat accepts "Z" only from python 3.11 on
            text = text[:-1] + "+00:00"
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{kind}: param {name!r} is not an ISO date or date-time: {value!r}") from None


def _to_utc(value: dt.datetime) -> dt.datetime:
    """Naive date-times are taken as UTC."""
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _safe_relpath(kind: str, path: Any) -> str:
    """A path inside a generated tree (git): relative, normalised, never `..` nor inside `.git`."""
    _expect(kind, "path", path, str, "a string")
    norm = posixpath.normpath(path)
    if not path or path.startswith("/") or norm == ".." or norm.startswith("../") or norm == ".":
        raise ValueError(f"{kind}: path {path!r} must be relative and stay inside the repository")
    if norm.split("/")[0] == ".git":
        raise ValueError(f"{kind}: path {path!r} must not touch .git")
    return norm


def _write_bytes(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)


# --------------------------------------------------------------------------------------------- text formats


def gen_csv(params: dict[str, Any], dest: Path) -> None:
    """`header` (optional), `rows`, `delimiter` (default ","), `lineterminator` (default "\\n").

    None cells become empty cells; ragged rows are kept as they are (messy data is a feature).
    """
    _check_keys("csv", params, ["rows"], ["header", "delimiter", "lineterminator"])
    rows = _rows("csv", "rows", params["rows"])
    header = params.get("header")
    if header is not None:
        _expect("csv", "header", header, list, "a list of column names")
    delimiter = params.get("delimiter", ",")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ValueError(f"csv: param 'delimiter' must be a single character, got {delimiter!r}")
    terminator = params.get("lineterminator", "\n")
    if terminator not in ("\n", "\r\n"):
        raise ValueError(f"csv: param 'lineterminator' must be '\\n' or '\\r\\n', got {terminator!r}")
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=delimiter, lineterminator=terminator)
    if header is not None:
        writer.writerow(header)
    writer.writerows(rows)
    _write_bytes(dest, buf.getvalue().encode("utf-8"))


def gen_json(params: dict[str, Any], dest: Path) -> None:
    """`data` (any JSON value), `indent` (default 2; null for one line). Non-ASCII is written as is."""
    _check_keys("json", params, ["data"], ["indent"])
    indent = params.get("indent", 2)
    if indent is not None and (not isinstance(indent, int) or isinstance(indent, bool) or indent < 0):
        raise ValueError(f"json: param 'indent' must be a non-negative integer or null, got {indent!r}")
    text = json.dumps(params["data"], indent=indent, ensure_ascii=False)
    _write_bytes(dest, (text + "\n").encode("utf-8"))


def gen_yaml(params: dict[str, Any], dest: Path) -> None:
    """`data` (any YAML-safe value), dumped in the given key order."""
    _check_keys("yaml", params, ["data"], [])
    try:
        text = yaml.safe_dump(params["data"], sort_keys=False, allow_unicode=True)
    except yaml.YAMLError as e:
        raise ValueError(f"yaml: param 'data' cannot be dumped: {e}") from None
    _write_bytes(dest, text.encode("utf-8"))


# --------------------------------------------------------------------------------------------- xlsx


def gen_xlsx(params: dict[str, Any], dest: Path) -> None:
    """`sheets`: {sheet name: rows}, in order; `created` (ISO, default a fixed epoch). Byte-for-byte reproducible.

    openpyxl stamps the save time into docProps/core.xml and into every zip entry, so the workbook is written
    through its ExcelWriter with our own timestamps and the archive is then repacked with fixed entry dates.
    """
    from openpyxl import Workbook
    from openpyxl.writer.excel import ExcelWriter

    _check_keys("xlsx", params, ["sheets"], ["created"])
    sheets = _expect("xlsx", "sheets", params["sheets"], dict, "a mapping of sheet name to rows")
    if not sheets:
        raise ValueError("xlsx: param 'sheets' must name at least one sheet")
    stamp = FIXED_EPOCH
    if params.get("created") is not None:
        created = _parse_iso("xlsx", "created", params["created"])
        stamp = _to_utc(created if isinstance(created, dt.datetime) else dt.datetime.combine(created, dt.time()))

    wb = Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        try:
            ws = wb.create_sheet(title=str(name))
        except ValueError as e:
            raise ValueError(f"xlsx: bad sheet name {name!r}: {e}") from None
        for i, row in enumerate(_rows("xlsx", f"sheets[{name!r}]", rows)):
            try:
                ws.append(row)
            except (ValueError, TypeError) as e:
                raise ValueError(f"xlsx: sheet {name!r} row {i}: {e}") from None
    naive = stamp.replace(tzinfo=None)
    wb.properties.created = naive
    wb.properties.modified = naive
    wb.properties.creator = "clawgym"

    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
        ExcelWriter(wb, archive).write_data()
    out = io.BytesIO()
    date_time = (max(stamp.year, 1980), stamp.month, stamp.day, stamp.hour, stamp.minute, stamp.second)
    with zipfile.ZipFile(raw) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=date_time)
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = 0o644 << 16
            dst.writestr(fixed, src.read(info))
    _write_bytes(dest, out.getvalue())


# --------------------------------------------------------------------------------------------- ics

_EVENT_KEYS = {"uid", "summary", "start", "end", "location", "description", "attendees", "organizer", "status"}


def _ics_escape(text: str) -> str:
    """RFC 5545 TEXT escaping: backslash first, then `;`, `,` and newlines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,").replace("\n", "\\n")


def _ics_fold(line: str) -> str:
    """Fold a content line at 75 octets (continuations start with a space), never inside a UTF-8 sequence."""
    out: list[str] = []
    current, size, limit = "", 0, 75
    for ch in line:
        n = len(ch.encode("utf-8"))
        if size + n > limit:
            out.append(current)
            current, size, limit = " ", 1, 75
        current += ch
        size += n
    out.append(current)
    return "\r\n".join(out)


def _ics_time(value: dt.datetime | dt.date) -> tuple[str, str]:
    """-> (property parameters, value): all-day dates get VALUE=DATE, aware times are written in UTC."""
    if not isinstance(value, dt.datetime):
        return ";VALUE=DATE", value.strftime("%Y%m%d")
    if value.tzinfo is None:
        return "", value.strftime("%Y%m%dT%H%M%S")
    return "", _to_utc(value).strftime("%Y%m%dT%H%M%SZ")


def _ics_person(kind: str, prop: str, value: Any) -> str:
    """`x@y` or `Name <x@y>` -> `PROP;CN=Name:mailto:x@y`."""
    _expect(kind, prop.lower(), value, str, "an email address")
    name, addr = parseaddr(value)
    if not addr or "@" not in addr:
        raise ValueError(f"{kind}: {prop.lower()} {value!r} is not an email address")
    params = ""
    if name:
        cn = name.replace('"', "")
        params = f';CN="{cn}"' if any(c in cn for c in ",;:") else f";CN={cn}"
    return f"{prop}{params}:mailto:{addr}"


def gen_ics(params: dict[str, Any], dest: Path) -> None:
    """`events`: [{uid?, summary, start, end?, location?, description?, attendees?, organizer?, status?}],
    `calendar_name`, `prodid`. Writes an RFC 5545 VCALENDAR with CRLF line endings and folded lines.

    start/end: "2026-03-01T09:00:00" (floating local time), with "Z" or an offset (written as UTC), or
    "2026-03-01" (all-day). DTSTAMP is the event start in UTC, so the file does not depend on the clock.
    """
    _check_keys("ics", params, ["events"], ["calendar_name", "prodid"])
    events = _expect("ics", "events", params["events"], list, "a list of events")
    prodid = params.get("prodid", "-//clawgym//workspace generator//EN")
    _expect("ics", "prodid", prodid, str, "a string")
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", f"PRODID:{prodid}", "CALSCALE:GREGORIAN", "METHOD:PUBLISH"]
    if params.get("calendar_name") is not None:
        name = _expect("ics", "calendar_name", params["calendar_name"], str, "a string")
        lines.append(f"X-WR-CALNAME:{_ics_escape(name)}")
    for i, event in enumerate(events):
        where = f"events[{i}]"
        _expect("ics", where, event, dict, "an object")
        _check_keys(f"ics {where}", event, ["summary", "start"], _EVENT_KEYS - {"summary", "start"})
        start = _parse_iso("ics", f"{where}.start", event["start"])
        end = _parse_iso("ics", f"{where}.end", event["end"]) if event.get("end") is not None else None
        if end is not None:
            if isinstance(start, dt.datetime) != isinstance(end, dt.datetime):
                raise ValueError(f"ics: {where}: start and end must both be dates or both be date-times")
            if isinstance(start, dt.datetime) and isinstance(end, dt.datetime) and (start.tzinfo is None) != (end.tzinfo is None):
                raise ValueError(f"ics: {where}: start and end must both be floating or both have a time zone")
        summary = _expect("ics", f"{where}.summary", event["summary"], str, "a string")
        uid = event.get("uid") or f"{_digest(i, summary, event['start'])[:24]}@clawgym"
        if isinstance(start, dt.datetime):
            stamp = _to_utc(start)
        else:
            stamp = dt.datetime.combine(start, dt.time(), tzinfo=dt.timezone.utc)
        lines += ["BEGIN:VEVENT", f"UID:{_ics_escape(str(uid))}", f"DTSTAMP:{stamp.strftime('%Y%m%dT%H%M%SZ')}"]
        p, v = _ics_time(start)
        lines.append(f"DTSTART{p}:{v}")
        if end is not None:
            p, v = _ics_time(end)
            lines.append(f"DTEND{p}:{v}")
        lines.append(f"SUMMARY:{_ics_escape(summary)}")
        for key in ("location", "description", "status"):
            if event.get(key) is not None:
                text = _expect("ics", f"{where}.{key}", event[key], str, "a string")
                lines.append(f"{key.upper()}:{_ics_escape(text)}")
        if event.get("organizer") is not None:
            lines.append(_ics_person("ics", "ORGANIZER", event["organizer"]))
        attendees = event.get("attendees") or []
        _expect("ics", f"{where}.attendees", attendees, list, "a list of email addresses")
        lines += [_ics_person("ics", "ATTENDEE", a) for a in attendees]
        lines.append("END:VEVENT")
    lines.append("END:VCALENDAR")
    _write_bytes(dest, "".join(_ics_fold(line) + "\r\n" for line in lines).encode("utf-8"))


# --------------------------------------------------------------------------------------------- eml


def _addresses(kind: str, name: str, value: Any) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(a, str) and a.strip() for a in items):
        raise ValueError(f"{kind}: param {name!r} must be an address or a non-empty list of addresses")
    return items


def _email_date(value: Any) -> str:
    """An RFC 2822 date is kept; an ISO one is converted (naive = UTC)."""
    _expect("eml", "date", value, str, "an RFC 2822 or ISO date string")
    try:
        parsedate_to_datetime(value)
        return value
    except (TypeError, ValueError, IndexError):
        pass
    parsed = _parse_iso("eml", "date", value)
    if not isinstance(parsed, dt.datetime):
        parsed = dt.datetime.combine(parsed, dt.time())
    return format_datetime(_to_utc(parsed) if parsed.tzinfo is None else parsed)


def _attach(msg: EmailMessage, i: int, att: Any) -> None:
    where = f"attachments[{i}]"
    _expect("eml", where, att, dict, "an object")
    _check_keys(f"eml {where}", att, ["filename"], ["content", "content_b64", "content_type"])
    filename = _expect("eml", f"{where}.filename", att["filename"], str, "a string")
    if ("content" in att) == ("content_b64" in att):
        raise ValueError(f"eml: {where} needs exactly one of 'content' (text) or 'content_b64'")
    ctype = att.get("content_type") or mimetypes.guess_type(filename)[0]
    if ctype is None:
        ctype = "text/plain" if "content" in att else "application/octet-stream"
    if ctype.count("/") != 1:
        raise ValueError(f"eml: {where}.content_type must look like 'type/subtype', got {ctype!r}")
    maintype, subtype = ctype.split("/")
    if "content" in att:
        text = _expect("eml", f"{where}.content", att["content"], str, "a string")
        if maintype == "text":
            msg.add_attachment(text, subtype=subtype, filename=filename)
            return
        data = text.encode("utf-8")
    else:
        try:
            data = base64.b64decode(att["content_b64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise ValueError(f"eml: {where}.content_b64 is not valid base64") from None
    msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=filename)


def gen_eml(params: dict[str, Any], dest: Path) -> None:
    """`from`, `to`, `cc`, `subject`, `date`, `body`, `html`, `headers`, `attachments`, `message_id`.

    The Message-ID and the MIME boundaries are derived from the params (the email package would pick random
    ones), so the same params give the same bytes.
    """
    _check_keys(
        "eml", params, ["from", "to"],
        ["cc", "subject", "date", "body", "html", "headers", "attachments", "message_id"],
    )
    msg = EmailMessage(policy=policy.default)
    sender = _addresses("eml", "from", params["from"])
    try:
        msg["From"] = ", ".join(sender)
        msg["To"] = ", ".join(_addresses("eml", "to", params["to"]))
        if params.get("cc") is not None:
            msg["Cc"] = ", ".join(_addresses("eml", "cc", params["cc"]))
    except (ValueError, IndexError) as e:  # the header registry rejects malformed addresses
        raise ValueError(f"eml: bad address: {e}") from None
    msg["Subject"] = _expect("eml", "subject", params.get("subject", ""), str, "a string")
    if params.get("date") is not None:
        msg["Date"] = _email_date(params["date"])
    seed = _digest(params)
    message_id = params.get("message_id")
    if message_id is None:
        addr = msg["From"].addresses[0] if msg["From"].addresses else Address(addr_spec="x@clawgym.local")
        message_id = f"<{seed[:20]}@{addr.domain or 'clawgym.local'}>"
    msg["Message-ID"] = _expect("eml", "message_id", message_id, str, "a string")
    headers = _expect("eml", "headers", params.get("headers") or {}, dict, "a mapping of header to value")
    for key, value in headers.items():
        del msg[key]
        msg[key] = str(value)

    msg.set_content(_expect("eml", "body", params.get("body", ""), str, "a string"))
    if params.get("html") is not None:
        msg.add_alternative(_expect("eml", "html", params["html"], str, "a string"), subtype="html")
    attachments = _expect("eml", "attachments", params.get("attachments") or [], list, "a list")
    for i, att in enumerate(attachments):
        _attach(msg, i, att)
    for n, part in enumerate(msg.walk()):
        if part.is_multipart():
            part.set_boundary(f"==clawgym-{seed[24:40]}-{n}==")
    _write_bytes(dest, msg.as_bytes(policy=policy.default))


# --------------------------------------------------------------------------------------------- sqlite


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def gen_sqlite(params: dict[str, Any], dest: Path) -> None:
    """`tables`: {name: {columns: ["name" or "name TYPE ..."], rows}} and/or `sql` (run after the tables).

    A column entry with a space is used verbatim as a column definition (so constraints work); a bare name is
    quoted. Any existing file at `dest` is replaced.
    """
    _check_keys("sqlite", params, [], ["tables", "sql"])
    if params.get("tables") is None and params.get("sql") is None:
        raise ValueError("sqlite: needs param 'tables' or 'sql' (or both)")
    tables = _expect("sqlite", "tables", params.get("tables") or {}, dict, "a mapping of table name to spec")
    sql = _expect("sqlite", "sql", params.get("sql") or "", str, "an SQL script string")
    dest.parent.mkdir(parents=True, exist_ok=True)
    for stale in (dest, dest.with_name(dest.name + "-journal"), dest.with_name(dest.name + "-wal")):
        if stale.is_symlink() or stale.exists():
            stale.unlink()
    try:
        with closing(sqlite3.connect(dest)) as db:
            for name, spec in tables.items():
                where = f"tables[{name!r}]"
                _expect("sqlite", where, spec, dict, "an object with columns and rows")
                _check_keys(f"sqlite {where}", spec, ["columns"], ["rows"])
                columns = _expect("sqlite", f"{where}.columns", spec["columns"], list, "a list of column names")
                if not columns or not all(isinstance(c, str) and c.strip() for c in columns):
                    raise ValueError(f"sqlite: {where}.columns must be a non-empty list of strings")
                defs = [c.strip() if " " in c.strip() else _quote_ident(c) for c in columns]
                db.execute(f"CREATE TABLE {_quote_ident(str(name))} ({', '.join(defs)})")
                rows = _rows("sqlite", f"{where}.rows", spec.get("rows") or [])
                for i, row in enumerate(rows):
                    if len(row) != len(columns):
                        raise ValueError(f"sqlite: {where}.rows[{i}] has {len(row)} values for {len(columns)} columns")
                marks = ", ".join("?" * len(columns))
                db.executemany(f"INSERT INTO {_quote_ident(str(name))} VALUES ({marks})", rows)
            db.commit()
            if sql:
                db.executescript(sql)
            db.commit()
    except sqlite3.Error as e:
        dest.unlink(missing_ok=True)
        raise ValueError(f"sqlite: {e}") from None
    except ValueError:
        dest.unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------------------------- git

DEFAULT_GIT_AUTHOR = "Clawgym <clawgym@example.com>"


def _git_person(value: Any, where: str) -> tuple[str, str]:
    _expect("git", where, value, str, "'Name <email>'")
    m = re.fullmatch(r"\s*(.*?)\s*<([^<>]*)>\s*", value)
    if not m or not m.group(1) or not m.group(2):
        raise ValueError(f"git: {where} must look like 'Name <email>', got {value!r}")
    return m.group(1), m.group(2)


def _git_env(home: str) -> dict[str, str]:
    """The caller's environment minus every GIT_* variable, and no global or system config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        HOME=home, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
        LC_ALL="C", TZ="UTC",
    )
    return env


def _git(args: list[str], cwd: Path, env: dict[str, str]) -> None:
    git = shutil.which("git")
    if git is None:
        raise ValueError("git: the git command is not installed")
    proc = subprocess.run([git, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ValueError(f"git {args[0]} failed: {(proc.stderr or proc.stdout).strip()}")


def _apply_tree(root: Path, files: Any, where: str) -> None:
    _expect("git", where, files, dict, "a mapping of path to content (or null to delete)")
    for raw_path, content in files.items():
        target = root / _safe_relpath("git", raw_path)
        if content is None:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
            continue
        _expect("git", f"{where}[{raw_path!r}]", content, str, "a string or null")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode("utf-8"))


def gen_git(params: dict[str, Any], dest: Path) -> None:
    """A repository at `dest` built from `commits`: [{message, files: {path: text | null}, author?, date?}].

    `branch` (default "main"); `uncommitted`: {path: text | null} applied after the last commit. A commit
    without a date is one hour after the previous one (the first at a fixed epoch); one without an author keeps
    the previous author (the first is DEFAULT_GIT_AUTHOR). The committer equals the author, so the same params
    always give the same hashes.
    """
    _check_keys("git", params, ["commits"], ["branch", "uncommitted"])
    commits = _expect("git", "commits", params["commits"], list, "a list of commits")
    branch = _expect("git", "branch", params.get("branch", "main"), str, "a branch name")
    if not re.fullmatch(r"[A-Za-z0-9._/-]+", branch) or branch.startswith(("-", "/")) or ".." in branch:
        raise ValueError(f"git: bad branch name {branch!r}")
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise ValueError(f"git: {dest} already exists and is not an empty directory")
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="clawgym-git-home-") as home:
        env = _git_env(home)
        _git(["-c", f"init.defaultBranch={branch}", "init", "-q", "--template=", "-b", branch], dest, env)
        when, author = FIXED_EPOCH, DEFAULT_GIT_AUTHOR
        for i, commit in enumerate(commits):
            where = f"commits[{i}]"
            _expect("git", where, commit, dict, "an object")
            _check_keys(f"git {where}", commit, ["message"], ["files", "author", "date"])
            message = _expect("git", f"{where}.message", commit["message"], str, "a string")
            if not message.strip():
                raise ValueError(f"git: {where}.message must not be empty")
            author = commit.get("author") or author
            name, email = _git_person(author, f"{where}.author")
            if commit.get("date") is not None:
                parsed = _parse_iso("git", f"{where}.date", commit["date"])
                if not isinstance(parsed, dt.datetime):
                    parsed = dt.datetime.combine(parsed, dt.time())
                when = _to_utc(parsed)
            elif i > 0:
                when = when + dt.timedelta(hours=1)
            stamp = f"{int(when.timestamp())} +0000"
            _apply_tree(dest, commit.get("files") or {}, f"{where}.files")
            commit_env = dict(
                env, GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_AUTHOR_DATE=stamp,
                GIT_COMMITTER_NAME=name, GIT_COMMITTER_EMAIL=email, GIT_COMMITTER_DATE=stamp,
            )
            _git(["add", "-A"], dest, commit_env)
            _git(["commit", "-q", "--allow-empty", "--no-verify", "--no-gpg-sign", "-m", message], dest, commit_env)
        if params.get("uncommitted") is not None:
            _apply_tree(dest, params["uncommitted"], "uncommitted")


# --------------------------------------------------------------------------------------------- registry

GENERATORS: dict[str, Generator] = {
    "csv": gen_csv,
    "json": gen_json,
    "yaml": gen_yaml,
    "xlsx": gen_xlsx,
    "ics": gen_ics,
    "eml": gen_eml,
    "sqlite": gen_sqlite,
    "git": gen_git,
}


def generate(kind: str, params: dict[str, Any], dest: Path) -> None:
    """Write the file (for `git`, the repository directory) of generator `kind` at `dest`.

    Raises ValueError for an unknown kind or bad params.
    """
    gen = GENERATORS.get(kind)
    if gen is None:
        raise ValueError(f"unknown generator kind {kind!r} (known: {', '.join(GENERATORS)})")
    if not isinstance(params, dict):
        raise ValueError(f"{kind}: params must be an object, got {type(params).__name__}")
    gen(params, Path(dest))
