"""Re-score an earlier rollout from its kept final workspaces, without running the agent again.

For every finished episode of RUN_DIR (the last record per episode in `trajectories.jsonl`; skipped and
infrastructure-error episodes were never scored and are left out), the kept workspace
(`workspaces/<episode>.tar.gz`) is unpacked into a temporary directory; the task's code check runs again in a
fresh sandbox started on a copy of it (as in a rollout: checker files are copied in only then), the rubric
judge reads the unpacked files, and the two are combined into a new verdict
(:func:`clawgym.verify.scoring.combine_judged`).

Written to RUN_DIR (each file to a temporary name and renamed):

* `verdicts.jsonl`: one :class:`RescoredEpisode` per episode (the new verdict, the rollout's verdict, the
  judge's details with every sample's score);
* `verdicts.summary.json`: counts, mean score and pass rate before and after, judge calls and tokens.

The tasks come from RUN_DIR/run.json's `tasks` path (as given to `clawgym rollout`: relative to the current
directory, else to RUN_DIR), or from the caller.
"""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import Field

from clawgym.core.atomic import write_json
from clawgym.core.errors import ClawgymError
from clawgym.core.fstree import remove_tree
from clawgym.core.jsonl import read_records_lenient, write_records
from clawgym.core.records import Record, Task, Trajectory, Verdict
from clawgym.sandbox.base import SandboxBackend, SandboxError, SandboxLimits
from clawgym.verify.code import run_code_check
from clawgym.verify.judge import Judge, JudgeResult
from clawgym.verify.scoring import combine_judged

TRAJECTORIES = "trajectories.jsonl"
VERDICTS = "verdicts.jsonl"
SUMMARY = "verdicts.summary.json"
RESCORABLE = ("completed", "agent_error", "timeout")


class RescoreError(ClawgymError):
    """A run directory that cannot be re-scored (no trajectories, no tasks file)."""


class RescoredEpisode(Record):
    """One line of RUN_DIR/verdicts.jsonl."""

    id: str = Field(description="Episode id, '<task id>#<sample>'.")
    task_id: str
    sample: int = 0
    agent: str
    model: str | None = None
    trajectory_status: str
    trajectory_started_at: str | None = Field(
        default=None, description="started_at of the trajectory record re-scored: tells a verdict of an earlier "
        "attempt (a resumed rollout ran the episode again since) from a current one.")
    verdict: Verdict
    previous: Verdict | None = Field(default=None, description="The verdict the rollout recorded.")
    code: dict[str, Any] | None = Field(default=None, description="The code check re-run: status, score, error.")
    judge: dict[str, Any] | None = Field(default=None, description="JudgeResult.as_dict(): rules, samples, usage.")
    workspace_snapshot: str | None = None
    rescored_at: str
    duration_s: float = 0.0


@dataclass
class RescoreReport:
    run_dir: Path
    records: list[RescoredEpisode]
    summary: dict[str, Any]
    not_rescored: dict[str, str] = field(default_factory=dict)  # episode id -> why
    task_errors: list[str] = field(default_factory=list)  # bad task lines


def resolve_tasks_path(run_dir: Path, tasks_path: Path | None = None) -> Path:
    """The tasks file of a run: the one given, else run.json's `tasks` (relative to the current directory,
    else to the run directory)."""
    if tasks_path is not None:
        if not Path(tasks_path).exists():
            raise RescoreError(f"{tasks_path}: no such tasks file")
        return Path(tasks_path)
    info_path = run_dir / "run.json"
    try:
        info = json.loads(info_path.read_text())
    except (OSError, ValueError) as exc:
        raise RescoreError(f"{info_path}: cannot read the run's settings ({exc}); give the tasks file") from None
    rel = info.get("tasks")
    if not rel:
        raise RescoreError(f"{info_path} names no tasks file; give it (--tasks)")
    for cand in (Path(rel), Path.cwd() / rel, run_dir / rel):
        if cand.exists():
            return cand
    raise RescoreError(f"the run's tasks file {rel!r} is not found (from {Path.cwd()} or {run_dir}); give it (--tasks)")


def latest_trajectories(run_dir: Path) -> list[Trajectory]:
    path = run_dir / TRAJECTORIES
    if not path.exists():
        raise RescoreError(f"{path}: no such file (not a run directory?)")
    latest: dict[str, Trajectory] = {}
    for t in read_records_lenient(path, Trajectory).records:
        latest[t.id] = t
    return list(latest.values())


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def rescore_episode(traj: Trajectory, task: Task, run_dir: Path, judge: Judge | None, backend: SandboxBackend | None,
                    limits: SandboxLimits | None = None) -> RescoredEpisode:
    """A new verdict for one finished episode from its kept workspace. Never raises for the episode's own
    problems: a missing workspace gives an `unscored` verdict, a failing sandbox an `infra_error` one."""
    t0 = time.monotonic()
    base = dict(id=traj.id, task_id=traj.task_id, sample=traj.sample, agent=traj.agent, model=traj.model,
                trajectory_status=traj.status, trajectory_started_at=traj.started_at, previous=traj.verdict,
                workspace_snapshot=traj.workspace_snapshot)

    def done(verdict: Verdict, code: dict | None = None, judged: JudgeResult | None = None) -> RescoredEpisode:
        return RescoredEpisode(**base, verdict=verdict, code=code, judge=judged.as_dict() if judged else None,
                               rescored_at=_now(), duration_s=time.monotonic() - t0)

    snap = run_dir / traj.workspace_snapshot if traj.workspace_snapshot else None
    if snap is None or not snap.exists():
        why = "the run kept no workspace for this episode" if snap is None else f"{snap} is missing"
        return done(Verdict(status="unscored", error=f"cannot re-score: {why}"))
    from clawgym.workspace.materialize import WorkspaceError, extract_snapshot, snapshot

    tmp = Path(tempfile.mkdtemp(prefix="clawgym-rescore-", dir=os.environ.get("CLAWGYM_SANDBOX_TMP")))
    try:
        ws = tmp / "ws"
        try:
            if snap.is_dir():  # older runs kept a directory
                snapshot(snap, ws)  # links copied as links; iterative, bounded
            else:
                extract_snapshot(snap, ws)
        except (OSError, WorkspaceError, EOFError, ValueError, tarfile.TarError) as exc:
            return done(Verdict(status="unscored", error=f"cannot unpack {snap}: {exc}"))
        code = None
        code_info = None
        if task.verifier.code is not None:
            if backend is None:
                return done(Verdict(status="infra_error", error="no sandbox backend to run the code check"))
            try:
                with backend.start(task.workspace, limits=limits, prebuilt=ws) as sb:
                    code = run_code_check(task.verifier.code, task, sb, traj.transcript, traj.final_message)
            except SandboxError as exc:
                return done(Verdict(status="infra_error", error=f"sandbox failed during the code check: {exc}"))
            code_info = {"status": code.status, "score": code.score, "error": code.error, "checks": code.checks}
        judged = None
        if judge is not None and task.verifier.rubric is not None:
            judged = judge.judge(task, ws, traj.transcript, traj.final_message)
        return done(combine_judged(task.verifier, code, judged), code_info, judged)
    finally:
        remove_tree(tmp, ignore_errors=True)  # an agent's tree may be any depth


def summarize_rescore(records: Iterable[RescoredEpisode], judge: Judge | None = None,
                      not_rescored: dict[str, str] | None = None) -> dict[str, Any]:
    """Counts, mean score and pass rate (before and after), changes, judge calls and tokens."""
    records = list(records)
    scored = [r for r in records if r.verdict.status in ("scored", "checker_failed")]
    before = [r.previous for r in records if r.previous and r.previous.status in ("scored", "checker_failed")]
    statuses = Counter(r.verdict.status for r in records)
    judged = [r.judge for r in records if r.judge and r.judge.get("status") != "none"]
    usage = Counter()
    for j in judged:
        usage.update(j.get("usage") or {})
    rule_errors = sum(1 for j in judged for rule in j.get("rules", []) if rule.get("status") == "error")
    changed = sum(1 for r in records if r.previous is not None and r.verdict.status in ("scored", "checker_failed")
                  and (r.previous.status != r.verdict.status or abs(r.previous.score - r.verdict.score) > 1e-9))
    out: dict[str, Any] = {
        "episodes": len(records),
        "statuses": dict(statuses),
        "scored": len(scored),
        "mean_score": sum(r.verdict.score for r in scored) / len(scored) if scored else None,
        "pass_rate": sum(r.verdict.passed for r in scored) / len(scored) if scored else None,
        "previous_mean_score": sum(v.score for v in before) / len(before) if before else None,
        "previous_pass_rate": sum(v.passed for v in before) / len(before) if before else None,
        "changed": changed,
        "not_rescored": dict(Counter((not_rescored or {}).values())),
        "judge": None,
    }
    if judge is not None:
        out["judge"] = {
            "models": judge.models, "samples": judge.samples, "temperature": judge.temperature,
            "episodes_judged": len(judged),
            "episodes_judge_error": sum(1 for j in judged if j.get("status") == "error"),
            "rule_errors": rule_errors,
            # calls made now and cache hits; tokens spent now (cache hits cost nothing)
            "requests": usage.get("requests", 0), "cached": usage.get("cached", 0),
            "prompt_tokens": usage.get("prompt_tokens", 0), "completion_tokens": usage.get("completion_tokens", 0),
        }
    return out




def rescore_run(
    run_dir: Path,
    *,
    judge: Judge | None = None,
    backend: SandboxBackend | None = None,
    tasks: list[Task] | None = None,
    tasks_path: Path | None = None,
    jobs: int = 2,
    limits: SandboxLimits | None = None,
    episode_ids: Iterable[str] | None = None,
    on_done: Callable[[RescoredEpisode], None] | None = None,
    write: bool = True,
) -> RescoreReport:
    """Re-score every finished episode of `run_dir` (see the module docstring); `jobs` episodes at once.

    `backend`: where code checks run (default: the `auto` backend). `judge`: the rubric judge (None: hybrid
    tasks are scored on their code checks, rubric-only tasks stay unscored, as in a rollout without judge).
    """
    run_dir = Path(run_dir)
    trajectories = latest_trajectories(run_dir)
    task_errors: list[str] = []
    if tasks is None:
        path = resolve_tasks_path(run_dir, tasks_path)
        read = read_records_lenient(path, Task)
        tasks, task_errors = read.records, [str(e) for e in read.errors]
    by_id = {t.id: t for t in tasks}
    wanted = set(episode_ids) if episode_ids is not None else None
    todo: list[tuple[Trajectory, Task]] = []
    not_rescored: dict[str, str] = {}
    for traj in trajectories:
        if wanted is not None and traj.id not in wanted:
            continue
        if traj.status not in RESCORABLE:
            not_rescored[traj.id] = f"episode status {traj.status}"
        elif traj.task_id not in by_id:
            not_rescored[traj.id] = "task not in the tasks file"
        else:
            todo.append((traj, by_id[traj.task_id]))
    with ExitStack() as stack:
        if backend is None and any(t.verifier.code is not None for _, t in todo):
            from clawgym.sandbox import get_backend

            backend = get_backend("auto")
            stack.callback(backend.close)
        results: dict[str, RescoredEpisode] = {}
        lock = threading.Lock()

        def one(item: tuple[Trajectory, Task]) -> None:
            traj, task = item
            try:
                rec = rescore_episode(traj, task, run_dir, judge, backend, limits)
            except Exception as exc:  # noqa: BLE001 (a bug in clawgym: keep going, say so in the verdict)
                rec = RescoredEpisode(
                    id=traj.id, task_id=traj.task_id, sample=traj.sample, agent=traj.agent, model=traj.model,
                    trajectory_status=traj.status, trajectory_started_at=traj.started_at, previous=traj.verdict,
                    rescored_at=_now(),
                    verdict=Verdict(status="infra_error", error=f"re-scoring crashed: {type(exc).__name__}: {exc}"),
                )
            with lock:
                results[traj.id] = rec
            if on_done is not None:
                on_done(rec)

        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="rescore") as pool:
            list(pool.map(one, todo))
    records = [results[t.id] for t, _ in todo]
    summary = summarize_rescore(records, judge, not_rescored)
    summary.update(run_dir=str(run_dir), rescored_at=_now())
    if write:
        # the file holds the latest record of every episode re-scored so far (a subset run keeps the others)
        order = [t.id for t in trajectories]
        merged = {r.id: r for r in read_verdicts(run_dir)} if (run_dir / VERDICTS).exists() else {}
        merged.update({r.id: r for r in records})
        write_records(run_dir / VERDICTS, [merged[i] for i in order if i in merged])
        summary["episodes_in_file"] = sum(1 for i in order if i in merged)
        write_json(run_dir / SUMMARY, summary, default=str)
    return RescoreReport(run_dir=run_dir, records=records, summary=summary, not_rescored=not_rescored,
                         task_errors=task_errors)


def read_verdicts(run_dir: Path) -> list[RescoredEpisode]:
    """The records of RUN_DIR/verdicts.jsonl (bad lines skipped)."""
    return read_records_lenient(Path(run_dir) / VERDICTS, RescoredEpisode).records


def rescored_trajectories(run_dir: Path, records: list[RescoredEpisode]) -> list[Trajectory]:
    """The run's trajectories with their verdicts replaced by the re-scored ones (for the rollout summary)."""
    new = {r.id: r.verdict for r in records}
    return [t.model_copy(update={"verdict": new[t.id]}) if t.id in new else t for t in latest_trajectories(run_dir)]


class LazyEndpointClient:
    """An LLMClient whose endpoint is reached only when the first call needs it: for a local model without a
    base URL, the embedded server is started then (and stopped by :meth:`close`). A re-scoring served entirely
    from the judge cache starts nothing."""

    def __init__(self, model: str, base_url: str | None = None, *, log_path: Path | None = None,
                 on_start: Callable[[Any], None] | None = None, **client_kwargs: Any):
        self.model = model
        self._base_url = base_url
        self._log_path = log_path
        self._on_start = on_start
        self._kwargs = client_kwargs
        self._client = None
        self._failed: str | None = None
        self._stack = ExitStack()
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._client is not None

    def _get(self):
        from clawgym.llm import LLMClient, LLMError, model_endpoint

        with self._lock:
            if self._failed is not None:
                raise LLMError(self._failed, "endpoint", False)
            if self._client is None:
                try:
                    url = self._stack.enter_context(model_endpoint(
                        self.model, self._base_url, log_path=self._log_path, on_start=self._on_start))
                except Exception as exc:  # noqa: BLE001 (e.g. the embedded server did not start: every later call fails fast)
                    self._failed = f"the judge model {self.model!r} cannot be reached: {exc}"
                    raise LLMError(self._failed, "endpoint", False) from None
                client = LLMClient(self.model, url, **self._kwargs)
                self._stack.callback(client.close)
                self._client = client
            return self._client

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **params: Any):
        return self._get().chat(messages, tools, **params)

    def close(self) -> None:
        with self._lock:
            self._stack.close()
            self._client = None
