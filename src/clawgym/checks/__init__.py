"""The grading contract at the ground floor: checks as data (:class:`clawgym.core.records.CheckCall`), the check
library that evaluates them (checklib.py and its checklib_*.py extensions, with the third-party extensions of the
entry point group ``clawgym.checks`` appended: one versioned source copied into the grading sandbox) and the
self-contained grade() renderer. Every stage that grades (verify, rollout, importers, the CLI) imports this
package; none imports :mod:`clawgym.synth`, which is a leaf that writes checks in this form."""

from clawgym.checks.library import (
    CHECKLIB_SOURCE,
    COMBINATORS,
    EXTENSIONS,
    UnknownCheckError,
    current_checklib,
    inline_refs,
    library_source,
    library_subset,
    library_version,
    program_checks,
    registered_checks,
    render_grade_source,
    validate_call,
)

__all__ = ["CHECKLIB_SOURCE", "COMBINATORS", "EXTENSIONS", "UnknownCheckError", "current_checklib", "inline_refs",
           "library_source", "library_subset", "library_version", "program_checks", "registered_checks",
           "render_grade_source", "validate_call"]
