"""How a `checks` code check is written shorter on disk and read back whole (see docs/verification.md).

Writing (:func:`encode_checks`, :func:`encode_workspace_refs`): an argument value several checks share is written
once (`values`, named in each check's `use`); a check whose rows are another top-level check's rows cut to fewer
columns names it (`rows_from`); a gate on every other check is `{"refs": "others"}`; a file of the task's own
workspace is named instead of copied (`workspace_digests`, `{"workspace_text": PATH}`). Reading
(:func:`decode_checks`, :func:`decode_workspace_refs`) rebuilds the full form before validation, from the record
alone: the workspace texts come from the task record, never from a sandbox an agent touched, so nothing an agent
does changes what a check compares against. Every expansion is counted against one budget, so a hostile record
cannot grow in memory far beyond its size on disk.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any


def quoted(value: str, limit: int = 80) -> str:
    """`value` quoted for an error message, cut to `limit` characters (a hostile value may be megabytes)."""
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}... ({len(value)} characters)"

MAX_EXPANDED_VALUE_BYTES = 16 * 1024 * 1024
"""Most bytes reading a code check's written form may add to it: shared values (once per use), rows taken with
`rows_from` and the refs of `{"refs": "others"}`, all counted together. A hostile task naming one large value
from thousands of checks, or thousands of checks each naming all the others, would otherwise grow in memory a
thousand times over its size on disk."""

SHARED_VALUE_MIN_BYTES = 24
"""An argument value shorter than this (as compact JSON) is written in place even when checks repeat it: the
name and the `use` entry would cost about as much."""


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json_size(value: Any) -> int:
    return len(_compact_json(value).encode("utf-8", "surrogatepass"))


class _Budget:
    """The bytes reading one code check's written form has added so far (:data:`MAX_EXPANDED_VALUE_BYTES`)."""

    def __init__(self) -> None:
        self.added = 0

    def spend(self, n: int, where: str, what: str) -> None:
        self.added += n
        if self.added > MAX_EXPANDED_VALUE_BYTES:
            raise ValueError(f"{where}: {what} add over {MAX_EXPANDED_VALUE_BYTES // (1024 * 1024)} MiB of "
                             "arguments")


def _where(call: dict[str, Any], where: str) -> str:
    return f"check {call['name']!r}" if isinstance(call.get("name"), str) else where


def _with_parts(call: dict[str, Any], out: dict[str, Any], parts: list[Any]) -> dict[str, Any]:
    if out is call:
        out = dict(call)
    out["parts"] = parts
    return out


def hoist_shared_values(checks: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """The check list (JSON data) with an argument value that two or more checks (or parts) give alike written
    once, in the code check's `values` under a name (`v0`, `v1`, ... in the order first met), and each check
    using it naming it in `use` ({argument: value name}) instead of carrying it. Reading expands it back
    (:func:`expand_shared_values`): one step of :func:`encode_checks`."""
    counts: dict[str, int] = {}

    def count(call: Any) -> None:
        if isinstance(call, dict):
            for value in (call.get("args") or {}).values():
                text = _compact_json(value)
                if len(text.encode("utf-8")) >= SHARED_VALUE_MIN_BYTES:
                    counts[text] = counts.get(text, 0) + 1
            for part in call.get("parts") or ():
                count(part)

    for call in checks:
        count(call)
    names: dict[str, str] = {}
    values: dict[str, Any] = {}

    def rewrite(call: Any) -> Any:
        if not isinstance(call, dict):
            return call
        out = dict(call)
        args, use = {}, {}
        for arg, value in (call.get("args") or {}).items():
            text = _compact_json(value)
            if counts.get(text, 0) > 1:
                if text not in names:
                    names[text] = f"v{len(names)}"
                    values[names[text]] = value
                use[arg] = names[text]
            else:
                args[arg] = value
        if "args" in out:
            if args:
                out["args"] = args
            else:
                del out["args"]
        if use:
            out["use"] = use
        if call.get("parts"):
            out["parts"] = [rewrite(p) for p in call["parts"]]
        return out

    return [rewrite(c) for c in checks], values


def expand_shared_values(checks: Any, values: Any, budget: _Budget | None = None) -> Any:
    """The check list of a written `checks` code check with each `use` ({argument: value name}) replaced by
    the named value of `values` (see :func:`hoist_shared_values`); ValueError for a name `values` lacks, an
    argument given both ways, or a value no check uses."""
    if not isinstance(values, dict):
        raise ValueError("`values` must be an object of named argument values")
    if not isinstance(checks, list):
        return checks
    budget = budget or _Budget()
    used: set[str] = set()
    sizes = {name: _json_size(v) for name, v in values.items()}

    def expand(call: Any, where: str) -> Any:
        if not isinstance(call, dict):
            return call
        out = dict(call)
        where = _where(call, where)
        if "use" in out:
            use = out.pop("use")
            if not isinstance(use, dict):
                raise ValueError(f"{where}: `use` must be an object of argument -> value name")
            args = dict(out.get("args") or {})
            for arg, name in use.items():
                if not isinstance(name, str) or name not in values:
                    raise ValueError(f"{where}: `use` names {quoted(str(name))} for argument {quoted(str(arg))}, "
                                     "which `values` does not hold")
                if arg in args:
                    raise ValueError(f"{where}: argument {quoted(str(arg))} is given in `args` and in `use`")
                budget.spend(sizes[name], where, "the checks' uses of `values`")
                args[arg] = copy.deepcopy(values[name])
                used.add(name)
            out["args"] = args
        if isinstance(out.get("parts"), list):
            out["parts"] = [expand(p, where) for p in out["parts"]]
        return out

    expanded = [expand(c, f"check #{i}") for i, c in enumerate(checks)]
    unused = sorted(set(values) - used)
    if unused:
        raise ValueError(f"`values` holds {quoted(unused[0])}, which no check uses")
    return expanded


def _table(args: Any) -> tuple[list[str], list[list[Any]]] | None:
    """(header, rows) of a check's arguments that can lend their rows: a header of distinct column names and
    rows each as long as it; None otherwise."""
    if not isinstance(args, dict):
        return None
    header, rows = args.get("header"), args.get("rows")
    if (isinstance(header, list) and all(isinstance(h, str) for h in header) and len(set(header)) == len(header)
            and isinstance(rows, list) and all(isinstance(r, list) and len(r) == len(header) for r in rows)):
        return header, rows
    return None


def _with_rows(args: dict[str, Any], rows: list[list[Any]]) -> dict[str, Any]:
    """`args` with `rows` put back after `header` (where checks give it)."""
    out: dict[str, Any] = {}
    for key, value in args.items():
        out[key] = value
        if key == "header":
            out["rows"] = rows
    return out


def take_rows_from(checks: list[Any]) -> list[Any]:
    """The check list (JSON data) with a check whose `args.rows` are another top-level check's rows cut to its
    own `args.header` columns (a ranking's two columns of a summary table) written with `rows_from` (that
    check's name) instead of the rows. A check that lends its rows keeps them, so a lender never borrows.
    Reading takes them back (:func:`expand_rows_from`): one step of :func:`encode_checks`."""
    tables = {c["name"]: t for c in checks if isinstance(c, dict) and isinstance(c.get("name"), str)
              and (t := _table(c.get("args"))) is not None}
    lenders: set[str] = set()
    borrowers: set[str] = set()

    def rewrite(call: Any, top: bool) -> Any:
        if not isinstance(call, dict):
            return call
        out = call
        args, own = call.get("args"), call.get("name") if top else None
        if (isinstance(args, dict) and "rows" in args and isinstance(args.get("header"), list)
                and all(isinstance(h, str) for h in args["header"]) and own not in lenders):
            want = _compact_json(args["rows"])
            for name, (header, rows) in tables.items():
                if name == own or name in borrowers or not set(args["header"]) <= set(header):
                    continue
                cols = [header.index(h) for h in args["header"]]
                if (_compact_json([[r[i] for i in cols] for r in rows]) == want
                        and len(want.encode("utf-8")) > _json_size(name) + len(',"rows_from":')):
                    out = {**call, "args": {k: v for k, v in args.items() if k != "rows"}, "rows_from": name}
                    lenders.add(name)
                    if own is not None:
                        borrowers.add(own)
                    break
        if isinstance(call.get("parts"), list):
            out = _with_parts(call, out, [rewrite(p, False) for p in call["parts"]])
        return out

    return [rewrite(c, True) for c in checks]


def expand_rows_from(checks: list[Any], budget: _Budget) -> list[Any]:
    """The check list with each `rows_from` (see :func:`take_rows_from`) replaced by the rows it names; ValueError
    for a name no top-level check has, a lender that borrows itself or holds no table, a column the lender
    lacks, rows given both ways, or rows adding over :data:`MAX_EXPANDED_VALUE_BYTES`."""
    tops = {c["name"]: c for c in checks if isinstance(c, dict) and isinstance(c.get("name"), str)}
    column_bytes: dict[str, list[int]] = {}
    tables: dict[str, tuple[list[str], list[list[Any]]] | None] = {}

    def expand(call: Any, where: str) -> Any:
        if not isinstance(call, dict):
            return call
        where = _where(call, where)
        out = call
        if "rows_from" in call:
            out = dict(call)
            name = out.pop("rows_from")
            lender = tops.get(name) if isinstance(name, str) else None
            if lender is None:
                raise ValueError(f"{where}: `rows_from` names {quoted(str(name))}, which is no check of this task")
            if name not in tables:  # checked once per lender, not once per borrower
                tables[name] = _table(lender.get("args")) if "rows_from" not in lender else None
            table = tables[name]
            if table is None:
                raise ValueError(f"{where}: `rows_from` names {name!r}, which holds no rows of its own under a "
                                 "header of distinct columns")
            args = out.get("args")
            if not isinstance(args, dict) or not isinstance(args.get("header"), list):
                raise ValueError(f"{where}: a check with `rows_from` needs `args.header`, the columns it takes")
            if "rows" in args:
                raise ValueError(f"{where}: `rows` is given in `args` and by `rows_from`")
            header, rows = table
            cols = []
            for h in args["header"]:
                if not isinstance(h, str) or h not in header:
                    raise ValueError(f"{where}: column {quoted(str(h))} is not in the header of {name!r}")
                cols.append(header.index(h))
            if name not in column_bytes:  # each cell with its comma, each row with its brackets
                column_bytes[name] = [3 * len(rows) + 2] + [sum(_json_size(r[i]) + 1 for r in rows)
                                                             for i in range(len(header))]
            sizes = column_bytes[name]
            budget.spend(sizes[0] + sum(sizes[i + 1] for i in cols), where, "the rows taken with `rows_from`")
            out["args"] = _with_rows(args, copy.deepcopy([[r[i] for i in cols] for r in rows]))
        if isinstance(call.get("parts"), list):
            out = _with_parts(call, out, [expand(p, where) for p in call["parts"]])
        return out

    return [expand(c, f"check #{i}") for i, c in enumerate(checks)]


_OTHERS = "others"


def _is_ref(part: Any) -> bool:
    return isinstance(part, dict) and set(part) == {"ref"} and isinstance(part["ref"], str)


def refer_to_others(checks: list[Any]) -> list[Any]:
    """The check list (JSON data) with a run of parts naming every other top-level check, in the task's order (a
    gate on all the task's checks: the distractors'), written as one part `{"refs": "others"}`, and
    `"except": [names]` for those the run leaves out. Reading expands it back (:func:`expand_others`): one step
    of :func:`encode_checks`."""
    names = [c.get("name") for c in checks if isinstance(c, dict)]

    def shorten(parts: list[Any], own: Any) -> list[Any]:
        others = [n for n in names if n != own]
        out: list[Any] = []
        i = 0
        while i < len(parts):
            j = i
            while j < len(parts) and _is_ref(parts[j]):
                j += 1
            run = [p["ref"] for p in parts[i:j]]
            if len(run) >= 2 and [n for n in others if n in set(run)] == run:
                left_out = [n for n in others if n not in set(run)]
                part = {"refs": _OTHERS, **({"except": left_out} if left_out else {})}
                if _json_size(part) < _json_size(parts[i:j]) - 2:
                    out.append(part)
                    i = j
                    continue
            out.extend(parts[i:max(j, i + 1)])
            i = max(j, i + 1)
        return out

    def rewrite(call: Any, own: Any) -> Any:
        if not isinstance(call, dict) or not isinstance(call.get("parts"), list):
            return call
        return _with_parts(call, call, [rewrite(p, own) for p in shorten(call["parts"], own)])

    return [rewrite(c, c.get("name") if isinstance(c, dict) else None) for c in checks]


def expand_others(checks: list[Any], budget: _Budget) -> list[Any]:
    """The check list with each part `{"refs": "others"}` (see :func:`refer_to_others`) replaced by one ref for
    each other top-level check, in the task's order, but those of its `except`; ValueError for another form, an
    `except` naming no other check, one naming them all, or refs adding over :data:`MAX_EXPANDED_VALUE_BYTES`."""
    names = [c["name"] for c in checks if isinstance(c, dict) and isinstance(c.get("name"), str)]
    ref_bytes = {n: _json_size({"ref": n}) + 1 for n in names}
    total = sum(ref_bytes.values())

    def expand_part(part: dict[str, Any], own: Any, where: str) -> list[Any]:
        if set(part) - {"refs", "except"} or part["refs"] != _OTHERS:
            raise ValueError(f"{where}: a part with `refs` is {{\"refs\": \"others\"}}, with at most `except`")
        left_out = part.get("except", [])
        if not isinstance(left_out, list) or not all(isinstance(n, str) for n in left_out):
            raise ValueError(f"{where}: `except` must be a list of check names")
        skip = set(left_out) | {own}
        for n in left_out:
            if n not in ref_bytes or n == own:
                raise ValueError(f"{where}: `except` names {quoted(n)}, which is no other check of this task")
        size = total - sum(ref_bytes[n] for n in skip if n in ref_bytes)
        if size <= 0:
            raise ValueError(f"{where}: {{\"refs\": \"others\"}} leaves out every other check")
        budget.spend(size, where, "the refs of {\"refs\": \"others\"}")
        return [{"ref": n} for n in names if n not in skip]

    def expand(call: Any, own: Any, where: str) -> Any:
        if not isinstance(call, dict) or not isinstance(call.get("parts"), list):
            return call
        where = _where(call, where)
        parts: list[Any] = []
        for p in call["parts"]:
            if isinstance(p, dict) and "refs" in p:
                parts.extend(expand_part(p, own, where))
            else:
                parts.append(expand(p, own, where))
        return _with_parts(call, call, parts)

    return [expand(c, c.get("name") if isinstance(c, dict) else None, f"check #{i}") for i, c in enumerate(checks)]


def encode_checks(checks: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """The written form of a `checks` code check's check list (JSON data, as the checks dump): (checks, values).
    An encoding only: :func:`decode_checks` reads it back into the same checks, so the checks in memory, and
    what graders get, are those of the full form. In order: rows that are another check's rows cut to fewer
    columns name it (`rows_from`, :func:`take_rows_from`); a run of parts naming all the other checks is
    `{"refs": "others"}` (:func:`refer_to_others`); and argument values given alike are written once
    (`values` + `use`, :func:`hoist_shared_values`)."""
    return hoist_shared_values(refer_to_others(take_rows_from(checks)))


_NO_VALUES: Any = object()
"""`values` of a code check that has none (absent, which is not `"values": null`)."""


def decode_checks(checks: Any, values: Any = _NO_VALUES) -> Any:
    """The check list of a written `checks` code check (see :func:`encode_checks`) in its full form; a list
    without the encodings (every record written before them) comes back as it is. `values` is left out when the
    code check has none. ValueError for a form that names what is not there, gives a value both ways, or adds
    over :data:`MAX_EXPANDED_VALUE_BYTES` of arguments."""
    if not isinstance(checks, list):
        if values is not _NO_VALUES:
            expand_shared_values(checks, values)
        return checks
    budget = _Budget()
    if values is not _NO_VALUES:
        checks = expand_shared_values(checks, values, budget)
    return expand_others(expand_rows_from(checks, budget), budget)


# what a code check takes from the task's own workspace (the task record's, never the sandbox's)

WORKSPACE_TEXT = "workspace_text"
"""Key of the one-key object `{"workspace_text": PATH}` that stands for the text of the workspace file PATH in the
arguments of a code check written with `"workspace_texts": true` (:func:`encode_workspace_refs`)."""


def _docs_norm(text: str) -> str:
    """The normalisation docs_digests_equal compares (check library v3, `_docs_norm` of checklib_docs.py): the
    digest `workspace_digests` stands for. Kept here because core is below the check library; a digest is only
    written this way when this gives exactly the digest the check holds, so the two cannot disagree silently
    (tests/test_checks_workspace.py compares them)."""
    text = str(text).replace("**", "").replace("__", "").replace("`", "")
    return re.sub(r"\s+", " ", text).strip().casefold()


def workspace_digest(text: str) -> str:
    """What docs_digests_equal compares a file with: the sha256 of its text as docs_texts_equal normalises it."""
    return hashlib.sha256(_docs_norm(text).encode("utf-8", "surrogatepass")).hexdigest()


def _workspace_texts(data: dict[str, Any]) -> dict[str, str]:
    """{path: text} of the written task's workspace files given as inline text, each path given once."""
    files = (data.get("workspace") or {}).get("files") if isinstance(data.get("workspace"), dict) else None
    texts: dict[str, str] = {}
    twice: set[str] = set()
    for f in files if isinstance(files, list) else []:
        if isinstance(f, dict) and isinstance(f.get("path"), str):
            if f["path"] in texts or f["path"] in twice:
                twice.add(f["path"])
                texts.pop(f["path"], None)
            elif isinstance(f.get("content"), str):
                texts[f["path"]] = f["content"]
    return texts


def _code_of(data: Any) -> dict[str, Any] | None:
    verifier = data.get("verifier") if isinstance(data, dict) else None
    code = verifier.get("code") if isinstance(verifier, dict) else None
    return code if isinstance(code, dict) and isinstance(code.get("checks"), list) else None


def _has_marker(value: Any) -> bool:
    if isinstance(value, dict):
        return set(value) == {WORKSPACE_TEXT} or any(_has_marker(v) for v in value.values())
    return isinstance(value, list) and any(_has_marker(v) for v in value)


def encode_workspace_refs(data: dict[str, Any]) -> dict[str, Any]:
    """The written task `data` (JSON, its code check already in its written form, :func:`encode_checks`) with
    what its checks copy from its own workspace named instead: a docs_digests_equal whose `digests` are those
    of workspace files gives `workspace_digests` (the paths), and an argument string that is a workspace file's
    text (a moved file's content, a config's original) is `{"workspace_text": PATH}`, with `"workspace_texts":
    true` on the code check. Reading takes them from the task record's workspace (:func:`decode_workspace_refs`),
    which the agent cannot change. A task whose arguments hold such an object already is left as it is."""
    code = _code_of(data)
    texts = _workspace_texts(data)
    if code is None or not texts:
        return data
    by_text: dict[str, str] = {}
    for path, text in texts.items():
        by_text.setdefault(text, path)
    markers = not _has_marker([code["checks"], code.get("values")])
    used = False

    def value(v: Any) -> Any:
        nonlocal used
        if isinstance(v, str):
            path = by_text.get(v)
            if path is not None and _json_size(v) > _json_size({WORKSPACE_TEXT: path}):
                used = True
                return {WORKSPACE_TEXT: path}
            return v
        if isinstance(v, list):
            return [value(x) for x in v]
        if isinstance(v, dict):
            return {k: value(x) for k, x in v.items()}
        return v

    def call(c: Any) -> Any:
        if not isinstance(c, dict):
            return c
        out = dict(c)
        digests = (c.get("args") or {}).get("digests") if isinstance(c.get("args"), dict) else None
        if (c.get("fn") == "docs_digests_equal" and isinstance(digests, dict) and digests
                and all(p in texts and workspace_digest(texts[p]) == d for p, d in digests.items())):
            out["args"] = {k: v for k, v in c["args"].items() if k != "digests"}
            if not out["args"]:
                del out["args"]
            out["workspace_digests"] = list(digests)
        if markers and isinstance(out.get("args"), dict):
            out["args"] = value(out["args"])
        if isinstance(c.get("parts"), list):
            out["parts"] = [call(p) for p in c["parts"]]
        return out

    code = {**code, "checks": [call(c) for c in code["checks"]]}
    if markers and isinstance(code.get("values"), dict):
        code["values"] = value(code["values"])
    if used:
        code["workspace_texts"] = True
    return {**data, "verifier": {**data["verifier"], "code": code}}


class _WorkspaceRefs:
    """Reads what a written code check names of its task's workspace (:func:`decode_workspace_refs`)."""

    def __init__(self, texts: dict[str, str], active: bool) -> None:
        self.texts, self.active = texts, active
        self.digests: dict[str, str] = {}
        self.budget = _Budget()
        self.found = False

    def text(self, path: Any, where: str) -> str:
        if not isinstance(path, str) or path not in self.texts:
            raise ValueError(f"{where}: {quoted(str(path))} is no file of the task's workspace given as inline text "
                             "(once)")
        return self.texts[path]

    def value(self, v: Any, where: str) -> Any:
        if isinstance(v, dict):
            if set(v) == {WORKSPACE_TEXT}:
                t = self.text(v[WORKSPACE_TEXT], where)
                self.budget.spend(_json_size(t), where, "the workspace texts named")
                return t
            return {k: self.value(x, where) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x, where) for x in v]
        return v

    def digests_of(self, out: dict[str, Any], where: str) -> dict[str, Any]:
        paths = out.pop("workspace_digests")
        if not isinstance(paths, list) or not paths:
            raise ValueError(f"{where}: `workspace_digests` must be a list of workspace paths")
        args = out.get("args", {})
        if not isinstance(args, dict):
            raise ValueError(f"{where}: `args` must be an object")
        if "digests" in args or "digests" in (out.get("use") or {}):
            raise ValueError(f"{where}: `digests` is given in `args` and by `workspace_digests`")
        got = {}
        for p in paths:
            if p not in self.digests:  # each file hashed once, however often it is named
                self.digests[p] = workspace_digest(self.text(p, where))
            self.budget.spend(_json_size(p) + 68, where, "the workspace digests named")
            got[p] = self.digests[p]
        return {**args, "digests": got}

    def call(self, c: Any, where: str) -> Any:
        if not isinstance(c, dict):
            return c
        where = _where(c, where)
        out = dict(c)
        if "workspace_digests" in out:
            self.found = True
            out["args"] = self.digests_of(out, where)
        if self.active and isinstance(out.get("args"), dict):
            out["args"] = self.value(out["args"], where)
        if isinstance(c.get("parts"), list):
            out["parts"] = [self.call(p, where) for p in c["parts"]]
        return out


def decode_workspace_refs(data: Any) -> Any:
    """The task `data` as read with its code check's `workspace_digests` and `{"workspace_text": PATH}` (see
    :func:`encode_workspace_refs`) replaced by the digests and texts of the task record's own workspace files;
    ValueError for a path the workspace gives no inline text at (or gives twice), a `workspace_digests` beside
    `args.digests`, or texts adding over :data:`MAX_EXPANDED_VALUE_BYTES`. Data without them comes back as it is."""
    code = _code_of(data)
    if code is None:
        return data
    active = code.get("workspace_texts", False)
    if active not in (True, False):
        raise ValueError("`workspace_texts` must be true or left out")
    refs = _WorkspaceRefs(_workspace_texts(data), active)
    checks = [refs.call(c, f"check #{i}") for i, c in enumerate(code["checks"])]
    if not refs.found and "workspace_texts" not in code:
        return data
    code = {k: v for k, v in code.items() if k != "workspace_texts"}
    code["checks"] = checks
    if active and isinstance(code.get("values"), dict):
        code["values"] = refs.value(code["values"], "`values`")
    return {**data, "verifier": {**data["verifier"], "code": code}}
