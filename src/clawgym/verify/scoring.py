"""Combining code and rubric parts into one verdict (0.7 code + 0.3 rubric by default, per-task weights)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawgym.core.records import Verdict, VerifierSpec
from clawgym.verify.code import CodeResult

if TYPE_CHECKING:
    from clawgym.verify.judge import JudgeResult

PASS_EPSILON = 1e-9
RUBRIC_CHECK_PREFIX = "rubric:"


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
        checklib=code.checklib if code is not None else None,
    )


def combine_judged(spec: VerifierSpec, code: CodeResult | None, judged: JudgeResult | None) -> Verdict:
    """:func:`combine` with the rubric judge's result.

    * No judge result (or the task has no rubric): exactly :func:`combine` (code only; rubric-only unscored).
    * Judged: final = code weight x code score + rubric weight x rubric score (`spec.weights()`: 0.7 / 0.3 by
      default, the task's own weights when it states them; a judge-only task is its rubric score). Each rule
      becomes a check named `rubric:<rule>` (its mean band over the judge samples) and a line in `notes`.
    * The judge failed (an answer that could not be parsed after a re-ask, or the endpoint down): the verdict
      is `unscored` with the judge's error, never a 0. The code part and the rules that were judged are kept
      (`code_score`, `checks`) for inspection.
    """
    if judged is None or spec.rubric is None or judged.status == "none":
        return combine(spec, code)
    rule_checks = {f"{RUBRIC_CHECK_PREFIX}{r.name}": r.score for r in judged.rules
                   if r.status in ("scored", "missing_file") and r.score is not None}
    judge_line = (f"rubric judged by {', '.join(judged.models)} ({judged.samples} sample"
                  f"{'s' * (judged.samples > 1)} per rule)")
    if judged.status != "scored" or judged.score is None:
        base = combine(spec, code)
        error = f"rubric judge failed: {judged.error or 'no score'}"
        notes = [n for n in base.notes if not n.startswith("rubric not judged")]
        if base.status == "checker_failed":
            notes.append(f"code check failed too: {base.error}")
        return base.model_copy(update={
            "status": "unscored", "score": 0.0, "passed": False, "rubric_score": None, "weights": spec.weights(),
            "error": error, "checks": {**base.checks, **rule_checks},
            "notes": notes + [judge_line + ": FAILED"] + judged.notes(),
        })
    verdict = combine(spec, code, judged.score)
    return verdict.model_copy(update={
        "checks": {**verdict.checks, **rule_checks},
        "notes": verdict.notes + [judge_line] + judged.notes(),
    })
