"""Where `train sft` reports its logged metrics besides OUT/log.jsonl (`--report-to`): TensorBoard event files
under OUT/tensorboard/, or Weights & Biases (transformers' own integrations; none by default)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from clawgym.core.errors import ClawgymError

REPORT_TO = ("none", "tensorboard", "wandb")
TENSORBOARD_DIR = "tensorboard"
_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb"}


def check_report_to(report_to: str) -> None:
    """A known value whose package is installed, else a one-line error."""
    if report_to not in REPORT_TO:
        raise ClawgymError(f"--report-to {report_to!r}: use {', '.join(REPORT_TO)}")
    pkg = _PACKAGES.get(report_to)
    if pkg and importlib.util.find_spec(pkg) is None:
        raise ClawgymError(f"--report-to {report_to}: the {pkg} package is not installed (pip install {pkg})")


def report_to_list(report_to: str) -> list[str]:
    """transformers' `report_to` value."""
    return [] if report_to == "none" else [report_to]


def point_tensorboard(trainer: Any, out: Path) -> Path | None:
    """Make transformers' TensorBoard callback write to OUT/tensorboard (not OUT/runs/<date_host>); its path."""
    from transformers.integrations import TensorBoardCallback

    for cb in trainer.callback_handler.callbacks:
        if isinstance(cb, TensorBoardCallback):
            cb.logging_dir = str(out / TENSORBOARD_DIR)
            return out / TENSORBOARD_DIR
    return None
