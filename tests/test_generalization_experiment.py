"""benchmarks/learning/generalization.py: the statistics and bookkeeping around the experiment.

The experiment takes hours here; these tests cover what its table rests on: the bootstrap interval and the paired
difference, the verbatim-overlap count (d), and the report of a run still in progress (cells not yet run say so,
the page is rewritten between its markers only).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import load_script

REPO = Path(__file__).resolve().parents[1]


def _gen():
    return load_script("benchmarks/learning/generalization.py", "learning_generalization")


def test_bootstrap_interval_brackets_the_mean_and_is_a_point_for_constant_scores():
    g = _gen()
    assert g.bootstrap_ci([0.5] * 12, n=500) == [0.5, 0.5]
    xs = [0.0] * 30 + [1.0] * 10  # mean 0.25
    lo, hi = g.bootstrap_ci(xs, n=2000)
    assert lo < 0.25 < hi and 0.05 < hi - lo < 0.5
    assert g.bootstrap_ci([]) is None


def test_paired_difference_counts_a_missing_task_as_zero():
    g = _gen()
    base = {"a": 0.0, "b": 0.5, "c": 1.0}
    student = {"a": 1.0, "b": 0.5}  # c never finished: it scores 0
    d = g.paired(base, student, ["a", "b", "c"], seed=1)
    assert d["tasks"] == 3 and d["delta"] == 0.0
    s = g.summary(student, ["a", "b", "c"])
    assert s["mean_score"] == 0.5 and s["pass_rate"] == round(1 / 3, 4)


def test_overlap_finds_a_verbatim_sequence_and_a_shared_result_call():
    g = _gen()

    def conv(task_id, *calls):
        return {"task_id": task_id, "messages": [
            {"role": "assistant", "tool_calls": [{"function": {"name": n, "arguments": json.dumps(a)}}]}
            for n, a in calls]}

    train = [conv("t1", ("read", {"path": "a.csv"}), ("write", {"path": "b.csv", "content": "x"}))]
    test = [conv("h1", ("read", {"path": "a.csv"}), ("write", {"path": "b.csv", "content": "x"})),
            conv("h2", ("read", {"path": "z.csv"}), ("write", {"path": "b.csv", "content": "x"})),
            conv("h3", ("read", {"path": "a.csv"}), ("write", {"path": "c.csv", "content": "y"}))]
    o = g.overlap(train, test, {"h1": "clean_data", "h2": "clean_data", "h3": "convert_format"})
    assert o["tasks"] == 3
    assert o["rate"] == {"whole_sequence": round(1 / 3, 4), "a_result_call": round(2 / 3, 4),
                         "every_call": round(1 / 3, 4)}
    assert o["per_family"]["clean_data"]["whole_sequence"] == 1


def test_report_of_a_run_in_progress_says_what_is_not_run_and_keeps_the_page(tmp_path, capsys):
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task

    g = _gen()
    work = tmp_path / "work"
    work.mkdir()
    example = read_records(REPO / "examples" / "tasks.jsonl", Task)[0]
    (work / "test_in.jsonl").write_text("".join(
        example.model_copy(update={"id": i, "operations": [op]}).model_dump_json() + "\n"
        for i, op in (("t1", "clean_data"), ("t2", "clean_data"), ("t3", "build_plan"))))
    # seed 1's student and the base model are scored; seed 2's student is not yet (the run is in progress)
    res = {"date": "2026-11-25", "machine": "test", "commit": "abc1234",
           "settings": {"seeds": [1, 2], "lora_r": 32, "epochs": 1.35, "lr": 0.001, "train_tasks": 150,
                        "operations": ["clean_data", "build_plan"], "program_ops": ["clean_data"],
                        "test_seed": 4404, "max_turns": 4, "max_tokens": 768},
           "scores": {"in_distribution": {"base": {"t1": 0.0, "t2": 0.0, "t3": 0.5},
                                          "student_1": {"t1": 1.0, "t2": 0.5}}}}  # t3 missing: scores 0
    (work / "results.json").write_text(json.dumps(res))
    (work / "stage_seconds.json").write_text(json.dumps({"train": 1920.0}))
    page = tmp_path / "learning.md"
    page.write_text(f"# Learning\n\nbefore\n\n{g.README_START}\nNot yet measured.\n{g.README_END}\n\nafter\n")
    assert g.main(["--work", str(work), "--report", "--readme", str(page)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| same families, same wording half"))
    assert "| 3 | 0.167 " in row and "| 0.500 [" in row and "not run" in row and "| +0.333 [" in row
    assert "(a) Leave one family out: not run yet." in out
    assert "| same wording half | clean_data | 2 | 0.000 | 0.750 | not run |" in out
    assert "| same wording half | build_plan | 1 | 0.500 | 0.000 | not run |" in out
    assert "train 32 min" in out
    assert "Not yet measured." in page.read_text()  # without --save the page is left alone


def test_an_id_of_both_held_out_sets_counts_in_each_sets_own_family(tmp_path, capsys):
    """The two held-out sets share their ids (one test seed, two wording halves) and an id may be another family in
    each: the per-family rows and (a)'s tasks once came from a map merged over both files, so (a)'s convert_format
    row counted a clean_data task of test_in that is convert_format in test_phr. The report recomputes (a)'s rows
    from the per-task scores over the family's tasks of test_in, with each row's training seed."""
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task

    g = _gen()
    work = tmp_path / "work"
    work.mkdir()
    example = read_records(REPO / "examples" / "tasks.jsonl", Task)[0]

    def tasks(path: Path, ops: dict[str, str]) -> None:
        path.write_text("".join(example.model_copy(update={"id": i, "operations": [op]}).model_dump_json() + "\n"
                                for i, op in ops.items()))

    tasks(work / "test_in.jsonl", {"t1": "convert_format", "t2": "clean_data", "t3": "clean_data"})
    tasks(work / "test_phr.jsonl", {"t1": "convert_format", "t2": "convert_format", "t3": "clean_data"})
    wrong = {"seed": 1, "tasks": 2, "demonstrations": 90, "base": {}, "with": {}, "without": {}, "delta": {}}
    res = {"date": "2026-11-27", "machine": "test", "commit": "abc1234",
           "settings": {"seeds": [1, 2], "lora_r": 32, "epochs": 1.35, "lr": 0.001, "train_tasks": 150,
                        "operations": ["convert_format", "clean_data"], "program_ops": ["clean_data"],
                        "test_seed": 4404, "max_turns": 4, "max_tokens": 768},
           "scores": {"in_distribution": {
               "base": {"t1": 0.0, "t2": 0.0, "t3": 0.0}, "student_1": {"t1": 1.0, "t2": 0.0, "t3": 0.0},
               "student_2": {"t1": 1.0, "t2": 1.0, "t3": 0.5},
               "student_1_without_convert_format": {"t1": 0.0, "t2": 0.9},  # t2 scored by the old mislabelling
               "student_2_without_clean_data": {"t2": 0.0, "t3": 0.5}},
               "phrasing": {"base": {"t1": 0.0, "t2": 0.0, "t3": 0.0}, "student_1": {"t1": 0.0, "t2": 1.0, "t3": 0.0}}},
           "lofo": {"seed": 1, "families": {"convert_format": wrong, "clean_data": {**wrong, "seed": 2}}}}
    (work / "results.json").write_text(json.dumps(res))
    assert g.main(["--work", str(work), "--report"]) == 0
    out = capsys.readouterr().out
    assert "| same wording half | convert_format | 1 | 0.000 | 1.000 | 1.000 |" in out
    assert "| same wording half | clean_data | 2 | 0.000 | 0.000 | 0.750 |" in out
    assert "| other wording half | convert_format | 2 | 0.000 | 0.500 | not run |" in out
    assert "| convert_format | 1 | 1 | 0.000 [0.00, 0.00] | 1.000 [1.00, 1.00] | 0.000 [0.00, 0.00] | -1.000 [" in out
    assert "| clean_data | 2 | 2 | 0.000 [0.00, 0.00] | 0.750 [" in out and "| 0.250 [" in out


def test_a_leave_one_out_seed_that_is_not_a_training_seed_is_a_clear_error(tmp_path, capsys):
    g = _gen()
    assert g.main(["--work", str(tmp_path / "w"), "--seeds", "1", "2", "--lofo-seed", "3", "--only", "lofo"]) == 2
    assert "--lofo-seed 3: not one of --seeds (1, 2)" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_report_without_results_is_a_clear_error(tmp_path, capsys):
    g = _gen()
    assert g.main(["--work", str(tmp_path), "--report"]) == 1
    assert "no results yet" in capsys.readouterr().err


def test_readme_summary_names_every_part_and_what_is_not_run():
    g = _gen()
    base, st = {"t1": 0.0, "t2": 0.0}, {"t1": 1.0, "t2": 0.0}
    row = g.set_row({"base": base, "student_1": st}, [1, 2], ["clean_data"], {"t1": "clean_data"}, "phrasing")
    res = {"settings": {"seeds": [1, 2]}, "sets": {"phrasing": row},
           "overlap": {"phrasing": {"1": {"tasks": 2, "rate": {"whole_sequence": 0.5}}}}}
    text = g.summary_table(res)
    assert text.startswith(g.SUMMARY_START) and text.endswith(g.SUMMARY_END)
    assert "| (b) other wording half | no (wording, schemas, names) | 2 | 0.000 | 0.500 (seed 1) | +0.500 |" in text
    assert "| same families and wording half, other personas | yes | - | not run | not run | not run |" in text
    assert "not run yet" in text  # (a)
    assert "other wording, seed 1: 1 of 2" in text
    assert "| 1 of 2 |" in text  # (e): one of the two training seeds


def _tasks_file(path: Path, ids: list[str]) -> Path:
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task

    example = read_records(REPO / "examples" / "tasks.jsonl", Task)[0]
    path.write_text("".join(example.model_copy(update={"id": i, "operations": ["clean_data"]}).model_dump_json()
                            + "\n" for i in ids))
    return path


def test_resume_refuses_tasks_synthesized_by_other_code(tmp_path):
    """A saved run's scores are of its own tasks: re-synthesized held-out tasks with other ids (other generator
    code) must stop the run instead of pairing old scores with new tasks."""
    g = _gen()
    res = {"commit": "9c52719", "scores": {"in_distribution": {"base": {"a": 0.0, "b": 1.0}}}}
    same = _tasks_file(tmp_path / "same.jsonl", ["b", "a"])
    g.check_tasks(res, {"in_distribution": same, "phrasing": same})  # phrasing has no scores yet: nothing to check
    other = _tasks_file(tmp_path / "other.jsonl", ["a", "c"])
    try:
        g.check_tasks(res, {"in_distribution": other})
    except g.TasksChanged as e:
        assert "other.jsonl" in str(e) and "9c52719" in str(e) and "1 new ids" in str(e)
    else:
        raise AssertionError("tasks with other ids were accepted")


def test_resume_checks_a_left_out_student_against_its_family_only(tmp_path):
    """An (a) student is scored on its left-out family's tasks only: a resumed run must accept that record (it
    once stopped every resumed run that had an (a) family on record) and still refuse a family whose ids moved."""
    g = _gen()
    path = _tasks_file(tmp_path / "t.jsonl", ["a", "b"])  # both clean_data
    res = {"commit": "9c52719", "scores": {"in_distribution": {
        "base": {"a": 0.0, "b": 1.0}, "student_1_without_clean_data": {"a": 0.0, "b": 0.5},
        "student_1_without_draft_message": {}}}}
    g.check_tasks(res, {"in_distribution": path})
    res["scores"]["in_distribution"]["student_1_without_clean_data"] = {"a": 0.0}
    try:
        g.check_tasks(res, {"in_distribution": path})
    except g.TasksChanged as e:
        assert "of clean_data" in str(e) and "student_1_without_clean_data" in str(e)
    else:
        raise AssertionError("a left-out family with other ids was accepted")


def test_resume_from_a_saved_run_keeps_its_scores_and_trains_only_unscored_students(tmp_path):
    g = _gen()
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps({"commit": "abc", "stage_seconds": {"train": 10.0},
                                 "scores": {"in_distribution": {"base": {"a": 0.0}, "student_1": {"a": 1.0}},
                                            "phrasing": {"base": {"p": 0.0}}}}))
    work = tmp_path / "work"
    g.seed_work(work, saved)
    res = json.loads((work / "results.json").read_text())
    assert res["scores"]["in_distribution"]["student_1"] == {"a": 1.0}
    assert json.loads((work / "stage_seconds.json").read_text()) == {"train": 10.0}
    assert g.unscored(res, "student_1", ["in_distribution"]) == []
    assert g.unscored(res, "student_1", ["in_distribution", "phrasing"]) == ["phrasing"]
    assert g.unscored(res, "student_2", ["in_distribution"]) == ["in_distribution"]
    # a work directory with results of its own is not overwritten by a second --resume-from
    (work / "results.json").write_text(json.dumps({"scores": {}}))
    g.seed_work(work, saved)
    assert json.loads((work / "results.json").read_text()) == {"scores": {}}


def test_leave_one_family_out_rows_say_which_families_are_not_run_yet():
    g = _gen()
    with_all, without, base = {"a": 1.0, "b": 0.5}, {"a": 0.0, "b": 0.5}, {"a": 0.0, "b": 0.0}
    fam = {"tasks": 2, "demonstrations": 120, "base": g.summary(base), "with": g.summary(with_all),
           "without": g.summary(without), "delta": g.paired(with_all, without, ["a", "b"])}
    res = {"date": "2026-11-25", "dates": ["2026-11-25", "2026-11-27"], "machine": "test", "commit": "def5678",
           "tasks_commit": "9c52719", "stage_seconds": {},
           "settings": {"seeds": [1, 2], "lora_r": 32, "epochs": 1.35, "lr": 0.001, "train_tasks": 150,
                        "operations": ["draft_message", "clean_data"], "program_ops": ["clean_data"],
                        "test_seed": 4404, "max_turns": 4, "max_tokens": 768},
           "sets": {}, "lofo": {"seed": 1, "families": {"draft_message": fam}}}
    text = g.table(res)
    assert "Measured 2026-11-25 to 2026-11-27" in text and "clawgym code of commit 9c52719" in text
    assert "| draft_message | 1 | 2 | 0.000 [0.00, 0.00] | 0.750 [" in text and "| -0.500 [" in text
    assert "| clean_data | | | | | not run yet | |" in text
    short = g.summary_table(res)
    assert "draft_message 0.250 (with it 0.750, -0.500, seed 1); not run yet: clean_data" in short


def test_merge_adds_another_work_directorys_families_and_refuses_other_scores(tmp_path):
    g = _gen()
    fam = {"tasks": 1, "demonstrations": 120, "base": g.summary({"a": 0.0}), "with": g.summary({"a": 1.0}),
           "without": g.summary({"a": 0.0}), "delta": g.paired({"a": 1.0}, {"a": 0.0}, ["a"])}
    main = {"tasks_commit": "9c52719", "settings": {"test_seed": 4404}, "stage_seconds": {"train_lofo": 100.0},
            "scores": {"in_distribution": {"base": {"a": 0.0}, "student_1_without_x": {"a": 0.0}}},
            "lofo": {"seed": 1, "families": {"x": fam}}}
    other = tmp_path / "other"
    other.mkdir()
    theirs = {"tasks_commit": "9c52719", "settings": {"test_seed": 4404},
              "scores": {"in_distribution": {"base": {"a": 0.0}, "student_1_without_y": {"a": 0.5}}},
              "lofo": {"seed": 1, "families": {"y": fam}}}
    (other / "results.json").write_text(json.dumps(theirs))
    (other / "stage_seconds.json").write_text(json.dumps({"synth": 1.0, "train_lofo": 50.0, "eval_lofo": 9.0}))
    g.merge(main, other)
    assert set(main["lofo"]["families"]) == {"x", "y"}
    assert main["scores"]["in_distribution"]["student_1_without_y"] == {"a": 0.5}
    assert main["stage_seconds"] == {"train_lofo": 150.0, "eval_lofo": 9.0}  # its file checks are not added
    # merged again after it ran one more family: only what it measured since is added (once counted twice)
    (other / "stage_seconds.json").write_text(json.dumps({"synth": 2.0, "train_lofo": 80.0, "eval_lofo": 12.0}))
    g.merge(main, other)
    g.merge(main, other)
    assert main["stage_seconds"] == {"train_lofo": 180.0, "eval_lofo": 12.0}
    theirs["scores"]["in_distribution"]["base"] = {"a": 1.0}  # the same model scored differently: not merged
    (other / "results.json").write_text(json.dumps(theirs))
    with pytest.raises(SystemExit, match="differently"):
        g.merge(main, other)
    theirs["tasks_commit"] = "abcdef0"
    (other / "results.json").write_text(json.dumps(theirs))
    with pytest.raises(SystemExit, match="not the same experiment"):
        g.merge(main, other)
