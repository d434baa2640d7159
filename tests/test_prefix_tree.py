"""Shared-prefix packing of the RL update (clawgym.train.prefix_tree): the layout by hand, and the same logprobs,
loss and gradient as running each row by itself, on the real SmolLM2."""

from __future__ import annotations

import pytest
import torch

from clawgym.train.prefix_tree import Trie, build_tree
from clawgym.train.rl_objective import ObjectiveConfig, build_batch, token_logps
from clawgym.train.rl_update import rl_update, tree_micro_batches
from conftest import smollm_lora_policy


def test_tree_layout_by_hand():
    seqs = [[1, 2, 3, 4], [1, 2, 5], [1, 2, 3, 6], [7, 8], [1, 2, 5]]
    starts = [2, 2, 3, 1, 2]  # where each row's response begins
    t = build_tree(seqs, starts, width=4)
    assert t.input_ids.tolist() == [[1, 2, 3, 4, 5, 6, 7, 8]]  # each distinct prefix once, in insertion order
    assert t.position_ids.tolist() == [[0, 1, 2, 3, 2, 3, 0, 1]]  # a node's depth: its position in its rows
    assert t.segments == ((0, 4, ()), (4, 5, ((0, 2),)), (5, 6, ((0, 3),)), (6, 8, ()))  # the duplicate adds none
    # the node predicting each response token (left-padded rows of width 4), as an index into `keep`
    keep = t.keep.tolist()
    src = [[keep[i] if i >= 0 else None for i in row] for row in t.source.tolist()]
    assert src == [[None, None, 1, 2],  # 3 from node "2", 4 from node "3"
                   [None, None, None, 1],  # 5 from node "2" (shared with row 0)
                   [None, None, None, 2],  # 6 from node "3" (shared with row 0)
                   [None, None, None, 6],  # 8 from node "7"
                   [None, None, None, 1]]  # the duplicate row: the same node as row 1


def test_tree_micro_batches_keep_to_the_budget_and_put_shared_prefixes_together():
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, 90, (30,), generator=gen).tolist() for _ in range(4)]
    rows = [{"prompt_ids": p, "response_ids": torch.randint(3, 90, (8,), generator=gen).tolist()}
            for p in prompts for _ in range(3)]  # 4 groups of 3 samples
    groups = tree_micro_batches(rows, max_tokens=60)
    assert sorted(id(r) for g in groups for r in g) == sorted(id(r) for r in rows)
    for g in groups:
        trie = Trie()
        for r in g:
            trie.insert(r["prompt_ids"] + r["response_ids"])
        assert trie.nodes <= 60
        assert len({tuple(r["prompt_ids"]) for r in g}) == 1  # 30 + 3 x 8 = 54: one group per micro-batch
    assert len(groups) == 4


@pytest.fixture(scope="module")
def smollm_lora():
    return smollm_lora_policy(("q_proj", "v_proj", "up_proj"), b_std=1e-2)


def _group(tok) -> list[dict]:
    """A GRPO group as the pool gives it: one chat prompt, four sampled answers (two of them starting alike, one
    sampled twice), and a second step that continues one of them after a tool result."""
    def ids(text):
        return tok.encode(text, add_special_tokens=False)

    prompt = ids(tok.apply_chat_template([{"role": "system", "content": "You are a careful assistant with tools."},
                                          {"role": "user", "content": "Summarise notes.txt into summary.md."}],
                                         add_generation_prompt=True, tokenize=False))
    answers = [("I will read notes.txt first.", 1.0), ("I will write summary.md now.", -0.5),
               ("Done.", -1.0), ("Done.", -1.0)]
    rows = [{"prompt_ids": prompt, "response_ids": ids(a), "advantage": adv} for a, adv in answers]
    second = prompt + ids(answers[0][0]) + ids("\n<tool>notes: buy milk, call Ana</tool>\n")
    rows.append({"prompt_ids": second, "response_ids": ids("Summary: milk, call Ana."), "advantage": 1.0})
    return rows


def test_tree_logprobs_equal_each_row_run_alone(smollm_lora):
    tok, model = smollm_lora
    rows = _group(tok)
    plain = build_batch(rows)
    tree = build_batch(rows, tree=True)
    assert tree.computed_tokens < int(plain.attention_mask.sum()) * 0.6  # the prompt runs once, not five times
    model.eval()
    with torch.no_grad():
        a, ea = token_logps(model, plain, with_entropy=True)
        b, eb = token_logps(model, tree, with_entropy=True)
    on = plain.response_mask.bool()
    assert torch.allclose(a[on], b[on], atol=2e-4), float((a - b).abs().max())
    assert torch.allclose(ea[on], eb[on], atol=2e-4)
    assert b[~on].abs().sum() == 0
    # the model is back to its own attention afterwards (the layout only lives inside the tree pass)
    assert model.config._attn_implementation != "clawgym_sdpa_tree"
    with torch.no_grad():
        again, _ = token_logps(model, plain)
    assert torch.equal(again, a)


@pytest.mark.parametrize("algo", ["grpo", "dr-grpo"])
def test_tree_update_has_the_loss_and_gradient_of_the_plain_update(smollm_lora, algo):
    tok, model = smollm_lora
    rows = _group(tok)
    params = [p for p in model.parameters() if p.requires_grad]
    frozen = torch.optim.SGD(params, lr=0.0)  # a step that changes nothing: both updates see the same weights
    out = {}
    for share in (False, True):
        res = rl_update(model, frozen, rows, ObjectiveConfig(algo), share_prefixes=share, max_grad_norm=None,
                        micro_batch_tokens=100_000)
        out[share] = (res.stats, torch.cat([p.grad.flatten() for p in params]))
    (plain, g0), (tree, g1) = out[False], out[True]
    assert tree["computed_tokens"] < plain["computed_tokens"] == plain["sequence_tokens"]
    assert tree["loss"] == pytest.approx(plain["loss"], rel=1e-4, abs=1e-6)
    assert torch.allclose(g0, g1, rtol=1e-3, atol=1e-6), float((g0 - g1).abs().max())
