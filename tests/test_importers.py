"""Importers of ClawGym task folders and PinchBench task files, on the real third-party data.

The data lives outside the repository in ../shared/datasets (override with CLAWGYM_DATASETS); tests that need
it skip cleanly where it is absent. Bad-input tests work on writable copies in tmp_path.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from clawgym.core.records import Task, WorkspaceFile
from clawgym.importers import ImportResult, import_clawgym, import_pinchbench
from clawgym.importers.pinchbench import REQUIRES_NETWORK

DATASETS = Path(
    os.environ.get("CLAWGYM_DATASETS") or Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
)
CLAWGYM = DATASETS / "clawgym-train-sample"
PINCHBENCH = DATASETS / "pinchbench-v1"

needs_clawgym = pytest.mark.skipif(not CLAWGYM.is_dir(), reason=f"ClawGym sample not found at {CLAWGYM}")
needs_pinchbench = pytest.mark.skipif(
    not PINCHBENCH.is_dir(), reason=f"PinchBench v1 not found at {PINCHBENCH}"
)

CLAWGYM_MOUNT = "/root/.openclaw/workspace"
PINCHBENCH_NETWORK = {
    "task_02_stock",
    "task_06_events",
    "task_13_image_gen",
    "task_14_humanizer",
    "task_18_market_research",
}


# --------------------------------------------------------------------------------------------- helpers


def file_bytes(f: WorkspaceFile) -> bytes:
    """The exact bytes an inlined WorkspaceFile stands for."""
    if f.content is not None:
        return f.content.encode("utf-8")
    assert f.content_b64 is not None, f"{f.path} is not inlined"
    return base64.b64decode(f.content_b64)


def writable_copy(src: Path, dst: Path) -> Path:
    """Copy a tree (the shared data is read-only) and make the copy writable, keeping executable bits."""
    if src.is_dir():
        shutil.copytree(src, dst)
        for dirpath, _, filenames in os.walk(dst):
            for p in [Path(dirpath), *(Path(dirpath) / n for n in filenames)]:
                p.chmod(p.stat().st_mode | stat.S_IWUSR)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    return dst


def assert_round_trips(result: ImportResult) -> None:
    for task in result.tasks:
        assert Task.model_validate_json(task.model_dump_json()) == task


def clawgym_folders() -> list[Path]:
    return sorted(p for p in CLAWGYM.iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def clawgym() -> ImportResult:
    return import_clawgym(CLAWGYM)


@pytest.fixture(scope="module")
def pinchbench() -> ImportResult:
    return import_pinchbench(PINCHBENCH)


@pytest.fixture
def clawgym_copy(tmp_path: Path) -> Path:
    """Three real ClawGym task folders in a writable folder."""
    root = tmp_path / "clawgym"
    for folder in clawgym_folders()[:3]:
        writable_copy(folder, root / folder.name)
    return root


@pytest.fixture
def pinchbench_copy(tmp_path: Path) -> Path:
    """A writable PinchBench checkout with three real tasks and the assets."""
    root = tmp_path / "pinchbench"
    for name in ("task_00_sanity.md", "task_03_blog.md", "task_16_email_triage.md"):
        writable_copy(PINCHBENCH / "tasks" / name, root / "tasks" / name)
    writable_copy(PINCHBENCH / "assets", root / "assets")
    return root


# --------------------------------------------------------------------------------------------- ClawGym


@needs_clawgym
def test_clawgym_all_tasks_import(clawgym: ImportResult) -> None:
    folders = clawgym_folders()
    assert len(folders) == 30
    assert clawgym.failures == []
    assert [t.id for t in clawgym.tasks] == [f.name for f in folders]
    for task, folder in zip(clawgym.tasks, folders, strict=True):
        entry = json.loads((folder / "data_entry.json").read_text(encoding="utf-8"))
        assert task.source == "clawgym-folder"
        assert task.instruction == entry["user_query"]
        assert task.category == entry["metadata"]["category"]
        assert task.timeout_seconds == 600
        assert task.workspace.mount_dir == CLAWGYM_MOUNT
        assert task.metadata["folder"] == folder.name
        assert task.metadata["grading_type"] == "automated"
        assert task.metadata["input_mount_dir_given"] == ("input_mount_dir" in entry)
        assert task.verifier.rubric is None


@needs_clawgym
def test_clawgym_mount_dir_defaults_when_absent(clawgym: ImportResult) -> None:
    # task_0176 is the one sample task whose data_entry.json has no input_mount_dir.
    task = next(t for t in clawgym.tasks if t.id == "task_0176")
    assert task.metadata["input_mount_dir_given"] is False
    assert task.workspace.mount_dir == CLAWGYM_MOUNT
    assert task.workspace.files == []  # it has no input_files/ either


@needs_clawgym
def test_clawgym_reward_files(clawgym: ImportResult) -> None:
    for task, folder in zip(clawgym.tasks, clawgym_folders(), strict=True):
        code = task.verifier.code
        assert code is not None and code.kind == "shell"
        assert code.entry == "bash reward/reward.sh"
        assert code.subscores_entry == 'python3 reward/check.py "$PWD"'
        assert code.timeout_seconds == 120
        by_path = {f.path: f for f in code.files}
        on_disk = sorted(
            "reward/" + p.relative_to(folder / "reward").as_posix() for p in (folder / "reward").rglob("*")
        )
        assert sorted(by_path) == on_disk
        assert by_path["reward/reward.sh"].mode == 0o755
        for path, f in by_path.items():
            assert file_bytes(f) == (folder / path).read_bytes()


@needs_clawgym
def test_clawgym_input_files_round_trip_byte_exact(clawgym: ImportResult) -> None:
    for task, folder in zip(clawgym.tasks, clawgym_folders(), strict=True):
        base = folder / "input_files"
        on_disk = (
            sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())
            if base.is_dir()
            else []
        )
        assert sorted(f.path for f in task.workspace.files) == on_disk
        for f in task.workspace.files:
            assert file_bytes(f) == (base / f.path).read_bytes()
    # One file picked by hand, through the JSON round trip as well.
    task = next(t for t in clawgym.tasks if t.id == "task_0098")
    again = Task.model_validate_json(task.model_dump_json())
    csv = next(f for f in again.workspace.files if f.path == "input/watchlist.csv")
    assert file_bytes(csv) == (CLAWGYM / "task_0098" / "input_files" / "input" / "watchlist.csv").read_bytes()


@needs_clawgym
def test_clawgym_tasks_round_trip_json(clawgym: ImportResult) -> None:
    assert_round_trips(clawgym)


@needs_clawgym
def test_clawgym_single_task_folder() -> None:
    result = import_clawgym(CLAWGYM / "task_0308")
    assert result.failures == []
    assert [t.id for t in result.tasks] == ["task_0308"]


@needs_clawgym
def test_clawgym_binary_executable_and_empty_dir(clawgym_copy: Path) -> None:
    folder = sorted(clawgym_copy.iterdir())[0]
    blob = bytes(range(256)) * 3  # not valid UTF-8
    (folder / "input_files" / "data.bin").write_bytes(blob)
    script = folder / "input_files" / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    (folder / "input_files" / "out" / "empty").mkdir(parents=True)

    result = import_clawgym(folder)
    assert result.failures == []
    (task,) = result.tasks
    files = {f.path: f for f in Task.model_validate_json(task.model_dump_json()).workspace.files}
    assert files["data.bin"].content is None and file_bytes(files["data.bin"]) == blob
    assert files["run.sh"].mode == 0o755 and files["run.sh"].content == "#!/bin/sh\necho hi\n"
    assert task.workspace.directories == ["out/empty"]


@needs_clawgym
def test_clawgym_missing_reward_sh(clawgym_copy: Path) -> None:
    broken = sorted(clawgym_copy.iterdir())[1]
    (broken / "reward" / "reward.sh").unlink()
    result = import_clawgym(clawgym_copy)
    assert len(result.tasks) == 2 and broken.name not in {t.id for t in result.tasks}
    (failure,) = result.failures
    assert failure.message == "no reward/reward.sh"
    assert failure.path == str(broken / "reward" / "reward.sh")


@needs_clawgym
def test_clawgym_malformed_data_entry_names_file_and_line(clawgym_copy: Path) -> None:
    broken = sorted(clawgym_copy.iterdir())[0]
    (broken / "data_entry.json").write_text('{\n  "task_id": "x",\n  "user_query": oops\n}\n')
    result = import_clawgym(clawgym_copy)
    assert len(result.tasks) == 2
    (failure,) = result.failures
    assert failure.path == str(broken / "data_entry.json")
    assert "line 3" in failure.message
    assert str(failure).startswith(str(broken / "data_entry.json"))


@needs_clawgym
def test_clawgym_missing_data_entry_empty_query_duplicate_id(clawgym_copy: Path) -> None:
    first, second, third = sorted(clawgym_copy.iterdir())
    (first / "data_entry.json").unlink()
    entry = json.loads((second / "data_entry.json").read_text())
    (second / "data_entry.json").write_text(json.dumps({**entry, "user_query": "  "}))
    entry = json.loads((third / "data_entry.json").read_text())
    dup = clawgym_copy / "zz_duplicate"
    writable_copy(third, dup)
    (dup / "data_entry.json").write_text(json.dumps(entry))

    result = import_clawgym(clawgym_copy)
    assert [t.id for t in result.tasks] == [entry["task_id"]]
    reasons = {Path(f.path).parent.name: f.message for f in result.failures}
    assert reasons[first.name] == "no data_entry.json"
    assert reasons[second.name] == "user_query missing or empty"
    assert "already imported" in reasons["zz_duplicate"]


@needs_clawgym
def test_clawgym_grading_type_and_timeout_from_data_entry(clawgym_copy: Path) -> None:
    folder = sorted(clawgym_copy.iterdir())[0]
    entry = json.loads((folder / "data_entry.json").read_text())
    entry["metadata"]["grading_type"] = "hybrid"
    entry["timeout_seconds"] = 900
    entry["difficulty"] = "hard"
    (folder / "data_entry.json").write_text(json.dumps(entry))
    (task,) = import_clawgym(folder).tasks
    assert task.timeout_seconds == 900
    assert task.metadata["grading_type"] == "hybrid" and "grading_note" in task.metadata
    assert task.metadata["difficulty"] == "hard"


# --------------------------------------------------------------------------------------------- PinchBench


@needs_pinchbench
def test_pinchbench_all_but_task_20_import(pinchbench: ImportResult) -> None:
    stems = sorted(p.stem for p in (PINCHBENCH / "tasks").glob("task_*.md"))
    assert len(stems) == 23
    assert [t.id for t in pinchbench.tasks] == [s for s in stems if s != "task_20_eli5_pdf_summary"]
    (failure,) = pinchbench.failures
    assert failure.path == str(PINCHBENCH / "tasks" / "task_20_eli5_pdf_summary.md")
    assert "GPT4.pdf" in failure.message and "missing asset" in failure.message
    for task in pinchbench.tasks:
        assert task.source == "pinchbench"
        assert task.workspace.mount_dir == "/workspace"
        assert task.instruction and not task.instruction.endswith("---")


@needs_pinchbench
def test_pinchbench_tasks_round_trip_json(pinchbench: ImportResult) -> None:
    assert_round_trips(pinchbench)
    assert_round_trips(import_pinchbench(PINCHBENCH, inline_assets=False, assets_base=PINCHBENCH))


@needs_pinchbench
def test_pinchbench_ids_keyed_by_file_stem(pinchbench: ImportResult) -> None:
    tasks = {t.id: t for t in pinchbench.tasks}
    assert tasks["task_18_market_research"].metadata["pinchbench_id"] == "task_16_market_research"
    assert tasks["task_19_spreadsheet_summary"].metadata["pinchbench_id"] == "task_18_spreadsheet_summary"
    assert tasks["task_19_spreadsheet_summary"].metadata["name"] == "CSV and Excel Data Summarization"
    assert "task_16_market_research" not in tasks  # the front-matter id never becomes a task id


@needs_pinchbench
def test_pinchbench_verifier_by_grading_type(pinchbench: ImportResult) -> None:
    for task in pinchbench.tasks:
        kind = task.metadata["grading_type"]
        v = task.verifier
        assert (v.code is not None) == (kind in ("automated", "hybrid")), task.id
        assert (v.rubric is not None) == (kind in ("llm_judge", "hybrid")), task.id
        if v.code is not None:
            assert v.code.kind == "python" and "def grade(" in (v.code.source or "")
            assert v.code.timeout_seconds == 120
        if kind == "hybrid":
            assert v.code_weight is not None and v.rubric_weight is not None  # never clawgym's 0.7/0.3
    sanity = next(t for t in pinchbench.tasks if t.id == "task_00_sanity")
    assert sanity.timeout_seconds == 60


@needs_pinchbench
def test_pinchbench_hybrid_weights(pinchbench: ImportResult) -> None:
    tasks = {t.id: t for t in pinchbench.tasks}
    triage = tasks["task_16_email_triage"].verifier
    assert (triage.code_weight, triage.rubric_weight) == (0.4, 0.6)
    assert triage.weights() == pytest.approx((0.4, 0.6))
    assert tasks["task_16_email_triage"].metadata["grading_weights"] == {"automated": 0.4, "llm_judge": 0.6}
    sheet = tasks["task_19_spreadsheet_summary"].verifier
    assert (sheet.code_weight, sheet.rubric_weight) == (0.6, 0.4)
    workflow = tasks["task_10_workflow"].verifier  # hybrid without grading_weights: PinchBench's 0.5/0.5
    assert (workflow.code_weight, workflow.rubric_weight) == (0.5, 0.5)


@needs_pinchbench
def test_pinchbench_rubric_rules(pinchbench: ImportResult) -> None:
    tasks = {t.id: t for t in pinchbench.tasks}
    rubric = tasks["task_16_email_triage"].verifier.rubric
    assert rubric is not None
    assert [r.name for r in rubric.rules] == [
        "Priority Assignment Accuracy",
        "Categorization Quality",
        "Action Recommendations",
        "Contextual Awareness and Connections",
        "Report Structure and Usability",
    ]
    assert [r.weight for r in rubric.rules] == pytest.approx([0.3, 0.15, 0.25, 0.15, 0.15])
    assert set(rubric.rules[0].scores) == {"1.0", "0.75", "0.5", "0.25", "0.0"}
    assert rubric.text and rubric.text.startswith("### Criterion 1: Priority Assignment Accuracy")
    assert rubric.expected_behavior
    for task in pinchbench.tasks:
        if task.verifier.rubric is not None:
            rules = task.verifier.rubric.rules
            assert rules and sum(r.weight for r in rules) == pytest.approx(1.0), task.id
            assert all(r.scores.get("1.0") and "0.0" in r.scores for r in rules), task.id
    # task_22 uses other bands (0.8, 0.6, ...) and a multi-line 1.0 anchor.
    facts = tasks["task_22_second_brain"].verifier.rubric.rules[3]
    assert set(facts.scores) == {"1.0", "0.8", "0.6", "0.4", "0.2", "0.0"}
    assert "purple elephant sunrise" in facts.scores["1.0"]


@needs_pinchbench
def test_pinchbench_assets_inlined_byte_exact(pinchbench: ImportResult) -> None:
    task = next(t for t in pinchbench.tasks if t.id == "task_19_spreadsheet_summary")
    files = {f.path: f for f in Task.model_validate_json(task.model_dump_json()).workspace.files}
    assert files["quarterly_sales.csv"].content is not None
    assert (
        file_bytes(files["quarterly_sales.csv"])
        == (PINCHBENCH / "assets" / "quarterly_sales.csv").read_bytes()
    )
    assert files["company_expenses.xlsx"].content_b64 is not None
    assert (
        file_bytes(files["company_expenses.xlsx"])
        == (PINCHBENCH / "assets" / "company_expenses.xlsx").read_bytes()
    )
    assert task.workspace.assets_dir is None


@needs_pinchbench
def test_pinchbench_assets_by_reference_from_tasks_dir() -> None:
    # linked assets are relative to the directory of the tasks file to be written, here the checkout
    result = import_pinchbench(PINCHBENCH / "tasks", inline_assets=False, assets_base=PINCHBENCH)
    assert len(result.tasks) == 22 and len(result.failures) == 1
    task = next(t for t in result.tasks if t.id == "task_21_openclaw_comprehension")
    (f,) = task.workspace.files
    assert (f.path, f.source) == (
        "openclaw_report.pdf",
        "OpenClaw Agent Use Cases and Gap Analysis for PinchBench.pdf",
    )
    assert task.workspace.assets_dir == "assets"
    assert (PINCHBENCH / task.workspace.assets_dir / f.source).is_file()


@needs_pinchbench
def test_pinchbench_inline_content_files(pinchbench: ImportResult) -> None:
    task = next(t for t in pinchbench.tasks if t.id == "task_16_email_triage")
    assert [f.path for f in task.workspace.files] == [f"inbox/email_{i:02d}.txt" for i in range(1, 14)]
    assert task.workspace.files[0].content.startswith("From: cto@mycompany.com (David Park, CTO)\n")


@needs_pinchbench
def test_pinchbench_requires_network(pinchbench: ImportResult) -> None:
    assert set(REQUIRES_NETWORK) == PINCHBENCH_NETWORK
    flagged = {t.id for t in pinchbench.tasks if t.metadata["requires_network"]}
    assert flagged == PINCHBENCH_NETWORK


@needs_pinchbench
def test_pinchbench_metadata(pinchbench: ImportResult) -> None:
    tasks = {t.id: t for t in pinchbench.tasks}
    triage = tasks["task_16_email_triage"]
    assert triage.category == "organization" and triage.timeout_seconds == 240
    assert len(triage.metadata["grading_criteria"]) == 12
    assert all(not c.startswith("- [") for c in triage.metadata["grading_criteria"])
    assert triage.metadata["additional_notes"]
    assert "additional_notes" not in tasks["task_00_sanity"].metadata
    # A trailing section separator (---) is not part of the prompt.
    assert tasks["task_19_spreadsheet_summary"].instruction.endswith("combining findings from both files.")


@needs_pinchbench
def test_pinchbench_multi_session(pinchbench: ImportResult) -> None:
    task = next(t for t in pinchbench.tasks if t.id == "task_22_second_brain")
    # PinchBench sends every session prompt in order and never the placeholder `## Prompt` text.
    assert task.instruction.startswith("I want you to remember this important information for me.")
    assert [(s.id, s.new_session) for s in task.sessions] == [
        ("conversation", False),
        ("new_session_recall", True),
    ]
    assert task.sessions[0].prompt.startswith("What programming language am I learning?")
    assert task.metadata["first_session_id"] == "store_knowledge"
    assert task.metadata["prompt_section"].startswith("This is a multi-session task.")
    assert all(not t.sessions for t in pinchbench.tasks if t.id != "task_22_second_brain")


@needs_pinchbench
def test_pinchbench_broken_yaml_names_file_and_line(pinchbench_copy: Path) -> None:
    path = pinchbench_copy / "tasks" / "task_03_blog.md"
    lines = path.read_text().split("\n")
    assert lines[0] == "---" and lines[1].startswith("id:")
    lines[3] = "category: writing: oops"  # file line 4
    path.write_text("\n".join(lines))
    result = import_pinchbench(pinchbench_copy)
    assert [t.id for t in result.tasks] == ["task_00_sanity", "task_16_email_triage"]
    (failure,) = result.failures
    assert failure.path == str(path)
    assert "invalid YAML front matter at line 4" in failure.message


@needs_pinchbench
def test_pinchbench_missing_prompt(pinchbench_copy: Path) -> None:
    path = pinchbench_copy / "tasks" / "task_00_sanity.md"
    path.write_text(path.read_text().replace("## Prompt", "## Promt"))
    result = import_pinchbench(pinchbench_copy)
    assert [t.id for t in result.tasks] == ["task_03_blog", "task_16_email_triage"]
    (failure,) = result.failures
    assert failure.path == str(path) and "Prompt" in failure.message


@needs_pinchbench
@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("def grade(", "def grade_it(", "no grade() function"),
        ("def grade(transcript: list, workspace_path: str) -> dict:", "def grade(:", "does not parse"),
        ("## Automated Checks", "## Automatic Checks", "no '## Automated Checks' section"),
        ("grading_type: automated", "grading_type: vibes", "unknown grading_type 'vibes'"),
    ],
)
def test_pinchbench_bad_automated_task(pinchbench_copy: Path, old: str, new: str, reason: str) -> None:
    path = pinchbench_copy / "tasks" / "task_00_sanity.md"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    result = import_pinchbench(pinchbench_copy)
    assert [t.id for t in result.tasks] == ["task_03_blog", "task_16_email_triage"]
    (failure,) = result.failures
    assert failure.path == str(path) and reason in failure.message


@needs_pinchbench
def test_pinchbench_syntax_error_line_is_a_file_line(pinchbench_copy: Path) -> None:
    path = pinchbench_copy / "tasks" / "task_00_sanity.md"
    lines = path.read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("def grade("))
    lines[at] = "def grade(:"
    path.write_text("\n".join(lines))
    (failure,) = import_pinchbench(pinchbench_copy).failures
    assert f"line {at + 1}" in failure.message


def test_missing_roots_are_failures(tmp_path: Path) -> None:
    for result in (import_clawgym(tmp_path / "nope"), import_pinchbench(tmp_path / "nope")):
        assert result.tasks == [] and [f.message for f in result.failures] == ["not a directory"]
