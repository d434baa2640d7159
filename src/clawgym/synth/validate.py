"""Validation of a synthesized task in a real sandbox, before it is written.

Three states of the task are graded: the untouched workspace (no-op) must score 0 on every check; a
deliberately partial solution (earlier steps done right, the last step done partly or wrongly) must score
strictly between 0 and 1, which shows the partial credit is real; the reference solution replayed by the
oracle must score 1.0 with no failing step. Then three trivial cheats (:mod:`clawgym.synth.cheats`: every
output file written empty, the first input file copied to every output path, the request's text written into
every output path) must each score below 0.3: a reward a lazy policy collects without doing the work is not
one to train on.

`validate_batch` replays the partial and the reference solutions — as host file operations when they run no
command (the tools then only read and write workspace files, as in every backend), else in a sandbox: a
long-lived one per worker, reset between tasks to what a fresh sandbox holds — copies the workspace
states (the three, and one per cheat) into the workspace of a long-lived grader sandbox, and grades the states
of many tasks with ONE python process there: python's start-up would otherwise dominate the cost of validating
thousands of tasks. `validate_candidate_episodes` runs ordinary rollout episodes instead; the two agree
(tested) and the second is the reference semantics.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from clawgym.agent.base import EpisodeContext
from clawgym.agent.baselines import NoopAgent, OracleAgent
from clawgym.core.records import ReferenceSolution, Task, Verdict, WorkspaceSpec
from clawgym.rollout.runner import RolloutOptions, run_episode
from clawgym.sandbox.base import Sandbox, SandboxBackend, SandboxError, SandboxLimits
from clawgym.sandbox.hostdir import HostDirSandbox
from clawgym.synth.cheats import CHEATS, THRESHOLD, cheat_task, output_paths, state_name
from clawgym.synth.compose import Candidate
from clawgym.verify.code import grader_of, run_python_batch
from clawgym.verify.scoring import combine
from clawgym.workspace.materialize import materialize

VALIDATION_LIMITS = SandboxLimits(memory_mb=1024, max_processes=128, exec_timeout_s=60)


@dataclass
class Validation:
    ok: bool
    reason: str | None = None
    detail: str = ""
    oracle: Verdict | None = None
    noop: Verdict | None = None
    partial: Verdict | None = None
    cheats: dict[str, Verdict] = field(default_factory=dict)  # cheat name -> its verdict (clawgym.synth.cheats)
    guard_checks: frozenset[str] = frozenset()  # checks left out of the cheats' bar (see cheat_score)

    @property
    def cheats_passing(self) -> list[str]:
        """The cheats that scored THRESHOLD or more (by :func:`cheat_score`), in CHEATS order."""
        return [c for c in CHEATS if c in self.cheats and cheat_score(self.cheats[c], self.guard_checks) >= THRESHOLD]


def guard_checks(task: Task) -> frozenset[str]:
    """The task's checks that only guard the workspace (the distractor files' `distractors_kept`, named in
    `metadata.distractor_check` by compose_task)."""
    name = task.metadata.get("distractor_check")
    return frozenset([name]) if isinstance(name, str) else frozenset()


def cheat_score(verdict: Verdict, guard: frozenset[str] = frozenset()) -> float:
    """A cheat's score as the bar sees it: the mean of the task's checks without the `guard` checks. A guard
    check never pays a cheat (it is gated by the task's own work), so counting it would water a weak check's
    payout down below the bar: a task whose format checks pay 2 of 6 to writing anything would pass as 2 of 7."""
    own = [x for k, x in verdict.checks.items() if k not in guard]
    if not guard or not own or len(own) == len(verdict.checks):
        return verdict.score or 0.0
    return sum(own) / len(own)


def partial_task(cand: Candidate) -> Task:
    steps = [s for p in cand.plans[:-1] for s in p.steps] + list(cand.plans[-1].partial)
    return cand.task.model_copy(update={"reference": ReferenceSolution(steps=steps)})


CHEAT_WHAT = {
    "empty": "every output file written empty",
    "copy-input": "the first input file copied to every output path",
    "echo-request": "the request's own text written into every output path",
}


def judge(oracle: Verdict | None, oracle_tool_errors: int, noop: Verdict | None, partial: Verdict | None,
          partial_tool_errors: int = 0, cheats: dict[str, Verdict] | None = None,
          guard: frozenset[str] = frozenset()) -> Validation:
    """The rules, applied to the verdicts: reference, no-op, partial solution, then the cheats (any scoring
    THRESHOLD or more without the `guard` checks, :func:`cheat_score`, rejects the task as `cheat_<name>`, the
    name of the best-paid cheat)."""
    cheats = cheats or {}
    if oracle_tool_errors:
        return Validation(False, "reference_tool_error", f"{oracle_tool_errors} reference steps failed", oracle, noop,
                          partial, cheats)
    if oracle is None or oracle.status != "scored" or not oracle.passed:
        failing = {k: x for k, x in (oracle.checks if oracle else {}).items() if x < 1.0}
        detail = (oracle.error if oracle and oracle.error else "") or f"failing checks: {failing}"
        return Validation(False, "reference_below_1", detail, oracle, noop, partial, cheats)
    nonzero = {k: x for k, x in (noop.checks if noop else {}).items() if x > 0}
    if noop is None or noop.status not in ("scored", "checker_failed") or nonzero:
        return Validation(False, "noop_above_0", f"checks passed without acting: {nonzero}", oracle, noop, partial,
                          cheats)
    if partial_tool_errors or partial is None or partial.status != "scored" or not 0.0 < partial.score < 1.0:
        score = partial.score if partial else None
        return Validation(False, "partial_not_between",
                          f"partial solution scored {score} ({partial_tool_errors} failed steps)", oracle, noop,
                          partial, cheats)
    v = Validation(True, oracle=oracle, noop=noop, partial=partial, cheats=cheats, guard_checks=guard)
    passing = v.cheats_passing
    if passing:
        top = max(passing, key=lambda c: cheat_score(cheats[c], guard))
        parts = []
        for c in passing:
            paid = {k: round(x, 3) for k, x in cheats[c].checks.items() if x > 0}
            parts.append(f"{c} ({CHEAT_WHAT[c]}) scored {cheat_score(cheats[c], guard):.3f}, paid by {paid}")
        v.ok, v.reason = False, f"cheat_{top}"
        v.detail = ("a trivial cheat scores >= " + f"{THRESHOLD:g}: " + "; ".join(parts)
                    + ". Make those checks count only when the content is right.")
    return v


@dataclass
class _States:
    """The three graded states of one candidate, copied into the grader's workspace."""

    noop_transcript: list
    partial_transcript: list
    oracle_transcript: list
    partial_errors: int
    oracle_errors: int
    cheat_transcripts: dict[str, list] = field(default_factory=dict)  # cheat name -> transcript (state: state_name)


def _ran_commands(steps) -> bool:
    return any(s.name in ("exec", "bash") for s in steps)


class _FileOnlyWorkspace(HostDirSandbox):
    """The workspace of a replay that runs no command: only read/write/edit/ls, which are host file
    operations confined to the workspace in the host-directory backends. Starting a sandbox for them would only
    cost time; anything that asks to run a command here is a bug, so `exec` refuses. The replay works
    directly in the directory that is then graded (nothing to copy afterwards)."""

    backend = "file-only"

    def exec(self, command, *, cwd=None, env=None, timeout=None, stdin=None):
        raise SandboxError("a file-only replay workspace cannot run commands")

    def kill_processes(self) -> None:
        pass

    def stop(self) -> None:
        pass


def _file_only_replay(agent, task: Task, pristine: Path, state: Path, ctx: EpisodeContext, limits: SandboxLimits):
    """Replay `task`'s reference (no command in it) on a copy of the untouched workspace at `state`."""
    # shutil.copy: contents and modes; no check reads a file's times, and copying them (copy2's copystat) was 3%
    # of a worker's CPU in a profile
    shutil.copytree(pristine, state, symlinks=True, copy_function=shutil.copy)
    return agent.run(task, _FileOnlyWorkspace(state, task.workspace.mount_dir, limits), ctx)


def replay_cheats(task: Task, pristine: Path, solved: Path, dest: Path, ctx: EpisodeContext,
                  limits: SandboxLimits) -> dict[str, list]:
    """Replay each cheat of clawgym.synth.cheats at `dest/<state_name(cheat)>`, each on its own copy of the
    untouched workspace `pristine`; the outputs they write to are the files the reference left new or changed
    in `solved`. A cheat only writes files, so it is replayed as host file operations, as the file-only
    references are. Returns {cheat: transcript}; nothing when the reference changed no file."""
    outputs = output_paths(pristine, solved)
    if not outputs:
        return {}
    out = {}
    for cheat in CHEATS:
        run = _file_only_replay(OracleAgent(), cheat_task(task, cheat, outputs, pristine), pristine,
                                dest / state_name(cheat), ctx, limits)
        out[cheat] = run.transcript
    return out


class ReplaySandboxError(SandboxError):
    """The long-lived replay sandbox failed: every candidate of the batch is affected, not just one."""


# What a command may leave outside the workspace of a reused replay sandbox (its private tmpfs mounts, empty
# in a fresh sandbox): emptied after every task, with the leftover processes killed, so that each task's
# replay starts from the same state a fresh sandbox has.
# (shell builtins only, `rm` runs only when there is something to remove: the usual cost is one shell)
_CLEAN_PRIVATE_DIRS = """for d in /tmp /root /home /run /var/tmp /dev/shm; do
  for f in "$d"/* "$d"/.[!.]* "$d"/..?*; do
    if [ -e "$f" ] || [ -h "$f" ]; then rm -rf -- "$f" || exit 1; fi
  done
done"""


def _reset_replay_sandbox(sb: Sandbox) -> None:
    """Leave a reused replay sandbox as a fresh one: no process, nothing in its private dirs or workspace."""
    sb.kill_processes()
    res = sb.exec(_CLEAN_PRIVATE_DIRS, cwd="/", timeout=30)
    if res.exit_code != 0:
        raise SandboxError(f"cannot clean the replay sandbox: {res.stderr.strip()[:200]}")
    sb.clear_workspace()


def start_replay_sandbox(backend: SandboxBackend, limits: SandboxLimits | None = None) -> Sandbox:
    """A long-lived sandbox that validate_batch replays command-running solutions in (reset between tasks)."""
    return backend.start(WorkspaceSpec(), limits=limits or VALIDATION_LIMITS)


# the sandboxes started for one task's replay, while it runs (stop_task_sandboxes)
_TASK_SANDBOXES: set[Sandbox] = set()


def stop_task_sandboxes() -> None:
    """Stop the sandboxes started for one task's replay that are running now (a dying worker's cleanup)."""
    for sb in list(_TASK_SANDBOXES):
        try:
            sb.stop()
        except Exception:  # noqa: BLE001, S110 - best effort, on the way out: the reaper removes what a dying worker leaves
            pass
        _TASK_SANDBOXES.discard(sb)


def _replay_states(cand: Candidate, backend: SandboxBackend, limits: SandboxLimits, dest: Path,
                   replay: Sandbox | None = None) -> _States:
    """Replay the partial and the reference solutions and leave each resulting workspace (and the untouched
    one) under `dest` (`noop`, `partial`, `oracle`). Raises SandboxError on infrastructure failure.

    The workspace is generated once (`dest/noop`). Solutions that run no command (most: their steps are
    reads and writes of files) are replayed as host file operations, each on its own copy of the untouched
    workspace. The others run in a sandbox — `replay` (a long-lived one, reset to a fresh sandbox's state
    after each task) when it mounts the workspace where the task does, else one started for the task — whose
    workspace is reset to the untouched one before each solution and moved out after it. The grading of
    every state always runs in the grader sandbox."""
    task = cand.task
    pristine = dest / "noop"
    materialize(task.workspace, pristine)
    partial = partial_task(cand)
    ctx = EpisodeContext(deadline=time.monotonic() + task.timeout_seconds, exec_timeout=limits.exec_timeout_s)
    partial_cmds = _ran_commands(partial.reference.steps)
    oracle_cmds = _ran_commands(task.reference.steps if task.reference else [])
    if not partial_cmds and not oracle_cmds:
        noop_run = NoopAgent().run(task, _FileOnlyWorkspace(pristine, task.workspace.mount_dir, limits), ctx)
        partial_run = _file_only_replay(OracleAgent(), partial, pristine, dest / "partial", ctx, limits)
        oracle_run = _file_only_replay(OracleAgent(), task, pristine, dest / "oracle", ctx, limits)
        st = _States(noop_run.transcript, partial_run.transcript, oracle_run.transcript,
                     partial_run.tool_errors, oracle_run.tool_errors)
    else:
        reuse = replay is not None and replay.mount_dir == task.workspace.mount_dir and replay.limits == limits
        if reuse:
            try:
                st = _replay_in(replay, cand, partial, pristine, dest, ctx, reuse=True)
            except SandboxError as exc:  # the shared sandbox broke: the caller restarts it (see ReplaySandboxError)
                raise ReplaySandboxError(str(exc)) from exc
        else:
            sb = backend.start(task.workspace, limits=limits, prebuilt=pristine)
            _TASK_SANDBOXES.add(sb)
            try:
                st = _replay_in(sb, cand, partial, pristine, dest, ctx, reuse=False)
            finally:
                _TASK_SANDBOXES.discard(sb)
    st.cheat_transcripts = replay_cheats(task, pristine, dest / "oracle", dest, ctx, limits)
    return st


def _replay_in(sb: Sandbox, cand: Candidate, partial: Task, pristine: Path, dest: Path, ctx: EpisodeContext,
               reuse: bool) -> _States:
    task = cand.task
    partial_cmds = _ran_commands(partial.reference.steps)
    oracle_cmds = _ran_commands(task.reference.steps if task.reference else [])
    if reuse:
        sb.import_tree(pristine)
    try:
        noop_run = NoopAgent().run(task, sb, ctx)
        partial_run = OracleAgent().run(partial, sb, ctx)
        if partial_cmds:  # only commands can leave processes behind
            sb.kill_processes()
        sb.take_workspace(dest / "partial")
        # back to the untouched workspace: it is empty now; copy the untouched files back in
        sb.import_tree(pristine)
        oracle_run = OracleAgent().run(task, sb, ctx)
        if oracle_cmds:
            sb.kill_processes()
        sb.take_workspace(dest / "oracle")
    finally:
        if reuse:
            _reset_replay_sandbox(sb)
        else:
            sb.stop()
    return _States(noop_run.transcript, partial_run.transcript, oracle_run.transcript,
                   partial_run.tool_errors, oracle_run.tool_errors)


def validate_batch(
    cands: list[Candidate], backend: SandboxBackend, grader: Sandbox, limits: SandboxLimits | None = None,
    replay: Sandbox | None = None,
) -> list[Validation]:
    """Validate candidates: each is replayed (see _replay_states; `replay`: a long-lived sandbox from
    start_replay_sandbox for the solutions that run commands); all their states are then graded by ONE
    python process in `grader`, a long-lived sandbox whose workspace holds the states."""
    limits = limits or VALIDATION_LIMITS
    # The states are made on the host, one task at a time: right in the grader's workspace when it is a host
    # directory (bwrap, Docker and local sandboxes), else in a temp dir, then copied in. A check may run a script
    # that leaves a process behind: none may live on into this batch, where it could change the states being made
    # and graded.
    grader.kill_processes()
    direct = getattr(grader, "host_path", None) and grader.host_path(grader.workdir)
    if direct is not None:
        stage = direct
    else:
        stage = Path(tempfile.mkdtemp(prefix="clawgym-states-", dir=os.environ.get("CLAWGYM_SANDBOX_TMP")))
    out: list[Validation | None] = [None] * len(cands)
    items: list[tuple[str, list, str]] = []
    owners: list[int] = []
    states: dict[int, _States] = {}
    try:
        for i, cand in enumerate(cands):
            check = cand.task.verifier.code
            if check is None or check.kind not in ("python", "checks"):
                out[i] = Validation(False, "no_code_check", "synthesized tasks need a python or checks code check")
                continue
            try:
                st = _replay_states(cand, backend, limits, stage / str(i), replay)
                if direct is None:
                    grader.import_tree(stage / str(i), str(i))
            except ReplaySandboxError:
                raise
            except SandboxError as exc:
                out[i] = Validation(False, "infra_error", str(exc))
                if direct is not None:  # its space in the grader's capped workspace is the later tasks'
                    shutil.rmtree(stage / str(i), ignore_errors=True)
                continue
            finally:
                if direct is None:
                    shutil.rmtree(stage / str(i), ignore_errors=True)
            states[i] = st
            base = f"{grader.workdir}/{i}"
            how = grader_of(check, cand.task, grader)  # one object for every state: run_python_batch writes it once
            for transcript, state in ((st.noop_transcript, "noop"), (st.partial_transcript, "partial"),
                                      (st.oracle_transcript, "oracle"),
                                      *((t, state_name(c)) for c, t in st.cheat_transcripts.items())):
                items.append((how, transcript, f"{base}/{state}"))
                owners.append(i)
        if items:
            timeout = max(c.task.verifier.code.timeout_seconds for c in cands if c.task.verifier.code)
            results = run_python_batch(grader, items, timeout + 2.0 * len(items))
            by_owner: dict[int, list] = {}
            for owner, res in zip(owners, results, strict=True):
                by_owner.setdefault(owner, []).append(res)
            for i, (noop_r, partial_r, oracle_r, *cheat_rs) in by_owner.items():
                spec = cands[i].task.verifier
                st = states[i]
                cheats = {c: combine(spec, r) for c, r in zip(st.cheat_transcripts, cheat_rs, strict=True)}
                out[i] = judge(combine(spec, oracle_r), st.oracle_errors, combine(spec, noop_r),
                               combine(spec, partial_r), st.partial_errors, cheats, guard_checks(cands[i].task))
    finally:
        if direct is None:
            shutil.rmtree(stage, ignore_errors=True)
        grader.clear_workspace()
    return [v if v is not None else Validation(False, "infra_error", "not graded") for v in out]


def start_grader(backend: SandboxBackend, limits: SandboxLimits | None = None) -> Sandbox:
    """The long-lived sandbox validate_batch grades in."""
    return backend.start(WorkspaceSpec(), limits=limits or VALIDATION_LIMITS)


def validate_candidate(cand: Candidate, backend: SandboxBackend, limits: SandboxLimits | None = None) -> Validation:
    """Validate one candidate (a grader sandbox just for it; batch with validate_batch for speed)."""
    try:
        grader = start_grader(backend, limits)
    except SandboxError as exc:
        return Validation(False, "infra_error", f"grader start: {exc}")
    try:
        return validate_batch([cand], backend, grader, limits)[0]
    finally:
        grader.stop()


def validate_candidate_episodes(cand: Candidate, backend: SandboxBackend,
                                limits: SandboxLimits | None = None) -> Validation:
    """The same rules over full rollout episodes (slower; the reference semantics): the reference, the no-op,
    the partial solution, and each cheat (its outputs: what the reference episode's final workspace holds new
    or changed)."""
    from clawgym.workspace.materialize import extract_snapshot

    options = RolloutOptions(limits=limits or VALIDATION_LIMITS)
    with tempfile.TemporaryDirectory(prefix="clawgym-validate-") as tmp:
        run_dir = Path(tmp)
        runs = []
        for task, agent in ((cand.task, OracleAgent()), (cand.task, NoopAgent()), (partial_task(cand), OracleAgent())):
            t = run_episode(task, 0, agent, backend, options, run_dir=run_dir / f"run{len(runs)}")
            if t.status == "infra_error":
                return Validation(False, "infra_error", t.error.message if t.error else "?")
            runs.append(t)
        oracle, noop, part = runs
        cheats: dict[str, Verdict] = {}
        if oracle.workspace_snapshot:
            pristine, solved = run_dir / "pristine", run_dir / "solved"
            materialize(cand.task.workspace, pristine)
            extract_snapshot(run_dir / "run0" / oracle.workspace_snapshot, solved)
            outputs = output_paths(pristine, solved)
            for cheat in CHEATS if outputs else ():
                t = run_episode(cheat_task(cand.task, cheat, outputs, pristine), 0, OracleAgent(), backend,
                                dataclasses.replace(options, keep_workspaces=False))
                if t.status == "infra_error":
                    return Validation(False, "infra_error", t.error.message if t.error else "?")
                cheats[cheat] = t.verdict
    return judge(oracle.verdict, oracle.tool_errors, noop.verdict, part.verdict, part.tool_errors, cheats,
                 guard_checks(cand.task))
