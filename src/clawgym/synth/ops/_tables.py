"""Small table helpers the `data` operations share: numbers written as text, column roles and kinds, how a
step names the previous step's output, digests for fingerprints."""

from __future__ import annotations

import hashlib
import json
import re

from clawgym.synth.ops.base import TABLE, Artifact

_PLAIN_NUM = re.compile(r"^-?(0|[1-9]\d*)(\.\d+)?$")
_LOOSE_NUM = re.compile(r"^[-+]?[$€£]?\s*[-+]?\d[\d,]*(\.\d+)?$")



def num(value) -> float | None:
    """A number written as text ("1,234.50", "$12", " 7 "), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    s = str(value).strip()
    if not _LOOSE_NUM.match(s):
        return None
    try:
        return float(s.replace(",", "").replace("$", "").replace("€", "").replace("£", "").replace(" ", ""))
    except ValueError:
        return None


def is_plain_number(value: str) -> bool:
    return bool(_PLAIN_NUM.match(str(value).strip()))


def money(v: float) -> str:
    return f"{v:.2f}"


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def table_of(source: Artifact | None) -> tuple[list[str], list[list[str]]] | None:
    """(header, rows as strings, padded) of a TABLE artifact, or None when it is not a usable table."""
    if source is None or source.kind != TABLE or not isinstance(source.data, dict):
        return None
    header = source.data.get("header")
    rows = source.data.get("rows")
    if not isinstance(header, list) or not header or not isinstance(rows, list) or not rows:
        return None
    header = [str(h) for h in header]
    if len({h.casefold() for h in header}) != len(header) or any(not h.strip() for h in header):
        return None
    out = []
    for r in rows:
        if not isinstance(r, (list, tuple)):
            return None
        cells = ["" if c is None else str(c) for c in r][: len(header)]
        out.append(cells + [""] * (len(header) - len(cells)))
    return header, out


def role_column(source: Artifact, header: list[str], role: str) -> str | None:
    col = (source.roles or {}).get(role)
    return col if col in header else None


_AMOUNT = re.compile(r"^-?[$€£]?\s*(0|[1-9]\d{0,2}(,\d{3})+|[1-9]\d{0,9})(\.\d+)?$")
_NOT_QUANTITY = re.compile(r"(^|_|\b)(id|phone|tel|mobile|fax|zip|postcode|postal|code|sku|year|no|number|ref|iban)"
                           r"($|_|\b)", re.I)


def is_quantity(value: str) -> bool:
    """A cell that is an amount or a count (not a phone number, an id with leading zeros, a +-prefixed code)."""
    return bool(_AMOUNT.match(str(value).strip()))


def numeric_column(header: list[str], rows: list[list[str]], prefer: str | None = None) -> str | None:
    """A column of amounts or counts: non-blank cells all quantities (most of them present), `prefer` first.
    Columns named like identifiers (id, phone, zip, sku, year...) never count."""
    order = ([prefer] if prefer in header else []) + [h for h in header if h != prefer]
    for h in order:
        if _NOT_QUANTITY.search(h):
            continue
        i = header.index(h)
        vals = [r[i] for r in rows if r[i].strip()]
        if len(vals) >= max(1, len(rows) // 2) and all(is_quantity(v) for v in vals):
            return h
    return None


def group_column(header: list[str], rows: list[list[str]], prefer: str | None = None,
                 exclude: tuple[str, ...] = ()) -> str | None:
    """A text column with repeating values (2..n-1 distinct, non-numeric), `prefer` first."""
    order = ([prefer] if prefer in header else []) + [h for h in header if h != prefer]
    for h in order:
        if h in exclude:
            continue
        i = header.index(h)
        vals = [r[i].strip() for r in rows if r[i].strip()]
        distinct = {v.casefold() for v in vals}
        if vals and 2 <= len(distinct) < len(vals) and not any(num(v) is not None for v in vals) \
                and len(vals) == len(rows):
            return h
    return None


def refer(source: Artifact, rng=None) -> str:
    """How a fragment names the previous step's output: its description, with the path in backticks. With `rng`,
    one of several noun phrases around the same two parts ("`p` (the x)", "the x in `p`", ...)."""
    desc = source.description.strip() or "the previous result"
    path = f"`{source.path}`"
    if f"({source.path})" in desc:
        words = desc.replace(f"({source.path})", "").strip()
    elif source.path in desc:
        return desc
    else:
        words = desc
    form = rng.choice(["{w} ({p})", "{w} ({p})", "{p} ({w})", "{w} in {p}"]) if rng \
        else "{w} ({p})"
    return form.format(w=words, p=path)


def unique_column(header: list[str], rows: list[list[str]], prefer: str | None = None,
                  exclude: tuple[str, ...] = ()) -> str | None:
    """A text column whose values are all present and all different (a key), `prefer` first."""
    order = ([prefer] if prefer in header else []) + [h for h in header if h != prefer]
    for h in order:
        if h in exclude:
            continue
        i = header.index(h)
        vals = [r[i].strip() for r in rows]
        if all(vals) and len({v.casefold() for v in vals}) == len(vals) and not all(num(v) is not None for v in vals):
            return h
    return None


def folder_column(header: list[str], rows: list[list[str]]) -> str | None:
    """A column of file paths whose parent folders repeat (e.g. the new_path of a moves log), last first."""
    for h in reversed(header):
        i = header.index(h)
        vals = [r[i].strip() for r in rows]
        if vals and all("/" in v for v in vals):
            parents = [v.rsplit("/", 1)[0] for v in vals]
            if 2 <= len(set(parents)) < len(parents):
                return h
    return None
