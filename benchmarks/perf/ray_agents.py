#!/usr/bin/env python3
"""The two cluster paths added last to `--executor ray`, timed against the local executor on the same cores:
an OpenClaw rollout (the scripted tasks of tests/test_ray.py: 2 tasks x 2 samples, a scripted model) and an
LLM-route synthesis (`synth persona --generator llm -n 12`, the scripted model of tests/test_ray.py), over a
2-node `ray.cluster_utils.Cluster` with 2 sandbox slots per node; local at -j 4 (the same concurrency).
Alternates local, ray (``--rounds``). Prints ONE JSON object: wall seconds per run (the Ray figures include the
driver's connection and node checks), the mean OpenClaw episode duration per run, and whether the synthesis
files of every run are the same bytes.

    python benchmarks/perf/ray_agents.py /tmp/ray-agents          # needs OpenClaw installed and bwrap
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# this folder holds ray.py, which would shadow the ray package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(REPO / "tests"))

SMALL = {"num_cpus": 1, "object_store_memory": 100 * 1024**2}


def clawgym(*args) -> float:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "clawgym", *map(str, args)], capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-3000:])
    return round(time.monotonic() - t0, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from ray.cluster_utils import Cluster

    from clawgym.cluster import SLOT_RESOURCE
    from scripted_llm import ScriptedLLM
    from test_ray import _openclaw_tasks, _SynthResponder

    tmp = args.out
    tmp.mkdir(parents=True, exist_ok=True)
    c = Cluster(initialize_head=True, head_node_args={**SMALL, "include_dashboard": False,
                                                      "resources": {SLOT_RESOURCE: 2}})
    c.add_node(**SMALL, resources={SLOT_RESOURCE: 2})
    c.wait_for_nodes()
    res: dict = {}
    executors = (("local", ["-j", "4"]), ("ray", ["--executor", "ray", "--ray-address", c.address]))
    try:
        scripts = _openclaw_tasks(tmp / "tasks.jsonl")
        with ScriptedLLM({}, responder=scripts) as llm:
            for rnd in range(args.rounds):
                for name, extra in executors:
                    run = tmp / f"oc-{name}-{rnd}"
                    res.setdefault(f"openclaw_{name}_s", []).append(clawgym(
                        "rollout", tmp / "tasks.jsonl", "--agent", "openclaw", "--model", "scripted-model",
                        "--base-url", llm.base_url, "-k", "2", "--sandbox", "bwrap", "--max-tokens", "256", *extra,
                        "-o", run))
                    eps = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
                    res.setdefault(f"openclaw_{name}_episode_s", []).append(
                        round(sum(e["duration_s"] for e in eps) / len(eps), 1))
        digests = set()
        with ScriptedLLM({}, responder=_SynthResponder()) as llm:
            for rnd in range(args.rounds):
                for name, extra in executors:
                    out = tmp / f"synth-{name}-{rnd}.jsonl"
                    res.setdefault(f"llm_synth_{name}_s", []).append(clawgym(
                        "synth", "persona", "--generator", "llm", "-n", 12, "--seed", 3, "--model", "scripted-model",
                        "--base-url", llm.base_url, "--max-repairs", 1, "--no-dedup", "--sandbox", "bwrap", *extra,
                        "-o", out))
                    digests.add(hashlib.sha256(out.read_bytes() + out.with_name(out.name + ".rejected.jsonl")
                                               .read_bytes()).hexdigest())
        res["llm_synth_same_bytes"] = len(digests) == 1
    finally:
        c.shutdown()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
