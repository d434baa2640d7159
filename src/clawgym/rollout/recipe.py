"""How a worker on another machine builds the agent of an episode.

A local rollout hands its threads an agent factory: a closure over live objects (the model client, the gateway
thread) that cannot travel. A remote worker gets an :class:`AgentRecipe` instead: plain, picklable settings it
builds its own agent from. The LLM agent's recipe names the driver's gateway and its token, never the model
endpoint or its key: every model call of a remote episode goes through the gateway, which alone writes the pool
and alone holds the upstream's key. The OpenClaw agent's recipe names the same (and the installed version every
node must have): its sandboxes reach the gateway through a relay of the node's worker process
(clawgym.agent.openclaw.remote), and it reads its trajectory's steps back from the gateway.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from clawgym.agent.base import Agent

# one client per recipe and worker process, shared by the episodes that process runs (the concurrency limit
# and connection pool of a local run's shared client, per worker)
_CLIENTS: dict[tuple, Any] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class AgentRecipe:
    name: str  # noop | oracle | llm | openclaw
    model: str | None = None
    gateway: str | None = None  # http://HOST:PORT of the gateway (llm)
    # the gateway's bearer token (llm); openclaw: the secret its route keys are derived from (OpenClaw gets only its
    # route's key)
    token: str | None = None
    reader_token: str | None = None  # openclaw: the worker's token to read its trajectory back from the gateway
    id_prefix: str = ""
    group_prefix: str = ""
    limits: dict[str, Any] = field(default_factory=dict)  # clawgym.agent.AgentLimits fields
    seed: int | None = None
    llm_concurrency: int = 16
    request_timeout: float = 300.0
    stream: bool = False
    # openclaw: {"version", "max_tokens", "context_window"} (clawgym.agent.openclaw.OpenClawSettings' fields)
    openclaw: dict[str, Any] | None = None

    def route(self, task_id: str, trajectory_id: str) -> str:
        """The gateway URL of one trajectory: the shape of `GatewayThread.url_for`."""
        return (f"{self.gateway}/t/{quote(self.id_prefix + trajectory_id, safe='')}"
                f"/g/{quote(self.group_prefix + task_id, safe='')}/v1")

    def mounts(self) -> list[Any]:
        """The extra sandbox mounts of an episode of this recipe on this node (openclaw: this node's installation,
        the directory of this process's relay socket, a private state dir); [] for the other agents."""
        if self.name != "openclaw":
            return []
        from clawgym.agent.openclaw import GATEWAY_MOUNT, INSTALL_MOUNT, STATE_MOUNT
        from clawgym.agent.openclaw.remote import node_relay
        from clawgym.sandbox.base import Mount

        inst = self._installation()
        return [Mount(target=INSTALL_MOUNT, source=inst.root), Mount(target=GATEWAY_MOUNT, source=node_relay(self.gateway).dir),
                Mount(target=STATE_MOUNT, read_only=False)]

    def _installation(self) -> Any:
        from clawgym.agent.openclaw import InstallError, find_installation

        version = (self.openclaw or {}).get("version")
        inst = find_installation(version)
        if inst is None:
            raise InstallError(f"OpenClaw {version} is not installed on this node (clawgym agents install openclaw)")
        return inst

    def build(self) -> Agent:
        from clawgym.agent import get_agent

        if self.name == "openclaw":
            return self._build_openclaw()
        if self.name != "llm":
            return get_agent(self.name)
        from clawgym.agent import AgentLimits, LLMAgent
        from clawgym.llm import LLMClient

        key = (self.model, self.gateway, self.token, self.llm_concurrency, self.request_timeout, self.stream)
        with _LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                client = _CLIENTS[key] = LLMClient(
                    self.model, f"{self.gateway}/v1", api_key=self.token or "EMPTY",
                    max_concurrency=self.llm_concurrency, timeout=self.request_timeout, stream=self.stream)
        return LLMAgent(client, AgentLimits(**self.limits), seed=self.seed,
                        route=lambda task, ctx: self.route(task.id, ctx.trajectory_id))

    def _build_openclaw(self) -> Agent:
        from clawgym.agent.openclaw import OpenClawAgent, OpenClawSettings
        from clawgym.agent.openclaw.remote import GatewayReader

        oc = self.openclaw or {}
        inst = self._installation()
        settings = OpenClawSettings(model=self.model or "", max_tokens=int(oc.get("max_tokens", 1024)),
                                    context_window=int(oc.get("context_window", 32768)), version=inst.version,
                                    api_key=self.token or "clawgym")
        reader = GatewayReader(self.gateway or "", self.reader_token, self.id_prefix, timeout=self.request_timeout)

        def route(task, ctx) -> str:  # the path of GatewayThread.url_for, as the local run's route gives it
            return self.route(task.id, ctx.trajectory_id).split(self.gateway or "", 1)[1]

        return OpenClawAgent(settings, route=route, steps_of=reader.steps, spend_of=reader.spend)
