"""Shared-prefix ("tree") packing for the RL update: every token common to several rows is run once.

The rows of an RL batch share most of their tokens: the k samples of a GRPO group start from the same prompt
(system prompt, tools, request), and often the same first steps. In `train rl`'s batches about two thirds of
the sequence tokens sit in a prefix another row of the same micro-batch already has. A plain forward pass runs
them once per row.

Here the rows of a micro-batch become one prefix tree (a trie of their token ids): each distinct prefix is one
node, run once, at its depth as position id. Attention follows the tree: a token attends to its ancestors and
itself, which is exactly the causal context it has in each row that contains it, so every hidden state, logit,
loss and gradient equals the row-by-row computation (up to float summation order; tested against it). The
tree's tokens are laid out in insertion order, which makes each row's path a few contiguous ranges, and each
new run of tokens (a *segment*) attends with one SDPA call over its ancestors' ranges and, causally, itself: the
attention costs what the rows' own causal attention would cost without the shared part, no dense tree mask.

Only logits a row needs are computed (the nodes that predict a response token). Registered with transformers
under :data:`TREE_ATTN_NAME`; :func:`tree_attention` switches a model to it for one forward pass.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

TREE_ATTN_NAME = "clawgym_sdpa_tree"

# a segment: (start, end, ancestor ranges [(a, b), ...] before start); the segments tile [0, T) in order
Segment = tuple[int, int, tuple[tuple[int, int], ...]]

_LAYOUT: contextvars.ContextVar[tuple[Segment, ...] | None] = contextvars.ContextVar("clawgym_tree_layout",
                                                                                     default=None)


@dataclass
class TreeLayout:
    """One micro-batch as a prefix tree: ``input_ids`` / ``position_ids`` (1, T) of the tree's nodes,
    ``segments`` (see :data:`Segment`), ``keep`` (U,) the nodes whose logits are needed, and ``source`` (B, L):
    for each position of the padded batch, the index into ``keep`` of the node that predicts its token (-1 off
    the response)."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    segments: tuple[Segment, ...]
    keep: torch.Tensor
    source: torch.Tensor

    @property
    def nodes(self) -> int:
        return int(self.input_ids.shape[1])

    def to(self, device: torch.device | str) -> TreeLayout:
        return TreeLayout(self.input_ids.to(device), self.position_ids.to(device), self.segments,
                          self.keep.to(device), self.source.to(device))


class Trie:
    """Token-id prefix tree; nodes numbered in insertion order."""

    def __init__(self) -> None:
        self.children: list[dict[int, int]] = [{}]  # index 0: the (virtual) root, not a token
        self.tokens: list[int] = []
        self.depth: list[int] = []

    @property
    def nodes(self) -> int:
        return len(self.tokens)

    def shared(self, seq: list[int]) -> int:
        """How many leading tokens of `seq` are already in the tree."""
        node, n = 0, 0
        for t in seq:
            nxt = self.children[node].get(t)
            if nxt is None:
                break
            node, n = nxt, n + 1
        return n

    def insert(self, seq: list[int]) -> list[int]:
        """Add `seq`; return the node index (0-based token slot) of each of its tokens."""
        node, path = 0, []
        for i, t in enumerate(seq):
            nxt = self.children[node].get(t)
            if nxt is None:
                self.tokens.append(t)
                self.depth.append(i)
                self.children.append({})
                nxt = len(self.tokens)  # children index: slot + 1
                self.children[node][t] = nxt
            path.append(nxt - 1)
            node = nxt
        return path


def _ranges(slots: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s in slots:
        if out and out[-1][1] == s:
            out[-1] = (out[-1][0], s + 1)
        else:
            out.append((s, s + 1))
    return out


def _insert_all(sequences: list[list[int]]) -> tuple[Trie, list[Segment], list[list[int]]]:
    """The trie of `sequences`, its segments, and each sequence's node per token."""
    trie = Trie()
    segments: list[Segment] = []
    paths: list[list[int]] = []
    for seq in sequences:
        before = trie.nodes
        path = trie.insert(seq)
        paths.append(path)
        if trie.nodes > before:  # the new tokens are one contiguous run at the end of the path
            first_new = len(path) - (trie.nodes - before)
            segments.append((before, trie.nodes, tuple(_ranges(path[:first_new]))))
    return trie, segments, paths


def node_tree(sequences: list[list[int]]) -> tuple[TreeLayout, list[list[int]]]:
    """The prefix tree of `sequences` for a pass over its nodes that needs hidden states, not logits (no node
    kept for the LM head), and the node of each token of each sequence: the hidden state of sequence i at
    position t is the pass's at node ``paths[i][t]``."""
    trie, segments, paths = _insert_all(sequences)
    empty = torch.zeros(0, dtype=torch.long)
    return TreeLayout(torch.tensor([trie.tokens], dtype=torch.long), torch.tensor([trie.depth], dtype=torch.long),
                      tuple(segments), empty, empty.view(len(sequences), 0)), paths


def build_tree(sequences: list[list[int]], response_starts: list[int], width: int) -> TreeLayout:
    """The prefix tree of `sequences` (each a row's prompt + response ids; its response begins at
    `response_starts[i]`), for a batch left-padded to `width` (see :func:`clawgym.train.rl_objective.build_batch`)."""
    trie, segments, paths = _insert_all(sequences)
    b = len(sequences)
    source_nodes = torch.full((b, width), -1, dtype=torch.long)
    for i, (seq, r0, path) in enumerate(zip(sequences, response_starts, paths, strict=True)):
        n = len(seq)
        # the token at sequence index t is predicted by the node of the token at t - 1
        source_nodes[i, width - n + r0:] = torch.tensor(path[r0 - 1:n - 1], dtype=torch.long)
    on = source_nodes >= 0
    keep, inverse = torch.unique(source_nodes[on], return_inverse=True)
    source = torch.full((b, width), -1, dtype=torch.long)
    source[on] = inverse
    return TreeLayout(torch.tensor([trie.tokens], dtype=torch.long), torch.tensor([trie.depth], dtype=torch.long),
                      tuple(segments), keep, source)


def sdpa_tree_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                        **kwargs) -> tuple[torch.Tensor, None]:
    """(1, heads, T, dim) -> (1, T, heads, dim): each segment attends to its ancestors' ranges and causally to
    itself. Outside :func:`tree_attention` (no layout set), plain SDPA."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    layout = _LAYOUT.get()
    if layout is None or query.shape[0] != 1 or query.shape[2] != key.shape[2]:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    groups = getattr(module, "num_key_value_groups", 1)
    if groups > 1:
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    outs = []
    for start, end, ancestors in layout:
        q = query[:, :, start:end]
        if not ancestors:
            outs.append(F.scaled_dot_product_attention(q, key[:, :, start:end], value[:, :, start:end],
                                                       dropout_p=dropout, scale=scaling, is_causal=True))
            continue
        k = torch.cat([key[:, :, a:b] for a, b in ancestors] + [key[:, :, start:end]], dim=2)
        v = torch.cat([value[:, :, a:b] for a, b in ancestors] + [value[:, :, start:end]], dim=2)
        n, before = end - start, k.shape[2] - (end - start)
        mask = torch.ones((n, before + n), dtype=torch.bool, device=q.device)
        mask[:, before:] = torch.ones((n, n), dtype=torch.bool, device=q.device).tril()
        outs.append(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, scale=scaling))
    out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)
    return out.transpose(1, 2).contiguous(), None


def _tree_mask(*args, **kwargs):
    """No mask in a tree pass (the attention follows the layout); SDPA's mask otherwise."""
    from transformers.masking_utils import sdpa_mask

    if _LAYOUT.get() is not None:
        return None
    return sdpa_mask(*args, **kwargs)


def register() -> str:
    """Make :data:`TREE_ATTN_NAME` a valid `attn_implementation` (idempotent); returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(TREE_ATTN_NAME, sdpa_tree_attention)
    AttentionMaskInterface.register(TREE_ATTN_NAME, _tree_mask)
    return TREE_ATTN_NAME


def _configs(model: Any) -> list[Any]:
    seen, out = set(), []
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is not None and hasattr(cfg, "_attn_implementation") and id(cfg) not in seen:
            seen.add(id(cfg))
            out.append(cfg)
    return out


@contextlib.contextmanager
def tree_attention(model: Any, layout: TreeLayout):
    """Run `model` (a transformers causal LM, or a peft model around one) on `layout` for the duration."""
    name = register()
    configs = _configs(model)
    saved = [c._attn_implementation for c in configs]
    token = _LAYOUT.set(layout.segments)
    try:
        for c in configs:
            c._attn_implementation = name
        yield
    finally:
        _LAYOUT.reset(token)
        for c, s in zip(configs, saved, strict=True):
            c._attn_implementation = s
