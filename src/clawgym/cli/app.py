"""The `clawgym` command line: a thin layer over the library, one command per stage."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import typer

from clawgym import __version__
from clawgym.cli.common import announce_server, err, error_line, error_lines, fail, out, progress_bar
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
    unreachable_judge_model,
)
from clawgym.cli.options import (
    STRICT_IMPORT,
    TASK_IDS,
    TASKS_ARG,
    base_url_option,
    executor_option,
    jobs_option,
    model_option,
    output_option,
    precision_option,
    ray_address_option,
    request_timeout_option,
    sandbox_option,
    server_precision,
)
from clawgym.core.errors import ClawgymError

app = typer.Typer(
    name="clawgym", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="Synthesize, run, verify and train Claw-style personal agents in sandboxed workspaces.",
)
import_app = typer.Typer(no_args_is_help=True, help="Import outside data: tasks (ClawGym folders and Hub corpus, "
                         "PinchBench) into tasks.jsonl, trajectories (OpenAI messages) into SFT records.")
workspace_app = typer.Typer(no_args_is_help=True, help="Materialize task workspaces as real files.")
sandbox_app = typer.Typer(no_args_is_help=True, help="Build the sandbox image and check the backends.")
export_app = typer.Typer(no_args_is_help=True, help="Export tasks, trajectories and SFT data to outside formats "
                         "(PinchBench, OpenAI messages, Hugging Face datasets).")
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")
app.add_typer(workspace_app, name="workspace")
app.add_typer(sandbox_app, name="sandbox")
from clawgym.cli.synth_cmd import synth_app  # noqa: E402

app.add_typer(synth_app, name="synth")
from clawgym.cli.pool_cmd import pool_app  # noqa: E402  (sub-apps live in their own modules)

app.add_typer(pool_app, name="pool")
from clawgym.cli.verify_cmd import verify_cmd  # noqa: E402

app.command("verify")(verify_cmd)
from clawgym.cli.train_cmd import filter_cmd, train_app  # noqa: E402

app.command("filter")(filter_cmd)
app.add_typer(train_app, name="train")
from clawgym.cli.agents_cmd import agents_app  # noqa: E402

app.add_typer(agents_app, name="agents")
from clawgym.cli.skills_cmd import skills_app  # noqa: E402

app.add_typer(skills_app, name="skills")
from clawgym.cli.view_cmd import view_cmd  # noqa: E402

app.command("view")(view_cmd)
from clawgym.cli.data_cmd import register as register_data_cmds  # noqa: E402

register_data_cmds(import_app, export_app)


def _load_tasks(path: Path):
    """All good tasks of a tasks file, and the one-line errors of the bad lines."""
    from clawgym.core.jsonl import read_records_lenient
    from clawgym.core.records import Task

    if not path.exists():
        fail(f"{path}: no such file")
    read = read_records_lenient(path, Task)
    error_lines(read.errors)
    return read.records, read.errors


@app.command()
def version() -> None:
    """Print the clawgym version."""
    out.print(__version__)


@app.command()
def schema(
    record: str | None = typer.Argument(None, help="Record name: task, trajectory, verdict, workspace, verifier."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout."),
) -> None:
    """Print the JSON Schema of a record type (all of them when no name is given)."""
    from clawgym.core.records import RECORD_TYPES
    from clawgym.core.schema import record_schema

    if record is not None and record not in RECORD_TYPES:
        fail(f"unknown record {record!r}; known: {', '.join(sorted(RECORD_TYPES))}", 2)
    data = record_schema(record) if record else {name: record_schema(name) for name in sorted(RECORD_TYPES)}
    text = json.dumps(data, indent=2)
    if output:
        output.write_text(text + "\n")
    else:
        sys.stdout.write(text + "\n")


@app.command()
def validate(
    path: Path = typer.Argument(..., help="A JSONL file of records."),
    record: str = typer.Option("task", help="Record type of each line: task, trajectory, ..."),
) -> None:
    """Check every line of a JSONL file against its record type; list every bad line."""
    from clawgym.core.jsonl import read_records_lenient
    from clawgym.core.records import RECORD_TYPES

    if record not in RECORD_TYPES:
        fail(f"unknown record {record!r}; known: {', '.join(sorted(RECORD_TYPES))}", 2)
    if not path.exists():
        fail(f"{path}: no such file")
    read = read_records_lenient(path, RECORD_TYPES[record])
    error_lines(read.errors)
    unknown = _unknown_checks(read.records) if record == "task" else []
    for line in unknown:
        err.print(f"{path}: {line}", highlight=False, soft_wrap=True)
    out.print(f"{path}: {len(read.records) - len(unknown)} valid {record} records, "
              f"{len(read.errors) + len(unknown)} bad lines")
    if read.errors or unknown:
        raise typer.Exit(1)


def _unknown_checks(tasks: list) -> list[str]:
    """Tasks whose checks (as data) name a function this clawgym's check library does not register."""
    from clawgym.checks import UnknownCheckError, validate_call

    bad = []
    for t in tasks:
        code = t.verifier.code
        for call in (code.checks if code is not None and code.kind == "checks" else []):
            try:
                validate_call(call)
            except UnknownCheckError as exc:
                bad.append(f"task {t.id}: {exc}")
                break
    return bad


@app.command()
def show(
    tasks_path: Path = TASKS_ARG,
    task_ids: list[str] | None = TASK_IDS,
    limit: int = typer.Option(5, min=1, help="How many tasks to show."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write Markdown to this file."),
) -> None:
    """Render tasks as readable Markdown: request, workspace, checks, reference solution."""
    from rich.markdown import Markdown

    from clawgym.core.render import task_markdown

    tasks, bad = _load_tasks(tasks_path)
    if task_ids:
        tasks = [t for t in tasks if t.id in set(task_ids)]
    text = "\n".join(task_markdown(t) for t in tasks[:limit])
    if output:
        output.write_text(text)
        out.print(f"wrote {min(limit, len(tasks))} tasks to {output}", highlight=False)
    else:
        out.print(Markdown(text))
    if bad:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------ import


def _write_import(result, output: Path, strict: bool, label: str) -> None:
    from clawgym.core.jsonl import write_records

    for f in result.failures:
        err.print(f"[yellow]not imported:[/] {f}", highlight=False, soft_wrap=True)
    if not result.tasks:
        fail(f"no {label} tasks imported; nothing written to {output}")
    n = write_records(output, result.tasks)
    out.print(f"imported {n} {label} tasks -> {output} ({len(result.failures)} not imported)")
    if strict and result.failures:
        raise typer.Exit(1)


@import_app.command("clawgym")
def import_clawgym_cmd(
    root: Path = typer.Argument(..., help="A ClawGym task folder, or a folder of them (RL/data/...)."),
    output: Path = output_option("tasks.jsonl to write."),
    strict: bool = STRICT_IMPORT,
) -> None:
    """Import ClawGym RL task folders (data_entry.json, input_files/, reward/reward.sh)."""
    from clawgym.importers import import_clawgym

    if not root.is_dir():
        fail(f"{root}: not a directory")
    _write_import(import_clawgym(root), output, strict, "ClawGym")


@import_app.command("pinchbench")
def import_pinchbench_cmd(
    root: Path = typer.Argument(..., help="A PinchBench checkout (with tasks/ and assets/) or its tasks/ folder."),
    output: Path = output_option("tasks.jsonl to write."),
    link_assets: bool = typer.Option(False, help="Reference assets by path (relative to the output's directory, "
                                     "which must contain the checkout's assets/) instead of inlining them."),
    offline_only: bool = typer.Option(False, help="Leave out tasks that need the network or outside services."),
    strict: bool = STRICT_IMPORT,
) -> None:
    """Import PinchBench task files (front matter, prompt, grade() checks, judge rubric, assets)."""
    from clawgym.importers import import_pinchbench

    if not root.is_dir():
        fail(f"{root}: not a directory")
    # linked assets are referenced relative to the tasks file's directory, the only place they may come from
    result = import_pinchbench(root, inline_assets=not link_assets, assets_base=output.parent)
    if offline_only:
        dropped = [t.id for t in result.tasks if t.metadata.get("requires_network")]
        result.tasks = [t for t in result.tasks if not t.metadata.get("requires_network")]
        if dropped:
            err.print(f"left out (need the network): {', '.join(dropped)}", highlight=False)
    _write_import(result, output, strict, "PinchBench")


@export_app.command("pinchbench")
def export_pinchbench_cmd(
    tasks_path: Path = TASKS_ARG,
    output: Path = output_option("The folder to write (tasks/task_<id>.md and assets/), a PinchBench checkout."),
    task_ids: list[str] | None = TASK_IDS,
) -> None:
    """Export tasks as PinchBench task files; checks as data become a self-contained grade()."""
    from clawgym.importers.pinchbench import write_export

    tasks, bad = _load_tasks(tasks_path)
    if task_ids:
        tasks = [t for t in tasks if t.id in set(task_ids)]
    written, failed = 0, 0
    for task in tasks:
        try:
            write_export(task, output)
        except ValueError as exc:
            err.print(f"[yellow]not exported:[/] {exc}", highlight=False, soft_wrap=True)
            failed += 1
            continue
        written += 1
    out.print(f"exported {written} tasks -> {output}/tasks ({failed} not exported)", highlight=False)
    if bad or failed:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------ workspace


@workspace_app.command("build")
def workspace_build(
    tasks_path: Path = TASKS_ARG,
    out_dir: Path = typer.Option(..., "--out", help="Directory to build one workspace per task into."),
    overwrite: bool = typer.Option(False, help="Rebuild workspaces that already exist."),
) -> None:
    """Materialize each task's workspace files into OUT/<task id>/."""
    from clawgym.workspace import build_workspaces

    tasks, bad = _load_tasks(tasks_path)
    results = build_workspaces(tasks, out_dir, base_dir=tasks_path.parent.resolve(), overwrite=overwrite)
    failed = 0
    for task_id, res in results:
        if isinstance(res, Exception):
            failed += 1
            err.print(f"[bold red]error:[/] {task_id}: {res}", highlight=False, soft_wrap=True)
    out.print(f"built {len(results) - failed} workspaces in {out_dir} ({failed} failed, {len(bad)} bad lines)")
    if failed or bad:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------ sandbox


@sandbox_app.command("build")
def sandbox_build(
    force: bool = typer.Option(False, help="Rebuild even if the image exists."),
    docker: bool = typer.Option(True, help="Also import the root filesystem into Docker (when an engine runs)."),
    mirror: str | None = typer.Option(None, help="Debian mirror for debootstrap."),
) -> None:
    """Build the sandbox root filesystem (debootstrap) and import it as a Docker image."""
    from clawgym.sandbox.image import build_rootfs, import_docker_image

    rootfs = build_rootfs(mirror=mirror, force=force, log=lambda m: err.print(m, highlight=False))
    if docker:
        from clawgym.sandbox.base import SandboxUnavailable
        from clawgym.sandbox.docker import DockerBackend

        try:
            client = DockerBackend().client
        except SandboxUnavailable as exc:
            err.print(f"[yellow]skipping the Docker image:[/] {exc}", highlight=False)
            return
        import_docker_image(client, rootfs, force=force, log=lambda m: err.print(m, highlight=False))


@sandbox_app.command("check")
def sandbox_check() -> None:
    """Report which sandbox backends work here (every registered one, third-party ones included), and why not."""
    from rich.table import Table

    from clawgym.sandbox import check_backends, is_isolated
    from clawgym.sandbox.cgroups import cgroup_mode
    from clawgym.sandbox.image import find_rootfs

    table = Table(title="sandbox backends")
    for col in ("backend", "works", "isolated", "details"):
        table.add_column(col)
    results = check_backends()
    isolated_ok = False
    for name, (ok, why) in results.items():
        try:
            isolated = is_isolated(name)
        except Exception:  # noqa: BLE001 - a plugin that does not load is reported by its check
            isolated = False
        isolated_ok = isolated_ok or (ok and isolated)
        table.add_row(name, "[green]yes[/]" if ok else "[red]no[/]", "yes" if isolated else "NO", why)
    out.print(table)
    out.print(f"image root filesystem: {find_rootfs() or 'not built (clawgym sandbox build)'}", highlight=False)
    out.print(f"cgroup limits: {cgroup_mode() or 'unavailable (rlimits only)'}", highlight=False)
    if not isolated_ok:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------ rollout


@app.command()
def rollout(
    tasks_path: Path = TASKS_ARG,
    agent: str = typer.Option("noop", help="Agent: llm (a model through tools), openclaw (OpenClaw in the sandbox; `clawgym agents install openclaw`), noop (does nothing), oracle (replays the reference)."),
    model: str = model_option("Model of the llm agent: a served name, an embedded model or a local model dir."),
    base_url: str | None = base_url_option("OpenAI-compatible endpoint (else $OPENAI_BASE_URL; else the embedded server is started for a local --model)."),
    max_turns: int = typer.Option(30, min=1, help="llm agent: model calls per session."),
    max_tokens: int = typer.Option(1024, min=1, help="llm agent: completion tokens per model call."),
    max_total_tokens: int | None = typer.Option(None, min=1, help="llm agent: tokens per episode."),
    temperature: float | None = typer.Option(None, min=0.0, help="Sampling temperature (llm agent: default 0; "
                                              "openclaw: when given, the gateway sets it on every call the agent makes)."),
    llm_concurrency: int = typer.Option(16, min=1, help="Model calls in flight at once, over all episodes."),
    request_timeout: float = request_timeout_option(),
    stream: bool = typer.Option(False, help="Ask the model for streamed responses."),
    episode_timeout: float | None = typer.Option(None, min=1.0, help="Wall time of one episode (default: the task's)."),
    infra_retries: int = typer.Option(2, min=0, help="Fresh attempts of an episode after an infrastructure error."),
    gateway: bool = typer.Option(True, help="llm agent: record every model call in RUN_DIR/pool through the gateway."),
    tokenizer: str | None = typer.Option(None, help="llm agent: the model's tokenizer (a local model dir or embedded "
                                         "name) for engines that return no token ids (llama.cpp, Ollama, OpenAI): "
                                         "the gateway re-tokenizes each step and marks it so. Default: --model's, "
                                         "when it is a local model."),
    policy_version: str | None = typer.Option(None, help="Policy version stamped on recorded steps."),
    precision: str = precision_option(),
    sandbox: str = sandbox_option("auto", "Sandbox backend: auto, bwrap, docker, local (NO isolation), or a registered third-party one (`clawgym sandbox check` lists them)."),
    jobs: int = jobs_option(4, "Episodes run at once."),
    samples: int = typer.Option(1, "-k", "--samples", min=1, help="Episodes per task."),
    run_dir: Path = output_option("Run directory (trajectories.jsonl, logs, workspaces)."),
    task_ids: list[str] | None = TASK_IDS,
    limit: int | None = typer.Option(None, min=1, help="Only the first N tasks."),
    keep_workspaces: bool = typer.Option(True, help="Keep each episode's final workspace in the run dir."),
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
    from clawgym.agent import get_agent
    from clawgym.rollout import RolloutOptions, render_table, run_rollout, summarize
    from clawgym.rollout.executor import make_executor
    from clawgym.rollout.setup import AgentSpec, agent_session
    from clawgym.sandbox import SandboxLimits, get_backend

    judge_endpoint = judge_url(judge_base_url)
    if judge_model:
        if executor != "local":
            fail(f"--judge-model judges episodes where they run: it needs --executor local, not {executor!r}; "
                 "judge a cluster run afterwards with `clawgym verify RUN_DIR --judge-model M`", 2)
        own = {model: ""} if agent in ("llm", "openclaw") else None
        bad = unreachable_judge_model(judge_model, judge_endpoint, own)
        if bad is not None:
            fail(f"judge model {bad!r} is not a local model; give --judge-base-url (or set OPENAI_BASE_URL)", 2)
    try:
        if agent not in ("llm", "openclaw"):
            get_agent(agent)
        backend = get_backend(sandbox)
        ex = make_executor(executor, jobs=jobs, ray_address=ray_address, sandbox=backend.name)
    except (ValueError, ClawgymError) as exc:
        fail(str(exc), 2)
    tasks, bad = _load_tasks(tasks_path)
    if task_ids:
        wanted = set(task_ids)
        missing = wanted - {t.id for t in tasks}
        if missing:
            fail(f"{tasks_path}: no task with id {', '.join(sorted(missing))}", 2)
        tasks = [t for t in tasks if t.id in wanted]
    if limit:
        tasks = tasks[:limit]
    prior = run_dir / "run.json"
    if prior.exists():
        prev = json.loads(prior.read_text()).get("agent")
        if prev and prev != agent:
            fail(f"{run_dir} holds a run of agent {prev!r}; use another run dir for agent {agent!r}", 2)
    if sandbox == "local":
        err.print("[bold yellow]warning:[/] sandbox 'local' runs commands on this host with NO isolation")
    options = RolloutOptions(
        samples=samples, jobs=jobs, keep_workspaces=keep_workspaces, base_dir=tasks_path.parent.resolve(),
        infra_retries=infra_retries, episode_timeout=episode_timeout, executor=ex,
        limits=SandboxLimits(memory_mb=memory_mb, max_processes=max_processes, exec_timeout_s=exec_timeout,
                             network=network),
    )
    progress = progress_bar(status=True)
    state = {"bar": None, "scored": 0, "sum": 0.0, "infra": 0}

    def on_start(total: int, skipped: int) -> None:
        if skipped:
            err.print(f"resuming: {skipped} episodes already done in {run_dir}", highlight=False)
        state["bar"] = progress.add_task(f"{agent} @ {backend.name}", total=total, status="")

    def on_done(t) -> None:
        if t.status == "infra_error":
            state["infra"] += 1
        elif t.score is not None:
            state["scored"] += 1
            state["sum"] += t.score
        mean = state["sum"] / state["scored"] if state["scored"] else 0.0
        progress.update(state["bar"], advance=1, status=f"mean {mean:.3f}, infra errors {state['infra']}")

    spec = AgentSpec(agent, model, base_url, max_turns, max_tokens, max_total_tokens, temperature or 0.0,
                     llm_concurrency, request_timeout, stream, gateway, policy_version, precision=server_precision(precision),
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
    if judge_model:
        rubric = {t.id for t in tasks if t.verifier.rubric is not None}
        now = {t.id for t in report.ran}
        unjudged = sorted(t.id for t in report.all if t.task_id in rubric and t.id not in now
                          and "judge" not in t.metadata and t.status in ("completed", "agent_error", "timeout"))
        if unjudged:
            err.print(f"[bold yellow]warning:[/] {len(unjudged)} episodes of tasks with a rubric were done before "
                      f"this run without a judge (first: {unjudged[0]}); `clawgym verify {run_dir} --judge-model "
                      f"{judge_model[0]}` judges them", highlight=False, soft_wrap=True)
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


@app.command("eval")
def eval_cmd(
    bench: str = typer.Option(..., "--bench", help="clawgym-bench (ClawGym's published ClawGym-Bench), "
                              "clawgym-bench-offline (without its tasks that need the network), synth-bench-200 "
                              "(our own synthesized suite, formerly clawgym-bench), pinchbench:PATH, "
                              "pinchbench-offline:PATH, clawgym-folder:PATH or a tasks.jsonl."),
    data: str | None = typer.Option(None, "--data", metavar="PATH", help="clawgym-bench: the folder of ClawGym-Bench's "
                                    "200 task folders (else $CLAWGYM_BENCH_DATA, else the Hugging Face Hub dataset "
                                    "RUC-AIBOX/ClawGym-Bench, cached; HF_HUB_OFFLINE=1 uses the cache only)."),
    agent: str = typer.Option("llm", help="Agent: llm, openclaw, noop or oracle."),
    model: str = model_option("Model of the llm agent (embedded name, local dir, or served name)."),
    base_url: str | None = base_url_option("OpenAI-compatible endpoint (else $OPENAI_BASE_URL; else the embedded server)."),
    samples: int = typer.Option(1, "-k", "--samples", min=1, help="Runs (samples per task): pass@k, mean ± std over runs."),
    jobs: int = jobs_option(4),
    run_dir: Path = output_option("Run directory (trajectories, report.json/.md/.png)."),
    sandbox: str = sandbox_option("auto", "Sandbox backend: auto, bwrap, docker, or a registered third-party one."),
    max_turns: int = typer.Option(30, min=1),
    max_tokens: int = typer.Option(1024, min=1),
    temperature: float = typer.Option(0.0, min=0.0),
    limit: int | None = typer.Option(None, min=1, help="Only the first N tasks of the suite."),
    episode_timeout: float | None = typer.Option(None, min=1.0, help="Wall time of one episode (default: the task's). Raise it when many episodes share a slow local model."),
    gateway: bool = typer.Option(True, help="llm agent: record every model call in RUN_DIR/pool."),
    precision: str = precision_option(),
    llm_concurrency: int = typer.Option(16, min=1, help="Model calls in flight at once, over all episodes."),
    request_timeout: float = request_timeout_option(),
    stream: bool = typer.Option(False, help="Ask the model for streamed responses."),
    infra_retries: int = typer.Option(2, min=0, help="Fresh attempts of an episode after an infrastructure error."),
    tokenizer: str | None = typer.Option(None, help="llm agent: the model's tokenizer for engines that return no "
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
    from clawgym.rollout.executor import make_executor
    from clawgym.rollout.setup import AgentSpec
    from clawgym.sandbox import get_backend

    try:
        suite = load_suite(bench, data=data)
        for line in suite.deprecations:
            err.print(f"[bold yellow]deprecated:[/] {escape(line)}", highlight=False, soft_wrap=True)
        backend = get_backend(sandbox)
        ex = make_executor(executor, jobs=jobs, ray_address=ray_address, sandbox=backend.name)
    except (ValueError, ClawgymError) as exc:
        fail(str(exc), 2)
    if limit:
        suite.tasks = suite.tasks[:limit]
    for note in suite.notes:
        err.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
    spec = AgentSpec(agent, model, base_url, max_turns=max_turns, max_tokens=max_tokens, temperature=temperature,
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


@app.command()
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


@app.command("gateway")
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


@app.command()
def summary(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories, trajectories.jsonl files, or conversation files "
                                          "(SFT data, trajectories imported in OpenAI-messages form)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    stats: bool = typer.Option(False, "--stats", help="Also print the trajectory statistics: rounds, tokens, tool "
                               "calls and distinct tool types per episode (always, for conversation files)."),
    prices: Path | None = typer.Option(None, "--prices", help="JSON {MODEL: {input: USD, output: USD}} per million "
                                       "tokens ('*' for any model): adds each run's cost."),
    tokenizer: str | None = typer.Option(None, "--tokenizer", metavar="MODEL", help="Conversation files: count tokens "
                                         "with this model's tokenizer and chat template (an embedded name or a model "
                                         "dir); else approximated as characters / 4."),
    max_len: int | None = typer.Option(None, "--max-len", min=1, help="Conversation files: list those longer than "
                                       "this many tokens (the training window, `train sft --max-len`)."),
) -> None:
    """Summarize one or more runs: one row per run, agent and model, with episodes, mean score, pass rate and
    errors by kind. Conversation files get the trajectory statistics, each conversation one episode."""
    from clawgym.core.jsonl import read_records
    from clawgym.core.records import Trajectory
    from clawgym.rollout import TRAJECTORIES, render_table, summarize
    from clawgym.rollout.summary import (
        is_conversation_file,
        load_prices,
        read_conversations,
        render_stats_table,
        summarize_digests,
        token_counter,
    )

    price_table = load_prices(prices) if prices is not None else None
    summaries, conversations, bad = [], [], []
    counter = None
    for rd in run_dirs:
        path = rd / TRAJECTORIES if rd.is_dir() else rd
        if not path.exists():
            fail(f"{path}: no such file")
        if path.is_file() and is_conversation_file(path):
            counter = counter or token_counter(tokenizer)
            digests, errors = read_conversations(path, counter)
            bad += errors
            conversations += summarize_digests(digests, run=str(rd), window=max_len)
            continue
        latest = {t.id: t for t in read_records(path, Trajectory)}
        summaries += summarize(list(latest.values()), run=str(rd), prices=price_table)
    error_lines(bad)
    if as_json:
        sys.stdout.write(json.dumps([s.as_dict() for s in summaries + conversations], indent=2) + "\n")
    else:
        if summaries:
            out.print(render_table(summaries, title="summary"))
            if stats:
                out.print(render_stats_table(summaries))
        if conversations:
            out.print(render_stats_table(conversations, title="conversation statistics (mean per conversation)"))
            out.print(f"tokens: {counter.label}", highlight=False)
        for s in conversations:
            if s.over_window:
                first = ", ".join(f"{n} ({k:,})" for n, k in s.over_window[:5])
                err.print(f"[bold yellow]{len(s.over_window)} of {s.ran} conversations in {s.run} are longer than "
                          f"{s.window:,} tokens[/] (`train sft --max-len {s.window}` cuts them there, keeping the "
                          f"start): {first}{', ...' if len(s.over_window) > 5 else ''}", highlight=False,
                          soft_wrap=True)
            elif s.window is not None:
                out.print(f"{s.run}: every conversation fits in {s.window:,} tokens (longest {s.max_tokens or 0:,})",
                          highlight=False)
    if bad:
        raise typer.Exit(1)


def main() -> None:
    try:
        app()
    except ClawgymError as exc:
        error_line(exc)
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted")
        # Records are appended whole and running sandboxes are stopped by then; exit now rather than join worker
        # threads that may still sit in a backend call (the interpreter joins them at exit otherwise).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)


if __name__ == "__main__":
    main()
