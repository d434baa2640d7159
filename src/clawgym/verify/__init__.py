"""Verifiers: code checks run in the sandbox, combined with rubric scores into a verdict."""

from __future__ import annotations

from typing import Any

from clawgym.core.records import Task, Verdict
from clawgym.sandbox.base import Sandbox
from clawgym.verify.code import CodeResult, run_code_check
from clawgym.verify.scoring import combine


def verify_episode(task: Task, sandbox: Sandbox, transcript: list[dict[str, Any]], final_message: str = "") -> Verdict:
    """Run the task's code check in the (still live) sandbox and combine it into a verdict.

    Raises SandboxError when the sandbox fails; the caller records that as an infrastructure error.
    """
    code = None
    if task.verifier.code is not None:
        code = run_code_check(task.verifier.code, task, sandbox, transcript, final_message)
    return combine(task.verifier, code)


__all__ = ["CodeResult", "combine", "run_code_check", "verify_episode"]
