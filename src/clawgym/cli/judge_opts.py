"""The rubric judge's command-line options, shared by `clawgym verify` (judging kept workspaces afterwards) and
`clawgym rollout` (judging each episode as it ends), and the judge built from them."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import typer

JUDGE_MODEL_HELP = ("Judge model for rubric rules (repeatable: several are averaged). A local model (smollm2-135m, a "
                    "model dir) is served on 127.0.0.1 when no base URL is given.")
JUDGE_BASE_URL_HELP = "OpenAI-compatible endpoint of the judge (else $OPENAI_BASE_URL)."


def judge_model_option(extra_help: str = "") -> Any:
    return typer.Option(None, "--judge-model", help=JUDGE_MODEL_HELP + extra_help)


JUDGE_SAMPLES = typer.Option(1, "--judge-samples", min=1, help="Answers asked of each judge model per rule.")
JUDGE_TEMPERATURE = typer.Option(None, "--judge-temperature", min=0.0,
                                 help="Default 0 for one sample, 0.7 for several (seeds 0..K-1).")
JUDGE_SEED = typer.Option(0, "--judge-seed", help="Seed of the first sample; sample i uses seed + i.")
JUDGE_MAX_TOKENS = typer.Option(200, "--judge-max-tokens", min=8, help="Completion tokens per judge call.")


def judge_url(base_url: str | None) -> str | None:
    return base_url or os.environ.get("OPENAI_BASE_URL") or None


def unreachable_judge_model(models: list[str] | None, url: str | None, served: dict[str, str] | None = None) -> str | None:
    """The first judge model that has no endpoint: not local, not already served, and no base URL."""
    from clawgym.llm import is_local_model

    for m in models or []:
        if not url and m not in (served or {}) and not is_local_model(m):
            return m
    return None


def refuse_unjudgeable(judge_model: list[str] | None, endpoint: str | None, executor: str,
                       own: dict[str, str] | None = None, hint: str = "") -> None:
    """Exit 2 when the episodes cannot be judged where they run: on a cluster, or a judge model with no endpoint
    (`own`: the agent's own model, reached where the agent reaches it). `hint` follows the executor message."""
    from clawgym.cli.common import fail

    if not judge_model:
        return
    if executor != "local":
        fail(f"--judge-model judges episodes where they run: it needs --executor local, not {executor!r}{hint}", 2)
    bad = unreachable_judge_model(judge_model, endpoint, own)
    if bad is not None:
        fail(f"judge model {bad!r} is not a local model; give --judge-base-url (or set OPENAI_BASE_URL)", 2)


def build_judge(stack: ExitStack, models: list[str], url: str | None, *, run_dir: Path, samples: int,
                temperature: float | None, seed: int, max_tokens: int, concurrency: int, timeout: float,
                cache_dir: Path | None, announce: Callable[[Any], None] | None = None,
                served: dict[str, str] | None = None):
    """A Judge over one lazily started client per model (closed by `stack`). `served`: models already served
    (name -> base URL, e.g. the rollout's own model), reached there unless a judge URL is given; a local model
    otherwise gets its own embedded server, started only when a call misses the cache (log:
    RUN_DIR/logs/judge-server[-i].log)."""
    from clawgym.verify.judge import Judge
    from clawgym.verify.rescore import LazyEndpointClient

    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    clients = []
    for i, m in enumerate(models):
        log = run_dir / "logs" / (f"judge-server-{i}.log" if len(models) > 1 else "judge-server.log")
        endpoint = url or (served or {}).get(m)
        c = LazyEndpointClient(m, endpoint, log_path=log, on_start=announce, max_concurrency=concurrency,
                               timeout=timeout)
        stack.callback(c.close)
        clients.append(c)
    return Judge(clients, samples=samples, temperature=temperature, seed=seed, max_tokens=max_tokens,
                 max_workers=concurrency, cache_dir=cache_dir)


def announce_judge_server(console) -> Callable[[Any], None]:
    def announce(server) -> None:
        console.print(f"starting the embedded model server for the judge {server.model} on {server.base_url} "
                      f"(log: {server.log_path})", highlight=False)

    return announce


def judge_settings(judge) -> dict[str, Any]:
    """What run.json records about a judge."""
    return {"models": judge.models, "samples": judge.samples, "temperature": judge.temperature, "seed": judge.seed,
            "max_tokens": judge.max_tokens, "cache": str(judge.cache.root) if judge.cache is not None else None}


def judge_usage_line(judge) -> str:
    u = judge.usage
    return (f"judge {', '.join(judge.models)} x{judge.samples}: {u['requests']} calls, {u['cached']} from the cache; "
            f"tokens {u['prompt_tokens']} prompt + {u['completion_tokens']} completion")
