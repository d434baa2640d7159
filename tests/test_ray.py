"""`--executor ray` on a real multi-node Ray cluster started on this machine (`ray.cluster_utils.Cluster`: one
raylet per node, each with its own `clawgym_slots`), real bwrap sandboxes and the real task data: the same
scores as a local run, a node lost mid-run, the driver killed with -9 and resumed, Ctrl-C, synthesis giving the
same bytes, and the llm agent's calls recorded by the driver's gateway."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawgym.core.jsonl import read_records
from clawgym.core.records import Task, Trajectory
from conftest import require
from scripted_llm import ScriptedLLM, turns_from_reference

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "tasks.jsonl"
SMALL = {"num_cpus": 1, "object_store_memory": 100 * 1024**2}


@pytest.fixture(scope="module")
def cluster(bwrap_backend):
    """A head and one worker node, 2 sandbox slots each; torn down after the module."""
    try:
        from ray.cluster_utils import Cluster
    except ImportError:
        require(False, "ray is not installed (pip install 'clawgym[ray]')")
    from clawgym.cluster import SLOT_RESOURCE

    c = Cluster(initialize_head=True, head_node_args={**SMALL, "include_dashboard": False,
                                                      "resources": {SLOT_RESOURCE: 2}})
    c.add_node(**SMALL, resources={SLOT_RESOURCE: 2})
    c.wait_for_nodes()
    yield c
    c.shutdown()


def clawgym(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym", *map(str, args)], capture_output=True, text=True,
                          timeout=kw.pop("timeout", 300), **kw)


def outcome(run: Path) -> dict[str, tuple]:
    """What a run scored, per episode: status, score, verdict status and named checks."""
    trajs = read_records(run / "trajectories.jsonl", Trajectory)
    ids = [t.id for t in trajs]
    assert len(ids) == len(set(ids)), "an episode recorded twice"
    return {t.id: (t.status, t.score, t.verdict.status if t.verdict else None,
                   sorted((t.verdict.checks or {}).items()) if t.verdict and isinstance(t.verdict.checks, dict)
                   else None) for t in trajs}


def sleep_tasks(path: Path, n: int, seconds: float, marker: str) -> list[str]:
    """Tasks whose reference sleeps in the sandbox (a marked command line, so a test can see it running)."""
    tasks = [Task.model_validate({
        "id": f"sleep-{i:02d}", "instruction": f"wait {i}",
        "verifier": {"code": {"kind": "python", "source": "def grade(t, w): return {'waited': 1.0}"}},
        "reference": {"steps": [{"name": "exec", "arguments": {"command": f"sleep {seconds} # {marker}-{i:02d}-"}}]},
    }) for i in range(n)]
    path.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    return [t.id for t in tasks]


def running(marker: str) -> set[str]:
    """The marked sandbox commands running on this machine now (by task)."""
    out = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
    return {line.split(marker, 1)[1].split("-")[1] for line in out.splitlines()
            if marker in line and "pgrep" not in line}


def wait_for(cond, what: str, proc: subprocess.Popen | None = None, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {proc.communicate()}")
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.1)


def test_rollout_over_two_nodes_scores_as_a_local_run(cluster, datasets, tmp_path):
    cg = tmp_path / "clawgym.jsonl"
    assert clawgym("import", "clawgym", datasets / "clawgym-train-sample", "-o", cg).returncode == 0
    runs = [("noop", cg), ("oracle", cg), ("oracle", EXAMPLES)]
    for i, (agent, tasks) in enumerate(runs):
        local, remote = tmp_path / f"local{i}", tmp_path / f"ray{i}"
        r = clawgym("rollout", tasks, "--agent", agent, "--sandbox", "bwrap", "-j", "2", "-o", local)
        assert r.returncode == 0, r.stderr[-2000:]
        r = clawgym("rollout", tasks, "--agent", agent, "--sandbox", "bwrap", "--executor", "ray",
                    "--ray-address", cluster.address, "-o", remote)
        assert r.returncode == 0, r.stderr[-2000:]
        # the same result for every episode
        want, got = outcome(local), outcome(remote)
        assert got == want
        info = json.loads((remote / "run.json").read_text())
        nodes = info["executor"]["nodes"]
        assert len(nodes) == 2 and all(n["ok"] and n["backend"] == "bwrap" and n["check"] for n in nodes)
        # run.json says which node ran which episode; both nodes took work
        assert set(info["episode_nodes"]) == set(got)
        assert set(info["episode_nodes"].values()) == {n["node"] for n in nodes}
        # kept workspaces came back to the driver's run dir
        kept = [t.workspace_snapshot for t in read_records(remote / "trajectories.jsonl", Trajectory)
                if t.workspace_snapshot]
        assert all((remote / k).is_file() for k in kept)
        if agent == "noop":
            assert len(want) == 30 and all(v[0] == "completed" and v[1] == 0.0 and v[3] for v in want.values())
            assert len(kept) == 30
        elif tasks == EXAMPLES:
            assert len(want) == 8 and all(v[:2] == ("completed", 1.0) for v in want.values())
        else:  # ClawGym's sample tasks carry no reference solution: the oracle skips each, here and there alike
            assert len(want) == 30 and all(v[0] == "skipped" for v in want.values())


def test_a_node_lost_mid_run_is_retried_and_every_episode_recorded_once(cluster, tmp_path):
    from clawgym.cluster import SLOT_RESOURCE

    doomed = cluster.add_node(**SMALL, resources={SLOT_RESOURCE: 2})
    cluster.wait_for_nodes()
    marker = f"clawgym-raylost-{os.getpid()}"
    ids = sleep_tasks(tmp_path / "tasks.jsonl", 10, 4, marker)
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "clawgym", "rollout", str(tmp_path / "tasks.jsonl"), "--agent",
                             "oracle", "--sandbox", "bwrap", "--executor", "ray", "--ray-address", cluster.address,
                             "--infra-retries", "3", "-o", str(run)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # every slot of the three nodes busy: two of the running episodes are on the node about to die
    wait_for(lambda: len(running(marker)) >= 6, "six episodes running at once", proc)
    cluster.remove_node(doomed, allow_graceful=False)
    out, errs = proc.communicate(timeout=300)
    assert proc.returncode == 0, errs[-3000:]
    trajs = read_records(run / "trajectories.jsonl", Trajectory)
    assert sorted(t.id for t in trajs) == sorted(f"{i}#0" for i in ids)  # exactly once each
    assert all(t.status == "completed" and t.score == 1.0 for t in trajs)
    retried = [t for t in trajs if t.attempts > 1]
    assert len(retried) >= 2, [(t.id, t.attempts) for t in trajs]
    log = (run / "logs" / "run.log").read_text()
    assert log.count("infra_error node_lost") >= 2 and "retrying after an infrastructure error" in log
    # the lost episodes ended on the surviving nodes
    info = json.loads((run / "run.json").read_text())
    alive = {n["node"] for n in info["executor"]["nodes"]} - {n["node"] for n in info["executor"]["nodes"]
                                                               if n["node_id"] == doomed.node_id}
    assert {info["episode_nodes"][t.id] for t in retried} <= alive
    wait_for(lambda: not running(marker), "the lost node's sandboxes gone", limit=60)


def test_driver_killed_with_9_resumes_with_every_episode_once(cluster, tmp_path):
    marker = f"clawgym-raykill-{os.getpid()}"
    ids = sleep_tasks(tmp_path / "tasks.jsonl", 12, 1.5, marker)
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "clawgym", "rollout", str(tmp_path / "tasks.jsonl"), "--agent", "oracle",
           "--sandbox", "bwrap", "--executor", "ray", "--ray-address", cluster.address, "-o", str(run)]
    traj = run / "trajectories.jsonl"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(lambda: traj.exists() and len(traj.read_bytes().splitlines()) >= 3, "three episodes recorded", proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = len(traj.read_bytes().splitlines())
    assert 3 <= first < 12, "the kill must land in the middle of the run"
    # the dead driver's remote sandboxes end with its job
    wait_for(lambda: not running(marker), "the killed driver's sandboxes gone", limit=60)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"resuming: {first} episodes already done" in r.stderr
    trajs = read_records(traj, Trajectory)
    assert sorted(t.id for t in trajs) == sorted(f"{i}#0" for i in ids)
    assert all(t.status == "completed" and t.score == 1.0 for t in trajs)
    info = json.loads((run / "run.json").read_text())
    assert set(info["episode_nodes"]) >= {t.id for t in trajs[first:]}


def test_ctrl_c_stops_every_remote_sandbox(cluster, tmp_path):
    marker = f"clawgym-rayint-{os.getpid()}"
    sleep_tasks(tmp_path / "tasks.jsonl", 4, 300, marker)
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "clawgym", "rollout", str(tmp_path / "tasks.jsonl"), "--agent",
                             "oracle", "--sandbox", "bwrap", "--executor", "ray", "--ray-address", cluster.address,
                             "-o", str(run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_for(lambda: len(running(marker)) == 4, "four sandboxes running on the two nodes", proc)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    wait_for(lambda: not running(marker), "every remote sandbox stopped", limit=60)
    path = run / "trajectories.jsonl"
    assert not path.exists() or read_records(path, Trajectory) == []


def test_synthesis_over_ray_writes_the_same_bytes_as_a_local_run(cluster, tmp_path):
    for route, n in (("persona", 16), ("skill", 6)):
        local, remote = tmp_path / f"{route}-local.jsonl", tmp_path / f"{route}-ray.jsonl"
        r = clawgym("synth", route, "-n", n, "--seed", 11, "-j", "2", "-o", local)
        assert r.returncode == 0, r.stderr[-2000:]
        r = clawgym("synth", route, "-n", n, "--seed", 11, "--executor", "ray", "--ray-address", cluster.address,
                    "-o", remote)
        assert r.returncode == 0, r.stderr[-2000:]
        assert remote.read_bytes() == local.read_bytes() and len(local.read_bytes().splitlines()) == n


def test_a_node_without_the_sandbox_image_takes_no_episodes(cluster, tmp_path):
    from clawgym.cluster import SLOT_RESOURCE

    empty = tmp_path / "clawgym-home"
    empty.mkdir()
    # this node's clawgym looks for its image in an empty home: the driver's image is missing there
    bare = cluster.add_node(**SMALL, resources={SLOT_RESOURCE: 4}, env_vars={"CLAWGYM_HOME": str(empty)})
    cluster.wait_for_nodes()
    try:
        run = tmp_path / "run"
        r = clawgym("rollout", EXAMPLES, "--agent", "oracle", "--sandbox", "bwrap", "--executor", "ray",
                    "--ray-address", cluster.address, "-o", run)
        assert r.returncode == 0, r.stderr[-2000:]
        info = json.loads((run / "run.json").read_text())
        by_id = {n["node_id"]: n for n in info["executor"]["nodes"]}
        assert not by_id[bare.node_id]["ok"] and "image" in by_id[bare.node_id]["check"]
        assert by_id[bare.node_id]["node"] not in set(info["episode_nodes"].values())
        assert all(v[:2] == ("completed", 1.0) for v in outcome(run).values())
    finally:
        cluster.remove_node(bare)


def test_llm_rollout_over_ray_calls_and_records_through_the_driver_gateway(cluster, tmp_path):
    from clawgym.pool.store import Pool

    tasks = read_records(EXAMPLES, Task)[:4]
    (tmp_path / "tasks.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    run = tmp_path / "run"
    with ScriptedLLM({t.instruction: turns_from_reference(t) for t in tasks}) as llm:
        r = clawgym("rollout", tmp_path / "tasks.jsonl", "--agent", "llm", "--model", "scripted-model",
                    "--base-url", llm.base_url, "-k", "2", "--sandbox", "bwrap", "--executor", "ray",
                    "--ray-address", cluster.address, "-o", run)
    assert r.returncode == 0, r.stderr[-2000:]
    trajs = read_records(run / "trajectories.jsonl", Trajectory)
    assert len(trajs) == 8 and all(t.status == "completed" and t.score == 1.0 for t in trajs)
    assert "model calls: " in r.stderr and "model calls: 0 " not in r.stderr
    with Pool(run / "pool") as pool:  # written by the driver's gateway alone
        for t in trajs:
            assert len(pool.steps(trajectory_id=t.id)) == t.usage["model_calls"] > 0


def test_bad_executor_options_fail_with_one_line(tmp_path):
    r = clawgym("rollout", EXAMPLES, "--executor", "spark", "-o", tmp_path / "a")
    assert r.returncode == 2 and "--executor: unknown 'spark'" in r.stderr
    r = clawgym("rollout", EXAMPLES, "--ray-address", "127.0.0.1:1", "-o", tmp_path / "b")
    assert r.returncode == 2 and "--ray-address needs --executor ray" in r.stderr


def _openclaw_tasks(path: Path) -> dict[str, tuple]:
    """Two OpenClaw tasks: one solved by a write call, one answered with the wrong content (partial score)."""
    from scripted_llm import Turn
    from test_openclaw import GRADE_WRITE, WRITE, Scripts, _task

    wrong = "Write the greeting file for me, please"
    scripts = Scripts()
    scripts.scripts[wrong] = [Turn(tool_calls=[("write", {"path": "greeting.txt", "content": "hello\n"})]),
                              Turn(content="Wrote greeting.txt.")]
    scripts.scripts[WRITE] = [Turn(tool_calls=[("write", {"path": "greeting.txt", "content": "hello from openclaw\n"})]),
                              Turn(content="Wrote greeting.txt.")]
    tasks = [_task("oc-write", WRITE, GRADE_WRITE, timeout=300), _task("oc-wrong", wrong, GRADE_WRITE, timeout=300)]
    path.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    return scripts


def _pool_capture(run: Path) -> dict[str, list[tuple]]:
    """What the gateway recorded for the recorded attempt of each episode (an attempt lost to infrastructure,
    e.g. its worker killed by Ray's memory monitor on a loaded machine, is retried as `ID~2`): per step its index,
    group, task, model, response, token ids and their source, status, and the request's shape (roles, tools,
    params; OpenClaw stamps the time into its prompts, so the texts themselves differ between any two runs)."""
    from clawgym.pool.store import Pool

    recorded = {(t.id if t.attempts == 1 else f"{t.id}~{t.attempts}"): t.id
                for t in read_records(run / "trajectories.jsonl", Trajectory)}
    out: dict[str, list[tuple]] = {}
    with Pool(run / "pool") as pool:
        for s in pool.steps():
            if s.trajectory_id not in recorded:
                continue
            req = s.request or {}
            out.setdefault(recorded[s.trajectory_id], []).append((
                s.step_index, s.group_id, s.task_id, s.model, json.dumps(s.response, sort_keys=True), s.prompt_ids is not None,
                s.response_ids, s.token_source, s.status, [m.get("role") for m in req.get("messages") or []],
                json.dumps(req.get("tools"), sort_keys=True), json.dumps(req.get("params"), sort_keys=True),
                s.trajectory_status, s.reward))
    return out


def test_openclaw_rollout_over_two_nodes_scores_and_records_as_a_local_run(cluster, tmp_path):
    from clawgym.agent.openclaw import find_installation

    require(find_installation() is not None, "OpenClaw is not installed (clawgym agents install openclaw)")
    scripts = _openclaw_tasks(tmp_path / "tasks.jsonl")
    runs = {}
    with ScriptedLLM({}, responder=scripts) as llm:
        for name, extra in (("local", []), ("ray", ["--executor", "ray", "--ray-address", cluster.address])):
            runs[name] = tmp_path / name
            # 2 episodes (one per node): an OpenClaw sandbox holds ~0.4 GB, and on a shared, loaded machine Ray's
            # memory monitor kills workers (node_lost, retried) when the whole host nears its memory limit
            r = clawgym("rollout", tmp_path / "tasks.jsonl", "--agent", "openclaw", "--model", "scripted-model",
                        "--base-url", llm.base_url, "-j", "2", "--sandbox", "bwrap", "--max-tokens", "256",
                        "--infra-retries", "4", *extra, "-o", runs[name], timeout=900)
            assert r.returncode == 0, r.stderr[-3000:]
    local, remote = outcome(runs["local"]), outcome(runs["ray"])
    assert remote == local and len(local) == 2
    assert sorted(v[:2] for v in local.values()) == [("completed", 0.5), ("completed", 1.0)]
    # the gateway's capture is the same: same trajectories, steps, answers, token ids
    cap_local, cap_remote = _pool_capture(runs["local"]), _pool_capture(runs["ray"])
    assert sorted(cap_remote) == sorted(cap_local) and sum(map(len, cap_local.values())) == 4
    for tid, steps in cap_local.items():
        assert len(steps) == len(cap_remote[tid]), (tid, steps, cap_remote[tid])
        for a, b in zip(steps, cap_remote[tid], strict=True):
            assert a == b, (tid, [(i, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y])
    info = json.loads((runs["ray"] / "run.json").read_text())
    assert len(set(info["episode_nodes"].values())) == 2  # both nodes ran episodes
    assert all(n["openclaw"]["ok"] for n in info["executor"]["nodes"])
    steps = {}
    for name, run in runs.items():  # the gateway's steps joined to OpenClaw's own transcript, as locally
        for t in read_records(run / "trajectories.jsonl", Trajectory):
            assert t.metadata["openclaw"]["step_join"]["complete"], t.metadata["openclaw"]["step_join"]
            assert len(t.steps) == t.usage["model_calls"] == 2
            # OpenClaw names its transcript events at random (event_id), times differ
            steps[name, t.id] = [{k: v for k, v in s.items() if k not in ("latency_s", "ttft_s", "event_id")}
                                 for s in t.steps]
    for _, tid in steps:
        assert steps["ray", tid] == steps["local", tid]


def test_a_node_without_openclaw_takes_no_openclaw_episodes(cluster, tmp_path):
    from clawgym.agent.openclaw import find_installation
    from clawgym.cluster import SLOT_RESOURCE
    from clawgym.sandbox.image import find_rootfs

    require(find_installation() is not None, "OpenClaw is not installed (clawgym agents install openclaw)")
    empty = tmp_path / "clawgym-home"
    empty.mkdir()
    # this node has the sandbox image (CLAWGYM_ROOTFS) but an empty clawgym home: no OpenClaw
    bare = cluster.add_node(**SMALL, resources={SLOT_RESOURCE: 4},
                            env_vars={"CLAWGYM_HOME": str(empty), "CLAWGYM_ROOTFS": str(find_rootfs())})
    cluster.wait_for_nodes()
    try:
        scripts = _openclaw_tasks(tmp_path / "tasks.jsonl")
        run = tmp_path / "run"
        with ScriptedLLM({}, responder=scripts) as llm:
            r = clawgym("rollout", tmp_path / "tasks.jsonl", "--agent", "openclaw", "--model", "scripted-model",
                        "--base-url", llm.base_url, "--sandbox", "bwrap", "--max-tokens", "256", "--executor", "ray",
                        "--ray-address", cluster.address, "-o", run, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        info = json.loads((run / "run.json").read_text())
        by_id = {n["node_id"]: n for n in info["executor"]["nodes"]}
        assert not by_id[bare.node_id]["ok"] and "OpenClaw" in by_id[bare.node_id]["check"]
        assert by_id[bare.node_id]["image"] is not None  # it failed on OpenClaw alone
        assert by_id[bare.node_id]["node"] not in set(info["episode_nodes"].values())
        assert sorted(v[:2] for v in outcome(run).values()) == [("completed", 0.5), ("completed", 1.0)]
    finally:
        cluster.remove_node(bare)


class _SynthResponder:
    """The model of the LLM synthesis route, scripted per brief (by its index): a good task, a task repaired
    after its first answer fails validation, a hopeless one (rejected after its repairs); reviews accept."""

    def __init__(self):
        from test_synth_llm import ACCEPT, GOOD, HOPELESS, REPAIR_FIRST, REPAIR_FIXED, REVIEW_MARK

        self.review_mark, self.accept = REVIEW_MARK, ACCEPT
        self.scripts = [[GOOD], [REPAIR_FIRST, REPAIR_FIXED], [HOPELESS]]

    def __call__(self, body: dict):
        import re

        from scripted_llm import Turn

        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if first.startswith(self.review_mark):
            return Turn(content=self.accept)
        m = re.search(r"\(brief llm-persona-s\d+-(\d+)\)", first)
        if m is None:
            return None
        answers = self.scripts[int(m.group(1)) % len(self.scripts)]
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return Turn(content=answers[min(turn, len(answers) - 1)])


def test_llm_synthesis_over_ray_writes_the_same_bytes_as_a_local_run(cluster, tmp_path):
    files = {}
    with ScriptedLLM({}, responder=_SynthResponder()) as llm:
        for name, extra in (("local", ["-j", "3"]), ("ray", ["--executor", "ray", "--ray-address", cluster.address])):
            out = tmp_path / f"{name}.jsonl"
            r = clawgym("synth", "persona", "--generator", "llm", "-n", 6, "--seed", 3, "--model", "scripted-model",
                        "--base-url", llm.base_url, "--max-repairs", 1, "--no-dedup", "--sandbox", "bwrap", *extra,
                        "-o", out, timeout=900)
            assert r.returncode == 0, r.stderr[-3000:]
            files[name] = (out.read_bytes(), out.with_name(out.name + ".rejected.jsonl").read_bytes(),
                           json.loads(out.with_name(out.name + ".yield.json").read_text()))
    (kept, rejected, rep), (kept_r, rejected_r, rep_r) = files["local"], files["ray"]
    assert kept_r == kept and rejected_r == rejected
    assert [json.loads(x)["id"][-2:] for x in kept.splitlines()] == ["00", "01", "03", "04"]  # brief order
    assert [json.loads(x)["reason"] for x in rejected.splitlines()] == ["noop_above_0"] * 2
    for key in ("candidates", "kept", "rejected_by_reason", "kept_after_repair_round", "failures_by_round", "tokens"):
        assert rep_r[key] == rep[key], key
    assert rep["kept"] == 4 and "executor" not in rep
    # 4 kept + 2 hopeless (2 rounds each) + 2 repaired (2 rounds each) = 10 validations, on both nodes
    by_node = rep_r["executor"]["validations_by_node"]
    assert sum(by_node.values()) == 10 and len(by_node) == 2, rep_r["executor"]
