"""`clawgym synth persona|skill|stats|dedup`: task synthesis (the template and llm generators of both routes),
the diversity metrics of task sets and near-duplicate removal."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import typer
from rich.table import Table

from clawgym.cli.common import announce_server, err, error_lines, fail, out, progress_bar
from clawgym.cli.options import (
    CATALOG,
    SYNTH_EXECUTOR_HELP,
    SYNTH_SANDBOX_HELP,
    base_url_option,
    executor_option,
    jobs_option,
    model_option,
    output_option,
    precision_option,
    ray_address_option,
    sandbox_option,
)
from clawgym.core.errors import ClawgymError

synth_app = typer.Typer(no_args_is_help=True, help="Synthesize verifiable tasks.")


# The options `synth persona` and `synth skill` share.
N = typer.Option(..., "-n", min=1, help="Number of tasks to write.")
SEED = typer.Option(0, "--seed", help="Seed: the same seed gives the same file, byte for byte.")
OUTPUT = output_option("tasks.jsonl to write (resumed if it exists).")
JOBS = jobs_option(2, "Worker processes.")
SANDBOX = sandbox_option("bwrap", SYNTH_SANDBOX_HELP)
VALIDATE = typer.Option(True, help="Validate each task in a sandbox before writing it.")
TAXONOMY = typer.Option(None, help="Taxonomy YAML (default: the packaged one).")
PERSONAS = typer.Option(None, help="Personas YAML (default: personas/personas.yaml).")
GENERATOR = typer.Option("template", help="template (offline, deterministic) or llm (a model writes each task; -n counts candidates).")
MODEL = model_option("llm generator: a served model name, an embedded model or a local model dir.")
BASE_URL = base_url_option("llm generator and --rewrite-model: OpenAI-compatible endpoint (else $OPENAI_BASE_URL; the llm generator: else the embedded server for a local --model).")
MAX_REPAIRS = typer.Option(3, min=0, help="llm generator: repair rounds after a failed check.")
MAX_TOKENS = typer.Option(4096, min=16, help="llm generator: completion tokens per model call.")
TEMPERATURE = typer.Option(0.7, min=0.0, help="llm generator: sampling temperature.")
REVIEW = typer.Option(True, help="llm generator: have the model review each validated task for answer leaks and factual errors.")
DEDUP = typer.Option(None, "--dedup/--no-dedup", help="Drop near-duplicates (MiniLM cosine >= 0.90 within a category) during the run; the template generator makes another attempt of a dropped task's index instead, so -n tasks are still written when it can. Default: on.")
DEDUP_PRECISION = typer.Option("auto", "--dedup-precision", help="How the template generator's workers embed requests for near-duplicate removal: auto (bf16 where the CPU computes it natively, about 2.5x faster; else fp32), fp32 or bf16. The decisions are fp32's whatever it is: a task within 0.02 of the threshold is decided again from fp32 embeddings, so the file is the one an fp32 run writes.")
DEDUP_AGAINST = typer.Option(None, "--dedup-against", help="llm generator: also count tasks of these files as already kept (repeatable).")
EXECUTOR = executor_option(SYNTH_EXECUTOR_HELP)
REWRITE_MODEL = typer.Option(None, "--rewrite-model", help="template generator: have this OpenAI-compatible model (at --base-url, else $OPENAI_BASE_URL; key: $OPENAI_API_KEY) rewrite each validated task's request in the persona's voice; a rewrite is kept only if every constant the checks depend on survives and the task validates again (report: rewrite section).")


def rewrite_config(rewrite_model: str | None, base_url: str | None, generator: str, temperature: float):
    """The rewrite pass's settings (clawgym.synth.rewrite), or None without --rewrite-model."""
    if rewrite_model is None:
        return None
    import os

    from clawgym.synth.rewrite import RewriteConfig

    if generator != "template":
        fail("--rewrite-model works with the template generator", 2)
    url = base_url or os.environ.get("OPENAI_BASE_URL")
    if not url:
        fail("--rewrite-model: give --base-url or set OPENAI_BASE_URL", 2)
    return RewriteConfig(model=rewrite_model, base_url=url, temperature=temperature)


def _print_rewrite(report) -> None:
    rw = report.rewrite
    if rw is None:
        return
    d = rw.as_dict()
    rej = ", ".join(f"{k}={v}" for k, v in sorted(d["rejected"].items())) or "none"
    y = "-" if d["yield"] is None else f"{100 * d['yield']:.1f}%"
    out.print(f"rewrite ({d['model']}): kept {d['kept']} of {d['attempted']} (yield {y}); rejected: {rej}",
              highlight=False)


def synth_executor(executor: str, ray_address: str | None, jobs: int, sandbox: str, generator: str):
    """None for local synthesis (its process pool, as always), else the Ray executor to enter."""
    from clawgym.rollout.executor import make_executor

    try:
        ex = make_executor(executor, jobs=jobs, ray_address=ray_address, sandbox=sandbox)
    except ClawgymError as exc:
        fail(str(exc), 2)
    if ex.name == "local":
        return None
    return ex


def template_dedup(dedup: bool | None) -> bool:
    """Whether a template run removes near-duplicates: on unless --no-dedup; without the embedding model
    (the `model` extra) a default run goes on without it, saying so, and an explicit --dedup fails."""
    if dedup is False:
        return False
    import importlib.util

    from clawgym.synth.dedup import DedupError, embedding_model_dir

    try:
        embedding_model_dir()
        missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
        if missing:
            raise DedupError(f"dedup needs {' and '.join(missing)}: pip install 'clawgym[model]'")
    except DedupError as exc:
        if dedup:
            fail(str(exc), 2)
        err.print(f"note: near-duplicate removal is off ({exc})", highlight=False)
        return False
    return True


def _print_near_duplicates(report) -> None:
    """The template generator's near-duplicate removal during the run, in one line (nothing when it was off)."""
    nd = report.near_duplicates
    if nd is None:
        return
    left = f", {nd['unreplaced']} indices left out (every attempt repeated a kept task)" if nd["unreplaced"] else ""
    out.print(f"near-duplicates (cosine >= {nd['threshold']:g} within a category): {nd['dropped']} dropped, "
              f"{nd['replaced']} replaced by another attempt{left}; embedding ({nd.get('precision', 'fp32')}"
              f"{', ' + str(nd['rechecked']) + ' decided again in fp32' if 'rechecked' in nd else ''}): "
              f"{nd['embed_cpu_s']:.0f} s of CPU", highlight=False)


def run_llm_synth(briefs, output: Path, *, route: str, model: str, base_url: str | None, sandbox: str, jobs: int,
                  max_repairs: int, max_tokens: int, temperature: float, review: bool, dedup: bool,
                  dedup_against: list[Path], executor=None) -> None:
    """The LLM generator of a synth route (persona, skill): briefs -> validated tasks, with the yield printed."""
    from clawgym.synth.llm_route import Settings, synthesize_llm, yield_path

    if sandbox == "local":
        fail("the llm generator runs model-written programs: use --sandbox bwrap or docker", 2)
    settings = Settings(model=model, max_repairs=max_repairs, max_tokens=max_tokens, temperature=temperature,
                        review=review)
    progress = progress_bar(f"[bold]synth {route} (llm)")
    bar = progress.add_task("synth", total=len(briefs))
    try:
        with executor or contextlib.nullcontext(), progress:
            report = synthesize_llm(briefs, output, settings, base_url=base_url, sandbox=sandbox, jobs=jobs,
                                    dedup=dedup, dedup_against=dedup_against, route=route,
                                    announce=announce_server(model), executor=executor,
                                    on_progress=lambda done, total: progress.update(bar, completed=done))
    except ClawgymError as exc:
        fail(str(exc))
    for line in report.lines():
        out.print(line, highlight=False)
    out.print(f"tasks: {output}; rejections: {output.name}.rejected.jsonl; yield report: {yield_path(output)}",
              highlight=False)


# ------------------------------------------------------------------------------------------------ skill


@synth_app.command("skill")
def synth_skill_cmd(
    n: int = N,
    seed: int = SEED,
    output: Path = OUTPUT,
    skill: list[str] | None = typer.Option(None, "--skill", help="Only these skills as primary skill (repeatable)."),
    catalog: Path | None = CATALOG,
    jobs: int = JOBS,
    sandbox: str = SANDBOX,
    validate: bool = VALIDATE,
    taxonomy: Path | None = TAXONOMY,
    personas: Path | None = PERSONAS,
    generator: str = GENERATOR,
    model: str = MODEL,
    base_url: str | None = BASE_URL,
    max_repairs: int = MAX_REPAIRS,
    max_tokens: int = MAX_TOKENS,
    temperature: float = TEMPERATURE,
    review: bool = REVIEW,
    dedup: bool | None = DEDUP,
    dedup_precision: str = DEDUP_PRECISION,
    dedup_against: list[Path] | None = DEDUP_AGAINST,
    executor: str = EXECUTOR,
    ray_address: str | None = ray_address_option("--executor ray: the cluster (default: $RAY_ADDRESS, else one running here, else a local instance)."),
    rewrite_model: str | None = REWRITE_MODEL,
) -> None:
    """Skill-grounded tasks: a primary skill (plus up to two supporting ones) becomes one multi-step workflow,
    with the skills in the task's workspace at skills/<name>/SKILL.md; validated like `synth persona`."""
    if generator not in ("template", "llm"):
        fail(f"unknown generator {generator!r}; choose template or llm")
    rewrite = rewrite_config(rewrite_model, base_url, generator, temperature)
    ex = synth_executor(executor, ray_address, jobs, sandbox, generator)
    if generator == "llm":
        from clawgym.synth.llm_route import skill_briefs

        try:
            briefs = skill_briefs(n, seed, skills_dir=catalog, skills=skill, taxonomy_path=taxonomy,
                                  personas_path=personas)
        except ClawgymError as exc:
            fail(str(exc))
        run_llm_synth(briefs, output, route="skill", model=model, base_url=base_url, sandbox=sandbox, jobs=jobs,
                      max_repairs=max_repairs, max_tokens=max_tokens, temperature=temperature, review=review,
                      dedup=dedup is not False, dedup_against=dedup_against or [], executor=ex)
        return
    from clawgym.synth.skill_route import SkillRouteConfig, load_state, synthesize_skill_tasks

    try:  # bad catalogs, skill names and data files fail here, before any output
        load_state(SkillRouteConfig(
            skills_dir=str(catalog) if catalog else None, taxonomy_path=str(taxonomy) if taxonomy else None,
            personas_path=str(personas) if personas else None, primary=tuple(skill or ())))
    except ClawgymError as exc:
        fail(str(exc))
    progress = progress_bar("[bold]synth skill")
    bar = progress.add_task("synth", total=n)
    try:
        with ex or contextlib.nullcontext(), progress:
            report = synthesize_skill_tasks(
                n, seed, output, jobs=jobs, skills_dir=catalog, skills=skill, taxonomy_path=taxonomy,
                personas_path=personas, sandbox=sandbox, validate=validate,
                on_progress=lambda done, total: progress.update(bar, completed=done), executor=ex,
                dedup=template_dedup(dedup), dedup_precision=dedup_precision, rewrite=rewrite)
    except ClawgymError as exc:
        fail(str(exc))
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
    _print_near_duplicates(report)
    _print_rewrite(report)


# ------------------------------------------------------------------------------------------------ stats


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _metrics_table(report) -> Table:
    table = Table(title="task set diversity")
    table.add_column("metric")
    for s in report.sets:
        table.add_column(s.name, justify="right", overflow="fold")
    rows = [
        ("n (of read)", lambda s: f"{s.n}" if s.n == s.read else f"{s.n} of {s.read}"),
        ("words / request", lambda s: _fmt(s.words, 1)),
        ("distinct-2", lambda s: _fmt(s.distinct_2)),
        ("distinct-4", lambda s: _fmt(s.distinct_4)),
        ("gzip ratio", lambda s: _fmt(s.gzip_ratio)),
        ("NN cosine mean", lambda s: _fmt(s.nn_mean)),
        ("NN cosine p50", lambda s: _fmt(s.nn_p50)),
        ("NN cosine p90", lambda s: _fmt(s.nn_p90)),
        (f"near-dup (NN >= {report.threshold:g})",
         lambda s: "-" if s.near_duplicate_rate is None else f"{100 * s.near_duplicate_rate:.1f}% ({s.near_duplicates})"),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(s) for s in report.sets))
    return table


def _counts_table(report, title: str, attr: str) -> Table:
    table = Table(title=f"tasks per {title}")
    table.add_column(title)
    for s in report.sets:
        table.add_column(s.name, justify="right", overflow="fold")
    keys: dict[str, int] = {}
    for s in report.sets:
        for k, v in getattr(s, attr).items():
            keys[k] = keys.get(k, 0) + v
    for k in sorted(keys, key=lambda k: (-keys[k], k)):
        table.add_row(k, *(str(getattr(s, attr).get(k, 0)) for s in report.sets))
    return table


@synth_app.command("stats")
def synth_stats_cmd(
    inputs: list[Path] = typer.Argument(..., metavar="FILE...", help="tasks.jsonl files: one column each."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    combined: bool = typer.Option(False, "--combined", help="Also measure all the files as one set."),
    sample: int | None = typer.Option(None, "--sample", min=2, help="Measure a random subset of N tasks of each set (compare sets at equal n)."),
    seed: int = typer.Option(0, "--seed", help="Seed of --sample."),
    threshold: float = typer.Option(0.90, min=0.0, max=1.0, help="Nearest-neighbour cosine at or above which a task is a near-duplicate."),
    precision: str = precision_option("fp32", "Embedding precision: fp32 (sentence-transformers' numbers exactly), bf16, or auto (bf16 where the CPU has it natively)."),
    cache: bool = typer.Option(True, help="Keep embeddings in ~/.cache/clawgym/embeddings (dedup's cache)."),
) -> None:
    """Diversity of task sets: words per request, distinct-2/4, gzip ratio, all-MiniLM-L6-v2 nearest-neighbour
    cosine (mean, p50, p90), near-duplicate rate, and tasks per operation and subcategory. distinct-n and the
    gzip ratio depend on n and request length: compare sets at equal n with --sample N --seed S."""
    from transformers.utils import logging as hf_logging

    from clawgym.synth.stats import NOTE, stats_of_files

    hf_logging.disable_progress_bar()  # transformers' "Loading weights" bar: noise on stderr between the error lines
    report = stats_of_files(inputs, sample=sample, seed=seed, combined=combined, threshold=threshold,
                            precision=precision, cache=cache)
    error_lines(report.errors)
    if not any(s.n for s in report.sets):
        err.print("[bold red]error:[/] no task could be read", highlight=False)
        raise typer.Exit(1)
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        out.print(_metrics_table(report))
        out.print(_counts_table(report, "operation", "by_operation"))
        out.print(_counts_table(report, "subcategory", "by_subcategory"))
        cached = report.requests - report.embedded
        cached = f", {cached} from the cache" if cached else ""
        out.print(f"{NOTE} Embeddings ({report.precision}): {report.embedded} requests in {report.embed_s:.1f} s"
                  f"{cached}.", highlight=False, style="dim")
    if report.errors:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------ persona


@synth_app.command("persona")
def synth_persona(
    n: int = N,
    seed: int = SEED,
    output: Path = OUTPUT,
    categories: list[str] | None = typer.Option(None, "--categories", help="Only these category ids or names."),
    jobs: int = JOBS,
    sandbox: str = SANDBOX,
    validate: bool = VALIDATE,
    taxonomy: Path | None = TAXONOMY,
    personas: Path | None = PERSONAS,
    operations: list[str] | None = typer.Option(None, "--operations", help="Only tasks made of these atomic operation ids (repeatable)."),
    max_ops: int | None = typer.Option(None, "--max-ops", min=1, max=4, help="At most this many operations per task (default: 1-4)."),
    solution: str = typer.Option("direct", help="template generator: reference solutions that write the answer out (direct) or compute it with a script where the operation has one (program: teacher demonstrations a small model can imitate)."),
    program_ops: list[str] | None = typer.Option(None, "--program-ops", help="With --solution program: only these operations get program references (repeatable; default: every operation that has one)."),
    generator: str = GENERATOR,
    model: str = MODEL,
    base_url: str | None = BASE_URL,
    max_repairs: int = MAX_REPAIRS,
    max_tokens: int = MAX_TOKENS,
    temperature: float = TEMPERATURE,
    review: bool = REVIEW,
    dedup: bool | None = DEDUP,
    dedup_precision: str = DEDUP_PRECISION,
    dedup_against: list[Path] | None = DEDUP_AGAINST,
    executor: str = EXECUTOR,
    ray_address: str | None = ray_address_option(),
    rewrite_model: str | None = REWRITE_MODEL,
    phrasing_half: int | None = typer.Option(None, "--phrasing-half", min=0, max=1, help="template generator: word every task from one half of the generators' options (0 or 1; the alternatives at even or odd positions), for train/test splits with disjoint wording."),
) -> None:
    """Persona-driven tasks: workflows of 1-4 operations, validated in sandboxes (reference 1, no-op 0)."""
    if generator not in ("template", "llm"):
        fail(f"unknown generator {generator!r}; choose template or llm", 2)
    if phrasing_half is not None and generator != "template":
        fail("--phrasing-half: an option of the template generator (the LLM writes its own wording)", 2)
    rewrite = rewrite_config(rewrite_model, base_url, generator, temperature)
    ex = synth_executor(executor, ray_address, jobs, sandbox, generator)
    if generator == "llm":
        from clawgym.synth.llm_route import LLMSynthError, persona_briefs

        try:
            briefs = persona_briefs(n, seed, categories=categories, operations=operations, max_ops=max_ops,
                                    taxonomy_path=taxonomy, personas_path=personas)
        except LLMSynthError as exc:
            fail(str(exc), 2)
        run_llm_synth(briefs, output, route="persona", model=model, base_url=base_url, sandbox=sandbox, jobs=jobs,
                      max_repairs=max_repairs, max_tokens=max_tokens, temperature=temperature, review=review,
                      dedup=dedup is not False, dedup_against=dedup_against or [], executor=ex)
        return
    from rich.table import Table

    from clawgym.core.taxonomy import load_taxonomy
    from clawgym.synth.personas import load_personas
    from clawgym.synth.pipeline import synthesize

    load_personas(personas, load_taxonomy(taxonomy))  # bad data files fail here, before any output
    progress = progress_bar("[bold]synth persona")
    bar = progress.add_task("synth", total=n)
    with ex or contextlib.nullcontext(), progress:
        report = synthesize(
            n, seed, output, jobs=jobs, categories=categories, taxonomy_path=taxonomy, personas_path=personas,
            sandbox=sandbox, validate=validate, operations=operations, max_ops=max_ops, solution=solution,
            program_ops=program_ops, on_progress=lambda done, total: progress.update(bar, completed=done),
            executor=ex, dedup=template_dedup(dedup), dedup_precision=dedup_precision, rewrite=rewrite,
            phrasing_half=phrasing_half,
        )
    for title, counts in (("category", report.by_category), ("subcategory", report.by_subcategory),
                          ("operation", report.by_operation)):
        table = Table(title=f"tasks per {title}")
        table.add_column(title)
        table.add_column("tasks", justify="right")
        for k, v in sorted(counts.items()):
            table.add_row(k, str(v))
        out.print(table)
    rej = ", ".join(f"{k}={v}" for k, v in sorted(report.rejected.items())) or "none"
    out.print(f"wrote {report.written} tasks ({report.resumed} already there) -> {output}; rejected: {rej}",
              highlight=False)
    out.print(f"report: {output.with_name(output.name + '.report.json')}", highlight=False)
    _print_near_duplicates(report)
    _print_rewrite(report)


@synth_app.command("dedup")
def synth_dedup(
    inputs: list[Path] = typer.Argument(..., metavar="FILE...", help="tasks.jsonl files, read in order (the first of near-duplicates is kept)."),
    output: Path = output_option("tasks.jsonl to write (may be one of the inputs)."),
    threshold: float = typer.Option(0.90, min=0.0, max=1.0, help="Cosine similarity at or above which two tasks of a category are duplicates."),
    precision: str = precision_option("auto", "Embedding precision: auto (bf16 where the CPU has it natively), fp32, bf16."),
    cache: bool = typer.Option(True, help="Keep embeddings in ~/.cache/clawgym/embeddings (repeated runs skip the model)."),
) -> None:
    """Drop near-duplicate tasks across files: all-MiniLM-L6-v2 embeddings of each request, cosine >= 0.90
    within a category (as ClawGym). Writes OUT and OUT.dedup.json (what was dropped, and for which task)."""
    from clawgym.synth.dedup import dedup_files, report_path

    rep = dedup_files(inputs, output, threshold, precision=precision, cache=cache)
    for cat, c in sorted(rep.by_category.items()):
        out.print(f"{cat or '(no category)'}: kept {c['kept']} of {c['read']}", highlight=False)
    out.print(f"kept {rep.kept} of {rep.read} tasks ({len(rep.dropped)} near-duplicates, {len(rep.same_id)} repeated "
              f"ids dropped) -> {output}; {rep.read / max(1e-9, rep.embed_s + rep.compare_s):.0f} tasks/s "
              f"({rep.precision}, {rep.embedded} embedded, the rest from the cache); "
              f"report: {report_path(output)}", highlight=False)
