"""The agent's command-line options, shared by `clawgym rollout` and `clawgym eval` (the default and help may
differ by command; the names, bounds and kinds do not), the check of `--agent` against the registered agent
kinds, and the AgentSpec built from them. The model's own options (--model, --base-url, --precision,
--request-timeout) are in clawgym.cli.options."""

from __future__ import annotations

from typing import Any

import typer

from clawgym.cli.common import fail


def agent_option(default: str, help: str) -> Any:
    """`--agent`: an agent kind (clawgym.agent.kind: built in, registered or declared by another distribution)."""
    return typer.Option(default, "--agent", help=help)


def max_turns_option(help: str | None = None) -> Any:
    return typer.Option(30, "--max-turns", min=1, help=help)


def max_tokens_option(help: str | None = None) -> Any:
    return typer.Option(1024, "--max-tokens", min=1, help=help)


def gateway_option(help: str) -> Any:
    """`--gateway/--no-gateway`: record every model call in RUN_DIR/pool."""
    return typer.Option(True, "--gateway/--no-gateway", help=help)


def tokenizer_option(help: str) -> Any:
    """`--tokenizer`: the tokenizer the gateway re-tokenizes with for engines that return no token ids."""
    return typer.Option(None, "--tokenizer", help=help)


def episode_timeout_option(help: str) -> Any:
    return typer.Option(None, "--episode-timeout", min=1.0, help=help)


def samples_option(help: str) -> Any:
    return typer.Option(1, "-k", "--samples", min=1, help=help)


LLM_CONCURRENCY = typer.Option(16, "--llm-concurrency", min=1, help="Model calls in flight at once, over all episodes.")
STREAM = typer.Option(False, "--stream/--no-stream", help="Ask the model for streamed responses.")
INFRA_RETRIES = typer.Option(2, "--infra-retries", min=0,
                             help="Fresh attempts of an episode after an infrastructure error.")


def check_agent(name: str) -> None:
    """Exit 2 naming the agent kinds there are when `name` is none of them."""
    from clawgym.agent.kind import get_kind

    try:
        get_kind(name)
    except (ValueError, TypeError, ImportError) as exc:  # unknown, or a plug-in that does not load
        fail(str(exc), 2)


def agent_uses_model(name: str) -> bool:
    """Whether the agent kind `name` calls --model (a judge of that model is then reached where it is)."""
    from clawgym.agent.kind import agent_kinds, get_kind

    return name in agent_kinds() and get_kind(name).uses_model
