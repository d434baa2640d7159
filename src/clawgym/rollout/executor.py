"""The executor seam: where work runs.

A rollout's driver (:func:`clawgym.rollout.runner.run_rollout`) decides *what* runs: which episodes are left,
when an infrastructure error is retried, what is appended to `trajectories.jsonl`. An executor decides *where*
one attempt runs and hands back its :class:`Attempt`:

* :class:`LocalExecutor` (the default): a thread pool on this host, the sandboxes started here;
* `ray` (:class:`clawgym.cluster.ray_executor.RayExecutor`): Ray tasks placed on the nodes of a cluster by
  their sandbox slots;
* any other found by name in :data:`EXECUTORS` (a registry: built in lazily, or declared by another
  distribution in the entry point group ``clawgym.executors``), so asking for `local` never imports Ray.

Both return a `concurrent.futures.Future` per attempt, so the driver's loop is the same for both. An executor
never writes to the run directory itself: what a remote attempt produced (its kept workspace, its log lines)
comes back in the :class:`Attempt` and the driver writes it, so there is one writer whatever the executor.

Besides episodes, an executor runs work it is handed and knows nothing about (synthesis validation): a pool of
workers that each run an `init` once and then the calls submitted (:meth:`Executor.worker_pool`), and single
calls that need a sandbox backend of wherever they run (:meth:`Executor.sandbox_calls`). The work is named by
importable callables (``"module:function"`` strings, or functions importable by that name), so it can be shipped
to another host's workers, and the executor's package never imports the package the work comes from.
"""

from __future__ import annotations

import socket
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym.core.errors import ClawgymError
from clawgym.core.registry import Registry, UnknownPlugin, load_object

if TYPE_CHECKING:
    from clawgym.agent.base import Agent
    from clawgym.core.records import Task, Trajectory
    from clawgym.rollout.runner import RolloutOptions, _LiveSandboxes
    from clawgym.sandbox.base import SandboxBackend

Work = str | Callable[..., Any]  # "module:function", or a function importable by that name


def work_spec(fn: Work) -> str:
    """The ``"module:function"`` name of `fn` (a string is checked and kept): what another host's worker imports
    to run it. A lambda, a closure or a bound method has no such name and is refused (TypeError)."""
    if isinstance(fn, str):
        if ":" not in fn:
            raise TypeError(f"work must be named 'module:function', not {fn!r}")
        return fn
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        raise TypeError(f"work must be an importable function, not {fn!r}")
    spec = f"{module}:{qualname}"
    try:
        same = load_object(spec) is fn
    except (ImportError, AttributeError):
        same = False
    if not same:
        raise TypeError(f"work must be importable by its name: {spec} is not {fn!r}")
    return spec


def load_work(fn: Work) -> Callable[..., Any]:
    """The callable `fn` names (a callable is returned as it is)."""
    return load_object(work_spec(fn)) if isinstance(fn, str) else fn


class WorkLost(ClawgymError):
    """Work handed to an executor could not be run anywhere: every place it was sent to was lost (nodes that
    died), or none is left. Infrastructure, never the work's own failure."""


@dataclass
class Attempt:
    """One attempt of an episode, as it came back from wherever it ran."""

    trajectory: Trajectory
    node: str | None = None  # which node ran it (the host name for the local executor)
    log: list[str] = field(default_factory=list)  # run.log lines to write (remote attempts; local ones log directly)
    files: dict[str, bytes] = field(default_factory=dict)  # run-dir relative path -> bytes (the kept workspace)


@dataclass
class EpisodeRun:
    """What an executor needs to run the attempts of one `run_rollout`."""

    agent_factory: Callable[[], Agent]
    backend: SandboxBackend
    options: RolloutOptions
    run_dir: Path
    log: Callable[[str], None]
    live: _LiveSandboxes


class ProcessWorkerPool(ProcessPoolExecutor):
    """The workers of :meth:`Executor.worker_pool` on this host: child processes, `size` of them."""

    def __init__(self, size: int, init: Work, initargs: tuple) -> None:
        self.size = max(1, size)
        super().__init__(max_workers=self.size, initializer=load_work(init), initargs=initargs)


class LocalSandboxCalls:
    """:meth:`Executor.sandbox_calls` on this host: `fn(*args, backend)` in the calling thread, with one backend
    of `sandbox` made for the calls (closed by :meth:`close`); `executor` names the executor in describe()."""

    def __init__(self, fn: Work, sandbox: str, executor: str = "local") -> None:
        self.fn = load_work(fn)
        self.sandbox = sandbox
        self.executor = executor
        self._backend: SandboxBackend | None = None
        self._lock = threading.Lock()
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        from clawgym.sandbox import get_backend

        with self._lock:
            if self._backend is None:
                self._backend = get_backend(self.sandbox)
            self.calls += 1
        return self.fn(*args, self._backend)

    def describe(self) -> dict[str, Any]:
        return {"name": self.executor, "by_node": {socket.gethostname(): self.calls}, "lost": []}

    def cancel(self) -> None:
        return None

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()


class Executor(ABC):
    """Runs episode attempts somewhere. Used as a context manager around one or more rollouts (`train rl` keeps
    one for all its iterations): entering connects (and checks the nodes), leaving disconnects.

    A third-party executor subclasses this and is declared in the entry point group ``clawgym.executors``
    (``--executor NAME`` then finds it); :meth:`create` is how the CLI makes it."""

    name: str = ""
    # whether the workers of worker_pool are child processes of this one, on this host (they may watch it and
    # use its directories); False where they run elsewhere (another node)
    workers_here: bool = True

    @classmethod
    def create(cls, *, jobs: int = 1, address: str | None = None, sandbox: str | None = None) -> Executor:
        """The executor of `--executor NAME -j JOBS [--ray-address ADDRESS]` for a run on `sandbox` backends.
        The default takes `jobs` and no address; an executor that needs more overrides this."""
        if address:
            raise ClawgymError("--ray-address needs --executor ray")
        return cls(jobs)  # type: ignore[call-arg]

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release what entering took (a Ray connection, a Ray instance started for the run)."""
        return None

    @abstractmethod
    def begin(self, run: EpisodeRun) -> dict[str, Any]:
        """Start a rollout; return what `run.json` records about the executor (empty: nothing)."""

    @abstractmethod
    def capacity(self) -> int:
        """How many attempts may be in flight at once now."""

    @abstractmethod
    def submit(self, task: Task, sample: int, attempt: int) -> Future[Attempt]:
        """Run one attempt. The future never fails for the episode's own problems: a failure of wherever it
        ran comes back as an `infra_error` trajectory."""

    @abstractmethod
    def interrupt(self) -> None:
        """Stop every running sandbox now (Ctrl-C); may be called again while attempts end."""

    @abstractmethod
    def end(self, wait: bool) -> None:
        """The rollout is over (`wait`: let running attempts finish first)."""

    def gateway_host(self) -> str:
        """The address workers reach this host's gateway at (127.0.0.1 unless workers run elsewhere)."""
        return "127.0.0.1"

    # -- work handed to the executor ---------------------------------------------------------------------------
    def worker_pool(self, init: Work, initargs: tuple = (), stop: Work | None = None, *, jobs: int = 1) -> Any:
        """Workers that each run `init(*initargs)` once, then the calls submitted to them: a context manager
        whose `submit(fn, *args)` returns a Future of `fn(*args)` run by one of them (`fn` importable by name),
        and whose `size` is how many workers there are. `stop()` runs in each worker at a normal end where
        workers outlive the pool (remote ones); processes of this host clean up as they exit.

        The default: `jobs` processes of this host (a ProcessPoolExecutor)."""
        del stop  # the processes end with the pool
        return ProcessWorkerPool(jobs, init, initargs)

    def sandbox_calls(self, fn: Work, sandbox: str, what: str = "call") -> Any:
        """A callable running `fn(*args, backend)` where this executor runs work, `backend` a `sandbox` backend
        of that place, one sandbox slot each; it raises :class:`WorkLost` when no place could run it. It has
        `describe()` (the executor, calls per node `by_node`, places `lost`), `cancel()` (stop every call in
        flight: Ctrl-C) and `close()`. `what` names the work in errors.

        The default: in the calling thread, with a backend of this host."""
        del what
        return LocalSandboxCalls(fn, sandbox, self.name)


class LocalExecutor(Executor):
    """Attempts in a thread pool of `jobs` threads on this host: the executor every run had before Ray."""

    name = "local"

    def __init__(self, jobs: int = 1):
        self.jobs = max(1, jobs)
        self._pool: ThreadPoolExecutor | None = None
        self._run: EpisodeRun | None = None
        self._host = socket.gethostname()

    def begin(self, run: EpisodeRun) -> dict[str, Any]:
        self.jobs = max(1, run.options.jobs)
        self._run = run
        self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="episode")
        return {}

    def capacity(self) -> int:
        return self.jobs * 2  # a few queued beyond the running ones, so a thread never waits for the driver

    def submit(self, task: Task, sample: int, attempt: int) -> Future[Attempt]:
        from clawgym.rollout.runner import run_episode

        run = self._run
        assert run is not None and self._pool is not None, "begin() first"

        def one() -> Attempt:
            traj = run_episode(task, sample, run.agent_factory(), run.backend, run.options, run.run_dir, run.log,
                               run.live, attempt)
            return Attempt(traj, node=self._host)

        return self._pool.submit(one)

    def interrupt(self) -> None:
        if self._run is not None:
            self._run.live.stop_all()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def end(self, wait: bool) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait)
        self._pool = None
        self._run = None


def _check_executor(name: str, obj: Any) -> None:
    if not (isinstance(obj, type) and issubclass(obj, Executor)):
        raise TypeError(f"executor {name!r} must be a subclass of clawgym.rollout.executor.Executor, not {obj!r}")


EXECUTORS: Registry[type[Executor]] = Registry("executor", "clawgym.executors", {
    "local": "clawgym.rollout.executor:LocalExecutor",
    "ray": "clawgym.cluster.ray_executor:RayExecutor",  # imports Ray: only when asked for
}, check=_check_executor)


def make_executor(name: str, *, jobs: int = 1, ray_address: str | None = None, sandbox: str | None = None) -> Executor:
    """An executor by name (:data:`EXECUTORS`): `local` (a thread pool of `jobs`), `ray` (the cluster at
    `ray_address`, else Ray's own default: $RAY_ADDRESS, a cluster already running here, else a local Ray
    instance of `jobs` sandbox slots started for the run), or a third party's. `sandbox` is the backend every
    place the executor runs work must have working."""
    try:
        cls = EXECUTORS.get(name)
    except UnknownPlugin:
        raise ClawgymError(f"--executor: unknown {name!r}; choose {' or '.join(EXECUTORS.names())}") from None
    return cls.create(jobs=jobs, address=ray_address, sandbox=sandbox)


EXECUTOR_HELP = ("Where episodes run: local (a thread pool here, -j at once) or ray (a Ray cluster's nodes, each running "
                 "at most its clawgym_slots sandboxes at once).")
RAY_ADDRESS_HELP = ("--executor ray: the cluster to use (default: $RAY_ADDRESS, else a cluster running on this host, "
                    "else a local Ray instance of -j slots for the run).")
