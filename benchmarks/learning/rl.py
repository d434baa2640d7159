#!/usr/bin/env python3
"""RL over the SFT student, designed so that an effect can be seen: does `clawgym train rl` raise the learning
experiment's student on fresh held-out tasks of the families it trained on?

A benchmark, not a test. Every setting below was fixed before the first run of this design; nothing here chooses a
setting from a held-out score. Stages (each resumes from what an interrupted run left in --out):

0. The SFT student of the learning experiment (``benchmarks/learning/experiment.py --stop-after train`` in
   --work, its defaults), unless --work already holds it. RL starts from the student's LoRA adapter
   (``--work/sft/final``, not merged), served on the base model at ``--precision`` (bf16: the fastest for the
   workload's shape with an adapter, ``benchmarks/perf/serve_adapter_batch.py``; q4's kernel wins for one
   sequence, not for such a batch).
1. Candidate RL tasks: ``--candidates`` tasks of all five families, synthesized from the *train* half of the
   personas with ``--rl-seed``.
2. Screening: the student on every candidate, ``--screen-k`` samples at the RL temperature. A task is a training
   task when its samples' scores differ (a GRPO group with a signal); the RL families are the families with at
   least ``--min-family-tasks`` such tasks. Chosen on training tasks only.
3. The held-out set: ``--held-out-tasks`` fresh tasks of the RL families only, from the *other* half of the
   personas with ``--held-out-seed`` (a seed no setting was chosen on, never the learning experiment's 303).
4. Before (and control): the student, greedy, on the held-out set and on the training tasks. The control of the
   design is this run: the same loop with its update switched off leaves the student's adapter unchanged (a zero
   update), served the same way.
5. For each credit in ``--credits`` and seed in ``--seeds``: ``train rl`` from the student's adapter (k =
   ``--samples``, ``--tasks-per-iter`` tasks an iteration, ``--mini-batches`` optimizer steps per iteration, GRPO),
   iterating while the next iteration fits in ``--rl-minutes``; the adapter's change from the student's is
   measured; then the last policy, greedy, on the held-out set and the training tasks.

It prints JSON (written to --out/results.json and, with --save, to benchmarks/learning/results/): every setting,
the commit, each run's curve (reward, KL, clip fraction, grad norm per iteration), the weight change, held-out and
training-task scores before and after with a paired bootstrap 95 % interval of the change over tasks, per
family, and every stage's time. The goal: held-out mean up >= 0.10 over the student with the interval above 0,
the whole experiment within one 3-hour session on 2 cores.
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

FAMILIES = ["convert_format", "clean_data", "build_plan", "draft_message", "edit_config"]
GOAL_DELTA = 0.10
GOAL_MINUTES = 180.0
BASE_MODEL = "smollm2-135m"
README_START = "<!-- rl-experiment:start -->"
README_END = "<!-- rl-experiment:end -->"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def family(task) -> str:
    return (task.operations or ["?"])[0]


def run_policy(tasks_path: Path, adapter: Path, run_dir: Path, args, backend, *, samples: int = 1,
               temperature: float = 0.0, max_tokens: int | None = None, seed: int | None = None) -> dict[str, list[float]]:
    """The base model with `adapter` (served by name, at --precision) on every task of `tasks_path`: the
    built-in agent with the experiment's limits; {task id: [score of each sample]} (an unscored episode counts 0,
    an infrastructure error is left out). Resumes a partial run."""
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Trajectory
    from clawgym.evaluation.run import run_eval
    from clawgym.evaluation.suites import load_suite
    from clawgym.rollout.runner import RolloutOptions
    from clawgym.rollout.setup import AgentSpec
    from clawgym.sandbox.base import SandboxLimits
    from clawgym.serve.server import ServerProcess

    run_dir.mkdir(parents=True, exist_ok=True)
    suite = load_suite(str(tasks_path))
    with ServerProcess(BASE_MODEL, log_path=run_dir / "server.log", precision=args.precision,
                       loras={"policy": str(adapter)}) as server:
        spec = AgentSpec(name="llm", model="policy", base_url=server.base_url, max_turns=args.max_turns,
                         max_tokens=max_tokens or args.max_tokens, temperature=temperature,
                         llm_concurrency=args.concurrency, request_timeout=1800.0, policy_version=adapter.name,
                         precision=args.precision, seed=seed)
        options = RolloutOptions(samples=samples, jobs=args.concurrency, limits=SandboxLimits(memory_mb=1024),
                                 keep_workspaces=False, episode_timeout=3600.0)
        run_eval(suite, spec, backend, run_dir, options, chart=False)
    scores: dict[str, list[float]] = {}
    for r in read_records(run_dir / "trajectories.jsonl", Trajectory):
        if r.verdict is not None and r.verdict.status == "infra_error":
            continue
        scores.setdefault(r.task_id, []).append(r.verdict.score if r.verdict else 0.0)
    return scores


def greedy_scores(tasks_path: Path, adapter: Path, run_dir: Path, args, backend) -> dict[str, float]:
    return {t: s[0] for t, s in run_policy(tasks_path, adapter, run_dir, args, backend).items()}


def summarize(scores: dict[str, float], fam: dict[str, str]) -> dict:
    vals = list(scores.values())
    per: dict[str, list[float]] = {}
    for t, s in scores.items():
        per.setdefault(fam[t], []).append(s)
    return {"tasks": len(vals), "mean_score": round(sum(vals) / len(vals), 4) if vals else None,
            "pass_rate": round(sum(v >= 1.0 for v in vals) / len(vals), 4) if vals else None,
            "per_family": {f: {"tasks": len(v), "mean_score": round(sum(v) / len(v), 4),
                               "pass_rate": round(sum(x >= 1.0 for x in v) / len(v), 4)} for f, v in sorted(per.items())}}


def paired_change(before: dict[str, float], after: dict[str, float]) -> dict:
    """The mean change over the tasks scored both times, its paired bootstrap 95 % interval (the generalization
    experiment's), and how many tasks went up and down."""
    from generalization import paired

    ids = sorted(set(before) & set(after))
    d = [after[i] - before[i] for i in ids]
    return {**paired(before, after, ids), "improved": sum(x > 0 for x in d), "worse": sum(x < 0 for x in d)}


def weight_change(start: Path, trained: Path) -> dict:
    """How far the adapter moved: the norm of the change of its LoRA update (scale * B @ A, summed over modules)
    against the norm of the starting one, and of the raw A/B tensors."""
    from safetensors.torch import load_file

    a, b = load_file(str(start / "adapter_model.safetensors")), load_file(str(trained / "adapter_model.safetensors"))
    raw = sum(float((b[k] - a[k]).pow(2).sum()) for k in a) ** 0.5
    raw0 = sum(float(a[k].pow(2).sum()) for k in a) ** 0.5
    delta = start_norm = 0.0
    for k in a:
        if ".lora_A." not in k:
            continue
        kb = k.replace(".lora_A.", ".lora_B.")
        w0, w1 = a[kb] @ a[k], b[kb] @ b[k]
        delta += float((w1 - w0).pow(2).sum())
        start_norm += float(w0.pow(2).sum())
    return {"adapter_tensors_relative": round(raw / raw0, 5) if raw0 else None,
            "lora_update_relative": round((delta / start_norm) ** 0.5, 5) if start_norm else None}


def rl_run(name: str, credit: str, seed: int, tasks, start: Path, out: Path, args, backend, train_path: Path,
           held_path: Path, fam: dict[str, str], before: dict) -> dict:
    from clawgym.core.atomic import write_json
    from clawgym.train.rl_loop import RLOptions, RLState, run_rl

    out.mkdir(parents=True, exist_ok=True)
    done_path = out / "done.json"
    if done_path.exists():
        return json.loads(done_path.read_text())
    spent_path = out / "spent.json"
    spent = float(json.loads(spent_path.read_text())["seconds"]) if spent_path.exists() else 0.0
    t0 = time.monotonic()
    times: list[float] = []
    try:
        while True:
            state = RLState.load(out / "state.json")
            elapsed = spent + time.monotonic() - t0
            if state.version >= args.max_iterations:
                break
            if state.version > 0 and elapsed + (max(times) if times else elapsed / state.version) > args.rl_minutes * 60:
                log(f"{name}: stopping at v{state.version}: another iteration would pass {args.rl_minutes:.0f} min")
                break
            opts = RLOptions(model=BASE_MODEL, init_adapter=str(start), samples=args.samples,
                             tasks_per_iter=args.tasks_per_iter, iterations=state.version + 1,
                             temperature=args.temperature, max_turns=args.max_turns, max_tokens=args.rl_max_tokens,
                             algo="grpo", credit=credit, lr=args.lr, mini_batches=args.mini_batches, seed=seed,
                             jobs=args.jobs, sandbox=args.sandbox, episode_timeout=1800.0, precision=args.precision)
            t_it = time.monotonic()
            log(f"{name}: iteration v{state.version}")
            for r in run_rl(tasks, out, opts, backend=backend):
                log(f"{name}: v{r['version']} mean reward {r['mean_reward']:.3f} pass {r['pass_rate']:.2f}; "
                    f"rollout {r['rollout_s']:.0f} s, train {r['train_s']:.0f} s")
            times.append(time.monotonic() - t_it)
            write_json(spent_path, {"seconds": spent + time.monotonic() - t0})
    finally:  # also when interrupted: a rerun counts the time already spent
        write_json(spent_path, {"seconds": spent + time.monotonic() - t0})
    rl_seconds = spent + time.monotonic() - t0
    state = RLState.load(out / "state.json")
    adapter = out / "adapters" / f"v{state.version}" if state.version > 0 else start
    t_eval = time.monotonic()
    log(f"{name}: evaluating policy v{state.version}")
    held = greedy_scores(held_path, adapter, out / "eval_held_out", args, backend)
    train = greedy_scores(train_path, adapter, out / "eval_train", args, backend)
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()] \
        if (out / "metrics.jsonl").exists() else []
    res = {"name": name, "credit": credit, "seed": seed, "versions": state.version,
           "weight_change": weight_change(start, adapter) if adapter != start else None,
           "held_out": summarize(held, fam), "train_tasks": summarize(train, fam),
           "held_out_change": paired_change(before["held_out_scores"], held),
           "train_tasks_change": paired_change(before["train_scores"], train),
           "held_out_scores": held, "rl_seconds": round(rl_seconds, 1),
           "eval_seconds": round(time.monotonic() - t_eval, 1),
           "curve": [{k: v for k, v in m.items() if k != "update_steps"} for m in metrics]}
    write_json(done_path, res)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=REPO / "runs" / "learning",
                    help="The learning experiment's directory (its SFT student; made there if missing).")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "learning-rl2", help="Working directory (resumed).")
    ap.add_argument("--candidates", type=int, default=32, help="Candidate RL tasks (all five families, train personas).")
    ap.add_argument("--rl-seed", type=int, default=505, help="Synthesis seed of the candidate RL tasks.")
    ap.add_argument("--screen-k", type=int, default=4, help="Samples per candidate in the screening.")
    ap.add_argument("--min-family-tasks", type=int, default=3, help="Training tasks a family needs to be an RL family.")
    ap.add_argument("--held-out-tasks", type=int, default=60)
    ap.add_argument("--held-out-seed", type=int, default=9091, help="Synthesis seed of the held-out tasks.")
    ap.add_argument("--credits", nargs="+", default=["outcome", "progress"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--samples", type=int, default=8, help="k: samples per task (a GRPO group).")
    ap.add_argument("--tasks-per-iter", type=int, default=8)
    ap.add_argument("--mini-batches", type=int, default=4, help="Optimizer steps per iteration.")
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--rl-minutes", type=float, default=15.0, help="Per run: iterate while the next iteration fits.")
    ap.add_argument("--max-iterations", type=int, default=8)
    ap.add_argument("--rl-max-tokens", type=int, default=768)
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=768, help="Completion tokens per call at evaluation.")
    ap.add_argument("--concurrency", type=int, default=13, help="Episodes at once at evaluation and screening.")
    ap.add_argument("-j", "--jobs", type=int, default=16, help="Episodes at once during RL rollouts.")
    ap.add_argument("--precision", default="bf16",
                    help="Server precision of rollouts and evaluations (the base model + the adapter in fp32).")
    ap.add_argument("--sandbox", default="bwrap")
    ap.add_argument("--stop-after", choices=["screen", "before"], default=None)
    ap.add_argument("--note", default=None, help="A remark kept in the results JSON (how the run went).")
    ap.add_argument("--save", action="store_true", help="Also write the JSON into benchmarks/learning/results/.")
    ap.add_argument("--readme", type=Path, default=None,
                    help="Write the figures between the rl-experiment markers of this page (docs/learning.md).")
    args = ap.parse_args(argv)

    from clawgym.core.atomic import write_json, write_text
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task
    from clawgym.rollout.provenance import source_revision
    from clawgym.sandbox import get_backend
    from clawgym.synth.pipeline import synthesize

    t_all = time.perf_counter()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    backend = get_backend(args.sandbox)
    start = args.work / "sft" / "final"
    stage: dict[str, float] = {}
    prev_stage = json.loads((out / "stages.json").read_text()) if (out / "stages.json").exists() else {}

    running: dict[str, float] = {}  # the stage under way: its start (so an interrupted stage's time is kept)

    def begin(name: str) -> float:
        running.clear()
        running[name] = time.perf_counter()
        return running[name]

    def timed(name: str, t0: float) -> None:
        running.pop(name, None)
        stage[name] = prev_stage.get(name, 0.0) + (time.perf_counter() - t0)
        write_json(out / "stages.json", {**prev_stage, **stage})

    def keep_interrupted() -> None:  # at exit after Ctrl-C or SIGTERM: the time a resumed run will not see
        for name, t0 in list(running.items()):
            timed(name, t0)

    import atexit
    import signal

    atexit.register(keep_interrupted)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    t0 = begin("sft_student")
    if not (start / "adapter_config.json").exists():
        import experiment

        log("making the SFT student (the learning experiment's stages 1-4)")
        experiment.main(["--work", str(args.work), "--stop-after", "train", "--no-readme", "--sandbox", args.sandbox])
    timed("sft_student", t0)

    t0 = begin("candidates")
    cand_path = out / "candidates.jsonl"
    synthesize(args.candidates, args.rl_seed, cand_path, jobs=2, personas_path=args.work / "personas_train.yaml",
               sandbox=args.sandbox, operations=FAMILIES, max_ops=1)
    candidates = list(read_records(cand_path, Task))
    timed("candidates", t0)

    t0 = begin("screen")
    screen_path = out / "screen.json"
    if screen_path.exists():
        screen = json.loads(screen_path.read_text())
    else:
        log(f"screening {len(candidates)} candidates, {args.screen_k} samples each")
        screen = run_policy(cand_path, start, out / "screen", args, backend, samples=args.screen_k,
                            temperature=args.temperature, max_tokens=args.rl_max_tokens, seed=args.rl_seed)
        write_json(screen_path, screen)
    timed("screen", t0)
    fam = {t.id: family(t) for t in candidates}
    varied = [t for t in candidates if len(set(screen.get(t.id, []))) > 1]
    counts: dict[str, int] = {}
    for t in varied:
        counts[family(t)] = counts.get(family(t), 0) + 1
    rl_families = sorted(f for f, n in counts.items() if n >= args.min_family_tasks)
    train = [t for t in varied if family(t) in rl_families]
    if not train:
        raise SystemExit(f"no family has {args.min_family_tasks} candidates with varied scores: {counts}")
    train_path = out / "train_tasks.jsonl"
    write_text(train_path, "".join(t.model_dump_json(exclude_none=True) + "\n" for t in train))
    log(f"RL families {rl_families}: {len(train)} training tasks ({counts})")
    if args.stop_after == "screen":
        return 0

    t0 = begin("held_out_tasks")
    held_path = out / "held_out.jsonl"
    synthesize(args.held_out_tasks, args.held_out_seed, held_path, jobs=2,
               personas_path=args.work / "personas_test.yaml", sandbox=args.sandbox, operations=rl_families, max_ops=1)
    held_tasks = list(read_records(held_path, Task))
    assert not {t.id for t in held_tasks} & {t.id for t in candidates}
    fam.update({t.id: family(t) for t in held_tasks})
    timed("held_out_tasks", t0)

    t0 = begin("before")
    before_path = out / "before.json"
    if before_path.exists():
        before = json.loads(before_path.read_text())
    else:
        log("the student (and control) on the held-out and training tasks")
        held = greedy_scores(held_path, start, out / "before_held_out", args, backend)
        tr = greedy_scores(train_path, start, out / "before_train", args, backend)
        before = {"held_out": summarize(held, fam), "train_tasks": summarize(tr, fam), "held_out_scores": held,
                  "train_scores": tr}
        write_json(before_path, before)
    timed("before", t0)
    if args.stop_after == "before":
        return 0

    runs = []
    for credit in args.credits:
        for seed in args.seeds:
            name = f"{credit}_seed{seed}"
            t0 = begin(name)
            runs.append(rl_run(name, credit, seed, train, start, out / name, args, backend, train_path, held_path,
                               fam, before))
            timed(name, t0)
    for r in runs:  # derived data: every run's change by the same method, whichever code wrote its done.json
        r["held_out_change"] = paired_change(before["held_out_scores"], r["held_out_scores"])
    total_minutes = sum({**prev_stage, **stage}.values()) / 60
    result = {
        "benchmark": "learning_rl",
        "design": 2,
        "date": time.strftime("%Y-%m-%d"),
        "source": source_revision(),
        "command": "python benchmarks/learning/rl.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}, no GPU",
        "in_distribution": (f"held-out: {len(held_tasks)} fresh tasks of the RL families, the same generators, other "
                            f"personas (seed {args.held_out_seed}); training: screened candidates from the train "
                            f"personas (seed {args.rl_seed})"),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "start": {"adapter": str(start), "base_model": BASE_MODEL, "precision": args.precision},
        "screen": {"candidates": len(candidates), "varied": len(varied), "varied_per_family": counts},
        "rl_families": rl_families,
        "train_tasks": len(train),
        "held_out_tasks": len(held_tasks),
        "before": before,
        "runs": runs,
        "goal": {"held_out_delta": GOAL_DELTA, "ci_above_zero": True, "minutes": GOAL_MINUTES},
        "meets_goal": [r["held_out_change"]["delta"] is not None and r["held_out_change"]["delta"] >= GOAL_DELTA
                       and r["held_out_change"]["ci95"][0] > 0 for r in runs],
        "stage_minutes": {k: round(v / 60, 1) for k, v in {**prev_stage, **stage}.items()},
        "total_minutes": round(total_minutes, 1),
        "within_minutes": total_minutes <= GOAL_MINUTES,
        "wall_seconds_this_invocation": round(time.perf_counter() - t_all, 1),
        "load_average": os.getloadavg(),
    }
    if args.note:
        result["note"] = args.note
    text = json.dumps(result, indent=2)
    write_text(out / "results.json", text + "\n")
    if args.save:
        write_text(REPO / "benchmarks" / "learning" / "results" / f"rl2_{time.strftime('%Y%m%d_%H%M')}.json",
                   text + "\n")
    if args.readme:
        _write_readme(args.readme, result)
    print(text)
    return 0


def _write_readme(path: Path, res: dict) -> None:
    from clawgym.core.atomic import write_text

    b = res["before"]
    lines = [README_START,
             f"Measured {res['date']} at {((res.get('source') or {}).get('git_commit') or '?')[:7]} on {res['machine']}"
             f"{' (' + res['note'] + ')' if res.get('note') else ''}. "
             f"RL families (screened): {', '.join(res['rl_families'])}; {res['train_tasks']} training tasks; "
             f"{res['held_out_tasks']} held-out tasks ({res['in_distribution']}). Start: the SFT student's adapter, "
             f"served at {res['start']['precision']}. Change: paired over tasks, bootstrap 95 % interval.", "",
             "| policy | held-out mean | held-out change [95 % CI] | training-task mean | versions | weight change | "
             "minutes |", "|---|---:|---:|---:|---:|---:|---:|",
             f"| SFT student (= control: update off) | {b['held_out']['mean_score']:.3f} | | "
             f"{b['train_tasks']['mean_score']:.3f} | 0 | 0 | |"]
    for r in res["runs"]:
        c = r["held_out_change"]
        wc = (r.get("weight_change") or {}).get("lora_update_relative")
        lines.append(f"| + RL, {r['credit']} credit, seed {r['seed']} | {r['held_out']['mean_score']:.3f} | "
                     f"{c['delta']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}] | "
                     f"{r['train_tasks']['mean_score']:.3f} | {r['versions']} | "
                     f"{'' if wc is None else f'{wc:.3f}'} | {(r['rl_seconds'] + r['eval_seconds']) / 60:.0f} |")
    lines += ["", "Training reward per iteration (mean over the iteration's episodes):", ""]
    for r in res["runs"]:
        curve = ", ".join(f"v{c['version']} {c['mean_reward']:.3f}" for c in r["curve"] if c.get("mean_reward") is not None)
        lines.append(f"- {r['credit']}, seed {r['seed']}: {curve}")
    lines.append(README_END)
    text = path.read_text()
    if README_START in text and README_END in text:
        head, _, rest = text.partition(README_START)
        _, _, tail = rest.partition(README_END)
        write_text(path, head + "\n".join(lines) + tail)


if __name__ == "__main__":
    sys.exit(main())
