#!/usr/bin/env python3
"""The Ray executor's overhead: the same oracle episodes with the local executor and over a 2-node Ray cluster
on the same cores, in one run.

Prints ONE JSON object on stdout (progress on stderr): for ``--episodes`` oracle episodes of the example tasks
(``examples/tasks.jsonl``, samples to make up the count) in bwrap,

* ``local``: wall time with the local executor at ``--slots`` x 2 jobs (one thread per sandbox slot);
* ``ray``: wall time over a ``ray.cluster_utils.Cluster`` of 2 nodes with ``--slots`` sandbox slots each, the
  same total concurrency (the cluster's start and the connection are timed apart, ``ray_connect_s``);
* ``overhead_pct``: (ray - local) / local x 100 (goal: <= 10);
* ``scheduling_ms_per_episode``: the mean, over the Ray run's episodes, of the time between the driver
  submitting an attempt and getting its result back, less the episode's own duration (placement, transfer of
  the task and of the trajectory and kept workspace, the worker's set-up);
* the mean episode duration in each run (sandbox contention shows there, not in the scheduling figure);
* ``driver_cpu_ms_per_episode``: CPU time of the driver process per episode (with the local executor it
  includes the episodes' own work, which runs in its threads; with Ray it is the driver's share alone: what
  bounds how many episodes per second one driver can take in).

Runs alternate local, ray, local, ray (``--rounds``) so the machine's load falls on both alike.

    python benchmarks/perf/ray.py                     # 200 episodes, 2 slots per node, 2 rounds
    python benchmarks/perf/ray.py --episodes 40 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

# this file is named ray.py: keep its own folder off the import path, or `import ray` would import it
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from clawgym import __version__  # noqa: E402
from clawgym.agent import get_agent  # noqa: E402
from clawgym.core.jsonl import read_records  # noqa: E402
from clawgym.core.records import Task  # noqa: E402
from clawgym.rollout import RolloutOptions, run_rollout  # noqa: E402
from clawgym.rollout.executor import make_executor  # noqa: E402
from clawgym.sandbox import get_backend  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--slots", type=int, default=2, help="sandbox slots per Ray node (local jobs: twice this)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from clawgym.cluster import SLOT_RESOURCE
    from clawgym.cluster import ray_executor as rx

    tasks = read_records(ROOT / "examples" / "tasks.jsonl", Task)
    samples = -(-args.episodes // len(tasks))
    episodes = len(tasks) * samples
    backend = get_backend("bwrap")
    jobs = 2 * args.slots

    t0 = time.monotonic()
    small = {"num_cpus": 1, "object_store_memory": 100 * 1024**2}
    cluster = Cluster(initialize_head=True, head_node_args={**small, "include_dashboard": False,
                                                            "resources": {SLOT_RESOURCE: args.slots}})
    cluster.add_node(**small, resources={SLOT_RESOURCE: args.slots})
    cluster.wait_for_nodes()
    start_s = time.monotonic() - t0

    # the time from submitting an attempt to its result, per attempt (wraps the executor's submit)
    round_trips: list[tuple[float, float]] = []
    submit = rx.RayExecutor.submit

    def timed_submit(self, task, sample, attempt):
        t = time.monotonic()
        fut = submit(self, task, sample, attempt)
        fut.add_done_callback(lambda f: round_trips.append((time.monotonic() - t, f.result().trajectory.duration_s)))
        return fut

    rx.RayExecutor.submit = timed_submit
    results: dict[str, list[dict]] = {"local": [], "ray": []}
    try:
        t0 = time.monotonic()
        ex = make_executor("ray", ray_address=cluster.address, sandbox="bwrap")
        ex.__enter__()
        connect_s = time.monotonic() - t0
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                for name in ("local", "ray"):
                    opts = RolloutOptions(samples=samples, jobs=jobs, keep_workspaces=True,
                                          executor=ex if name == "ray" else None)
                    round_trips.clear()
                    cpu = time.process_time()
                    t = time.monotonic()
                    rep = run_rollout(tasks, lambda: get_agent("oracle"), backend, Path(tmp) / f"{name}{r}", opts)
                    wall = time.monotonic() - t
                    cpu = time.process_time() - cpu
                    ok = sum(1 for x in rep.ran if x.status == "completed" and x.score == 1.0)
                    row = {"wall_s": round(wall, 2), "episodes": len(rep.ran), "scored_1": ok,
                           "episode_mean_s": round(statistics.mean(x.duration_s for x in rep.ran), 3),
                           "driver_cpu_ms_per_episode": round(1000 * cpu / max(1, len(rep.ran)), 1)}
                    if name == "ray":
                        row["scheduling_ms_per_episode"] = round(
                            1000 * statistics.mean(rt - d for rt, d in round_trips), 1)
                    results[name].append(row)
                    log(f"round {r + 1} {name}: {row}")
        ex.close()
    finally:
        rx.RayExecutor.submit = submit
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
    local = statistics.mean(x["wall_s"] for x in results["local"])
    remote = statistics.mean(x["wall_s"] for x in results["ray"])
    print(json.dumps({
        "benchmark": "ray", "clawgym": __version__, "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "load_avg": os.getloadavg(),
        "episodes": episodes, "slots_per_node": args.slots, "nodes": 2, "local_jobs": jobs,
        "cluster_start_s": round(start_s, 2), "ray_connect_s": round(connect_s, 2),
        "local": results["local"], "ray": results["ray"],
        "local_wall_s": round(local, 2), "ray_wall_s": round(remote, 2),
        "overhead_pct": round(100 * (remote - local) / local, 1),
        "scheduling_ms_per_episode": round(statistics.mean(x["scheduling_ms_per_episode"] for x in results["ray"]), 1),
        "ray_driver_cpu_ms_per_episode": round(statistics.mean(x["driver_cpu_ms_per_episode"] for x in results["ray"]), 1),
        "goal": "overhead_pct <= 10",
    }, indent=2))


if __name__ == "__main__":
    main()
