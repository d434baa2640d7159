"""The critic of step-level GAE (``--credit gae``): a value head on the policy's own hidden states.

Agent-R1 trains a critic to give each step of an agent's trajectory its own advantage. A second LM as the critic
would double the cost of every update on these cores, so the value of a state is read off the policy itself: V(s)
is a linear map of the policy's last hidden state at the last token of the step's prompt (the context the model
call saw: the task, the tool results so far), as TRL's value-head models do. The head reads the hidden state
*detached*: its loss trains the head alone and never moves the policy, so the policy's update is the same
clipped objective as under the other credits, only with other advantages, and no value-loss coefficient has to
be tuned against the policy loss.

Per update (:func:`fill_gae`), before the policy's step:

1. the hidden state of each row's state, one forward pass per trajectory (:func:`state_features`): a step's
   prompt starts with the step before's, so in a causal model the hidden state at position
   ``len(prompt_t) - 1`` of the trajectory's last prompt is the one the step's own prompt gives; and the
   trajectories' prompts run as prefix trees, so the tokens the samples of a task share run once;
2. the values V_t of the head as it is, GAE per trajectory over the rows' ``step_reward``
   (:func:`clawgym.pool.credit.gae`), the advantages whitened over the batch (verl's GAE does the same);
3. the head fitted to the lambda-returns (Adam, full batch, `steps` steps): it is saved beside each adapter
   version and so carries over to the next iteration.

The head starts at zero (V = 0), so the first iteration's advantages are the whitened lambda-returns. The
advantages are the critic's, whitened over the whole batch: `--algo`'s group baseline is not used (its loss
aggregation is). The critic's quality is its explained variance on each new batch *before* that batch's fit
(``value_explained_variance``: states it has not been fitted on); the loss after the fit is in-sample and, with
as many weights as the hidden size, can be near 0 on a small batch whatever the values are worth.
"""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path
from typing import Any

import torch

from clawgym.pool.credit import EPS, gae

# in a folder of its own: a weights loader (vLLM's, SGLang's, the embedded engine's) reads every *.safetensors at
# the top of a --full version's directory and would take the head for model weights
FILE = "critic/value_head.safetensors"


class ValueHead(torch.nn.Module):
    """V(s) = w . h + b on the policy's last hidden state h (fp32), zero at the start."""

    def __init__(self, hidden: int):
        super().__init__()
        self.linear = torch.nn.Linear(hidden, 1)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.linear(h.float()).squeeze(-1)

    def save(self, directory: Path) -> Path:
        """Write the head into `directory` (an adapter version's) as safetensors; its path."""
        from safetensors.torch import save_file

        path = directory / FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        save_file({k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()}, str(tmp))
        tmp.replace(path)
        return path

    @classmethod
    def load_or_new(cls, directory: Path | None, hidden: int) -> ValueHead:
        """The head saved in `directory`, or a zero head when there is none (the first iteration, or a run started
        under another credit). A head of another width is an error, not a silent restart."""
        head = cls(hidden)
        path = directory / FILE if directory is not None else None
        if path is not None and path.is_file():
            from safetensors.torch import load_file

            state = load_file(str(path))
            width = state.get("linear.weight", torch.empty(0, 0)).shape[-1]
            if width != hidden:
                raise ValueError(f"{path}: a value head for hidden size {width}, the policy's is {hidden}")
            head.load_state_dict(state)
        return head


def _chains(rows: list[dict[str, Any]]) -> list[list[int]]:
    """Indices of `rows` in chains: the steps of one trajectory, in order, each one's prompt starting with the one
    before's (so that one forward pass of the chain's last prompt gives the states of all of them)."""
    by_traj: dict[Any, list[int]] = {}
    out: list[list[int]] = []
    for i, r in enumerate(rows):
        tid = r.get("trajectory_id")
        if tid is None:
            out.append([i])
        else:
            by_traj.setdefault(tid, []).append(i)
    for idx in by_traj.values():
        idx.sort(key=lambda i: rows[i].get("step_index", 0))
        cur: list[int] = []
        for i in idx:
            p = rows[i]["prompt_ids"]
            if cur:
                last = rows[cur[-1]]["prompt_ids"]
                if len(p) >= len(last) and p[:len(last)] == last:
                    cur.append(i)
                    continue
                out.append(cur)
            cur = [i]
        if cur:
            out.append(cur)
    return out


def _decoder(model: Any) -> Any:
    """The transformer under the LM head (a peft model's base, its LoRA layers in place): its last hidden state
    without the vocabulary projection, which the values do not need."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    get = getattr(base, "get_decoder", None)
    return get() if get is not None else None


def state_features(model: Any, rows: list[dict[str, Any]], *, device: torch.device | str = "cpu",
                   precision: str = "fp32", max_tokens: int = 8192) -> torch.Tensor:
    """(len(rows), hidden) fp32: the policy's last hidden state at the last prompt token of each row. No gradient.
    Each chain of a trajectory's steps is one sequence (its last prompt; see the module's notes), and the chains
    are run as prefix trees of at most `max_tokens` distinct tokens (:func:`clawgym.train.prefix_tree.node_tree`):
    the k samples of a task share its system prompt and request, which are run once."""
    from clawgym.train.prefix_tree import node_tree, tree_attention
    from clawgym.train.rl_update import tree_micro_batches

    device = torch.device(device)
    decoder = _decoder(model)
    if decoder is None:
        raise ValueError(f"{type(model).__name__}: no decoder under the LM head (get_decoder) to read states from")
    out = torch.zeros((len(rows), model.config.hidden_size), dtype=torch.float32)
    # each chain as the sequence of its last prompt, grouped as the update groups rows (common prefixes together)
    seqs = [{"prompt_ids": rows[c[-1]]["prompt_ids"], "response_ids": [], "chain": c} for c in _chains(rows)]
    groups = [[s["chain"] for s in g] for g in tree_micro_batches(seqs, max_tokens)]
    cast = (torch.autocast(device_type=device.type, dtype=torch.bfloat16) if precision == "bf16"
            else contextlib.nullcontext())
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), cast:
            for group in groups:
                layout, paths = node_tree([list(rows[c[-1]]["prompt_ids"]) for c in group])
                layout = layout.to(device)
                with tree_attention(model, layout):
                    h = decoder(input_ids=layout.input_ids, position_ids=layout.position_ids,
                                use_cache=False).last_hidden_state[0]
                for chain, path in zip(group, paths, strict=True):
                    for i in chain:
                        out[i] = h[path[len(rows[i]["prompt_ids"]) - 1]].float().cpu()
    finally:
        model.train(was_training)
    return out


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _explained_variance(values: torch.Tensor, targets: torch.Tensor) -> float:
    """1 - Var(targets - values) / Var(targets): 1 a perfect critic, 0 no better than a constant (NaN when the
    targets do not vary)."""
    var = float(targets.var(unbiased=False)) if targets.numel() > 1 else 0.0
    if var < 1e-12:
        return math.nan
    return 1.0 - float((targets - values).var(unbiased=False)) / var


def fit(head: ValueHead, features: torch.Tensor, targets: torch.Tensor, *, lr: float = 1e-2,
        steps: int = 200) -> dict[str, float]:
    """Fit `head` to `targets` by full-batch Adam on the mean squared error; the loss before and after."""
    if features.shape[0] == 0 or steps <= 0:
        return {"value_loss_before": 0.0, "value_loss_after": 0.0}
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    saved = {k: v.clone() for k, v in head.state_dict().items()}
    with torch.no_grad():
        before = float(torch.mean((head(features) - targets) ** 2))
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.mean((head(features) - targets) ** 2)
        loss.backward()
        opt.step()
    with torch.no_grad():
        after = float(torch.mean((head(features) - targets) ** 2))
    if not math.isfinite(after):  # diverged: keep the head as it was rather than save a broken critic
        head.load_state_dict(saved)
        return {"value_loss_before": before, "value_loss_after": before, "value_fit_diverged": True}
    return {"value_loss_before": before, "value_loss_after": after}


def whiten(values: list[float], eps: float = EPS) -> list[float]:
    """(x - mean) / (std + eps) over all of `values` (population std, as verl's masked_whiten); unchanged minus the
    mean when they do not vary."""
    n = len(values)
    if n == 0:
        return []
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    return [(v - mean) / (std + eps) if std > 1e-12 else v - mean for v in values]


def fill_gae(rows: list[dict[str, Any]], model: Any, head: ValueHead, *, gamma: float = 1.0, lam: float = 0.95,
             device: torch.device | str = "cpu", precision: str = "fp32", value_lr: float = 1e-2,
             value_steps: int = 200, whiten_advantages: bool = True) -> dict[str, Any]:
    """Fill in each row's ``advantage`` (GAE over its trajectory's ``step_reward``, whitened over the batch),
    ``value`` and ``value_target`` in place, then fit `head` to the targets; the statistics (the critic's loss
    and explained variance before the fit, the value pass's seconds). Rows need ``step_reward`` (a ``--credit
    gae`` export's) and ``trajectory_id``/``step_index`` to be put in order."""
    missing = [i for i, r in enumerate(rows) if r.get("step_reward") is None]
    if missing:
        raise ValueError(f"--credit gae: {len(missing)} row(s) without a step_reward (row {missing[0] + 1} first); "
                         "export the batch with --credit gae")
    bad = [i for i, r in enumerate(rows) if not _finite(r["step_reward"])]
    if bad:  # one NaN would whiten every advantage of the batch to NaN and poison the head saved with the version
        raise ValueError(f"--credit gae: row {bad[0] + 1} ({rows[bad[0]].get('step_id', 'no step id')}): step_reward "
                         f"{rows[bad[0]]['step_reward']!r} is not a finite number ({len(bad)} such row(s))")
    t0 = time.monotonic()
    feats = state_features(model, rows, device=device, precision=precision)
    t_feats = time.monotonic() - t0
    with torch.no_grad():
        values = head(feats).tolist()
    by_traj: dict[Any, list[int]] = {}
    for i, r in enumerate(rows):
        tid = r.get("trajectory_id")
        by_traj.setdefault(tid if tid is not None else ("row", i), []).append(i)
    adv = [0.0] * len(rows)
    targets = [0.0] * len(rows)
    for idx in by_traj.values():
        idx.sort(key=lambda i: rows[i].get("step_index", 0))
        steps = [int(rows[i].get("step_index", k)) for k, i in enumerate(idx)]
        a, g = gae([float(rows[i]["step_reward"]) for i in idx], [values[i] for i in idx], gamma, lam,
                   gaps=[b - a for a, b in zip(steps, steps[1:], strict=False)])
        for i, ai, gi in zip(idx, a, g, strict=True):
            adv[i], targets[i] = ai, gi
    final = whiten(adv) if whiten_advantages else adv
    for r, a, v, g in zip(rows, final, values, targets, strict=True):
        r["advantage"], r["value"], r["value_target"] = a, v, g
    tgt = torch.tensor(targets, dtype=torch.float32)
    ev = _explained_variance(torch.tensor(values, dtype=torch.float32), tgt)
    fitted = fit(head, feats, tgt, lr=value_lr, steps=value_steps)
    return {"value_pass_s": round(t_feats, 3), "value_fit_s": round(time.monotonic() - t0 - t_feats, 3),
            "value_mean": sum(values) / len(values) if values else 0.0,
            "value_explained_variance": None if math.isnan(ev) else ev,
            "advantage_raw_mean": sum(adv) / len(adv) if adv else 0.0, **fitted}
