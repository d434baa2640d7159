"""Summaries of a set of trajectories: counts, mean score, pass rate, errors by kind, and ClawGym's trajectory
statistics (rounds, tokens, tool calls and distinct tool types per episode), with the cost of a run when prices
per million tokens are given.

The summary works from one small :class:`EpisodeDigest` per episode rather than from whole trajectories, so the
viewer (:mod:`clawgym.view`) can keep a digest per line of a large ``trajectories.jsonl`` and summarize without
reading the file again.

**Statistics** count the episodes the agent ran (not infrastructure errors, not skipped ones): *rounds* are
model calls (``usage.model_calls``; else the assistant messages of the conversation or transcript), *tokens* are
``usage.total_tokens`` (agents without a model, such as the oracle, have none), *tool calls* the episode's
``tool_calls``, and *tool types* the number of distinct tool names it called.

**Conversations** (an SFT file of `clawgym filter`, or trajectories imported in OpenAI-messages form: lines of
``messages`` + ``tools``) get the same statistics, each conversation one episode: rounds are its assistant turns,
tool calls and tool types those of its assistant messages, and tokens the length of the whole conversation as
training renders it (chat template and tool schemas) with the model's tokenizer when one is given, else
approximated as characters / 4 (:data:`CHARS_PER_TOKEN`) and said so. A conversation longer than a given window
(`train sft --max-len`) is listed by name, never passed over: training takes it as windows, each ending at an
assistant turn, never cut from the end.

**Prices** (``--prices FILE``) are a JSON object ``{"MODEL": {"input": USD, "output": USD}}`` per million input
(prompt) and output (completion) tokens; the key ``"*"`` prices every model not named. A run whose model has no
price gets no cost (shown as ``-``), never a made-up one.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgym.core.errors import ClawgymError
from clawgym.core.records import Trajectory


class PricesError(ClawgymError):
    """A prices file that cannot be read or has a bad entry (the message names the file and field)."""


@dataclass(frozen=True)
class Price:
    input: float  # USD per million prompt tokens
    output: float  # USD per million completion tokens

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


def load_prices(path: str | Path) -> dict[str, Price]:
    """Read a prices file (see the module docstring); raise :class:`PricesError` naming the file and field."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PricesError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PricesError(f"{path}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise PricesError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise PricesError(f"{path}: expected a JSON object {{\"MODEL\": {{\"input\": USD, \"output\": USD}}}}")
    prices: dict[str, Price] = {}
    for model, entry in data.items():
        if not isinstance(entry, dict):
            raise PricesError(f"{path}: {model}: expected an object with 'input' and 'output' (USD per million tokens)")
        vals = {}
        for key in ("input", "output"):
            v = entry.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise PricesError(f"{path}: {model}.{key}: expected a non-negative number (USD per million tokens), "
                                  f"got {v!r}")
            vals[key] = float(v)
        extra = set(entry) - {"input", "output"}
        if extra:
            raise PricesError(f"{path}: {model}.{sorted(extra)[0]}: unknown field (only 'input' and 'output')")
        prices[str(model)] = Price(**vals)
    return prices


def price_for(prices: dict[str, Price] | None, model: str | None) -> Price | None:
    if not prices or model is None:
        return None
    return prices.get(model) or prices.get("*")


@dataclass(frozen=True)
class EpisodeDigest:
    """What a summary needs of one episode (a few numbers instead of the whole trajectory)."""

    agent: str
    model: str | None
    status: str
    error_kind: str | None
    verdict_status: str | None
    score: float | None
    passed: bool
    rounds: int
    prompt_tokens: int | None
    completion_tokens: int | None
    tool_calls: int
    tool_types: tuple[str, ...]
    name: str | None = None  # names the episode in reports (a conversation's file:line or id)
    length: int | None = None  # tokens of the whole conversation as one training sequence (conversations only)

    @property
    def tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)

    @property
    def ran(self) -> bool:
        return self.status not in ("infra_error", "skipped")


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def tool_names(t: Trajectory) -> list[str]:
    """The tools an episode called, in order: from its chat messages, else its transcript, else its steps."""
    names: list[str] = []
    for m in t.messages:
        for c in m.get("tool_calls") or []:
            if isinstance(c, dict):
                names.append(str((c.get("function") or {}).get("name") or c.get("name") or "?"))
    if names:
        return names
    for ev in t.transcript:
        msg = ev.get("message") if isinstance(ev, dict) else None
        if isinstance(msg, dict) and msg.get("role") == "assistant" and isinstance(msg.get("content"), list):
            names += [str(p.get("name") or "?") for p in msg["content"] if isinstance(p, dict)
                      and p.get("type") == "toolCall"]
    if names:
        return names
    return [str(s["tool"]) for s in t.steps if isinstance(s, dict) and s.get("tool")]


def _rounds(t: Trajectory) -> int:
    calls = _int(t.usage.get("model_calls"))
    if calls is not None:
        return calls
    n = sum(1 for m in t.messages if m.get("role") == "assistant")
    if n:
        return n
    return sum(1 for ev in t.transcript if isinstance(ev, dict) and isinstance(ev.get("message"), dict)
               and ev["message"].get("role") == "assistant")


def digest(t: Trajectory) -> EpisodeDigest:
    v = t.verdict
    scored = v is not None and v.status in ("scored", "checker_failed")
    prompt = _int(t.usage.get("prompt_tokens"))
    completion = _int(t.usage.get("completion_tokens"))
    if prompt is None and completion is None and _int(t.usage.get("total_tokens")) is not None:
        prompt, completion = _int(t.usage.get("total_tokens")), 0
    return EpisodeDigest(
        agent=t.agent, model=t.model, status=t.status, error_kind=t.error.kind if t.error else None,
        verdict_status=v.status if v else None, score=v.score if scored and v else None,
        passed=bool(scored and v and v.passed), rounds=_rounds(t), prompt_tokens=prompt,
        completion_tokens=completion, tool_calls=t.tool_calls, tool_types=tuple(sorted(set(tool_names(t)))),
    )


@dataclass
class Summary:
    agent: str
    model: str | None = None  # the model the agent ran (None for agents without one: oracle, noop)
    run: str | None = None  # where the trajectories came from, when the caller says
    episodes: int = 0
    scored: int = 0
    mean_score: float | None = None
    pass_rate: float | None = None
    infra_errors: int = 0
    skipped: int = 0
    statuses: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    # trajectory statistics: means per episode that ran (not infra errors, not skipped)
    ran: int = 0
    rounds: float | None = None
    tokens: float | None = None
    tool_calls: float | None = None
    tool_types: float | None = None
    max_tokens: int | None = None  # the longest episode's tokens
    tools_used: list[str] = field(default_factory=list)
    window: int | None = None  # the training window the conversations were measured against
    over_window: list[tuple[str, int]] = field(default_factory=list)  # (name, tokens) of those longer than it
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None  # USD, when prices were given for this model

    def as_dict(self) -> dict:
        return {
            "agent": self.agent, "model": self.model, "run": self.run, "episodes": self.episodes,
            "scored": self.scored, "mean_score": self.mean_score, "pass_rate": self.pass_rate,
            "infra_errors": self.infra_errors, "skipped": self.skipped,
            "statuses": dict(self.statuses), "errors": dict(self.errors),
            "stats": {"episodes": self.ran, "rounds": self.rounds, "tokens": self.tokens,
                      "tool_calls": self.tool_calls, "tool_types": self.tool_types, "tools_used": self.tools_used,
                      "max_tokens": self.max_tokens, "prompt_tokens": self.prompt_tokens,
                      "completion_tokens": self.completion_tokens, "window": self.window,
                      "over_window": [{"name": n, "tokens": k} for n, k in self.over_window]},
            "cost": self.cost,
        }


def _mean(vals: list[float]) -> float | None:
    return sum(vals) / len(vals) if vals else None


def summarize_digests(digests: list[EpisodeDigest], run: str | None = None,
                      prices: dict[str, Price] | None = None, window: int | None = None) -> list[Summary]:
    """One summary per agent and model (a base model and its fine-tuned student are two rows). Scores average
    over episodes with a verdict; infrastructure errors and skipped episodes are counted apart and never as a
    model failure. With `window`, the conversations longer than it are listed (`Summary.over_window`)."""
    by_key: dict[tuple, Summary] = {}
    scores: dict[tuple, list[float]] = {}
    passes: dict[tuple, int] = {}
    ran: dict[tuple, list[EpisodeDigest]] = {}
    for d in digests:
        key = (d.agent, d.model)
        s = by_key.setdefault(key, Summary(agent=d.agent, model=d.model, run=run))
        s.episodes += 1
        s.statuses[d.status] += 1
        if d.status == "infra_error":
            s.infra_errors += 1
            s.errors[f"infra:{d.error_kind or '?'}"] += 1
            continue
        if d.status == "skipped":
            s.skipped += 1
            s.errors[f"skipped:{d.error_kind or '?'}"] += 1
            continue
        ran.setdefault(key, []).append(d)
        if d.error_kind:
            s.errors[f"agent:{d.error_kind}"] += 1
        if d.verdict_status not in ("scored", "checker_failed") or d.score is None:
            s.errors["unscored"] += 1
            continue
        if d.verdict_status == "checker_failed":
            s.errors["checker_failed"] += 1
        scores.setdefault(key, []).append(d.score)
        passes[key] = passes.get(key, 0) + int(d.passed)
    for key, s in by_key.items():
        vals = scores.get(key, [])
        s.scored = len(vals)
        if vals:
            s.mean_score = sum(vals) / len(vals)
            s.pass_rate = passes.get(key, 0) / len(vals)
        eps = ran.get(key, [])
        s.ran = len(eps)
        s.rounds = _mean([d.rounds for d in eps])
        s.tokens = _mean([d.tokens for d in eps if d.tokens is not None])
        s.tool_calls = _mean([d.tool_calls for d in eps])
        s.tool_types = _mean([len(d.tool_types) for d in eps])
        s.max_tokens = max((d.tokens for d in eps if d.tokens is not None), default=None)
        s.tools_used = sorted({n for d in eps for n in d.tool_types})
        if window is not None:
            s.window = window
            s.over_window = [(d.name or "?", d.length) for d in eps if d.length is not None and d.length > window]
        s.prompt_tokens = sum(d.prompt_tokens or 0 for d in eps)
        s.completion_tokens = sum(d.completion_tokens or 0 for d in eps)
        price = price_for(prices, s.model)
        if price is not None:
            s.cost = price.cost(s.prompt_tokens, s.completion_tokens)
    return list(by_key.values())


def summarize(trajectories: list[Trajectory], run: str | None = None,
              prices: dict[str, Price] | None = None) -> list[Summary]:
    """:func:`summarize_digests` of whole trajectories."""
    return summarize_digests([digest(t) for t in trajectories], run=run, prices=prices)


def _num(v: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def render_table(summaries: list[Summary], title: str = "rollout summary"):
    """The summary table; where it is wider than the output (a pipe or CI log is 80 columns), one block per run
    instead (its names in full, then its numbers), so that no name folds into fragments and no number is cut."""
    headers = ["agent", "model", "episodes", "scored", "mean", "pass", "infra", "skip"]
    costs = any(s.cost is not None for s in summaries)
    headers += ["cost $"] * costs + ["errors by kind"]
    rows = [[s.agent, s.model or "-", str(s.episodes), str(s.scored),
             "-" if s.mean_score is None else f"{s.mean_score:.3f}",
             "-" if s.pass_rate is None else f"{s.pass_rate:.1%}", str(s.infra_errors), str(s.skipped),
             *((_num(s.cost, "{:.4f}"),) if costs else ()),
             ", ".join(f"{k}={v}" for k, v in sorted(s.errors.items())) or "-"] for s in summaries]
    return _fitted(summaries, title, headers, rows, left=("agent", "model", "errors by kind"))


def render_stats_table(summaries: list[Summary], title: str = "trajectory statistics (mean per episode)"):
    """ClawGym's trajectory statistics per run, agent and model: rounds, tokens, tool calls, tool types (one block
    per run where the table is wider than the output, as :func:`render_table`)."""
    headers = ["agent", "model", "ran", "rounds", "tokens", "max tokens", "tool calls", "tool types", "tools used"]
    rows = [[s.agent, s.model or "-", str(s.ran), _num(s.rounds), _num(s.tokens, "{:,.0f}"),
             _num(s.max_tokens, "{:,.0f}"), _num(s.tool_calls), _num(s.tool_types), ", ".join(s.tools_used) or "-"]
            for s in summaries]
    return _fitted(summaries, title, headers, rows, left=("agent", "model", "tools used"))


def _fitted(summaries: list[Summary], title: str, headers: list[str], rows: list[list[str]], left: tuple[str, ...]):
    """The table of `rows` (with a leading run column when the summaries name runs), as a FittedTable: names fold
    in the table where it fits; elsewhere each run is a block, its run, agent and model on its first line."""
    from rich import box
    from rich.table import Table

    from clawgym.core.fitted_table import FittedTable

    runs = any(s.run for s in summaries)
    if runs:
        headers = ["run", *headers]
        rows = [[s.run or "-", *row] for s, row in zip(summaries, rows, strict=True)]
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in headers:
        if col in left or col == "run":
            table.add_column(col, justify="left", overflow="fold")
        else:
            table.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    for row in rows:
        table.add_row(*row)
    names = headers.index("model") + 1  # the run, the agent and the model: the block's first line
    return FittedTable(table, headers, rows, names=names, title=title)


# --------------------------------------------------------------------------------------------- conversations

CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text and code, when no tokenizer is given
_TRAJECTORY_KEYS = {"id", "task_id", "agent", "sandbox", "status", "started_at"}


@dataclass
class TokenCounter:
    """Counts the tokens of a conversation (messages, tools); `label` says how, for the report."""

    count: Callable[[list[dict[str, Any]], list[dict[str, Any]]], int]
    label: str


def approximate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    """Characters / CHARS_PER_TOKEN over the text a model reads: contents, tool calls and the tool schemas."""
    from clawgym.serve.chat_format import content_text

    chars = len(json.dumps(tools, ensure_ascii=False)) if tools else 0
    for m in messages:
        chars += len(content_text(m.get("content")))
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            args = fn.get("arguments", "")
            chars += len(str(fn.get("name", ""))) + len(args if isinstance(args, str) else json.dumps(args))
    return math.ceil(chars / CHARS_PER_TOKEN)


def token_counter(model: str | None) -> TokenCounter:
    """The model's tokenizer rendering conversations as training does (an embedded model name or a model
    directory), else the approximation."""
    if model is None:
        return TokenCounter(approximate_tokens, f"approximated as characters / {CHARS_PER_TOKEN} (no --tokenizer)")
    from transformers import AutoTokenizer

    from clawgym.serve.chat_format import conversation_tokens
    from clawgym.serve.models import resolve_model_dir

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_dir(model)))
    return TokenCounter(lambda m, t: conversation_tokens(tokenizer, m, t), f"the tokenizer and chat template of {model}")


def is_conversation_file(path: str | Path) -> bool:
    """True when the first record of a JSONL file is a conversation (``messages``) rather than a Trajectory."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    return False
                return isinstance(rec, dict) and "messages" in rec and not _TRAJECTORY_KEYS <= rec.keys()
    return False


def conversation_digest(rec: dict[str, Any], name: str, tokens: int) -> EpisodeDigest:
    """A conversation's digest: one episode of `tokens` tokens, scored when the record carries a score."""
    messages = rec["messages"]
    names = [str((c.get("function") or {}).get("name") or "?") for m in messages if m.get("role") == "assistant"
             for c in m.get("tool_calls") or [] if isinstance(c, dict)]
    score = rec.get("score") if isinstance(rec.get("score"), (int, float)) and not isinstance(rec.get("score"), bool) \
        else None
    return EpisodeDigest(
        agent=str(rec.get("agent") or "imported"), model=rec.get("model"), status="completed", error_kind=None,
        verdict_status="scored" if score is not None else None, score=score,
        passed=score is not None and score >= 1.0, rounds=sum(1 for m in messages if m.get("role") == "assistant"),
        prompt_tokens=tokens, completion_tokens=0, tool_calls=len(names), tool_types=tuple(sorted(set(names))),
        name=name, length=tokens,
    )


def read_conversations(path: str | Path, counter: TokenCounter) -> tuple[list[EpisodeDigest], list[str]]:
    """The digest of every conversation of a file, and one error `FILE:LINE: field: problem` per bad line."""
    from clawgym.core.errors import RecordError
    from clawgym.llm.messages import conversation_lines

    path = Path(path)
    digests: list[EpisodeDigest] = []
    errors: list[str] = []
    for item in conversation_lines(path):
        if item.error is not None:
            errors.append(str(item.error))
            continue
        rec = item.record
        try:
            tokens = counter.count(rec["messages"], item.tools)
        except Exception as exc:  # noqa: BLE001 (a chat template that cannot render the conversation: jinja and the tokenizer raise many types)
            errors.append(str(RecordError(str(path), item.line, "messages", f"cannot be rendered: {exc}")))
            continue
        name = str(rec.get("trajectory_id") or rec.get("id") or f"{path.name}:{item.line}")
        digests.append(conversation_digest(rec, name, tokens))
    return digests, errors
