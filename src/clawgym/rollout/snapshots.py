"""Snapshots of an episode's workspace after each step that can change it, for progress rewards
(:mod:`clawgym.verify.progress` grades them after the episode).

:class:`StateRecorder` hands the agent a sandbox (:class:`RecordingSandbox`) that is the episode's own, except
that every call that can change the workspace (`write_file`: the write and edit tools; `exec`; the trusted
copies) is followed by a snapshot of the whole workspace into a private host directory the sandbox never sees.
A snapshot equal to a state already kept (a command that only read, an edit undone) is dropped and names that
state. Then :func:`episode_progress` attributes each change to the step (model call, or the oracle's tool call)
whose tool call made it, grades the states in the sandbox after the episode and returns the step rewards.

What is kept, and why the whole workspace: a check may read any file (a check that nothing else changed, one
that lists a folder, a test suite that imports the agent's modules), so a snapshot that kept only the files
the checks name would grade some states wrong. The cost is bounded instead: a state larger than
`max_state_bytes`, or states together past `max_total_bytes`, end the recording, and the trajectory falls back
to outcome credit, which its progress metadata says. The snapshots are removed when the episode ends.

Which step made a change: the transcript says which tool calls each step made (the i-th assistant message is
step i, for the LLM agent and for the oracle), and each change is matched, in order, to the first later tool
call of its kind and target (a write or an edit of that path; an exec of that command), an edit that failed
being passed over when a later one matches. A change no tool call explains (a black-box agent's own runtime)
goes to the step of the next explained change, else the last step: never to an earlier step than a change
before it, so that each step's end state is well defined. Changes made after the last call by processes the
agent left behind are part of the final state, graded on the last step.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shlex
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clawgym.agent.tools import TOOL_ALIASES
from clawgym.core.records import Task
from clawgym.sandbox.base import Sandbox
from clawgym.verify.progress import STEP_KEY, Progress, grade_states, step_rewards

MAX_STATE_BYTES = 16 * 1024 * 1024  # one workspace state
MAX_TOTAL_BYTES = 64 * 1024 * 1024  # the distinct states of one episode together


def tree_digest(root: Path) -> str:
    """A digest of a snapshot: every entry's path, kind, permission bits and content (a link's target), in
    sorted order, links never followed."""
    h = hashlib.sha256()

    def walk(d: Path, rel: str) -> None:
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            path = f"{rel}/{e.name}" if rel else e.name
            st = e.stat(follow_symlinks=False)
            h.update(path.encode("utf-8", "surrogateescape") + b"\0")
            if stat.S_ISLNK(st.st_mode):
                h.update(b"L" + os.readlink(e.path).encode("utf-8", "surrogateescape") + b"\0")
            elif stat.S_ISDIR(st.st_mode):
                h.update(b"D%o\0" % stat.S_IMODE(st.st_mode))
                walk(Path(e.path), path)
            else:
                h.update(b"F%o %d\0" % (stat.S_IMODE(st.st_mode), st.st_size))
                with open(e.path, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)

    walk(root, "")
    return h.hexdigest()


class StateRecorder:
    """The distinct workspace states of one episode, kept as host directories (index 0: the untouched one),
    and the changes the agent made, in order: (kind, target, state after it)."""

    def __init__(self, sandbox: Sandbox, *, max_state_bytes: int = MAX_STATE_BYTES,
                 max_total_bytes: int = MAX_TOTAL_BYTES):
        self.inner = sandbox
        self.max_state_bytes = max_state_bytes
        self.max_total_bytes = max_total_bytes
        self.root = Path(tempfile.mkdtemp(prefix="clawgym-progress-", dir=os.environ.get("CLAWGYM_SANDBOX_TMP")))
        self.states: list[Path] = []
        self._index: dict[str, int] = {}  # digest -> state
        self.changes: list[tuple[str, str, int]] = []
        self.final: int | None = None
        self.failed: str | None = None
        self.bytes = 0
        self.seconds = 0.0
        self._lock = threading.Lock()
        self.sandbox = RecordingSandbox(sandbox, self)
        self.take()

    def take(self) -> int | None:
        """Snapshot the workspace now; the index of its state (an earlier one when nothing differs), None once
        the recording has failed."""
        with self._lock:
            if self.failed is not None:
                return None
            t0 = time.monotonic()
            dest = self.root / str(len(self.states))
            try:
                got = self.inner.snapshot(dest, max_bytes=self.max_state_bytes)
                if got.get("truncated"):
                    self.failed = f"a workspace state is larger than the snapshot cap ({self.max_state_bytes} bytes)"
                elif got.get("errors"):
                    self.failed = f"{got['errors']} file(s) of a workspace state could not be copied"
                else:
                    digest = tree_digest(dest)
                    if digest in self._index:
                        shutil.rmtree(dest, ignore_errors=True)
                        return self._index[digest]
                    self.bytes += int(got.get("bytes", 0))
                    if self.bytes > self.max_total_bytes:
                        self.failed = f"the workspace states passed the snapshot budget ({self.max_total_bytes} bytes)"
                    else:
                        self._index[digest] = len(self.states)
                        self.states.append(dest)
                        return len(self.states) - 1
            except Exception as exc:  # noqa: BLE001 - a failed snapshot costs the progress rewards, not the episode
                self.failed = f"a snapshot failed: {type(exc).__name__}: {exc}"
            finally:
                self.seconds += time.monotonic() - t0
            shutil.rmtree(dest, ignore_errors=True)
            return None

    def note(self, kind: str, target: str) -> None:
        state = self.take()
        if state is not None:
            self.changes.append((kind, target, state))

    def take_final(self) -> None:
        """Snapshot the workspace the verdict grades (after the agent's processes ended)."""
        self.final = self.take()

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class RecordingSandbox:
    """The episode's sandbox as the agent gets it: every call passes through, and each call that can change
    the workspace is followed by a snapshot (:meth:`StateRecorder.note`)."""

    def __init__(self, inner: Sandbox, recorder: StateRecorder):
        self._inner = inner
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def write_file(self, path: str, data: str | bytes, mode: int | None = None) -> None:
        try:
            self._inner.write_file(path, data, mode)
        finally:
            self._recorder.note("write", _norm(self._inner, path) or path)

    def exec(self, command: str | Sequence[str], **kwargs: Any) -> Any:
        try:
            return self._inner.exec(command, **kwargs)
        finally:
            self._recorder.note("exec", command if isinstance(command, str) else shlex.join(command))

    def _other(self, fn: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self._inner, fn)(*args, **kwargs)
        finally:
            self._recorder.note("other", fn)

    def copy_in(self, *args: Any, **kwargs: Any) -> Any:
        return self._other("copy_in", *args, **kwargs)

    def import_tree(self, *args: Any, **kwargs: Any) -> Any:
        return self._other("import_tree", *args, **kwargs)

    def clear_workspace(self) -> Any:
        return self._other("clear_workspace")

    def take_workspace(self, dest: Path) -> Any:
        return self._other("take_workspace", dest)


def _norm(sandbox: Sandbox, path: str) -> str | None:
    """A tool's path argument as the tools resolve it: relative to the workspace (None: outside it)."""
    if not isinstance(path, str) or not path.strip():
        return None
    if path.startswith("/"):
        norm = posixpath.normpath(path)
        for base in {sandbox.mount_dir, sandbox.workdir}:
            if norm == base or norm.startswith(base.rstrip("/") + "/"):
                return posixpath.relpath(norm, base)
        return None
    return posixpath.normpath(path)


def transcript_calls(transcript: list[dict[str, Any]], sandbox: Sandbox) -> list[tuple[int, str, str, bool]]:
    """(step, kind, target, failed) of each tool call of the transcript that can change the workspace, in order;
    step i is the i-th assistant message."""
    errors: dict[str, bool] = {}
    for ev in transcript:
        msg = ev.get("message") or {}
        if msg.get("role") == "toolResult":
            errors[str(msg.get("toolCallId"))] = bool(msg.get("isError"))
    calls: list[tuple[int, str, str, bool]] = []
    step = -1
    for ev in transcript:
        msg = ev.get("message") or {}
        if msg.get("role") != "assistant":
            continue
        step += 1
        for item in msg.get("content") or []:
            if not isinstance(item, dict) or item.get("type") != "toolCall":
                continue
            name = TOOL_ALIASES.get(str(item.get("name")), str(item.get("name")))
            args = item.get("arguments") if isinstance(item.get("arguments"), dict) else {}
            failed = errors.get(str(item.get("id")), False)
            if name in ("write", "edit"):
                calls.append((step, "write", _norm(sandbox, args.get("path")) or "", failed))
            elif name == "exec" and isinstance(args.get("command"), str):
                calls.append((step, "exec", args["command"], failed))
    return calls


def attribute(changes: Sequence[tuple[str, str, int]], calls: Sequence[tuple[int, str, str, bool]],
              n_steps: int) -> list[int]:
    """The step of each change (see the module docstring), never decreasing, each in [0, n_steps)."""
    steps: list[int | None] = []
    at = 0
    for kind, target, _ in changes:
        found = None
        matching = [j for j in range(at, len(calls)) if calls[j][1] == kind and calls[j][2] == target]
        # a write or an edit that failed wrote nothing (an exec that failed still ran)
        ok = [j for j in matching if kind != "write" or not calls[j][3]]
        if ok or matching:
            found = (ok or matching)[0]
            at = found + 1
        steps.append(calls[found][0] if found is not None else None)
    last = n_steps - 1
    out: list[int] = [0] * len(steps)
    following = last
    for i in range(len(steps) - 1, -1, -1):  # an unexplained change: the step of the next explained one
        following = min(steps[i], last) if steps[i] is not None else following
        out[i] = following
    for i in range(1, len(out)):  # never before a change made before it
        out[i] = max(out[i], out[i - 1])
    return out


def episode_progress(task: Task, recorder: StateRecorder, sandbox: Sandbox, transcript: list[dict[str, Any]],
                     n_steps: int, final_score: float | None) -> Progress:
    """The progress rewards of a finished episode: its changes attributed to its `n_steps` steps, the states
    at the end of each step graded in `sandbox` (after the verdict: see :func:`clawgym.verify.progress.grade_states`),
    the final state's potential being the verdict's code score `final_score` when given."""
    out = Progress(snapshot_bytes=recorder.bytes, snapshot_s=recorder.seconds)
    if recorder.failed is not None:
        out.fallback = recorder.failed
        return out
    if recorder.final is None:
        out.fallback = "the final workspace was not recorded"
        return out
    if n_steps == 0:
        out.fallback = "the trajectory has no steps to credit"
        return out
    step_of = attribute(recorder.changes, transcript_calls(transcript, sandbox), n_steps)
    end: list[int] = []
    state = 0
    k = 0
    for t in range(n_steps):
        while k < len(step_of) and step_of[k] <= t:
            state = recorder.changes[k][2]
            k += 1
        end.append(state)
    end[-1] = recorder.final  # what processes left behind after the last call counts on the last step
    needed = sorted({0, *end} - ({recorder.final} if final_score is not None else set()))
    t0 = time.monotonic()
    results = grade_states(task, sandbox, [recorder.states[i] for i in needed])
    out.grade_s = time.monotonic() - t0
    potential: dict[int, float] = {}
    for i, res in zip(needed, results, strict=True):
        if res.status != "scored":
            out.fallback = f"state {i} could not be graded: {res.error}"
            return out
        potential[i] = res.score
    if final_score is not None:
        potential[recorder.final] = final_score
    pots = [potential.get(i, 0.0) for i in range(len(recorder.states))]
    out.rewards, out.potentials = step_rewards(end, pots)
    out.states = len(needed)
    return out


def with_step_rewards(steps: list[dict[str, Any]], rewards: Sequence[float]) -> list[dict[str, Any]]:
    """The trajectory's steps, each with its progress reward (`progress_reward`)."""
    return [{**s, STEP_KEY: r} for s, r in zip(steps, rewards, strict=True)]
