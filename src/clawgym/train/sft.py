"""Multi-turn SFT on verifier-filtered conversations (`clawgym train sft`), and merging the result into a
servable model directory (`clawgym train export`).

The data are the records of `clawgym filter`. Each is tokenized with the server's own rendering
(:mod:`clawgym.train.masks`), the loss on assistant turns only, every mask verified. Training is trl's
`SFTTrainer` on that pre-tokenized dataset (`input_ids` + `labels`), with a peft LoRA adapter by default
(`full=True` trains every weight).

Batching: the default, ``packed``, spends no compute on padding. trl packs the sequences best-fit-decreasing into
rows of at most `batch_tokens` tokens and its padding-free collator flattens each row with per-sequence
position ids and boundaries. On a GPU with flash-attn those go to its varlen kernel; elsewhere to
:mod:`clawgym.train.attention`, which runs SDPA causally on each sequence of the row -- exactly the result of
separate forward passes (tested), attention cost sum(len^2). ``padded`` is trl's default batching
(`batch_size` random sequences padded to the longest), kept for comparison (benchmarks/perf/sft.py).

Output directory::

    OUT/
      train.json          settings, base model, data statistics, final metrics
      log.jsonl           one line per logged step: loss, learning rate, tokens, tokens/s
      checkpoint-N/       trainer checkpoints (adapter, optimizer, scheduler, RNG): `resume=True` continues
      final/              the trained adapter (or full model) and the tokenizer
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clawgym.core.atomic import write_json
from clawgym.core.errors import ClawgymError
from clawgym.core.precision import resolve_precision
from clawgym.train.masks import IGNORE, TokenizedExample

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
TRAIN_META = "train.json"
LOG_FILE = "log.jsonl"
FINAL = "final"


class TrainError(ClawgymError):
    pass


@dataclass
class SFTOptions:
    model: str = "smollm2-135m"  # an embedded model name or a local HF model directory
    full: bool = False  # train every weight instead of a LoRA adapter
    epochs: float = 1.0
    max_steps: int = -1  # > 0 overrides epochs
    lr: float | None = None  # default: 2e-4 with LoRA, 2e-5 full
    max_len: int = 8192  # tokens per sequence; longer ones train as windows / steps, never cut (clawgym.train.windows)
    batch_tokens: int = 8192  # packed: tokens per micro-batch (>= max_len)
    batching: str = "packed"  # packed | padded (trl's default: batch_size sequences padded to the longest)
    batch_size: int = 8  # padded: sequences per micro-batch
    grad_accum: int = 1
    lora_r: int = 16
    lora_alpha: int | None = None  # default 2 * r
    lora_dropout: float = 0.0  # > 0 costs a masked copy of every adapted layer's input (~30% of a CPU step)
    lora_targets: list[str] = field(default_factory=lambda: list(LORA_TARGETS))
    warmup_ratio: float = 0.03
    weight_decay: float = 0.0
    lr_scheduler: str = "cosine"
    max_grad_norm: float = 1.0
    seed: int = 0
    save_steps: int = 200  # 0: no checkpoints (no resume)
    save_total_limit: int = 2
    logging_steps: int = 1
    resume: bool = False
    precision: str = "auto"  # auto | fp32 | bf16 (autocast)
    dtype: str = "auto"  # auto | bf16 | fp32: the dtype the weights load in (clawgym.train.dtypes)
    gradient_checkpointing: bool | None = None  # None: on when a micro-batch holds more than 4096 tokens
    report_to: str = "none"  # none | tensorboard | wandb
    history: str = "final"  # templates that re-render earlier turns (Qwen3): final (one sequence) | exact (per turn)
    enable_thinking: bool | None = None  # passed to the chat template (Qwen3) when set
    attention: str = "auto"  # auto | flash_attention_2 | clawgym_sdpa_varlen | sdpa
    verify: str = "sample"  # every mask's spans always; server prompts for: sample (first 32) | full | none
    token_ids: bool = True  # train on a record's engine token ids when it has them (same tokenizer only)
    threads: int | None = None
    fsdp: str | None = None  # passed to TrainingArguments.fsdp (e.g. "full_shard auto_wrap"); run under torchrun
    fsdp_config: str | None = None  # a JSON file for TrainingArguments.fsdp_config
    deepspeed: str | None = None  # a DeepSpeed JSON config for TrainingArguments.deepspeed


@dataclass
class DataStats:
    records: int = 0
    examples: int = 0
    tokens: int = 0
    trained_tokens: int = 0
    truncated: int = 0  # sequences longer than max_len: trained as windows / steps (`windows`), never cut
    windows: int = 0  # examples made from those sequences
    dropped_turns: int = 0  # assistant turns or steps that fit no window (not trained)
    dropped_tokens: int = 0  # their tokens
    dropped_no_trained_tokens: int = 0
    token_id_records: int = 0
    max_len_seen: int = 0


@dataclass
class SFTResult:
    output_dir: str
    final_dir: str
    steps: int
    train_loss: float | None
    first_loss: float | None
    last_loss: float | None
    tokens: int  # real (non-pad) tokens processed
    trained_tokens: int
    padded_tokens: int  # tokens the model computed on, padding included
    seconds: float
    tokens_per_s: float
    data: DataStats
    resumed_from: str | None = None
    log: list[dict[str, Any]] = field(default_factory=list)


# --------------------------------------------------------------------------------------------- data


def build_examples(records: list[dict[str, Any]], tokenizer: Any, max_len: int, verify: str = "sample",
                   on_progress: Callable[[int, int], None] | None = None,
                   token_ids: bool = True, history: str = "exact",
                   enable_thinking: bool | None = None) -> tuple[list[TokenizedExample], DataStats]:
    """Tokenized, verified examples of SFT records, each at most `max_len` tokens, and what happened to them: a
    longer sequence trains as windows or steps (:mod:`clawgym.train.windows`), what fits no window is counted."""
    from clawgym.train.windows import tokenize_within

    stats = DataStats(records=len(records))
    out: list[TokenizedExample] = []
    kwargs = {"enable_thinking": enable_thinking} if enable_thinking is not None else None
    for i, rec in enumerate(records):
        full_check = verify == "full" or (verify == "sample" and i < 32)
        fit = tokenize_within(tokenizer, rec, max_len, verify_prompts=full_check, prefer_token_ids=token_ids,
                              history=history, template_kwargs=kwargs)
        stats.token_id_records += bool((rec.get("steps") or rec.get("prompt_ids")) and (token_ids or not rec.get("messages")))
        stats.truncated += fit.long
        stats.windows += fit.windows
        stats.dropped_turns += fit.dropped_turns
        stats.dropped_tokens += fit.dropped_tokens
        for ex in fit.examples:
            stats.max_len_seen = max(stats.max_len_seen, len(ex))
            if not any(x != IGNORE for x in ex.labels[1:]):  # the first label never counts (nothing predicts it)
                stats.dropped_no_trained_tokens += 1
                continue
            out.append(ex)
            stats.tokens += len(ex)
            stats.trained_tokens += ex.trained_tokens
        if on_progress:
            on_progress(i + 1, len(records))
    stats.examples = len(out)
    return out, stats


def data_fingerprint(examples: list[TokenizedExample]) -> str:
    h = hashlib.sha256()
    for ex in examples:
        h.update(json.dumps([ex.input_ids, ex.labels]).encode())
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------------------------- model


def load_base_config(model_dir: Path) -> Any:
    """The model's config without a GGUF `quantization_config` (the embedded model is converted from GGUF: its
    weights are plain float tensors, but the leftover entry would make transformers treat it as quantized)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(model_dir))
    qc = getattr(config, "quantization_config", None)
    if qc is not None and (qc.get("quant_method") if isinstance(qc, dict) else getattr(qc, "quant_method", None)) == "gguf":
        del config.quantization_config
    return config


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def resolve_attention(attention: str, batching: str) -> str:
    from clawgym.train.attention import register

    if attention != "auto":
        if attention == "clawgym_sdpa_varlen":
            register()
        return attention
    if batching != "packed":
        return "sdpa"
    if _cuda():
        import importlib.util

        if importlib.util.find_spec("flash_attn") is not None:
            return "flash_attention_2"
    return register()


# --------------------------------------------------------------------------------------------- training


def compact_causal_lm_loss(model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None,
                           chunk: int = 4096) -> tuple[Any, Any, Any]:
    """Next-token loss computed only where a label is trained: the backbone runs on every token, the LM head and
    the cross-entropy only on the positions whose next label is not -100 (about a third of an agent conversation:
    system prompt, tool schemas and tool results are context). Chunks of `chunk` positions are recomputed in the
    backward pass instead of keeping their (positions x vocabulary) logits.

    Returns (loss, number of trained positions, number of them predicted right)."""
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    labels = inputs["labels"]
    fwd = {k: v for k, v in inputs.items() if k != "labels"}
    fwd["use_cache"] = False
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    backbone = getattr(causal_lm, causal_lm.base_model_prefix)
    hidden = backbone(**fwd).last_hidden_state
    target = labels[:, 1:]
    mask = target != IGNORE
    h = hidden[:, :-1][mask]
    y = target[mask]
    head = causal_lm.get_output_embeddings()

    def piece(hs, ys):
        logits = F.linear(hs, head.weight, head.bias).float()
        return F.cross_entropy(logits, ys, reduction="sum"), (logits.argmax(-1) == ys).sum()

    total = h.new_zeros((), dtype=torch.float32)
    correct = 0
    for i in range(0, max(1, h.shape[0]), chunk):
        hs, ys = h[i:i + chunk], y[i:i + chunk]
        if hs.shape[0] == 0:
            total = total + hidden.sum() * 0.0  # keeps the graph connected for an all-masked micro-batch
            break
        if h.shape[0] > chunk and torch.is_grad_enabled():
            s, c = checkpoint(piece, hs, ys, use_reentrant=False)
        else:
            s, c = piece(hs, ys)
        total = total + s
        correct += int(c)
    n = int(mask.sum())
    denom = num_items_in_batch if num_items_in_batch is not None else max(1, n)
    return total / torch.as_tensor(denom, device=total.device).clamp(min=1), n, correct


def compact_loss_through_forward(model: Any, inputs: dict[str, Any],
                                 num_items_in_batch: Any = None) -> tuple[Any, Any, Any]:
    """:func:`compact_causal_lm_loss` through the model's own forward, for a model wrapped by DDP (or FSDP), whose
    gradient synchronisation needs its forward called: transformers' `logits_to_keep` indices select the trained
    positions (of any row), so the LM head still runs on those only (all at once: no chunked recomputation)."""
    import torch
    import torch.nn.functional as F

    labels = inputs["labels"]
    fwd = {k: v for k, v in inputs.items() if k != "labels"}
    fwd["use_cache"] = False
    target = labels[:, 1:]
    mask = target != IGNORE
    pos = mask.any(0).nonzero().flatten()
    if pos.numel() == 0:
        pos = torch.zeros(1, dtype=torch.long, device=labels.device)
    logits = model(**fwd, logits_to_keep=pos).logits
    keep = mask[:, pos]
    lg, y = logits[keep].float(), target[:, pos][keep]
    total = F.cross_entropy(lg, y, reduction="sum") if y.numel() else logits.sum() * 0.0
    n = int(keep.sum())
    correct = int((lg.argmax(-1) == y).sum()) if n else 0
    denom = num_items_in_batch if num_items_in_batch is not None else max(1, n)
    return total / torch.as_tensor(denom, device=total.device).clamp(min=1), n, correct


def _supports_compact_loss(model: Any) -> bool:
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = causal_lm.config.get_text_config()
    plain_head = all(getattr(cfg, k, None) in (None, 1.0) for k in
                     ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier",
                      "logits_scaling"))
    return plain_head and hasattr(causal_lm, getattr(causal_lm, "base_model_prefix", "") or "-")


def _make_trainer_class():
    from trl import SFTTrainer

    class ClawgymSFTTrainer(SFTTrainer):
        """trl's SFTTrainer counting real, trained and computed (padding included) tokens of every step; with
        `compact_loss`, the LM head runs only on trained positions (:func:`compact_causal_lm_loss`)."""

        def __init__(self, *args, compact_loss: bool = True, **kwargs):
            self.counts = {"tokens": 0, "trained": 0, "computed": 0}
            self.compact_loss = compact_loss
            super().__init__(*args, **kwargs)
            self.compact_loss = compact_loss and _supports_compact_loss(self.model)

        def global_counts(self) -> dict[str, int]:
            """The token counts summed over the processes (every process must call it: a collective)."""
            import torch
            import torch.distributed as dist

            if self.accelerator.num_processes == 1 or not dist.is_initialized():
                return dict(self.counts)
            keys = sorted(self.counts)
            t = torch.tensor([self.counts[k] for k in keys], dtype=torch.long, device=self.accelerator.device)
            dist.all_reduce(t)
            return dict(zip(keys, (int(x) for x in t.tolist()), strict=True))

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if model.training:
                labels = inputs["labels"]
                mask = inputs.get("attention_mask")
                self.counts["tokens"] += int(mask.sum()) if mask is not None else int(inputs["input_ids"].numel())
                self.counts["trained"] += int((labels[:, 1:] != IGNORE).sum())
                self.counts["computed"] += int(inputs["input_ids"].numel())
            if not self.compact_loss or return_outputs:
                return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                            num_items_in_batch=num_items_in_batch)
            if model is self.model and self.accelerator.num_processes == 1:
                # the backbone is called directly, not through the forward accelerate wraps in its autocast
                with self.accelerator.autocast():
                    loss, n, correct = compact_causal_lm_loss(model, inputs, num_items_in_batch)
            else:  # wrapped (DDP, FSDP): through its forward
                loss, n, correct = compact_loss_through_forward(model, inputs, num_items_in_batch)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                # num_items_in_batch counts every process's tokens and DDP averages the gradients: as the
                # Trainer's own loss does, scale back to the global token mean
                loss = loss * self.accelerator.num_processes
            mode = "train" if model.training else "eval"
            self._metrics[mode]["mean_token_accuracy"].append(correct / n if n else 0.0)
            return loss

    return ClawgymSFTTrainer


def _progress_callback(trainer_ref: dict, log_path: Path | None, on_log: Callable[[dict], None] | None, show: bool):
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        def __init__(self):
            self.bar = None
            self.task = None
            self.t0 = None
            self.tok0 = 0
            self.loss = None
            self.rows: list[dict] = []

        def on_train_begin(self, args, state, control, **kw):
            self.t0 = time.monotonic()
            self.tok0 = trainer_ref["trainer"].counts["tokens"]
            if show:
                from rich.console import Console
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                    TimeRemainingColumn,
                )

                self.bar = Progress(TextColumn("[bold]sft"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                    TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                                    console=Console(stderr=True))
                self.task = self.bar.add_task("sft", total=state.max_steps, completed=state.global_step, status="")
                self.bar.start()

        def _rate(self) -> float:
            dt = time.monotonic() - self.t0 if self.t0 else 0.0
            return (trainer_ref["trainer"].counts["tokens"] - self.tok0) / dt if dt > 0 else 0.0

        def _show(self, step: int) -> None:
            if self.bar is not None:
                loss = f"loss {self.loss:.4f}, " if self.loss is not None else ""
                self.bar.update(self.task, completed=step, status=f"{loss}{self._rate():.0f} tok/s")

        def on_step_end(self, args, state, control, **kw):
            self._show(state.global_step)

        def on_log(self, args, state, control, logs=None, **kw):
            logs = logs or {}
            if "loss" not in logs:
                return
            self.loss = float(logs["loss"])
            c = trainer_ref["trainer"].global_counts()
            row = {"step": state.global_step, "epoch": round(float(state.epoch or 0), 4), "loss": self.loss,
                   "lr": logs.get("learning_rate"), "grad_norm": logs.get("grad_norm"), "tokens": c["tokens"],
                   "trained_tokens": c["trained"], "computed_tokens": c["computed"],
                   "tokens_per_s": round(self._rate(), 2), "time": round(time.monotonic() - self.t0, 3)}
            self.rows.append(row)
            if log_path is not None and state.is_world_process_zero:
                with open(log_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(row) + "\n")
            if on_log:
                on_log(row)
            self._show(state.global_step)

        def on_train_end(self, args, state, control, **kw):
            if self.bar is not None:
                self.bar.update(self.task, completed=state.global_step)
                self.bar.stop()

    return Progress()


def latest_checkpoint(output_dir: Path) -> Path | None:
    cks = [p for p in output_dir.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return max(cks, key=lambda p: int(p.name.split("-")[-1])) if cks else None


def _checkpointing_field() -> str:
    """`activation_checkpointing` (transformers >= 5.x), else the older `gradient_checkpointing`."""
    import dataclasses

    from trl import SFTConfig

    names = {f.name for f in dataclasses.fields(SFTConfig)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def train_sft(data: str | os.PathLike | list[dict[str, Any]], output_dir: str | os.PathLike,
              options: SFTOptions | None = None, show_progress: bool = True,
              on_log: Callable[[dict], None] | None = None,
              on_data: Callable[[DataStats], None] | None = None) -> SFTResult:
    """Train on an SFT file (or its records) into `output_dir`; see the module docstring for the layout."""
    from transformers import AutoTokenizer

    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.filter import read_sft_records

    opts = options or SFTOptions()
    _check_options(opts, Path(output_dir))
    model_dir = resolve_model_dir(opts.model)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    records = read_sft_records(data) if not isinstance(data, list) else data
    if not records:
        raise TrainError("no training records")
    examples, stats = build_examples(records, tokenizer, opts.max_len, opts.verify, token_ids=opts.token_ids,
                                     history=opts.history, enable_thinking=opts.enable_thinking)
    if on_data:
        on_data(stats)
    return train_examples(examples, output_dir, opts, stats=stats, show_progress=show_progress, on_log=on_log,
                          data_source=None if isinstance(data, list) else str(data))


def _check_options(opts: SFTOptions, out: Path) -> None:
    if opts.batching not in ("packed", "padded"):
        raise TrainError(f"unknown batching {opts.batching!r}; use packed or padded")
    if opts.batching == "packed" and opts.batch_tokens < opts.max_len:
        raise TrainError(f"--batch-tokens ({opts.batch_tokens}) must be at least --max-len ({opts.max_len})")
    if opts.precision not in ("auto", "fp32", "bf16"):
        raise TrainError(f"unknown precision {opts.precision!r}; use auto, fp32 or bf16")
    if opts.verify not in ("sample", "full", "none"):
        raise TrainError(f"unknown verify {opts.verify!r}; use sample, full or none")
    if opts.history not in ("final", "exact"):
        raise TrainError(f"unknown history {opts.history!r}; use final or exact")
    if opts.fsdp and opts.deepspeed:
        raise TrainError("--fsdp and --deepspeed exclude each other; pass one")
    if opts.fsdp_config and not opts.fsdp:
        raise TrainError("--fsdp-config needs --fsdp (e.g. --fsdp \"full_shard auto_wrap\")")
    for flag, path in (("--fsdp-config", opts.fsdp_config), ("--deepspeed", opts.deepspeed)):
        if path and not Path(path).is_file():
            raise TrainError(f"{flag} {path}: no such file")
    from clawgym.train.dtypes import check_dtype
    from clawgym.train.reporting import check_report_to

    check_dtype(opts.dtype)
    check_report_to(opts.report_to)
    resume_from = latest_checkpoint(out) if out.exists() else None
    if resume_from is not None and not opts.resume:
        raise TrainError(f"{out} already holds checkpoints ({resume_from.name}); pass --resume to continue, or "
                         "choose another output directory")


def train_examples(examples: list[TokenizedExample], output_dir: str | os.PathLike, options: SFTOptions | None = None,
                   stats: DataStats | None = None, show_progress: bool = True,
                   on_log: Callable[[dict], None] | None = None, data_source: str | None = None,
                   compact_loss: bool = True) -> SFTResult:
    """Train on tokenized examples (`build_examples`). `compact_loss=False` keeps trl's own loss (the LM head on
    every position), for comparisons."""
    return run_training(prepare_training(examples, output_dir, options, stats=stats, show_progress=show_progress,
                                         on_log=on_log, data_source=data_source, compact_loss=compact_loss))


@dataclass
class PreparedTraining:
    """A trainer ready to run (:func:`run_training`), and what it writes when done."""

    trainer: Any
    progress: Any
    tokenizer: Any
    out: Path
    meta: dict[str, Any]
    stats: DataStats
    resume_from: Path | None


def prepare_training(examples: list[TokenizedExample], output_dir: str | os.PathLike,
                     options: SFTOptions | None = None, stats: DataStats | None = None, show_progress: bool = True,
                     on_log: Callable[[dict], None] | None = None, data_source: str | None = None,
                     compact_loss: bool = True, callbacks: list[Any] | None = None) -> PreparedTraining:
    """Load the model and build the trainer (no step run yet)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig

    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.dtypes import master_weights, resolve_dtype, torch_dtype
    from clawgym.train.reporting import point_tensorboard, report_to_list

    opts = options or SFTOptions()
    out = Path(output_dir)
    _check_options(opts, out)
    if not examples:
        raise TrainError("no example has a trained token left")
    if stats is None:
        stats = DataStats(records=len(examples), examples=len(examples), tokens=sum(len(e) for e in examples),
                          trained_tokens=sum(e.trained_tokens for e in examples),
                          max_len_seen=max(len(e) for e in examples))
    too_long = [e.record for e in examples if len(e) > opts.max_len]
    if too_long:
        raise TrainError(f"{len(too_long)} examples are longer than max_len={opts.max_len} (e.g. {too_long[0]})")
    resume_from = latest_checkpoint(out) if out.exists() and opts.resume else None
    if opts.threads:
        torch.set_num_threads(opts.threads)
    model_dir = resolve_model_dir(opts.model)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    fingerprint = data_fingerprint(examples)

    out.mkdir(parents=True, exist_ok=True)
    meta_path = out / TRAIN_META
    if resume_from is not None and meta_path.exists():
        prev = json.loads(meta_path.read_text())
        if prev.get("data_fingerprint") != fingerprint:
            raise TrainError(f"{out}: the checkpoints were trained on other data (or other tokenization settings); "
                             "resume needs the same data and options")
    precision = resolve_precision(opts.precision)
    dtype = resolve_dtype(opts.dtype, opts.full)
    attention = resolve_attention(opts.attention, opts.batching)
    micro_tokens = opts.batch_tokens if opts.batching == "packed" else opts.batch_size * min(opts.max_len, stats.max_len_seen)
    grad_ckpt = opts.gradient_checkpointing if opts.gradient_checkpointing is not None else micro_tokens > 4096
    lr = opts.lr if opts.lr is not None else (2e-5 if opts.full else 2e-4)

    config = load_base_config(model_dir)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), config=config, dtype=torch_dtype(dtype),
                                                 attn_implementation=attention)
    peft_config = None
    if not opts.full:
        from peft import LoraConfig

        peft_config = LoraConfig(r=opts.lora_r, lora_alpha=opts.lora_alpha or 2 * opts.lora_r,
                                 lora_dropout=opts.lora_dropout, target_modules=list(opts.lora_targets),
                                 bias="none", task_type="CAUSAL_LM")

    packed = opts.batching == "packed"
    ckpt_field = _checkpointing_field()
    args = SFTConfig(
        output_dir=str(out),
        num_train_epochs=opts.epochs,
        max_steps=opts.max_steps,
        learning_rate=lr,
        lr_scheduler_type=opts.lr_scheduler,
        warmup_steps=opts.warmup_ratio,  # a float < 1 is a ratio of the total steps
        weight_decay=opts.weight_decay,
        max_grad_norm=opts.max_grad_norm,
        per_device_train_batch_size=1 if packed else opts.batch_size,
        gradient_accumulation_steps=opts.grad_accum,
        max_length=opts.batch_tokens if packed else opts.max_len,
        packing=packed,
        packing_strategy="bfd",
        padding_free=packed,
        bf16=precision == "bf16",
        fp16=False,
        use_cpu=not _cuda(),
        **{ckpt_field: grad_ckpt},
        logging_steps=opts.logging_steps,
        save_strategy="steps" if opts.save_steps > 0 else "no",
        save_steps=max(1, opts.save_steps),
        save_total_limit=opts.save_total_limit,
        seed=opts.seed,
        data_seed=opts.seed,
        report_to=report_to_list(opts.report_to),
        disable_tqdm=True,
        dataloader_num_workers=0,
        remove_unused_columns=True,
        fsdp=opts.fsdp or None,
        fsdp_config=opts.fsdp_config,
        deepspeed=opts.deepspeed,
    )
    dataset = Dataset.from_dict({"input_ids": [e.input_ids for e in examples],
                                 "labels": [e.labels for e in examples]})
    trainer_ref: dict = {}
    progress = _progress_callback(trainer_ref, out / LOG_FILE, on_log, show_progress)
    trainer_cls = _make_trainer_class()
    trainer = trainer_cls(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                          peft_config=peft_config, callbacks=[progress, *(callbacks or [])],
                          compact_loss=compact_loss)
    trainer_ref["trainer"] = trainer
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # our progress bar and log.jsonl report the logs
    tensorboard = point_tensorboard(trainer, out)

    settings = {k: v for k, v in asdict(opts).items()}
    meta = {
        "base_model": opts.model, "base_model_dir": str(Path(model_dir).resolve()), "adapter": not opts.full,
        "options": settings, "precision": precision, "dtype": dtype,
        "master_weights": master_weights(dtype, opts.full), "attention": attention, "gradient_checkpointing": grad_ckpt,
        "processes": trainer.accelerator.num_processes, "distributed": _distributed(trainer, opts),
        "tensorboard": str(tensorboard) if tensorboard else None,
        "learning_rate": lr, "data": asdict(stats), "data_fingerprint": fingerprint,
        "data_source": data_source, "compact_loss": trainer.compact_loss,
        "packed_rows": len(trainer.train_dataset), "status": "training",
    }
    if trainer.is_world_process_zero():
        write_json(meta_path, meta, default=str)
    return PreparedTraining(trainer, progress, tokenizer, out, meta, stats, resume_from)


def _distributed(trainer: Any, opts: SFTOptions) -> str:
    """How accelerate runs the processes (NO, MULTI_CPU, MULTI_GPU, FSDP, DEEPSPEED). Sharding asked for (`--fsdp`,
    `--deepspeed`, or an `accelerate launch` config's ACCELERATE_USE_FSDP / ACCELERATE_USE_DEEPSPEED) that accelerate
    did not enable is refused instead of trained without: accelerate runs FSDP only on accelerators (on CPUs it
    drops the plugin and runs plain DDP over gloo)."""
    kind = str(getattr(trainer.accelerator.distributed_type, "value", trainer.accelerator.distributed_type))
    env = os.environ
    for name, asked, on in (
            ("FSDP", opts.fsdp or env.get("ACCELERATE_USE_FSDP", "").lower() == "true", trainer.is_fsdp_enabled),
            ("DeepSpeed", opts.deepspeed or env.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true",
             trainer.is_deepspeed_enabled)):
        if asked and not on:
            where = " (accelerate runs FSDP on GPUs only)" if name == "FSDP" and not _cuda() else ""
            raise TrainError(f"{name} was asked for but accelerate runs {kind} here{where}; launch with torchrun or "
                             "accelerate launch on GPUs")
    return kind


def run_training(prep: PreparedTraining) -> SFTResult:
    """Run the prepared trainer to the end; save `final/` and the result in train.json."""
    trainer, progress, tokenizer, out, meta, stats, resume_from = (
        prep.trainer, prep.progress, prep.tokenizer, prep.out, prep.meta, prep.stats, prep.resume_from)
    t0 = time.monotonic()
    result = trainer.train(resume_from_checkpoint=str(resume_from) if resume_from is not None else None)
    seconds = time.monotonic() - t0
    final = out / FINAL
    main = trainer.is_world_process_zero()
    tmp = out / ".final.partial"  # one path for every process: save_model is collective (FSDP, ZeRO-3 gather)
    if main and tmp.exists():
        shutil.rmtree(tmp)
    trainer.accelerator.wait_for_everyone()
    try:
        trainer.save_model(str(tmp))
        if main:
            tokenizer.save_pretrained(str(tmp))
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
    finally:
        if main and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    rows = progress.rows
    c = trainer.global_counts()
    res = SFTResult(
        output_dir=str(out), final_dir=str(final), steps=int(trainer.state.global_step),
        train_loss=float(result.training_loss) if result.training_loss is not None else None,
        first_loss=rows[0]["loss"] if rows else None, last_loss=rows[-1]["loss"] if rows else None,
        tokens=c["tokens"], trained_tokens=c["trained"], padded_tokens=c["computed"], seconds=round(seconds, 3),
        tokens_per_s=round(c["tokens"] / seconds, 2) if seconds > 0 else 0.0, data=stats,
        resumed_from=str(resume_from) if resume_from else None, log=rows,
    )
    meta.update(status="done", result={k: v for k, v in asdict(res).items() if k not in ("log", "data")})
    if main:
        write_json(out / TRAIN_META, meta, default=str)
    return res


# --------------------------------------------------------------------------------------------- export


def export_model(train_dir: str | os.PathLike, output: str | os.PathLike, checkpoint: str | None = None,
                 base_model: str | None = None) -> Path:
    """Merge the trained adapter (of `final/`, or of a checkpoint) into the base model and write a full model
    directory: safetensors weights, config, generation config, tokenizer with its chat template. Any local
    HF model directory is servable (`clawgym serve --model OUTPUT`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from clawgym.llm.models import resolve_model_dir

    train_dir = Path(train_dir)
    meta_path = train_dir / TRAIN_META
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    src = train_dir / checkpoint if checkpoint else train_dir / FINAL
    if checkpoint and not src.is_dir() and Path(checkpoint).is_dir():
        src = Path(checkpoint)
    if not src.is_dir():
        raise TrainError(f"{src}: no trained model here (train first, or name a checkpoint-N directory)")
    base = base_model or meta.get("base_model_dir") or meta.get("base_model")
    is_adapter = (src / "adapter_config.json").exists()
    if is_adapter:
        if not base:
            adapter_cfg = json.loads((src / "adapter_config.json").read_text())
            base = adapter_cfg.get("base_model_name_or_path")
        if not base:
            raise TrainError(f"{src} holds a LoRA adapter but the base model is unknown; pass --base-model")
        from peft import PeftModel

        base_dir = resolve_model_dir(str(base))
        model = AutoModelForCausalLM.from_pretrained(str(base_dir), config=load_base_config(base_dir),
                                                     dtype=torch.float32)
        model = PeftModel.from_pretrained(model, str(src)).merge_and_unload()
    else:
        base_dir = src
        model = AutoModelForCausalLM.from_pretrained(str(src), config=load_base_config(src), dtype=torch.float32)
    tok_dir = src if (src / "tokenizer_config.json").exists() else base_dir
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    model.config.use_cache = True
    model.config._attn_implementation = "sdpa"  # never a training-only attention in the saved config

    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        config_path = tmp / "config.json"
        cfg = json.loads(config_path.read_text())
        cfg.pop("quantization_config", None)
        config_path.write_text(json.dumps(cfg, indent=2) + "\n")
        (tmp / "clawgym_model.json").write_text(json.dumps({
            "name": output.name, "source": "clawgym train export", "base_model": meta.get("base_model", str(base)),
            "trained_from": str(src.resolve()), "adapter_merged": is_adapter,
            "training": {k: meta.get(k) for k in ("options", "data", "result", "data_source") if k in meta},
        }, indent=2, default=str) + "\n")
        if output.exists():
            shutil.rmtree(output)
        tmp.rename(output)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return output


def steps_per_epoch_estimate(stats: DataStats, opts: SFTOptions) -> int:
    per = opts.batch_tokens if opts.batching == "packed" else opts.batch_size * opts.max_len
    return max(1, math.ceil(stats.tokens / per / max(1, opts.grad_accum)))
