"""What the rubric judge returns: one sample per model call, one result per rule, one per task."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


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
