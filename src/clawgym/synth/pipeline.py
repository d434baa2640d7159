"""`clawgym synth persona`: generate, validate and write N tasks, deterministically for a seed, in parallel,
resumable.

Task i is made from its own RNG seeded with (seed, i, attempt), so its bytes do not depend on the number of
workers or the order they finish in. Workers generate and validate; the parent takes results in index order,
rejects near-duplicates (same operation chain on the same data, or the same instruction), asks for another
attempt of an index that failed, and appends accepted tasks whole, so an interrupted run resumes where it
stopped and the finished file is identical to an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import random
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from clawgym.core.atomic import write_json
from clawgym.core.errors import ClawgymError
from clawgym.core.jsonl import JsonlAppender, read_records_lenient
from clawgym.core.records import Task
from clawgym.rollout.executor import LocalExecutor

if TYPE_CHECKING:
    from clawgym.rollout.executor import Executor
    from clawgym.synth.compose import Candidate

MAX_ATTEMPTS = 8
# Candidates per worker call: their states are graded by ONE python process in the grader sandbox, whose
# start-up and imports (yaml, email, openpyxl, pytest...) are paid once per chunk. Chunks get smaller at the
# end of a run so that no worker is left alone with a big one.
CHUNK = 256
MIN_CHUNK = 8
LENGTH_WEIGHTS = {1: 1, 2: 3, 3: 3, 4: 2}


def task_id(seed: int, index: int) -> str:
    return f"persona-s{seed}-{index:06d}"


@dataclass
class SynthReport:
    written: int = 0
    resumed: int = 0
    rejected: Counter = field(default_factory=Counter)
    by_category: Counter = field(default_factory=Counter)
    by_subcategory: Counter = field(default_factory=Counter)
    by_operation: Counter = field(default_factory=Counter)
    chain_lengths: Counter = field(default_factory=Counter)
    reference_steps: list[int] = field(default_factory=list)
    examples: dict[str, str] = field(default_factory=dict)  # reason -> one detail
    # candidates rejected because a trivial cheat scored >= 0.3 on them (clawgym.synth.cheats), and per cheat the
    # number of those it scored >= 0.3 on (one candidate may count for several cheats)
    cheat_rejected: int = 0
    cheat_rejected_by: Counter = field(default_factory=Counter)
    # near-duplicate removal during the run (dedup=True): None when it is off
    near_duplicates: dict | None = None
    # the rewrite pass (clawgym.synth.rewrite.RewriteReport): None when it is off
    rewrite: object | None = None

    def add_cheat_rejection(self, cheats: list[str]) -> None:
        self.cheat_rejected += 1
        for c in cheats:
            self.cheat_rejected_by[c] += 1

    def add(self, task: Task) -> None:
        self.add_info(task_info(task))

    def add_info(self, info: dict) -> None:
        self.by_category[info["category"]] += 1
        self.by_subcategory[info["subcategory"]] += 1
        for op in info["operations"]:
            self.by_operation[op] += 1
        self.chain_lengths[len(info["operations"])] += 1
        self.reference_steps.append(info["steps"])

    def as_dict(self) -> dict:
        from clawgym.synth.cheats import CHEATS, THRESHOLD

        steps = sorted(self.reference_steps)
        return {
            "written": self.written, "resumed": self.resumed, "rejected": dict(self.rejected),
            "rejection_examples": self.examples,
            "rejected_for_cheats": {"threshold": THRESHOLD, "tasks": self.cheat_rejected,
                                    "by_cheat": {c: self.cheat_rejected_by[c] for c in CHEATS}},
            "by_category": dict(self.by_category), "by_subcategory": dict(self.by_subcategory),
            "by_operation": dict(self.by_operation), "chain_lengths": dict(sorted(self.chain_lengths.items())),
            "reference_steps": {"mean": sum(steps) / len(steps), "p50": steps[len(steps) // 2],
                                "max": steps[-1]} if steps else {},
            **({"near_duplicates": self.near_duplicates} if self.near_duplicates is not None else {}),
            **({"rewrite": self.rewrite.as_dict()} if self.rewrite is not None else {}),
        }


def task_info(task: Task) -> dict:
    """What the parent needs of a task (report counts, duplicate detection) without parsing it again."""
    info = {
        "instruction": task.instruction, "category": task.category,
        "subcategory": task.metadata.get("subcategory_id", task.subcategory), "operations": list(task.operations),
        "steps": len(task.reference.steps) if task.reference else 0,
    }
    if task.sessions:  # what near-duplicate removal compares (clawgym.synth.dedup.task_text), when it is more
        info["text"] = "\n".join([task.instruction] + [s.prompt for s in task.sessions])
    return info


def embed_request(text: str, precision: str = "fp32"):
    """The all-MiniLM-L6-v2 embedding (unit length, as float32) of one request, as near-duplicate removal during a
    run compares them: one text at a time on one thread, so a request gets the same vector in any worker, chunk or
    order (batches pad, and a different batch can move a cosine in its last digits). `precision` "fp32" or "bf16"
    (see :class:`RunDedup`); each model is loaded once per process."""
    emb = _W.get(f"embedder_{precision}")
    if emb is None:
        import torch

        from clawgym.synth.dedup import Embedder

        torch.set_num_threads(1)  # the run's other workers have the other cores
        emb = _W[f"embedder_{precision}"] = Embedder(precision=precision)
    return emb.encode([text])[0]


RECHECK_MARGIN = 0.02  # bf16 cosines were measured within 0.006 of fp32's on these requests (docs/synthesis.md)


def resolve_dedup_precision(precision: str) -> str:
    """`auto`: bf16 where the CPU computes it natively (about 2.5x faster per request here), else fp32."""
    if precision not in ("auto", "fp32", "bf16"):
        raise ClawgymError(f"unknown dedup precision {precision!r}; choose auto, fp32 or bf16")
    if precision == "auto":
        from clawgym.synth.dedup import fast_bf16

        return "bf16" if fast_bf16() else "fp32"
    return precision


class RunDedup:
    """Near-duplicate removal while the run writes, as the llm route does it (:mod:`clawgym.synth.llm_route`): a
    task the parent is about to write, in index order, is dropped when its all-MiniLM-L6-v2 cosine to a task kept
    before it in its category is at or above the threshold (:class:`clawgym.synth.dedup.DedupIndex`), and the
    next attempt of its index is made instead. Workers embed the tasks they validated (:func:`embed_request`, in
    parallel); the parent embeds what they did not (the tasks already in a resumed file; a Ray worker's).

    The decisions are fp32's. With `precision` "bf16" the workers embed in bf16, and a task with any kept task
    within RECHECK_MARGIN of the threshold is decided again here from fp32 embeddings of it and of those tasks
    (a few per thousand): as long as bf16 moves no cosine by the margin (the report's `recheck_max_error` is the
    largest move seen), the file is the one an fp32 run writes, byte for byte, at a fraction of its embedding
    time."""

    def __init__(self, threshold: float | None = None, precision: str = "fp32"):
        from clawgym.synth.dedup import DEFAULT_THRESHOLD

        self.threshold = DEFAULT_THRESHOLD if threshold is None else threshold
        self.precision = precision
        self._index = None
        self._existing: list[tuple[str, str, str]] = []
        self._texts: dict[str, str] = {}  # kept tasks' requests, for fp32 rechecks (bf16 runs only)
        self._fp32: dict[str, object] = {}
        self.dropped = 0
        self.unreplaced = 0
        self.rechecked = 0
        self.recheck_max_error = 0.0
        self.embed_s = 0.0  # CPU time spent embedding, in the workers and here

    def keep_existing(self, tid: str, category: str, text: str) -> None:
        """A task already in the output file (a resumed run): later tasks must not repeat it. Embedded at the
        first check, after the workers have started (the parent loads no model before it forks them)."""
        self._existing.append((tid, category, text))

    def _embed(self, text: str, precision: str | None = None):
        t0 = time.process_time()
        vec = embed_request(text, precision or self.precision)
        self.embed_s += time.process_time() - t0
        return vec

    def _fp32_of(self, tid: str, text: str):
        vec = self._fp32.get(tid)
        if vec is None:
            vec = self._fp32[tid] = self._embed(text, "fp32")
        return vec

    def check(self, tid: str, category: str, info: dict):
        """None if the task repeats no kept task of its category (it is kept from now on), else the Match."""
        if self._index is None:
            from clawgym.synth.dedup import DedupIndex

            self._index = DedupIndex(self.threshold)
            for etid, ecat, etext in self._existing:  # as they were decided when they were written
                self._decide(etid, ecat, etext, self._embed(etext))
            self._existing = []
        text = info.get("text", info["instruction"])
        emb = info.get("emb")
        if emb is None:
            emb = self._embed(text)
        else:
            self.embed_s += info.get("emb_s", 0.0)
        return self._decide(tid, category, text, emb)

    def _decide(self, tid: str, category: str, text: str, emb):
        from clawgym.synth.dedup import Match

        if self.precision == "fp32":
            return self._index.add([tid], [category], emb[None, :])[0]
        close = self._index.close_to(category, emb, self.threshold - RECHECK_MARGIN)
        if close:  # decided by fp32, as an fp32 run decides it
            self.rechecked += 1
            mine = self._fp32_of(tid, text)
            sims = [float(self._fp32_of(kid, self._texts[kid]) @ mine) for kid, _ in close]
            self.recheck_max_error = max(self.recheck_max_error,
                                         *(abs(a - b) for a, (_, b) in zip(sims, close, strict=True)))
            best = max(range(len(sims)), key=lambda j: (sims[j], -j))  # the first of equals, as argmax
            if sims[best] >= self.threshold:
                self._fp32.pop(tid, None)
                return Match(tid, close[best][0], sims[best], category)
        self._index.keep(tid, category, emb)
        self._texts[tid] = text
        return None

    def as_dict(self) -> dict:
        out = {"threshold": self.threshold, "model": f"all-MiniLM-L6-v2 ({self.precision})",
               "precision": self.precision, "within": "category",
               "dropped": self.dropped, "replaced": self.dropped - self.unreplaced, "unreplaced": self.unreplaced,
               "embed_cpu_s": round(self.embed_s, 1)}
        if self.precision != "fp32":
            out.update({"decided_in": "fp32 within the margin of the threshold", "recheck_margin": RECHECK_MARGIN,
                        "rechecked": self.rechecked, "recheck_max_error": round(self.recheck_max_error, 4)})
        return out


# --------------------------------------------------------------------------------------------- worker

_W: dict = {}


def _solution_of(task: Task) -> tuple[str, list[str] | None]:
    """The --solution (and --program-ops) a persona task was made with, from what compose_task records."""
    return task.metadata.get("solution", "direct"), task.metadata.get("program_ops")


def _load_worker_state(taxonomy_path: str | None, personas_path: str | None, categories: list[str] | None,
                       validate: bool, operations: list[str] | None = None, max_ops: int | None = None,
                       solution: str = "direct", program_ops: list[str] | None = None) -> None:
    """What workers make candidates from (taxonomy, personas, generators) in _W, and the validation code
    imported. The parent does it before the pool starts, so that forked workers inherit it instead of loading
    and importing it again each (with another start method each worker does it itself)."""
    from clawgym.synth.compose import SOLUTIONS

    if solution not in SOLUTIONS:
        raise ClawgymError(f"--solution: unknown {solution!r} (choose {' or '.join(SOLUTIONS)})")
    key = (taxonomy_path, personas_path, tuple(categories or ()), tuple(operations or ()), max_ops, solution,
           tuple(program_ops or ()))
    if _W.get("key") != key:
        from clawgym.core.taxonomy import load_taxonomy
        from clawgym.synth.ops import registry
        from clawgym.synth.personas import load_personas

        tax = load_taxonomy(taxonomy_path)
        personas = load_personas(personas_path, tax)
        subs = [s for c in tax.categories for s in c.subcategories
                if not categories or c.id in categories or c.name in categories]
        known = ops = registry()
        if operations:
            unknown = sorted(set(operations) - set(ops))
            if unknown:
                raise ClawgymError(f"--operations: unknown operation(s) {', '.join(unknown)} "
                                   f"(known: {', '.join(sorted(ops))})")
            ops = {k: g for k, g in ops.items() if k in operations}
            if not any(g.standalone for g in ops.values()):
                raise ClawgymError(f"--operations: none of {', '.join(operations)} can start a task on its own "
                                   "(add one that reads the workspace's own files)")
            subs = [s for s in subs if set(s.operations) & set(ops)]
            if not subs:
                raise ClawgymError("--operations: no subcategory of the chosen categories uses these operations")
        lengths = {k: w for k, w in LENGTH_WEIGHTS.items() if max_ops is None or k <= max_ops}
        if not lengths:
            raise ClawgymError(f"--max-ops must be at least 1 (got {max_ops})")
        if program_ops:
            unknown = sorted(set(program_ops) - set(known))
            if unknown:
                raise ClawgymError(f"--program-ops: unknown operation(s) {', '.join(unknown)}")
        _W.update(key=key, taxonomy=tax, personas=personas, subs=subs, ops=ops, lengths=lengths, solution=solution,
                  program_ops=frozenset(program_ops) if program_ops else None)
    if validate:
        import clawgym.synth.validate  # noqa: F401 - agents, sandboxes, verifiers: heavy imports, done once


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _remove_tmp(path: str) -> None:
    """Remove a worker's private temp dir, unmounting what sandboxes mounted under it when the sandbox package
    knows how (size-capped workspaces are mounts of their own on some hosts)."""
    try:
        from clawgym.sandbox.sweep import remove_root
    except ImportError:
        shutil.rmtree(path, ignore_errors=True)
        return
    with contextlib.suppress(Exception):
        remove_root(Path(path))
    shutil.rmtree(path, ignore_errors=True)


def sandbox_base() -> str | None:
    """Where validation's sandboxes go. Validation makes and copies many small workspaces: a RAM-backed tmpfs
    makes that several times faster than a disk (CLAWGYM_SANDBOX_TMP when set, else /dev/shm when it is
    there, else the system's temp dir)."""
    base = os.environ.get("CLAWGYM_SANDBOX_TMP")
    if base is None and os.access("/dev/shm", os.W_OK):
        base = "/dev/shm"
    return base


def _stop_everything() -> None:
    """Stop this worker's sandboxes (their processes killed, their directories removed) and remove its private
    temp dir, where every sandbox it starts lives.

    What a worker killed half-way through this would leave on the host comes first: the size-capped
    filesystems of its sandboxes are host mounts, detached at once (lazily: a sandbox process still using one
    keeps it, invisibly, until it dies), and with them gone nothing inside a sandbox can write under the temp
    dir any more, so it is removed whole next. Killing the sandboxes' processes and removing their cgroups,
    the slow part, comes last (the processes die with the worker in any case: bwrap --die-with-parent; a
    cgroup left behind is swept by the next run)."""
    tmp = _W.get("tmp")
    if tmp:
        _remove_tmp(tmp)
    _drop_sandboxes()
    with contextlib.suppress(Exception):
        from clawgym.synth.validate import stop_task_sandboxes

        stop_task_sandboxes()
    if tmp:
        _remove_tmp(tmp)
    if _W.get("run_dir"):  # the run's directory goes with the last of its workers (when the parent is gone)
        with contextlib.suppress(OSError):
            os.rmdir(_W["run_dir"])


def _parent_gone(signum: int | None = None, frame=None) -> None:
    """The worker's SIGTERM handler: the parent died (PR_SET_PDEATHSIG, or the watcher thread noticed), or the
    pool terminates its workers. Nothing this worker does is wanted any more: clean up and leave at once."""
    # once: a second SIGTERM (the watcher thread's, after the kernel's) must not start the cleanup again in
    # the middle of this one
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        _stop_everything()
    finally:
        os._exit(1)


def _watch_parent(parent_pid: int) -> None:
    """Where the kernel cannot signal a parent's death (not Linux), notice it: once the worker is reparented,
    SIGTERM itself (the handler runs in the main thread), and exit anyway if that is stuck."""
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10.0)
    os._exit(1)


def _die_with_parent(parent_pid: int) -> None:
    """Make this worker die with the process that started it, its sandboxes with it: `kill -9` of
    `clawgym synth` must not leave workers running with sandboxes in /dev/shm. On Linux the kernel sends
    SIGTERM when the parent dies (PR_SET_PDEATHSIG); a thread watching the parent pid covers the rest, and the
    parent may already be gone before either is in place. The sandboxes' own processes die with the worker
    (bwrap --die-with-parent; docker containers are stopped by the handler)."""
    signal.signal(signal.SIGTERM, _parent_gone)
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent_pid:
        _parent_gone()
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="clawgym-parent-watch").start()


def _init_worker(taxonomy_path: str | None, personas_path: str | None, categories: list[str] | None,
                 sandbox: str, validate: bool = True, operations: list[str] | None = None,
                 max_ops: int | None = None, solution: str = "direct", program_ops: list[str] | None = None,
                 parent_pid: int | None = None, run_dir: str | None = None, dedup: bool | str = False) -> None:
    from multiprocessing import util

    from clawgym.sandbox import get_backend

    if parent_pid is not None:
        _die_with_parent(parent_pid)
    # Each worker keeps its sandboxes in a directory of its own (in the run's directory, see synthesize),
    # removed when it ends, however it ends.
    _W["run_dir"] = run_dir
    # embed each validated task for the parent's near-duplicate removal (RunDedup), in its precision
    _W["dedup"] = "fp32" if dedup is True else dedup
    _W["tmp"] = tempfile.mkdtemp(prefix=f"worker-{os.getpid()}-" if run_dir else f"clawgym-synth-{os.getpid()}-",
                                 dir=run_dir or sandbox_base())
    os.environ["CLAWGYM_SANDBOX_TMP"] = _W["tmp"]
    util.Finalize(None, _remove_tmp, args=(_W["tmp"],), exitpriority=1)
    _load_worker_state(taxonomy_path, personas_path, categories, validate, operations, max_ops, solution, program_ops)
    _W["backend"] = get_backend(sandbox)  # made in each worker: a backend may hold connections (Docker)
    # what is loaded now lives as long as the worker: keep the garbage collector from scanning it again and
    # again (several percent of a worker's time otherwise)
    gc.freeze()


@functools.lru_cache(maxsize=64)
def subcategory_order(seed: int, round_: int, n: int) -> tuple[int, ...]:
    """The order in which round `round_` of a seed's tasks visits the `n` subcategories: a permutation drawn
    from the seed, so each run of n consecutive indices covers every subcategory once (the mix stays balanced)
    while which index gets which subcategory, and so the tasks' neighbours, differ from seed to seed."""
    order = list(range(n))
    random.Random(f"clawgym-synth-subs:{seed}:{round_}").shuffle(order)
    return tuple(order)


def subcategory_for(seed: int, index: int, attempt: int, n: int, rng: random.Random) -> int:
    """The subcategory (its position in the list of n) of candidate (index, attempt): the seed's permutation of
    the index's round for the first attempts (a retry moves 7 places along it), then a random one."""
    if attempt >= 3:
        return rng.randrange(n)
    return subcategory_order(seed, index // n, n)[(index % n + attempt * 7) % n]


def make_candidate(seed: int, index: int, attempt: int, phrasing_half: int | None = None):
    from clawgym.synth.compose import compose_task

    rng = random.Random(f"clawgym-synth:{seed}:{index}:{attempt}")
    subs = _W["subs"]
    sub = subs[subcategory_for(seed, index, attempt, len(subs), rng)]
    fitting = [p for p in _W["personas"] if sub.id in p.subcategories] or _W["personas"]
    persona = rng.choice(fitting)
    lengths = _W["lengths"]
    length = rng.choices(list(lengths), weights=list(lengths.values()))[0]
    return compose_task(task_id(seed, index), persona, sub, _W["taxonomy"], _W["ops"], rng, length,
                        solution=_W.get("solution", "direct"), program_ops=_W.get("program_ops"),
                        phrasing_half=phrasing_half)


def make_candidates(
    seed: int,
    keys: Iterable[tuple[int, int]],
    *,
    categories: list[str] | None = None,
    taxonomy_path: Path | None = None,
    personas_path: Path | None = None,
    operations: list[str] | None = None,
    max_ops: int | None = None,
    solution: str = "direct",
    program_ops: list[str] | None = None,
) -> Iterator[tuple[int, int, Candidate | Exception]]:
    """Make the candidates `keys` ((index, attempt) pairs) of `seed` again, exactly as :func:`synthesize` with
    the same options makes them, without validating them: `(index, attempt, candidate)` each, in order, or the
    generator's exception in the candidate's place (synthesize counts those as `generator_error`).

    A written task does not hold everything its candidate had (each step's plan: the files it writes, its
    checks); this gives it back, e.g. to `benchmarks/synth-bench-200/build.py`, which finds the attempt that made
    a written task by comparing the candidate's task with it. Lazy: stop iterating once you have what you need."""
    _load_worker_state(str(taxonomy_path) if taxonomy_path else None, str(personas_path) if personas_path else None,
                       categories, False, operations, max_ops, solution, program_ops)
    for index, attempt in keys:
        try:
            cand = make_candidate(seed, index, attempt)
        except Exception as exc:  # noqa: BLE001 - handed back, as synthesize records it
            yield index, attempt, exc
        else:
            yield index, attempt, cand


def _sandbox(key: str):
    """This worker's long-lived grading ("grader") or replay ("replay") sandbox (restarted if it died)."""
    from multiprocessing import util

    from clawgym.synth.validate import start_grader, start_replay_sandbox

    sb = _W.get(key)
    if sb is None:
        sb = _W[key] = (start_grader if key == "grader" else start_replay_sandbox)(_W["backend"])
        util.Finalize(sb, sb.stop, exitpriority=10)
    return sb


def _drop_sandboxes() -> None:
    for key in ("grader", "replay"):
        sb = _W.pop(key, None)
        if sb is not None:
            with contextlib.suppress(Exception):  # it is being replaced because it failed
                sb.stop()


def _rewrite_ok(cands: list, rewrite) -> list:
    """The validated candidates of a chunk after the rewrite pass (:mod:`clawgym.synth.rewrite`), each with its
    outcome in `_W["rewrite_outcomes"]` (by candidate id)."""
    from clawgym.llm.client import LLMClient
    from clawgym.sandbox.base import SandboxError
    from clawgym.synth.rewrite import rewrite_candidates
    from clawgym.synth.validate import validate_batch

    key = (rewrite.model, rewrite.base_url)
    if _W.get("rewrite_key") != key:
        _W["rewrite_client"] = LLMClient(rewrite.model, rewrite.base_url, max_concurrency=4,
                                         timeout=rewrite.timeout, max_retries=rewrite.max_retries)
        _W["rewrite_key"] = key

    def again(new: list) -> list:
        try:
            return validate_batch(new, _W["backend"], _sandbox("grader"), replay=_sandbox("replay"))
        except SandboxError:
            _drop_sandboxes()
            return validate_batch(new, _W["backend"], _sandbox("grader"))

    personas = {p.id: p for p in _W.get("personas") or []}
    return rewrite_candidates(cands, _W["rewrite_client"], rewrite, personas, again)


def work(seed: int, jobs: list[tuple[int, int]], validate: bool, make: Callable | None = None,
         rewrite=None) -> list[tuple]:
    """Make and validate a chunk of (index, attempt) candidates; with `rewrite` (a
    :class:`clawgym.synth.rewrite.RewriteConfig`), rewrite the validated ones' requests.

    Returns one (index, attempt, task json or None, rejection reason or None, detail, fingerprint, info) each;
    with `rewrite`, a written task's info has its outcome under "rewrite"."""
    from clawgym.sandbox.base import SandboxError
    from clawgym.synth.validate import validate_batch

    out: list[tuple | None] = [None] * len(jobs)
    cands = []
    for k, (index, attempt) in enumerate(jobs):
        try:
            cands.append((k, (make or make_candidate)(seed, index, attempt)))
        except Exception as exc:  # noqa: BLE001 (a generator bug must not stop the run; it is counted)
            out[k] = (index, attempt, None, "generator_error", f"{type(exc).__name__}: {exc}", "", None)
    verdicts = [None] * len(cands)
    if validate and cands:
        try:
            verdicts = validate_batch([c for _, c in cands], _W["backend"], _sandbox("grader"),
                                      replay=_sandbox("replay"))
        except SandboxError:
            # the grader or the replay sandbox died: start a new grader and retry once, each replay in a
            # sandbox of its own this time
            _drop_sandboxes()
            verdicts = validate_batch([c for _, c in cands], _W["backend"], _sandbox("grader"))
    outcomes: list[dict | None] = [None] * len(cands)
    if rewrite is not None and validate:
        ok = [i for i, v in enumerate(verdicts) if v is None or v.ok]
        if ok:
            done, res = _rewrite_ok([cands[i][1] for i in ok], rewrite)
            for i, c, o in zip(ok, done, res, strict=True):
                cands[i] = (cands[i][0], c)
                outcomes[i] = o
    for (k, cand), v, outcome in zip(cands, verdicts, outcomes, strict=True):
        index, attempt = jobs[k]
        if v is not None and not v.ok:
            # a cheat's rejection tells the parent which cheats passed, for the report
            extra = {"cheats": v.cheats_passing} if (v.reason or "").startswith("cheat_") else None
            out[k] = (index, attempt, None, v.reason, v.detail[:300], cand.fingerprint, extra)
        else:
            info = task_info(cand.task)
            if outcome is not None:
                info["rewrite"] = outcome
            if _W.get("dedup"):
                t0 = time.process_time()
                info["emb"] = embed_request(info.get("text", info["instruction"]), _W["dedup"])
                info["emb_s"] = time.process_time() - t0
            out[k] = (index, attempt, cand.task.model_dump_json(), None, "", cand.fingerprint, info)
    return out


# --------------------------------------------------------------------------------------------- parent


def synthesize(  # noqa: C901, PLR0915 (the run's driver: resume, workers or executor, dedup, rewrite and the report)
    n: int,
    seed: int,
    output: Path,
    *,
    jobs: int = 1,
    categories: list[str] | None = None,
    taxonomy_path: Path | None = None,
    personas_path: Path | None = None,
    sandbox: str = "bwrap",
    validate: bool = True,
    operations: list[str] | None = None,
    max_ops: int | None = None,
    solution: str = "direct",
    program_ops: list[str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    make: Callable | None = None,
    id_prefix: str = "persona",
    executor: Executor | None = None,
    dedup: bool = False,
    dedup_threshold: float | None = None,
    dedup_precision: str = "auto",
    rewrite=None,
    phrasing_half: int | None = None,
) -> SynthReport:
    """Write tasks 0..n-1 of the seed to `output` (appending after what is already there).

    `make(seed, index, attempt) -> Candidate` (picklable; default :func:`make_candidate`) and `id_prefix` let
    another route (clawgym.synth.skill_route) reuse the run: its task ids are `<id_prefix>-s<seed>-<index>`.

    `operations` restricts the atomic operations tasks are made of (and the subcategories to those using one of
    them); `max_ops` caps the length of a task's operation chain. Both change which tasks a seed gives.
    `solution` ("direct" or "program") picks the reference solutions (see :func:`compose_task`); it changes
    the references only, never the tasks; `program_ops` limits programs to those operations.

    `executor` (an entered :class:`clawgym.rollout.executor.Executor`, default `local`; Ray's: one worker per
    sandbox slot of a cluster's nodes) runs the validation workers (:func:`_init_worker`, then :func:`work` per
    chunk, :func:`_stop_everything` at the end) instead of `jobs` local processes; the file is the same bytes
    either way.

    `dedup` drops near-duplicates as they come (:class:`RunDedup`: MiniLM cosine >= `dedup_threshold`, 0.90 by
    default, to a task kept before it in its category) and makes the next attempt of the index instead, so the
    file still gets its n tasks; an index whose every attempt repeats a kept task is left out (the report's
    `near_duplicates` counts them as unreplaced). It changes which tasks a seed gives (never their bytes
    otherwise): resume a file with the setting it was made with. `dedup_precision` ("auto", "fp32", "bf16") is
    how the workers embed; the decisions are fp32's whatever it is (see :class:`RunDedup`).

    `rewrite` (a :class:`clawgym.synth.rewrite.RewriteConfig`) has a model rewrite each validated task's request
    in the persona's voice, in the workers, kept only when it keeps the task's constants and validates again
    (:mod:`clawgym.synth.rewrite`); the report gets a `rewrite` section. Local workers only (not Ray).

    `phrasing_half` (0 or 1; persona route) words every task from one half of the generators' options
    (:class:`clawgym.synth.grammar.HalfChoices`): train on one half and test on the other to measure wording
    nobody trained on. It changes which tasks a seed gives: resume a file with the half it was made with."""
    if phrasing_half is not None:
        if phrasing_half not in (0, 1):
            raise ClawgymError(f"--phrasing-half must be 0 or 1 (got {phrasing_half})")
        if make is not None:
            raise ClawgymError("--phrasing-half is an option of the persona route (synth persona) only")
        make = functools.partial(make_candidate, phrasing_half=phrasing_half)
    # load here first: bad data files fail with their one-line error before any worker starts, and forked
    # workers inherit what is loaded
    _load_worker_state(str(taxonomy_path) if taxonomy_path else None, str(personas_path) if personas_path else None,
                       categories, validate, operations, max_ops, solution, program_ops)
    if rewrite is not None:
        if not validate:
            raise ClawgymError("--rewrite-model needs validation (a rewrite is kept only if the task validates again)")
        if executor is not None and executor.name != "local":
            raise ClawgymError("--rewrite-model runs with local workers only (not --executor ray) for now")
    report = SynthReport()
    if rewrite is not None:
        from clawgym.synth.rewrite import RewriteReport

        report.rewrite = RewriteReport(rewrite.model)
    near = RunDedup(dedup_threshold, resolve_dedup_precision(dedup_precision)) if dedup else None
    seen_fp: set[str] = set()
    seen_text: set[str] = set()
    done: set[int] = set()
    if output.exists():
        read = read_records_lenient(output, Task)
        if read.errors:
            raise ClawgymError(f"cannot resume: {read.errors[0]}")
        prefix = f"{id_prefix}-s{seed}-"
        wanted = (solution, sorted(set(program_ops)) if solution == "program" and program_ops else None)
        for t in read.records:
            if not t.id.startswith(prefix):
                raise ClawgymError(f"{output}: holds task {t.id!r} of another seed; use another output file")
            made_with = _solution_of(t)
            if made_with != wanted:
                made = (f"made with --solution {made_with[0]}"
                        + (f" --program-ops {','.join(made_with[1])}" if made_with[1] else ""))
                if "solution" not in t.metadata:  # direct, or a file from before program tasks recorded theirs
                    made = "made with --solution direct (or by an older clawgym, which did not record it)"
                raise ClawgymError(f"{output}: holds task {t.id!r} {made}; resume with the same options or use "
                                   "another output file")
            if t.metadata.get("phrasing_half") != phrasing_half:
                had = t.metadata.get("phrasing_half")
                raise ClawgymError(f"{output}: holds task {t.id!r} made with "
                                   f"{'--phrasing-half ' + str(had) if had is not None else 'every phrasing'}; "
                                   "resume with the same options or use another output file")
            done.add(int(t.id[len(prefix):]))
            seen_fp.add(t.metadata.get("fingerprint", ""))
            seen_text.add(t.instruction)
            if near is not None:
                info = task_info(t)
                near.keep_existing(t.id, info["category"], info.get("text", info["instruction"]))
            report.add(t)
        report.resumed = len(done)
    todo = [i for i in range(n) if i not in done]
    if on_progress:
        on_progress(report.resumed, n)
    if not todo:
        return report
    appender = JsonlAppender(output)
    # the run's sandboxes live in one directory: each worker's in a folder of its own there, which the worker
    # removes however it ends (with the run's directory when it is the last); the run removes what is left
    run_dir = tempfile.mkdtemp(prefix=f"clawgym-synth-{os.getpid()}-", dir=sandbox_base()) if validate else None
    init = (str(taxonomy_path) if taxonomy_path else None, str(personas_path) if personas_path else None,
            categories, sandbox, validate, operations, max_ops, solution, program_ops, os.getpid(), run_dir,
            near.precision if near is not None else False)
    results: dict[int, tuple] = {}
    next_to_write = 0
    queue = list(todo)
    pending: set[Future] = set()
    try:
        ex = executor if executor is not None else LocalExecutor(jobs)  # local: `jobs` processes of this host
        # workers elsewhere neither watch this process nor use its run directory
        initargs = init if ex.workers_here else (*init[:9], None, None)
        pool_cm = ex.worker_pool(_init_worker, initargs, _stop_everything, jobs=jobs)
        jobs = pool_cm.size  # chunk sizes follow the workers; the tasks do not depend on them
        with pool_cm as pool:
            try:
                def submit(chunk: list[tuple[int, int]]) -> None:
                    if rewrite is None:
                        pending.add(pool.submit(work, seed, chunk, validate, make))
                    else:
                        pending.add(pool.submit(work, seed, chunk, validate, make, rewrite))

                def submit_next() -> None:
                    size = max(MIN_CHUNK, min(CHUNK, -(-len(queue) // (2 * max(1, jobs)))))
                    chunk = [(i, 0) for i in queue[:size]]
                    del queue[:size]
                    if chunk:
                        submit(chunk)

                for _ in range(max(1, jobs) * 3):
                    submit_next()
                while pending:
                    finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                    for fut in finished:
                        pending.discard(fut)
                        for res in fut.result():
                            results[res[0]] = res
                        submit_next()
                    # decide in index order, so duplicates resolve the same way whatever the timing
                    while next_to_write < len(todo) and todo[next_to_write] in results:
                        index, attempt, task_json, reason, detail, fp, info = results.pop(todo[next_to_write])
                        if task_json is not None and (fp in seen_fp or info["instruction"] in seen_text):
                            task_json, reason, detail = None, "duplicate", f"fingerprint {fp}"
                        if task_json is not None and near is not None:
                            tid = f"{id_prefix}-s{seed}-{index:06d}"
                            match = near.check(tid, info["category"], info)
                            if match is not None:
                                near.dropped += 1
                                task_json, reason = None, "near_duplicate"
                                detail = (f"{tid} (attempt {attempt}): cosine {match.similarity:.3f} to "
                                          f"{match.duplicate_of}")
                        if task_json is None:
                            report.rejected[reason] += 1
                            report.examples.setdefault(reason, detail)
                            if info and info.get("cheats"):
                                report.add_cheat_rejection(info["cheats"])
                            if attempt + 1 >= MAX_ATTEMPTS and reason == "near_duplicate":
                                near.unreplaced += 1  # every attempt repeats a kept task: leave the index out
                                next_to_write += 1
                                continue
                            if attempt + 1 >= MAX_ATTEMPTS:
                                raise ClawgymError(
                                    f"task index {index}: no valid task after {MAX_ATTEMPTS} attempts "
                                    f"(last: {reason}: {detail})"
                                )
                            submit([(index, attempt + 1)])
                            break  # wait for the retry before writing later indices
                        seen_fp.add(fp)
                        seen_text.add(info["instruction"])
                        info.pop("emb", None)
                        outcome = info.pop("rewrite", None)
                        if outcome is not None and report.rewrite is not None:
                            report.rewrite.add(outcome)
                        appender.append_json(task_json)
                        report.add_info(info)
                        report.written += 1
                        next_to_write += 1
                        if on_progress:
                            on_progress(report.resumed + report.written, n)
            except BaseException:
                for fut in pending:
                    fut.cancel()
                raise
            finally:
                appender.close()
    finally:
        if run_dir:  # the workers are gone (the pool waited for them): what they left, if anything
            _remove_tmp(run_dir)
    if near is not None:
        report.near_duplicates = near.as_dict()
    report_path = output.with_name(output.name + ".report.json")
    write_json(report_path, report.as_dict())
    return report
