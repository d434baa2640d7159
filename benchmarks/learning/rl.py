#!/usr/bin/env python3
"""RL over the SFT student: does `clawgym train rl` improve the learning experiment's student on held-out tasks?

A benchmark, not a test. Stages (each resumes from what an interrupted run left in --out):

0. The SFT student of the learning experiment (``benchmarks/learning/experiment.py --stop-after train`` in
   --work, the same defaults as the table in docs/learning.md), unless --work already holds it.
1. RL training tasks: ``--rl-tasks`` tasks of the three families where the student is weakest (build_plan,
   edit_config, draft_message), synthesized from the *train* half of the personas with their own seed (never the
   held-out seed or personas), with written-out reference answers.
2. The held-out score before RL: the student on the experiment's held-out tasks (all 25, all five families), with
   the built-in agent, greedy, the experiment's limits, the model served at ``--eval-precision``.
3. For each seed: ``train rl`` from the student (k samples per task, --tasks-per-iter tasks per iteration, LoRA,
   GRPO, outcome credit), iterating until ``--iterations`` or until the next iteration would not fit in
   ``--budget-min`` minus the time of the evaluation; then the last policy (the student + its adapter, served by
   name) on the held-out tasks, alike.

It prints JSON (written to --out/results.json and, with --save, to benchmarks/learning/results/) with the
held-out mean and pass rate before and after per seed and per family, the reward curve per iteration, every
iteration's phase times, and the goal: the held-out mean up by >= 0.10 over the student in under 90 minutes
(RL and its evaluation, per seed, on these 2 cores). Nothing here chooses a setting from held-out scores: the
settings below were fixed before the first run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1].parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

RL_OPERATIONS = ["build_plan", "edit_config", "draft_message"]
GOAL_DELTA = 0.10
GOAL_MINUTES = 90.0
README_START = "<!-- rl-experiment:start -->"
README_END = "<!-- rl-experiment:end -->"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def evaluate(tasks_path: Path, model: str, run_dir: Path, args, backend, *, base_url: str | None = None) -> dict:
    """The built-in agent on `tasks_path` with the experiment's limits (resumes a partial run)."""
    from experiment import per_operation

    from clawgym.evaluation.run import run_eval
    from clawgym.evaluation.suites import load_suite
    from clawgym.rollout.runner import RolloutOptions
    from clawgym.rollout.setup import AgentSpec
    from clawgym.sandbox.base import SandboxLimits

    suite = load_suite(str(tasks_path))
    spec = AgentSpec(name="llm", model=model, base_url=base_url, max_turns=args.max_turns,
                     max_tokens=args.eval_max_tokens, temperature=0.0, llm_concurrency=args.concurrency,
                     request_timeout=1800.0, policy_version=Path(model).name, precision=args.eval_precision)
    options = RolloutOptions(samples=1, jobs=args.concurrency, limits=SandboxLimits(memory_mb=1024),
                             keep_workspaces=False, episode_timeout=3600.0)
    report = run_eval(suite, spec, backend, run_dir, options, chart=False)
    overall = report["overall"]
    return {"tasks": len(suite.tasks), "mean_score": overall.get("mean_score"), "pass_rate": overall.get("pass_rate"),
            "infra_errors": overall.get("infra_errors"), "per_operation": per_operation(tasks_path, run_dir)}


def evaluate_policy(tasks_path: Path, student: Path, adapter: Path | None, run_dir: Path, args, backend) -> dict:
    """The student with `adapter` (served by name next to it), or the student alone."""
    if adapter is None:
        return evaluate(tasks_path, str(student), run_dir, args, backend)
    from clawgym.serve.server import ServerProcess

    run_dir.mkdir(parents=True, exist_ok=True)
    with ServerProcess(str(student), log_path=run_dir / "server.log", precision=args.eval_precision,
                       loras={"policy": str(adapter)}) as server:
        return evaluate(tasks_path, "policy", run_dir, args, backend, base_url=server.base_url)


def rl_seed(seed: int, tasks, student: Path, out: Path, args, backend, held_out: Path) -> dict:
    from clawgym.train.rl_loop import RLOptions, RLState, run_rl

    out.mkdir(parents=True, exist_ok=True)
    done_path = out / "done.json"
    if done_path.exists():
        return json.loads(done_path.read_text())
    t0 = time.monotonic()
    spent = float(json.loads((out / "spent.json").read_text())["seconds"]) if (out / "spent.json").exists() else 0.0
    budget = args.budget_min * 60.0
    eval_estimate = args.eval_estimate_min * 60.0
    iteration_times: list[float] = []
    try:
        while True:
            state = RLState.load(out / "state.json")
            if state.version >= args.iterations:
                break
            elapsed = spent + time.monotonic() - t0
            next_cost = max(iteration_times) if iteration_times else 0.0
            if state.version > 0 and elapsed + next_cost + eval_estimate > budget:
                log(f"seed {seed}: stopping at v{state.version}: another iteration (~{next_cost / 60:.0f} min) and the "
                    f"evaluation (~{eval_estimate / 60:.0f} min) would pass the {args.budget_min:.0f}-minute budget")
                break
            opts = RLOptions(model=str(student), samples=args.samples, tasks_per_iter=args.tasks_per_iter,
                             iterations=state.version + 1, temperature=args.temperature, max_turns=args.max_turns,
                             max_tokens=args.rl_max_tokens, algo="grpo", credit="outcome", lr=args.lr,
                             lora_r=args.lora_r, seed=seed, jobs=args.jobs, sandbox=args.sandbox,
                             episode_timeout=1800.0, precision=args.eval_precision)
            t_it = time.monotonic()
            log(f"seed {seed}: iteration v{state.version}")
            rows = run_rl(tasks, out, opts, backend=backend)
            iteration_times.append(time.monotonic() - t_it)
            for r in rows:
                log(f"seed {seed}: v{r['version']} mean reward {r['mean_reward']:.3f} pass {r['pass_rate']:.2f}; "
                    f"rollout {r['rollout_s']:.0f} s, train {r['train_s']:.0f} s")
            from clawgym.core.atomic import write_json

            write_json(out / "spent.json", {"seconds": spent + time.monotonic() - t0})
    finally:  # also when interrupted (Ctrl-C, SIGTERM): a rerun counts the time already spent
        from clawgym.core.atomic import write_json

        write_json(out / "spent.json", {"seconds": spent + time.monotonic() - t0})
    state = RLState.load(out / "state.json")
    adapter = out / "adapters" / f"v{state.version}" if state.version > 0 else None
    rl_seconds = spent + time.monotonic() - t0
    t_eval = time.monotonic()
    log(f"seed {seed}: evaluating policy v{state.version} on the held-out tasks")
    after = evaluate_policy(held_out, student, adapter, out / "eval_after", args, backend)
    eval_seconds = time.monotonic() - t_eval
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()] \
        if (out / "metrics.jsonl").exists() else []
    res = {"seed": seed, "versions": state.version, "after": after, "rl_seconds": round(rl_seconds, 1),
           "eval_seconds": round(eval_seconds, 1), "total_minutes": round((rl_seconds + eval_seconds) / 60, 1),
           "curve": [{k: m.get(k) for k in ("version", "mean_reward", "pass_rate", "rollout_s", "train_s", "tokens",
                                             "rows", "packed_rows", "rows_run", "sequence_tokens", "kl",
                                             "clip_fraction", "ratio_max", "engine_logprob_gap_mean",
                                             "rollout_tokens_per_s", "train_tokens_per_s", "per_operation")}
                     for m in metrics]}
    from clawgym.core.atomic import write_json

    write_json(done_path, res)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=REPO / "runs" / "learning",
                    help="The learning experiment's directory (its SFT student; made there if missing).")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "learning-rl", help="Working directory (resumed).")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rl-tasks", type=int, default=48, help="RL training tasks (from the train personas).")
    ap.add_argument("--rl-seed", type=int, default=505, help="Synthesis seed of the RL training tasks.")
    ap.add_argument("--samples", type=int, default=4, help="k: samples per task (a GRPO group).")
    ap.add_argument("--tasks-per-iter", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=6, help="At most this many policy versions per seed.")
    ap.add_argument("--budget-min", type=float, default=GOAL_MINUTES,
                    help="Per seed: RL iterations stop when the next one and the evaluation would not fit.")
    ap.add_argument("--eval-estimate-min", type=float, default=8.0, help="Expected minutes of one evaluation.")
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--rl-max-tokens", type=int, default=768)
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--eval-max-tokens", type=int, default=768)
    ap.add_argument("--concurrency", type=int, default=13)
    ap.add_argument("-j", "--jobs", type=int, default=16, help="Episodes at once during RL rollouts.")
    ap.add_argument("--eval-precision", default="auto",
                    help="Server precision for rollouts and evaluations (auto: bf16 where native, as the learning "
                         "experiment; q4 cannot serve a merged SFT student, whose weights are off the 4-bit grid).")
    ap.add_argument("--sandbox", default="bwrap")
    ap.add_argument("--note", default=None, help="A remark kept in the results JSON (how the run went).")
    ap.add_argument("--save", action="store_true", help="Also write the JSON into benchmarks/learning/results/.")
    ap.add_argument("--readme", type=Path, default=None,
                    help="Write the figures between the rl-experiment markers of this page (docs/learning.md).")
    args = ap.parse_args(argv)

    from clawgym.core.atomic import write_json, write_text
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task
    from clawgym.sandbox import get_backend
    from clawgym.synth.pipeline import synthesize

    t_all = time.perf_counter()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    backend = get_backend(args.sandbox)
    student = args.work / "student"
    stage: dict[str, float] = {}

    t0 = time.perf_counter()
    if not (student / "config.json").exists():
        import experiment

        log("making the SFT student (the learning experiment's stages 1-4)")
        experiment.main(["--work", str(args.work), "--stop-after", "train", "--no-readme", "--sandbox", args.sandbox])
    stage["sft_student"] = time.perf_counter() - t0
    held_out = args.work / "test_tasks.jsonl"
    personas_train = args.work / "personas_train.yaml"

    t0 = time.perf_counter()
    rl_tasks_path = out / "rl_tasks.jsonl"
    synthesize(args.rl_tasks, args.rl_seed, rl_tasks_path, jobs=2, personas_path=personas_train,
               sandbox=args.sandbox, operations=RL_OPERATIONS, max_ops=1)
    tasks = list(read_records(rl_tasks_path, Task))
    held_ids = {t.id for t in read_records(held_out, Task)}
    assert not held_ids & {t.id for t in tasks}
    stage["rl_tasks"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    before_path = out / "before.json"
    if before_path.exists():
        before = json.loads(before_path.read_text())
    else:
        log("evaluating the SFT student on the held-out tasks")
        before = evaluate_policy(held_out, student, None, out / "eval_before", args, backend)
        write_json(before_path, before)
    stage["eval_before"] = time.perf_counter() - t0

    seeds = []
    for seed in args.seeds:
        seeds.append(rl_seed(seed, tasks, student, out / f"seed_{seed}", args, backend, held_out))
    b = before["mean_score"] or 0.0
    deltas = [(s["after"]["mean_score"] or 0.0) - b for s in seeds]
    result = {
        "benchmark": "learning_rl",
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}, no GPU",
        "in_distribution": "held-out tasks of the same generators (the learning experiment's seed-303 split, other "
                           "personas); RL tasks from the train personas, seed " + str(args.rl_seed),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "rl_operations": RL_OPERATIONS,
        "rl_tasks": len(tasks),
        "held_out_tasks": before.get("tasks"),
        "before": before,
        "seeds": seeds,
        "delta_mean_score": [round(d, 4) for d in deltas],
        "goal": {"delta_mean_score": GOAL_DELTA, "minutes_per_seed": GOAL_MINUTES},
        "meets_goal": [d >= GOAL_DELTA and s["total_minutes"] <= GOAL_MINUTES for d, s in zip(deltas, seeds, strict=True)],
        "stage_seconds": {k: round(v, 1) for k, v in stage.items()},
        "total_seconds": round(time.perf_counter() - t_all, 1),
        "load_average": os.getloadavg(),
    }
    if args.note:
        result["note"] = args.note
    text = json.dumps(result, indent=2)
    write_text(out / "results.json", text + "\n")
    if args.save:
        write_text(REPO / "benchmarks" / "learning" / "results" / f"rl_{time.strftime('%Y%m%d_%H%M')}.json", text + "\n")
    if args.readme:
        _write_readme(args.readme, result)
    print(text)
    return 0


def _write_readme(path: Path, res: dict) -> None:
    from clawgym.core.atomic import write_text

    b = res["before"]
    lines = [README_START,
             f"Measured {res['date']} on {res['machine']}: {res['rl_tasks']} RL tasks ({', '.join(res['rl_operations'])}), "
             f"{res['held_out_tasks']} held-out tasks (all five families; {res['in_distribution']}).", "",
             "| policy | held-out mean score | success rate | RL minutes | versions |", "|---|---:|---:|---:|---:|",
             f"| SFT student | {b['mean_score']:.3f} | {b['pass_rate']:.3f} | | |"]
    for s in res["seeds"]:
        a = s["after"]
        lines.append(f"| + RL, seed {s['seed']} | {a['mean_score']:.3f} | {a['pass_rate']:.3f} | "
                     f"{s['total_minutes']:.0f} | {s['versions']} |")
    lines += ["", "Training reward per iteration (mean over the iteration's episodes):", ""]
    for s in res["seeds"]:
        curve = ", ".join(f"v{c['version']} {c['mean_reward']:.3f}" for c in s["curve"] if c.get("mean_reward") is not None)
        lines.append(f"- seed {s['seed']}: {curve}")
    lines.append(README_END)
    text = path.read_text()
    if README_START in text and README_END in text:
        head, _, rest = text.partition(README_START)
        _, _, tail = rest.partition(README_END)
        write_text(path, head + "\n".join(lines) + tail)


if __name__ == "__main__":
    sys.exit(main())
