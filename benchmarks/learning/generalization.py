#!/usr/bin/env python3
"""The generalization experiment: what does SFT on the oracle teacher's trajectories teach SmolLM2-135M beyond
recall of the training distribution?

The learning experiment (experiment.py) trains and tests on the same five operation families, worded by the same
generators: its gain says the student learned *those* tasks. This one measures, with the same model, data
pipeline and training settings, how far the gain carries:

(a) **leave one family out**: for each family F, a student trained on the other families' demonstrations only,
    evaluated on the held-out tasks of F, against the student trained on all families (same tasks, paired);
(b) **held-out phrasing**: held-out tasks of the same families, personas and seed, worded from the *other half*
    of every choice the generators make (``synth persona --phrasing-half 1``; training uses half 0): the same
    operations asked in wording, schemas, names and vocabularies no training task used;
(c) **tasks nobody here wrote**: PinchBench v1 offline tasks and ClawGym's sampled training task folders
    (``../shared/datasets``), base model against student;
(d) **verbatim overlap**: the share of held-out tasks whose reference action sequence (the tool calls the
    oracle teacher makes on it, as the student would have to emit them) appears verbatim among the training
    demonstrations, whole or in part: how much of an in-distribution score could be recall;
(e) **training seeds**: every student is trained for each of ``--seeds`` (the seed of its training tasks and of
    SFT), the held-out tasks come from one test seed (``--test-seed``, used by this experiment only, chosen before
    any result and never changed), and every mean has a 95% bootstrap confidence interval over tasks (paired for
    differences).

Personas are split as in experiment.py (training tasks from one half, held-out tasks from the other), so every
held-out set is other personas; (in-distribution) below means same generators, same wording half.

Stages resume from ``--work`` (default runs/generalization): tasks, teacher runs, filtered demonstrations, each
student, each evaluation. ``--only`` limits a run to some parts (e.g. ``--only main phrasing`` first, ``lofo``
later). Results: ``--work/results.json`` (every per-task score, so the intervals can be recomputed), and with
``--save`` a copy in benchmarks/learning/results/, the table in docs/learning.md between the
``generalization-experiment`` markers and its short form in the README between the ``generalization-summary``
markers. ``--report`` runs no stage: it prints (and with ``--save`` saves) the table of what ``--work`` holds,
e.g. while a later part is still running.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from experiment import DEFAULT_OPERATIONS, release_memory, write_readme  # noqa: E402

from clawgym.core.atomic import write_json, write_text  # noqa: E402

README_START = "<!-- generalization-experiment:start -->"
README_END = "<!-- generalization-experiment:end -->"
SUMMARY_START = "<!-- generalization-summary:start -->"  # the README's short form of the table
SUMMARY_END = "<!-- generalization-summary:end -->"
SHARED = REPO.parent / "shared" / "datasets"
PARTS = ("main", "phrasing", "external", "lofo", "overlap")
BOOTSTRAP = 10_000


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ statistics

def mean(xs) -> float | None:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def bootstrap_ci(xs: list[float], *, seed: int = 0, n: int = BOOTSTRAP, level: float = 0.95) -> list[float] | None:
    """Percentile bootstrap interval of the mean of `xs` (resampling tasks with replacement)."""
    if not xs:
        return None
    rng = random.Random(seed)
    k = len(xs)
    means = sorted(sum(xs[rng.randrange(k)] for _ in range(k)) / k for _ in range(n))
    lo, hi = means[int((1 - level) / 2 * n)], means[min(n - 1, int((1 + level) / 2 * n))]
    return [round(lo, 4), round(hi, 4)]


def summary(scores: dict[str, float], ids: list[str] | None = None, *, seed: int = 0) -> dict:
    """Mean, success rate and bootstrap interval of per-task scores (over `ids`, a missing task scoring 0)."""
    ids = list(scores) if ids is None else ids
    xs = [scores.get(i, 0.0) for i in ids]
    return {"tasks": len(xs), "mean_score": round(mean(xs), 4) if xs else None,
            "pass_rate": round(mean(x >= 1.0 for x in xs), 4) if xs else None, "ci95": bootstrap_ci(xs, seed=seed)}


def paired(a: dict[str, float], b: dict[str, float], ids: list[str], *, seed: int = 0) -> dict:
    """b - a over the same tasks, with the paired bootstrap interval of the mean difference."""
    d = [b.get(i, 0.0) - a.get(i, 0.0) for i in ids]
    return {"tasks": len(d), "delta": round(mean(d), 4) if d else None, "ci95": bootstrap_ci(d, seed=seed)}


def lofo_row(scores: dict[str, dict[str, float]], family: str, ids: list[str], seed: int,
             demonstrations: int | None) -> dict:
    """(a)'s row of one family: the base model, the student of training seed `seed` trained on every family and
    the one trained without `family`, on `family`'s held-out tasks `ids` (same wording half), paired."""
    with_all, without = scores[f"student_{seed}"], scores[f"student_{seed}_without_{family}"]
    return {"seed": seed, "tasks": len(ids), "demonstrations": demonstrations, "base": summary(scores["base"], ids),
            "with": summary(with_all, ids), "without": summary(without, ids), "delta": paired(with_all, without, ids)}


def refresh_lofo(res: dict, test_in_family: dict[str, str]) -> None:
    """(a)'s rows on record again from the per-task scores, over each family's held-out tasks: a row is derived
    data, and one written by older code may be over other tasks (see the test about ids of both sets)."""
    lofo = res.get("lofo") or {}
    for fam, row in (lofo.get("families") or {}).items():
        ids = sorted(i for i, f in test_in_family.items() if f == fam)
        lofo["families"][fam] = lofo_row(res["scores"]["in_distribution"], fam, ids, row.get("seed", lofo["seed"]),
                                         row.get("demonstrations"))


def set_row(scores: dict[str, dict[str, float]], seeds: list[int], operations: list[str], family: dict[str, str],
            key: str) -> dict:
    """One held-out set's row: the base model, each student that has been evaluated, the paired differences
    (per seed and pooled over every (seed, task) pair) and, for the synthesized sets, the means per family."""
    base = scores["base"]
    ids = sorted(base)
    row: dict = {"tasks": len(base), "base": summary(base), "student": {}}
    pooled: list[float] = []
    for k in seeds:
        st = scores.get(f"student_{k}")
        if st is None:
            continue
        row["student"][str(k)] = summary(st, ids, seed=k)
        row.setdefault("delta", {})[str(k)] = paired(base, st, ids, seed=k)
        pooled += [st.get(i, 0.0) - base[i] for i in ids]
    if pooled:
        row["delta_pooled"] = {"tasks": len(pooled), "delta": round(mean(pooled), 4),
                               "ci95": bootstrap_ci(pooled, seed=99), "note": "over every (seed, task) pair"}
    if key in ("in_distribution", "phrasing"):
        row["per_family"] = {}
        for fam in operations:
            fids = sorted(i for i in base if family.get(i) == fam)
            row["per_family"][fam] = {"tasks": len(fids), "base": summary(base, fids)["mean_score"],
                                      **{f"student_{k}": summary(scores[f"student_{k}"], fids)["mean_score"]
                                         for k in seeds if f"student_{k}" in scores}}
    return row


# ------------------------------------------------------------------------------------------------ stages

def synth(n: int, seed: int, out: Path, personas: Path, half: int | None, args) -> Path:
    from clawgym.synth.pipeline import synthesize

    synthesize(n, seed, out, jobs=args.jobs, personas_path=personas, sandbox=args.sandbox,
               operations=args.operations, max_ops=1, solution="program", program_ops=args.program_ops,
               dedup=True, phrasing_half=half)
    return out


def family_of(tasks_path: Path) -> dict[str, str]:
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Task

    return {t.id: (t.operations or ["?"])[0] for t in read_records(tasks_path, Task)}


def run(suite_spec: str, agent: str, model: str, run_dir: Path, args, backend, *, task_ids: list[str] | None = None,
        base_url: str | None = None) -> dict[str, float]:
    """Roll out and score one agent on a suite (a tasks file or an importer spec); per-task scores (the last
    verdict of each task; unscored and infra errors count 0). Resumes a partial run."""
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Trajectory
    from clawgym.evaluation.run import run_eval
    from clawgym.evaluation.suites import Suite, load_suite
    from clawgym.rollout.runner import RolloutOptions
    from clawgym.rollout.setup import AgentSpec
    from clawgym.sandbox.base import SandboxLimits

    suite = load_suite(suite_spec)
    if task_ids is not None:
        keep = set(task_ids)
        suite = Suite(suite.name, [t for t in suite.tasks if t.id in keep], suite.source, suite.base_dir,
                      suite.notes)
    llm = agent == "llm"
    spec = AgentSpec(name=agent, model=model, base_url=base_url, max_turns=args.max_turns,
                     max_tokens=args.max_tokens, temperature=0.0, llm_concurrency=args.concurrency,
                     request_timeout=1800.0, policy_version=Path(model).name if llm else None,
                     precision=args.eval_precision)
    options = RolloutOptions(samples=1, jobs=args.concurrency if llm else args.jobs,
                             limits=SandboxLimits(memory_mb=1024), keep_workspaces=False, episode_timeout=3600.0)
    done = run_dir / "report.json"
    if not done.exists():
        run_eval(suite, spec, backend, run_dir, options, chart=False)
    scores = {t.id: 0.0 for t in suite.tasks}
    for r in read_records(run_dir / "trajectories.jsonl", Trajectory):
        if r.task_id in scores and r.verdict is not None and r.verdict.score is not None:
            scores[r.task_id] = float(r.verdict.score)
    return scores


def demos(sft_path: Path) -> list[dict]:
    return [json.loads(line) for line in sft_path.read_text().splitlines() if line.strip()]


def actions(conv: dict) -> list[str]:
    """The demonstration's tool calls, each as `name` + its arguments as canonical JSON: what the model emits."""
    out = []
    for m in conv.get("messages", []):
        for call in m.get("tool_calls") or []:
            fn = call.get("function", call)
            a = fn.get("arguments", {})
            if isinstance(a, str):
                try:
                    a = json.loads(a)
                except ValueError:
                    pass
            out.append(fn.get("name", "") + " " + json.dumps(a, sort_keys=True, ensure_ascii=False))
    return out


def overlap(train_demos: list[dict], test_demos: list[dict], family: dict[str, str]) -> dict:
    """(d): how many held-out tasks' reference action sequences appear verbatim among the training demos:
    the whole sequence, and at least one of the calls that produce the result (write, edit, exec)."""
    whole = {tuple(actions(c)) for c in train_demos}
    calls = {a for c in train_demos for a in actions(c)}
    per: dict[str, dict[str, int]] = {}
    for c in test_demos:
        seq = actions(c)
        fam = family.get(c["task_id"], "?")
        row = per.setdefault(fam, {"tasks": 0, "whole_sequence": 0, "a_result_call": 0, "every_call": 0})
        row["tasks"] += 1
        row["whole_sequence"] += tuple(seq) in whole
        producing = [a for a in seq if a.split(" ", 1)[0] in ("write", "edit", "exec")]
        row["a_result_call"] += any(a in calls for a in producing)
        row["every_call"] += bool(seq) and all(a in calls for a in seq)
    total = {k: sum(r[k] for r in per.values()) for k in ("tasks", "whole_sequence", "a_result_call", "every_call")}
    rate = {k: round(total[k] / total["tasks"], 4) if total["tasks"] else None
            for k in ("whole_sequence", "a_result_call", "every_call")}
    return {"tasks": total["tasks"], "rate": rate, "per_family": dict(sorted(per.items()))}


def train(sft_path: Path, out: Path, seed: int, args) -> dict:
    """SFT with experiment.py's settings (LoRA r=32, lr 1e-3, 1.35 epochs); `seed` for the data order and init."""
    from clawgym.train.sft import SFTOptions, export_model, train_sft

    res_path = out / "train" / "result.json"
    if res_path.exists():
        training = json.loads(res_path.read_text())
    else:
        opts = SFTOptions(model=args.model, epochs=args.epochs, lr=args.lr, lora_r=args.lora_r, max_len=3072,
                          batch_tokens=4096, save_steps=0, seed=seed)
        log(f"training {out.name} on {sft_path.name} (seed {seed})")
        res = train_sft(sft_path, out / "train", opts, show_progress=sys.stderr.isatty())
        training = {"steps": res.steps, "tokens": res.tokens, "trained_tokens": res.trained_tokens,
                    "seconds": round(res.seconds, 1), "tokens_per_s": round(res.tokens_per_s, 1),
                    "first_loss": res.first_loss, "last_loss": res.last_loss, "conversations": res.data.examples}
        write_json(res_path, training)
    if not (out / "model" / "config.json").exists():
        export_model(out / "train", out / "model")
        release_memory()
    return training


# ------------------------------------------------------------------------------------------------ report

def table(res: dict) -> str:
    """The markdown block for docs/learning.md (and the README's summary rows)."""
    s = res["settings"]
    seeds = s["seeds"]
    dates = res.get("dates") or [res["date"]]
    lines = [README_START,
             f"Measured {' to '.join(dict.fromkeys([dates[0], dates[-1]]))} "
             f"on {res['machine']}, script of commit {res['commit']}, tasks and models by the clawgym code of commit "
             f"{res.get('tasks_commit') or res['commit']}: SmolLM2-135M-Instruct, LoRA r={s['lora_r']}, "
             f"{s['epochs']} epochs, lr {s['lr']}, on the oracle teacher's verified demonstrations of "
             f"{s['train_tasks']} training tasks per seed (families: {', '.join(s['operations'])}; programs for "
             f"{', '.join(s['program_ops'])}); training seeds {', '.join(map(str, seeds))}; held-out tasks from "
             f"test seed {s['test_seed']} (used by this experiment only) and the other half of the personas; greedy, "
             f"{s['max_turns']} model calls of at most {s['max_tokens']} tokens. Means over tasks with 95% bootstrap "
             f"intervals ({BOOTSTRAP:,} resamples; paired for differences).",
             "",
             "| held-out set | in-distribution? | tasks | base | " + " | ".join(f"student seed {k}" for k in seeds)
             + " | student - base |",
             "|---|---|---:|---:|" + "---:|" * len(seeds) + "---:|"]

    def cell(x: dict | None) -> str:
        if not x or x.get("mean_score") is None:
            return "not run"
        ci = x.get("ci95")
        return f"{x['mean_score']:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{x['mean_score']:.3f}"

    def dcell(x: dict | None) -> str:
        if not x or x.get("delta") is None:
            return "not run"
        return f"{x['delta']:+.3f} [{x['ci95'][0]:+.2f}, {x['ci95'][1]:+.2f}]"

    names = {"in_distribution": ("same families, same wording half", "yes (same generators)"),
             "phrasing": ("(b) same families, other wording half", "no: wording, schemas, names held out"),
             "pinchbench": ("(c) PinchBench v1, offline tasks", "no: written by others"),
             "clawgym": ("(c) ClawGym training-split sample folders", "no: written by others")}
    for key, (label, ind) in names.items():
        row = res["sets"].get(key)
        if not row:
            continue
        studs = [cell(row["student"].get(str(k))) for k in seeds]
        lines.append(f"| {label} | {ind} | {row['tasks']} | {cell(row.get('base'))} | {' | '.join(studs)} | "
                     f"{dcell(row.get('delta_pooled'))} |")
    fam_rows = [(key, fam, r) for key in ("in_distribution", "phrasing")
                for fam, r in ((res["sets"].get(key) or {}).get("per_family") or {}).items()]
    if fam_rows:
        lines += ["", "Per family (mean score over the family's held-out tasks):", "",
                  "| held-out set | family | tasks | base | " + " | ".join(f"student seed {k}" for k in seeds) + " |",
                  "|---|---|---:|---:|" + "---:|" * len(seeds)]
        for key, fam, r in fam_rows:
            studs = [f"{r[f'student_{k}']:.3f}" if r.get(f"student_{k}") is not None else "not run" for k in seeds]
            lines.append(f"| {'same wording half' if key == 'in_distribution' else 'other wording half'} | {fam} | "
                         f"{r['tasks']} | {r['base']:.3f} | {' | '.join(studs)} |")
    lofo = res.get("lofo") or {}
    if not lofo.get("families"):
        lines += ["", "(a) Leave one family out: not run yet."]
    else:
        lines += ["", "(a) Leave one family out: a student trained without the family's demonstrations, against the "
                  "student of the same training seed trained on all five, on that family's in-distribution held-out "
                  "tasks.", "",
                  "| family left out | training seed | tasks | base | student trained on all five | "
                  "student trained without it | without - with |", "|---|---:|---:|---:|---:|---:|---:|"]
        for fam, r in sorted(lofo["families"].items(), key=lambda kv: _order(s["operations"], kv[0])):
            lines.append(f"| {fam} | {r.get('seed', lofo['seed'])} | {r['tasks']} | {cell(r['base'])} | "
                         f"{cell(r['with'])} | {cell(r['without'])} | {dcell(r['delta'])} |")
        for fam in s["operations"]:
            if fam not in lofo["families"]:
                lines.append(f"| {fam} | | | | | not run yet | |")
    ov = res.get("overlap") or {}
    if ov:
        lines += ["", "(d) Held-out tasks whose reference action sequence (the teacher's tool calls, as the student "
                  "would emit them) appears verbatim among the training demonstrations:", "",
                  "| held-out set | tasks | whole sequence | every call | a result-producing call (write, edit, exec) |",
                  "|---|---:|---:|---:|---:|"]
        for key, label in (("in_distribution", "same wording half"), ("phrasing", "other wording half")):
            for seed, o in (ov.get(key) or {}).items():
                r = o["rate"]
                lines.append(f"| {label} (training seed {seed}) | {o['tasks']} | {r['whole_sequence']:.2f} | "
                             f"{r['every_call']:.2f} | {r['a_result_call']:.2f} |")
    lines += ["", f"Stage times: {', '.join(f'{k} {v / 60:.0f} min' for k, v in res['stage_seconds'].items())}.",
              README_END]
    return "\n".join(lines)


def _order(operations: list[str], family: str) -> int:
    return operations.index(family) if family in operations else len(operations)


def summary_table(res: dict) -> str:
    """The README's short form: one row per part (a)-(e), each saying whether it is in-distribution."""
    seeds = [str(k) for k in res["settings"]["seeds"]]
    sets = res.get("sets") or {}

    def students(row: dict | None) -> str:
        if not row or not row.get("student"):
            return "not run"
        run = [k for k in seeds if k in row["student"]]
        return ", ".join(f"{row['student'][k]['mean_score']:.3f}" for k in run) + \
            f" (seed{'s' if len(run) > 1 else ''} {', '.join(run)})"

    def base(row: dict | None) -> str:
        return f"{row['base']['mean_score']:.3f}" if row and row.get("base") else "not run"

    lines = [SUMMARY_START, "| part | in-distribution? | held-out tasks | base | student | student - base |",
             "|---|---|---:|---:|---|---:|"]
    for key, label, ind in (("in_distribution", "same families and wording half, other personas", "yes"),
                            ("phrasing", "(b) other wording half", "no (wording, schemas, names)"),
                            ("pinchbench", "(c) PinchBench v1 offline", "no (written by others)"),
                            ("clawgym", "(c) ClawGym sample folders", "no (written by others)")):
        row = sets.get(key)
        d = (row or {}).get("delta_pooled")
        lines.append(f"| {label} | {ind} | {row['tasks'] if row else '-'} | {base(row)} | {students(row)} | "
                     f"{'not run' if not d else format(d['delta'], '+.3f')} |")
    fams = (res.get("lofo") or {}).get("families") or {}
    if fams:
        ops = res["settings"].get("operations", [])
        without = "; ".join(f"{f} {r['without']['mean_score']:.3f} (with it {r['with']['mean_score']:.3f}, "
                            f"{r['delta']['delta']:+.3f}, seed {r.get('seed', res['lofo']['seed'])})"
                            for f, r in sorted(fams.items(), key=lambda kv: _order(ops, kv[0])))
        rest = [f for f in ops if f not in fams]
        lines.append(f"| (a) each family left out of training: the student trained without it, on its tasks | "
                     f"no (family unseen) | {sum(r['tasks'] for r in fams.values())} | | {without}"
                     f"{'; not run yet: ' + ', '.join(rest) if rest else ''} | |")
    else:
        lines.append("| (a) each family left out of training | no (family unseen) | | | not run yet | |")
    ov = res.get("overlap") or {}
    parts = []
    for key, half in (("in_distribution", "same wording"), ("phrasing", "other wording")):
        for seed, o in (ov.get(key) or {}).items():
            parts.append(f"{half}, seed {seed}: {round(o['rate']['whole_sequence'] * o['tasks'])} of {o['tasks']}")
    lines.append("| (d) held-out tasks whose whole reference action sequence is among the training demonstrations "
                 f"| | | | {'; '.join(parts) if parts else 'not run'} | |")
    lines.append(f"| (e) training seeds run | | | | {len({k for r in sets.values() for k in r.get('student', {})})} "
                 f"of {len(seeds)} | |")
    lines.append(SUMMARY_END)
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=REPO / "runs" / "generalization")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--operations", nargs="+", default=DEFAULT_OPERATIONS)
    ap.add_argument("--program-ops", nargs="*", default=["clean_data", "convert_format"])
    ap.add_argument("--train-tasks", type=int, default=150)
    ap.add_argument("--test-tasks", type=int, default=40, help="Per held-out synthesized set (8 per family).")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2],
                    help="Training seeds: seed k synthesizes its training tasks with seed 1000+k and trains with k.")
    ap.add_argument("--test-seed", type=int, default=4404,
                    help="Held-out tasks' seed: fixed before any result, used by this experiment only.")
    ap.add_argument("--lofo-seed", type=int, default=None,
                    help="Training seed of (a)'s students (default: the first of --seeds); each (a) row records its "
                         "seed, and a family on record is not run again with another seed.")
    ap.add_argument("--lofo-families", nargs="+", default=None, metavar="FAMILY",
                    help="The families (a) leaves out, in this order (default: every one of --operations); the "
                         "others keep what is on record.")
    ap.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    ap.add_argument("--epochs", type=float, default=1.35)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--lora-r", type=int, default=32)
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=768)
    ap.add_argument("--concurrency", type=int, default=13)
    ap.add_argument("--eval-precision", choices=["auto", "fp32", "bf16"], default="auto")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--sandbox", default="bwrap")
    ap.add_argument("--datasets", type=Path, default=SHARED, help="Where pinchbench-v1/ and clawgym-train-sample/ are.")
    ap.add_argument("--save", action="store_true",
                    help="Copy the results to benchmarks/learning/results/ and write the table into --readme.")
    ap.add_argument("--readme", type=Path, default=REPO / "docs" / "learning.md")
    ap.add_argument("--summary-readme", type=Path, default=REPO / "README.md",
                    help="Where --save writes the short form of the table (between its markers).")
    ap.add_argument("--resume-from", type=Path, default=None, metavar="RESULTS_JSON",
                    help="Start --work from a saved results file (e.g. benchmarks/learning/results/generalization_*"
                         ".json) when it holds none: its scores are kept, its students are not trained again, and "
                         "the tasks synthesized now must be the ones it scored (run with the code of its "
                         "tasks_commit on PYTHONPATH).")
    ap.add_argument("--merge-from", type=Path, nargs="+", default=None, metavar="WORK",
                    help="With --report: first add to --work what these work directories of the same experiment "
                         "measured ((a) families run in parallel, students not scored here), saved in --work.")
    ap.add_argument("--report", action="store_true",
                    help="Run no stage: print (and with --save, save) the table of what --work holds so far.")
    args = ap.parse_args(argv)
    if args.report:
        return report(args)
    if args.lofo_seed is not None and args.lofo_seed not in args.seeds:
        print(f"--lofo-seed {args.lofo_seed}: not one of --seeds ({', '.join(map(str, args.seeds))}); (a) compares "
              "with the student of the same seed trained on every family", file=sys.stderr)
        return 2

    from clawgym.sandbox import get_backend
    from clawgym.synth.personas import split_personas
    from clawgym.train.filter import FilterOptions, filter_to_file

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    backend = get_backend(args.sandbox)
    stages_path = work / "stage_seconds.json"
    stage: dict[str, float] = json.loads(stages_path.read_text()) if stages_path.exists() else {}

    def timed(name: str, fn, *a, **kw):
        t0 = time.perf_counter()
        out = fn(*a, **kw)
        stage[name] = round(stage.get(name, 0.0) + time.perf_counter() - t0, 1)
        write_json(stages_path, stage)
        return out

    if args.resume_from is not None:
        seed_work(work, args.resume_from)
    seeds = args.seeds
    lofo_seed = args.lofo_seed if args.lofo_seed is not None else seeds[0]
    p_train, p_test, _, _ = split_personas(REPO / "personas" / "personas.yaml", work)

    # tasks: training pools (wording half 0), held-out sets from one test seed in both halves
    def tasks() -> dict:
        out = {"test_in": synth(args.test_tasks, args.test_seed, work / "test_in.jsonl", p_test, 0, args),
               "test_phr": synth(args.test_tasks, args.test_seed, work / "test_phr.jsonl", p_test, 1, args)}
        for k in seeds:
            out[f"train_{k}"] = synth(args.train_tasks, 1000 + k, work / f"train_{k}.jsonl", p_train, 0, args)
        return out

    log("tasks")
    files = timed("synth", tasks)
    # one family map per file: the two held-out sets share their ids (same test seed, other wording half) and an
    # id may be of another family in each, so a map merged over files mislabels tasks
    family = {name: family_of(path) for name, path in files.items()}
    set_family = {"in_distribution": family["test_in"], "phrasing": family["test_phr"]}

    # teacher demonstrations on the training pools, and the teacher on the held-out sets (for (d))
    def teacher(name: str) -> Path:
        out = work / f"demos_{name}.jsonl"
        if not out.exists():
            run(str(files[name]), "oracle", args.model, work / "runs" / f"oracle_{name}", args, backend)
            filter_to_file([work / "runs" / f"oracle_{name}"], out, FilterOptions(min_score=1.0))
        return out

    log("teacher")
    demo_files = timed("teacher", lambda: {name: teacher(name) for name in files})

    results_path = work / "results.json"
    res: dict = json.loads(results_path.read_text()) if results_path.exists() else {}
    check_tasks(res, {"in_distribution": files["test_in"], "phrasing": files["test_phr"]})
    import clawgym

    code = _commit(Path(clawgym.__file__).parent)
    res.setdefault("tasks_commit", res.get("commit") or code)  # the clawgym code that synthesized the tasks
    res["dates"] = sorted({*(res.get("dates") or ([res["date"]] if res.get("date") else [])),
                           time.strftime("%Y-%m-%d")})  # a run resumed on another day (--resume-from) has several
    res.update({"benchmark": "generalization_experiment", "date": time.strftime("%Y-%m-%d"),
                "commit": _commit(), "code_commit": code, "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}, no GPU",
                "settings": {"model": args.model, "operations": args.operations, "program_ops": args.program_ops,
                             "train_tasks": args.train_tasks, "test_tasks": args.test_tasks, "seeds": seeds,
                             "train_task_seeds": {str(k): 1000 + k for k in seeds}, "test_seed": args.test_seed,
                             "lofo_seed": lofo_seed, "epochs": args.epochs, "lr": args.lr, "lora_r": args.lora_r,
                             "max_turns": args.max_turns, "max_tokens": args.max_tokens,
                             "eval_precision": args.eval_precision, "wording_half_train": 0,
                             "judge": "none: code checks only (tasks whose grade needs an LLM judge get no rubric part)"}})
    res.setdefault("sets", {})
    res.setdefault("scores", {})

    def save() -> None:
        res["stage_seconds"] = stage
        write_text(results_path, json.dumps(res, indent=2) + "\n")

    # (d) verbatim overlap
    if "overlap" in args.only:
        ov = {}
        for key, name in (("in_distribution", "test_in"), ("phrasing", "test_phr")):
            test_demos = demos(demo_files[name])
            ov[key] = {str(k): overlap(demos(demo_files[f"train_{k}"]), test_demos, set_family[key]) for k in seeds}
        res["overlap"] = ov
        save()
        log(f"overlap: {json.dumps({k: {s: o['rate'] for s, o in v.items()} for k, v in ov.items()})}")

    test_sets = {"in_distribution": str(files["test_in"]), "phrasing": str(files["test_phr"])}
    if "external" in args.only:
        test_sets["pinchbench"] = f"pinchbench-offline:{args.datasets / 'pinchbench-v1'}"
        test_sets["clawgym"] = f"clawgym-folder:{args.datasets / 'clawgym-train-sample'}"
    wanted = [k for k in test_sets if (k == "in_distribution" and "main" in args.only)
              or (k == "phrasing" and "phrasing" in args.only) or k in ("pinchbench", "clawgym")]

    def evaluate(key: str, who: str, model: str, task_ids: list[str] | None = None,
                 stage_name: str | None = None) -> dict[str, float]:
        scores = res["scores"].setdefault(key, {})
        if who not in scores:
            log(f"evaluating {who} on {key}")
            scores[who] = timed(stage_name or f"eval_{key}", run, test_sets[key], "llm", model, work / "runs" / f"{key}_{who}",
                                args, backend, task_ids=task_ids)
            save()
        return scores[who]

    students: dict[int, Path] = {k: work / f"student_{k}" / "model" for k in seeds}
    for k in seeds:
        if unscored(res, f"student_{k}", wanted + (["in_distribution"] if k == lofo_seed and "lofo" in args.only
                                                    else [])):
            out = work / f"student_{k}"
            res.setdefault("training", {})[str(k)] = timed("train", train, demo_files[f"train_{k}"], out, k, args)
            save()
        for key in wanted:  # the student first: its scores are the experiment's point
            evaluate(key, f"student_{k}", str(students[k]))
    for key in wanted:
        evaluate(key, "base", args.model)
        res["sets"][key] = set_row(res["scores"][key], seeds, args.operations, set_family.get(key, {}), key)
        save()

    # (a) leave one family out
    if "lofo" in args.only:
        import gc

        gc.collect()
        all_demos = demos(demo_files[f"train_{lofo_seed}"])
        train_family = family[f"train_{lofo_seed}"]
        lofo = res.setdefault("lofo", {"seed": lofo_seed, "families": {}})
        evaluate("in_distribution", "base", args.model)  # both on record already unless --only lofo alone
        evaluate("in_distribution", f"student_{lofo_seed}", str(students[lofo_seed]))
        for fam in args.lofo_families or args.operations:
            if fam not in args.operations:
                raise SystemExit(f"--lofo-families: {fam} is not one of the experiment's families "
                                 f"({', '.join(args.operations)})")
            ids = sorted(i for i, f in family["test_in"].items() if f == fam)
            if fam in lofo["families"]:  # on record (this run or --resume-from): not trained again
                continue
            subset = work / f"demos_train_{lofo_seed}_without_{fam}.jsonl"
            if not subset.exists():
                write_text(subset, "".join(json.dumps(c) + "\n" for c in all_demos
                                           if train_family.get(c["task_id"]) != fam))
            out = work / f"student_{lofo_seed}_without_{fam}"
            training = timed("train_lofo", train, subset, out, lofo_seed, args)
            evaluate("in_distribution", f"student_{lofo_seed}_without_{fam}", str(out / "model"), ids,
                     stage_name="eval_lofo")
            lofo["families"][fam] = lofo_row(res["scores"]["in_distribution"], fam, ids, lofo_seed,
                                             training.get("conversations"))
            save()
        refresh_lofo(res, family["test_in"])  # rows on record (--resume-from, --merge-from) from their scores

    save()
    publish(res, args)
    return 0


def publish(res: dict, args) -> None:
    """Print the table; with --save, copy the results into the repository and write the table into --readme."""
    block = table(res)
    print(block)
    if args.save:
        dest = REPO / "benchmarks" / "learning" / "results" / f"generalization_{time.strftime('%Y%m%d_%H%M')}.json"
        write_text(dest, json.dumps(res, indent=2) + "\n")
        log(f"saved {dest}")
        if not write_readme(args.readme, block, README_START, README_END):
            log(f"{args.readme} has no {README_START} markers: not written")
        if not write_readme(args.summary_readme, summary_table(res), SUMMARY_START, SUMMARY_END):
            log(f"{args.summary_readme} has no {SUMMARY_START} markers: not written")


def merge(res: dict, other: Path) -> None:
    """Add what another work directory of the same experiment measured (e.g. (a)'s families run in parallel, one
    torch thread each, while the main run's model server held the other core): its scores of students `res` has
    not scored, its (a) families `res` lacks, and its stage times. The two must have scored the same tasks."""
    theirs = json.loads((other / "results.json").read_text())
    if theirs.get("tasks_commit") != res.get("tasks_commit") or \
            theirs.get("settings", {}).get("test_seed") != res.get("settings", {}).get("test_seed"):
        raise SystemExit(f"{other}: not the same experiment (tasks commit {theirs.get('tasks_commit')}, test seed "
                         f"{theirs.get('settings', {}).get('test_seed')}) as {res.get('tasks_commit')}")
    for key, scores in (theirs.get("scores") or {}).items():
        mine = res.setdefault("scores", {}).setdefault(key, {})
        for who, s in scores.items():
            if who in mine and mine[who] != s:
                raise SystemExit(f"{other}: scores {who} on {key} differently from this work directory")
            mine.setdefault(who, s)
    fams = (theirs.get("lofo") or {}).get("families") or {}
    if fams:
        lofo = res.setdefault("lofo", {"seed": theirs["lofo"]["seed"], "families": {}})
        for fam, row in fams.items():
            lofo["families"].setdefault(fam, row)
    stages = json.loads((other / "stage_seconds.json").read_text()) if (other / "stage_seconds.json").exists() else {}
    # what an earlier merge of the same directory already added (it may have run on since): only the rest is new
    before = res.setdefault("merged_stage_seconds", {}).get(str(other.resolve()), {})
    for name in ("train_lofo", "eval_lofo"):  # the other stages of a (a)-only run are its file checks
        if name in stages:
            res.setdefault("stage_seconds", {})[name] = round(
                res["stage_seconds"].get(name, 0.0) + stages[name] - before.get(name, 0.0), 1)
    res["merged_stage_seconds"][str(other.resolve())] = {n: stages[n] for n in ("train_lofo", "eval_lofo")
                                                         if n in stages}


def report(args) -> int:
    """The table of a --work directory as it stands (a run in progress keeps writing results.json whole)."""
    results_path = args.work / "results.json"
    if not results_path.exists():
        print(f"{results_path}: no results yet (run the experiment first)", file=sys.stderr)
        return 1
    res = json.loads(results_path.read_text())
    stages_path = args.work / "stage_seconds.json"
    if stages_path.exists():
        res["stage_seconds"] = json.loads(stages_path.read_text())
    for other in args.merge_from or []:
        merge(res, other)
        write_text(results_path, json.dumps(res, indent=2) + "\n")
        write_json(stages_path, res["stage_seconds"])
        log(f"merged {other} into {args.work}")
    res.setdefault("sets", {})
    res.setdefault("stage_seconds", {})
    set_family = {key: family_of(args.work / f"{name}.jsonl") for key, name in
                  (("in_distribution", "test_in"), ("phrasing", "test_phr")) if (args.work / f"{name}.jsonl").exists()}
    seeds = res.get("settings", {}).get("seeds") or args.seeds
    operations = res.get("settings", {}).get("operations") or args.operations
    for key, scores in (res.get("scores") or {}).items():  # students evaluated since the last row was written
        if "base" in scores:
            res["sets"][key] = set_row(scores, seeds, operations, set_family.get(key, {}), key)
    if "in_distribution" in set_family:
        refresh_lofo(res, set_family["in_distribution"])
    publish(res, args)
    return 0


def seed_work(work: Path, saved: Path) -> None:
    """Start `work` from a saved results file (the per-task scores, trainings and stage times of an earlier run),
    unless `work` already holds results of its own."""
    if (work / "results.json").exists():
        log(f"{work / 'results.json'} exists: --resume-from {saved} not used")
        return
    res = json.loads(saved.read_text())
    write_text(work / "results.json", json.dumps(res, indent=2) + "\n")
    write_json(work / "stage_seconds.json", res.get("stage_seconds") or {})
    log(f"resuming from {saved} (tasks of commit {res.get('tasks_commit') or res.get('commit')})")


def unscored(res: dict, who: str, sets: list[str]) -> list[str]:
    """The held-out sets of `sets` on which `who` has no scores on record: a student scored on every set it is
    wanted for (e.g. one brought by --resume-from) is not trained again."""
    return [key for key in sets if who not in (res.get("scores") or {}).get(key, {})]


class TasksChanged(SystemExit):
    pass


def check_tasks(res: dict, files: dict[str, Path]) -> None:
    """The held-out tasks synthesized now must be the ones the recorded scores are of: a score of another commit's
    task under the same id would make every paired difference meaningless."""
    for key, path in files.items():
        recorded = (res.get("scores") or {}).get(key, {})
        if not recorded:
            continue
        fam = family_of(path)
        for who, scores in recorded.items():
            # an (a) student (student_K_without_F) is scored on the left-out family's tasks only
            left_out = who.partition("_without_")[2]
            now = {i for i, f in fam.items() if f == left_out} if left_out else set(fam)
            if set(scores) != now:
                raise TasksChanged(
                    f"{path}: its {len(now)} tasks{f' of {left_out}' if left_out else ''} are not the {len(scores)} "
                    f"that results.json scores for {who} on {key} ({len(now - set(scores))} new ids); synthesize "
                    f"with the code of commit "
                    f"{res.get('tasks_commit') or res.get('commit')} (PYTHONPATH=<its worktree>/src)")


def _commit(where: Path = REPO) -> str:
    try:
        return subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
