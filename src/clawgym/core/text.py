"""Text that came from bytes nobody here chose, made safe to record.

A file name that is not UTF-8 (`touch "$(printf 'x\\377y')"`) reaches Python as a str holding a lone surrogate
(U+DC80..U+DCFF, `os.fsdecode`'s surrogateescape), and a model can write a lone surrogate as a JSON escape in
its tool-call arguments (`{"path": "\\ud800"}`). Such a str cannot be encoded as UTF-8: pydantic refuses to
serialize it and `str.encode()` raises, so one odd byte once crashed the recording of a whole run. Text from
the sandbox is therefore recorded *escaped*, never dropped: each surrogateescape character as `\\xNN` (the
byte it stands for), any other lone surrogate as `\\uXXXX`.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every lone surrogate written as an escape (see the module docstring); text without one is
    returned as it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(_escape, text)
    return text


def scrub(obj: Any) -> Any:
    """`obj` (JSON-like: dicts, lists, strings, numbers) with :func:`printable` applied to every string in it,
    keys included."""
    if isinstance(obj, str):
        return printable(obj)
    if isinstance(obj, dict):
        return {scrub(k): scrub(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub(v) for v in obj]
    return obj
