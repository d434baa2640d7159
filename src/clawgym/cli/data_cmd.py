"""The `clawgym import` / `clawgym export` groups: tasks (ClawGym folders and Hub corpus, PinchBench) and outside
datasets (trajectories in OpenAI-messages form, Hugging Face datasets). Registered by clawgym.cli.app."""

from __future__ import annotations

from pathlib import Path

import typer

from clawgym.cli.common import err, error_lines, fail, load_tasks, out
from clawgym.cli.options import STRICT_IMPORT, TASK_IDS, TASKS_ARG, output_option

MESSAGES_FORMATS = ("openai-messages",)

import_app = typer.Typer(no_args_is_help=True, help="Import outside data: tasks (ClawGym folders and Hub corpus, "
                         "PinchBench) into tasks.jsonl, trajectories (OpenAI messages) into SFT records.")
export_app = typer.Typer(no_args_is_help=True, help="Export tasks, trajectories and SFT data to outside formats "
                         "(PinchBench, OpenAI messages, Hugging Face datasets).")


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


def export_pinchbench_cmd(
    tasks_path: Path = TASKS_ARG,
    output: Path = output_option("The folder to write (tasks/task_<id>.md and assets/), a PinchBench checkout."),
    task_ids: list[str] | None = TASK_IDS,
) -> None:
    """Export tasks as PinchBench task files; checks as data become a self-contained grade()."""
    from clawgym.importers.pinchbench import write_export

    tasks, bad = load_tasks(tasks_path)
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


def _check_format(fmt: str) -> None:
    if fmt not in MESSAGES_FORMATS:
        fail(f"--format: unknown value {fmt!r}; choose {', '.join(MESSAGES_FORMATS)}", 2)


def import_clawgym_hub_cmd(
    file: Path | None = typer.Argument(None, metavar="SYN_TASK_JSONL", help="ClawGym's corpus file "
                                       "(syn_task.jsonl); without it, the file of the Hub dataset --from-hub."),
    output: Path = output_option("tasks.jsonl to write."),
    from_hub: str | None = typer.Option(None, "--from-hub", metavar="REPO_ID", help="Download the corpus from this "
                                        "Hugging Face dataset (the default when no file is given: "
                                        "RUC-AIBOX/ClawGym-Task), cached; HF_HUB_OFFLINE=1 reads the cache only."),
    filename: str = typer.Option("syn_task.jsonl", "--filename", help="The file in the Hub dataset."),
    revision: str | None = typer.Option(None, "--revision", help="A branch, tag or commit of the Hub dataset."),
    strict: bool = STRICT_IMPORT,
) -> None:
    """Import ClawGym's task corpus (syn_task.jsonl of RUC-AIBOX/ClawGym-Task), from a file or the Hub.

    Its rows (prompt, hook_code, input_files, rule, origin_template) give the same task records as the folder
    importer gives for the folders ClawGym's build_dataset_from_hf.py makes of them."""
    from clawgym.core.errors import ClawgymError
    from clawgym.importers.clawgym_hub import HUB_REPO, download_corpus, import_clawgym_hub

    if file is not None and from_hub is not None:
        fail("give a corpus file or --from-hub REPO_ID, not both", 2)
    if file is None:
        repo = from_hub or HUB_REPO
        err.print(f"getting {filename} of the Hugging Face dataset {repo} ...", highlight=False)
        try:
            file = download_corpus(repo, filename, revision)
        except ClawgymError as exc:
            fail(str(exc))
    elif not file.is_file():
        fail(f"{file}: no such file")
    _write_import(import_clawgym_hub(file), output, strict, "ClawGym corpus")


def import_trajectories_cmd(
    file: Path = typer.Argument(..., metavar="FILE", help="Trajectories, one JSON object a line."),
    output: Path = output_option("SFT JSONL to write (what `clawgym train sft` takes)."),
    fmt: str = typer.Option("openai-messages", "--format", help="openai-messages: {messages, tools} a line, "
                            "assistant tool_calls and tool messages (ClawGym-Trajectory, OpenRLHF, trl)."),
    tools: Path | None = typer.Option(None, "--tools", metavar="JSON_FILE", help="Tool schemas for the lines that "
                                      "have no `tools` (a JSON list): ClawGym's SFT script gives every line "
                                      "OpenClaw's tool list instead of storing it."),
) -> None:
    """Import trajectories made elsewhere ({messages, tools} lines) as SFT records for `clawgym train sft`.

    Training puts the loss on every assistant turn, the tool schemas kept. Bad lines are reported
    `file:line: field: problem` and the others imported; any bad line makes the exit code 1."""
    from clawgym.core.errors import ClawgymError
    from clawgym.train.filter import write_jsonl_atomic
    from clawgym.train.openai_messages import load_tools, read_openai_messages

    _check_format(fmt)
    if not file.is_file():
        fail(f"{file}: no such file")
    try:
        default_tools = load_tools(tools) if tools is not None else None
        res = read_openai_messages(file, default_tools)
    except (ClawgymError, OSError) as exc:
        fail(str(exc))
    error_lines(res.errors)
    if not res.records:
        fail(f"{file}: no trajectory imported; nothing written to {output}")
    write_jsonl_atomic(output, res.records)
    turns = sum(1 for r in res.records for m in r["messages"] if m.get("role") == "assistant")
    out.print(f"imported {len(res.records)} trajectories ({turns} assistant turns) -> {output} "
              f"({len(res.errors)} bad lines)", highlight=False)
    if res.without_tools:
        how = f"given the --tools schemas ({tools})" if res.default_tools_used else \
            "imported without tool schemas (pass --tools FILE to give them some)"
        err.print(f"[bold yellow]warning:[/] {res.without_tools} lines have no `tools`: {how}", highlight=False)
    if res.errors:
        raise typer.Exit(1)


def export_trajectories_cmd(
    file: Path = typer.Argument(..., metavar="SFT_JSONL", help="SFT records (`clawgym filter`, `clawgym import "
                                "trajectories`)."),
    output: Path = output_option("JSONL to write."),
    fmt: str = typer.Option("openai-messages", "--format", help="openai-messages: {messages, tools} a line, as "
                            "OpenRLHF (--input_key messages --multiturn --apply_chat_template) and trl read it."),
) -> None:
    """Export SFT records as {messages, tools} lines, as OpenRLHF and trl read them.

    A file imported by `clawgym import trajectories` comes back as it was."""
    from clawgym.core.errors import ClawgymError
    from clawgym.train.filter import read_sft_records, write_jsonl_atomic
    from clawgym.train.openai_messages import to_openai_messages

    _check_format(fmt)
    if not file.is_file():
        fail(f"{file}: no such file")
    try:
        records = read_sft_records(file)
    except ClawgymError as exc:
        fail(str(exc))
    bare = [r for r in records if not r.get("messages")]
    if bare:
        fail(f"{file}:{bare[0]['_line']}: messages: missing (a record of token ids only has no messages to export)")
    n = write_jsonl_atomic(output, [to_openai_messages(r) for r in records])
    out.print(f"exported {n} trajectories ({fmt}) -> {output}", highlight=False)


def export_hf_dataset_cmd(
    source: Path = typer.Argument(..., metavar="FILE_OR_RUN_DIR", help="tasks.jsonl (--kind tasks), an SFT file "
                                  "(--kind sft), or a run directory / trajectories.jsonl (--kind trajectories)."),
    kind: str = typer.Option(..., "--kind", help="tasks, sft or trajectories."),
    output: Path = output_option("Dataset folder to write (data/*.parquet and a README.md dataset card)."),
    push_to_hub: str | None = typer.Option(None, "--push-to-hub", metavar="REPO_ID", help="Also upload the folder "
                                           "to this Hugging Face dataset repository (needs HF_TOKEN or `hf auth "
                                           "login`; created when missing)."),
    private: bool = typer.Option(False, "--private", help="With --push-to-hub: create the repository private."),
) -> None:
    """Write tasks, trajectories or SFT data as a Hugging Face dataset; optionally push it to the Hub.

    `datasets.load_dataset(DIR)` reads the folder: messages with their tool calls, tools as JSON text."""
    from clawgym.core.errors import ClawgymError
    from clawgym.hf.dataset import KINDS, export_hf_dataset

    if kind not in KINDS:
        fail(f"--kind: unknown value {kind!r}; choose {', '.join(KINDS)}", 2)
    try:
        rep = export_hf_dataset(source, kind, output)
    except ClawgymError as exc:
        fail(str(exc))
    error_lines(rep.errors)
    for what, n in sorted(rep.reshaped.items()):
        err.print(f"note: {n} {what} (one column, one type)", highlight=False)
    if rep.left_out:
        fields = ", ".join(f"{k} ({n})" for k, n in sorted(rep.left_out.items()))
        err.print(f"[bold yellow]warning:[/] message fields without a column, left out: {fields}", highlight=False)
    out.print(f"wrote {rep.rows} {kind} rows -> {output} ({len(rep.errors)} bad lines); "
              f"load it with datasets.load_dataset({str(output)!r})", highlight=False, soft_wrap=True)
    if push_to_hub:
        from clawgym.core.hub import push_folder

        try:
            url = push_folder(output, push_to_hub, private=private, message=f"clawgym export hf-dataset --kind {kind}")
        except ClawgymError as exc:
            fail(str(exc))
        out.print(f"pushed to the Hugging Face dataset {push_to_hub}: {url}", highlight=False)
    if rep.errors:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the `import` and `export` groups, with their commands, to `app`."""
    app.add_typer(import_app, name="import")
    app.add_typer(export_app, name="export")
    import_app.command("clawgym-hub")(import_clawgym_hub_cmd)
    import_app.command("trajectories")(import_trajectories_cmd)
    import_app.command("clawgym")(import_clawgym_cmd)
    import_app.command("pinchbench")(import_pinchbench_cmd)
    export_app.command("trajectories")(export_trajectories_cmd)
    export_app.command("hf-dataset")(export_hf_dataset_cmd)
    export_app.command("pinchbench")(export_pinchbench_cmd)
