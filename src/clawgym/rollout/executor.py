"""The executor seam: where an episode attempt runs.

A rollout's driver (:func:`clawgym.rollout.runner.run_rollout`) decides *what* runs: which episodes are left,
when an infrastructure error is retried, what is appended to `trajectories.jsonl`. An executor decides *where*
one attempt runs and hands back its :class:`Attempt`:

* :class:`LocalExecutor` (the default): a thread pool on this host, the sandboxes started here;
* :class:`clawgym.cluster.ray_executor.RayExecutor`: Ray tasks placed on the nodes of a cluster by their
  sandbox slots (imported only when asked for, so `local` never needs Ray).

Both return a `concurrent.futures.Future` per attempt, so the driver's loop is the same for both. An executor
never writes to the run directory itself: what a remote attempt produced (its kept workspace, its log lines)
comes back in the :class:`Attempt` and the driver writes it, so there is one writer whatever the executor.
"""

from __future__ import annotations

import socket
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym.core.errors import ClawgymError

if TYPE_CHECKING:
    from clawgym.agent.base import Agent
    from clawgym.core.records import Task, Trajectory
    from clawgym.rollout.runner import RolloutOptions, _LiveSandboxes
    from clawgym.sandbox.base import SandboxBackend

EXECUTORS = ("local", "ray")


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


class Executor(ABC):
    """Runs episode attempts somewhere. Used as a context manager around one or more rollouts (`train rl` keeps
    one for all its iterations): entering connects (and checks the nodes), leaving disconnects."""

    name: str = ""

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


def make_executor(name: str, *, jobs: int = 1, ray_address: str | None = None, sandbox: str | None = None) -> Executor:
    """An executor by name: `local` (a thread pool of `jobs`) or `ray` (the cluster at `ray_address`, else
    Ray's own default: $RAY_ADDRESS, a cluster already running here, else a local instance of `jobs` sandbox
    slots started for the run). `sandbox` is the backend every Ray node must have working."""
    if name == "local":
        if ray_address:
            raise ClawgymError("--ray-address needs --executor ray")
        return LocalExecutor(jobs)
    if name == "ray":
        from clawgym.cluster.ray_executor import RayExecutor

        return RayExecutor(address=ray_address, local_slots=jobs, sandbox=sandbox or "auto")
    raise ClawgymError(f"--executor: unknown {name!r}; choose {' or '.join(EXECUTORS)}")


EXECUTOR_HELP = ("Where episodes run: local (a thread pool here, -j at once) or ray (a Ray cluster's nodes, each running "
                 "at most its clawgym_slots sandboxes at once).")
RAY_ADDRESS_HELP = ("--executor ray: the cluster to use (default: $RAY_ADDRESS, else a cluster running on this host, "
                    "else a local Ray instance of -j slots for the run).")
