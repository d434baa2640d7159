"""The evaluation report of a benchmark run: overall and per-category mean score and pass rate, pass@k,
mean +- std over the k runs, infrastructure errors counted apart, and the settings that produced it.

A "run" r is sample r of every task (`-k N` gives N runs); a task passes when its verdict passes (score >= its
pass threshold, 1.0 by default). pass@k uses the unbiased estimator of Chen et al. (2021):
1 - C(n - c, k) / C(n, k) for a task with n scored samples of which c passed, averaged over tasks.
Episodes that ended in an infrastructure error are neither scores nor failures: they are listed apart.

Per task, the report also counts the tasks scored above 0 and the tasks passed (`tasks_above_zero`,
`tasks_passed`, and `scored_above_zero`: each such task with its mean score). Under the noop agent, which does
nothing, these are the tasks that pay for no work ("noop-paid"; ClawGym keeps only tasks a noop scores 0 on).
Tasks marked `requires_network` in their metadata (the sandboxes have no network) are reported apart too.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clawgym.core.records import Task, Trajectory


def pass_at_k(n: int, c: int, k: int) -> float:
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass
class Group:
    name: str
    tasks: int = 0
    episodes: int = 0
    scored: int = 0
    mean_score: float | None = None
    pass_rate: float | None = None
    pass_at: dict[str, float] = field(default_factory=dict)
    run_means: list[float] = field(default_factory=list)
    mean_over_runs: float | None = None
    std_over_runs: float | None = None
    infra_errors: int = 0
    unscored: int = 0
    skipped: int = 0  # e.g. the oracle on a task without a reference solution
    hybrid_tasks: int = 0  # tasks with a rubric (code checks + rubric, or rubric only)
    rubric_not_judged: int = 0  # scored episodes of such tasks whose rubric was not judged (code part only)
    tasks_scored: int = 0  # tasks with at least one scored episode
    tasks_above_zero: int = 0  # tasks whose mean score over their scored episodes is above 0
    tasks_passed: int = 0  # tasks with at least one passing episode


def _group(name: str, tasks: list[Task], trajs: dict[str, list[Trajectory]], k: int) -> Group:
    g = Group(name=name, tasks=len(tasks))
    scores: list[float] = []
    passes = 0
    pk: dict[int, list[float]] = defaultdict(list)
    per_run: dict[int, list[float]] = defaultdict(list)
    for t in tasks:
        eps = trajs.get(t.id, [])
        g.episodes += len(eps)
        g.hybrid_tasks += t.verifier.rubric is not None
        n = c = 0
        task_scores: list[float] = []
        for e in eps:
            if e.status == "infra_error":
                g.infra_errors += 1
                continue
            if e.status == "skipped":
                g.skipped += 1
                continue
            if e.score is None:
                g.unscored += 1
                continue
            n += 1
            if t.verifier.rubric is not None and e.verdict is not None and e.verdict.rubric_score is None:
                g.rubric_not_judged += 1
            passed = bool(e.verdict and e.verdict.passed)
            c += passed
            scores.append(e.score)
            task_scores.append(e.score)
            per_run[e.sample].append(e.score)
        passes += c
        if n:
            g.tasks_scored += 1
            g.tasks_above_zero += statistics.fmean(task_scores) > 0
            g.tasks_passed += c > 0
            for kk in sorted({1, k}):
                if kk <= n:
                    pk[kk].append(pass_at_k(n, c, kk))
    g.scored = len(scores)
    if scores:
        g.mean_score = statistics.fmean(scores)
        g.pass_rate = passes / len(scores)
    g.pass_at = {f"pass@{kk}": statistics.fmean(v) for kk, v in sorted(pk.items()) if v}
    g.run_means = [statistics.fmean(per_run[r]) for r in sorted(per_run)]
    if g.run_means:
        g.mean_over_runs = statistics.fmean(g.run_means)
        g.std_over_runs = statistics.stdev(g.run_means) if len(g.run_means) > 1 else 0.0
    return g


def build_report(suite: str, tasks: list[Task], trajectories: list[Trajectory], k: int,
                 settings: dict[str, Any]) -> dict[str, Any]:
    latest: dict[str, Trajectory] = {}
    for t in trajectories:
        latest[t.id] = t
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in latest.values():
        by_task[t.task_id].append(t)
    overall = _group("overall", tasks, by_task, k)
    cats: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        cats[t.category or "(none)"].append(t)
    per_cat = [_group(c, ts, by_task, k) for c, ts in sorted(cats.items())]
    infra = [{"id": t.id, "kind": t.error.kind if t.error else "?", "message": (t.error.message if t.error else "")[:200]}
             for t in latest.values() if t.status == "infra_error"]
    means = _task_means(tasks, by_task)
    report: dict[str, Any] = {
        "suite": suite, "k": k, "overall": asdict(overall), "categories": [asdict(g) for g in per_cat],
        "infra_errors": infra, "settings": settings,
        "scored_above_zero": [{"id": tid, "mean_score": m} for tid, m in
                              sorted(means.items(), key=lambda kv: (-kv[1], kv[0])) if m > 0],
    }
    net = [t for t in tasks if t.metadata.get("requires_network")]
    if net:
        net_ids = {t.id for t in net}
        rest = [t for t in tasks if t.id not in net_ids]
        on, off = _group("needs the network", net, by_task, k), _group("the others", rest, by_task, k)
        report["requires_network"] = {
            "tasks": len(net), "ids": [t.id for t in net], "scored": on.scored, "mean_score": on.mean_score,
            "pass_rate": on.pass_rate, "others": {"tasks": len(rest), "scored": off.scored,
                                                  "mean_score": off.mean_score, "pass_rate": off.pass_rate},
        }
    return report


def _task_means(tasks: list[Task], by_task: dict[str, list[Trajectory]]) -> dict[str, float]:
    """Each task's mean score over its scored episodes (tasks with none are left out)."""
    out = {}
    for t in tasks:
        scores = [e.score for e in by_task.get(t.id, []) if e.score is not None
                  and e.status not in ("infra_error", "skipped")]
        if scores:
            out[t.id] = statistics.fmean(scores)
    return out


def _fmt(v: float | None, pct: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:.1%}" if pct else f"{v:.3f}"


def _rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for g in report["categories"] + [report["overall"]]:
        std = g["std_over_runs"]
        rows.append([
            g["name"], str(g["tasks"]), str(g["scored"]), _fmt(g["mean_score"]),
            _fmt(g["pass_rate"], True),
            " ".join(f"{k}={v:.1%}" for k, v in g["pass_at"].items()) or "-",
            "-" if g["mean_over_runs"] is None else f"{g['mean_over_runs']:.3f} ± {std:.3f}",
            str(g["infra_errors"]), str(g["skipped"] + g["unscored"]),
        ])
    return rows


HEADERS = ["category", "tasks", "scored", "mean", "pass", "pass@k", "mean ± std (runs)", "infra", "not scored"]


def unjudged_note(report: dict[str, Any]) -> str | None:
    """A line saying how many episodes of tasks with a rubric were scored on their code checks alone (no judge
    configured, so the rubric's share is not in their score), or None when every rubric was judged."""
    o = report["overall"]
    n = o.get("rubric_not_judged", 0)
    if not n:
        return None
    return (f"{n} scored episode(s) of the {o.get('hybrid_tasks', 0)} task(s) with a rubric were scored on their "
            "code checks alone (no judge configured; pass --judge-model to judge the rubric).")


def paid_note(report: dict[str, Any]) -> str | None:
    """How many tasks scored above 0 and passed. Under the noop agent (no action at all) this is the share of
    tasks that pay for doing nothing, "noop-paid", with the tasks and their scores."""
    o = report["overall"]
    n = o.get("tasks_scored", 0)
    if not n:
        return None
    above, passed = o.get("tasks_above_zero", 0), o.get("tasks_passed", 0)
    if report["settings"].get("agent") != "noop":
        return f"tasks scored above 0: {above} of {n} ({above / n:.1%}); tasks passed: {passed} ({passed / n:.1%})."
    paid = report.get("scored_above_zero", [])
    shown = ", ".join(f"{p['id']} {p['mean_score']:.3f}" for p in paid[:10]) + (", ..." if len(paid) > 10 else "")
    return (f"noop-paid: the noop agent, which does nothing, scores above 0 on {above} of {n} tasks ({above / n:.1%}) "
            f"and passes {passed} ({passed / n:.1%})" + (f": {shown}" if paid else "")
            + " (ClawGym's filter wants 0).")


def network_note(report: dict[str, Any]) -> str | None:
    """A line on the tasks marked requires_network (the sandboxes have no network), or None."""
    net = report.get("requires_network")
    if not net:
        return None
    return (f"{net['tasks']} task(s) need the network (requires_network), which the sandboxes do not give: mean "
            f"{_fmt(net['mean_score'])} on them, {_fmt(net['others']['mean_score'])} on the other "
            f"{net['others']['tasks']}.")


def notes(report: dict[str, Any]) -> list[str]:
    """The lines under the table: rubrics not judged, tasks scored above 0 / noop-paid, tasks that need the
    network."""
    return [n for n in (unjudged_note(report), paid_note(report), network_note(report)) if n]


def render_table(report: dict[str, Any]):
    """The report's table by category; where it is wider than the output (an 80-column log), one block per
    category instead, so that no header is cut to an ellipsis (clawgym.core.fitted_table)."""
    from rich.table import Table

    from clawgym.core.fitted_table import FittedTable

    title = f"{report['suite']} (k={report['k']})"
    table = Table(title=title, caption="\n".join(notes(report)) or None)
    for h in HEADERS:
        table.add_column(h, justify="left" if h in ("category", "pass@k") else "right")
    rows = _rows(report)
    for i, r in enumerate(rows):
        table.add_row(*r, style="bold" if i == len(rows) - 1 else None)
    return FittedTable(table, HEADERS, rows, names=1, title=title, notes=notes(report))


def render_markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [f"# {report['suite']}: {s.get('agent')}" + (f" / {s['model']}" if s.get("model") else ""), ""]
    lines += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in _rows(report)]
    for note in notes(report):
        lines += ["", note]
    if report["infra_errors"]:
        lines += ["", f"Infrastructure errors (not scored): {len(report['infra_errors'])}"]
        lines += [f"- `{e['id']}`: {e['kind']}: {e['message']}" for e in report["infra_errors"][:20]]
    lines += ["", "Settings:", "", "```json", json.dumps(s, indent=2, default=str), "```", ""]
    return "\n".join(lines)


def render_chart(report: dict[str, Any], path: Path) -> Path:
    """A bar chart of mean score and pass rate per category (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cats = [g for g in report["categories"] if g["scored"]]
    names = [g["name"] for g in cats] + ["overall"]
    means = [g["mean_score"] or 0.0 for g in cats] + [report["overall"]["mean_score"] or 0.0]
    passes = [g["pass_rate"] or 0.0 for g in cats] + [report["overall"]["pass_rate"] or 0.0]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(names)), 4.5))
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], means, width=0.4, label="mean score")
    ax.bar([i + 0.2 for i in x], passes, width=0.4, label="pass rate")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    s = report["settings"]
    ax.set_title(f"{report['suite']}: {s.get('agent')}" + (f" / {s['model']}" if s.get("model") else ""))
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path
