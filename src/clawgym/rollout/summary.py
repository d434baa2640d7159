"""Summaries of a set of trajectories: counts, mean score, pass rate, errors by kind."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from clawgym.core.records import Trajectory


@dataclass
class Summary:
    agent: str
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
            "agent": self.agent, "episodes": self.episodes, "scored": self.scored, "mean_score": self.mean_score,
            "pass_rate": self.pass_rate, "infra_errors": self.infra_errors, "skipped": self.skipped,
            "statuses": dict(self.statuses), "errors": dict(self.errors),
        }


def summarize(trajectories: list[Trajectory]) -> list[Summary]:
    """One summary per agent. Scores average over episodes with a verdict; infrastructure errors and
    skipped episodes are counted apart and never as a model failure."""
    by_agent: dict[str, Summary] = {}
    scores: dict[str, list[float]] = {}
    passes: dict[str, int] = {}
    for t in trajectories:
        s = by_agent.setdefault(t.agent, Summary(agent=t.agent))
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
        scores.setdefault(t.agent, []).append(v.score)
        passes[t.agent] = passes.get(t.agent, 0) + int(v.passed)
    for agent, s in by_agent.items():
        vals = scores.get(agent, [])
        s.scored = len(vals)
        if vals:
            s.mean_score = sum(vals) / len(vals)
            s.pass_rate = passes.get(agent, 0) / len(vals)
    return list(by_agent.values())


def render_table(summaries: list[Summary], title: str = "rollout summary"):
    from rich.table import Table

    table = Table(title=title)
    for col in ("agent", "episodes", "scored", "mean", "pass", "infra", "skipped", "errors by kind"):
        table.add_column(col, justify="left" if col in ("agent", "errors by kind") else "right",
                         no_wrap=col != "errors by kind")
    for s in summaries:
        table.add_row(
            s.agent, str(s.episodes), str(s.scored),
            "-" if s.mean_score is None else f"{s.mean_score:.3f}",
            "-" if s.pass_rate is None else f"{s.pass_rate:.1%}",
            str(s.infra_errors), str(s.skipped),
            ", ".join(f"{k}={v}" for k, v in sorted(s.errors.items())) or "-",
        )
    return table
