"""What runs on a Ray node: a node's own check, one episode attempt, and work the driver hands over without this
package knowing what it is (a worker actor running an importable `init` once and then the calls sent to it; one
call that needs the node's sandbox backend) -- synthesis validation, for one.

Nothing here writes to the run directory or to the pool: an attempt returns its trajectory, its log lines and
its kept workspace to the driver, which writes them (one writer); model calls go through the driver's gateway,
which records them. The sandboxes are started on the node by its own backend, exactly as a local run starts
them: a worker adds nothing to what a sandbox can see or do.
"""

from __future__ import annotations

import dataclasses
import platform
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

from clawgym.core.registry import load_object

_BACKENDS: dict[str, Any] = {}
_LOCK = threading.Lock()


def node_name() -> str:
    """`host:node-id prefix`: readable, and distinct for several nodes on one host."""
    import ray

    return f"{socket.gethostname()}:{ray.get_runtime_context().get_node_id()[:8]}"


def _backend(name: str):
    from clawgym.sandbox import get_backend

    with _LOCK:
        if name not in _BACKENDS:
            _BACKENDS[name] = get_backend(name)
        return _BACKENDS[name]


def check_node(sandbox: str, image: str | None, openclaw: str | None = None) -> dict[str, Any]:
    """This node's `clawgym sandbox check` for the run's backend, and whether it has the driver's sandbox image
    (`image`: the recipe id the driver runs with, None when the driver has none); with `openclaw` (a version),
    also whether that OpenClaw is installed here and its Node.js runs. A node that fails takes no episodes."""
    import ray

    from clawgym import __version__
    from clawgym.sandbox import get_backend
    from clawgym.sandbox.image import find_rootfs, recipe_id

    info: dict[str, Any] = {
        "node": node_name(), "node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
        "ip": ray.util.get_node_ip_address(), "clawgym": __version__, "python": platform.python_version(),
        "backend": sandbox,
    }
    try:
        ok, why = get_backend(sandbox).check()
    except Exception as exc:  # noqa: BLE001 (a check must never crash: the node is then simply not used)
        ok, why = False, f"{type(exc).__name__}: {exc}"
    rootfs = find_rootfs()
    info["image"] = recipe_id() if rootfs is not None else None
    if ok and image is not None and info["image"] != image and sandbox != "local":
        ok, why = False, f"the sandbox image {image} is not built on this node (run `clawgym sandbox build`)"
    if openclaw is not None:
        from clawgym.agent.kind import get_kind

        info["openclaw"] = get_kind("openclaw").node_check({"version": openclaw})
        if ok and not info["openclaw"]["ok"]:
            ok, why = False, info["openclaw"]["check"]
    info.update(ok=ok, check=why)
    return info


def run_attempt(payload: dict[str, Any]) -> dict[str, Any]:
    """One attempt of one episode on this node: :func:`clawgym.rollout.runner.run_episode` in a sandbox of the
    node's backend, into a private scratch run dir whose kept workspace is sent back."""
    from clawgym.core.records import Task
    from clawgym.rollout.runner import run_episode

    task = Task.model_validate_json(payload["task"])
    options = payload["options"]
    recipe = payload["recipe"]
    mounts = recipe.mounts()  # the kind's, on this node (OpenClaw: its installation, the gateway relay, a state dir)
    if mounts:
        options = dataclasses.replace(options, mounts=mounts)
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="clawgym-attempt-") as tmp:
        run_dir = Path(tmp)
        traj = run_episode(task, payload["sample"], recipe.build(), _backend(payload["sandbox"]),
                           options, run_dir, lines.append, None, payload["attempt"])
        files = {}
        if traj.workspace_snapshot:
            files[traj.workspace_snapshot] = (run_dir / traj.workspace_snapshot).read_bytes()
    return {"trajectory": traj.model_dump_json(), "node": node_name(), "log": lines, "files": files}


class Worker:
    """A worker on a node (a Ray actor) for :meth:`clawgym.rollout.executor.Executor.worker_pool`: it runs
    `init(*initargs)` once, keeping the state that leaves in its process between calls (a synthesis worker's
    taxonomy, generators, grader and replay sandboxes), then each `fn(*args)` it is sent."""

    def __init__(self, init: str, initargs: tuple) -> None:
        load_object(init)(*initargs)
        self.node = node_name()

    def work(self, fn: str, args: tuple) -> Any:
        return load_object(fn)(*args)

    def stop(self, fn: str | None) -> str:
        """Run the pool's `stop` here (stop this worker's sandboxes, remove its temp dir); the driver then ends
        the actor."""
        if fn is not None:
            load_object(fn)()
        return self.node


def call_with_backend(fn: str, args: tuple, sandbox: str) -> Any:
    """One call of :meth:`clawgym.rollout.executor.Executor.sandbox_calls` on this node: `fn(*args, backend)`
    with the node's own backend of `sandbox`."""
    return load_object(fn)(*args, _backend(sandbox))
