"""Tables readable in an 80-column log (a CI log, a pipe): the summary, the statistics and the eval report print
as blocks where the table would fold run names into fragments or cut headers to an ellipsis."""

from __future__ import annotations

import io

from rich.console import Console

from clawgym.evaluation.report import HEADERS
from clawgym.evaluation.report import render_table as render_eval_table
from clawgym.rollout.summary import Summary, render_stats_table, render_table


def printed(renderable, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def summaries() -> list[Summary]:
    return [Summary(run=f"runs/demo/{name}", agent="llm", model="runs/demo/student", episodes=4, scored=4,
                    mean_score=0.25, pass_rate=0.25, ran=4, rounds=3.0, tool_calls=2.5, tool_types=2.0,
                    tools_used=["exec", "read", "write"])
            for name in ("eval_base", "eval_student")]


def test_run_names_are_whole_on_80_columns_and_the_table_stays_where_it_fits():
    narrow = printed(render_table(summaries(), title="summary"), 80)
    lines = narrow.splitlines()
    assert "runs/demo/eval_student  agent llm  model runs/demo/student" in lines
    assert any(line.split() == ["episodes", "4", "scored", "4", "mean", "0.250", "pass", "25.0%", "infra", "0",
                                "skip", "0"] for line in lines)
    assert all(len(line) <= 80 for line in lines) and "…" not in narrow
    wide = printed(render_table(summaries(), title="summary"), 200)
    assert "runs/demo/eval_student" in wide and "episodes  scored" in wide  # the table itself: one row per run
    stats = printed(render_stats_table(summaries()), 80)
    assert "runs/demo/eval_base  agent llm  model runs/demo/student" in stats.splitlines()
    assert "tools used exec, read, write" in stats and all(len(line) <= 80 for line in stats.splitlines())


def test_the_eval_table_cuts_no_header_on_80_columns(monkeypatch):
    import clawgym.evaluation.report as report_mod

    row = ["file_ops", "4", "4", "0.250", "25.0%", "0.250", "0.250 ± 0.000", "0", "0"]
    monkeypatch.setattr(report_mod, "_rows", lambda _report: [row, ["all", *row[1:]]])  # the rows of a report
    text = printed(render_eval_table({"suite": "test_tasks", "k": 1, "overall": {}}), 80)
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())
    assert "file_ops" in text.splitlines()
    assert f"  {HEADERS[1]} 4  {HEADERS[2]} 4  {HEADERS[3]} 0.250" in text
