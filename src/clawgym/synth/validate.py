"""Validation of a synthesized task in real sandboxes, before it is written.

Three episodes: the reference solution replayed by the oracle must score 1.0; the untouched workspace
(no-op) must score 0 on every check; a deliberately partial solution (earlier steps done right, the last step
done partly or wrongly) must score strictly between 0 and 1, which shows the partial credit is real.
"""

from __future__ import annotations

from dataclasses import dataclass

from clawgym.agent.baselines import NoopAgent, OracleAgent
from clawgym.core.records import ReferenceSolution, Task, Verdict
from clawgym.rollout.runner import RolloutOptions, run_episode
from clawgym.sandbox.base import SandboxBackend, SandboxLimits
from clawgym.synth.compose import Candidate

VALIDATION_LIMITS = SandboxLimits(memory_mb=1024, max_processes=128, exec_timeout_s=60)


@dataclass
class Validation:
    ok: bool
    reason: str | None = None
    detail: str = ""
    oracle: Verdict | None = None
    noop: Verdict | None = None
    partial: Verdict | None = None


def partial_task(cand: Candidate) -> Task:
    steps = [s for p in cand.plans[:-1] for s in p.steps] + list(cand.plans[-1].partial)
    return cand.task.model_copy(update={"reference": ReferenceSolution(steps=steps)})


def _run(task: Task, agent, backend: SandboxBackend, options: RolloutOptions):
    t = run_episode(task, 0, agent, backend, options)
    if t.status == "infra_error":
        return None, f"infra error: {t.error.message if t.error else '?'}"
    return t, ""


def validate_candidate(cand: Candidate, backend: SandboxBackend, limits: SandboxLimits | None = None) -> Validation:
    options = RolloutOptions(limits=limits or VALIDATION_LIMITS, keep_workspaces=False)
    oracle, err = _run(cand.task, OracleAgent(), backend, options)
    if oracle is None:
        return Validation(False, "infra_error", err)
    v = oracle.verdict
    if oracle.tool_errors:
        return Validation(False, "reference_tool_error", f"{oracle.tool_errors} reference steps failed", oracle=v)
    if v is None or v.status != "scored" or not v.passed:
        failing = {k: x for k, x in (v.checks if v else {}).items() if x < 1.0}
        detail = (v.error if v and v.error else "") or f"failing checks: {failing}"
        return Validation(False, "reference_below_1", detail, oracle=v)
    noop, err = _run(cand.task, NoopAgent(), backend, options)
    if noop is None:
        return Validation(False, "infra_error", err, oracle=v)
    nv = noop.verdict
    nonzero = {k: x for k, x in (nv.checks if nv else {}).items() if x > 0}
    if nv is None or nv.status not in ("scored", "checker_failed") or nonzero:
        return Validation(False, "noop_above_0", f"checks passed without acting: {nonzero}", oracle=v, noop=nv)
    part, err = _run(partial_task(cand), OracleAgent(), backend, options)
    if part is None:
        return Validation(False, "infra_error", err, oracle=v, noop=nv)
    pv = part.verdict
    if pv is None or pv.status != "scored" or not 0.0 < pv.score < 1.0:
        score = pv.score if pv else None
        return Validation(False, "partial_not_between", f"partial solution scored {score}", v, nv, pv)
    return Validation(True, oracle=v, noop=nv, partial=pv)
