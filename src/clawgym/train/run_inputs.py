"""What `clawgym filter` reads from a run directory besides its trajectories: the re-scored verdicts and the
pool's curation.

**Scores.** `clawgym verify RUN_DIR` (and `clawgym eval --judge-model`) writes `RUN_DIR/verdicts.jsonl`: one
re-scored verdict per episode, code checks run again plus the rubric judge. Those verdicts replace the
rollout's (code-only, unless the rollout itself had a judge) as follows (:data:`SCORE_SOURCES`):

* ``auto`` (the default): each trajectory takes its verdict from `verdicts.jsonl` when the file holds a
  *current* one for it, else the rollout's own, and the fallbacks are counted by reason: ``no_verdict`` (a
  re-scoring of some tasks only, or an episode run after it) and ``stale_verdict`` (the episode was run again
  after it was re-scored: a resumed rollout retried it). A verdict is current when it was made from the
  trajectory record the run holds now: the same `started_at` (recorded since this check exists), or, for files
  written before, the same rollout verdict as the one it recorded as `previous`. Verdicts for episodes the run
  does not hold are counted (``verdicts_unmatched``) and never used.
* ``verdicts``: every trajectory that reaches the score check must have a current verdict; a missing
  `verdicts.jsonl` or any fallback is an error naming the file and the first trajectory.
* ``rollout``: the rollout's verdicts only; `verdicts.jsonl` is not read.

**Curation.** The run's data pool (`RUN_DIR/pool`, else the `pool` named in `RUN_DIR/run.json`) holds the curation
made with `clawgym pool curate` or the dashboard. A trajectory is curated out when the pool marks it not
trainable (explicitly, or ended with an error status) or its quality is one of `drop_quality` (``bad`` by
default), or when one of its steps is explicitly marked not trainable or of a dropped quality: a conversation
is one training example, and the turns after a bad step were made in the context it created. Trajectories
the pool does not hold (agents that make no model call, `--no-gateway`) are counted and kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym.core.errors import ClawgymError
from clawgym.core.records import Trajectory, Verdict

if TYPE_CHECKING:
    from clawgym.pool.store import Pool
    from clawgym.verify.rescore import RescoredEpisode

TRAJECTORIES = "trajectories.jsonl"
VERDICTS = "verdicts.jsonl"
SCORE_SOURCES = ("auto", "verdicts", "rollout")
SCORED = ("scored", "checker_failed")


def run_dir_of(path: str | Path) -> Path | None:
    """The run directory of an input of `clawgym filter`: the directory itself, or the directory of a
    `trajectories.jsonl` file; None for a trajectories file of another name (no run directory around it)."""
    p = Path(path)
    if p.is_dir():
        return p
    return p.parent if p.name == TRAJECTORIES else None


def verdict_score(verdict: Verdict | None) -> float | None:
    """The score of a verdict that has one (scored, or a failed checker's 0), else None."""
    return verdict.score if verdict is not None and verdict.status in SCORED else None


def is_current(rec: RescoredEpisode, traj: Trajectory) -> bool:
    """Whether a re-scored verdict was made from this trajectory record (not an earlier attempt of its episode)."""
    if rec.trajectory_started_at is not None:
        return rec.trajectory_started_at == traj.started_at
    before = rec.previous.model_dump() if rec.previous is not None else None
    return before == (traj.verdict.model_dump() if traj.verdict is not None else None)


@dataclass
class RunVerdicts:
    """The records of one run's `verdicts.jsonl`, by episode id (the last line of an id wins)."""

    path: Path
    records: dict[str, RescoredEpisode]
    bad_lines: list[str] = field(default_factory=list)

    def lookup(self, traj: Trajectory) -> tuple[RescoredEpisode | None, str | None]:
        """(the current verdict record, None), or (None, why there is none: no_verdict | stale_verdict)."""
        rec = self.records.get(traj.id)
        if rec is None:
            return None, "no_verdict"
        if not is_current(rec, traj):
            return None, "stale_verdict"
        return rec, None

    def unmatched(self, ids: Iterable[str]) -> int:
        """Verdicts for episodes not among `ids` (another run's file, or episodes since removed)."""
        have = set(ids)
        return sum(1 for i in self.records if i not in have)


def load_verdicts(run_dir: Path) -> RunVerdicts | None:
    """RUN_DIR/verdicts.jsonl, or None when there is none. Bad lines are kept as one-line errors."""
    from clawgym.core.jsonl import read_records_lenient
    from clawgym.verify.rescore import RescoredEpisode

    path = Path(run_dir) / VERDICTS
    if not path.exists():
        return None
    read = read_records_lenient(path, RescoredEpisode)
    return RunVerdicts(path, {r.id: r for r in read.records}, [str(e) for e in read.errors])


# --------------------------------------------------------------------------------------------- curation


def find_pool(run_dir: Path) -> Path | None:
    """The run's pool: RUN_DIR/pool, else run.json's `pool` (as written: relative to the directory the rollout
    ran in, tried from the current directory, then from the run directory); None when the run has none."""
    own = run_dir / "pool"
    if (own / "pool.json").exists():
        return own
    try:
        named = json.loads((run_dir / "run.json").read_text()).get("pool")
    except (OSError, ValueError, AttributeError):
        return None
    if not named:
        return None
    for cand in (Path(named), Path.cwd() / named, run_dir / named):
        if (cand / "pool.json").exists():
            return cand
    return None


def _pool_prefix(run_dir: Path) -> str:
    """The prefix the run's trajectory ids carry in the pool (`train rl` iterations share one pool)."""
    try:
        return str(json.loads((run_dir / "run.json").read_text()).get("pool_id_prefix") or "")
    except (OSError, ValueError, AttributeError):
        return ""


def pool_trajectory_id(traj: Trajectory, prefix: str = "") -> str:
    """The id the rollout gave a trajectory's last attempt in the pool (see clawgym.rollout.setup)."""
    return prefix + (traj.id if traj.attempts <= 1 else f"{traj.id}~{traj.attempts}")


class RunCuration:
    """The curation of one run's pool, read-only."""

    def __init__(self, pool_dir: Path, prefix: str, drop_quality: Iterable[str]):
        from clawgym.pool.store import Pool

        self.pool_dir = pool_dir
        self.prefix = prefix
        self.drop_quality = {q for q in drop_quality if q}
        try:
            self.pool: Pool = Pool(pool_dir, create=False, readonly=True)
        except ClawgymError as exc:
            raise ClawgymError(f"cannot read the run's pool for its curation: {exc}") from None

    def close(self) -> None:
        self.pool.close()

    def why_out(self, traj: Trajectory) -> str | None:
        """Why the pool curates this trajectory out; "" when it is curated in; None when the pool does not
        hold it."""
        pid = pool_trajectory_id(traj, self.prefix)
        rows = list(self.pool.iter_step_rows(trajectory_id=pid))
        info: list[dict[str, Any]] = self.pool.trajectories(trajectory_id=pid)
        if not rows and not info:
            return None
        t = info[0] if info else None
        explicit = rows[0].t_trainable if rows else None
        if explicit == 0 or (t is not None and t["ended"] and not t["trainable"]):
            return "trajectory not trainable"
        quality = t["quality"] if t is not None else (rows[0].t_quality if rows else None)
        if quality in self.drop_quality:
            return f"trajectory quality={quality}"
        for row in rows:
            if row.s_trainable == 0:
                return "step not trainable"
            if row.s_quality in self.drop_quality:
                return f"step quality={row.s_quality}"
        return ""


def open_curation(run_dir: Path, drop_quality: Iterable[str]) -> RunCuration | None:
    pool_dir = find_pool(run_dir)
    return RunCuration(pool_dir, _pool_prefix(run_dir), drop_quality) if pool_dir is not None else None
