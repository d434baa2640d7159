"""The data pool: every model call a gateway captures, as step records, kept for training.

`Pool` (store.py) is the append-only store with its index and event log, over the segment files
(segments.py) and the SQLite index (index.py, whose `TrajectoryFilter` / `StepFilter` are the one query API);
`StepRecord` and the event records are in records.py; `export_sft` / `export_rl` (export.py) write training
files that respect curation, with the advantages of credit.py (the estimators are in `clawgym.rl`).
"""

from clawgym.pool.export import export_rl, export_sft, grpo_advantages
from clawgym.pool.index import StepFilter, TrajectoryFilter
from clawgym.pool.records import (
    DERIVED_FIELDS,
    ERROR_STATUSES,
    Curation,
    GroupExpected,
    StepRecord,
    TrajectoryEnd,
    step_id_for,
)
from clawgym.pool.store import Pool, PoolError

__all__ = [
    "DERIVED_FIELDS", "ERROR_STATUSES", "Curation", "GroupExpected", "Pool", "PoolError", "StepFilter", "StepRecord",
    "TrajectoryEnd", "TrajectoryFilter", "export_rl", "export_sft", "grpo_advantages", "step_id_for",
]
