"""`clawgym summary`: runs and conversation files summarized."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from clawgym.cli.common import err, error_lines, fail, out


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
                          f"{s.window:,} tokens[/] (`train sft --max-len {s.window}` trains them as windows, each "
                          f"ending at an assistant turn): {first}{', ...' if len(s.over_window) > 5 else ''}", highlight=False,
                          soft_wrap=True)
            elif s.window is not None:
                out.print(f"{s.run}: every conversation fits in {s.window:,} tokens (longest {s.max_tokens or 0:,})",
                          highlight=False)
    if bad:
        raise typer.Exit(1)
