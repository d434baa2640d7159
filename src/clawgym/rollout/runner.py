"""Runs episodes (agent x task x sample), each in its own sandbox, concurrently, with resume.

The run directory holds:

* `trajectories.jsonl`: one Trajectory per finished episode, appended whole as soon as it ends;
* `run.json`: the settings of the run (agent, sandbox, limits, versions) and its provenance (the clawgym
  source's git commit, the tasks file's sha256, the check library's version, the packages': see
  :mod:`clawgym.rollout.provenance`);
* `logs/run.log`: one line per episode event;
* `workspaces/<episode>.tar.gz`: each episode's final workspace, taken before the checker is copied in, so
  it can be re-scored later without rerunning the agent.

With a rubric judge (`RolloutOptions.judge`), each episode of a task with a rubric is judged as it ends, on its
final workspace before any checker file is copied in, and its verdict is the hybrid one `clawgym verify` would
give (0.7 code + 0.3 rubric by default); the judge's details (rules, samples, usage) go in the trajectory's
`metadata["judge"]`. Judging happens where the episode runs, so it needs the local executor.

An episode that ends in an infrastructure error (the sandbox failed, the model endpoint stayed down) is retried
with a fresh sandbox up to `infra_retries` times before it is recorded as such. Rerunning the same command skips
episodes already in `trajectories.jsonl`, except infrastructure errors, which are tried again; the last record of
an episode wins when reading.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
import re
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from clawgym import __version__
from clawgym.agent.base import Agent, AgentOutcome, EpisodeContext
from clawgym.core.errors import ClawgymError, RecordVersionError
from clawgym.core.jsonl import JsonlAppender, read_records_lenient
from clawgym.core.records import ErrorInfo, Task, Trajectory, Verdict
from clawgym.rollout.snapshots import (
    MAX_STATE_BYTES,
    MAX_TOTAL_BYTES,
    StateRecorder,
    episode_progress,
    with_step_rewards,
)
from clawgym.sandbox.base import Mount, Sandbox, SandboxBackend, SandboxError, SandboxLimits
from clawgym.verify import verify_episode
from clawgym.verify.code import CodeResult
from clawgym.verify.progress import PROGRESS_KEY, Progress, progress_unavailable
from clawgym.verify.scoring import combine, combine_judged

if TYPE_CHECKING:
    from clawgym.rollout.executor import Attempt, Executor
    from clawgym.rollout.recipe import AgentRecipe
    from clawgym.verify.judge import Judge

TRAJECTORIES = "trajectories.jsonl"


INTERRUPT_GRACE_S = 15.0  # how long an interrupted run waits for its episodes to end once their sandboxes are stopped


def episode_id(task_id: str, sample: int) -> str:
    return f"{task_id}#{sample}"


def _safe_name(eid: str) -> str:
    """A file name for an episode: its id with unsafe characters replaced, and a long id cut and completed by
    a hash of the whole (ids are limited at load, but a file name must never fail as too long)."""
    task_id, sep, sample = eid.rpartition("#")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", eid)
    # the '#' before the sample is always replaced; any other replaced character could make two ids one name
    replaced = re.search(r"[^A-Za-z0-9._-]", task_id if sep else eid) is not None
    if replaced or len(name) > 120 or name.startswith("."):
        name = f"{name[:80].lstrip('.')}-{hashlib.sha256(eid.encode()).hexdigest()[:16]}"
    return name


def _self_inflicted(sandbox: Sandbox, live: _LiveSandboxes | None) -> bool:
    """Whether a sandbox that failed under the agent or the checker failed from inside: nobody here stopped it
    (an interrupt does) and its engine still works. Then the failure is the agent's (a `kill -9 -1`, a killed
    supervisor, a flooded channel), not infrastructure: an infrastructure error is never scored and is retried,
    so a policy could otherwise erase its failures from the mean by breaking its sandbox."""
    if sandbox.stopped or (live is not None and live.closed):
        return False
    try:
        return sandbox.engine_ok()
    except Exception:  # noqa: BLE001 (a backend's health probe that raises says the engine is not ok)
        return False


@dataclass
class RolloutOptions:
    samples: int = 1
    jobs: int = 1
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    keep_workspaces: bool = True
    max_snapshot_bytes: int = 50 * 1024 * 1024
    base_dir: Path | None = None  # where relative asset dirs of the tasks are resolved
    infra_retries: int = 2  # fresh attempts of an episode after an infrastructure error
    retry_delay_s: float = 1.0
    # called with every attempt's trajectory (retried ones included) as soon as it ends, from a worker thread
    on_attempt: Callable[[Trajectory], None] | None = None
    # extra directories bound into every sandbox (a black-box agent's runtime, its state); set by the agent session
    mounts: list[Mount] = field(default_factory=list)
    # wall time of one episode in place of the tasks' own limits (None: each task's timeout_seconds). Raise it
    # when many episodes share one slow model: an episode cut short while waiting its turn is retried from scratch
    episode_timeout: float | None = None
    # where attempts run (clawgym.rollout.executor): None is the local thread pool of `jobs`; a RayExecutor
    # spreads them over a cluster. The caller enters (and leaves) it, so one connection serves several rollouts
    executor: Executor | None = None
    # how a worker elsewhere builds the agent (set by the agent session; noop and oracle need none)
    recipe: AgentRecipe | None = None
    # the rubric judge (a clawgym.verify.Judge): episodes of tasks with a rubric are judged as they end
    judge: Judge | None = None
    # progress rewards (clawgym.verify.progress): the workspace is snapshotted after each step that can change
    # it, the snapshots graded after the episode, and each step gets its potential difference; tasks without
    # checks as data fall back to outcome credit (the trajectory's metadata["progress"] says why)
    progress: bool = False
    # what the snapshots of one episode may hold in all (one state: at most 16 MiB); past it, outcome credit
    progress_max_bytes: int = MAX_TOTAL_BYTES

    def timeout_of(self, task: Task) -> float:
        return self.episode_timeout or task.timeout_seconds


@dataclass
class RolloutReport:
    run_dir: Path
    ran: list[Trajectory]
    skipped: int
    all: list[Trajectory]

    @property
    def progress_fallbacks(self) -> dict[str, str]:
        """Episode id -> why it fell back to outcome credit, for the episodes of a `progress` run that have no
        progress rewards (clawgym.verify.progress)."""
        from clawgym.verify.progress import fell_back

        return {t.id: why for t in self.all if (why := fell_back(t.metadata)) is not None}


class _Log:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def __call__(self, msg: str) -> None:
        with self._lock:
            self._fh.write(f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} {msg}\n")
            self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class _LiveSandboxes:
    """The sandboxes of running episodes; on interrupt all are stopped so their episodes end at once."""

    def __init__(self) -> None:
        self._set: set[Sandbox] = set()
        self._lock = threading.Lock()
        self.closed = False

    def add(self, sb: Sandbox) -> bool:
        with self._lock:
            if self.closed:
                return False
            self._set.add(sb)
            return True

    def discard(self, sb: Sandbox) -> None:
        with self._lock:
            self._set.discard(sb)

    def stop_all(self) -> None:
        with self._lock:
            self.closed = True
            boxes = list(self._set)
        for sb in boxes:
            try:
                sb.stop()
            except Exception:  # noqa: BLE001, S110 (stopping every sandbox on shutdown: one that fails to stop must not keep the others running; the reaper sweeps what is left)
                pass


def load_done(run_dir: Path) -> dict[str, Trajectory]:
    """Finished episodes of an earlier run (the last record per episode), without infrastructure errors.

    A file holding trajectories of a newer clawgym (a schema_version this one does not read) is refused: resuming
    would run those episodes again, and add records of an older form to it."""
    return _earlier_run(run_dir)[0]


def _earlier_run(run_dir: Path) -> tuple[dict[str, Trajectory], dict[str, int]]:
    """(finished episodes, as :func:`load_done`; the last attempt number recorded for each episode), from one read
    of trajectories.jsonl. A resumed episode continues its attempt count, so its model calls get a fresh trajectory
    id in the pool (`<episode>~<attempt>`) instead of being written beside the dead attempt's error steps."""
    path = run_dir / TRAJECTORIES
    if not path.exists():
        return {}, {}
    read = read_records_lenient(path, Trajectory)
    newer = next((e for e in read.errors if isinstance(e, RecordVersionError)), None)
    if newer is not None:
        raise ClawgymError(f"cannot resume this run: {newer}")
    latest: dict[str, Trajectory] = {}
    attempts: dict[str, int] = {}
    for t in read.records:
        latest[t.id] = t
        attempts[t.id] = max(attempts.get(t.id, 0), t.attempts)
    return {k: t for k, t in latest.items() if t.status != "infra_error"}, attempts


def run_episode(
    task: Task,
    sample: int,
    agent: Agent,
    backend: SandboxBackend,
    options: RolloutOptions,
    run_dir: Path | None = None,
    log: Callable[[str], None] = lambda m: None,
    live: _LiveSandboxes | None = None,
    attempt: int = 1,
) -> Trajectory:
    """One episode: start a sandbox, run the agent, snapshot, verify, stop. Never raises for task problems.

    `live`, when given, tracks the running sandbox so that an interrupted run can stop it at once.
    """
    eid = episode_id(task.id, sample)
    started = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    t0 = time.monotonic()
    base = dict(id=eid, task_id=task.id, sample=sample, agent=agent.name, sandbox=backend.name, started_at=started)

    def infra(kind: str, message: str, outcome: AgentOutcome | None = None) -> Trajectory:
        log(f"{eid} infra_error {kind}: {message}")
        return Trajectory(
            **base, status="infra_error", error=ErrorInfo(kind=kind, message=message),
            transcript=outcome.transcript if outcome else [],
            verdict=Verdict(status="infra_error", error=message), duration_s=time.monotonic() - t0,
            messages=outcome.messages if outcome else [], steps=outcome.steps if outcome else [],
            usage=outcome.usage if outcome else {},
        )

    try:
        extra = {"mounts": options.mounts} if options.mounts else {}
        sandbox: Sandbox = backend.start(task.workspace, limits=options.limits, base_dir=options.base_dir, **extra)
    except SandboxError as exc:
        return infra("sandbox_start", str(exc))
    except ClawgymError as exc:  # e.g. a workspace file that cannot be built
        return infra("workspace", str(exc))
    snapshot_rel = None
    outcome: AgentOutcome | None = None
    if live is not None and not live.add(sandbox):
        sandbox.stop()
        return infra("interrupted", "the run was interrupted before this episode started")
    recorder: StateRecorder | None = None
    try:
        recorder, no_progress = _recorder(task, sandbox, options)
        limit = options.timeout_of(task)
        ctx = EpisodeContext(
            deadline=time.monotonic() + limit, sample=sample,
            exec_timeout=min(options.limits.exec_timeout_s, limit), episode_id=eid, attempt=attempt,
        )
        try:
            outcome = agent.run(task, recorder.sandbox if recorder is not None else sandbox, ctx)  # type: ignore[arg-type]
        except SandboxError as exc:
            outcome = AgentOutcome(transcript=[], status="sandbox_lost", error_kind="sandbox_lost", error=str(exc))
        except Exception as exc:  # noqa: BLE001 (an agent bug is the agent's failure, not the task's)
            tb = traceback.format_exc().strip().splitlines()[-1]
            outcome = AgentOutcome(transcript=[], status="agent_error", error_kind=type(exc).__name__, error=tb)
        if outcome.status == "sandbox_lost":
            if not _self_inflicted(sandbox, live):
                return infra("sandbox_died", f"during the agent: {outcome.error}", outcome)
            message = f"the sandbox failed from inside while the agent ran: {outcome.error}"
            log(f"{eid} agent_error sandbox_killed: {outcome.error}")
            return Trajectory(
                **base, status="agent_error", error=ErrorInfo(kind="sandbox_killed", message=message),
                transcript=outcome.transcript, final_message=outcome.final_message, model=outcome.model,
                tool_calls=outcome.tool_calls, tool_errors=outcome.tool_errors,
                verdict=combine(task.verifier, CodeResult(status="checker_failed", error=message)),
                duration_s=time.monotonic() - t0, metadata=outcome.metadata, messages=outcome.messages,
                tools=outcome.tools, steps=outcome.steps, usage=outcome.usage,
            )
        if outcome.status == "infra_error":
            return infra(outcome.error_kind or "agent_infra", outcome.error or "", outcome)
        if outcome.status == "skipped":
            log(f"{eid} skipped: {outcome.error}")
            return Trajectory(
                **base, status="skipped", error=ErrorInfo(kind=outcome.error_kind or "skipped", message=outcome.error or ""),
                transcript=outcome.transcript, duration_s=time.monotonic() - t0,
            )
        judged = None
        try:
            # nothing of the agent's may live on beside the grader: its whole process tree ends, and the
            # checks run under a fresh supervisor in fresh namespaces (a fresh container)
            sandbox.restart()
            if recorder is not None:
                recorder.take_final()
            if options.keep_workspaces and run_dir is not None:
                rel = Path("workspaces") / f"{_safe_name(eid)}.tar.gz"
                sandbox.snapshot_archive(run_dir / rel, max_bytes=options.max_snapshot_bytes)
                snapshot_rel = str(rel)
            if options.judge is not None and task.verifier.rubric is not None:
                # the workspace as the agent left it: before any checker file is copied in
                judged = options.judge.judge(task, sandbox, outcome.transcript, outcome.final_message)
            verdict = verify_episode(task, sandbox, outcome.transcript, outcome.final_message, judged)
        except SandboxError as exc:
            if not _self_inflicted(sandbox, live):
                return infra("sandbox_died", f"during verification: {exc}", outcome)
            # what the agent left (or the checker itself) broke the sandbox: the checker's failure, scored 0
            verdict = combine_judged(task.verifier, CodeResult(
                status="checker_failed", error=f"the sandbox failed from inside during verification: {exc}"), judged)
        except Exception as exc:  # noqa: BLE001 (a bug in clawgym itself: keep the run going, retry on resume)
            return infra("internal", f"verification crashed: {type(exc).__name__}: {exc}", outcome)
        status = outcome.status if outcome.status in ("completed", "agent_error", "timeout") else "agent_error"
        metadata = {**outcome.metadata, "judge": judged.as_dict()} if judged is not None else outcome.metadata
        steps = outcome.steps
        if options.progress:
            progress = _episode_progress(task, recorder, no_progress, sandbox, outcome, verdict, live)
            metadata, steps = _with_progress(progress, metadata, steps, lambda why: log(f"{eid} progress: {why}"))
        traj = Trajectory(
            **base, status=status,
            error=ErrorInfo(kind=outcome.error_kind or status, message=outcome.error) if outcome.error else None,
            transcript=outcome.transcript, final_message=outcome.final_message, model=outcome.model,
            tool_calls=outcome.tool_calls, tool_errors=outcome.tool_errors, verdict=verdict,
            duration_s=time.monotonic() - t0, workspace_snapshot=snapshot_rel, metadata=metadata,
            messages=outcome.messages, tools=outcome.tools, steps=steps, usage=outcome.usage,
        )
        log(f"{eid} {status} score={verdict.score:.3f} verdict={verdict.status}"
            + (f" error={verdict.error}" if verdict.error else ""))
        return traj
    finally:
        sandbox.stop()
        if live is not None:
            live.discard(sandbox)
        if recorder is not None:
            recorder.close()


def _recorder(task: Task, sandbox: Sandbox, options: RolloutOptions) -> tuple[StateRecorder | None, str | None]:
    """(the recorder of a progress episode's workspace states, why the task has none)."""
    if not options.progress:
        return None, None
    why = progress_unavailable(task)
    if why is not None:
        return None, why
    return StateRecorder(sandbox, max_state_bytes=min(MAX_STATE_BYTES, options.progress_max_bytes),
                         max_total_bytes=options.progress_max_bytes), None


def _with_progress(progress: Progress, metadata: dict, steps: list[dict],
                   log: Callable[[str], None]) -> tuple[dict, list[dict]]:
    """The trajectory's metadata and steps with its progress rewards, or with why it falls back (logged)."""
    if progress.fallback is not None:
        log(f"outcome credit ({progress.fallback})")
        return {**metadata, PROGRESS_KEY: progress.as_dict()}, steps
    return {**metadata, PROGRESS_KEY: progress.as_dict()}, with_step_rewards(steps, progress.rewards)


def _episode_progress(task: Task, recorder: StateRecorder | None, unavailable: str | None, sandbox: Sandbox,
                      outcome: AgentOutcome, verdict: Verdict, live: _LiveSandboxes | None) -> Progress:
    """The progress rewards of an episode just verified (its sandbox restarted, nothing of the agent's alive),
    or why it falls back to outcome credit. Never raises: progress is an addition to the episode, never its loss."""
    if recorder is None:
        return Progress(fallback=unavailable or "not recorded")
    if verdict.status != "scored" or verdict.code_score is None:
        return Progress(fallback=f"the final workspace was not scored ({verdict.status})")
    try:
        return episode_progress(task, recorder, sandbox, outcome.transcript, len(outcome.steps), verdict.code_score)
    except SandboxError as exc:
        why = "from inside" if _self_inflicted(sandbox, live) else "infrastructure"
        return Progress(fallback=f"the sandbox failed while grading the states ({why}): {exc}")
    except OSError as exc:  # the states together do not fit the workspace's disk limit
        return Progress(fallback=f"the workspace states could not be placed for grading: {exc}")
    except Exception as exc:  # noqa: BLE001 - a bug here must not lose the episode
        return Progress(fallback=f"progress grading crashed: {type(exc).__name__}: {exc}")


def run_episode_with_retries(
    task: Task,
    sample: int,
    agent_factory: Callable[[], Agent],
    backend: SandboxBackend,
    options: RolloutOptions,
    run_dir: Path | None = None,
    log: Callable[[str], None] = lambda m: None,
    live: _LiveSandboxes | None = None,
) -> Trajectory:
    """:func:`run_episode`, tried again with a fresh sandbox and agent after an infrastructure error."""
    attempt = 0
    while True:
        attempt += 1
        traj = run_episode(task, sample, agent_factory(), backend, options, run_dir, log, live, attempt)
        traj.attempts = attempt
        if options.on_attempt is not None:
            try:
                options.on_attempt(traj)
            except Exception as exc:  # noqa: BLE001 (a hook must not lose the episode)
                log(f"{traj.id} on_attempt hook failed: {type(exc).__name__}: {exc}")
        if traj.status != "infra_error" or attempt > options.infra_retries or (live is not None and live.closed):
            return traj
        log(f"{traj.id} retrying after an infrastructure error (attempt {attempt + 1} of {options.infra_retries + 1})")
        time.sleep(options.retry_delay_s * attempt)


def write_run_info(run_dir: Path, settings: dict) -> None:
    info = {
        "clawgym_version": __version__, "python": platform.python_version(), "platform": platform.platform(),
        "updated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), **settings,
    }
    tmp = run_dir / ".run.json.tmp"
    tmp.write_text(json.dumps(info, indent=2, default=str) + "\n")
    tmp.replace(run_dir / "run.json")


@contextlib.contextmanager
def terminate_as_interrupt():
    """(A context manager, or a decorator.) While a run goes on in the main thread, SIGTERM (a scheduler's stop, `kill`) raises KeyboardInterrupt
    there, so the run stops its sandboxes and removes their directories as it does on Ctrl-C; the default
    SIGTERM ends the process on the spot and leaves them behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):  # noqa: ARG001 - the signal handler signature
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def infra_trajectory(task: Task, sample: int, agent: str, sandbox: str, kind: str, message: str) -> Trajectory:
    """The record of an attempt that failed before it could say anything itself (its worker node was lost)."""
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return Trajectory(
        id=episode_id(task.id, sample), task_id=task.id, sample=sample, agent=agent, sandbox=sandbox,
        started_at=now, status="infra_error", error=ErrorInfo(kind=kind, message=message),
        verdict=Verdict(status="infra_error", error=message), duration_s=0.0,
    )


def _write_attempt_files(run_dir: Path, files: dict[str, bytes]) -> None:
    """Write what a remote attempt kept (its workspace archive) into the run dir, atomically; only under
    `workspaces/`, whatever the worker sent."""
    root = (run_dir / "workspaces").resolve()
    for rel, data in files.items():
        dest = (run_dir / rel).resolve()
        if dest.parent != root:
            raise ClawgymError(f"a worker sent a file outside {root}: {rel!r}")
        tmp = dest.with_name(f".{dest.name}.tmp")
        root.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        tmp.replace(dest)


@terminate_as_interrupt()
def run_rollout(  # noqa: C901, PLR0915 (the rollout's one driver loop: resume, submit, collect, retry, stop; each branch is one of those)
    tasks: Iterable[Task],
    agent_factory: Callable[[], Agent],
    backend: SandboxBackend,
    run_dir: Path,
    options: RolloutOptions | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_done: Callable[[Trajectory], None] | None = None,
    settings: dict | None = None,
    tasks_file: str | Path | None = None,
) -> RolloutReport:
    """Run every (task, sample) episode not yet finished in `run_dir`, `options.jobs` at a time (or over the
    nodes of `options.executor`).

    This function is the one writer of the run: attempts run wherever the executor puts them, and come back
    here to be retried (infrastructure errors, `options.infra_retries` times), reported to `on_attempt`, and
    appended to `trajectories.jsonl`. `on_start(total_to_run, skipped)` and `on_done(trajectory)` let a caller
    show progress. SIGTERM ends the run as Ctrl-C does (see :func:`terminate_as_interrupt`). `tasks_file`, the
    file the tasks were read from, has its sha256 recorded in run.json's `provenance`.
    """
    from clawgym.rollout.executor import EpisodeRun, LocalExecutor
    from clawgym.rollout.provenance import run_provenance

    options = options or RolloutOptions()
    run_dir = Path(run_dir)
    executor = options.executor or LocalExecutor(options.jobs)
    if options.judge is not None and executor.name != "local":
        raise ClawgymError(f"a rubric judge during the rollout needs the local executor, not {executor.name!r} "
                           "(episodes are judged where they run); judge afterwards with `clawgym verify RUN_DIR`")
    run_dir.mkdir(parents=True, exist_ok=True)
    # before run.json is rewritten: a run of a newer clawgym is refused untouched; episodes redone after an
    # infrastructure error continue their attempt count
    done, before = _earlier_run(run_dir)
    provenance = run_provenance(tasks_file)
    agent_name = agent_factory().name
    log = _Log(run_dir / "logs" / "run.log")
    live = _LiveSandboxes()
    try:
        ex_info = executor.begin(EpisodeRun(agent_factory, backend, options, run_dir, log, live))
    except BaseException:
        log.close()
        raise
    base_info = {
        "agent": agent_name, "sandbox": backend.name, "samples": options.samples, "jobs": options.jobs,
        "limits": options.limits.model_dump(), **(settings or {}), "provenance": provenance,
    }
    # which node ran which episode (remote executors): kept across resumes, written at most every few seconds
    nodes_of: dict[str, str] = {}
    if ex_info:
        with contextlib.suppress(Exception):
            nodes_of = dict(json.loads((run_dir / "run.json").read_text()).get("episode_nodes") or {})
        base_info["executor"] = ex_info
    write_run_info(run_dir, {**base_info, **({"episode_nodes": nodes_of} if ex_info else {})})
    last_info = time.monotonic()
    todo = [(t, s) for t in tasks for s in range(options.samples) if episode_id(t.id, s) not in done]
    skipped = len(done)
    if on_start:
        on_start(len(todo), skipped)
    log(f"run start: {len(todo)} episodes to run, {skipped} already done; agent={agent_name} "
        f"sandbox={backend.name} jobs={options.jobs}" + (f" executor={executor.name}" if ex_info else ""))
    ran: list[Trajectory] = []
    appender = JsonlAppender(run_dir / TRAJECTORIES)
    if appender.torn_bytes:
        log(f"cut a torn last line ({appender.torn_bytes} bytes) from {TRAJECTORIES}")
    interrupted = False
    # (task, sample, attempt, not before): a retried attempt waits retry_delay_s x attempts before it starts
    queue: deque[tuple[Task, int, int, float]] = deque(
        (t, s, before.get(episode_id(t.id, s), 0) + 1, 0.0) for t, s in todo)
    pending: dict[Future[Attempt], tuple[Task, int, int]] = {}

    def finish(fut: Future[Attempt]) -> None:
        nonlocal last_info
        task, sample, attempt = pending.pop(fut)
        result = fut.result()
        traj = result.trajectory
        traj.attempts = attempt
        for line in result.log:
            log(line)
        if result.files:
            _write_attempt_files(run_dir, result.files)
        if options.on_attempt is not None:
            try:
                options.on_attempt(traj)
            except Exception as exc:  # noqa: BLE001 (a hook must not lose the episode)
                log(f"{traj.id} on_attempt hook failed: {type(exc).__name__}: {exc}")
        if ex_info and result.node:
            nodes_of[traj.id] = result.node
        tried = attempt - before.get(traj.id, 0)  # attempts of this run
        if traj.status == "infra_error" and tried <= options.infra_retries and not live.closed:
            log(f"{traj.id} retrying after an infrastructure error (attempt {tried + 1} of "
                f"{options.infra_retries + 1} in this run)")
            queue.appendleft((task, sample, attempt + 1, time.monotonic() + options.retry_delay_s * tried))
            return
        appender.append(traj)
        ran.append(traj)
        if on_done:
            on_done(traj)
        if ex_info and time.monotonic() - last_info > 2.0:
            write_run_info(run_dir, {**base_info, "episode_nodes": nodes_of})
            last_info = time.monotonic()

    try:
        while queue or pending:
            now = time.monotonic()
            wake: float | None = None
            held: list[tuple[Task, int, int, float]] = []
            while queue and len(pending) < max(1, executor.capacity()):
                item = queue.popleft()
                if item[3] > now:  # a retry still waiting out its delay
                    held.append(item)
                    wake = item[3] if wake is None else min(wake, item[3])
                    continue
                pending[executor.submit(item[0], item[1], item[2])] = (item[0], item[1], item[2])
            queue.extendleft(reversed(held))
            if not pending:
                if wake is None:
                    raise ClawgymError(f"the {executor.name} executor has no capacity left to run episodes on")
                time.sleep(max(0.0, wake - time.monotonic()))
                continue
            timeout = None if wake is None else max(0.0, wake - time.monotonic())
            finished, _ = wait(list(pending), timeout=timeout, return_when=FIRST_COMPLETED)
            for fut in finished:
                finish(fut)
    except BaseException:
        # Ctrl-C (or a crash of the caller): stop the running sandboxes so their episodes end now; what they
        # return is an infrastructure error that is not recorded, so a rerun retries them.
        log("run interrupted: stopping running sandboxes")
        interrupted = True
        executor.interrupt()
        # Episodes end as their sandboxes die. Wait for them a bounded time, stopping again what registered late;
        # an episode still stuck after that (in a backend call that does not return) must not hold the caller.
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        while any(not f.done() for f in pending) and time.monotonic() < deadline:
            executor.interrupt()
            wait(list(pending), timeout=0.5)
        stuck = sum(1 for f in pending if not f.done())
        if stuck:
            log(f"{stuck} episode(s) did not end within {INTERRUPT_GRACE_S:.0f} s of the interrupt; not waiting")
        raise
    finally:
        executor.end(wait=not interrupted)
        appender.close()
        if ex_info:
            with contextlib.suppress(Exception):
                write_run_info(run_dir, {**base_info, "episode_nodes": nodes_of})
        log.close()
    final = {**done, **{t.id: t for t in ran}}
    return RolloutReport(run_dir=run_dir, ran=ran, skipped=skipped, all=list(final.values()))
