"""Reading a band from a rubric judge's answer (PinchBench's fallbacks): see :func:`parse_judgment`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clawgym.core.answer_json import fenced_blocks, iter_json, strip_reasoning

BANDS: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass
class Parsed:
    """What was read from one judge answer: the snapped band, the value as written, and how it was found."""

    score: float | None  # snapped to a band; None when nothing usable was found
    raw: float | None = None  # the value on the 0..1 scale before snapping
    reason: str = ""
    method: str = ""  # json | fence | object | line | prose
    error: str | None = None


def snap_to_band(value: float) -> float:
    """The nearest of the five bands (ties go to the lower band: a strict judge)."""
    return min(BANDS, key=lambda b: (abs(b - value), b))


_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_FRACTION = re.compile(rf"^\s*({_NUM})\s*(?:/|out\s+of)\s*({_NUM})\s*$", re.I)
_PERCENT = re.compile(rf"^\s*({_NUM})\s*%\s*$")
_SCORE_KEYS = ("score", "band", "rating", "grade", "total", "final_score", "overall_score", "total_score",
               "overall", "value", "result")
_REASON_KEYS = ("reason", "reasoning", "notes", "justification", "explanation", "rationale", "comment")
_LINE = re.compile(
    rf"^[\s*#>_`\"'-]*(?:final\s+|overall\s+|total\s+)?(?:score|rating|grade|band)\b[\s*_`\"']*[:=]\s*[*_`\"']*"
    rf"({_NUM}(?:\s*(?:/|out\s+of)\s*{_NUM})?\s*%?)",
    re.I | re.M,
)
_PROSE = re.compile(
    rf"\b(?:score|rating|grade|band)\s+(?:is|of|would\s+be|should\s+be|=)\s*[*_`\"']*"
    rf"({_NUM}(?:\s*(?:/|out\s+of)\s*{_NUM})?\s*%?)",
    re.I,
)
_KEYVAL = re.compile(  # a score key in JSON cut short (max_tokens) or otherwise broken
    rf"(?<![A-Za-z_])[\"']?(?:score|band|rating)[\"']?\s*:\s*[\"']?({_NUM}(?:\s*/\s*{_NUM})?\s*%?)", re.I
)


def to_unit(value: Any) -> tuple[float | None, str | None]:
    """A judge's value on the 0..1 scale: numbers, numeric strings, "3/4", "3 out of 4", "75%", or a dict
    holding one of those under score / value. (None, why) when it is not a usable 0..1 value."""
    if isinstance(value, bool) or value is None:
        return None, f"score is {value!r}, not a number"
    if isinstance(value, dict):
        for key in ("score", "value", "band", "rating"):
            if key in value:
                return to_unit(value[key])
        return None, "score object holds no score"
    if isinstance(value, (int, float)):
        v = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if m := _FRACTION.match(text):
            num, den = float(m.group(1)), float(m.group(2))
            if den <= 0:
                return None, f"score {text!r} has no valid scale"
            v = num / den
        elif m := _PERCENT.match(text):
            v = float(m.group(1)) / 100
        else:
            try:
                v = float(text)
            except ValueError:
                return None, f"score {text[:40]!r} is not a number"
    else:
        return None, f"score is a {type(value).__name__}, not a number"
    if not math.isfinite(v):
        return None, f"score {v} is not finite"
    if v < -1e-9 or v > 1 + 1e-9:
        return None, f"score {value!r} is outside 0..1"
    return min(1.0, max(0.0, v)), None


def _ci_get(data: dict, keys: Sequence[str]) -> tuple[bool, Any]:
    lowered = {str(k).lower(): v for k, v in data.items()}
    for key in keys:
        if key in lowered:
            return True, lowered[key]
    return False, None


def _from_object(data: Any, rule_name: str | None) -> Parsed | None:
    """Read a score from a parsed JSON value; None when it holds no score at all."""
    if isinstance(data, bool):
        return None
    if isinstance(data, (int, float)):  # a bare number as the whole answer
        v, why = to_unit(data)
        return Parsed(None if v is None else snap_to_band(v), v, error=why)
    if isinstance(data, str):  # a JSON string: only when it is a value such as "0.75" or "3/4"
        v, _ = to_unit(data)
        return None if v is None else Parsed(snap_to_band(v), v)
    if not isinstance(data, dict):
        return None
    found, reason = _ci_get(data, _REASON_KEYS)
    reason = str(reason) if found and reason is not None else ""
    found, value = _ci_get(data, _SCORE_KEYS)
    if not found:
        # PinchBench's multi-criterion shape: {"scores": {"criterion": x, ...}} (or criteria_scores)
        found_s, scores = _ci_get(data, ("scores", "criteria_scores", "criterion_scores"))
        if found_s and isinstance(scores, dict) and scores:
            lowered = {str(k).strip().lower(): v for k, v in scores.items()}
            if rule_name and rule_name.strip().lower() in lowered:
                value, found = lowered[rule_name.strip().lower()], True
            elif len(scores) == 1:
                value, found = next(iter(scores.values())), True
            else:
                units = [to_unit(v)[0] for v in scores.values()]
                if all(u is not None for u in units):
                    value, found = sum(units) / len(units), True  # type: ignore[arg-type]
    if not found:
        return None
    v, why = to_unit(value)
    if v is None:
        return Parsed(None, None, reason, error=why)
    return Parsed(snap_to_band(v), v, reason)


def _objects(text: str) -> list[Any]:
    """Every top-level JSON object in `text` (strict JSON, else a Python-style dict literal)."""
    return list(iter_json(text, "{", lenient=True))


def parse_judgment(text: str, rule_name: str | None = None) -> Parsed:
    """Read a band from a judge's answer, with PinchBench's fallbacks, in order:

    1. the whole answer as JSON (an object with `score`, or a bare number);
    2. a fenced code block (```json ... ```);
    3. the JSON objects found in the text, the last one holding a score first (as PinchBench);
    4. a `"score": 0.75` pair in JSON that is cut short or broken, a `Score: 0.75` / `**Final score**: 3/4`
       line, then `the score is 0.75` in prose (the first one of each).

    Values may be written as 0.8, "0.8", "3/4", "75%"; they are snapped to the nearest band. A value outside
    0..1 (e.g. 7 with no scale) is not guessed at: it is an error, like an answer with no score at all.
    """
    parsed = _parse_judgment(text, rule_name)
    if parsed.score is not None and parsed.reason.strip().strip("<>").strip().lower() in PLACEHOLDER_REASONS:
        # a model that copies the answer format's example (`{"score": 0.5, "reason": "one short sentence"}`) has
        # judged nothing: its number is the example's, not a verdict
        return Parsed(None, error=f"the answer copies the answer format's example (reason {parsed.reason!r}) "
                                  "instead of judging")
    return parsed


# the reason texts of the answer format the judge is shown: an answer giving one of them copied the format
PLACEHOLDER_REASONS = {"one short sentence", "reason", "..."}


def _parse_judgment(text: str, rule_name: str | None = None) -> Parsed:
    body = strip_reasoning(text).strip()
    if not body:
        return Parsed(None, error="empty answer" if not (text or "").strip() else
                      "the answer is only a <think> block (cut off, or never followed by an answer)")
    errors: list[str] = []

    def accept(p: Parsed | None, method: str) -> Parsed | None:
        if p is None:
            return None
        p.method = method
        if p.score is None:
            errors.append(p.error or "no score")
            return None
        return p

    try:
        whole = json.loads(body)
    except ValueError:
        whole = None
    else:
        if (p := accept(_from_object(whole, rule_name), "json")) is not None:
            return p
    for block in fenced_blocks(body):
        try:
            data = json.loads(block)
        except ValueError:
            objs = _objects(block)
            data = objs[-1] if objs else None
        if (p := accept(_from_object(data, rule_name), "fence")) is not None:
            return p
    for obj in reversed(_objects(body)):
        if (p := accept(_from_object(obj, rule_name), "object")) is not None:
            return p
    for pattern, method in ((_KEYVAL, "key"), (_LINE, "line"), (_PROSE, "prose")):
        for m in pattern.finditer(body):
            v, why = to_unit(m.group(1))
            if v is not None:
                return Parsed(snap_to_band(v), v, _reason_near(body), method)
            errors.append(why or "bad score")
    why = errors[0] if errors else "no score found in the answer"
    return Parsed(None, error=why)


def _reason_near(body: str) -> str:
    m = re.search(r"(?:reason|because|justification)\W*?[:\-]?\s*(.+)", body, re.I)
    return m.group(1).strip().strip("\"': ,}")[:300] if m else ""
