"""Where `train rl` reports its metrics besides OUT/metrics.jsonl (`--report-to`, the values of `train sft`'s,
:mod:`clawgym.train.reporting`): TensorBoard event files under OUT/tensorboard/, or a Weights & Biases run.

Each iteration's metrics row is logged at step = the policy version rolled out (its numbers; nested tables such
as `per_operation` as `per_operation/<name>`), and each optimizer step of its update under `update/` at the
run's global optimizer step, so PPO epochs and mini-batches show as curves of their own.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from clawgym.train.reporting import TENSORBOARD_DIR, check_report_to

UPDATE_PREFIX = "update/"


def scalars(row: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of a metrics row, nested tables flattened into `a/b` names (booleans and text left out)."""
    out: dict[str, float] = {}
    for k, v in row.items():
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, (int, float)):
            out[f"{prefix}{k}"] = float(v)
        elif isinstance(v, dict):
            out.update(scalars(v, f"{prefix}{k}/"))
    return out


class MetricsReport:
    """A writer of the loop's metrics to `report_to` (none, tensorboard, wandb); a context manager."""

    def __init__(self, out: Path, report_to: str = "none", config: dict[str, Any] | None = None):
        check_report_to(report_to)
        self.report_to = report_to
        self.out = out
        # the settings as wandb's run config: plain values only (not an executor object)
        self._config = {k: v for k, v in (config or {}).items() if isinstance(v, (str, int, float, bool, type(None)))}
        self._tb: Any = None
        self._wandb: Any = None

    def __enter__(self) -> MetricsReport:
        if self.report_to == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.out / TENSORBOARD_DIR))
        elif self.report_to == "wandb":
            import wandb

            # the run's id is the output directory's: a resumed run goes on logging into the same wandb run
            run_id = "rl-" + hashlib.sha256(str(self.out.resolve()).encode()).hexdigest()[:16]
            self._wandb = wandb.init(project="clawgym", name=self.out.name, dir=str(self.out), id=run_id,
                                     resume="allow", config=self._config)
            # two x axes (wandb's own step must only grow): the optimizer step for update/*, the version else
            self._wandb.define_metric("update/step")
            self._wandb.define_metric("update/*", step_metric="update/step")
            self._wandb.define_metric("version")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()

    def log(self, values: dict[str, Any], step: int, prefix: str = "") -> None:
        nums = scalars(values, prefix)
        if self._tb is not None:
            for k, v in nums.items():
                self._tb.add_scalar(k, v, global_step=step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log({**nums, (f"{prefix}step" if prefix else "version"): float(step)})

    def log_iteration(self, row: dict[str, Any], steps: list[dict[str, Any]] | None = None) -> None:
        """An iteration's metrics row (at its `version`) and its update's optimizer steps (each at its `step`)."""
        for s in steps or []:
            self.log({k: v for k, v in s.items() if k != "step"}, int(s["step"]), UPDATE_PREFIX)
        self.log({k: v for k, v in row.items() if k != "update_steps"}, int(row["version"]))
