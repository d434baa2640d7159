"""`clawgym filter` and `clawgym train sft|export`: verifier-filtered trajectories to SFT data, SFT, and a servable
model directory. Registered by clawgym.cli.app (`app.command("filter")(filter_cmd)`, `app.add_typer(train_app,
name="train")`)."""

from __future__ import annotations

import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path

import typer

from clawgym.cli.common import err, error_lines, fail, out
from clawgym.cli.judge_opts import (
    JUDGE_BASE_URL_HELP,
    JUDGE_MAX_TOKENS,
    JUDGE_SAMPLES,
    JUDGE_SEED,
    JUDGE_TEMPERATURE,
    announce_judge_server,
    build_judge,
    judge_model_option,
    judge_url,
    judge_usage_line,
    refuse_unjudgeable,
)
from clawgym.cli.options import (
    base_url_option,
    executor_option,
    jobs_option,
    model_option,
    output_option,
    precision_option,
    ray_address_option,
    sandbox_option,
)

train_app = typer.Typer(no_args_is_help=True, help="Train on filtered trajectories (SFT) and export models.")


def filter_cmd(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", help="Run directories (or trajectories.jsonl files)."),
    output: Path = output_option("SFT JSONL to write (atomically)."),
    min_score: float = typer.Option(1.0, "--min-score", min=0.0, max=1.0, help="Keep trajectories scoring at least this."),
    status: list[str] | None = typer.Option(None, "--status", help="Keep only these statuses (repeatable; default: completed; 'any' for all scored)."),
    max_per_task: int | None = typer.Option(None, "--max-per-task", min=1, help="At most K per task: the best scores, ties by id."),
    token_ids: bool = typer.Option(False, "--token-ids", help="Also keep the engine's token ids of each model call (train on them exactly; same tokenizer only)."),
    scores: str = typer.Option("auto", "--scores", help="Where scores come from: auto (RUN_DIR/verdicts.jsonl of "
                               "`clawgym verify` where it holds a current verdict, else the rollout's; fallbacks "
                               "counted), verdicts (every score from verdicts.jsonl, else an error), rollout "
                               "(the rollout's verdicts only)."),
    curation: bool = typer.Option(True, "--curation/--no-curation", help="Drop what the run's pool curates out "
                                  "(`clawgym pool curate`: a trajectory or step not trainable, or of a dropped quality)."),
    drop_quality: list[str] = typer.Option(["bad"], "--drop-quality", help="Curation: drop trajectories whose "
                                           "quality, or a step's, is this (repeatable; 'none' keeps all)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    fmt: str = typer.Option("clawgym", "--format", help="clawgym (SFT records: messages, tools, trajectory, task, "
                            "score, ...) or openai-messages (only `messages` + `tools`, as OpenRLHF and trl read them)."),
) -> None:
    """Turn verifier-filtered trajectories into SFT conversations (OpenAI messages + tools), one JSON line each.

    Scores are the re-scored verdicts of RUN_DIR/verdicts.jsonl (`clawgym verify`: code checks + rubric judge)
    where the run has them, else the rollout's; the run's pool curation is respected."""
    from rich.table import Table

    from clawgym.core.errors import ClawgymError
    from clawgym.train.filter import FilterOptions, filter_to_file
    from clawgym.train.run_inputs import SCORE_SOURCES

    if scores not in SCORE_SOURCES:
        fail(f"--scores: unknown value {scores!r}; choose {', '.join(SCORE_SOURCES)}", 2)
    if fmt not in ("clawgym", "openai-messages"):
        fail(f"--format: unknown value {fmt!r}; choose clawgym or openai-messages", 2)
    opts = FilterOptions(min_score=min_score, statuses=tuple(status) if status else ("completed",),
                         max_per_task=max_per_task, token_ids=token_ids, scores=scores, curation=curation,
                         drop_quality=tuple(q for q in drop_quality if q.lower() != "none"))
    try:
        rep = filter_to_file(run_dirs, output, opts, fmt=fmt)
    except ClawgymError as exc:
        fail(str(exc))
    for line in rep.bad_lines:
        err.print(f"[yellow]skipped bad line:[/] {line}", highlight=False, soft_wrap=True)
    fell_back = sum(rep.score_fallback.values())
    if fell_back:
        whys = ", ".join(f"{n} {_FALLBACK[k]}" for k, n in sorted(rep.score_fallback.items()))
        err.print(f"[bold yellow]warning:[/] {fell_back} trajectories scored by the rollout's verdicts instead of "
                  f"verdicts.jsonl ({whys}); run `clawgym verify` again to score them the same way",
                  highlight=False, soft_wrap=True)
    if rep.verdicts_unmatched:
        err.print(f"[bold yellow]warning:[/] {rep.verdicts_unmatched} verdicts in {', '.join(rep.verdict_files)} are "
                  "for episodes the run does not hold; not used", highlight=False, soft_wrap=True)
    if as_json:
        sys.stdout.write(json.dumps(rep.as_dict(), indent=2) + "\n")
        return
    table = Table(title=f"filter -> {output}")
    table.add_column("")
    table.add_column("trajectories", justify="right")
    table.add_row("read", str(rep.read))
    table.add_row("[green]kept[/]", str(rep.kept))
    for reason, n in sorted(rep.dropped.items()):
        table.add_row(f"dropped: {reason}", str(n))
    out.print(table)
    out.print(_scores_line(rep, scores), highlight=False, soft_wrap=True)
    if rep.pools:
        curated = ", ".join(f"{n} {k}" for k, n in sorted(rep.curated.items())) or "none"
        out.print(f"curation: {', '.join(rep.pools)}: curated out {curated}; {rep.not_in_pool} not in the pool",
                  highlight=False, soft_wrap=True)
    src = ", ".join(f"{k} {v}" for k, v in sorted(rep.by_source.items())) or "-"
    out.print(f"{rep.kept} conversations from {len(rep.per_task)} tasks ({src}) -> {output}; "
              f"report: {output}.report.json", highlight=False)


_FALLBACK = {"no_verdict": "without a re-scored verdict",
             "stale_verdict": "whose verdict is stale (the episode ran again after re-scoring)"}


def _scores_line(rep, scores: str) -> str:
    """Which verdicts the scores came from, in words."""
    n_ver, n_roll = rep.score_sources.get("verdicts", 0), rep.score_sources.get("rollout", 0)
    if rep.verdict_files and not n_roll:
        what = f"the re-scored verdicts of {', '.join(rep.verdict_files)}"
    elif rep.verdict_files:
        what = (f"the re-scored verdicts of {', '.join(rep.verdict_files)} for {n_ver}, the rollout's verdicts for "
                f"{n_roll}")
    else:
        what = "the rollout's verdicts" + (" (--scores rollout)" if scores == "rollout" else " (no verdicts.jsonl)")
    return f"scores: {what}; {rep.judged} of the {rep.kept} kept include a judged rubric"


@train_app.command("sft")
def sft_cmd(
    data: Path = typer.Argument(..., metavar="SFT_JSONL", help="Conversations from `clawgym filter`."),
    model: str = model_option("Base model: an embedded model name or a local HF model directory."),
    output: Path = output_option("Training directory (checkpoints, final/, train.json, log.jsonl)."),
    lora: bool = typer.Option(True, "--lora/--full", help="Train a LoRA adapter (default) or every weight."),
    epochs: float = typer.Option(1.0, "--epochs", min=0.0),
    max_steps: int = typer.Option(-1, "--max-steps", help="Stop after this many optimizer steps (overrides --epochs)."),
    lr: float | None = typer.Option(None, "--lr", help="Learning rate (default 2e-4 LoRA, 2e-5 full)."),
    max_len: int = typer.Option(8192, "--max-len", min=16, help="Tokens per sequence; a longer one trains as its longest prefix ending at a turn, then one window per later turn (head + the turns before it that fit), or as its steps; never cut from the end, what fits no window is counted."),
    batch_tokens: int = typer.Option(8192, "--batch-tokens", min=16, help="Tokens per packed micro-batch (>= --max-len)."),
    batching: str = typer.Option("packed", "--batching", help="packed (no padding) or padded (trl's default batching)."),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="Sequences per micro-batch with --batching padded."),
    grad_accum: int = typer.Option(1, "--grad-accum", min=1, help="Micro-batches per optimizer step."),
    lora_r: int = typer.Option(16, "--lora-r", min=1),
    lora_alpha: int | None = typer.Option(None, "--lora-alpha", min=1, help="Default: 2 x r."),
    lora_dropout: float = typer.Option(0.0, "--lora-dropout", min=0.0, max=1.0),
    warmup_ratio: float = typer.Option(0.03, "--warmup-ratio", min=0.0, max=0.99),
    weight_decay: float = typer.Option(0.0, "--weight-decay", min=0.0),
    seed: int = typer.Option(0, "--seed"),
    save_steps: int = typer.Option(200, "--save-steps", min=0, help="Checkpoint every N steps (0: none, only the final model; no --resume)."),
    save_total_limit: int = typer.Option(2, "--save-total-limit", min=1),
    resume: bool = typer.Option(False, "--resume", help="Continue from the last checkpoint in OUTPUT."),
    precision: str = precision_option("auto", "auto (bf16 where the hardware is fast at it), fp32, bf16."),
    dtype: str = typer.Option("auto", "--dtype", help="Weights' dtype: auto (LoRA: bf16 on a CUDA GPU that has it; else fp32), bf16 (LoRA: bf16 base, fp32 adapter and optimizer state; --full: all bf16, no fp32 master copy), fp32."),
    grad_checkpointing: bool | None = typer.Option(None, "--gradient-checkpointing/--no-gradient-checkpointing", "--grad-checkpointing/--no-grad-checkpointing", help="Recompute activations in the backward pass. Default: on above 4096 tokens per micro-batch."),
    report_to: str = typer.Option("none", "--report-to", help="Also log to: none, tensorboard (event files in OUTPUT/tensorboard) or wandb."),
    history: str = typer.Option("final", "--history", help="Chat templates that render earlier turns differently (Qwen3): final (one sequence as the last render shows it, every turn trained) or exact (one example per turn in the server's context, ~turns x the tokens)."),
    enable_thinking: bool | None = typer.Option(None, "--enable-thinking/--no-enable-thinking", help="Passed to the chat template (Qwen3's enable_thinking); default: the template's own."),
    verify: str = typer.Option("sample", "--verify", help="Check contexts against the server's prompts: sample (first 32 records), full, none. Trained spans are always checked."),
    token_ids: bool = typer.Option(True, "--token-ids/--no-token-ids", help="Train on records' engine token ids when they have them (only for the model that generated them)."),
    threads: int | None = typer.Option(None, "--threads", min=1, help="CPU threads (default: torch's)."),
    export_dir: Path | None = typer.Option(None, "--export", help="Also merge and export the result to this model directory."),
    fsdp: str | None = typer.Option(None, "--fsdp", help="Shard with torch FSDP, e.g. \"full_shard auto_wrap\" (transformers' TrainingArguments.fsdp); run under torchrun. Or use accelerate launch --config_file configs/accelerate/fsdp.yaml."),
    fsdp_config: Path | None = typer.Option(None, "--fsdp-config", help="A JSON file of FSDP settings (TrainingArguments.fsdp_config)."),
    deepspeed: Path | None = typer.Option(None, "--deepspeed", help="A DeepSpeed JSON config (TrainingArguments.deepspeed); needs the deepspeed package."),
) -> None:
    """Multi-turn SFT (loss on assistant turns only) with trl + peft LoRA; resumable; packed batches."""
    from clawgym.core.errors import ClawgymError
    from clawgym.train.sft import SFTOptions, export_model, train_sft

    if not data.exists():
        fail(f"{data}: no such file")
    opts = SFTOptions(
        model=model, full=not lora, epochs=epochs, max_steps=max_steps, lr=lr, max_len=max_len,
        batch_tokens=batch_tokens, batching=batching, batch_size=batch_size, grad_accum=grad_accum, lora_r=lora_r,
        lora_alpha=lora_alpha, lora_dropout=lora_dropout, warmup_ratio=warmup_ratio, weight_decay=weight_decay,
        seed=seed, save_steps=save_steps, save_total_limit=save_total_limit, resume=resume, precision=precision,
        gradient_checkpointing=grad_checkpointing, verify=verify, threads=threads, token_ids=token_ids, dtype=dtype,
        report_to=report_to, history=history, enable_thinking=enable_thinking, fsdp=fsdp,
        fsdp_config=str(fsdp_config) if fsdp_config else None, deepspeed=str(deepspeed) if deepspeed else None,
    )

    def on_data(stats) -> None:
        err.print(f"data: {stats.records} records -> {stats.examples} sequences, {stats.tokens} tokens "
                  f"({stats.trained_tokens} trained); {stats.truncated} longer than --max-len -> {stats.windows} "
                  f"windows, {stats.dropped_turns} turns ({stats.dropped_tokens} tokens) fit no window and are not "
                  f"trained; {stats.dropped_no_trained_tokens} without a trained token left", highlight=False)

    try:
        res = train_sft(data, output, opts, on_data=on_data)
        if export_dir is not None:
            export_model(output, export_dir)
    except ClawgymError as exc:
        fail(str(exc))
    loss = f"loss {res.first_loss:.4f} -> {res.last_loss:.4f}" if res.first_loss is not None else "no loss logged"
    resumed = f" (resumed from {Path(res.resumed_from).name})" if res.resumed_from else ""
    out.print(f"trained {res.steps} steps{resumed}: {loss}; {res.tokens} tokens in {res.seconds:.0f} s "
              f"({res.tokens_per_s:.0f} tokens/s, {res.padded_tokens - res.tokens} padding)", highlight=False)
    out.print(f"model: {res.final_dir}" + (f"; exported: {export_dir}" if export_dir else
                                           f"; serve it after `clawgym train export {output} -o MODEL_DIR`"),
              highlight=False)


@train_app.command("export")
def export_cmd(
    train_dir: Path = typer.Argument(..., metavar="TRAIN_DIR", help="The output directory of `clawgym train sft`."),
    output: Path = output_option("Model directory to write (servable by `clawgym serve --model`)."),
    checkpoint: str | None = typer.Option(None, "--checkpoint", help="A checkpoint-N directory instead of final/."),
    base_model: str | None = typer.Option(None, "--base-model", help="Base model of the adapter (default: the one trained on)."),
) -> None:
    """Merge the LoRA adapter into its base model: a full model directory (safetensors, tokenizer, chat template)."""
    from clawgym.core.errors import ClawgymError
    from clawgym.train.sft import export_model

    if not train_dir.is_dir():
        fail(f"{train_dir}: not a directory")
    try:
        path = export_model(train_dir, output, checkpoint=checkpoint, base_model=base_model)
    except ClawgymError as exc:
        fail(str(exc))
    out.print(f"exported {path}; serve it with `clawgym serve --model {path}`", highlight=False)


def _refuse_bad_rl_settings(*, algo: str, lr_schedule: str, dtype: str, report_to: str, credit: str, agent: str,
                            precision: str, train_precision: str, device: str) -> None:
    """Exit 2 on a `train rl` setting no part of the loop takes, before anything loads."""
    from clawgym.core.errors import ClawgymError
    from clawgym.core.precision import PRECISIONS, SERVER_PRECISIONS
    from clawgym.pool.credit import CREDITS
    from clawgym.rl import algos
    from clawgym.train.dtypes import check_dtype
    from clawgym.train.reporting import check_report_to
    from clawgym.train.rl_loop import RLError, train_device
    from clawgym.train.rl_schedule import SCHEDULES

    if algo not in algos():
        fail(f"--algo {algo!r}: choose one of {', '.join(algos())}", 2)
    if lr_schedule not in SCHEDULES:
        fail(f"--lr-schedule {lr_schedule!r}: choose one of {', '.join(SCHEDULES)}", 2)
    try:
        check_dtype(dtype)
        check_report_to(report_to)
    except (ValueError, ClawgymError) as exc:
        fail(str(exc), 2)
    if credit not in CREDITS:
        fail(f"--credit {credit!r}: choose one of {', '.join(CREDITS)}", 2)
    if agent not in ("llm", "openclaw"):
        fail(f"--agent {agent!r}: choose llm or openclaw", 2)
    if precision not in SERVER_PRECISIONS:
        fail(f"--precision {precision!r}: choose one of {', '.join(SERVER_PRECISIONS)}", 2)
    if train_precision not in PRECISIONS:
        fail(f"--train-precision {train_precision!r}: choose one of {', '.join(PRECISIONS)}", 2)
    try:
        train_device(device)
    except RLError as exc:
        fail(str(exc), 2)


@train_app.command("rl")
def rl_cmd(
    tasks_path: Path = typer.Argument(..., metavar="TASKS", help="tasks.jsonl to train on (tasks with a code check)."),
    model: str = model_option("Base model: an embedded name or a model directory (e.g. an SFT student)."),
    output: Path = output_option("Output directory (state, pool, rollouts, batches, adapters, metrics); rerun to resume."),
    base_url: str | None = base_url_option("An OpenAI-compatible engine with LoRA enabled (vLLM); default: the embedded server."),
    samples: int = typer.Option(4, "-k", "--samples", min=2, help="Samples per task (a GRPO group)."),
    tasks_per_iter: int = typer.Option(8, "--tasks-per-iter", min=1),
    iterations: int = typer.Option(1, "--iterations", min=1, help="Policy versions to publish in all (a rerun continues up to this)."),
    temperature: float = typer.Option(1.0, "--temperature", min=0.0),
    max_turns: int = typer.Option(4, "--max-turns", min=1),
    max_tokens: int = typer.Option(256, "--max-tokens", min=1),
    algo: str = typer.Option("grpo", "--algo", help="grpo, dr-grpo, rloo or reinforce++ (advantages and loss aggregation)."),
    credit: str = typer.Option("outcome", "--credit", help="outcome, step, progress (see `pool export --credit`) or "
                               "gae (step-level GAE over the progress rewards with a value head on the policy's hidden "
                               "states, fitted each update and saved with each version)."),
    progress_rewards: bool = typer.Option(
        False, "--progress", help="Record progress rewards in the rollouts (each step's change of the code score; see "
        "`clawgym rollout --progress`). Always on with --credit progress or gae."),
    gamma: float = typer.Option(1.0, "--gamma", min=0.0, max=1.0),
    gae_lambda: float = typer.Option(0.95, "--gae-lambda", min=0.0, max=1.0, help="--credit gae: GAE's lambda."),
    value_lr: float = typer.Option(1e-2, "--value-lr", min=0.0, help="--credit gae: the value head's learning rate "
                                   "(Adam, full batch)."),
    value_steps: int = typer.Option(200, "--value-steps", min=0, help="--credit gae: the value head's steps each update."),
    kl_coef: float = typer.Option(0.0, "--kl-coef", min=0.0, help="KL to the initial policy (k3 estimator)."),
    clip: float = typer.Option(0.2, "--clip", min=0.0, help="Ratio clip epsilon."),
    lr: float | None = typer.Option(None, "--lr", min=0.0, help="Learning rate (default 1e-4 with LoRA, 1e-5 with --full)."),
    lora_r: int = typer.Option(16, "--lora-r", min=1),
    init_adapter: Path | None = typer.Option(
        None, "--init-adapter", help="Start from this LoRA adapter of MODEL (e.g. `train sft`'s final/, unmerged): "
        "policy v0 is MODEL with it, served as an adapter (a q4 server keeps the base's 4-bit blocks); RL trains it "
        "further (its own rank; --lora-r is not used)."),
    full: bool = typer.Option(False, "--full", help="Train every weight instead of a LoRA adapter; each version is "
                              "published as full weights (POST /update_weights_from_disk: clawgym serve, SGLang)."),
    epochs: int = typer.Option(1, "--epochs", min=1, help="Passes over each batch."),
    mini_batches: int = typer.Option(1, "--mini-batches", min=1, help="Optimizer steps per pass over a batch (PPO "
                                     "mini-batches); with 2+ steps the old policy's log-probs are fixed before the "
                                     "first one, so the clip acts."),
    micro_batch_tokens: int = typer.Option(4096, "--micro-batch-tokens", min=1, help="Tokens per micro-batch of the "
                                           "update; gradients accumulate over a mini-batch."),
    lr_schedule: str = typer.Option("constant", "--lr-schedule", help="constant, linear or cosine over the run's "
                                    "optimizer steps (iterations x epochs x mini-batches)."),
    warmup_steps: int = typer.Option(0, "--warmup-steps", min=0, help="Optimizer steps of linear warmup."),
    max_grad_norm: float = typer.Option(1.0, "--max-grad-norm", min=0.0, help="Clip each step's gradient to this "
                                        "norm (0: off)."),
    dtype: str = typer.Option("fp32", "--dtype", help="The policy's weights in the update: auto (bf16 on a CUDA GPU "
                              "with it), bf16 (a LoRA adapter stays fp32) or fp32."),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing", help="Recompute activations in "
                                                "the backward pass: less memory, the same gradient."),
    fsdp: bool = typer.Option(False, "--fsdp", help="Under torchrun: shard the policy, its gradients and Adam's "
                              "state across the processes (FSDP2, ZeRO-3's partitioning) instead of each holding "
                              "all of them; rank 0 gathers what it publishes."),
    report_to: str = typer.Option("none", "--report-to", help="Also log metrics to tensorboard (OUT/tensorboard) or "
                                  "wandb."),
    max_staleness: int = typer.Option(0, "--max-staleness", min=0, help="Train on steps at most this many versions old."),
    weights_route: str = typer.Option("auto", "--weights-route", help="How --full publishes a version: sglang "
                                      "(POST /update_weights_from_disk: SGLang, clawgym serve), vllm (POST "
                                      "/collective_rpc reload_weights: vLLM with VLLM_SERVER_DEV_MODE=1) or auto "
                                      "(SGLang's route, else vLLM's)."),
    async_rollouts: bool = typer.Option(False, "--async-rollouts", help="One step off-policy: iteration v+1's "
                                        "episodes are made by policy v while v is updated (needs --max-staleness 1)."),
    seed: int = typer.Option(0, "--seed"),
    jobs: int = jobs_option(4),
    sandbox: str = sandbox_option(),
    episode_timeout: float | None = typer.Option(None, "--episode-timeout", min=1.0),
    precision: str = precision_option("fp32", "The embedded server's precision for the rollouts: "
                                      "fp32, bf16, auto or q4 (about 2.5x faster generation on CPUs with AVX512-BF16; "
                                      "the engine's logprobs, the behaviour policy, then differ from the trainer's fp32 "
                                      "ones by ~0.01 on average: see engine_logprob_gap in metrics.jsonl)."),
    agent: str = typer.Option("llm", "--agent", help="Who makes the rollouts: llm (the built-in agent) or openclaw "
                              "(the black-box agent, its calls sampled at --temperature by the gateway)."),
    train_precision: str = typer.Option("fp32", "--train-precision", help="The update's forward passes: fp32, bf16 "
                                        "(autocast; the trained weights, gradients and loss stay fp32) or auto (bf16 "
                                        "where the hardware is fast at it)."),
    device: str = typer.Option("auto", "--device", help="Where the update runs: auto (a CUDA GPU when torch sees "
                               "one, else the CPU), cpu, cuda or cuda:N."),
    share_prefixes: bool = typer.Option(True, "--share-prefixes/--no-share-prefixes", help="Run the tokens the "
                                        "rows of a micro-batch share (a group's prompt) once, as a prefix tree: the "
                                        "same loss and gradient, fewer tokens computed."),
    executor: str = executor_option(),
    ray_address: str | None = ray_address_option(),
    judge_model: list[str] | None = judge_model_option(
        " Episodes of tasks with a rubric are judged as they end and rewarded with the hybrid score (0.7 code + "
        "0.3 rubric by default); with --credit progress the code part's step rewards are weighted and the rubric's "
        "share is the last step's. Without, hybrid tasks are rewarded on their code checks alone."),
    judge_base_url: str | None = typer.Option(None, "--judge-base-url", help=JUDGE_BASE_URL_HELP),
    judge_samples: int = JUDGE_SAMPLES,
    judge_temperature: float | None = JUDGE_TEMPERATURE,
    judge_seed: int = JUDGE_SEED,
    judge_max_tokens: int = JUDGE_MAX_TOKENS,
) -> None:
    """Online RL: serve policy v, roll out k samples per task into OUT/pool, update a LoRA adapter on the pool's
    token ids, publish v+1 to the server without restarting it (vLLM's load_lora_adapter), repeat. With
    --judge-model the reward of a task with a rubric is the hybrid score (judge cache: OUT/judge_cache)."""
    from clawgym.core.errors import ClawgymError
    from clawgym.core.jsonl import read_records_lenient
    from clawgym.core.records import Task
    from clawgym.rollout.executor import make_executor
    from clawgym.sandbox import get_backend
    from clawgym.train.rl_loop import RLOptions, run_rl

    _refuse_bad_rl_settings(algo=algo, lr_schedule=lr_schedule, dtype=dtype, report_to=report_to, credit=credit,
                            agent=agent, precision=precision, train_precision=train_precision, device=device)
    if not tasks_path.is_file():
        fail(f"{tasks_path}: no such file")
    read = read_records_lenient(tasks_path, Task)
    error_lines(read.errors)
    tasks = [t for t in read.records if t.verifier.code is not None]
    if not tasks:
        fail(f"{tasks_path}: no task with a code check to train on")
    judge_endpoint = judge_url(judge_base_url)
    refuse_unjudgeable(judge_model, judge_endpoint, executor)
    try:
        backend = get_backend(sandbox)
        ex = make_executor(executor, jobs=jobs, ray_address=ray_address, sandbox=backend.name)
    except (ValueError, ClawgymError) as exc:
        fail(str(exc), 2)
    opts = RLOptions(model=model, base_url=base_url, samples=samples, tasks_per_iter=tasks_per_iter,
                     iterations=iterations, temperature=temperature, max_turns=max_turns, max_tokens=max_tokens,
                     algo=algo, credit=credit, gamma=gamma, kl_coef=kl_coef, clip=clip,
                     lr=lr if lr is not None else (1e-5 if full else 1e-4), lora_r=lora_r,
                     epochs=epochs, max_staleness=max_staleness, seed=seed, jobs=jobs, sandbox=sandbox,
                     episode_timeout=episode_timeout, executor=ex, precision=precision, full=full, agent=agent,
                     device=device, train_precision=train_precision, share_prefixes=share_prefixes,
                     progress=progress_rewards or credit in ("progress", "gae"), mini_batches=mini_batches,
                     gae_lambda=gae_lambda, value_lr=value_lr, value_steps=value_steps,
                     micro_batch_tokens=micro_batch_tokens, lr_schedule=lr_schedule, warmup_steps=warmup_steps,
                     max_grad_norm=max_grad_norm or None, dtype=dtype, gradient_checkpointing=gradient_checkpointing,
                     report_to=report_to, async_rollouts=async_rollouts, weights_route=weights_route, fsdp=fsdp,
                     init_adapter=str(init_adapter) if init_adapter else None)

    def show(kind: str, data: dict) -> None:
        if kind == "rollout":
            err.print(f"v{data['version']}: rolling out {data['tasks']} tasks x {data['samples']}", highlight=False)
        elif kind == "rolled_out":
            err.print(f"v{data['version']}: mean reward {data['mean_reward']:.3f}, pass rate {data['pass_rate']:.2f} "
                      f"over {data['scored']} episodes", highlight=False)
        elif kind == "update":
            err.print(f"v{data['version']}: updating on {data['rows']} steps", highlight=False)
        elif kind == "published":
            err.print(f"published v{data['published']}: loss {data.get('loss', 0):.4f}, kl {data.get('kl', 0):.4f}, "
                      f"clip {data.get('clip_fraction', 0):.3f}, ratio max {data.get('ratio_max', 1):.3f}, "
                      f"rollout {data['rollout_s']:.0f} s, train {data['train_s']:.0f} s", highlight=False)

    try:
        with ex, ExitStack() as judging:
            if judge_model:
                opts.judge = build_judge(
                    judging, judge_model, judge_endpoint, run_dir=output, samples=judge_samples,
                    temperature=judge_temperature, seed=judge_seed, max_tokens=judge_max_tokens, concurrency=jobs,
                    timeout=600.0, cache_dir=output / "judge_cache", announce=announce_judge_server(err))
            rows = run_rl(tasks, output, opts, backend=backend, on_event=show)
            if opts.judge is not None:
                err.print(judge_usage_line(opts.judge), highlight=False)
    except ClawgymError as exc:
        fail(str(exc))
    finally:
        backend.close()
    if int(os.environ.get("RANK", "0")) != 0:
        return  # another process of a torchrun: rank 0 reports
    if not rows:
        out.print(f"{output}: already at version {iterations}; nothing to do", highlight=False)
        return
    out.print(f"published v{rows[-1]['published']}; metrics: {output / 'metrics.jsonl'}, chart: {output / 'metrics.png'}",
              highlight=False)


@train_app.command("rl-update")
def rl_update_cmd(
    batch: Path = typer.Argument(..., metavar="BATCH", help="Rows to train on: a batch `train rl` kept "
                                 "(OUT/batches/v<N>.jsonl) or `pool export --format rl` rows (JSONL or a JSON list)."),
    model: str = model_option("Base model: an embedded name or a model directory."),
    output: Path = output_option("Output directory: metrics.json and, unless --no-save, adapter/ (weights/ with --full)."),
    adapter: Path | None = typer.Option(None, "--adapter", help="Start from this adapter (with its optimizer state; "
                                        "with --full, a model directory); default: a fresh LoRA adapter drawn with --seed."),
    algo: str = typer.Option("grpo", "--algo", help="grpo, dr-grpo, rloo or reinforce++ (the loss aggregation)."),
    kl_coef: float = typer.Option(0.0, "--kl-coef", min=0.0, help="KL to the initial policy (k3 estimator)."),
    clip: float = typer.Option(0.2, "--clip", min=0.0, help="Ratio clip epsilon."),
    lr: float | None = typer.Option(None, "--lr", min=0.0, help="Learning rate (default 1e-4 with LoRA, 1e-5 with --full)."),
    lora_r: int = typer.Option(16, "--lora-r", min=1),
    full: bool = typer.Option(False, "--full", help="Train every weight instead of a LoRA adapter."),
    epochs: int = typer.Option(1, "--epochs", min=1, help="Passes over the batch."),
    mini_batches: int = typer.Option(1, "--mini-batches", min=1, help="Optimizer steps per pass (PPO mini-batches)."),
    micro_batch_tokens: int = typer.Option(4096, "--micro-batch-tokens", min=1, help="Tokens per micro-batch."),
    lr_schedule: str = typer.Option("constant", "--lr-schedule", help="constant, linear or cosine over the "
                                    "update's optimizer steps (epochs x mini-batches)."),
    warmup_steps: int = typer.Option(0, "--warmup-steps", min=0, help="Optimizer steps of linear warmup."),
    max_grad_norm: float = typer.Option(1.0, "--max-grad-norm", min=0.0, help="Clip each step's gradient to this "
                                        "norm (0: off)."),
    max_tokens: int = typer.Option(256, "--max-tokens", min=1, help="The rollouts' max tokens per call (dr-grpo's "
                                   "normalizer)."),
    dtype: str = typer.Option("fp32", "--dtype", help="The policy's weights: auto, bf16 (a LoRA adapter stays fp32) "
                              "or fp32."),
    train_precision: str = typer.Option("fp32", "--train-precision", help="The forward passes: fp32, bf16 "
                                        "(autocast) or auto."),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing", help="Recompute activations in "
                                                "the backward pass."),
    fsdp: bool = typer.Option(False, "--fsdp", help="Under torchrun: shard the policy, its gradients and Adam's "
                              "state across the processes (FSDP2) instead of each holding all of them."),
    share_prefixes: bool = typer.Option(True, "--share-prefixes/--no-share-prefixes", help="Run the tokens the "
                                        "rows of a micro-batch share once (a prefix tree)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N (under torchrun on GPUs: each "
                               "process its LOCAL_RANK's GPU)."),
    threads: int | None = typer.Option(None, "--threads", min=1, help="torch CPU threads per process."),
    seed: int = typer.Option(0, "--seed", help="Draws a fresh adapter."),
    save: bool = typer.Option(True, "--save/--no-save", help="Write the updated adapter (or weights)."),
) -> None:
    """One RL update on a saved batch, in one process or several: under `torchrun` every process takes its share
    of each mini-batch and the same summed-gradient step (the single-process update of the same batch)."""
    import os

    from clawgym.core.errors import ClawgymError
    from clawgym.rl import algos
    from clawgym.train.rl_loop import RLOptions
    from clawgym.train.rl_update_run import run_update

    if algo not in algos():
        fail(f"--algo {algo!r}: choose one of {', '.join(algos())}", 2)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    opts = RLOptions(model=model, algo=algo, kl_coef=kl_coef, clip=clip,
                     lr=lr if lr is not None else (1e-5 if full else 1e-4), lora_r=lora_r, full=full, epochs=epochs,
                     mini_batches=mini_batches, micro_batch_tokens=micro_batch_tokens, lr_schedule=lr_schedule,
                     warmup_steps=warmup_steps, max_grad_norm=max_grad_norm or None, max_tokens=max_tokens,
                     dtype=dtype, train_precision=train_precision, gradient_checkpointing=gradient_checkpointing,
                     share_prefixes=share_prefixes, device=device, seed=seed, fsdp=fsdp)
    try:
        metrics = run_update(batch, output, opts, adapter=adapter, save=save)
    except (ValueError, ClawgymError) as exc:
        fail(str(exc), 2)
    st = metrics["stats"]
    if int(os.environ.get("RANK", "0")) == 0:  # one line from rank 0, not one per process
        out.print(f"{st.get('optimizer_steps', 0)} step(s) on {st.get('tokens', 0)} tokens in {metrics['processes']} "
                  f"process(es): loss {st.get('loss', 0.0):.4f}, clip {st.get('clip_fraction', 0.0):.3f}; "
                  f"metrics: {output / 'metrics.json'}", highlight=False)
