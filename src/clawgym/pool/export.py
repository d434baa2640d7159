"""Training files from the pool, respecting curation: SFT conversations and RL step rows with GRPO advantages.

Both exports keep only trainable data (see :mod:`clawgym.pool.store` for how `trainable` is decided), drop
quality ``"bad"`` by default (``drop_quality``), and take ``min_reward`` (keep a trajectory only when its reward
is at least this) and ``ready_groups_only`` (only groups whose trajectories have all ended). Each writes its
file atomically (a temp file in the same directory, fsynced, renamed into place) and returns what it kept and
what it dropped, by reason.

**SFT** (:func:`export_sft`): one JSON line per trajectory, ``{"messages", "tools", "trajectory_id",
"task_id", "reward"}``. The conversation is the request messages of the trajectory's last successful call
(the agent resends the whole history each call) plus that call's response as an assistant message with its
``tool_calls``. Messages are normalised so the file loads with ``datasets.load_dataset("json", ...)``: content
given as a list of parts becomes a string, tool-call ``arguments`` are JSON strings, the model's reasoning goes
in ``reasoning_content``.

**RL** (:func:`export_rl`): one JSON line per step (Agent-R1: each model call its own row), ``{"step_id",
"trajectory_id", "group_id", "prompt_ids", "response_ids", "response_mask", "logprobs", "reward",
"advantage", "policy_version", "is_last"}`` (plus ``task_id``, ``step_index``, ``token_source``). The response
of a call is all model-generated, so ``response_mask`` is all ones; tool results enter the *next* step's
prompt. The reward is the trajectory's (outcome reward, on every step). The advantage is computed per group
over the rewards of the group's trajectories that pass curation (trainable, not of a dropped quality, ended
with a reward), by the preset ``algo`` (``grpo`` by default: ``(r - mean) / (std + 1e-6)``, ``std`` being the
sample standard deviation, ddof=1, as ``torch.std`` in verl and TRL; a group of one, or whose rewards are all
equal, gives advantage 0; also ``dr-grpo``, ``rloo``, ``reinforce++``) and the credit mode ``credit``
(``outcome``: the trajectory's advantage on every step; ``step``: each step its own, from discounted returns
normalized within the group step by step; ``progress``: the same over the progress rewards; ``gae``: each row's
``step_reward`` and a null ``advantage``, which ``clawgym train rl`` fills in from a value head); the formulas are
in :mod:`clawgym.pool.credit`. ``min_reward``
and ``ready_groups_only`` select rows; they do not change a group's baseline. Steps without token ids are
skipped and counted.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from clawgym.pool.credit import (
    CREDITS,
    GAE,
    kept_step_rewards,
    outcome_advantages,
    outcome_step_rewards,
    progress_advantages,
    progress_step_rewards,
    step_advantages,
)
from clawgym.pool.records import ERROR_STATUSES
from clawgym.pool.store import Pool, StepRow
from clawgym.rl.presets import resolve_preset

GRPO_EPS = 1e-6


def grpo_advantages(rewards: Mapping[str, float], eps: float = GRPO_EPS) -> dict[str, float]:
    """GRPO advantages of one group: (r - mean) / (std + eps), std with ddof=1; 0 when std is 0 or n < 2."""
    return outcome_advantages({"g": rewards}, "grpo", eps)


class _Same:
    """The advantages of a trajectory's steps under outcome credit: one value for every step index."""

    def __init__(self, value: float):
        self.value = value

    def __getitem__(self, step_index: int) -> float:
        return self.value


class _AtomicLines:
    """Write lines to a temp file next to `path`; rename it over `path` only when everything went well."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.count = 0

    def __enter__(self) -> _AtomicLines:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self.tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        self.fh = os.fdopen(fd, "w", encoding="utf-8")
        return self

    def write(self, obj: dict[str, Any]) -> None:
        self.fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.count += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.fh.flush()
                os.fsync(self.fh.fileno())
            self.fh.close()
            if exc_type is None:
                os.replace(self.tmp, self.path)
        finally:
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)


def _selected_trajectories(pool: Pool, *, min_reward: float | None, ready_groups_only: bool,
                           drop_quality: Iterable[str]) -> tuple[dict[str, dict], dict[str, str], dict[str, dict]]:
    """(kept trajectories, reason for each dropped one, baseline pool per group: {group: {traj: reward}})."""
    drop_q = set(drop_quality)
    ready = {g["id"] for g in pool.groups(ready_only=True)}
    kept: dict[str, dict] = {}
    why: dict[str, str] = {}
    baseline: dict[str, dict[str, float]] = {}
    for t in pool.trajectories():
        curated_in = t["trainable"] and t["quality"] not in drop_q
        if curated_in and t["ended"] and t["reward"] is not None:
            baseline.setdefault(t["group"], {})[t["id"]] = float(t["reward"])
        if not t["trainable"]:
            if not t["ended"]:
                reason = "trajectory not ended"
            elif t["status"] in ERROR_STATUSES:
                reason = f"trajectory ended with status {t['status']}"
            else:
                reason = "trajectory curated not trainable"
        elif t["quality"] in drop_q:
            reason = f"trajectory quality={t['quality']}"
        elif ready_groups_only and t["group"] not in ready:
            reason = "group not ready"
        elif min_reward is not None and t["reward"] is None:
            reason = "no reward"
        elif min_reward is not None and t["reward"] < min_reward:
            reason = "reward below min_reward"
        else:
            kept[t["id"]] = t
            continue
        why[t["id"]] = reason
    return kept, why, baseline


def _by_trajectory(rows: Iterator[StepRow]) -> Iterator[tuple[str, list[StepRow]]]:
    current: str | None = None
    bucket: list[StepRow] = []
    for row in rows:
        if row.trajectory_id != current:
            if bucket:
                yield current, bucket  # type: ignore[misc]
            current, bucket = row.trajectory_id, []
        bucket.append(row)
    if bucket:
        yield current, bucket  # type: ignore[misc]


def text_content(content: Any) -> Any:
    """Content as a plain string: OpenAI content parts are joined (non-text parts named in brackets)."""
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict):
                parts.append(p.get("text") if p.get("type", "text") == "text" else f"[{p.get('type')}]")
            else:
                parts.append(str(p))
        return "".join(x for x in parts if x)
    return content


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    fn = dict(call.get("function") or {})
    args = fn.get("arguments")
    if args is not None and not isinstance(args, str):
        fn["arguments"] = json.dumps(args, ensure_ascii=False)
    return {"id": call.get("id"), "type": call.get("type") or "function", "function": fn}


def _message(msg: dict[str, Any]) -> dict[str, Any]:
    out = dict(msg)
    if "content" in out:
        out["content"] = text_content(out["content"])
    if out.get("tool_calls"):
        out["tool_calls"] = [_tool_call(c) for c in out["tool_calls"]]
    elif "tool_calls" in out:
        del out["tool_calls"]
    if "reasoning" in out and "reasoning_content" not in out:
        out["reasoning_content"] = out.pop("reasoning")
    return out


def sft_messages(request: dict[str, Any], response: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation of one call: its request messages, then its response as an assistant message."""
    messages = [_message(m) for m in request.get("messages") or []]
    answer: dict[str, Any] = {"role": "assistant", "content": text_content(response.get("content"))}
    if response.get("reasoning"):
        answer["reasoning_content"] = response["reasoning"]
    if response.get("tool_calls"):
        answer["tool_calls"] = [_tool_call(c) for c in response["tool_calls"]]
    return messages + [answer]


def export_sft(pool: Pool, path: str | os.PathLike, *, min_reward: float | None = None,
               ready_groups_only: bool = False, drop_quality: Iterable[str] = ("bad",)) -> dict[str, Any]:
    """Write one multi-turn conversation per kept trajectory (see the module docstring); return the counts."""
    drop_q = set(drop_quality)
    kept, why, _ = _selected_trajectories(pool, min_reward=min_reward, ready_groups_only=ready_groups_only,
                                          drop_quality=drop_q)
    dropped: Counter[str] = Counter(why.values())
    seen: set[str] = set()
    with _AtomicLines(path) as out:
        for tid, rows in _by_trajectory(pool.iter_step_rows()):
            seen.add(tid)
            if tid not in kept:
                continue
            ok = [r for r in rows if r.s_status == "ok"]
            if not ok:
                dropped["no successful model call"] += 1
                continue
            final = ok[-1]
            if not final.trainable:
                dropped["final step curated not trainable"] += 1
                continue
            if final.quality in drop_q:
                dropped[f"final step quality={final.quality}"] += 1
                continue
            step = json.loads(pool.read_stored(final))
            t = kept[tid]
            out.write({
                "messages": sft_messages(step["request"], step["response"]),
                "tools": step["request"].get("tools") or [],
                "trajectory_id": tid,
                "task_id": t["task"],
                "reward": t["reward"],
            })
        # kept trajectories that ended before any call was stored
        dropped["no successful model call"] += sum(1 for tid in kept if tid not in seen)
    return {"format": "sft", "path": str(path), "kept": out.count,
            "dropped": {k: v for k, v in sorted(dropped.items()) if v}, "trajectories": len(kept) + len(why)}


def export_rl(pool: Pool, path: str | os.PathLike, *, min_reward: float | None = None,
              ready_groups_only: bool = False, drop_quality: Iterable[str] = ("bad",),
              eps: float = GRPO_EPS, algo: str = "grpo", credit: str = "outcome",
              gamma: float = 1.0) -> dict[str, Any]:
    """Write one row per kept step with the advantages of the RL preset `algo` and the credit mode `credit`
    (see the module docstring and :mod:`clawgym.pool.credit`); return the counts (`kept` and `dropped` count
    steps)."""
    resolve_preset(algo)  # ValueError naming the presets
    if credit not in CREDITS:
        raise ValueError(f"unknown credit mode {credit!r}; choose one of {', '.join(CREDITS)}")
    drop_q = set(drop_quality)
    kept, why, baseline = _selected_trajectories(pool, min_reward=min_reward, ready_groups_only=ready_groups_only,
                                                 drop_quality=drop_q)
    # trajectory id -> advantage of each of its steps (outcome credit: the same on every step)
    fell_back: list[str] = []
    if credit == "outcome":
        advantages = {tid: _Same(a) for tid, a in outcome_advantages(baseline, algo, eps).items()}
    else:
        n_steps: dict[str, int] = {}
        steps_kept: dict[str, list[int]] = {}  # gae: the steps each kept trajectory keeps (the rest hand back rewards)
        for row in pool.iter_step_rows():
            n_steps[row.trajectory_id] = max(n_steps.get(row.trajectory_id, 0), row.max_index + 1)
            if credit == GAE and row.trajectory_id in kept and _step_dropped(row, drop_q) is None:
                steps_kept.setdefault(row.trajectory_id, []).append(row.step_index)
        if credit == "progress":
            from clawgym.verify.progress import progress_of

            verdicts = {t["id"]: t["verdict"] for t in pool.trajectories()}
            advantages, fell_back = progress_advantages(
                {g: {tid: (n_steps.get(tid, 1), r, progress_of(verdicts.get(tid))) for tid, r in rewards.items()}
                 for g, rewards in baseline.items()}, algo, gamma, eps)
        elif credit == GAE:  # step rewards only: the advantages need the policy's values (clawgym.train.value_head)
            step_rewards, fell_back = _gae_step_rewards(pool, baseline, n_steps, steps_kept, gamma)
        else:
            step_rewards = {g: {tid: outcome_step_rewards(n_steps.get(tid, 1), r) for tid, r in rewards.items()}
                            for g, rewards in baseline.items()}
            advantages = step_advantages(step_rewards, algo, gamma, eps)
    credited = step_rewards if credit == GAE else advantages
    dropped: Counter[str] = Counter()
    notes: Counter[str] = Counter()
    sources: Counter[str] = Counter()  # where the kept steps' token ids came from: the engine, or re-tokenized
    trajs: set[str] = set()
    groups: set[str] = set()
    n_steps = 0
    with _AtomicLines(path) as out:
        for row in pool.iter_step_rows():
            n_steps += 1
            tid = row.trajectory_id
            reason = why[tid] if tid not in kept else "no reward" if tid not in credited else _step_dropped(row, drop_q)
            if reason:  # "no reward": kept without min_reward, but it has no reward: nothing to learn from
                dropped[reason] += 1
                continue
            step = json.loads(pool.read_stored(row))
            response_ids = step["response_ids"]
            logprobs = step.get("logprobs")
            if logprobs is not None and len(logprobs) != len(response_ids):
                notes["logprobs length mismatch (set to null)"] += 1
                logprobs = None
            t = kept[tid]
            source = step.get("token_source") or "unknown"
            sources["engine" if source == "upstream" else source] += 1
            if source == "retokenized" and not (step.get("token_check") or {}).get("match", True):
                notes["re-tokenized ids disagree with the engine's token counts"] += 1
            out.write({
                "step_id": row.step_id,
                "trajectory_id": tid,
                "group_id": t["group"],
                "task_id": t["task"],
                "step_index": row.step_index,
                "prompt_ids": step["prompt_ids"],
                "response_ids": response_ids,
                "response_mask": [1] * len(response_ids),
                "logprobs": logprobs,
                "reward": t["reward"],
                "advantage": None if credit == GAE else advantages[tid][row.step_index],
                "policy_version": step.get("policy_version"),
                "token_source": step.get("token_source"),
                "is_last": row.is_last,
                **({"step_reward": step_rewards[tid][row.step_index]} if credit == GAE else {}),
            })
            trajs.add(tid)
            groups.add(t["group"])
    return {"format": "rl", "algo": algo, "credit": credit, "gamma": gamma, "path": str(path), "kept": out.count,
            "dropped": {k: v for k, v in sorted(dropped.items()) if v}, "notes": dict(notes), "steps": n_steps,
            "token_ids": dict(sources), "trajectories": len(trajs), "groups": len(groups),
            **({"progress_fallback": sorted(fell_back)} if credit in ("progress", GAE) else {})}


def _step_dropped(row: StepRow, drop_q: set[str]) -> str | None:
    """Why a step of a kept trajectory is left out of the RL rows (None: it is kept)."""
    if not row.trainable:
        return "step failed" if row.s_status == "error" and row.s_trainable is None else "step curated not trainable"
    if row.quality in drop_q:
        return f"step quality={row.quality}"
    if not row.has_ids:
        return "no token ids"
    if not row.n_response:
        return "empty response"
    return None


def _gae_step_rewards(pool: Pool, baseline: Mapping[str, Mapping[str, float]], n_steps: Mapping[str, int],
                      steps_kept: Mapping[str, list[int]],
                      gamma: float = 1.0) -> tuple[dict[str, dict[int, float]], list[str]]:
    """(trajectory id -> step index -> reward of each of its `steps_kept`, the trajectories that fell back to
    outcome credit): progress credit's step rewards (:func:`clawgym.pool.credit.progress_step_rewards`), each
    dropped step's handed to the kept step before it, discounted by `gamma` (:func:`clawgym.pool.credit.kept_step_rewards`)."""
    from clawgym.verify.progress import progress_of

    verdicts = {t["id"]: t["verdict"] for t in pool.trajectories()}
    out: dict[str, dict[int, float]] = {}
    fell_back: list[str] = []
    for rewards in baseline.values():
        for tid, reward in rewards.items():
            per_step, fell = progress_step_rewards(n_steps.get(tid, 1), reward, progress_of(verdicts.get(tid)))
            out[tid] = kept_step_rewards(per_step, steps_kept.get(tid, []), gamma)
            if fell:
                fell_back.append(tid)
    return out, fell_back
