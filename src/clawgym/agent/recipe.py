"""How a worker on another machine builds the agent of an episode.

A local rollout hands its threads an agent factory: a closure over live objects (the model client, the gateway
thread) that cannot travel. A remote worker gets an :class:`AgentRecipe` instead: plain, picklable settings it
builds its own agent from, by the agent kind the recipe names (clawgym.agent.kind: `build`, `mounts`). The LLM
agent's recipe names the driver's gateway and its token, never the model endpoint or its key: every model call of
a remote episode goes through the gateway, which alone writes the pool and alone holds the upstream's key. The
OpenClaw agent's recipe names the same (and the installed version every node must have): its sandboxes reach the
gateway through a relay of the node's worker process (clawgym.agent.openclaw.remote), and it reads its
trajectory's steps back from the gateway. A kind with settings of its own carries them in `settings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from clawgym.agent.base import Agent


@dataclass(frozen=True)
class AgentRecipe:
    name: str  # the agent kind (noop | oracle | llm | openclaw | a registered one)
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
    settings: dict[str, Any] = field(default_factory=dict)  # the kind's own settings, as plain data

    def route(self, task_id: str, trajectory_id: str) -> str:
        """The gateway URL of one trajectory: the shape of `GatewayThread.url_for`."""
        return (f"{self.gateway}/t/{quote(self.id_prefix + trajectory_id, safe='')}"
                f"/g/{quote(self.group_prefix + task_id, safe='')}/v1")

    def mounts(self) -> list[Any]:
        """The extra sandbox mounts of an episode of this recipe on this node (openclaw: this node's installation,
        the directory of this process's relay socket, a private state dir); [] for kinds that need none."""
        from clawgym.agent.kind import get_kind

        return get_kind(self.name).mounts(self)

    def build(self) -> Agent:
        from clawgym.agent.kind import get_kind

        return get_kind(self.name).build(self)
