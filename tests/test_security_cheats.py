"""Attacks on the synthesizers' rewards and on `clawgym synth` itself (issue 17, items 16 and 14).

* Trivial cheats (every output file written empty; the first input file copied to every output path; the
  request's own text written into every output path) must not collect reward: generate_from_template paid
  half the score to the echoed request ("one file per active row" and "no placeholders left" counted files
  with nothing right in them), and validation never tried a cheat, so a generator whose format checks pay on
  their own would ship its tasks.
* `kill -9` of `clawgym synth` left its validation workers running, with their sandboxes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawgym.core.records import Task
from clawgym.sandbox.disk import mounts_under, unmount
from clawgym.synth.ops.base import Check
from clawgym.synth.ops.clean_data import CleanData
from clawgym.synth.pipeline import make_candidates, synthesize
from clawgym.workspace.materialize import materialize

REPO = Path(__file__).resolve().parents[1]
CLAWGYM = Path(sys.executable).with_name("clawgym")


def _grade_on_host(task: Task, ws: Path) -> float:
    """The task's grade() (rendered from its checks: our own stdlib-only source) run here on `ws`: the mean of its
    checks."""
    from clawgym.checks import render_grade_source

    ns: dict = {}
    exec(compile(render_grade_source(task), "grade.py", "exec"), ns)
    scores = ns["grade"]([], str(ws))
    return sum(scores.values()) / len(scores)


def _written_paths(task: Task) -> list[str]:
    return sorted({str(s.arguments["path"]) for s in task.reference.steps if s.name in ("write", "edit")})


def _echo_request(task: Task, ws: Path) -> None:
    """The cheat itself, written independently of clawgym.synth.cheats: the request into every output path."""
    materialize(task.workspace, ws)
    for p in _written_paths(task):
        (ws / p).parent.mkdir(parents=True, exist_ok=True)
        (ws / p).write_text(task.instruction, encoding="utf-8")


def test_echo_request_cheat_scores_below_0_3_on_generate_from_template(tmp_path):
    # standalone (letters, certificates, invoices, mail merges) and chained (a notice per row of a cleaned table)
    keys = [(i, 0) for i in range(40)]
    cands = [c for _, _, c in make_candidates(4242, keys, operations=["generate_from_template"], max_ops=1)]
    cands += [c for _, _, c in make_candidates(4242, keys, operations=["clean_data", "generate_from_template"],
                                               max_ops=2)]
    tasks = [c.task for c in cands if not isinstance(c, Exception) and "generate_from_template" in c.task.operations]
    assert len(tasks) >= 50
    assert any(len(t.operations) == 2 for t in tasks) and any(len(t.operations) == 1 for t in tasks)
    assert any(p.endswith(".eml") for t in tasks for p in _written_paths(t))  # mail merges among them
    scores = {}
    for n, t in enumerate(tasks):
        ws = tmp_path / str(n)
        _echo_request(t, ws)
        scores[f"{n}:{t.id}:{'+'.join(t.operations)}"] = _grade_on_host(t, ws)
    high = {k: round(v, 3) for k, v in scores.items() if v >= 0.3}
    assert not high, f"the echoed request scores >= 0.3 on {len(high)} of {len(scores)} tasks: {high}"
    assert sum(scores.values()) / len(scores) < 0.1


def test_generate_from_template_format_checks_count_only_right_content(tmp_path):
    """The data file copied into every output (each file then holds every row's values) earns nothing for
    format either: a file counts for "one file per row" and "no placeholders left" only when it holds its
    own row's values and no other row's."""
    cands = [c for _, _, c in make_candidates(4242, [(i, 0) for i in range(30)],
                                              operations=["generate_from_template"], max_ops=1)]
    tried = 0
    for c in cands:
        t = c.task
        data = next((f for f in t.workspace.files if f.path.endswith((".csv", ".json"))), None)
        if data is None:
            continue
        ws = tmp_path / t.id
        materialize(t.workspace, ws)
        for p in _written_paths(t):
            (ws / p).parent.mkdir(parents=True, exist_ok=True)
            (ws / p).write_text(data.content, encoding="utf-8")
        assert _grade_on_host(t, ws) < 0.3, t.id
        tried += 1
    assert tried >= 20


class _WeakCleanData(CleanData):
    """clean_data with two extra checks that only look at the output's existence: the kind of format check
    that pays a policy for writing anything at the right path. Noop 0, reference 1, partial in between: only a
    cheat shows it up (each cheat scores 2/6 here)."""

    def plan(self, ctx, source):
        good = super().plan(ctx, source)
        out = good.outputs[0].path
        good.checks += [Check("output_written", "paths_exist", {"paths": [out]}),
                        Check("output_is_a_file", "paths_exist", {"paths": [out]})]
        return good


def weak_then_sound(seed: int, index: int, attempt: int):
    """make() for synthesize: the weak task on the first attempt of each index, a sound one after."""
    from clawgym.synth.compose import compose_task
    from clawgym.synth.pipeline import _W

    rng = random.Random(f"weak:{seed}:{index}:{attempt}")
    sub = next(s for s in _W["taxonomy"].subcategories if "clean_data" in s.operations)
    gen = _WeakCleanData() if attempt == 0 else CleanData()
    return compose_task(f"weak-s{seed}-{index:06d}", _W["personas"][index % len(_W["personas"])], sub,
                        _W["taxonomy"], {gen.id: gen}, rng, 1)


def test_validation_rejects_task_a_cheat_passes(tmp_path, bwrap_backend):
    from clawgym.core.taxonomy import load_taxonomy
    from clawgym.synth.compose import compose_task
    from clawgym.synth.personas import load_personas
    from clawgym.synth.validate import cheat_score, validate_candidate, validate_candidate_episodes

    tax = load_taxonomy()
    personas = load_personas(taxonomy=tax)
    sub = next(s for s in tax.subcategories if "clean_data" in s.operations)
    weak = compose_task("weak", personas[0], sub, tax, {"clean_data": _WeakCleanData()}, random.Random(3), 1)
    v = validate_candidate(weak, bwrap_backend)
    assert not v.ok and v.reason is not None and v.reason.startswith("cheat_"), (v.reason, v.detail)
    assert v.oracle.score == 1.0 and v.noop.score == 0.0 and 0 < v.partial.score < 1  # only a cheat catches it
    assert max(cheat_score(c, v.guard_checks) for c in v.cheats.values()) >= 0.3 and "cheat" in v.detail
    assert set(v.cheats) == {"empty", "copy-input", "echo-request"}
    # the sound version passes, every cheat far below the bar; the slow path (real episodes) agrees
    sound = compose_task("sound", personas[0], sub, tax, {"clean_data": CleanData()}, random.Random(3), 1)
    ok = validate_candidate(sound, bwrap_backend)
    assert ok.ok, (ok.reason, ok.detail)
    assert all(c.score < 0.3 for c in ok.cheats.values())
    slow = validate_candidate_episodes(weak, bwrap_backend)
    assert slow.reason == v.reason
    assert {k: c.score for k, c in slow.cheats.items()} == {k: c.score for k, c in v.cheats.items()}

    # in a run: every index's weak first attempt is rejected, counted per cheat in the report, then replaced
    out = tmp_path / "weak.jsonl"
    report = synthesize(3, 11, out, jobs=1, make=weak_then_sound, id_prefix="weak")
    assert report.written == 3
    assert sum(n for r, n in report.rejected.items() if r.startswith("cheat_")) == 3
    saved = json.loads(out.with_name(out.name + ".report.json").read_text())
    assert saved["rejected_for_cheats"]["tasks"] == 3
    assert set(saved["rejected_for_cheats"]["by_cheat"]) == {"empty", "copy-input", "echo-request"}
    assert all(n == 3 for n in saved["rejected_for_cheats"]["by_cheat"].values())


# --------------------------------------------------------------------------------------------- kill -9


def _children() -> dict[int, int]:
    """{pid: parent pid} of every process."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            out[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def _descendants(root: int) -> set[int]:
    parents = _children()
    found, todo = set(), [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p and c not in found]
        found.update(kids)
        todo.extend(kids)
    return found


def _alive(pid: int, start: str) -> bool:
    """Running (not a zombie) and still the same process (its start time)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] != "Z" and fields[19] == start


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def test_kill_9_of_synth_leaves_no_worker_or_sandbox(tmp_path, bwrap_backend):
    sbx = tmp_path / "sandboxes"
    sbx.mkdir()
    env = dict(os.environ, CLAWGYM_SANDBOX_TMP=str(sbx))
    proc = subprocess.Popen([str(CLAWGYM), "synth", "persona", "-n", "20000", "--seed", "4242", "-j", "2",
                             "-o", str(tmp_path / "out.jsonl")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    tree: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # mid-validation: both workers have their sandboxes up
            kids = _descendants(proc.pid)
            if sum(_comm(k) == "bwrap" for k in kids) >= 3 and any(sbx.iterdir()):
                break
            assert proc.poll() is None, "synth ended before the test could kill it"
            time.sleep(0.2)
        else:
            pytest.fail("synth never started validating")
        time.sleep(1.0)
        tree = {k: s for k in _descendants(proc.pid) if (s := _start_time(k)) is not None}
        assert sum(_comm(k) == "bwrap" for k in tree) >= 3
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and any(_alive(p, s) for p, s in tree.items()):
            time.sleep(0.2)
        left = sorted(f"{p} {_comm(p)}" for p, s in tree.items() if _alive(p, s))
        assert not left, f"still running after kill -9 of synth: {left}"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(sbx.iterdir()):
            time.sleep(0.2)
        left_mounts = mounts_under(sbx)
        assert not left_mounts, f"host mounts left after kill -9 of synth: {left_mounts}"
        assert not any(sbx.iterdir()), f"sandboxes left in {sbx}: {sorted(str(p.relative_to(sbx)) for p in sbx.rglob('*'))}"
    finally:
        for point in mounts_under(sbx):  # never leave the host with what the code under test leaked
            unmount(point)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        for p, s in tree.items():  # what this test started and the code under test left running
            if _alive(p, s):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass


def test_distractor_check_cannot_water_a_cheat_down_below_the_bar(bwrap_backend):
    """The distractors' own check pays a cheat nothing (it is gated by the task's work), so counted in the mean it
    would push a weak task's cheat payout (2 of 6 checks) under the 0.3 bar (2 of 7): the bar leaves it out."""
    from clawgym.core.taxonomy import load_taxonomy
    from clawgym.synth.compose import compose_task
    from clawgym.synth.personas import load_personas
    from clawgym.synth.validate import cheat_score, guard_checks, validate_candidate

    tax = load_taxonomy()
    personas = load_personas(taxonomy=tax)
    sub = next(s for s in tax.subcategories if "clean_data" in s.operations)
    weak = compose_task("weak", personas[0], sub, tax, {"clean_data": _WeakCleanData()}, random.Random(3), 1)
    guard = guard_checks(weak.task)
    assert guard and weak.task.metadata["distractors"]  # the task has distractor files and their check
    v = validate_candidate(weak, bwrap_backend)
    best = max(v.cheats.values(), key=lambda c: cheat_score(c, guard))
    assert best.score < 0.3 <= cheat_score(best, guard)  # diluted below the bar, and caught all the same
    assert not v.ok and v.reason.startswith("cheat_")
    bare = compose_task("weak", personas[0], sub, tax, {"clean_data": _WeakCleanData()}, random.Random(3), 1,
                        distractor_files=False)
    assert guard_checks(bare.task) == frozenset()


def test_process_a_check_left_in_the_grader_cannot_solve_the_next_batchs_noop_state(bwrap_backend):
    """A check may run a script the task's reference wrote, in the long-lived grading sandbox. A process it leaves
    behind, copying every task's reference state over its untouched one, would make the next batch's no-op look
    solved (or, turned around, a broken reference look right): validation must kill it before it makes the states
    of the next batch, in the grader's own workspace or not."""
    from clawgym.core.taxonomy import load_taxonomy
    from clawgym.synth.compose import compose_task
    from clawgym.synth.personas import load_personas
    from clawgym.synth.validate import start_grader, validate_batch

    tax = load_taxonomy()
    personas = load_personas(taxonomy=tax)
    sub = next(s for s in tax.subcategories if "clean_data" in s.operations)
    cand = compose_task("sound", personas[0], sub, tax, {"clean_data": CleanData()}, random.Random(3), 1)
    grader = start_grader(bwrap_backend)
    try:
        left = grader.exec(["sh", "-c", "nohup sh -c 'while :; do for d in /workspace/*/; do "
                                        "cp -r \"$d\"oracle/. \"$d\"noop/ 2>/dev/null; done; sleep 0.01; done' "
                                        ">/dev/null 2>&1 &"], timeout=10)
        assert left.exit_code == 0
        time.sleep(0.2)
        alive = subprocess.run(["pgrep", "-f", "sleep 0.01"], capture_output=True, text=True)
        assert alive.stdout.strip(), "the planted process did not survive its command: the test proves nothing"
        v = validate_batch([cand], bwrap_backend, grader)[0]
    finally:
        grader.stop()
    assert v.ok, (v.reason, v.detail)
    assert v.noop.score == 0.0 and v.oracle.score == 1.0
