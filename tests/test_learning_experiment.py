"""benchmarks/learning/experiment.py: the per-operation breakdown and the figures block it writes.

The experiment itself takes about an hour here (its figures are in docs/learning.md); these tests cover the
bookkeeping around it: scores grouped by operation family, infrastructure errors left out, the page rewritten
between its markers only, and the page it writes to by default (the docs page holding the markers).
"""

from __future__ import annotations

from pathlib import Path

from conftest import load_script

REPO = Path(__file__).resolve().parents[1]


def _experiment():
    return load_script("benchmarks/learning/experiment.py", "learning_experiment")


def test_per_operation_groups_scores_and_skips_infra_errors(tmp_path):
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task, Trajectory, Verdict

    exp = _experiment()
    example = read_records(REPO / "examples" / "tasks.jsonl", Task)[0]
    tasks = tmp_path / "tasks.jsonl"
    ops = {"a": ["convert_format"], "b": ["convert_format", "draft_message"], "c": ["edit_config"],
           "d": ["edit_config"], "e": ["build_plan"]}
    tasks.write_text("".join(example.model_copy(update={"id": i, "operations": o}).model_dump_json() + "\n"
                             for i, o in ops.items()))
    run = tmp_path / "run"
    run.mkdir()
    verdicts = {"a": Verdict(status="scored", score=1.0), "b": Verdict(status="scored", score=0.5),
                "c": Verdict(status="scored", score=0.25), "d": Verdict(status="infra_error", score=0.0),
                "e": None}
    (run / "trajectories.jsonl").write_text("".join(
        Trajectory(id=f"{t}#0", task_id=t, agent="llm", sandbox="bwrap", status="completed", verdict=v,
                   started_at="2026-11-22T00:00:00+00:00", duration_s=1.0).model_dump_json() + "\n"
        for t, v in verdicts.items()))
    out = exp.per_operation(tasks, run)
    assert out == {"build_plan": {"tasks": 1, "mean_score": 0.0, "pass_rate": 0.0},  # no verdict: counts 0
                   "convert_format": {"tasks": 2, "mean_score": 0.75, "pass_rate": 0.5},
                   "edit_config": {"tasks": 1, "mean_score": 0.25, "pass_rate": 0.0}}


def test_readme_block_is_written_between_markers_only(tmp_path):
    exp = _experiment()
    side = {"mean_score": 0.1, "pass_rate": 0.0,
            "per_operation": {"convert_format": {"tasks": 2, "mean_score": 0.1, "pass_rate": 0.0}}}
    student = {"mean_score": 0.5, "pass_rate": 0.25,
               "per_operation": {"convert_format": {"tasks": 2, "mean_score": 0.5, "pass_rate": 0.25}}}
    res = {"date": "2026-11-22", "machine": "2 CPU cores", "base": side, "student": student,
           "settings": {"train_tasks": 4, "test_tasks": 2, "operations": ["convert_format"], "full": False,
                        "lora_r": 8, "epochs": 1.0, "lr": 1e-3, "model": "tiny"},
           "training": {"conversations": 4, "tokens": 1000, "trained_tokens": 200, "seconds": 10.0,
                        "tokens_per_s": 100.0, "first_loss": 1.0, "last_loss": 0.5},
           "delta_mean_score": 0.4, "meets_score_goal": True, "meets_time_goal": False, "total_seconds": 3720.0,
           "goal": {"delta_mean_score": 0.30, "total_seconds": 3600},
           "stage_seconds": {"train": 10.0}}
    readme = tmp_path / "README.md"
    readme.write_text(f"# head\n\n{exp.README_START}\nold figures\n{exp.README_END}\n\ntail text\n")
    assert exp.write_readme(readme, exp.readme_block(res))
    text = readme.read_text()
    assert text.startswith("# head\n\n") and text.endswith("\n\ntail text\n")
    assert "old figures" not in text
    assert "| tiny (base) | 0.100 | 0.000 |" in text
    assert "| convert_format | 2 | 0.100 | 0.500 | 0.250 |" in text
    assert "Mean score +0.400 (goal +0.30: met)" in text
    assert "Whole experiment: 62.0 min (goal under 60 min: not met; train 10 s)." in text
    once = text
    assert exp.write_readme(readme, exp.readme_block(res)) and readme.read_text() == once  # idempotent

    bare = tmp_path / "OTHER.md"
    bare.write_text("no markers\n")
    assert not exp.write_readme(bare, exp.readme_block(res))
    assert bare.read_text() == "no markers\n"


def test_figures_go_to_the_docs_page_that_holds_the_markers():
    """Both experiments write into docs/learning.md, which holds both marker pairs (the README no longer does)."""
    import re

    exp = _experiment()
    page = REPO / "docs" / "learning.md"
    text = page.read_text()
    for start, end in [(exp.README_START, exp.README_END),
                       ("<!-- rl-experiment:start -->", "<!-- rl-experiment:end -->")]:
        assert text.count(start) == 1 and text.count(end) == 1 and text.index(start) < text.index(end)
        assert start not in (REPO / "README.md").read_text()
    default = re.search(r'"--readme", type=Path, default=REPO / "docs" / "learning.md"',
                        (REPO / "benchmarks" / "learning" / "experiment.py").read_text())
    assert default, "experiment.py --readme should default to docs/learning.md"
    assert "docs/learning.md" in (REPO / "benchmarks" / "learning" / "rl.py").read_text()
