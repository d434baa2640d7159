"""Synthesis speed: tasks generated AND validated in sandboxes per second, per route; dedup throughput.

Prints one JSON object: tasks written, wall time, tasks/s, rejections by reason, coverage (categories,
subcategories, operations present), and the time a 13,500-task run would take at this rate (or the measured
time, with --n 13500). Because the machine may be shared, it also records how contended the run was: the load
average before and after, the CPU time the whole machine spent during the run, and the CPU time of this run's
own process tree (sandboxes included; measured with a cpuacct cgroup when one can be made, i.e. as root).

`--routes persona skill` measures the template skill route the same way (`routes.skill`; the top-level figures
stay the persona route's). `dedup` embeds and deduplicates `--dedup-n` (13,500) template tasks (generated
without validation, which dedup does not need) with all-MiniLM-L6-v2 as `clawgym synth dedup` does: embedding
and comparison times apart, tasks/s, what was dropped, and a second run from the embedding cache.

Run: python benchmarks/perf/synth.py [--n 400] [--jobs 2] [--seed 0] [--quick] [--out FILE] [--keep FILE]
     [--routes persona skill] [--no-dedup] [--dedup-n 13500] [--dedup-precision auto|fp32|bf16] [--skip-synth]
     [--skip-dedup]

The synthesis runs remove near-duplicates as the CLI does by default (`--dedup-precision` is how they embed;
`--no-dedup` turns it off).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _machine_cpu_s() -> float | None:
    """Busy CPU seconds of the whole machine so far (all cores; /proc/stat), None where unavailable."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class _OwnCpu:
    """CPU time of this process and everything it starts (cgroup v1 cpuacct), or None when not permitted."""

    def __init__(self) -> None:
        self.group: Path | None = None
        try:
            group = CPUACCT / f"clawgym-bench-synth-{os.getpid()}"
            group.mkdir()
            (group / "cgroup.procs").write_text(str(os.getpid()))
            self.group = group
        except OSError:
            pass

    def seconds(self) -> float | None:
        if self.group is None:
            return None
        return int((self.group / "cpuacct.usage").read_text()) / 1e9

    def close(self) -> None:
        if self.group is None:
            return
        try:
            (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
            for _ in range(50):  # the run's processes are gone; the group empties as they are reaped
                try:
                    self.group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
        except OSError:
            pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    ap.add_argument("--keep", type=Path, help="keep the tasks file here (default: a temp dir, removed)")
    ap.add_argument("--routes", nargs="+", default=["persona"], choices=["persona", "skill"])
    ap.add_argument("--dedup-n", type=int, default=13500)
    ap.add_argument("--dedup-precision", default="auto", choices=["auto", "fp32", "bf16"])
    ap.add_argument("--dedup-tasks", type=Path, help="deduplicate this tasks file instead of generating one")
    ap.add_argument("--no-dedup", action="store_true",
                    help="synthesize without near-duplicate removal during the run (the CLI's --no-dedup; on by "
                         "default there and here)")
    ap.add_argument("--skip-synth", action="store_true")
    ap.add_argument("--skip-dedup", action="store_true")
    args = ap.parse_args()
    if args.quick or os.environ.get("CLAWGYM_BENCH_QUICK") == "1":
        args.n = min(args.n, 60)
        args.dedup_n = min(args.dedup_n, 300)
    result: dict = {}
    if not args.skip_synth:
        result = _synth(args)
        for route in args.routes:
            if route != "persona":
                result.setdefault("routes", {})[route] = _template_route(route, args)
    if not args.skip_dedup:
        result["dedup"] = _dedup(args)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


def _template_route(route: str, args) -> dict:
    """Tasks/s of another template route (validated like the persona route), or why it was not measured."""
    try:
        from clawgym.synth.skill_route import synthesize_skill_tasks
    except ImportError as exc:
        return {"skipped": f"route {route} not available: {exc}"}
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task

    with tempfile.TemporaryDirectory(prefix=f"clawgym-bench-synth-{route}-") as td:
        out = Path(td) / "tasks.jsonl"
        load_before = os.getloadavg()
        t0 = time.perf_counter()
        report = synthesize_skill_tasks(args.n, args.seed, out, jobs=args.jobs, dedup=not args.no_dedup,
                                        dedup_precision=args.dedup_precision)
        wall = time.perf_counter() - t0
        tasks = read_records(out, Task)
    return {"command": f"clawgym synth {route} -n {args.n} --seed {args.seed} -j {args.jobs}{_flags(args)}",
            "near_duplicates": report.near_duplicates,
            "tasks": len(tasks), "wall_s": round(wall, 2), "tasks_per_s": round(len(tasks) / wall, 2),
            "rejected": dict(report.rejected), "distinct_instructions": len({t.instruction for t in tasks}),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()]}


def _dedup(args) -> dict:
    """Dedup throughput on N template tasks: embedding (the model) and comparison (blockwise matmul) apart."""
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task
    from clawgym.synth.dedup import Embedder, EmbeddingCache, dedup_tasks, fast_bf16
    from clawgym.synth.pipeline import synthesize

    with tempfile.TemporaryDirectory(prefix="clawgym-bench-dedup-") as td:
        gen_s = None
        if args.dedup_tasks:
            tasks = read_records(args.dedup_tasks, Task)
        else:
            path = Path(td) / "tasks.jsonl"
            t0 = time.perf_counter()
            synthesize(args.dedup_n, args.seed, path, jobs=args.jobs, validate=False)
            gen_s = round(time.perf_counter() - t0, 1)
            tasks = read_records(path, Task)
        t0 = time.perf_counter()
        embedder = Embedder(precision=args.dedup_precision)
        load_s = time.perf_counter() - t0
        embedder.cache = EmbeddingCache(Path(td) / "emb.sqlite")
        load_before = os.getloadavg()
        kept, rep = dedup_tasks(tasks, embedder)
        load_after = os.getloadavg()
        t0 = time.perf_counter()
        kept2, rep2 = dedup_tasks(tasks, embedder)  # again: every embedding from the cache
        cached_s = time.perf_counter() - t0
    worst = _compare_worst_case(len(tasks), embedder.dim, len(rep.by_category))
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(embedder.tokenizer.name_or_path))
    lengths = sorted(min(256, len(tok(t.instruction)["input_ids"])) for t in tasks[:2000])
    total = rep.embed_s + rep.compare_s
    return {
        "tasks": len(tasks), "source": str(args.dedup_tasks) if args.dedup_tasks else
        f"template persona tasks, seed {args.seed}, not validated (generated in {gen_s} s)",
        "precision": embedder.precision, "cpu_bf16_native": fast_bf16(), "model_load_s": round(load_s, 1),
        "embed_s": round(rep.embed_s, 1), "compare_s": round(rep.compare_s, 2), "total_s": round(total, 1),
        "tasks_per_s": round(len(tasks) / total, 1), "compare_tasks_per_s": round(len(tasks) / rep.compare_s),
        "kept": rep.kept, "dropped": len(rep.dropped), "same_result_from_cache": [t.id for t in kept] == [t.id for t in kept2],
        "cached_rerun_s": round(cached_s, 2),
        "tokens_per_task_p50": lengths[len(lengths) // 2] if lengths else None,
        "categories": len(rep.by_category),
        "compare_worst_case": worst,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
    }


def _compare_worst_case(n: int, dim: int, categories: int) -> dict:
    """The comparison stage alone when nothing is a duplicate (every kept set grows to its full size): n random
    unit vectors in `categories` groups, through the same DedupIndex."""
    import numpy as np

    from clawgym.synth.dedup import DedupIndex

    rng = np.random.default_rng(0)
    emb = rng.normal(size=(n, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    cats = [str(i % max(1, categories)) for i in range(n)]
    index = DedupIndex(0.9, dim)
    t0 = time.perf_counter()
    dropped = sum(m is not None for m in index.add([str(i) for i in range(n)], cats, emb))
    wall = time.perf_counter() - t0
    return {"tasks": n, "categories": categories, "dropped": dropped, "compare_s": round(wall, 2),
            "tasks_per_s": round(n / wall)}


def _flags(args) -> str:
    """The CLI options that give the run measured here."""
    if args.no_dedup:
        return " --no-dedup"
    return "" if args.dedup_precision == "auto" else f" --dedup-precision {args.dedup_precision}"


def _synth(args) -> dict:

    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task
    from clawgym.core.taxonomy import load_taxonomy
    from clawgym.synth.pipeline import synthesize

    tax = load_taxonomy()
    own = _OwnCpu()
    try:
        with tempfile.TemporaryDirectory(prefix="clawgym-bench-synth-") as td:
            out = Path(td) / "tasks.jsonl"
            load_before = os.getloadavg()
            machine0, own0 = _machine_cpu_s(), own.seconds()
            t0 = time.perf_counter()
            report = synthesize(args.n, args.seed, out, jobs=args.jobs, dedup=not args.no_dedup,
                                dedup_precision=args.dedup_precision, on_progress=lambda d, n: print(f"\r{d}/{n}", end="", file=sys.stderr))
            wall = time.perf_counter() - t0
            machine1, own1 = _machine_cpu_s(), own.seconds()
            load_after = os.getloadavg()
            print(file=sys.stderr)
            tasks = read_records(out, Task)
            size = out.stat().st_size
            if args.keep:
                shutil.copyfile(out, args.keep)
    finally:
        own.close()
    rate = len(tasks) / wall
    ops = {op for t in tasks for op in t.operations}
    subs = {t.metadata.get("subcategory_id") for t in tasks}
    machine_cpu = round(machine1 - machine0, 1) if machine0 is not None and machine1 is not None else None
    own_cpu = round(own1 - own0, 1) if own0 is not None and own1 is not None else None
    result = {
        "command": f"clawgym synth persona -n {args.n} --seed {args.seed} -j {args.jobs}{_flags(args)}",
        "near_duplicates": report.near_duplicates,
        "tasks": len(tasks), "jobs": args.jobs, "wall_s": round(wall, 2), "tasks_per_s": round(rate, 2),
        "validated": "every written task: reference 1.0, no-op 0 on every check, partial strictly between",
        "rejected": dict(report.rejected),
        "coverage": {"categories": len({t.category for t in tasks}), "subcategories": len(subs),
                     "operations": len(ops), "taxonomy_subcategories": len(tax.subcategories),
                     "taxonomy_operations": len(tax.operations)},
        "distinct_instructions": len({t.instruction for t in tasks}),
        "chain_lengths": report.as_dict()["chain_lengths"],
        "reference_steps": report.as_dict()["reference_steps"],
        "rarest": {"subcategory": min(report.by_subcategory.values(), default=0),
                   "operation": min(report.by_operation.values(), default=0)},
        "bytes_per_task": round(size / max(1, len(tasks))),
        "projected_13500_s": round(13500 / rate, 1),
        "target_13500_s": 600,
        "meets_target": 13500 / rate <= 600,
        "contention": {
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in load_after],
            "machine_cpu_s": machine_cpu,  # all cores, every process on the machine, during the run
            "this_run_cpu_s": own_cpu,  # this run's process tree, sandboxes included (None: not measurable)
            "others_cpu_s": round(machine_cpu - own_cpu, 1) if machine_cpu is not None and own_cpu is not None
            else None,
            "cpu_capacity_s": round(wall * (os.cpu_count() or 1), 1),
        },
        "cpu_ms_per_task": round(own_cpu / len(tasks) * 1000, 1) if own_cpu and tasks else None,
        "environment": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
    }
    return result


if __name__ == "__main__":
    sys.exit(main())
