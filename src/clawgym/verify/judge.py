"""The rubric judge: an LLM scores each rubric rule of a task on five bands (0, 0.25, 0.5, 0.75, 1).

How a task is judged (:meth:`Judge.judge`):

* Every rule is judged on its own, in its own model call (several run at once). A rule that names a workspace
  file (`file_path`) is judged against that file only; a missing file scores 0 for that rule without calling
  the model. Any other rule is judged against the agent's final answer and a compact rendering of the
  transcript (tool calls and results, truncated). A free-text rubric (`Rubric.text` / `expected_behavior`
  without rules) is judged as one rule named `rubric`.
* The model is asked, PinchBench-style, for a JSON object only: `{"score": <band>, "reason": "..."}`. The
  answer is parsed with PinchBench's fallbacks (see :func:`parse_judgment`): the whole text as JSON, a fenced
  code block, the JSON objects in the text (the last one that holds a score wins, as in PinchBench), then a
  `Score: x` line. The value is snapped to the nearest band (ties go to the lower band).
* An answer that cannot be parsed is asked for once more (the bad answer and a reminder of the format are
  sent back). If that fails too, or the endpoint fails for good, the rule is an ERROR, and so is the task's
  rubric score: never a silent 0.
* `samples=k` asks each judge model k times (temperature > 0, seeds `seed + i`); several judge models (a list
  of clients) are averaged too. Every sample's score is kept, for calibration.
* Rubric score = the weighted mean of the rule scores (rule `weight`; equal weights when all are 0).
* Judge calls are cached on disk by a hash of (model, messages, sampling parameters, sample index), one JSON
  file per hash written atomically, so re-scoring a run costs nothing the second time. Failed calls are never
  cached. Tokens spent (and those saved by the cache) are counted.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym.core.atomic import write_json
from clawgym.core.records import Rubric, RubricRule, Task
from clawgym.sandbox.base import SandboxPathError, WorkspaceReader

if TYPE_CHECKING:  # the client pulls in openai; keep `import clawgym.verify` light
    from clawgym.llm.client import LLMClient

BANDS: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
CACHE_VERSION = 1
FREE_TEXT_RULE = "rubric"

SYSTEM_PROMPT = (
    "You are a grading function. Your ONLY job is to output a single JSON object.\n"
    "- Judge the ONE criterion you are given, from the evidence shown, and nothing else.\n"
    "- Be a strict evaluator: reserve 1 for work that fully meets the criterion.\n"
    "- Do NOT write any prose, markdown or code fences outside the JSON object.\n"
    'Answer format: {"score": S, "reason": "one short sentence"} where S is one of 0, 0.25, 0.5, 0.75, 1.'
)
ANSWER_FORMAT = (
    "Respond with ONLY this JSON object (no markdown, no code fences, no extra text):\n"
    '{"score": <0, 0.25, 0.5, 0.75 or 1>, "reason": "<one short sentence>"}'
)
REASK = (
    "Your answer could not be read. Reply again with ONLY the JSON object "
    '{"score": <0, 0.25, 0.5, 0.75 or 1>, "reason": "<one short sentence>"} and nothing else.'
)


# ============================================================================================== parsing


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
_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_FENCED = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\n?(.*?)```", re.S)


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
    out: list[Any] = []
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i >= 0:
        try:
            obj, end = decoder.raw_decode(text, i)
            out.append(obj)
            i = text.find("{", end)
            continue
        except ValueError:
            pass
        # a Python-style dict ({'score': 0.5}) or trailing comma: the balanced block, read as a literal
        depth, j = 0, i
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if depth == 0 and j < len(text):
            block = text[i:j + 1]
            try:
                obj = ast.literal_eval(re.sub(r",\s*}", "}", block))
                if isinstance(obj, dict):
                    out.append(obj)
                    i = text.find("{", j + 1)
                    continue
            except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
                pass
        i = text.find("{", i + 1)
    return out


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
    body = _THINK.sub("", text or "").strip()
    if not body:
        return Parsed(None, error="empty answer")
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
    for block in _FENCED.findall(body):
        try:
            data = json.loads(block.strip())
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


# ============================================================================================== results


@dataclass
class JudgeSample:
    """One judge model's answer for one rule (one sample)."""

    model: str
    sample: int
    status: str  # ok | error
    score: float | None = None  # snapped band
    raw_score: float | None = None  # the value as the judge wrote it (0..1 scale)
    reason: str = ""
    method: str = ""  # how it was parsed (json, fence, object, line, prose)
    reasked: bool = False
    cached: bool = False  # every call of this sample came from the cache
    calls: int = 0  # model calls made now (a re-ask is a second call)
    cache_hits: int = 0  # calls answered from the cache
    error: str | None = None
    answer: str = ""  # the judge's (last) answer, truncated
    usage: dict[str, int] = field(default_factory=dict)  # tokens spent by calls made now (cache hits: 0)


@dataclass
class RuleResult:
    name: str
    weight: float
    file_path: str | None
    status: str  # scored | missing_file | error
    score: float | None = None  # mean of the samples' bands (0 for a missing file)
    samples: list[JudgeSample] = field(default_factory=list)
    error: str | None = None
    note: str = ""

    @property
    def sample_scores(self) -> list[float]:
        return [s.score for s in self.samples if s.status == "ok" and s.score is not None]

    def spread(self) -> dict[str, float] | None:
        """std (population), min and max of the sample scores; None with fewer than two."""
        vals = self.sample_scores
        if len(vals) < 2:
            return None
        mean = sum(vals) / len(vals)
        return {"std": math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals)), "min": min(vals), "max": max(vals)}


@dataclass
class JudgeResult:
    status: str  # scored | error | none (nothing to judge: the task has no rubric)
    score: float | None = None  # rubric score: weighted mean of the rule scores
    rules: list[RuleResult] = field(default_factory=list)
    error: str | None = None
    models: list[str] = field(default_factory=list)
    samples: int = 1
    usage: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for r, rd in zip(self.rules, out["rules"], strict=True):
            rd["spread"] = r.spread()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeResult:
        rules = []
        for rd in data.get("rules", []):
            rd = {k: v for k, v in rd.items() if k != "spread"}
            rd["samples"] = [JudgeSample(**s) for s in rd.get("samples", [])]
            rules.append(RuleResult(**rd))
        return cls(**{**{k: v for k, v in data.items() if k != "rules"}, "rules": rules})

    def notes(self) -> list[str]:
        """One human-readable line per rule, for a verdict's `notes`."""
        lines = []
        for r in self.rules:
            where = f" [{r.file_path}]" if r.file_path else ""
            if r.status == "error":
                lines.append(f"rubric:{r.name}{where}: judge error: {r.error}")
                continue
            if r.status == "missing_file":
                lines.append(f"rubric:{r.name}{where}: 0 ({r.note})")
                continue
            scores = ", ".join(f"{s.score:g}" for s in r.samples if s.status == "ok" and s.score is not None)
            reason = next((s.reason for s in r.samples if s.status == "ok" and s.reason), "")
            failed = sum(s.status != "ok" for s in r.samples)
            extra = f"; {failed} sample(s) failed" if failed else ""
            lines.append(f"rubric:{r.name}{where}: {r.score:.3g} (samples {scores}{extra})"
                         + (f": {_short(reason, 200)}" if reason else ""))
        return lines


def _short(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


# ============================================================================================== cache


class JudgeCache:
    """Judge answers on disk, one JSON file per content hash (`ROOT/ab/abcdef....json`), written atomically."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def key(model: str, messages: list[dict[str, Any]], params: dict[str, Any], sample: int) -> str:
        blob = json.dumps({"v": CACHE_VERSION, "model": model, "messages": messages, "params": params,
                           "sample": sample}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # absent, or torn by a crash: a miss
        return data if isinstance(data, dict) and data.get("key") == key else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        path = self._path(key)
        write_json(path, {**entry, "key": key}, indent=None, fsync=False, ensure_ascii=False)

    def count(self) -> int:
        return sum(1 for _ in self.root.glob("*/*.json"))


# ============================================================================================== evidence


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"


def workspace_reader(workspace: Path | str | WorkspaceReader, mount_dir: str | None) -> WorkspaceReader:
    """What the judge reads files through: the live sandbox (the protocol's file methods), or, for a host
    directory (a workspace snapshot being re-scored), the same no-follow host access the built-in backends
    use, with absolute links under the task's mount dir mapped back into it."""
    if isinstance(workspace, (str, os.PathLike)):
        from clawgym.sandbox.hostdir import HostWorkspace

        return HostWorkspace(Path(os.path.realpath(workspace)), (mount_dir,) if mount_dir else ())
    return workspace


def _read_text(files: WorkspaceReader, path: str, size: int, limit: int) -> str:
    data = files.read_file(path, max_bytes=limit * 4 + 4096)
    if b"\x00" in data[:8192]:
        return f"(binary file, {size} bytes; not shown)"
    return _clip(data.decode("utf-8", errors="replace"), limit)


def _files_under(files: WorkspaceReader, top: str) -> list[tuple[str, int]]:
    """(path relative to `top`, size) of the regular files under the directory `top`, in path order; links
    are not followed, and a directory that cannot be listed is skipped."""
    found: list[tuple[tuple[str, ...], int]] = []

    def walk(rel: tuple[str, ...]) -> None:
        try:
            entries = files.list_dir("/".join((top, *rel)))
        except (OSError, SandboxPathError):
            return
        for e in entries:
            if e.kind == "dir":
                walk((*rel, e.name))
            elif e.kind == "file":
                found.append(((*rel, e.name), e.size))

    walk(())
    return [("/".join(parts), size) for parts, size in sorted(found)]


def read_evidence_file(workspace: WorkspaceReader, rel: str, limit: int) -> tuple[str | None, str]:
    """(text to show the judge, note). Text None: the file is missing or not readable as the agent's work
    (the rule scores 0 without a model call), and the note says why. Links are followed as the sandbox
    would, only while they stay in the workspace; only regular files are read, at most `limit` characters."""
    try:
        st = workspace.stat(rel)
    except SandboxPathError:
        return None, f"{rel} leads outside the workspace: scored 0 without calling the judge"
    except OSError:
        st = None
    if st is None:
        return None, f"{rel} does not exist in the final workspace: scored 0 without calling the judge"
    if st.kind == "dir":
        parts, used = [], 0
        for sub, size in _files_under(workspace, rel):
            if used >= limit:
                parts.append("[... more files not shown ...]")
                break
            try:
                chunk = _read_text(workspace, f"{rel.rstrip('/')}/{sub}", size, max(200, (limit - used) // 2))
            except (OSError, SandboxPathError):
                continue
            parts.append(f"--- {sub} ---\n{chunk}")
            used += len(chunk)
        return ("\n".join(parts) or "(an empty directory)"), ""
    if st.kind != "file":
        return None, f"{rel} is not a regular file: scored 0 without calling the judge"
    try:
        return _read_text(workspace, rel, st.size, limit), ""
    except SandboxPathError as exc:
        return None, f"{rel} cannot be read ({exc}): scored 0 without calling the judge"
    except OSError as exc:
        return None, f"{rel} cannot be read ({exc.strerror or exc}): scored 0 without calling the judge"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    out = []
    for item in content or []:
        if isinstance(item, dict) and item.get("type") == "text":
            out.append(str(item.get("text", "")))
        elif isinstance(item, str):
            out.append(item)
    return "\n".join(out)


def render_transcript(transcript: list[dict[str, Any]], max_chars: int = 6000, arg_chars: int = 300,
                      result_chars: int = 400, text_chars: int = 1200) -> str:
    """A compact rendering of an OpenClaw transcript for the judge: user turns, the assistant's text, each tool
    call with its arguments (long strings cut) and each tool result (cut). When the whole is too long, the
    first lines (the request) and as many of the last ones as fit are kept, with the gap marked."""
    lines: list[str] = []
    for ev in transcript:
        if ev.get("type") != "message":
            continue
        msg = ev.get("message") or {}
        role = msg.get("role")
        if role == "user":
            lines.append(f"USER: {_clip(_text_of(msg.get('content')).strip(), text_chars)}")
        elif role == "assistant":
            for item in msg.get("content") or []:
                if not isinstance(item, dict):
                    continue
                if item.get("type") == "text" and str(item.get("text", "")).strip():
                    lines.append(f"ASSISTANT: {_clip(str(item['text']).strip(), text_chars)}")
                elif item.get("type") == "toolCall":
                    args = item.get("arguments", item.get("params", {}))
                    if isinstance(args, dict):
                        args = {k: (_clip(v, arg_chars) if isinstance(v, str) else v) for k, v in args.items()}
                    lines.append(f"CALL {item.get('name')}({_clip(json.dumps(args, ensure_ascii=False), arg_chars * 3)})")
        elif role == "toolResult":
            flag = " (error)" if msg.get("isError") else ""
            text = _text_of(msg.get("content")).strip()
            lines.append(f"RESULT {msg.get('toolName', '')}{flag}: {_clip(text, result_chars)}")
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text or "(no messages)"
    head: list[str] = []
    used = 0
    for line in lines[:1]:
        head.append(_clip(line, max_chars // 4))
        used += len(head[-1]) + 1
    tail: list[str] = []
    for line in reversed(lines[1:]):
        if used + len(line) + 1 > max_chars - 60:
            break
        tail.append(line)
        used += len(line) + 1
    omitted = len(lines) - len(head) - len(tail)
    return "\n".join(head + [f"[... {omitted} earlier lines omitted ...]"] + list(reversed(tail)))


# ============================================================================================== the judge


def rubric_rules(rubric: Rubric) -> list[RubricRule]:
    """The rules to judge: the rubric's own, or its free text (or expected behaviour) as one rule."""
    if rubric.rules:
        return list(rubric.rules)
    text = (rubric.text or "").strip() or (rubric.expected_behavior or "").strip()
    if not text:
        return []
    return [RubricRule(name=FREE_TEXT_RULE, description=text)]


def _bands_text(rule: RubricRule) -> str:
    desc = rule.description or ""
    if not rule.scores or re.search(r"score\s*1(?:\.0)?\b", desc, re.I):
        return ""  # none given, or already written out in the description (PinchBench's criteria)
    by_band: dict[float, str] = {}
    for k, v in rule.scores.items():
        try:
            by_band[snap_to_band(float(k))] = v
        except ValueError:
            continue
    lines = [f"- {b:g}: {by_band.get(b, '(in between the neighbouring bands)')}" for b in reversed(BANDS)]
    return "Bands:\n" + "\n".join(lines)


@dataclass
class _Call:
    content: str
    usage: dict[str, int]
    cached: bool


class Judge:
    """Scores a task's rubric with one or more judge models (see the module docstring).

    `client`: the LLMClient of the judge model, or a list of them (several judge models, averaged).
    `samples`: answers asked of each model per rule. `temperature`: default 0 for one sample, 0.7 for
    several; sample i uses seed `seed + i`. `cache_dir`: where judge answers are cached (None: no cache).
    """

    def __init__(
        self,
        client: LLMClient | Sequence[LLMClient],
        samples: int = 1,
        cache_dir: Path | None = None,
        *,
        temperature: float | None = None,
        seed: int = 0,
        max_tokens: int = 200,
        max_workers: int = 8,
        max_file_chars: int = 8000,
        max_transcript_chars: int = 6000,
        max_answer_chars: int = 3000,
        reask: bool = True,
    ):
        self.clients = list(client) if isinstance(client, (list, tuple)) else [client]
        if not self.clients:
            raise ValueError("a judge needs at least one model client")
        if samples < 1:
            raise ValueError("samples must be >= 1")
        self.samples = samples
        self.temperature = temperature if temperature is not None else (0.0 if samples == 1 else 0.7)
        self.seed = seed
        self.max_tokens = max_tokens
        self.max_workers = max_workers
        self.max_file_chars = max_file_chars
        self.max_transcript_chars = max_transcript_chars
        self.max_answer_chars = max_answer_chars
        self.reask = reask
        self.cache = JudgeCache(cache_dir) if cache_dir is not None else None
        self._lock = threading.Lock()
        self.usage = {"requests": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0,
                      "cached_prompt_tokens": 0, "cached_completion_tokens": 0}

    @property
    def models(self) -> list[str]:
        return [c.model for c in self.clients]

    # -- prompts ------------------------------------------------------------------------------------------
    def _messages(self, task: Task, rubric: Rubric, rule: RubricRule, evidence: str) -> list[dict[str, Any]]:
        parts = ["## The task given to the agent", task.instruction.strip()]
        for s in task.sessions:
            parts.append(f"(later message from the user) {s.prompt.strip()}")
        if rubric.expected_behavior and rule.name != FREE_TEXT_RULE:
            parts += ["## Expected behavior", rubric.expected_behavior.strip()]
        if rubric.eval_input:
            parts += ["## Notes for the grader", rubric.eval_input.strip()]
        parts += [f"## The criterion to judge: {rule.name}", (rule.description or rule.name).strip()]
        bands = _bands_text(rule)
        if bands:
            parts.append(bands)
        parts += [evidence, ANSWER_FORMAT]
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]

    def _evidence(self, rule: RubricRule, workspace: WorkspaceReader, transcript: list[dict[str, Any]],
                  final_message: str) -> tuple[str | None, str]:
        if rule.file_path:
            text, note = read_evidence_file(workspace, rule.file_path, self.max_file_chars)
            if text is None:
                return None, note
            runs = re.findall(r"`{3,}", text)
            fence = "`" * max([3] + [len(r) + 1 for r in runs])  # longer than any fence inside the file
            return (f"## Evidence: the file `{rule.file_path}` in the agent's final workspace\n"
                    f"{fence}\n{text}\n{fence}"), ""
        answer = _clip(final_message.strip(), self.max_answer_chars) or "(the agent gave no final answer)"
        steps = render_transcript(transcript, self.max_transcript_chars)
        return (f"## Evidence: the agent's final answer\n{answer}\n\n"
                f"## Evidence: what the agent did (tool calls and results, truncated)\n{steps}"), ""

    # -- calls --------------------------------------------------------------------------------------------
    def _params(self, sample: int) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.temperature > 0:
            params["seed"] = self.seed + sample
        return params

    def _call(self, client: LLMClient, messages: list[dict[str, Any]], sample: int) -> _Call:
        params = self._params(sample)
        key = JudgeCache.key(client.model, messages, params, sample) if self.cache is not None else None
        if self.cache is not None and key is not None:
            hit = self.cache.get(key)
            if hit is not None and isinstance(hit.get("content"), str):
                usage = hit.get("usage") or {}
                with self._lock:
                    self.usage["cached"] += 1
                    self.usage["cached_prompt_tokens"] += int(usage.get("prompt_tokens", 0))
                    self.usage["cached_completion_tokens"] += int(usage.get("completion_tokens", 0))
                return _Call(hit["content"], {}, True)
        res = client.chat(messages, **params)  # LLMError propagates: a failed call is never cached
        usage = {k: int(res.usage.get(k, 0)) for k in ("prompt_tokens", "completion_tokens")}
        with self._lock:
            self.usage["requests"] += 1
            self.usage["prompt_tokens"] += usage["prompt_tokens"]
            self.usage["completion_tokens"] += usage["completion_tokens"]
        if self.cache is not None and key is not None:
            self.cache.put(key, {"model": client.model, "sample": sample, "params": params,
                                 "content": res.content, "usage": usage, "finish_reason": res.finish_reason,
                                 "created": time.time()})
        return _Call(res.content, usage, False)

    def _sample(self, client: LLMClient, messages: list[dict[str, Any]], sample: int, rule: str) -> JudgeSample:
        from clawgym.llm.client import LLMError

        out = JudgeSample(model=client.model, sample=sample, status="error")
        spent = {"prompt_tokens": 0, "completion_tokens": 0}
        try:
            first = self._call(client, messages, sample)
            out.calls, out.cache_hits = int(not first.cached), int(first.cached)
            for k in spent:
                spent[k] += first.usage.get(k, 0)
            parsed = parse_judgment(first.content, rule)
            out.answer, out.cached = _short(first.content, 500), first.cached
            if parsed.score is None and self.reask:
                again = messages + [{"role": "assistant", "content": first.content},
                                    {"role": "user", "content": REASK}]
                second = self._call(client, again, sample)
                out.calls += int(not second.cached)
                out.cache_hits += int(second.cached)
                for k in spent:
                    spent[k] += second.usage.get(k, 0)
                first_error = parsed.error
                parsed = parse_judgment(second.content, rule)
                out.reasked, out.answer, out.cached = True, _short(second.content, 500), out.cached and second.cached
                if parsed.score is None:
                    parsed.error = f"unparseable judge answer, also after a re-ask ({first_error}; then {parsed.error})"
        except LLMError as exc:
            out.error, out.usage = f"judge call failed: {exc}", spent
            return out
        out.usage = spent
        if parsed.score is None:
            out.error = parsed.error or "unparseable judge answer"
            return out
        out.status, out.score, out.raw_score = "ok", parsed.score, parsed.raw
        out.reason, out.method = _short(parsed.reason, 300), parsed.method
        return out

    # -- a task -------------------------------------------------------------------------------------------
    def judge(self, task: Task, workspace: Path | str | WorkspaceReader, transcript: list[dict[str, Any]],
              final_message: str = "") -> JudgeResult:
        """Judge `task`'s rubric on the final workspace and the episode's transcript and final answer.
        `workspace`: the live sandbox (read through the sandbox protocol), or a host directory holding it (a
        snapshot)."""
        t0 = time.monotonic()
        result = JudgeResult(status="none", models=self.models, samples=self.samples)
        rubric = task.verifier.rubric
        if rubric is None:
            return result
        rules = rubric_rules(rubric)
        files = workspace_reader(workspace, task.workspace.mount_dir)
        if not rules:
            result.status, result.error = "error", "the rubric has no rules and no text to judge"
            return result
        jobs: list[tuple[int, LLMClient, list[dict[str, Any]], int]] = []
        for i, rule in enumerate(rules):
            rr = RuleResult(name=rule.name, weight=rule.weight, file_path=rule.file_path, status="scored")
            result.rules.append(rr)
            evidence, note = self._evidence(rule, files, transcript, final_message)
            if evidence is None:
                rr.status, rr.score, rr.note = "missing_file", 0.0, note
                continue
            messages = self._messages(task, rubric, rule, evidence)
            for client in self.clients:
                for s in range(self.samples):
                    jobs.append((i, client, messages, s))
        if jobs:
            workers = max(1, min(self.max_workers, len(jobs)))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="judge") as pool:
                futures = [(i, pool.submit(self._sample, c, m, s, rules[i].name)) for i, c, m, s in jobs]
                for i, fut in futures:
                    result.rules[i].samples.append(fut.result())
        usage = {"requests": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for rr in result.rules:
            for s in rr.samples:
                usage["prompt_tokens"] += s.usage.get("prompt_tokens", 0)
                usage["completion_tokens"] += s.usage.get("completion_tokens", 0)
                usage["requests"] += s.calls
                usage["cached"] += s.cache_hits
            if rr.status == "missing_file":
                continue
            per_model = []
            for model in dict.fromkeys(s.model for s in rr.samples):
                vals = [s.score for s in rr.samples if s.model == model and s.status == "ok" and s.score is not None]
                if vals:
                    per_model.append(sum(vals) / len(vals))
            if not per_model:
                rr.status = "error"
                rr.error = next((s.error for s in rr.samples if s.error), "no judge answer")
            else:
                rr.score = sum(per_model) / len(per_model)
        result.usage = usage
        failed = [r for r in result.rules if r.status == "error"]
        if failed:
            result.status = "error"
            result.error = "; ".join(f"rule {r.name!r}: {r.error}" for r in failed)
        else:
            total_w = sum(r.weight for r in result.rules)
            if total_w > 0:
                score = sum(r.weight * (r.score or 0.0) for r in result.rules) / total_w
            else:
                score = sum(r.score or 0.0 for r in result.rules) / len(result.rules)
            result.status, result.score = "scored", min(1.0, max(0.0, score))
        result.duration_s = time.monotonic() - t0
        return result


def verify_with_judge(task: Task, sandbox, transcript: list[dict[str, Any]], final_message: str = "",
                      judge: Judge | None = None):
    """:func:`clawgym.verify.verify_episode` with the rubric judged: the judge reads the live workspace as the
    agent left it (before any checker file is copied in), then the code check runs in the sandbox, and the two
    are combined (see :func:`clawgym.verify.scoring.combine_judged`). Without a judge, exactly verify_episode.
    Raises SandboxError when the sandbox fails."""
    from clawgym.verify.code import run_code_check
    from clawgym.verify.scoring import combine_judged

    judged = None
    if judge is not None and task.verifier.rubric is not None:
        judged = judge.judge(task, sandbox, transcript, final_message)
    code = None
    if task.verifier.code is not None:
        code = run_code_check(task.verifier.code, task, sandbox, transcript, final_message)
    return combine_judged(task.verifier, code, judged)
