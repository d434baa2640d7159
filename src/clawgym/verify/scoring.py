"""Combining code and rubric parts into one verdict (0.7 code + 0.3 rubric by default, per-task weights)."""

from __future__ import annotations

from clawgym.core.records import Verdict, VerifierSpec
from clawgym.verify.code import CodeResult

PASS_EPSILON = 1e-9


def combine(spec: VerifierSpec, code: CodeResult | None, rubric_score: float | None = None) -> Verdict:
    """The verdict of one episode from its code result and (optional) judged rubric score.

    Without a judge (rubric_score None), a hybrid task is scored on its code checks alone and says so in
    `notes`; a rubric-only task stays `unscored`.
    """
    notes: list[str] = []
    wc, wr = spec.weights()
    if code is not None:
        notes += code.notes
    if spec.rubric is not None and rubric_score is None:
        if code is None:
            return Verdict(status="unscored", weights=(wc, wr), notes=["rubric not judged (no judge configured)"])
        notes.append("rubric not judged (no judge configured): scored on code checks only")
        wc, wr = 1.0, 0.0
    code_score = code.score if code is not None else None
    status = "scored"
    error = None
    if code is not None and code.status == "checker_failed":
        status, error, code_score = "checker_failed", code.error, 0.0
    score = (wc * (code_score or 0.0)) + (wr * (rubric_score or 0.0))
    score = min(1.0, max(0.0, score))
    return Verdict(
        status=status,
        checks=code.checks if code is not None else {},
        code_score=code_score,
        rubric_score=rubric_score,
        score=score,
        passed=status == "scored" and score >= spec.pass_threshold - PASS_EPSILON,
        weights=(wc, wr),
        error=error,
        notes=notes,
        output_tail=code.output_tail if code is not None else "",
        duration_s=code.duration_s if code is not None else 0.0,
    )
