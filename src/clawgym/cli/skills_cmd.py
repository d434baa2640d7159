"""`clawgym skills list|import|annotate`: the skills catalog (OpenClaw SKILL.md folders) and its annotations."""

from __future__ import annotations

import json
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path

import typer
from rich.table import Table

from clawgym.cli.common import announce_server, error_lines, fail, out
from clawgym.cli.options import CATALOG, base_url_option, jobs_option, model_option, request_timeout_option

skills_app = typer.Typer(no_args_is_help=True, help="The skills catalog: list, import and annotate SKILL.md skills.")


@contextmanager
def _client(model: str | None, base_url: str | None, timeout: float, log_dir: Path | None):
    """An LLMClient for `model` (the embedded server started for local models without a base URL), or None."""
    if model is None:
        yield None
        return
    from clawgym.llm import LLMClient, model_endpoint

    with ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory())) if log_dir is None else log_dir
        url = stack.enter_context(model_endpoint(model, base_url, log_path=logs / "annotate-server.log",
                                                 on_start=announce_server(model)))
        # one retry: a model that timed out on a long skill prompt is not helped by asking four more times
        client = LLMClient(model, url, timeout=timeout, max_retries=1)
        stack.callback(client.close)
        yield client


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


@skills_app.command("list")
def list_cmd(
    catalog: Path | None = CATALOG,
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
        fail(str(exc))
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
    error_lines(cat.errors)
    if cat.errors:
        raise typer.Exit(1)


@skills_app.command("import")
def import_cmd(
    source: Path = typer.Argument(..., metavar="DIR", help="A folder of skills (OpenClaw skills dir, ClawHub download)."),
    into: Path | None = typer.Option(None, "--into", help="Catalog to import into (default: skills/ or $CLAWGYM_SKILLS)."),
    annotate: bool = typer.Option(True, help="Annotate skills that have no annotations (rules, or --model)."),
    model: str | None = model_option("Annotate with this model (else by rules).", default=None),
    base_url: str | None = base_url_option("OpenAI-compatible endpoint (else $OPENAI_BASE_URL)."),
    overwrite: bool = typer.Option(False, help="Replace skills of the same name already in the catalog."),
    request_timeout: float = request_timeout_option(),
) -> None:
    """Import every SKILL.md skill under DIR (nested folders too) into the catalog."""
    from clawgym.core.errors import ClawgymError
    from clawgym.skills import default_skills_dir, import_skills

    dest = into or default_skills_dir()
    try:
        with _client(model if annotate else None, base_url, request_timeout, None) as client:
            result = import_skills(source, dest, client=client, annotate=annotate, overwrite=overwrite)
    except ClawgymError as exc:
        fail(str(exc))
    for s in result.imported:
        a = s.annotations
        how = f"{a.annotated_by}: {', '.join(a.operations)}" if a else "not annotated"
        note = f" ({a.note})" if a and a.note else ""
        out.print(f"imported {s.name} -> {s.folder} [{how}]{note}", highlight=False, soft_wrap=True, markup=False)
    for name, why in sorted(result.skipped.items()):
        out.print(f"skipped {name}: {why}", highlight=False)
    out.print(f"{len(result.imported)} imported, {len(result.skipped)} skipped, {len(result.errors)} not importable "
              f"-> {dest}", highlight=False)
    error_lines(result.errors)
    if result.errors:
        raise typer.Exit(1)


@skills_app.command("annotate")
def annotate_cmd(
    catalog: Path | None = CATALOG,
    model: str | None = model_option("Annotate with this model; without it, by rules offline.", default=None),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (else $OPENAI_BASE_URL; "
                                        "a local model is served on 127.0.0.1 when neither is given)."),
    force: bool = typer.Option(False, "--force", help="Re-annotate skills that already have annotations."),
    skill: list[str] | None = typer.Option(None, "--skill", help="Only this skill (repeatable)."),
    jobs: int = jobs_option(4, "Model calls in flight at once."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the annotations without writing them."),
    request_timeout: float = request_timeout_option(),
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
        fail(str(exc))
    fell = len(report.fallbacks)
    out.print(f"{len(report.annotated)} annotated{' (not written: --dry-run)' if dry_run else ''}, "
              f"{len(report.kept)} already annotated (--force to redo)"
              + (f", {fell} by rules after the model failed" if model else ""), highlight=False)
    error_lines(report.errors)
    if report.errors:
        raise typer.Exit(1)
