#!/usr/bin/env python3
"""OpenClaw rollouts: per-episode overhead against the built-in agent, memory per sandbox, concurrency.

Prints ONE JSON object on stdout (progress on stderr):

* ``overhead``: the same tasks (a file to write: one tool call, then a final answer) and the same scripted
  model server behind the gateway, run one episode at a time in bwrap by the built-in ``llm`` agent and by
  ``openclaw``: episode wall time (p50, mean), time from the episode's start to its first model call, and
  OpenClaw's overhead per episode (the difference of the p50s). (`cpu_s_per_episode_reaped` counts only
  processes reaped by this process: the host side; the sandbox's own CPU time is sampled, see memory.)
* ``memory``: sampled every 0.25 s during the OpenClaw episodes, per sandbox (its memory cgroup): the peak of
  the processes' summed PSS (shared pages split between the processes that map them), of their summed RSS,
  and of the cgroup's charge (anonymous memory + tmpfs + page cache), and the CPU seconds its processes used
  (utime + stime, sampled; only sandboxes running OpenClaw are counted).
* ``concurrency``: OpenClaw episodes run C at a time (C = 1, 2, 4): episodes/minute and the p50 episode time.
* ``fit``: how many OpenClaw sandboxes fit at once in 24 GiB (after 2 GiB kept for the host, the gateway and
  the model server) by peak PSS, and what 2 cores sustain (cores / CPU seconds per episode) -- the smaller
  of the two bounds the useful concurrency.

    python benchmarks/perf/openclaw.py            # full run (about 10 minutes here)
    python benchmarks/perf/openclaw.py --quick    # 2 episodes per agent, concurrency 1 and 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from clawgym import __version__  # noqa: E402
from clawgym.core.records import Task  # noqa: E402
from scripted_llm import ScriptedLLM, Turn  # noqa: E402  (the project's scripted OpenAI-compatible server)

TOTAL_GIB = 24
RESERVED_GIB = 2


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))], 3)


def make_tasks(n: int, tag: str) -> tuple[list[Task], dict[str, list[Turn]]]:
    tasks, scripts = [], {}
    for i in range(n):
        prompt = f"[{tag} {i}] Create the file out{i}.txt holding exactly the line: value {i}"
        tasks.append(Task.model_validate({
            "id": f"{tag}-{i}", "source": "bench", "category": "files", "instruction": prompt, "timeout_seconds": 600,
            "workspace": {"files": [{"path": "README.md", "content": "notes\n"}]},
            "verifier": {"code": {"kind": "python", "source": (
                "def grade(transcript, workspace_path):\n"
                "    import os\n"
                f"    p = os.path.join(workspace_path, 'out{i}.txt')\n"
                f"    return {{'written': 1.0 if os.path.exists(p) and open(p).read().strip() == 'value {i}' else 0.0}}\n")}},
        }))
        scripts[prompt] = [Turn(tool_calls=[("write", {"path": f"out{i}.txt", "content": f"value {i}\n"})]),
                           Turn(content=f"Wrote out{i}.txt.")]
    return tasks, scripts


class Responder:
    def __init__(self) -> None:
        self.scripts: dict[str, list[Turn]] = {}

    def __call__(self, body: dict):
        msgs = body.get("messages") or []
        first = next((m for m in msgs if m.get("role") == "user"), {})
        c = first.get("content")
        c = c if isinstance(c, str) else "".join(p.get("text", "") for p in c or [])
        for k, turns in self.scripts.items():
            if k in c:
                return turns[min(sum(1 for m in msgs if m.get("role") == "assistant"), len(turns) - 1)]
        return None


class MemorySampler(threading.Thread):
    """Peaks per sandbox memory cgroup (v1 or v2) of clawgym's bwrap sandboxes, while running."""

    def __init__(self, period: float = 0.25):
        super().__init__(daemon=True)
        from clawgym.sandbox.cgroups import CGROUP_ROOT, GROUP_PREFIX, cgroup_mode

        self.mode = cgroup_mode()
        base = CGROUP_ROOT / "memory" / GROUP_PREFIX if self.mode == "v1" else CGROUP_ROOT / GROUP_PREFIX
        self.base = base
        self.period = period
        self.peaks: dict[str, dict[str, int]] = {}
        self._halt = threading.Event()

    @staticmethod
    def _pss_rss(pid: int) -> tuple[int, int]:
        pss = rss = 0
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        pss = int(line.split()[1]) * 1024
                    elif line.startswith("Rss:"):
                        rss = int(line.split()[1]) * 1024
        except OSError:
            pass
        return pss, rss

    @staticmethod
    def _cpu_ticks(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])  # utime + stime
        except (OSError, IndexError, ValueError):
            return 0

    @staticmethod
    def _is_openclaw(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                return b"openclaw.mjs" in fh.read()
        except OSError:
            return False

    def sample(self) -> None:
        if not self.base.is_dir():
            return
        for d in self.base.iterdir():
            if not d.is_dir():
                continue
            try:
                pids = [int(x) for x in (d / "cgroup.procs").read_text().split()]
                charge = int((d / ("memory.usage_in_bytes" if self.mode == "v1" else "memory.current")).read_text())
            except (OSError, ValueError):
                continue
            # only sandboxes running OpenClaw (other sandboxes of this machine share the cgroup prefix)
            if d.name not in self.peaks and not any(self._is_openclaw(p) for p in pids):
                continue
            pss = rss = 0
            peak = self.peaks.setdefault(d.name, {"pss": 0, "rss": 0, "charge": 0, "processes": 0, "cpu": {}})
            for p in pids:
                a, b = self._pss_rss(p)
                pss += a
                rss += b
                peak["cpu"][p] = max(peak["cpu"].get(p, 0), self._cpu_ticks(p))
            peak["pss"] = max(peak["pss"], pss)
            peak["rss"] = max(peak["rss"], rss)
            peak["charge"] = max(peak["charge"], charge)
            peak["processes"] = max(peak["processes"], len(pids))

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(self.period)

    def stop(self) -> dict:
        self._halt.set()
        self.join(timeout=5)
        # a sandbox that lived for a single sample or less is not a measurement
        vals = [p for p in self.peaks.values() if p["pss"] > 0]
        mib = 1024 * 1024
        return {
            "sandboxes_sampled": len(vals),
            "peak_pss_mib": {"p50": pct([v["pss"] / mib for v in vals], 0.5), "max": pct([v["pss"] / mib for v in vals], 1.0)},
            "peak_rss_mib": {"p50": pct([v["rss"] / mib for v in vals], 0.5), "max": pct([v["rss"] / mib for v in vals], 1.0)},
            "peak_cgroup_charge_mib": {"p50": pct([v["charge"] / mib for v in vals], 0.5),
                                       "max": pct([v["charge"] / mib for v in vals], 1.0)},
            "peak_processes": max((v["processes"] for v in vals), default=0),
            "cpu_s_per_sandbox": {"p50": pct([sum(v["cpu"].values()) / os.sysconf("SC_CLK_TCK") for v in vals], 0.5),
                                  "max": pct([sum(v["cpu"].values()) / os.sysconf("SC_CLK_TCK") for v in vals], 1.0)},
        }


def run(agent: str, tasks: list[Task], base_url: str, backend, jobs: int, out: Path) -> dict:
    from clawgym.pool.store import Pool
    from clawgym.rollout import RolloutOptions, run_rollout
    from clawgym.rollout.setup import AgentSpec, agent_session

    spec = AgentSpec(name=agent, model="scripted-model", base_url=base_url, max_tokens=256)
    options = RolloutOptions(jobs=jobs, keep_workspaces=False)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with agent_session(spec, out, tasks, options) as session:
        report = run_rollout(tasks, session.factory, backend, out, options, settings=session.settings)
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    trajs = report.ran
    firsts = []
    with Pool(out / "pool", create=False) as pool:
        for t in trajs:
            steps = pool.steps(trajectory_id=t.id)
            if steps:
                start = datetime.fromisoformat(t.started_at.replace("Z", "+00:00"))
                first = datetime.fromisoformat(steps[0].timings["started_at"].replace("Z", "+00:00"))
                firsts.append((first - start).total_seconds())
    durs = [t.duration_s for t in trajs]
    return {
        "agent": agent, "jobs": jobs, "episodes": len(trajs), "wall_s": round(wall, 2),
        "episodes_per_min": round(60 * len(trajs) / wall, 2),
        "passed": sum(1 for t in trajs if t.verdict and t.verdict.passed),
        "statuses": sorted({t.status for t in trajs}),
        "episode_s": {"p50": pct(durs, 0.5), "mean": round(statistics.mean(durs), 3) if durs else None,
                      "max": pct(durs, 1.0)},
        "first_model_call_s": {"p50": pct(firsts, 0.5), "max": pct(firsts, 1.0)},
        "cpu_s_per_episode_reaped": round(cpu / max(1, len(trajs)), 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", default=os.environ.get("CLAWGYM_BENCH_QUICK") == "1")
    ap.add_argument("--episodes", type=int, default=None, help="Episodes per agent for the overhead figure.")
    ap.add_argument("--concurrency", type=int, nargs="+", default=None)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    from clawgym.agent.openclaw import find_installation
    from clawgym.sandbox import get_backend

    inst = find_installation()
    if inst is None:
        print(json.dumps({"benchmark": "openclaw", "error": "OpenClaw not installed: clawgym agents install openclaw"}))
        return 1
    n = a.episodes or (2 if a.quick else 4)
    conc = a.concurrency or ([2] if a.quick else [2, 4])
    backend = get_backend("bwrap")
    result: dict = {
        "benchmark": "openclaw", "clawgym_version": __version__, "openclaw_version": inst.version,
        "node_version": inst.node_version, "python": platform.python_version(), "cpus": os.cpu_count(),
        "quick": a.quick, "load_before": os.getloadavg(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    responder = Responder()
    with tempfile.TemporaryDirectory(prefix="clawgym-bench-openclaw-") as tmp, ScriptedLLM({}, responder=responder) as llm:
        tmp = Path(tmp)
        tasks_llm, s1 = make_tasks(n, "llm")
        tasks_oc, s2 = make_tasks(n, "oc")
        responder.scripts.update(s1)
        responder.scripts.update(s2)
        log(f"built-in agent: {n} episodes, one at a time")
        llm_r = run("llm", tasks_llm, llm.base_url, backend, 1, tmp / "llm")
        log(f"openclaw: {n} episodes, one at a time (memory sampled)")
        sampler = MemorySampler()
        sampler.start()
        oc_r = run("openclaw", tasks_oc, llm.base_url, backend, 1, tmp / "oc")
        mem = sampler.stop()
        result["overhead"] = {
            "llm": llm_r, "openclaw": oc_r,
            "openclaw_minus_llm_p50_s": round(oc_r["episode_s"]["p50"] - llm_r["episode_s"]["p50"], 2),
        }
        result["memory"] = mem
        result["concurrency"] = [{k: oc_r[k] for k in ("jobs", "episodes", "wall_s", "episodes_per_min", "episode_s", "statuses")}]
        for c in conc:
            tasks_c, sc = make_tasks(c * (1 if a.quick else 2), f"oc-c{c}")
            responder.scripts.update(sc)
            log(f"openclaw: {len(tasks_c)} episodes, {c} at a time (memory sampled)")
            sampler = MemorySampler()
            sampler.start()
            r = run("openclaw", tasks_c, llm.base_url, backend, c, tmp / f"c{c}")
            m = sampler.stop()
            result["concurrency"].append({**{k: r[k] for k in ("jobs", "episodes", "wall_s", "episodes_per_min",
                                                               "episode_s", "statuses")},
                                          "peak_pss_mib_max": m["peak_pss_mib"]["max"]})
    backend.close()
    pss = max(v for v in [mem["peak_pss_mib"]["max"]] + [c.get("peak_pss_mib_max") or 0 for c in result["concurrency"]] if v)
    usable_mib = (TOTAL_GIB - RESERVED_GIB) * 1024
    cpu_s = mem["cpu_s_per_sandbox"]["p50"]
    result["fit"] = {
        "peak_pss_mib_per_sandbox": pss,
        "sandboxes_by_memory_24gib": int(usable_mib // pss) if pss else None,
        "cpu_s_per_openclaw_sandbox": cpu_s,
        "episodes_per_min_cpu_bound_2_cores": round(60 * 2 / cpu_s, 2) if cpu_s else None,
        "note": "memory bounds how many OpenClaw sandboxes can be alive at once; the 2 cores bound the "
                "throughput: OpenClaw's start-up is CPU work, so beyond a few concurrent episodes each one "
                "just takes longer",
    }
    result["load_after"] = os.getloadavg()
    text = json.dumps(result, indent=2)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
