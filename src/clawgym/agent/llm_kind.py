"""The `llm` agent kind: clawgym's own agent (clawgym.agent.llm), a model driving the sandbox through tools.

Its session starts the model endpoint (the embedded server when the model is local and no base URL is given),
the gateway recording every call into the pool, and the client the episodes share; a remote worker builds the
agent from the recipe, reaching the model only through the driver's gateway."""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym.agent.kind import AgentKind, AgentSession, AgentSpec, RunOptions
from clawgym.agent.model_session import (
    end_trajectories,
    endpoint_settings,
    is_remote,
    open_pool,
    rollout_route_secret,
    start_endpoint,
    user_endpoint,
)
from clawgym.core.errors import ClawgymError

if TYPE_CHECKING:
    from clawgym.agent.base import Agent
    from clawgym.agent.recipe import AgentRecipe
    from clawgym.core.records import Task

# one client per recipe and worker process, shared by the episodes that process runs (the concurrency limit
# and connection pool of a local run's shared client, per worker)
_CLIENTS: dict[tuple, Any] = {}
_LOCK = threading.Lock()


class LLMKind(AgentKind):
    name = "llm"
    uses_model = True

    @contextmanager
    def session(self, spec: AgentSpec, run_dir: Path, tasks: list[Task], options: RunOptions,
                announce: Callable[[Any], None] | None = None) -> Iterator[AgentSession]:
        from clawgym.agent import AgentLimits, LLMAgent
        from clawgym.agent.recipe import AgentRecipe
        from clawgym.llm import LLMClient
        from clawgym.llm.endpoint import check_endpoint

        self.settings_of(spec)
        remote = is_remote(options)
        with ExitStack() as stack:
            url = start_endpoint(stack, spec, run_dir, announce)
            settings: dict[str, Any] = {}
            if user_endpoint(spec):
                # the user's own server: checked once before any episode, so that a wrong URL or model name is one
                # clear line, not every episode failing as an infrastructure error
                settings["endpoint_check"] = check_endpoint(url, spec.model, timeout=min(spec.request_timeout, 60.0))
            route = None
            if remote and not spec.gateway:
                raise ClawgymError("--executor ray reaches the model through the gateway (which alone writes the "
                                   "pool and holds the endpoint's key); drop --no-gateway")
            pre, gpre = spec.id_prefix, spec.pool_group_prefix
            if spec.gateway:
                from clawgym.gateway import GatewayThread
                from clawgym.gateway.server import load_tokenizer
                from clawgym.llm.models import is_local_model

                pool, pool_dir = open_pool(stack, spec, run_dir, tasks, options)
                # remote workers call the gateway over the network: with a token, and off loopback when they are
                # on other hosts
                gw_host = options.executor.gateway_host() if remote else "127.0.0.1"
                token = secrets.token_urlsafe(24) if remote else None
                route_secret = rollout_route_secret(token)
                # the embedded server returns its own ids; another engine serving a local model gets it re-tokenized
                tok_name = spec.tokenizer or (spec.model if user_endpoint(spec) and is_local_model(spec.model) else None)
                gw = stack.enter_context(GatewayThread(url, pool, policy_version=spec.policy_version,
                                                       upstream_key=os.environ.get("OPENAI_API_KEY"),
                                                       token=token, host=gw_host, route_secret=route_secret,
                                                       tokenizer=load_tokenizer(tok_name) if tok_name else None))
                settings["retokenize_with"] = tok_name

                def route(task, ctx):
                    return gw.url_for(pre + ctx.trajectory_id, gpre + task.id)

                end = end_trajectories(pool, spec)

                def on_attempt(t) -> None:
                    end(t)
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
                    self.name, model=spec.model, gateway=f"http://{gw_host}:{gw.port}", token=token, id_prefix=pre,
                    group_prefix=gpre, limits=dict(limits.__dict__), seed=spec.seed,
                    llm_concurrency=spec.llm_concurrency, request_timeout=spec.request_timeout, stream=spec.stream)
            settings.update(model=spec.model, base_url=url, limits_agent=limits.__dict__, **endpoint_settings(spec))
            yield AgentSession(lambda: LLMAgent(client, limits, route=route, seed=spec.seed,
                                                route_secret=route_secret if spec.gateway else None), settings, client)

    def build(self, recipe: AgentRecipe) -> Agent:
        from clawgym.agent import AgentLimits, LLMAgent
        from clawgym.llm import LLMClient

        key = (recipe.model, recipe.gateway, recipe.token, recipe.llm_concurrency, recipe.request_timeout,
               recipe.stream)
        with _LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                client = _CLIENTS[key] = LLMClient(
                    recipe.model, f"{recipe.gateway}/v1", api_key=recipe.token or "EMPTY",
                    max_concurrency=recipe.llm_concurrency, timeout=recipe.request_timeout, stream=recipe.stream)
        return LLMAgent(client, AgentLimits(**recipe.limits), seed=recipe.seed,
                        route=lambda task, ctx: recipe.route(task.id, ctx.trajectory_id))
