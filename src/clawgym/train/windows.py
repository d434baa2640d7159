"""Long trajectories kept whole: a record longer than the training window is never cut from the end.

A long agent trajectory does its work in its last turns; cutting a sequence at `max_len` keeping the start drops
exactly those. Instead (:func:`tokenize_within`):

* **token steps** (records with the engine's `prompt_ids` / `response_ids`): every step carries the exact context
  the model saw. A chain of steps longer than the window trains as its longest prefix that ends at a step's end
  (loss on the responses in it: exactly the contexts of those steps); a step whose own prompt + response is longer
  than the window cannot be trained in its exact context and is dropped, counted (turns and tokens), never cut.
* **conversations**: the longest prefix that ends at an assistant turn trains as it is (loss on every turn in it);
  each later assistant turn trains in a window that ends with it and holds the conversation's head (the system
  prompt and the first user message: the task) and as many of the messages just before the turn as fit (at least
  the one it answers), loss on that turn only. A turn that does not fit so (then with the system prompt as the
  only head) is dropped and counted.

Everything dropped is reported (:class:`Fit`, then `DataStats` in train.json and on the command line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clawgym.train.masks import (
    IGNORE,
    TokenizedExample,
    conversation_tokens,
    record_source,
    tokenize_conversation,
    tokenize_token_steps,
    verify_example,
)


@dataclass
class Fit:
    """The examples of one record within the window, and what fitting it took."""

    examples: list[TokenizedExample] = field(default_factory=list)
    long: int = 0  # sequences of the record longer than the window
    windows: int = 0  # examples made from those sequences (prefixes and per-turn windows)
    dropped_turns: int = 0  # assistant turns (or steps) that fit no window
    dropped_tokens: int = 0  # their tokens, which are not trained


def _prefix(ex: TokenizedExample, k: int, name: str) -> TokenizedExample:
    """The example's first `k` trained spans and everything before the end of the k-th."""
    end = ex.spans[k - 1][1]
    return TokenizedExample(ex.input_ids[:end], ex.labels[:end], name, ex.spans[:k], ex.expected[:k])


def _step_windows(ex: TokenizedExample, max_len: int, fit: Fit) -> None:
    k = sum(1 for _, e in ex.spans if e <= max_len)
    if k:
        fit.examples.append(_prefix(ex, k, f"{ex.record} steps 1-{k}"))
        fit.windows += 1
    fit.dropped_turns += len(ex.spans) - k
    fit.dropped_tokens += sum(e - s for s, e in ex.spans[k:])


def _heads(messages: list[dict[str, Any]]) -> list[int]:
    """How many leading messages a window keeps: the system prompt and the first user message, else the system
    prompt alone."""
    h = 1 if messages and messages[0].get("role") == "system" else 0
    out = [h + 1] if len(messages) > h and messages[h].get("role") == "user" else []
    return out + [h]


def turn_window(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, turn: int,
                max_len: int, record: str, verify_prompts: bool = False, history: str = "final",
                template_kwargs: dict[str, Any] | None = None) -> TokenizedExample | None:
    """An example that ends with assistant message `turn`: the conversation's head, then the longest run of
    messages before the turn that fits in `max_len` tokens (at least the message the turn answers; it starts with
    a tool result only when that is all that fits), loss on that turn only; None when nothing fits."""
    for h in _heads(messages):
        if h > turn:
            continue
        # at least the message just before the turn (what it answers); never a tool result without its call
        starts = [j for j in range(h, turn) if j == turn - 1 or messages[j].get("role") != "tool"]
        if not starts:
            continue

        def window(j: int, h: int = h) -> list[dict[str, Any]]:
            return messages[:h] + messages[j: turn + 1]

        def fits(j: int) -> bool:
            return conversation_tokens(tokenizer, window(j), tools, template_kwargs) <= max_len

        if not fits(starts[-1]):
            continue
        lo, hi = 0, len(starts) - 1  # the first start that fits (the lengths fall as the start moves on)
        while lo < hi:
            mid = (lo + hi) // 2
            if fits(starts[mid]):
                hi = mid
            else:
                lo = mid + 1
        j = starts[lo]
        cut = j - h  # messages left out between the head and the window
        ex = tokenize_conversation(tokenizer, window(j), tools, f"{record} turn {turn} (window, {cut} messages left "
                                   "out)", verify_prompts=verify_prompts, history=history,
                                   template_kwargs=template_kwargs)[-1]
        s, e = ex.spans[-1]
        if e > max_len:
            continue
        labels = [IGNORE] * s + ex.input_ids[s:e]
        out = TokenizedExample(ex.input_ids[:e], labels, ex.record, [(s, e)], ex.expected[-1:])
        verify_example(tokenizer, out)
        return out
    return None


def _conversation_windows(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                          examples: list[TokenizedExample], max_len: int, name: str, fit: Fit, verify_prompts: bool,
                          history: str, template_kwargs: dict[str, Any] | None) -> None:
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    fit.long += sum(1 for e in examples if len(e) > max_len)
    if len(examples) == 1:  # one sequence for every turn: its longest prefix that fits, then one window a turn
        [ex] = examples
        k = sum(1 for _, e in ex.spans if e <= max_len)
        if k:
            fit.examples.append(_prefix(ex, k, f"{name} turns 1-{k}"))
            fit.windows += 1
        rest = list(zip(turns[k:], ex.spans[k:], strict=True))
    else:  # one example per turn (history="exact"): those that fit stay as they are
        fit.examples += [e for e in examples if len(e) <= max_len]
        rest = [(t, e.spans[0]) for t, e in zip(turns, examples, strict=True) if len(e) > max_len]
    for turn, (s, e) in rest:
        w = turn_window(tokenizer, messages, tools, turn, max_len, name, verify_prompts, history, template_kwargs)
        if w is None:
            fit.dropped_turns += 1
            fit.dropped_tokens += e - s
        else:
            fit.examples.append(w)
            fit.windows += 1


def tokenize_within(tokenizer: Any, record: dict[str, Any], max_len: int, verify_prompts: bool = True,
                    prefer_token_ids: bool = True, history: str = "final",
                    template_kwargs: dict[str, Any] | None = None) -> Fit:
    """The examples of an SFT record, each at most `max_len` tokens, none cut from the end (module docstring)."""
    src = record_source(record, prefer_token_ids)
    fit = Fit()
    if src.steps:
        for ex in tokenize_token_steps(src.steps, src.name, vocab_size=len(tokenizer)):
            if len(ex) <= max_len:
                fit.examples.append(ex)
            else:
                fit.long += 1
                _step_windows(ex, max_len, fit)
        return fit
    for k, part in enumerate(src.sessions):
        name = src.session_name(k)
        exs = tokenize_conversation(tokenizer, part, src.tools, name, verify_prompts=verify_prompts, history=history,
                                    template_kwargs=template_kwargs)
        if all(len(e) <= max_len for e in exs):
            fit.examples += exs
        else:
            _conversation_windows(tokenizer, part, src.tools, exs, max_len, name, fit, verify_prompts, history,
                                  template_kwargs)
    return fit
