"""`clawgym rollout`: an agent on every task in its own sandbox, verified, trajectories appended (resumable)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import typer

from clawgym.cli.agent_opts import (
    INFRA_RETRIES,
    LLM_CONCURRENCY,
    STREAM,
    agent_option,
    agent_uses_model,
    check_agent,
    episode_timeout_option,
    gateway_option,
    max_tokens_option,
    max_turns_option,
    samples_option,
    tokenizer_option,
)
from clawgym.cli.common import announce_server, err, fail, load_tasks, out, progress_bar
from clawgym.cli.judge_opts import (
    JUDGE_BASE_URL_HELP,
    JUDGE_MAX_TOKENS,
    JUDGE_SAMPLES,
    JUDGE_SEED,
    JUDGE_TEMPERATURE,
    announce_judge_server,
    build_judge,
    judge_model_option,
    judge_settings,
    judge_url,
    judge_usage_line,
    refuse_unjudgeable,
)
from clawgym.cli.options import (
    TASK_IDS,
    TASKS_ARG,
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


def rollout(
    tasks_path: Path = TASKS_ARG,
    agent: str = agent_option("noop", "Agent: llm (a model through tools), openclaw (OpenClaw in the sandbox; `clawgym agents install openclaw`), noop (does nothing), oracle (replays the reference)."),
    model: str = model_option("Model of the llm agent: a served name, an embedded model or a local model dir."),
    base_url: str | None = base_url_option("OpenAI-compatible endpoint (else $OPENAI_BASE_URL; else the embedded server is started for a local --model)."),
    max_turns: int = max_turns_option("llm agent: model calls per session."),
    max_tokens: int = max_tokens_option("llm agent: completion tokens per model call."),
    max_total_tokens: int | None = typer.Option(None, min=1, help="llm agent: tokens per episode."),
    temperature: float | None = typer.Option(None, min=0.0, help="Sampling temperature (llm agent: default 0; "
                                              "openclaw: when given, the gateway sets it on every call the agent makes)."),
    llm_concurrency: int = LLM_CONCURRENCY,
    request_timeout: float = request_timeout_option(),
    stream: bool = STREAM,
    episode_timeout: float | None = episode_timeout_option("Wall time of one episode (default: the task's)."),
    infra_retries: int = INFRA_RETRIES,
    gateway: bool = gateway_option("llm agent: record every model call in RUN_DIR/pool through the gateway."),
    tokenizer: str | None = tokenizer_option("llm agent: the model's tokenizer (a local model dir or embedded "
                                             "name) for engines that return no token ids (llama.cpp, Ollama, OpenAI): "
                                             "the gateway re-tokenizes each step and marks it so. Default: --model's, "
                                             "when it is a local model."),
    policy_version: str | None = typer.Option(None, help="Policy version stamped on recorded steps."),
    precision: str = precision_option(),
    sandbox: str = sandbox_option("auto", "Sandbox backend: auto, bwrap, docker, local (NO isolation), or a registered third-party one (`clawgym sandbox check` lists them)."),
    jobs: int = jobs_option(4, "Episodes run at once."),
    samples: int = samples_option("Episodes per task."),
    run_dir: Path = output_option("Run directory (trajectories.jsonl, logs, workspaces)."),
    task_ids: list[str] | None = TASK_IDS,
    limit: int | None = typer.Option(None, min=1, help="Only the first N tasks."),
    keep_workspaces: bool = typer.Option(True, help="Keep each episode's final workspace in the run dir."),
    progress_rewards: bool = typer.Option(
        False, "--progress", help="Progress rewards: snapshot the workspace after each step that can change it, "
        "grade the snapshots after the episode in a fresh sandbox and give each step the change of the code score "
        "(tasks whose checks are data; the others fall back to outcome credit, listed at the end). See "
        "docs/rollout.md."),
    memory_mb: int = typer.Option(2048, min=16, help="Memory limit per sandbox."),
    max_processes: int = typer.Option(256, min=8, help="Process limit per sandbox."),
    exec_timeout: float = typer.Option(120.0, min=0.1, help="Wall-time limit of one command."),
    network: bool = typer.Option(False, help="Give sandboxes a network (off by default)."),
    executor: str = executor_option(),
    ray_address: str | None = ray_address_option(),
    judge_model: list[str] | None = judge_model_option(
        " Each episode of a task with a rubric is judged as it ends: its verdict is the hybrid one `clawgym verify` "
        "gives. The agent's own model is reached where the agent reaches it. Local executor only."),
    judge_base_url: str | None = typer.Option(None, "--judge-base-url", help=JUDGE_BASE_URL_HELP),
    judge_samples: int = JUDGE_SAMPLES,
    judge_temperature: float | None = JUDGE_TEMPERATURE,
    judge_seed: int = JUDGE_SEED,
    judge_max_tokens: int = JUDGE_MAX_TOKENS,
) -> None:
    """Run an agent on every task in its own sandbox, verify, and append trajectories (resumable).

    With --judge-model, rubric rules are judged as each episode ends (0.7 code + 0.3 rubric by default), with
    the judge cache in RUN_DIR/judge_cache; without, hybrid tasks are scored on their code checks alone."""
    from clawgym.rollout import RolloutOptions, render_table, run_rollout, summarize
    from clawgym.rollout.setup import AgentSpec, agent_session
    from clawgym.sandbox import SandboxLimits

    judge_endpoint = judge_url(judge_base_url)
    refuse_unjudgeable(judge_model, judge_endpoint, executor, {model: ""} if agent_uses_model(agent) else None,
                       hint="; judge a cluster run afterwards with `clawgym verify RUN_DIR --judge-model M`")
    check_agent(agent)
    backend, ex = open_backend(sandbox, executor, jobs, ray_address)
    tasks, bad = _select_tasks(tasks_path, task_ids, limit)
    _check_run_dir(run_dir, agent)
    if sandbox == "local":
        err.print("[bold yellow]warning:[/] sandbox 'local' runs commands on this host with NO isolation")
    options = RolloutOptions(
        samples=samples, jobs=jobs, keep_workspaces=keep_workspaces, progress=progress_rewards,
        base_dir=tasks_path.parent.resolve(),
        infra_retries=infra_retries, episode_timeout=episode_timeout, executor=ex,
        limits=SandboxLimits(memory_mb=memory_mb, max_processes=max_processes, exec_timeout_s=exec_timeout,
                             network=network),
    )
    progress, on_start, on_done = _progress(f"{agent} @ {backend.name}", run_dir)
    spec = AgentSpec(name=agent, model=model, base_url=base_url, max_turns=max_turns, max_tokens=max_tokens,
                     max_total_tokens=max_total_tokens, temperature=temperature or 0.0,
                     llm_concurrency=llm_concurrency, request_timeout=request_timeout, stream=stream,
                     gateway=gateway, policy_version=policy_version, precision=server_precision(precision),
                     impose_sampling=temperature is not None, tokenizer=tokenizer)
    try:
        with ex, agent_session(spec, run_dir, tasks, options, announce=announce_server(model)) as session, \
                contextlib.ExitStack() as judging:
            settings = {"tasks": str(tasks_path), **session.settings}
            if judge_model:
                served = {model: session.settings["base_url"]} if session.settings.get("base_url") else None
                options.judge = build_judge(
                    judging, judge_model, judge_endpoint, run_dir=run_dir, samples=judge_samples,
                    temperature=judge_temperature, seed=judge_seed, max_tokens=judge_max_tokens,
                    concurrency=llm_concurrency, timeout=request_timeout, cache_dir=run_dir / "judge_cache",
                    announce=announce_judge_server(err), served=served)
                settings["judge"] = judge_settings(options.judge)
            with progress:
                report = run_rollout(
                    tasks, session.factory, backend, run_dir, options, on_start=on_start, on_done=on_done,
                    settings=settings, tasks_file=tasks_path,
                )
            if session.usage_line():
                err.print(session.usage_line(), highlight=False)
            if options.judge is not None:
                err.print(judge_usage_line(options.judge), highlight=False)
    finally:
        backend.close()
    out.print(render_table(summarize(report.all), title=f"{run_dir}"))
    out.print(f"trajectories: {run_dir / 'trajectories.jsonl'}", highlight=False)
    if progress_rewards:
        from clawgym.verify.progress import fallback_line

        if line := fallback_line(report.all):
            err.print(line, highlight=False)
    if judge_model:
        _warn_unjudged(report, tasks, run_dir, judge_model[0])
    _finish(report, bad)


def _select_tasks(tasks_path: Path, task_ids: list[str] | None, limit: int | None) -> tuple[list, list]:
    """The tasks to run (`--task` ids, the first `--limit`), and the errors of the file's bad lines."""
    tasks, bad = load_tasks(tasks_path)
    if task_ids:
        wanted = set(task_ids)
        missing = wanted - {t.id for t in tasks}
        if missing:
            fail(f"{tasks_path}: no task with id {', '.join(sorted(missing))}", 2)
        tasks = [t for t in tasks if t.id in wanted]
    if limit:
        tasks = tasks[:limit]
    return tasks, bad


def _check_run_dir(run_dir: Path, agent: str) -> None:
    """Exit 2 when `run_dir` holds a run of another agent (a resumed run keeps its agent)."""
    prior = run_dir / "run.json"
    if prior.exists():
        prev = json.loads(prior.read_text()).get("agent")
        if prev and prev != agent:
            fail(f"{run_dir} holds a run of agent {prev!r}; use another run dir for agent {agent!r}", 2)


def _progress(description: str, run_dir: Path) -> tuple[Any, Any, Any]:
    """The progress bar (episodes done, the running mean score and infrastructure errors) and its callbacks."""
    progress = progress_bar(status=True)
    state = {"bar": None, "scored": 0, "sum": 0.0, "infra": 0}

    def on_start(total: int, skipped: int) -> None:
        if skipped:
            err.print(f"resuming: {skipped} episodes already done in {run_dir}", highlight=False)
        state["bar"] = progress.add_task(description, total=total, status="")

    def on_done(t) -> None:
        if t.status == "infra_error":
            state["infra"] += 1
        elif t.score is not None:
            state["scored"] += 1
            state["sum"] += t.score
        mean = state["sum"] / state["scored"] if state["scored"] else 0.0
        progress.update(state["bar"], advance=1, status=f"mean {mean:.3f}, infra errors {state['infra']}")

    return progress, on_start, on_done


def _warn_unjudged(report: Any, tasks: list, run_dir: Path, judge_model: str) -> None:
    """Warn of episodes of rubric tasks done before this run without a judge (a resumed run judges only its own)."""
    rubric = {t.id for t in tasks if t.verifier.rubric is not None}
    now = {t.id for t in report.ran}
    unjudged = sorted(t.id for t in report.all if t.task_id in rubric and t.id not in now
                      and "judge" not in t.metadata and t.status in ("completed", "agent_error", "timeout"))
    if unjudged:
        err.print(f"[bold yellow]warning:[/] {len(unjudged)} episodes of tasks with a rubric were done before "
                  f"this run without a judge (first: {unjudged[0]}); `clawgym verify {run_dir} --judge-model "
                  f"{judge_model}` judges them", highlight=False, soft_wrap=True)


def _finish(report: Any, bad: list) -> None:
    """Exit 1 when bad task lines were not run, 3 when episodes ended in an infrastructure error."""
    infra = [t for t in report.all if t.status == "infra_error"]
    if infra:
        # an outage must not look like a finished run to a script: rerunning the command redoes these episodes
        first = infra[0].error.message if infra[0].error else ""
        err.print(f"[bold red]{len(infra)} of {len(report.all)} episodes ended in an infrastructure error[/] "
                  f"(first: {infra[0].id}: {first[:200]}); rerun the same command to redo them", highlight=False,
                  soft_wrap=True)
    if bad:
        err.print(f"[bold red]{len(bad)} bad task lines were not run[/] (see errors above)")
        raise typer.Exit(1)
    if infra:
        raise typer.Exit(3)
