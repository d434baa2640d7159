"""`clawgym serve` (a local model, OpenAI-compatibly) and `clawgym gateway` (the recording proxy before a model)."""

from __future__ import annotations

from pathlib import Path

import typer

from clawgym.cli.common import err, fail
from clawgym.cli.options import model_option, precision_option, server_precision


def serve(
    model: str = model_option("An embedded model name (smollm2-135m) or a local HF model directory."),
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8000, min=1, max=65535),
    max_batch: int = typer.Option(16, min=1, help="Requests decoded together in one batch."),
    served_name: str | None = typer.Option(None, help="Model name reported by the API (default: --model)."),
    token_log: Path | None = typer.Option(None, help="Append each request's prompt and generated token ids here (JSONL)."),
    precision: str = precision_option(),
    threads: int | None = typer.Option(None, min=1, help="torch threads (default: OMP_NUM_THREADS, else all cores "
                                       "but one, left to the agents and sandboxes beside the server)."),
    max_body_mb: float = typer.Option(16.0, min=0.001, help="Largest request body accepted, in MiB; larger ones "
                                      "are answered 413."),
    lora: list[str] | None = typer.Option(None, "--lora", metavar="NAME=PATH", help="Serve the LoRA adapter "
                                          "(a peft adapter dir) at PATH as model NAME from the start (repeatable, "
                                          "like vLLM's --lora-modules); more load at /v1/load_lora_adapter."),
) -> None:
    """Serve a local model OpenAI-compatibly (/v1/chat/completions with tools and streaming, /v1/models), and
    LoRA adapters loaded while it runs (/v1/load_lora_adapter, /v1/unload_lora_adapter, as vLLM)."""
    from clawgym.serve import serve as run_server
    from clawgym.serve.server import parse_lora_specs

    try:
        loras = parse_lora_specs(lora)
    except ValueError as exc:
        fail(str(exc), 2)
    precision = server_precision(precision)
    if host not in ("127.0.0.1", "localhost", "::1"):
        err.print(f"[bold yellow]warning:[/] serving on {host}: anyone who can reach it can use the model and "
                  "load adapters from this machine's files")
    err.print(f"loading {model} ...", highlight=False)
    run_server(model, host, port, max_batch, served_name, log_level="info", token_log=token_log,
               precision=precision, threads=threads, max_body_bytes=int(max_body_mb * 1024 * 1024), loras=loras)


def gateway_cmd(
    upstream: str = typer.Option(..., help="The model server to forward to (OpenAI-compatible base URL)."),
    pool_dir: Path = typer.Option(..., "--pool", help="Data pool directory (created if missing)."),
    host: str = typer.Option("127.0.0.1", help="Address to bind; anything but loopback requires a bearer token."),
    port: int = typer.Option(8100, min=1, max=65535),
    token: str | None = typer.Option(None, envvar="CLAWGYM_GATEWAY_TOKEN", help="Bearer token agents must send."),
    upstream_key: str | None = typer.Option(None, envvar="OPENAI_API_KEY", help="API key sent to the upstream."),
    tokenizer: str | None = typer.Option(None, help="Model dir (or embedded name) to re-tokenize with when the upstream gives no ids."),
    policy_version: str | None = typer.Option(None, help="Policy version stamped on every step."),
    max_body_mb: float = typer.Option(16.0, min=0.001, help="Largest request body accepted, in MiB; larger ones "
                                      "are answered 413 and neither stored nor forwarded."),
    budget_steps: int | None = typer.Option(None, min=1, help="Model calls per trajectory; later ones are answered "
                                            "400 budget_exceeded. Calls naming no trajectory share one budget."),
    budget_tokens: int | None = typer.Option(None, min=1, help="Tokens (prompt + completion) per trajectory."),
    budget_wall_s: float | None = typer.Option(None, min=0.001, help="Seconds per trajectory since its first call."),
) -> None:
    """Proxy an OpenAI-compatible server and record every model call as a token-exact step in a pool.

    Agents use base URL http://HOST:PORT/t/TRAJECTORY/g/GROUP/v1 (or /v1 with model name MODEL__TRAJECTORY).
    """
    from clawgym.gateway import Budget, run_gateway
    from clawgym.gateway.app import new_token

    if host not in ("127.0.0.1", "localhost", "::1") and not token:
        token = new_token()
        err.print(f"binding {host}: agents must send 'Authorization: Bearer {token}'", highlight=False)
    err.print(f"gateway on http://{host}:{port}/v1 -> {upstream}, pool {pool_dir}", highlight=False)
    run_gateway(upstream, pool_dir, host, port, token, upstream_key, tokenizer, policy_version, log_level="info",
                max_body_bytes=int(max_body_mb * 1024 * 1024),
                budget=Budget(max_steps=budget_steps, max_tokens=budget_tokens, max_wall_s=budget_wall_s))
