"""Yield accounting of LLM-backed synthesis: what was generated, repaired, rejected (and why), kept, and the
tokens it cost. Written as JSON next to the tasks file (`<output>.yield.json`) and printed by the CLI."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Tokens:
    calls: int = 0
    prompt: int = 0
    completion: int = 0

    def add(self, usage: dict[str, int]) -> None:
        self.calls += 1
        self.prompt += int(usage.get("prompt_tokens", 0) or 0)
        self.completion += int(usage.get("completion_tokens", 0) or 0)

    def merge(self, other: Tokens) -> None:
        self.calls += other.calls
        self.prompt += other.prompt
        self.completion += other.completion

    def as_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "prompt": self.prompt, "completion": self.completion,
                "total": self.prompt + self.completion}


@dataclass
class YieldReport:
    """Counts over one run (plus what an earlier run of the same output already decided: `resumed`)."""

    route: str = "persona"
    model: str = ""
    candidates: int = 0  # briefs worked on in this run
    resumed_kept: int = 0
    resumed_rejected: int = 0
    kept: int = 0
    kept_after_round: Counter = field(default_factory=Counter)  # 0 = first answer passed, k = after k repairs
    rejected: Counter = field(default_factory=Counter)  # final reason -> count
    failures_by_round: dict[int, Counter] = field(default_factory=dict)  # every failure met, by round
    repair_requests: int = 0
    examples: dict[str, str] = field(default_factory=dict)  # reason -> one detail
    by_category: dict[str, Counter] = field(default_factory=dict)  # category -> {kept, rejected}
    generation: Tokens = field(default_factory=Tokens)
    judge: Tokens = field(default_factory=Tokens)
    started: float = field(default_factory=time.monotonic)
    executor: dict[str, Any] | None = None  # where validation ran, when not here (a Ray cluster: per node)

    def failure(self, round_: int, reason: str, detail: str) -> None:
        self.failures_by_round.setdefault(round_, Counter())[reason] += 1
        self.examples.setdefault(reason, detail[:400])

    def outcome(self, category: str, kept: bool, rounds: int, reason: str | None) -> None:
        self.candidates += 1
        cat = self.by_category.setdefault(category, Counter())
        if kept:
            self.kept += 1
            self.kept_after_round[rounds] += 1
            cat["kept"] += 1
        else:
            self.rejected[reason or "unknown"] += 1
            cat["rejected"] += 1

    def as_dict(self) -> dict[str, Any]:
        total = Tokens()
        total.merge(self.generation)
        total.merge(self.judge)
        return {
            "route": self.route, "model": self.model,
            "candidates": self.candidates, "kept": self.kept, "rejected": sum(self.rejected.values()),
            "yield": round(self.kept / self.candidates, 4) if self.candidates else None,
            "kept_first_try": self.kept_after_round.get(0, 0),
            "kept_after_repair_round": {str(k): v for k, v in sorted(self.kept_after_round.items()) if k > 0},
            "repair_requests": self.repair_requests,
            "rejected_by_reason": dict(self.rejected.most_common()),
            "failures_by_round": {str(k): dict(v.most_common()) for k, v in sorted(self.failures_by_round.items())},
            "failure_examples": self.examples,
            "by_category": {k: dict(v) for k, v in sorted(self.by_category.items())},
            "tokens": {"generation": self.generation.as_dict(), "judge": self.judge.as_dict(),
                       "total": total.as_dict()},
            "tokens_per_kept_task": round((total.prompt + total.completion) / self.kept) if self.kept else None,
            "resumed": {"kept": self.resumed_kept, "rejected": self.resumed_rejected},
            "wall_s": round(time.monotonic() - self.started, 2),
            **({"executor": self.executor} if self.executor else {}),
        }

    def lines(self) -> list[str]:
        """A few plain lines for the terminal."""
        d = self.as_dict()
        rep = ", ".join(f"after {k}: {v}" for k, v in d["kept_after_repair_round"].items()) or "none"
        rej = ", ".join(f"{k}={v}" for k, v in d["rejected_by_reason"].items()) or "none"
        t = d["tokens"]
        return [
            f"candidates {d['candidates']}: kept {d['kept']} (first try {d['kept_first_try']}, after repair "
            f"rounds: {rep}), rejected {d['rejected']}: {rej}",
            f"repair requests: {d['repair_requests']}; tokens: generation {t['generation']['total']} "
            f"({t['generation']['calls']} calls), judge {t['judge']['total']} ({t['judge']['calls']} calls), "
            f"total {t['total']['total']}",
        ]
