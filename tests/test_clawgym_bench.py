"""`--bench clawgym-bench`: ClawGym's published ClawGym-Bench (issue #35).

* from a folder (`--data`, `$CLAWGYM_BENCH_DATA`) or the Hugging Face Hub with the real `huggingface_hub`: a cached
  snapshot is used offline, and a Hub that cannot be reached (or offline mode with nothing cached) is one error
  line naming the dataset, `--data` and the variable, exit 2, no traceback;
* all 200 folders of the shared copy import; the 13 tasks that need the network are marked (the rule, on its own
  sentences too); what the checkers run and import is in the sandbox image, on both backends;
* the report: the tasks scored above 0 ("noop-paid" under the noop agent) and the network tasks apart;
* our own suite's old names (`benchmarks/clawgym-bench`, `$CLAWGYM_BENCH_DIR`) still work, with one deprecation line;
* (slow) the noop agent over all 200 tasks on bwrap and on Docker: 0 infrastructure errors, 0 checker_failed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from clawgym.core.records import CodeCheck, Task, VerifierSpec, WorkspaceFile
from clawgym.evaluation import build_report, load_suite, run_eval
from clawgym.evaluation.clawgym_bench import HUB_REPO, annotate, checker_needs, network_reason
from clawgym.evaluation.report import notes
from clawgym.evaluation.suites import SuiteError
from conftest import REPO, require

# The tasks whose request asks for the network (read by hand: each asks to download, search or install from the
# Internet); the checkers themselves use no network.
NETWORK = {"task_0004", "task_0013", "task_0028", "task_0034", "task_0057", "task_0061", "task_0065", "task_0103",
           "task_0130", "task_0133", "task_0170", "task_0190", "task_0195"}
# The tasks a noop agent is paid on (score above 0), on the image with `python` and `ruby` (none passes).
NOOP_PAID = {"task_0094": 1 / 9, "task_0185": 0.1, "task_0078": 1 / 12, "task_0119": 1 / 14}
HUB_ERROR_TAIL = "give the folder with --data PATH or $CLAWGYM_BENCH_DATA (ClawGym-Agents' RL/data/clawgym_eval)"


@pytest.fixture(scope="module")
def clawgym_eval(datasets) -> Path:
    path = datasets / "clawgym-eval"
    require(path.is_dir(), f"ClawGym-Bench's folders not found at {path}")
    return path


@pytest.fixture(scope="module")
def bench(clawgym_eval):
    return load_suite("clawgym-bench", data=clawgym_eval)


def _folder(root: Path, tid: str, query: str = "Write output/answer.txt with the number 150.") -> Path:
    """A minimal ClawGym task folder (the layout of ClawGym-Agents' RL/data/DATASET_README.md)."""
    d = root / tid
    (d / "reward").mkdir(parents=True)
    (d / "input_files" / "input").mkdir(parents=True)
    (d / "input_files" / "input" / "data.csv").write_text("a\n150\n")
    (d / "data_entry.json").write_text(json.dumps({
        "task_id": tid, "user_query": query, "input_mount_dir": "/root/.openclaw/workspace",
        "metadata": {"category": "", "grading_type": "automated"}}))
    (d / "reward" / "reward.sh").write_text("#!/usr/bin/env bash\npython3 /root/.openclaw/workspace/reward/check.py "
                                            "/root/.openclaw/workspace\n")
    (d / "reward" / "check.py").write_text("import json, sys\nprint(json.dumps({'done': 0.0}))\n")
    return d


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HF_") and k not in ("CLAWGYM_BENCH_DATA", "CLAWGYM_BENCH_DIR", "CLAWGYM_SYNTH_BENCH_DIR")}
    return {**env, **extra}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _eval_cli(*args: str, env: dict[str, str], cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym.cli.app", "eval", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


def _needs_hub():
    require(importlib.util.find_spec("huggingface_hub") is not None,
            "huggingface_hub not installed (pip install 'clawgym[hub]')")


# ------------------------------------------------------------------------------------------ the real bench


def test_all_200_folders_import(bench, clawgym_eval):
    assert bench.name == "clawgym-bench" and bench.source == str(clawgym_eval) and bench.deprecations == []
    assert len(bench.tasks) == 200 and not [n for n in bench.notes if n.startswith("not imported")]
    assert [t.id for t in bench.tasks] == [f"task_{i:04d}" for i in range(200)]
    for t in bench.tasks:
        assert t.source == "clawgym-folder" and t.metadata["benchmark"] == "ClawGym-Bench", t.id
        assert t.workspace.mount_dir == "/root/.openclaw/workspace", t.id  # their reward.sh hard-code it
        assert t.verifier.code.kind == "shell" and t.verifier.code.entry == "bash reward/reward.sh", t.id
        assert t.verifier.rubric is None, t.id


def test_the_tasks_that_need_the_network_are_marked(bench, clawgym_eval):
    marked = {t.id for t in bench.tasks if t.metadata["requires_network"]}
    assert marked == NETWORK
    for t in bench.tasks:
        assert ("network_reason" in t.metadata) == (t.id in NETWORK), t.id
    assert any(n.startswith("13 of 200 tasks need the network") for n in bench.notes)
    offline = load_suite("clawgym-bench-offline", data=clawgym_eval)
    assert len(offline.tasks) == 187 and not {t.id for t in offline.tasks} & NETWORK
    assert any(n.startswith("left out (needs the network): 13 tasks") for n in offline.notes)


def test_what_the_checkers_run_and_import(bench):
    programs = {p for t in bench.tasks for p in t.metadata["checker_programs"]}
    assert programs == {"bash", "python3", "python", "ruby"}
    assert {t.id for t in bench.tasks if "python" in t.metadata["checker_programs"]} == {"task_0112", "task_0119"}
    assert {t.id for t in bench.tasks if "ruby" in t.metadata["checker_programs"]} == {"task_0199"}
    assert {(t.id, m) for t in bench.tasks for m in t.metadata["checker_imports"]} == {("task_0130", "yaml")}


def test_the_sandbox_image_has_what_the_checkers_run(isolated_backend):
    """Every program a ClawGym-Bench checker runs and every module it imports, in the sandbox image (bwrap and
    Docker): `python` and `ruby` were added to the image for tasks 0112, 0119 and 0199."""
    from clawgym.core.records import WorkspaceSpec

    sb = isolated_backend.start(WorkspaceSpec(mount_dir="/root/.openclaw/workspace"))
    try:
        for prog in ("bash", "python3", "python", "ruby"):
            assert sb.exec(["sh", "-c", f"command -v {prog}"]).ok, prog
        assert sb.exec(["python", "-c", "import sys; assert sys.version_info >= (3, 10)"]).ok
        assert sb.exec(["python3", "-c", "import yaml; yaml.safe_load('a: 1')"]).ok
        assert sb.exec(["ruby", "-e", "puts [1, 2].sum"]).stdout.strip() == "3"
    finally:
        sb.stop()


# ---------------------------------------------------------------------------------------- the network rule


@pytest.mark.parametrize("text, needs", [
    ("1) Internet step (essential): download the mapping.", True),
    ("Add requirements.txt (use Internet to install): Pillow.", True),
    ("Target content (Internet, required):\n- the MDN page", True),
    ("Internet retrieval is mandatory for both pages.", True),
    ("- Use a search engine to find official guidance.", True),
    ("1) Download the Iris data file from the official UCI repository.", True),
    ("Do not use the Internet; rely only on the provided files.", False),
    ("Use only the local inputs above; no Internet access is required.", False),
    ("Do not fetch anything from the Internet.", False),
    ("Work entirely offline; no internet lookups.", False),
    ("Everything must be derived from the provided inputs without using the Internet.", False),
    ("Before I take my laptop to the town's internet café and publish the site, check it.", False),
    ("Do not download large files; just capture the URL.", False),
    ("Generate https://www.property.com.au/ URLs from input/requests.json.", False),
    ("Flag scripts that pipe curl/wget to sh or bash.", False),
])
def test_the_network_rule_on_requests(text, needs):
    task = Task(id="t", instruction=text, verifier=VerifierSpec(code=CodeCheck(kind="shell", entry="true")))
    assert (network_reason(task) is not None) is needs


def _checker_task(path: str, text: str) -> Task:
    code = CodeCheck(kind="shell", entry="bash reward/reward.sh", files=[WorkspaceFile(path=path, content=text)])
    return Task(id="t", instruction="Write a.txt.", verifier=VerifierSpec(code=code))


@pytest.mark.parametrize("path, text, needs", [
    ("reward/check.py", "import requests\nrequests.get('https://example.com')\n", True),
    ("reward/check.py", "from urllib.request import urlopen\n", True),
    ("reward/check.py", "import subprocess\nsubprocess.run(['curl', '-s', 'https://example.com'])\n", True),
    ("reward/fetch.sh", "set -e\ncurl -sf https://example.com/x > /tmp/x\n", True),
    ("reward/check.py", "from urllib.parse import quote\nimport re\nre.search(r'(curl|wget).*[|] *sh', 'x')\n", False),
    ("reward/check.py", "import subprocess, sys\nsubprocess.run([sys.executable, 'tool.py'])\n", False),
])
def test_the_network_rule_on_checkers(path, text, needs):
    task = _checker_task(path, text)
    assert (checker_needs(task)["network"] is not None) is needs
    assert annotate(task).metadata["requires_network"] is needs


def test_checker_programs_and_imports_are_read_from_the_code():
    text = ("import subprocess, sys, yaml\nimport numpy.linalg\nsubprocess.run(['ruby', 'x.rb'])\n"
            "subprocess.run([sys.executable, 'a.py'])\nsubprocess.check_output('node x.js', shell=True)\n")
    needs = checker_needs(_checker_task("reward/check.py", text))
    assert needs["programs"] == ["bash", "node", "python3", "ruby"]
    assert needs["imports"] == ["numpy", "yaml"]


# ------------------------------------------------------------------------------------------ where from


def test_data_env_and_nested_folders(tmp_path, monkeypatch):
    for tid in ("task_0000", "task_0001"):
        _folder(tmp_path / "checkout" / "RL" / "data" / "clawgym_eval", tid)
    monkeypatch.setenv("CLAWGYM_BENCH_DATA", str(tmp_path / "checkout"))  # three levels above the task folders
    suite = load_suite("clawgym-bench")
    assert [t.id for t in suite.tasks] == ["task_0000", "task_0001"]
    assert suite.source == str(tmp_path / "checkout" / "RL" / "data" / "clawgym_eval")
    other = tmp_path / "other"
    _folder(other, "task_0009")
    assert [t.id for t in load_suite("clawgym-bench", data=other).tasks] == ["task_0009"]  # --data wins
    with pytest.raises(SuiteError, match=r"--data .*: not a directory"):
        load_suite("clawgym-bench", data=tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SuiteError, match="no ClawGym task folders"):
        load_suite("clawgym-bench", data=tmp_path / "empty")
    with pytest.raises(SuiteError, match="--data is for --bench clawgym-bench"):
        load_suite("synth-bench-200", data=other)
    monkeypatch.setenv("CLAWGYM_BENCH_DIR", str(REPO / "benchmarks" / "synth-bench-200"))  # the old variable
    assert load_suite("clawgym-bench", data=other).deprecations == []  # not in the way when the data is given


def test_hub_unreachable_is_one_error_line(tmp_path):
    """The real huggingface_hub against a Hub that does not answer (a closed local port as HF_ENDPOINT, so the
    test means the same with or without internet) and an empty cache."""
    _needs_hub()
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    env = _env(HF_HUB_CACHE=str(tmp_path / "cache"), HF_ENDPOINT=endpoint)
    done = _eval_cli("--bench", "clawgym-bench", "--agent", "noop", "-o", str(tmp_path / "run"), env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: clawgym-bench: cannot reach the Hugging Face Hub at {endpoint} for the dataset {HUB_REPO}, and it "
        "is not in the Hugging Face cache (set HF_ENDPOINT to a reachable mirror, or HF_HOME to a cache that holds "
        f"it); {HUB_ERROR_TAIL}"]
    assert not (tmp_path / "run").exists()


def test_hub_offline_mode_without_a_cached_copy_is_one_error_line(tmp_path):
    _needs_hub()
    env = _env(HF_HUB_CACHE=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")
    done = _eval_cli("--bench", "clawgym-bench", "--agent", "noop", "-o", str(tmp_path / "run"), env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: clawgym-bench: the dataset {HUB_REPO} is not in the Hugging Face cache and HF_HUB_OFFLINE is set "
        f"(unset it where the Hub is reachable); {HUB_ERROR_TAIL}"]


def test_the_old_variable_is_named_in_the_hub_error(tmp_path):
    """$CLAWGYM_BENCH_DIR named our own suite's folder: with `clawgym-bench` it is not used, and when the bench
    cannot be found the one error line says so."""
    _needs_hub()
    env = _env(HF_HUB_CACHE=str(tmp_path / "cache"), HF_HUB_OFFLINE="1",
               CLAWGYM_BENCH_DIR=str(REPO / "benchmarks" / "synth-bench-200"))
    done = _eval_cli("--bench", "clawgym-bench", "--agent", "noop", "-o", str(tmp_path / "run"), env=env)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.strip().endswith("($CLAWGYM_BENCH_DIR is deprecated and ignored here: it names our own "
                                        "suite, now --bench synth-bench-200; clawgym-bench is ClawGym's published "
                                        "ClawGym-Bench)")


@pytest.mark.parametrize("offline", [True, False])
def test_a_cached_hub_snapshot_is_used(tmp_path, offline):
    """A snapshot in the Hugging Face cache (the layout snapshot_download keeps: refs/main names the commit,
    snapshots/COMMIT holds the files) is what `clawgym-bench` loads, in offline mode and when the Hub cannot be
    reached; the revision is recorded as the suite's source."""
    _needs_hub()
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "cache" / ("datasets--" + HUB_REPO.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    for tid in ("task_0000", "task_0001"):
        _folder(repo / "snapshots" / commit / "clawgym_eval", tid)
    env = _env(HF_HUB_CACHE=str(tmp_path / "cache"),
               **({"HF_HUB_OFFLINE": "1"} if offline else {"HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}))
    code = ("import json; from clawgym.evaluation import load_suite; s = load_suite('clawgym-bench'); "
            "print(json.dumps({'source': s.source, 'ids': [t.id for t in s.tasks], 'notes': s.notes}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["ids"] == ["task_0000", "task_0001"]
    assert got["source"] == f"hf://datasets/{HUB_REPO}@{commit}/clawgym_eval"
    assert any(f"at revision {commit}" in n for n in got["notes"])


# ------------------------------------------------------------------------------------------ the report


def test_the_report_counts_noop_paid_and_network_tasks():
    from test_eval import _traj

    v = VerifierSpec(code=CodeCheck(kind="shell", entry="true"))
    tasks = [Task(id=i, instruction="x", verifier=v, metadata={"requires_network": i == "c"}) for i in "abcd"]
    trajs = [_traj("a", 0, 0.25), _traj("b", 0, 0.0), _traj("c", 0, 0.0), _traj("d", 0, None, "infra_error")]
    r = build_report("clawgym-bench", tasks, trajs, 1, {"agent": "noop"})
    o = r["overall"]
    assert (o["tasks_scored"], o["tasks_above_zero"], o["tasks_passed"]) == (3, 1, 0)
    assert r["scored_above_zero"] == [{"id": "a", "mean_score": 0.25}]
    assert r["requires_network"]["ids"] == ["c"] and r["requires_network"]["mean_score"] == 0.0
    assert r["requires_network"]["others"]["mean_score"] == pytest.approx(0.125)
    lines = notes(r)
    assert lines[0] == ("noop-paid: the noop agent, which does nothing, scores above 0 on 1 of 3 tasks (33.3%) and "
                        "passes 0 (0.0%): a 0.250 (ClawGym's filter wants 0).")
    assert lines[1].startswith("1 task(s) need the network (requires_network)")
    r = build_report("s", tasks, trajs, 1, {"agent": "llm"})
    assert notes(r)[0] == "tasks scored above 0: 1 of 3 (33.3%); tasks passed: 0 (0.0%)."


# ------------------------------------------------------------------------------------- our suite's old names


def test_the_old_names_of_our_own_suite_still_work(monkeypatch):
    monkeypatch.chdir(REPO)
    for spec in ("benchmarks/clawgym-bench/tasks.jsonl", "benchmarks/clawgym-bench"):
        suite = load_suite(spec)
        assert suite.name == "synth-bench-200" and len(suite.tasks) == 200
        assert suite.deprecations == [f"{spec} is deprecated: our own suite moved to benchmarks/synth-bench-200 "
                                      "(--bench synth-bench-200)"]
    monkeypatch.setenv("CLAWGYM_BENCH_DIR", str(REPO / "benchmarks" / "synth-bench-200"))
    suite = load_suite("synth-bench-200")
    assert len(suite.tasks) == 200 and len(suite.deprecations) == 1
    assert suite.deprecations[0].startswith("$CLAWGYM_BENCH_DIR is deprecated")
    monkeypatch.setenv("CLAWGYM_SYNTH_BENCH_DIR", str(REPO / "benchmarks" / "synth-bench-200"))
    assert load_suite("synth-bench-200").deprecations == []  # the new variable wins, silently


def test_the_old_bench_path_on_the_command_line_says_so_in_one_line(bwrap_backend, tmp_path):
    done = _eval_cli("--bench", "benchmarks/clawgym-bench", "--agent", "noop", "--limit", "1", "--sandbox", "bwrap",
                     "-o", str(tmp_path / "run"), env=_env())
    assert done.returncode == 0, done.stderr[-2000:]
    deprecated = [ln for ln in done.stderr.splitlines() if "deprecated" in ln]
    assert deprecated == ["deprecated: benchmarks/clawgym-bench is deprecated: our own suite moved to "
                          "benchmarks/synth-bench-200 (--bench synth-bench-200)"]
    assert json.loads((tmp_path / "run" / "report.json").read_text())["suite"] == "synth-bench-200"


# ------------------------------------------------------------------------------------------ slow: all 200


@pytest.mark.slow
@pytest.mark.parametrize("backend_name", ["bwrap", "docker"])
def test_noop_on_all_200_tasks_every_checker_runs(bench, backend_name, request, tmp_path):
    """The noop agent on ClawGym-Bench: every episode scored by its own checker (0 infrastructure errors, 0
    checker_failed), and only the known few tasks pay a do-nothing agent anything (none passes)."""
    from clawgym.rollout import RolloutOptions
    from clawgym.rollout.setup import AgentSpec

    backend = request.getfixturevalue(f"{backend_name}_backend")
    report = run_eval(bench, AgentSpec(name="noop"), backend, tmp_path / "run", RolloutOptions(jobs=4), chart=False)
    o = report["overall"]
    assert o["tasks"] == 200 and o["scored"] == 200 and o["infra_errors"] == 0 and o["unscored"] == 0
    verdicts = [json.loads(x)["verdict"] for x in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    assert len(verdicts) == 200 and {v["status"] for v in verdicts} == {"scored"}  # no checker_failed
    assert o["tasks_passed"] == 0
    assert {p["id"]: p["mean_score"] for p in report["scored_above_zero"]} == pytest.approx(NOOP_PAID)
    assert report["requires_network"]["tasks"] == 13
