"""JSON in a model's answer: the one parser every LLM route uses (the rubric judge, the LLM task route and its
reviewer, skill annotation).

A model asked for "JSON only" still wraps it: a reasoning block first (`<think>...</think>`, or a block the
chat template opened in the prompt, or one cut off by `max_tokens`), a code fence, a sentence before or after.
:func:`answer_json` strips the reasoning, then tries, in order: the whole answer, each fenced block, then the
first JSON value found in the text (decoded with the JSON decoder, so braces inside strings do not confuse it).
The pieces (:func:`strip_reasoning`, :func:`fenced_blocks`, :func:`iter_json`) are public for a caller with its
own fallbacks, such as the judge (the last object holding a score wins, Python-style dicts are read too).

Dependency-free on purpose (stdlib only): `import clawgym.verify` stays light.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from typing import Any

# a closed reasoning block, anywhere (<think> or <thinking>, any case)
_THINK_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
# a reasoning block that was never closed: the answer was cut off while the model was still thinking
_THINK_OPEN_LEADING = re.compile(r"^\s*<think(?:ing)?>", re.I)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.I)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.I)
# a fenced block: ```json / ```js / ```javascript (same line or not), or any other one-word info string on the
# fence's own line; the content up to the closing fence
_FENCED = re.compile(r"```[ \t]*(?:(?:json|javascript|js)\b|[\w+.-]+(?=[ \t]*\n))?[ \t]*\n?(.*?)```", re.S | re.I)


class AnswerJSONError(ValueError):
    """No usable JSON in a model's answer. `detail`: why, when there is more to say than "none" (the answer is
    empty, only reasoning, JSON of another type); `excerpt`: the start of the answer, quoted (empty when there
    is no answer). The message: `the answer holds no JSON object (detail); it starts: 'excerpt'`."""

    def __init__(self, detail: str = "", excerpt: str = "", want: str = "object"):
        self.detail, self.excerpt, self.want = detail, excerpt, want
        super().__init__(f"the answer holds no JSON {want}" + (f" ({detail})" if detail else "")
                         + (f"; it starts: {excerpt}" if excerpt else ""))


def strip_reasoning(text: str | None) -> str:
    """`text` without its reasoning: every closed `<think>...</think>` (or `<thinking>`) block; a leading
    `...</think>` with no opening tag (the chat template opened the block in the prompt); and an opening tag
    at the start that is never closed (cut off while thinking: all of it is reasoning, none of it an answer)."""
    text = _THINK_BLOCK.sub("", text or "")
    close = _THINK_CLOSE.search(text)
    if close is not None and not _THINK_OPEN.search(text, 0, close.start()):
        text = text[close.end():]
    if _THINK_OPEN_LEADING.match(text):
        return ""
    return text


def fenced_blocks(text: str) -> list[str]:
    """The contents of the ``` fenced blocks in `text`, in order, without the language tag, stripped."""
    return [b.strip() for b in _FENCED.findall(text)]


def _literal_dict(text: str, i: int) -> tuple[dict | None, int]:
    """A Python-style dict ({'score': 0.5}, or JSON with a trailing comma) at `text[i] == "{"`: the balanced
    block read as a literal; (None, i) when it is not one."""
    depth, j = 0, i
    while j < len(text):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                break
        j += 1
    if depth != 0 or j >= len(text):
        return None, i
    try:
        obj = ast.literal_eval(re.sub(r",\s*}", "}", text[i:j + 1]))
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None, i
    return (obj, j + 1) if isinstance(obj, dict) else (None, i)


def iter_json(text: str, openers: str = "{", *, lenient: bool = False) -> Iterator[Any]:
    """Every top-level JSON value in `text` that starts with one of `openers` (`{` objects, `[` arrays), left to
    right. A value that decodes is skipped past as a whole (what is nested in it is not yielded again); where
    decoding fails, the search goes on from the next opener, so an object inside broken text is still found.
    `lenient`: also read a Python-style dict literal or a trailing comma (as the judge does)."""
    decoder = json.JSONDecoder()
    pattern = re.compile("[" + re.escape(openers) + "]")
    m = pattern.search(text)
    while m is not None:
        i = m.start()
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            obj, end = (_literal_dict(text, i) if lenient and text[i] == "{" else (None, i))
            if obj is None:
                m = pattern.search(text, i + 1)
                continue
        yield obj
        m = pattern.search(text, end)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _quote(text: str, n: int = 120) -> str:
    return repr(" ".join(text.split())[:n])


def answer_json(text: str | None, expect: type | tuple[type, ...] = dict) -> Any:
    """The JSON value of a model's answer, of type `expect` (default: an object).

    Reasoning is stripped (:func:`strip_reasoning`), then the first of these that decodes to `expect` wins: the
    whole answer, each fenced block, the first JSON value in the text (objects when `expect` allows dicts,
    arrays when it allows lists). Raises :class:`AnswerJSONError` saying what was found instead.
    """
    kinds = expect if isinstance(expect, tuple) else (expect,)
    want = " or ".join(_kind(k()).removeprefix("an ").removeprefix("a ") if k in (dict, list) else k.__name__
                       for k in kinds)
    raw = text or ""
    body = strip_reasoning(raw).strip()
    if not body:
        raise AnswerJSONError("it is empty" if not raw.strip() else
                              "it is only a <think> block: cut off, or never followed by an answer", want=want)
    wrong: list[Any] = []
    for candidate in (body, *fenced_blocks(body)):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, kinds):
            return value
        wrong.append(value)
    openers = ("{" if dict in kinds else "") + ("[" if list in kinds else "")
    if openers:
        for value in iter_json(body, openers):
            if isinstance(value, kinds):
                return value
    raise AnswerJSONError(f"it is JSON, but {_kind(wrong[0])}" if wrong else "", _quote(body), want=want)
