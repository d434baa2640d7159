"""Summaries of a set of trajectories: counts, mean score, pass rate, errors by kind."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from clawgym.core.records import Trajectory


@dataclass
class Summary:
    agent: str
    model: str | None = None  # the model the agent ran (None for agents without one: oracle, noop)
    run: str | None = None  # where the trajectories came from, when the caller says
    episodes: int = 0
    scored: int = 0
    mean_score: float | None = None
    pass_rate: float | None = None
    infra_errors: int = 0
    skipped: int = 0
    statuses: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict:
        return {
            "agent": self.agent, "model": self.model, "run": self.run, "episodes": self.episodes,
            "scored": self.scored, "mean_score": self.mean_score, "pass_rate": self.pass_rate, "infra_errors": self.infra_errors, "skipped": self.skipped,
            "statuses": dict(self.statuses), "errors": dict(self.errors),
        }


def summarize(trajectories: list[Trajectory], run: str | None = None) -> list[Summary]:
    """One summary per agent and model (a base model and its fine-tuned student are two rows). Scores average
    over episodes with a verdict; infrastructure errors and skipped episodes are counted apart and never as a
    model failure."""
    by_key: dict[tuple, Summary] = {}
    scores: dict[tuple, list[float]] = {}
    passes: dict[tuple, int] = {}
    for t in trajectories:
        key = (t.agent, t.model)
        s = by_key.setdefault(key, Summary(agent=t.agent, model=t.model, run=run))
        s.episodes += 1
        s.statuses[t.status] += 1
        if t.status == "infra_error":
            s.infra_errors += 1
            s.errors[f"infra:{t.error.kind if t.error else '?'}"] += 1
            continue
        if t.status == "skipped":
            s.skipped += 1
            s.errors[f"skipped:{t.error.kind if t.error else '?'}"] += 1
            continue
        if t.error:
            s.errors[f"agent:{t.error.kind}"] += 1
        v = t.verdict
        if v is None or v.status not in ("scored", "checker_failed"):
            s.errors["unscored"] += 1
            continue
        if v.status == "checker_failed":
            s.errors["checker_failed"] += 1
        scores.setdefault(key, []).append(v.score)
        passes[key] = passes.get(key, 0) + int(v.passed)
    for key, s in by_key.items():
        vals = scores.get(key, [])
        s.scored = len(vals)
        if vals:
            s.mean_score = sum(vals) / len(vals)
            s.pass_rate = passes.get(key, 0) / len(vals)
    return list(by_key.values())


def render_table(summaries: list[Summary], title: str = "rollout summary"):
    from rich.table import Table

    table = Table(title=title)
    runs = any(s.run for s in summaries)
    left = ("run", "agent", "model", "errors by kind")
    for col in ("run",) * runs + ("agent", "model", "episodes", "scored", "mean", "pass", "infra", "skipped",
                                  "errors by kind"):
        table.add_column(col, justify="left" if col in left else "right", no_wrap=col != "errors by kind")
    for s in summaries:
        table.add_row(
            *((s.run or "-",) if runs else ()), s.agent, s.model or "-", str(s.episodes), str(s.scored),
            "-" if s.mean_score is None else f"{s.mean_score:.3f}",
            "-" if s.pass_rate is None else f"{s.pass_rate:.1%}",
            str(s.infra_errors), str(s.skipped),
            ", ".join(f"{k}={v}" for k, v in sorted(s.errors.items())) or "-",
        )
    return table
