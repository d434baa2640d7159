"""Everything an agent needs around a rollout, set up and torn down in one place (used by `clawgym rollout` and
`clawgym eval`): for the LLM agent, the model endpoint (the embedded server started when the model is local and
no base URL is given), the gateway recording every call into `RUN_DIR/pool`, and the shared client; for the
OpenClaw agent, the same endpoint and gateway (also on a unix socket, with a per-trajectory budget) and the
mounts every sandbox gets: the installation read-only, the socket's directory read-only, a private state dir."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym.agent.base import Agent
from clawgym.core.errors import ClawgymError
from clawgym.core.records import Task
from clawgym.rollout.runner import RolloutOptions


@dataclass
class AgentSpec:
    name: str = "noop"  # llm | openclaw | noop | oracle
    model: str = "smollm2-135m"
    base_url: str | None = None
    max_turns: int = 30
    max_tokens: int = 1024
    max_total_tokens: int | None = None
    temperature: float = 0.0
    llm_concurrency: int = 16
    request_timeout: float = 300.0
    stream: bool = False
    gateway: bool = True
    policy_version: str | None = None
    # openclaw: the installed version to run, and the gateway's per-trajectory budget (None: max_turns model
    # calls, max_total_tokens tokens, the longest task timeout as wall time)
    openclaw_version: str | None = None
    context_window: int = 32768
    budget_steps: int | None = None
    budget_tokens: int | None = None
    budget_wall_s: float | None = None
    # the embedded server's precision, when one is started for a local model (see `clawgym serve --precision`)
    precision: str = "fp32"
    # the pool the gateway records into (default RUN_DIR/pool), and prefixes of the trajectory and group ids it
    # records: several runs (the iterations of `train rl`) share one pool without their ids meeting
    pool_dir: Path | None = None
    id_prefix: str = ""
    group_prefix: str | None = None  # None: id_prefix
    seed: int | None = None  # llm agent: sampling seed of each model call (seed + sample index), for repeatable runs
    # openclaw: the gateway imposes `temperature` (and, when `seed` is set, a seed per trajectory and call) on every
    # model call, over the parameters OpenClaw chose (train rl); off: OpenClaw's own (a seed alone is still applied)
    impose_sampling: bool = False
    # the tokenizer the gateway re-tokenizes with when the engine returns no token ids (llama.cpp, Ollama, OpenAI):
    # a local model directory or embedded name; None: the model's own when `model` is one, else no ids
    tokenizer: str | None = None


@dataclass
class AgentSession:
    factory: Callable[[], Agent]
    settings: dict[str, Any] = field(default_factory=dict)
    client: Any = None  # the LLMClient, for usage figures
    gateway: Any = None  # the GatewayThread recording the calls, when there is one

    def usage_line(self) -> str | None:
        if self.client is None:
            return None
        u = self.client.usage.as_dict()
        return (f"model calls: {u['requests']} ({u['retries']} retries, {u['failures']} failed attempts), "
                f"tokens: {u['prompt_tokens']} prompt + {u['completion_tokens']} completion")


def _endpoint_settings(spec: AgentSpec) -> dict[str, str]:
    """What run.json records about where the model ran: a given endpoint, or the embedded server and its precision."""
    if spec.base_url or os.environ.get("OPENAI_BASE_URL"):
        return {"endpoint": "given"}
    return {"endpoint": "embedded", "precision": spec.precision}


def rollout_route_secret(token: str | None) -> str:
    """The secret a rollout's gateway derives each trajectory route's key from (clawgym.gateway.routes).

    Local: a fresh one, held by this process alone. On a cluster: the gateway's token, which the workers already
    hold (clawgym.rollout.recipe) and derive their episodes' keys from; their sandboxes get only those keys."""
    return token if token is not None else secrets.token_urlsafe(32)


@contextmanager
def agent_session(spec: AgentSpec, run_dir: Path, tasks: list[Task], options: RolloutOptions,
                  announce: Callable[[Any], None] | None = None) -> Iterator[AgentSession]:
    """Yield the agent factory for a rollout into `run_dir`; sets `options.on_attempt` when recording."""
    from clawgym.agent import get_agent
    from clawgym.rollout.recipe import AgentRecipe

    remote = options.executor is not None and options.executor.name != "local"
    if spec.name == "openclaw":
        with openclaw_session(spec, run_dir, tasks, options, announce) as session:
            yield session
        return
    if spec.name != "llm":
        get_agent(spec.name)  # validates the name
        options.recipe = AgentRecipe(spec.name)
        yield AgentSession(lambda: get_agent(spec.name))
        return
    from clawgym.agent import AgentLimits, LLMAgent
    from clawgym.llm import LLMClient, model_endpoint
    from clawgym.llm.endpoint import check_endpoint

    with ExitStack() as stack:
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        url = stack.enter_context(model_endpoint(spec.model, spec.base_url, log_path=run_dir / "logs" / "server.log",
                                                 on_start=announce, precision=spec.precision))
        settings: dict[str, Any] = {}
        if spec.base_url or os.environ.get("OPENAI_BASE_URL"):
            # the user's own server: checked once before any episode, so that a wrong URL or model name is one
            # clear line, not every episode failing as an infrastructure error
            settings["endpoint_check"] = check_endpoint(url, spec.model, timeout=min(spec.request_timeout, 60.0))
        route = None
        if remote and not spec.gateway:
            raise ClawgymError("--executor ray reaches the model through the gateway (which alone writes the pool "
                               "and holds the endpoint's key); drop --no-gateway")
        if spec.gateway:
            from clawgym.gateway import GatewayThread
            from clawgym.pool.store import Pool

            pool_dir = spec.pool_dir or run_dir / "pool"
            pool = Pool(pool_dir)
            stack.callback(pool.close)
            pre = spec.id_prefix
            gpre = spec.id_prefix if spec.group_prefix is None else spec.group_prefix
            for t in tasks:
                pool.expect_group(gpre + t.id, options.samples)
            # remote workers call the gateway over the network: with a token, and off loopback when they are
            # on other hosts
            gw_host = options.executor.gateway_host() if remote else "127.0.0.1"
            token = secrets.token_urlsafe(24) if remote else None
            route_secret = rollout_route_secret(token)
            from clawgym.gateway.server import load_tokenizer
            from clawgym.llm.models import is_local_model

            # the embedded server returns its own ids; another engine serving a local model gets it re-tokenized
            user_endpoint = bool(spec.base_url or os.environ.get("OPENAI_BASE_URL"))
            tok_name = spec.tokenizer or (spec.model if user_endpoint and is_local_model(spec.model) else None)
            gw = stack.enter_context(GatewayThread(url, pool, policy_version=spec.policy_version,
                                                   upstream_key=os.environ.get("OPENAI_API_KEY"),
                                                   token=token, host=gw_host, route_secret=route_secret,
                                                   tokenizer=load_tokenizer(tok_name) if tok_name else None))
            settings["retokenize_with"] = tok_name

            def route(task, ctx):
                return gw.url_for(pre + ctx.trajectory_id, gpre + task.id)

            def on_attempt(t) -> None:
                tid = t.id if t.attempts == 1 else f"{t.id}~{t.attempts}"
                pool.end_trajectory(pre + tid, group_id=gpre + t.task_id, task_id=t.task_id, status=t.status,
                                    reward=t.score, verdict=t.verdict.model_dump() if t.verdict else None)
                if remote:  # the calls were made by the workers' clients: count them here
                    u = client.usage
                    u.requests += int(t.usage.get("model_calls", 0) or 0)
                    u.prompt_tokens += int(t.usage.get("prompt_tokens", 0) or 0)
                    u.completion_tokens += int(t.usage.get("completion_tokens", 0) or 0)

            options.on_attempt = on_attempt
            settings["pool"] = str(pool_dir)
            if pre:
                settings["pool_id_prefix"] = pre  # the trajectory ids' prefix in the pool (clawgym filter's curation)
        client = LLMClient(spec.model, url, max_concurrency=spec.llm_concurrency, timeout=spec.request_timeout,
                           stream=spec.stream)
        stack.callback(client.close)
        limits = AgentLimits(max_turns=spec.max_turns, max_completion_tokens=spec.max_tokens,
                             max_total_tokens=spec.max_total_tokens, temperature=spec.temperature)
        if spec.gateway:
            options.recipe = AgentRecipe(
                "llm", model=spec.model, gateway=f"http://{gw_host}:{gw.port}", token=token, id_prefix=pre,
                group_prefix=gpre, limits=dict(limits.__dict__), seed=spec.seed,
                llm_concurrency=spec.llm_concurrency, request_timeout=spec.request_timeout, stream=spec.stream)
        settings.update(model=spec.model, base_url=url, limits_agent=limits.__dict__, **_endpoint_settings(spec))
        yield AgentSession(lambda: LLMAgent(client, limits, route=route, seed=spec.seed,
                                            route_secret=route_secret if spec.gateway else None), settings, client)


@contextmanager
def openclaw_session(spec: AgentSpec, run_dir: Path, tasks: list[Task], options: RolloutOptions,
                     announce: Callable[[Any], None] | None = None) -> Iterator[AgentSession]:
    """The OpenClaw agent's session: endpoint, gateway (TCP for the host, a unix socket for the sandboxes),
    pool, budget, and the sandbox mounts (set on `options.mounts`). Pool, trajectory and group ids as the llm
    agent's (`spec.pool_dir`, `id_prefix`, `group_prefix`); OpenClaw picks its own request parameters, so the
    run's sampling (`impose_sampling`, `seed`) is set on its calls by the gateway."""
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
    from clawgym.gateway import Budget, GatewayThread, SamplingOverride
    from clawgym.llm import model_endpoint
    from clawgym.pool.store import Pool
    from clawgym.rollout.recipe import AgentRecipe
    from clawgym.sandbox.base import Mount

    version = spec.openclaw_version or DEFAULT_VERSION
    # on a cluster the episodes run on the nodes, with the nodes' installations (checked per node): the driver
    # needs none, its gateway is reached over TCP (a token; off loopback when nodes are elsewhere), no socket
    remote = options.executor is not None and options.executor.name != "local"
    inst = find_installation(version)
    nodes_inst: dict[str, Any] = {}
    if remote:
        nodes_inst = options.executor.require_openclaw(version)
    elif inst is None:
        raise InstallError(f"OpenClaw {version} is not installed: run `clawgym agents install openclaw"
                           + (f" --version {version}`" if version != DEFAULT_VERSION else "`"))
    if options.limits.network:
        raise InstallError("--agent openclaw runs without a network (its model calls go through the gateway's "
                           "socket); drop --network")
    if not spec.gateway:
        raise InstallError("--agent openclaw reaches its model only through the gateway; drop --no-gateway")
    with ExitStack() as stack:
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        url = stack.enter_context(model_endpoint(spec.model, spec.base_url, log_path=run_dir / "logs" / "server.log",
                                                 on_start=announce, precision=spec.precision))
        pool_dir = spec.pool_dir or run_dir / "pool"
        pool = Pool(pool_dir)
        stack.callback(pool.close)
        # the same ids as the llm agent's: trajectory `id_prefix + id`, group `group_prefix + task id`
        pre = spec.id_prefix
        gpre = spec.id_prefix if spec.group_prefix is None else spec.group_prefix
        for t in tasks:
            pool.expect_group(gpre + t.id, options.samples)
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
        budget = Budget(max_steps=spec.budget_steps or spec.max_turns,
                        max_tokens=spec.budget_tokens or spec.max_total_tokens,
                        max_wall_s=spec.budget_wall_s or max((options.timeout_of(t) for t in tasks), default=None))
        sampling = SamplingOverride(temperature=spec.temperature if spec.impose_sampling else None, seed=spec.seed)
        gw = stack.enter_context(GatewayThread(url, pool, policy_version=spec.policy_version, budget=budget,
                                               upstream_key=os.environ.get("OPENAI_API_KEY"),
                                               uds=None if remote else sock_dir / SOCKET_NAME, sampling=sampling,
                                               token=token, host=gw_host, reader_token=reader,
                                               route_secret=route_secret))

        def on_attempt(t) -> None:
            tid = t.id if t.attempts == 1 else f"{t.id}~{t.attempts}"
            pool.end_trajectory(pre + tid, group_id=gpre + t.task_id, task_id=t.task_id, status=t.status,
                                reward=t.score, verdict=t.verdict.model_dump() if t.verdict else None)

        options.on_attempt = on_attempt
        if remote:  # each node's worker builds the agent and its mounts from this (clawgym.rollout.recipe)
            options.mounts = []
            options.recipe = AgentRecipe(
                "openclaw", model=spec.model, gateway=f"http://{gw_host}:{gw.port}", token=token, reader_token=reader,
                id_prefix=pre,
                group_prefix=gpre, request_timeout=spec.request_timeout,
                openclaw={"version": version, "max_tokens": spec.max_tokens, "context_window": spec.context_window})
        else:
            options.mounts = [Mount(target=INSTALL_MOUNT, source=inst.root), Mount(target=GATEWAY_MOUNT, source=sock_dir),
                              Mount(target=STATE_MOUNT, read_only=False)]

        def route(task, ctx) -> str:
            return gw.url_for(pre + ctx.trajectory_id, gpre + task.id).split(f":{gw.port}", 1)[1]

        settings_oc = OpenClawSettings(model=spec.model, max_tokens=spec.max_tokens,
                                       version=inst.version if inst is not None else version,
                                       context_window=spec.context_window, api_key=route_secret)
        oc_info = {"version": inst.version, "node": inst.node_version, "root": str(inst.root)} if not remote else \
            {"version": version, "nodes": nodes_inst}
        settings = {"model": spec.model, "base_url": url, "pool": str(pool_dir), **({"pool_id_prefix": pre} if pre else {}),
                    "openclaw": oc_info,
                    "budget": {"max_steps": budget.max_steps, "max_tokens": budget.max_tokens,
                               "max_wall_s": budget.max_wall_s},
                    **_endpoint_settings(spec)}
        if sampling:
            settings["sampling_override"] = {k: v for k, v in vars(sampling).items() if v is not None}
        yield AgentSession(lambda: OpenClawAgent(settings_oc, route=route,
                                                 steps_of=lambda tid: pool.steps(trajectory_id=pre + tid),
                                                 spend_of=lambda tid: gw.gateway.budgets.spend(pre + tid)),
                           settings, gateway=gw)
