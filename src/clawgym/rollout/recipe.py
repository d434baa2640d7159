"""How a worker on another machine builds the agent of an episode.

A local rollout hands its threads an agent factory: a closure over live objects (the model client, the gateway
thread) that cannot travel. A remote worker gets an :class:`AgentRecipe` instead: plain, picklable settings it
builds its own agent from. The LLM agent's recipe names the driver's gateway and its token, never the model
endpoint or its key: every model call of a remote episode goes through the gateway, which alone writes the pool
and alone holds the upstream's key.
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
    name: str  # noop | oracle | llm
    model: str | None = None
    gateway: str | None = None  # http://HOST:PORT of the gateway (llm)
    token: str | None = None  # the gateway's bearer token (llm)
    id_prefix: str = ""
    group_prefix: str = ""
    limits: dict[str, Any] = field(default_factory=dict)  # clawgym.agent.AgentLimits fields
    seed: int | None = None
    llm_concurrency: int = 16
    request_timeout: float = 300.0
    stream: bool = False

    def route(self, task_id: str, trajectory_id: str) -> str:
        """The gateway URL of one trajectory: the shape of `GatewayThread.url_for`."""
        return (f"{self.gateway}/t/{quote(self.id_prefix + trajectory_id, safe='')}"
                f"/g/{quote(self.group_prefix + task_id, safe='')}/v1")

    def build(self) -> Agent:
        from clawgym.agent import get_agent

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
