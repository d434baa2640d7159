"""Verifiers: code checks run in the sandbox, the rubric judge, and their combination into a verdict."""

from __future__ import annotations

from typing import Any

from clawgym.core.records import Task, Verdict
from clawgym.sandbox.base import Sandbox
from clawgym.verify.code import CodeResult, run_code_check
from clawgym.verify.judge import (
    BANDS,
    Judge,
    JudgeCache,
    JudgeResult,
    JudgeSample,
    RuleResult,
    parse_judgment,
    render_transcript,
    snap_to_band,
    verify_with_judge,
)
from clawgym.verify.scoring import combine, combine_judged


def verify_episode(task: Task, sandbox: Sandbox, transcript: list[dict[str, Any]], final_message: str = "",
                   judged: JudgeResult | None = None) -> Verdict:
    """Run the task's code check in the (still live) sandbox and combine it into a verdict, with the rubric
    judge's result when there is one (`judged`, judged on the workspace before this call: see
    :func:`verify_with_judge`).

    Raises SandboxError when the sandbox fails; the caller records that as an infrastructure error.
    """
    code = None
    if task.verifier.code is not None:
        code = run_code_check(task.verifier.code, task, sandbox, transcript, final_message)
    return combine_judged(task.verifier, code, judged)


_LAZY = {
    "rescore_run": "clawgym.verify.rescore", "rescore_episode": "clawgym.verify.rescore",
    "RescoredEpisode": "clawgym.verify.rescore", "RescoreReport": "clawgym.verify.rescore",
    "read_verdicts": "clawgym.verify.rescore", "LazyEndpointClient": "clawgym.verify.rescore",
    "calibration_report": "clawgym.verify.calibration", "render_calibration": "clawgym.verify.calibration",
}


def __getattr__(name: str) -> Any:
    # re-scoring imports the sandbox and rollout-level machinery: loaded on first use, so that the rollout,
    # which imports this package, does not import it back
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BANDS", "CodeResult", "Judge", "JudgeCache", "JudgeResult", "JudgeSample", "RuleResult", "combine",
    "combine_judged", "parse_judgment", "render_transcript", "run_code_check", "snap_to_band", "verify_episode",
    "verify_with_judge", *_LAZY,
]
