"""The command-line options several commands share, each defined once: option factories (the default and help
may differ by command; the names, bounds and kinds do not) and the options repeated verbatim, as ready
`typer.Option` values. The rubric judge's options live in clawgym.cli.judge_opts."""

from __future__ import annotations

from typing import Any

import typer

from clawgym.cli.common import fail
from clawgym.rollout.executor import EXECUTOR_HELP, RAY_ADDRESS_HELP

DEFAULT_MODEL = "smollm2-135m"

SERVER_PRECISION_HELP = ("Embedded server weights: fp32 (the same greedy answer whatever else is in the batch), bf16 "
                         "(about 2x faster on CPUs with AMX/AVX512-BF16 and GPUs; a batch can change an answer), "
                         "auto (bf16 where fast), q4 (decoding through the 4-bit blocks of a model loaded from a "
                         "GGUF file, such as the embedded one: about 2.5x faster per request on CPUs with "
                         "AVX512-BF16; logprobs within ~0.01 of fp32).")
SYNTH_SANDBOX_HELP = "Sandbox for validation: bwrap, docker, local, or a registered third-party backend."
SYNTH_EXECUTOR_HELP = ("Where validation runs: local (-j worker processes; llm generator: -j threads) or ray (the "
                       "sandbox slots of a Ray cluster's nodes; same bytes).")


def output_option(help: str) -> Any:
    """The required `-o/--output` (a file or directory to write)."""
    return typer.Option(..., "-o", "--output", help=help)


def jobs_option(default: int, help: str | None = None) -> Any:
    """`-j/--jobs`: how many things run at once."""
    return typer.Option(default, "-j", "--jobs", min=1, help=help)


def sandbox_option(default: str = "auto", help: str | None = None) -> Any:
    """`--sandbox`: a sandbox backend name (clawgym.sandbox.get_backend)."""
    return typer.Option(default, "--sandbox", help=help)


def executor_option(help: str = EXECUTOR_HELP) -> Any:
    """`--executor`: local or ray (clawgym.rollout.executor.make_executor)."""
    return typer.Option("local", "--executor", help=help)


def ray_address_option(help: str = RAY_ADDRESS_HELP) -> Any:
    """`--ray-address`: the Ray cluster of `--executor ray`."""
    return typer.Option(None, "--ray-address", help=help)


def precision_option(default: str = "fp32", help: str = SERVER_PRECISION_HELP) -> Any:
    """`--precision`: by default the embedded model server's (checked with `server_precision`)."""
    return typer.Option(default, "--precision", help=help)


def model_option(help: str, default: str | None = DEFAULT_MODEL) -> Any:
    """`--model`: a served model name, an embedded model or a local model directory."""
    return typer.Option(default, "--model", help=help)


def base_url_option(help: str) -> Any:
    """`--base-url`: an OpenAI-compatible endpoint."""
    return typer.Option(None, "--base-url", help=help)


def request_timeout_option(help: str = "Seconds one model call may take.") -> Any:
    return typer.Option(300.0, "--request-timeout", min=1.0, help=help)


TASKS_ARG = typer.Argument(..., metavar="TASKS", help="tasks.jsonl")
TASK_IDS = typer.Option(None, "--task", help="Only these task ids (repeatable).")
CATALOG = typer.Option(None, "--catalog", help="Skills folder (default: skills/ or $CLAWGYM_SKILLS).")
STRICT_IMPORT = typer.Option(False, "--strict/--no-strict", help="Exit non-zero if any task could not be imported.")


def server_precision(value: str) -> str:
    """`value` if it is a precision of the embedded server, else exit 2 naming the ones there are."""
    from clawgym.core.precision import SERVER_PRECISIONS

    if value not in SERVER_PRECISIONS:
        fail(f"--precision: unknown value {value!r}; use {', '.join(SERVER_PRECISIONS)}", 2)
    return value


def open_backend(sandbox: str, executor: str, jobs: int, ray_address: str | None) -> tuple[Any, Any]:
    """The sandbox backend and the executor of a run (`--sandbox`, `--executor`); exit 2 when either is unknown
    or cannot be made."""
    from clawgym.core.errors import ClawgymError
    from clawgym.rollout.executor import make_executor
    from clawgym.sandbox import get_backend

    try:
        backend = get_backend(sandbox)
        return backend, make_executor(executor, jobs=jobs, ray_address=ray_address, sandbox=backend.name)
    except (ValueError, ClawgymError) as exc:
        fail(str(exc), 2)
