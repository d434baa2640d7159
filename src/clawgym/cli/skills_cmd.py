"""`clawgym skills list|import|annotate`: the skills catalog (OpenClaw SKILL.md folders) and its annotations."""

from __future__ import annotations

import json
import sys
import tempfile
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

out = Console()
err = Console(stderr=True)

skills_app = typer.Typer(no_args_is_help=True, help="The skills catalog: list, import and annotate SKILL.md skills.")


def _fail(message: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _error_lines(errors) -> None:
    for e in errors:
        err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)


@contextmanager
def _client(model: str | None, base_url: str | None, timeout: float, log_dir: Path | None):
    """An LLMClient for `model` (the embedded server started for local models without a base URL), or None."""
    if model is None:
        yield None
        return
    from clawgym.llm import LLMClient, model_endpoint

    with ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory())) if log_dir is None else log_dir

        def announce(server) -> None:
            err.print(f"starting the embedded model server for {model} on {server.base_url} (log: {server.log_path})",
                      highlight=False)

        url = stack.enter_context(model_endpoint(model, base_url, log_path=logs / "annotate-server.log",
                                                 on_start=announce))
        # one retry: a model that timed out on a long skill prompt is not helped by asking four more times
        client = LLMClient(model, url, timeout=timeout, max_retries=1)
        stack.callback(client.close)
        yield client


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


@skills_app.command("list")
def list_cmd(
    catalog: Path | None = typer.Option(None, "--catalog", help="Skills folder (default: skills/ or $CLAWGYM_SKILLS)."),
    operation: str | None = typer.Option(None, "--operation", help="Only skills annotated with this operation id."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per skill instead of a table."),
) -> None:
    """List the skills of a catalog with their annotations."""
    from clawgym.core.errors import ClawgymError
    from clawgym.skills import load_catalog
    from clawgym.synth.skill_route import eligible

    try:
        cat = load_catalog(catalog, strict=False)
    except ClawgymError as exc:
        _fail(str(exc))
    skills = cat.with_operation(operation) if operation else list(cat)
    if as_json:
        for s in skills:
            rec = {"name": s.name, "description": s.description, "path": str(s.path),
                   "annotations": s.annotations.as_metadata() if s.annotations else None,
                   "synth_eligible": eligible(s)}
            sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")
    else:
        table = Table(title=f"skills in {cat.root}")
        for col in ("name", "lang", "operations", "auth", "risk", "text-only", "by"):
            table.add_column(col)
        for s in skills:
            a = s.annotations
            if a is None:
                table.add_row(s.name, "-", "(not annotated)", "-", "-", "-", "-")
            else:
                table.add_row(s.name, a.language, ", ".join(a.operations), _yn(a.auth_required), _yn(a.has_risk),
                              _yn(a.text_only_compatible), a.annotated_by)
        out.print(table)
        n_ann = sum(1 for s in skills if s.annotations)
        out.print(f"{len(skills)} skills, {n_ann} annotated, {sum(eligible(s) for s in skills)} usable by "
                  f"`synth skill`; {len(cat.errors)} unreadable", highlight=False)
    _error_lines(cat.errors)
    if cat.errors:
        raise typer.Exit(1)


@skills_app.command("import")
def import_cmd(
    source: Path = typer.Argument(..., metavar="DIR", help="A folder of skills (OpenClaw skills dir, ClawHub download)."),
    into: Path | None = typer.Option(None, "--into", help="Catalog to import into (default: skills/ or $CLAWGYM_SKILLS)."),
    annotate: bool = typer.Option(True, help="Annotate skills that have no annotations (rules, or --model)."),
    model: str | None = typer.Option(None, "--model", help="Annotate with this model (else by rules)."),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (else $OPENAI_BASE_URL)."),
    overwrite: bool = typer.Option(False, help="Replace skills of the same name already in the catalog."),
    request_timeout: float = typer.Option(300.0, min=1.0, help="Seconds one model call may take."),
) -> None:
    """Import every SKILL.md skill under DIR (nested folders too) into the catalog."""
    from clawgym.core.errors import ClawgymError
    from clawgym.skills import default_skills_dir, import_skills

    dest = into or default_skills_dir()
    try:
        with _client(model if annotate else None, base_url, request_timeout, None) as client:
            result = import_skills(source, dest, client=client, annotate=annotate, overwrite=overwrite)
    except ClawgymError as exc:
        _fail(str(exc))
    for s in result.imported:
        a = s.annotations
        how = f"{a.annotated_by}: {', '.join(a.operations)}" if a else "not annotated"
        note = f" ({a.note})" if a and a.note else ""
        out.print(f"imported {s.name} -> {s.folder} [{how}]{note}", highlight=False, soft_wrap=True, markup=False)
    for name, why in sorted(result.skipped.items()):
        out.print(f"skipped {name}: {why}", highlight=False)
    out.print(f"{len(result.imported)} imported, {len(result.skipped)} skipped, {len(result.errors)} not importable "
              f"-> {dest}", highlight=False)
    _error_lines(result.errors)
    if result.errors:
        raise typer.Exit(1)


@skills_app.command("annotate")
def annotate_cmd(
    catalog: Path | None = typer.Option(None, "--catalog", help="Skills folder (default: skills/ or $CLAWGYM_SKILLS)."),
    model: str | None = typer.Option(None, "--model", help="Annotate with this model; without it, by rules offline."),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (else $OPENAI_BASE_URL; "
                                        "a local model is served on 127.0.0.1 when neither is given)."),
    force: bool = typer.Option(False, "--force", help="Re-annotate skills that already have annotations."),
    skill: list[str] | None = typer.Option(None, "--skill", help="Only this skill (repeatable)."),
    jobs: int = typer.Option(4, "-j", "--jobs", min=1, help="Model calls in flight at once."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the annotations without writing them."),
    request_timeout: float = typer.Option(300.0, min=1.0, help="Seconds one model call may take."),
) -> None:
    """Add ClawGym's annotations (operations, language, summary, auth_required, has_risk, required_env,
    text_only_compatible) to the skills that lack them, in their SKILL.md front matter (`metadata.clawgym`)."""
    from clawgym.core.errors import ClawgymError
    from clawgym.skills import annotate_catalog

    def show(name: str, a) -> None:
        note = f" - {a.note}" if a.note else ""
        out.print(f"{name}: [{a.annotated_by}] {', '.join(a.operations)}; lang {a.language}; auth {_yn(a.auth_required)}"
                  f", risk {_yn(a.has_risk)}, text-only {_yn(a.text_only_compatible)}{note}", highlight=False,
                  soft_wrap=True, markup=False)
        if dry_run:
            out.print(json.dumps(a.as_metadata(), ensure_ascii=False), highlight=False, soft_wrap=True, markup=False)

    try:
        with _client(model, base_url, request_timeout, None) as client:
            report = annotate_catalog(catalog, client=client, force=force, names=skill or None, jobs=jobs,
                                      write=not dry_run, on_progress=show)
    except ClawgymError as exc:
        _fail(str(exc))
    fell = len(report.fallbacks)
    out.print(f"{len(report.annotated)} annotated{' (not written: --dry-run)' if dry_run else ''}, "
              f"{len(report.kept)} already annotated (--force to redo)"
              + (f", {fell} by rules after the model failed" if model else ""), highlight=False)
    _error_lines(report.errors)
    if report.errors:
        raise typer.Exit(1)


def synth_skill_cmd(
    n: int = typer.Option(..., "-n", min=1, help="Number of tasks to write."),
    seed: int = typer.Option(0, "--seed", help="Seed: the same seed gives the same file, byte for byte."),
    output: Path = typer.Option(..., "-o", "--output", help="tasks.jsonl to write (resumed if it exists)."),
    skill: list[str] | None = typer.Option(None, "--skill", help="Only these skills as primary skill (repeatable)."),
    catalog: Path | None = typer.Option(None, "--catalog", help="Skills folder (default: skills/ or $CLAWGYM_SKILLS)."),
    jobs: int = typer.Option(2, "-j", "--jobs", min=1, help="Worker processes."),
    sandbox: str = typer.Option("bwrap", help="Sandbox for validation: bwrap, docker, local, or a registered third-party backend."),
    validate: bool = typer.Option(True, help="Validate each task in a sandbox before writing it."),
    taxonomy: Path | None = typer.Option(None, help="Taxonomy YAML (default: the packaged one)."),
    personas: Path | None = typer.Option(None, help="Personas YAML (default: personas/personas.yaml)."),
    generator: str = typer.Option("template", help="template (offline, deterministic) or llm (a model writes each task; -n counts candidates)."),
    model: str = typer.Option("smollm2-135m", help="llm generator: a served model name, an embedded model or a local model dir."),
    base_url: str | None = typer.Option(None, help="llm generator: OpenAI-compatible endpoint (else $OPENAI_BASE_URL; else the embedded server for a local --model)."),
    max_repairs: int = typer.Option(3, min=0, help="llm generator: repair rounds after a failed check."),
    max_tokens: int = typer.Option(4096, min=16, help="llm generator: completion tokens per model call."),
    temperature: float = typer.Option(0.7, min=0.0, help="llm generator: sampling temperature."),
    review: bool = typer.Option(True, help="llm generator: have the model review each validated task for answer leaks and factual errors."),
    dedup: bool | None = typer.Option(None, "--dedup/--no-dedup", help="Drop near-duplicates (MiniLM cosine >= 0.90 within a category). Default: on for llm, off for template."),
    dedup_against: list[Path] | None = typer.Option(None, "--dedup-against", help="llm generator: also count tasks of these files as already kept (repeatable)."),
    executor: str = typer.Option("local", "--executor", help="Where validation runs: local (-j worker processes) or ray (a worker per sandbox slot of a Ray cluster's nodes; same bytes)."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="--executor ray: the cluster (default: $RAY_ADDRESS, else one running here, else a local instance)."),
) -> None:
    """Skill-grounded tasks: a primary skill (plus up to two supporting ones) becomes one multi-step workflow,
    with the skills in the task's workspace at skills/<name>/SKILL.md; validated like `synth persona`."""
    if generator not in ("template", "llm"):
        _fail(f"unknown generator {generator!r}; choose template or llm")
    from clawgym.cli.app import synth_executor

    ex = synth_executor(executor, ray_address, jobs, sandbox, generator)
    if generator == "llm":
        from clawgym.cli.app import run_llm_synth
        from clawgym.core.errors import ClawgymError
        from clawgym.synth.llm_route import skill_briefs

        try:
            briefs = skill_briefs(n, seed, skills_dir=catalog, skills=skill, taxonomy_path=taxonomy,
                                  personas_path=personas)
        except ClawgymError as exc:
            _fail(str(exc))
        run_llm_synth(briefs, output, route="skill", model=model, base_url=base_url, sandbox=sandbox, jobs=jobs,
                      max_repairs=max_repairs, max_tokens=max_tokens, temperature=temperature, review=review,
                      dedup=dedup is not False, dedup_against=dedup_against or [])
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from clawgym.core.errors import ClawgymError
    from clawgym.synth.skill_route import SkillRouteConfig, load_state, synthesize_skill_tasks

    try:  # bad catalogs, skill names and data files fail here, before any output
        load_state(SkillRouteConfig(
            skills_dir=str(catalog) if catalog else None, taxonomy_path=str(taxonomy) if taxonomy else None,
            personas_path=str(personas) if personas else None, primary=tuple(skill or ())))
    except ClawgymError as exc:
        _fail(str(exc))
    progress = Progress(TextColumn("[bold]synth skill"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err)
    bar = progress.add_task("synth", total=n)
    try:
        with ex or nullcontext(), progress:
            report = synthesize_skill_tasks(
                n, seed, output, jobs=jobs, skills_dir=catalog, skills=skill, taxonomy_path=taxonomy,
                personas_path=personas, sandbox=sandbox, validate=validate,
                on_progress=lambda done, total: progress.update(bar, completed=done), executor=ex)
    except ClawgymError as exc:
        _fail(str(exc))
    report_path = output.with_name(output.name + ".report.json")
    counts = json.loads(report_path.read_text()) if report_path.exists() else {}
    table = Table(title="tasks per primary skill")
    table.add_column("skill")
    table.add_column("tasks", justify="right")
    for k, v in (counts.get("by_primary_skill") or {}).items():
        table.add_row(k, str(v))
    out.print(table)
    rej = ", ".join(f"{k}={v}" for k, v in sorted(report.rejected.items())) or "none"
    out.print(f"wrote {report.written} tasks ({report.resumed} already there) -> {output}; rejected: {rej}",
              highlight=False)
    out.print(f"report: {report_path}", highlight=False)
    if dedup:
        from clawgym.cli.app import _dedup_in_place

        _dedup_in_place(output)
