"""`clawgym synth stats FILE...`: the diversity metrics of task sets (clawgym.synth.stats), as a table or JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

out = Console()
err = Console(stderr=True)


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


def synth_stats_cmd(
    inputs: list[Path] = typer.Argument(..., metavar="FILE...", help="tasks.jsonl files: one column each."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    combined: bool = typer.Option(False, "--combined", help="Also measure all the files as one set."),
    sample: int | None = typer.Option(None, "--sample", min=2, help="Measure a random subset of N tasks of each set (compare sets at equal n)."),
    seed: int = typer.Option(0, "--seed", help="Seed of --sample."),
    threshold: float = typer.Option(0.90, min=0.0, max=1.0, help="Nearest-neighbour cosine at or above which a task is a near-duplicate."),
    precision: str = typer.Option("fp32", help="Embedding precision: fp32 (sentence-transformers' numbers exactly), bf16, or auto (bf16 where the CPU has it natively)."),
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
    for e in report.errors:
        err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
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
