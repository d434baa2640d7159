"""The `openclaw` agent kind: OpenClaw run unmodified in each sandbox, its model calls through the gateway.

Its session starts the model endpoint, the gateway (TCP for the host, a unix socket for the sandboxes) with a
per-trajectory budget, the pool, and sets the mounts every sandbox gets: the installation read-only, the socket's
directory read-only, a private state dir. Pool, trajectory and group ids are the llm agent's (`spec.pool_dir`,
`id_prefix`, `group_prefix`); OpenClaw picks its own request parameters, so the run's sampling
(`impose_sampling`, `seed`) is set on its calls by the gateway. On a cluster the episodes run on the nodes with
the nodes' installations (`check_nodes`), each node's worker relaying its sandboxes to the driver's gateway
(clawgym.agent.openclaw.remote)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym.agent.kind import AgentInstaller, AgentKind, AgentSession, AgentSpec, RunOptions
from clawgym.agent.model_session import (
    end_trajectories,
    endpoint_settings,
    is_remote,
    open_pool,
    rollout_route_secret,
    start_endpoint,
)

if TYPE_CHECKING:
    from clawgym.agent.base import Agent
    from clawgym.agent.openclaw.install import Installation
    from clawgym.agent.recipe import AgentRecipe
    from clawgym.core.records import Task


@dataclass(frozen=True)
class OpenClawOptions:
    """The openclaw kind's own settings: the installed version to run (None: the pinned one), the context window
    it is told, and the gateway's per-trajectory budget (None: `max_turns` model calls, `max_total_tokens`
    tokens, the longest task timeout as wall time)."""

    version: str | None = None
    context_window: int = 32768
    budget_steps: int | None = None
    budget_tokens: int | None = None
    budget_wall_s: float | None = None


class OpenClawKind(AgentKind):
    name = "openclaw"
    settings = OpenClawOptions
    uses_model = True

    def installer(self) -> AgentInstaller:
        """Node.js and the pinned OpenClaw in the cache (`clawgym agents install openclaw`)."""
        from clawgym.agent.openclaw.install import OpenClawInstaller

        return OpenClawInstaller()

    def check_nodes(self, executor: Any, spec: AgentSpec) -> dict[str, Any]:
        from clawgym.agent.openclaw.install import DEFAULT_VERSION

        return executor.require_openclaw(self.settings_of(spec).version or DEFAULT_VERSION)

    @contextmanager
    def session(self, spec: AgentSpec, run_dir: Path, tasks: list[Task], options: RunOptions,
                announce: Callable[[Any], None] | None = None) -> Iterator[AgentSession]:
        import shutil
        import tempfile

        from clawgym.agent.openclaw import (
            GATEWAY_MOUNT,
            INSTALL_MOUNT,
            SOCKET_NAME,
            STATE_MOUNT,
            InstallError,
            OpenClawAgent,
            OpenClawSettings,
            find_installation,
        )
        from clawgym.agent.openclaw.install import DEFAULT_VERSION
        from clawgym.agent.recipe import AgentRecipe
        from clawgym.gateway import Budget, GatewayThread, SamplingOverride
        from clawgym.sandbox.base import Mount

        own = self.settings_of(spec)
        version = own.version or DEFAULT_VERSION
        # on a cluster the episodes run on the nodes, with the nodes' installations (checked per node): the driver
        # needs none, its gateway is reached over TCP (a token; off loopback when nodes are elsewhere), no socket
        remote = is_remote(options)
        inst = find_installation(version)
        nodes_inst: dict[str, Any] = {}
        if remote:
            nodes_inst = self.check_nodes(options.executor, spec)
        elif inst is None:
            raise InstallError(f"OpenClaw {version} is not installed: run `clawgym agents install openclaw"
                               + (f" --version {version}`" if version != DEFAULT_VERSION else "`"))
        if options.limits.network:
            raise InstallError("--agent openclaw runs without a network (its model calls go through the gateway's "
                               "socket); drop --network")
        if not spec.gateway:
            raise InstallError("--agent openclaw reaches its model only through the gateway; drop --no-gateway")
        with ExitStack() as stack:
            url = start_endpoint(stack, spec, run_dir, announce)
            pool, pool_dir = open_pool(stack, spec, run_dir, tasks, options)
            # the same ids as the llm agent's: trajectory `id_prefix + id`, group `group_prefix + task id`
            pre, gpre = spec.id_prefix, spec.pool_group_prefix
            if not remote:
                # a short path (unix socket paths are limited to 108 bytes), private to this run
                sock_dir = Path(tempfile.mkdtemp(prefix="clawgym-gw-"))
                stack.callback(shutil.rmtree, sock_dir, True)
                sock_dir.chmod(0o755)
            gw_host = options.executor.gateway_host() if remote else "127.0.0.1"
            token = secrets.token_urlsafe(24) if remote else None
            route_secret = rollout_route_secret(token)
            # the nodes' workers (not the agents in their sandboxes, who hold only their route's key) read
            # trajectories back with this
            reader = secrets.token_urlsafe(24) if remote else None
            budget = Budget(max_steps=own.budget_steps or spec.max_turns,
                            max_tokens=own.budget_tokens or spec.max_total_tokens,
                            max_wall_s=own.budget_wall_s or max((options.timeout_of(t) for t in tasks), default=None))
            sampling = SamplingOverride(temperature=spec.temperature if spec.impose_sampling else None, seed=spec.seed)
            gw = stack.enter_context(GatewayThread(url, pool, policy_version=spec.policy_version, budget=budget,
                                                   upstream_key=os.environ.get("OPENAI_API_KEY"),
                                                   uds=None if remote else sock_dir / SOCKET_NAME, sampling=sampling,
                                                   token=token, host=gw_host, reader_token=reader,
                                                   route_secret=route_secret))
            options.on_attempt = end_trajectories(pool, spec)
            if remote:  # each node's worker builds the agent and its mounts from this (`build`, `mounts`)
                options.mounts = []
                options.recipe = AgentRecipe(
                    self.name, model=spec.model, gateway=f"http://{gw_host}:{gw.port}", token=token,
                    reader_token=reader, id_prefix=pre, group_prefix=gpre, request_timeout=spec.request_timeout,
                    openclaw={"version": version, "max_tokens": spec.max_tokens,
                              "context_window": own.context_window})
            else:
                options.mounts = [Mount(target=INSTALL_MOUNT, source=inst.root),
                                  Mount(target=GATEWAY_MOUNT, source=sock_dir),
                                  Mount(target=STATE_MOUNT, read_only=False)]

            def route(task, ctx) -> str:
                return gw.url_for(pre + ctx.trajectory_id, gpre + task.id).split(f":{gw.port}", 1)[1]

            settings_oc = OpenClawSettings(model=spec.model, max_tokens=spec.max_tokens,
                                           version=inst.version if inst is not None else version,
                                           context_window=own.context_window, api_key=route_secret)
            oc_info = {"version": inst.version, "node": inst.node_version, "root": str(inst.root)} if not remote else \
                {"version": version, "nodes": nodes_inst}
            settings = {"model": spec.model, "base_url": url, "pool": str(pool_dir),
                        **({"pool_id_prefix": pre} if pre else {}),
                        "openclaw": oc_info,
                        "budget": {"max_steps": budget.max_steps, "max_tokens": budget.max_tokens,
                                   "max_wall_s": budget.max_wall_s},
                        **endpoint_settings(spec)}
            if sampling:
                settings["sampling_override"] = {k: v for k, v in vars(sampling).items() if v is not None}
            yield AgentSession(lambda: OpenClawAgent(settings_oc, route=route,
                                                     steps_of=lambda tid: pool.steps(trajectory_id=pre + tid),
                                                     spend_of=lambda tid: gw.gateway.budgets.spend(pre + tid)),
                               settings, gateway=gw)

    # -- on a cluster node --------------------------------------------------------------------------------------

    def node_check(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Whether OpenClaw `settings["version"]` is installed on this node and its Node.js runs here (the
        installation is bound into the sandboxes and run there)."""
        import subprocess

        from clawgym.agent.openclaw import find_installation

        version = settings.get("version")
        inst = find_installation(version)
        if inst is None:
            return {"ok": False, "version": version, "check": f"OpenClaw {version} is not installed on this node "
                                                              "(run `clawgym agents install openclaw`)"}
        try:
            res = subprocess.run([str(inst.node), "--version"], capture_output=True, text=True, timeout=30)
            node, ok = res.stdout.strip(), res.returncode == 0
        except (OSError, subprocess.TimeoutExpired) as exc:
            node, ok = f"{type(exc).__name__}: {exc}", False
        return {"ok": ok, "version": inst.version, "node": node, "root": str(inst.root),
                "check": "ok" if ok else f"the Node.js of OpenClaw {version} does not run on this node: {node}"}

    def mounts(self, recipe: AgentRecipe) -> list[Any]:
        """This node's installation, the directory of this process's relay socket, a private state dir."""
        from clawgym.agent.openclaw import GATEWAY_MOUNT, INSTALL_MOUNT, STATE_MOUNT
        from clawgym.agent.openclaw.remote import node_relay
        from clawgym.sandbox.base import Mount

        inst = self._installation(recipe)
        return [Mount(target=INSTALL_MOUNT, source=inst.root),
                Mount(target=GATEWAY_MOUNT, source=node_relay(recipe.gateway).dir),
                Mount(target=STATE_MOUNT, read_only=False)]

    @staticmethod
    def _installation(recipe: AgentRecipe) -> Installation:
        from clawgym.agent.openclaw import InstallError, find_installation

        version = (recipe.openclaw or {}).get("version")
        inst = find_installation(version)
        if inst is None:
            raise InstallError(f"OpenClaw {version} is not installed on this node (clawgym agents install openclaw)")
        return inst

    def build(self, recipe: AgentRecipe) -> Agent:
        from clawgym.agent.openclaw import OpenClawAgent, OpenClawSettings
        from clawgym.agent.openclaw.remote import GatewayReader

        oc = recipe.openclaw or {}
        inst = self._installation(recipe)
        settings = OpenClawSettings(model=recipe.model or "", max_tokens=int(oc.get("max_tokens", 1024)),
                                    context_window=int(oc.get("context_window", 32768)), version=inst.version,
                                    api_key=recipe.token or "clawgym")
        reader = GatewayReader(recipe.gateway or "", recipe.reader_token, recipe.id_prefix,
                               timeout=recipe.request_timeout)
        gateway = recipe.gateway or ""

        def route(task, ctx) -> str:  # the path of GatewayThread.url_for, as the local run's route gives it
            return recipe.route(task.id, ctx.trajectory_id).split(gateway, 1)[1]

        return OpenClawAgent(settings, route=route, steps_of=reader.steps, spend_of=reader.spend)
