"""`clawgym eval`: a benchmark suite run (rollout + verify) and its report."""

from __future__ import annotations

from pathlib import Path

import typer

from clawgym.cli.agent_opts import (
    INFRA_RETRIES,
    LLM_CONCURRENCY,
    STREAM,
    agent_option,
    check_agent,
    episode_timeout_option,
    gateway_option,
    max_tokens_option,
    max_turns_option,
    samples_option,
    tokenizer_option,
)
from clawgym.cli.common import announce_server, err, fail, out, progress_bar
from clawgym.cli.options import (
    base_url_option,
    executor_option,
    jobs_option,
    model_option,
    open_backend,
    output_option,
    precision_option,
    ray_address_option,
    request_timeout_option,
    sandbox_option,
    server_precision,
)
from clawgym.core.errors import ClawgymError


def eval_cmd(
    bench: str = typer.Option(..., "--bench", help="clawgym-bench (ClawGym's published ClawGym-Bench), "
                              "clawgym-bench-offline (without its tasks that need the network), synth-bench-200 "
                              "(our own synthesized suite, formerly clawgym-bench), pinchbench:PATH, "
                              "pinchbench-offline:PATH, clawgym-folder:PATH or a tasks.jsonl."),
    data: str | None = typer.Option(None, "--data", metavar="PATH", help="clawgym-bench: the folder of ClawGym-Bench's "
                                    "200 task folders (else $CLAWGYM_BENCH_DATA, else the Hugging Face Hub dataset "
                                    "RUC-AIBOX/ClawGym-Bench, cached; HF_HUB_OFFLINE=1 uses the cache only)."),
    agent: str = agent_option("llm", "Agent: llm, openclaw, noop or oracle."),
    model: str = model_option("Model of the llm agent (embedded name, local dir, or served name)."),
    base_url: str | None = base_url_option("OpenAI-compatible endpoint (else $OPENAI_BASE_URL; else the embedded server)."),
    samples: int = samples_option("Runs (samples per task): pass@k, mean ± std over runs."),
    jobs: int = jobs_option(4),
    run_dir: Path = output_option("Run directory (trajectories, report.json/.md/.png)."),
    sandbox: str = sandbox_option("auto", "Sandbox backend: auto, bwrap, docker, or a registered third-party one."),
    max_turns: int = max_turns_option(),
    max_tokens: int = max_tokens_option(),
    temperature: float = typer.Option(0.0, min=0.0),
    limit: int | None = typer.Option(None, min=1, help="Only the first N tasks of the suite."),
    episode_timeout: float | None = episode_timeout_option("Wall time of one episode (default: the task's). Raise it when many episodes share a slow local model."),
    gateway: bool = gateway_option("llm agent: record every model call in RUN_DIR/pool."),
    precision: str = precision_option(),
    llm_concurrency: int = LLM_CONCURRENCY,
    request_timeout: float = request_timeout_option(),
    stream: bool = STREAM,
    infra_retries: int = INFRA_RETRIES,
    tokenizer: str | None = tokenizer_option("llm agent: the model's tokenizer for engines that return no "
                                             "token ids (see `clawgym rollout --tokenizer`)."),
    judge_model: list[str] | None = typer.Option(None, help="Judge model(s) for rubric rules (hybrid and judge-only tasks)."),
    judge_base_url: str | None = typer.Option(None, help="Endpoint of the judge (else the embedded server for a local judge model)."),
    judge_samples: int = typer.Option(1, min=1, help="Judge samples per rule, averaged."),
    executor: str = executor_option(),
    ray_address: str | None = ray_address_option(),
) -> None:
    """Run a benchmark suite (rollout + verify) and report mean score, pass rate, pass@k per category.

    `--bench clawgym-bench` is ClawGym's published ClawGym-Bench (200 task folders, their own checkers): from
    --data PATH, $CLAWGYM_BENCH_DATA or the Hugging Face Hub. Our own 200 synthesized tasks are synth-bench-200.

    Without --judge-model, hybrid tasks are scored on their code checks alone (the verdict says so) and
    judge-only tasks are reported as not scored."""
    from rich.markup import escape

    from clawgym.evaluation import load_suite, render_table, run_eval
    from clawgym.rollout import RolloutOptions
    from clawgym.rollout.setup import AgentSpec

    try:
        suite = load_suite(bench, data=data)
        for line in suite.deprecations:
            err.print(f"[bold yellow]deprecated:[/] {escape(line)}", highlight=False, soft_wrap=True)
    except (ValueError, ClawgymError) as exc:
        fail(str(exc), 2)
    check_agent(agent)
    backend, ex = open_backend(sandbox, executor, jobs, ray_address)
    if limit:
        suite.tasks = suite.tasks[:limit]
    for note in suite.notes:
        err.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
    spec = AgentSpec(name=agent, model=model, base_url=base_url, max_turns=max_turns, max_tokens=max_tokens, temperature=temperature,
                     llm_concurrency=llm_concurrency, request_timeout=request_timeout, stream=stream,
                     gateway=gateway, precision=server_precision(precision), tokenizer=tokenizer)
    options = RolloutOptions(samples=samples, jobs=jobs, episode_timeout=episode_timeout, executor=ex,
                             infra_retries=infra_retries)
    progress = progress_bar()
    bar = {}

    def on_start(total: int, skipped: int) -> None:
        bar["id"] = progress.add_task(f"{suite.name}: {agent}", total=total)

    judge = None
    clients = []
    if judge_model:
        from clawgym.verify import Judge
        from clawgym.verify.rescore import LazyEndpointClient

        run_dir.mkdir(parents=True, exist_ok=True)
        clients = [LazyEndpointClient(m, judge_base_url, log_path=run_dir / "logs" / f"judge-{i}.log",
                                      on_start=announce_server(m)) for i, m in enumerate(judge_model)]
        judge = Judge(clients, samples=judge_samples, cache_dir=run_dir / "judge_cache")
    try:
        with ex, progress:
            report = run_eval(suite, spec, backend, run_dir, options, announce=announce_server(model),
                              on_start=on_start, on_done=lambda t: progress.advance(bar["id"]), judge=judge)
    finally:
        backend.close()
        for c in clients:
            c.close()
    out.print(render_table(report))
    out.print(f"report: {run_dir / 'report.md'} (and report.json, report.png)", highlight=False)
    infra = len(report.get("infra_errors") or [])
    if infra:
        err.print(f"[bold red]{infra} episodes ended in an infrastructure error[/] and are not scored; rerun the same "
                  "command to redo them", highlight=False)
        raise typer.Exit(3)
