"""The Ray executor: episode attempts as Ray tasks on the nodes of a cluster.

* **Connection**: `address` (`--ray-address`), else Ray's own default: `$RAY_ADDRESS`, else a cluster already
  running on this host, else a local Ray instance with `local_slots` sandbox slots, started for the run and
  stopped after it.
* **Slots**: a node offers sandboxes through the custom resource `clawgym_slots`
  (`ray start --resources='{"clawgym_slots": 64}'`); every attempt asks for one slot and is pinned to the node
  the driver picked for it, so a node never runs more sandboxes than it has slots. Attempts ask for no CPU:
  the slots are the bound.
* **Node checks**: before a node gets work it runs its own `sandbox check` for the run's backend and looks for
  the driver's sandbox image; a node that fails takes no episodes. The results are in `run.json` (executor.nodes).
  Nodes that join later are checked when they appear.
* **Failures**: an attempt whose node or worker process is lost comes back as an `infra_error` trajectory (kind
  `node_lost`), which the driver retries on another node like any infrastructure error (Ray's own retries are
  off, so an attempt runs once). The driver alone appends records, so every episode is recorded exactly once.
* **Interrupt**: Ctrl-C cancels every attempt in flight (a KeyboardInterrupt in the worker stops its sandbox),
  then, if they have not ended a few seconds later, kills their worker processes (their sandboxes die with them:
  bwrap `--die-with-parent`, Docker containers end with their owner's attach).
* **Work handed over** (synthesis validation): actors running an importable `init` once and then the calls sent
  to them (:class:`RayWorkerPool`), and single calls with the node's sandbox backend (:class:`RaySandboxCalls`),
  on the same sandbox slots. What the work is, this module never knows (it imports nothing of synthesis).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from clawgym.cluster import SLOT_RESOURCE
from clawgym.core.errors import ClawgymError
from clawgym.core.records import Task
from clawgym.rollout.executor import Attempt, EpisodeRun, Executor, Work, WorkLost, work_spec

try:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ClawgymError("--executor ray needs Ray: pip install 'clawgym[ray]'") from exc

from clawgym.cluster import worker

CHECK_TIMEOUT_S = 120.0  # a node's first task starts a worker process: slow on a loaded machine
REFRESH_S = 5.0  # how often the driver looks for nodes that joined or died
FORCE_AFTER_S = 5.0  # after an interrupt, how long cancelled attempts get before their workers are killed
LOCAL_OBJECT_STORE = 256 * 1024**2  # object store of a local instance started for the run

_check = ray.remote(worker.check_node)
_attempt = ray.remote(worker.run_attempt)
_call_with_backend = ray.remote(worker.call_with_backend)


@dataclass
class NodeState:
    node_id: str
    slots: int
    info: dict[str, Any] = field(default_factory=dict)  # the node's check (clawgym.cluster.worker.check_node)
    ok: bool = False
    alive: bool = True
    running: int = 0

    @property
    def usable(self) -> bool:
        return self.ok and self.alive

    @property
    def name(self) -> str:
        return self.info.get("node") or self.node_id[:8]


class RayExecutor(Executor):
    name = "ray"
    workers_here = False  # its workers are actors on the cluster's nodes

    @classmethod
    def create(cls, *, jobs: int = 1, address: str | None = None, sandbox: str | None = None) -> RayExecutor:
        return cls(address=address, local_slots=jobs, sandbox=sandbox or "auto")

    def __init__(self, address: str | None = None, local_slots: int = 1, sandbox: str = "auto"):
        self.address = address
        self.local_slots = max(1, local_slots)
        self.sandbox = sandbox
        self.nodes: dict[str, NodeState] = {}
        self._checking: dict[str, Any] = {}  # node id -> ref of its check
        self._lock = threading.Lock()
        self._owns_connection = False
        self._started_local = False
        self._last_refresh = 0.0
        self._refresh_now = False
        self._run: EpisodeRun | None = None
        self._payload_base: dict[str, Any] = {}
        self._inflight: dict[Any, str] = {}  # ref -> node id
        self._interrupted_at: float | None = None
        self._forced = False
        self._image: str | None = None
        self._openclaw: str | None = None  # the OpenClaw version every node must have (a run of --agent openclaw)

    # -- connection and nodes ------------------------------------------------------------------------------
    def __enter__(self) -> RayExecutor:
        self.connect()
        return self

    def connect(self) -> None:
        """Connect (or start a local instance), then check every node that offers sandbox slots."""
        from clawgym.sandbox.image import find_rootfs, recipe_id

        if not ray.is_initialized():
            quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
            if self.address or os.environ.get("RAY_ADDRESS"):
                try:
                    ray.init(address=self.address, **quiet)
                except (ConnectionError, ValueError, RuntimeError) as exc:
                    raise ClawgymError(f"cannot connect to the Ray cluster at "
                                       f"{self.address or os.environ['RAY_ADDRESS']}: {exc}") from exc
            else:
                try:  # a cluster already running on this host
                    ray.init(address="auto", **quiet)
                except (ConnectionError, ValueError, RuntimeError):
                    ray.init(num_cpus=os.cpu_count() or 1, resources={SLOT_RESOURCE: self.local_slots},
                             object_store_memory=LOCAL_OBJECT_STORE, include_dashboard=False, **quiet)
                    self._started_local = True
            self._owns_connection = True
        self._image = recipe_id() if find_rootfs() is not None and self.sandbox != "local" else None
        self._refresh(block=True)
        if not any(n.usable for n in self.nodes.values()):
            self.close()
            raise ClawgymError(self._no_nodes_message())

    def _no_nodes_message(self) -> str:
        if not self.nodes:
            return (f"no Ray node offers sandbox slots: start nodes with "
                    f"ray start --resources='{{\"{SLOT_RESOURCE}\": N}}'")
        why = "; ".join(f"{n.name}: {n.info.get('check', 'no answer to its check')}" for n in self.nodes.values())
        what = f"{self.sandbox} sandboxes" + (f" with OpenClaw {self._openclaw}" if self._openclaw else "")
        return f"no Ray node can run {what} ({why})"

    def _refresh(self, block: bool = False) -> None:
        """Mark nodes that died, check nodes that appeared, take in checks that have answered."""
        self._last_refresh = time.monotonic()
        self._refresh_now = False
        seen = set()
        for n in ray.nodes():
            nid = n["NodeID"]
            slots = int((n.get("Resources") or {}).get(SLOT_RESOURCE, 0))
            if not n.get("Alive") or slots <= 0:
                if nid in self.nodes:
                    with self._lock:
                        self.nodes[nid].alive = False
                continue
            seen.add(nid)
            if nid not in self.nodes and nid not in self._checking:
                strategy = NodeAffinitySchedulingStrategy(nid, soft=False)
                self._checking[nid] = (slots, _check.options(num_cpus=0, scheduling_strategy=strategy,
                                                             max_retries=0).remote(self.sandbox, self._image,
                                                                                          self._openclaw))
        with self._lock:
            for nid, node in self.nodes.items():
                if nid not in seen:
                    node.alive = False
        if not self._checking:
            return
        refs = {ref: nid for nid, (_, ref) in self._checking.items()}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=CHECK_TIMEOUT_S if block else 0)
        for ref in ready:
            nid = refs[ref]
            slots, _ = self._checking.pop(nid)
            try:
                info = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a node that cannot answer its check takes no work
                info = {"ok": False, "check": f"the check failed: {type(exc).__name__}: {exc}"}
            with self._lock:
                self.nodes[nid] = NodeState(nid, slots, info, ok=bool(info.get("ok")))
        if block:
            for nid, (slots, _) in list(self._checking.items()):
                self._checking.pop(nid)
                self.nodes[nid] = NodeState(nid, slots, {"ok": False, "check": "no answer to its check within "
                                                         f"{CHECK_TIMEOUT_S:.0f} s"}, ok=False)

    def require_openclaw(self, version: str) -> dict[str, Any]:
        """Check every node again, now also for OpenClaw `version` (installed, its Node.js runs): a node without
        it takes no episodes. Returns what each usable node has (node name -> version, Node.js, root)."""
        if not ray.is_initialized():
            self.connect()
        if self._openclaw != version:
            self._openclaw = version
            with self._lock:
                self.nodes.clear()
            self._checking.clear()
            self._refresh(block=True)
        usable = {n.name: {k: v for k, v in (n.info.get("openclaw") or {}).items() if k != "ok" and k != "check"}
                  for n in self.nodes.values() if n.usable}
        if not usable:
            raise ClawgymError(self._no_nodes_message())
        return usable

    def describe(self) -> dict[str, Any]:
        return {
            "name": "ray", "address": self.address or os.environ.get("RAY_ADDRESS") or
            ("local instance" if self._started_local else "auto"),
            "slot_resource": SLOT_RESOURCE,
            "nodes": [{**n.info, "slots": n.slots, "used": n.usable} for n in self.nodes.values()],
        }

    def gateway_host(self) -> str:
        """127.0.0.1 while every usable node is on this host; else this host's address on the cluster."""
        here = ray.util.get_node_ip_address()
        remote = [n for n in self.nodes.values() if n.usable and n.info.get("ip") not in (here, None)]
        return here if remote else "127.0.0.1"

    def close(self) -> None:
        if self._owns_connection and ray.is_initialized():
            ray.shutdown()  # stops the local instance when this run started it
        self._owns_connection = False

    # -- a rollout ------------------------------------------------------------------------------------------
    def begin(self, run: EpisodeRun) -> dict[str, Any]:
        from clawgym.rollout.recipe import AgentRecipe

        if not ray.is_initialized():
            self.connect()
        recipe = run.options.recipe
        if recipe is None:
            name = run.agent_factory().name
            if name not in ("noop", "oracle"):
                raise ClawgymError(f"--executor ray cannot run agent {name!r} without its recipe "
                                   "(llm, openclaw, noop and oracle run on a cluster)")
            recipe = AgentRecipe(name)
        if recipe.name == "openclaw" and self._openclaw != (recipe.openclaw or {}).get("version"):
            raise ClawgymError("the openclaw agent's nodes were not checked for its installation "
                               "(clawgym.agent.openclaw.kind.OpenClawKind.session does it)")
        if run.options.mounts:
            raise ClawgymError("--executor ray cannot bind this host's directories into remote sandboxes "
                               "(a node's worker sets up the openclaw agent's mounts itself)")
        if run.backend.name != self.sandbox and self.sandbox != "auto":
            raise ClawgymError(f"the executor checked nodes for {self.sandbox} sandboxes, the run uses "
                               f"{run.backend.name}")
        self._run = run
        self._interrupted_at, self._forced = None, False
        options = dataclasses.replace(run.options, on_attempt=None, executor=None, recipe=None, mounts=[])
        self._payload_base = {"recipe": recipe, "sandbox": run.backend.name, "options": options}
        return self.describe()

    def capacity(self) -> int:
        if self._refresh_now or time.monotonic() - self._last_refresh > REFRESH_S:
            self._refresh()
        with self._lock:
            return sum(n.slots for n in self.nodes.values() if n.usable)

    def _pick(self) -> NodeState:
        with self._lock:
            usable = [n for n in self.nodes.values() if n.usable]
            if not usable:
                raise ClawgymError(self._no_nodes_message())
            node = max(usable, key=lambda n: (n.slots - n.running, -n.running))
            node.running += 1
            return node

    def submit(self, task: Task, sample: int, attempt: int) -> Future[Attempt]:
        from clawgym.rollout.runner import infra_trajectory

        run = self._run
        assert run is not None, "begin() first"
        node = self._pick()
        payload = {**self._payload_base, "task": task.model_dump_json(), "sample": sample, "attempt": attempt}
        strategy = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
        ref = _attempt.options(num_cpus=0, resources={SLOT_RESOURCE: 1}, scheduling_strategy=strategy,
                               max_retries=0, retry_exceptions=False).remote(payload)
        self._inflight[ref] = node.node_id
        out: Future[Attempt] = Future()
        agent, sandbox = self._payload_base["recipe"].name, run.backend.name

        def done(fut: Future) -> None:
            with self._lock:
                node.running -= 1
                self._inflight.pop(ref, None)
            try:
                res = fut.result()
                from clawgym.core.records import Trajectory

                out.set_result(Attempt(Trajectory.model_validate_json(res["trajectory"]), node=res["node"],
                                       log=list(res["log"]), files=dict(res["files"])))
            except BaseException as exc:  # noqa: BLE001 - whatever lost the attempt, it is infrastructure
                self._refresh_now = True
                kind = "interrupted" if self._interrupted_at is not None else "node_lost"
                message = f"on node {node.name}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}" \
                    if str(exc).strip() else f"on node {node.name}: {type(exc).__name__}"
                traj = infra_trajectory(task, sample, agent, sandbox, kind, message)
                out.set_result(Attempt(traj, node=node.name, log=[f"{traj.id} infra_error {kind}: {message}"]))

        ref.future().add_done_callback(done)
        return out

    def interrupt(self) -> None:
        """First call: cancel every attempt in flight (a KeyboardInterrupt in its worker stops its sandbox);
        a call FORCE_AFTER_S later: kill the workers of those still running (their sandboxes die with them)."""
        if self._run is not None:
            self._run.live.closed = True
        now = time.monotonic()
        if self._interrupted_at is None:
            self._interrupted_at, force = now, False
        elif not self._forced and now - self._interrupted_at > FORCE_AFTER_S:
            self._forced = force = True
        else:
            return
        for ref in list(self._inflight):
            try:
                ray.cancel(ref, force=force)
            except Exception:  # noqa: BLE001, S110 - already finished, or its node is gone: nothing is left to cancel
                pass

    def end(self, wait: bool) -> None:  # noqa: ARG002 - the driver waited for its futures already
        self._run = None
        self._inflight.clear()

    # -- work handed over --------------------------------------------------------------------------------------
    def sandbox_calls(self, fn: Work, sandbox: str, what: str = "call") -> RaySandboxCalls:
        """`fn(*args, backend)` as Ray tasks on the nodes, one sandbox slot each (see RaySandboxCalls)."""
        if not ray.is_initialized():
            self.connect()
        if sandbox != self.sandbox and self.sandbox != "auto":
            raise ClawgymError(f"the executor checked nodes for {self.sandbox} sandboxes, the {what} uses {sandbox}")
        return RaySandboxCalls(self, work_spec(fn), sandbox, what)

    def worker_pool(self, init: Work, initargs: tuple = (), stop: Work | None = None, *,
                    jobs: int = 1) -> RayWorkerPool:  # noqa: ARG002 - one worker per slot, whatever `jobs`
        """One worker actor per sandbox slot of every usable node: the stand-in for a local process pool."""
        if not ray.is_initialized():
            self.connect()
        return RayWorkerPool([n for n in self.nodes.values() if n.usable], work_spec(init), initargs,
                             work_spec(stop) if stop is not None else None)


_worker = ray.remote(worker.Worker)


class RayWorkerPool:
    """Worker actors (:class:`clawgym.cluster.worker.Worker`) with what a `ProcessPoolExecutor` offers its user:
    a context manager whose `submit(fn, *args)` returns a Future of `fn(*args)` run by the least loaded worker.

    A call whose worker is lost (its node died) is run again on another worker: the work handed over must give
    the same result wherever it runs (synthesis chunks do: candidates come from their own seeded RNGs, and the
    driver writes the tasks in index order, so the file is the same bytes as a local run's)."""

    def __init__(self, nodes: list[NodeState], init: str, initargs: tuple, stop: str | None = None):
        self._lock = threading.Lock()
        self._load: dict[Any, int] = {}  # actor -> calls outstanding
        self.nodes: dict[Any, str] = {}
        for node in nodes:
            strategy = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
            for _ in range(node.slots):
                actor = _worker.options(num_cpus=0, resources={SLOT_RESOURCE: 1}, max_restarts=0,
                                        max_task_retries=0, scheduling_strategy=strategy).remote(init, initargs)
                self._load[actor] = 0
                self.nodes[actor] = node.name
        self.size = len(self._load)
        self._stop = stop
        self.lost: list[str] = []  # errors of the workers lost during the run

    def __enter__(self) -> RayWorkerPool:
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        actors = list(self._load)
        if exc_type is None:  # a normal end: each worker stops its sandboxes and removes its temp dir
            with contextlib.suppress(Exception):
                ray.get([a.stop.remote(self._stop) for a in actors], timeout=60)
        for a in actors:  # Ctrl-C or a failure: end them now (their sandboxes die with their processes)
            with contextlib.suppress(Exception):
                ray.kill(a)

    def submit(self, fn: Work, *args: Any) -> Future:
        out: Future = Future()
        self._send(out, work_spec(fn), args)
        return out

    def _send(self, out: Future, fn: str, args: tuple) -> None:
        with self._lock:
            if not self._load:
                out.set_exception(WorkLost("every Ray worker was lost: " + "; ".join(self.lost[-3:])))
                return
            actor = min(self._load, key=self._load.__getitem__)
            self._load[actor] += 1
        ref = actor.work.remote(fn, args)

        def done(fut: Future) -> None:
            with self._lock:
                if actor in self._load:
                    self._load[actor] -= 1
            try:
                out.set_result(fut.result())
            except ray.exceptions.RayTaskError as exc:  # the call's own error, as a local worker would raise it
                out.set_exception(exc.as_instanceof_cause())
            except BaseException as exc:  # noqa: BLE001 - the worker (or its node) is gone: run the call elsewhere
                with self._lock:
                    self._load.pop(actor, None)
                    self.lost.append(f"{self.nodes.get(actor)}: {type(exc).__name__}: {str(exc)[:200]}")
                self._send(out, fn, args)

        ref.future().add_done_callback(done)


class RaySandboxCalls:
    """`calls(*args)`: `fn(*args, backend)` as one Ray task pinned to a usable node with a free sandbox slot (as
    episode attempts are), `backend` the node's own. Called from the driver's threads, each waiting for its own
    call. The work must give the same result wherever it runs: a call whose node or worker is lost runs again on
    another node, up to MAX_LOST times, then (or when no usable node is left) it raises WorkLost."""

    MAX_LOST = 3

    def __init__(self, executor: RayExecutor, fn: str, sandbox: str, what: str = "call"):
        self.executor = executor
        self.fn = fn
        self.sandbox = sandbox
        self.what = what
        self.lost: list[str] = []
        self.by_node: dict[str, int] = {}  # node -> calls it ran
        self._cancelled = False

    def __call__(self, *args: Any) -> Any:
        ex = self.executor
        for _ in range(self.MAX_LOST + 1):
            if self._cancelled:
                raise KeyboardInterrupt(f"{self.what} interrupted")
            ex.capacity()  # takes in nodes that joined or died
            try:
                node = ex._pick()
            except ClawgymError as exc:  # no usable node left: infrastructure, as a broken local sandbox is
                raise WorkLost(str(exc)) from None
            strategy = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
            ref = _call_with_backend.options(num_cpus=0, resources={SLOT_RESOURCE: 1}, scheduling_strategy=strategy,
                                             max_retries=0, retry_exceptions=False).remote(self.fn, args, self.sandbox)
            with ex._lock:
                ex._inflight[ref] = node.node_id
            try:
                v = ray.get(ref)
                with ex._lock:
                    self.by_node[node.name] = self.by_node.get(node.name, 0) + 1
                return v
            except ray.exceptions.RayTaskError as exc:  # the call's own error, as it would be raised here
                if self._cancelled:
                    raise KeyboardInterrupt(f"{self.what} interrupted") from exc
                raise exc.as_instanceof_cause() from None
            except Exception as exc:  # noqa: BLE001 - the node or its worker is gone: run it elsewhere
                ex._refresh_now = True
                self.lost.append(f"{node.name}: {type(exc).__name__}: {str(exc)[:200]}")
            finally:
                with ex._lock:
                    node.running -= 1
                    ex._inflight.pop(ref, None)
        raise WorkLost(f"the {self.what}'s node was lost {self.MAX_LOST + 1} times: " + "; ".join(self.lost[-2:]))

    def describe(self) -> dict[str, Any]:
        """The executor, its nodes' checks, calls per node, nodes lost."""
        return {**self.executor.describe(), "by_node": dict(sorted(self.by_node.items())), "lost": list(self.lost)}

    def cancel(self) -> None:
        """Ctrl-C: stop every call in flight (their sandboxes die with their workers)."""
        self._cancelled = True
        for ref in list(self.executor._inflight):
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)

    def close(self) -> None:
        """Nothing to release: the nodes' backends live as long as their workers."""
        return None
