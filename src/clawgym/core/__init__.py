"""The ground floor: core records and their JSONL files, errors, the taxonomy, the plug-in registry
(:mod:`clawgym.core.registry`), the Hub client. Imports nothing of clawgym's other packages."""

from clawgym.core.errors import ClawgymError, RecordError, RecordVersionError, TaskImportError
from clawgym.core.jsonl import (
    JsonlAppender,
    iter_records,
    read_records,
    read_records_lenient,
    repair_torn_tail,
    write_records,
)
from clawgym.core.records import (
    CodeCheck,
    ErrorInfo,
    GeneratedContent,
    ReferenceSolution,
    Rubric,
    RubricRule,
    Session,
    Task,
    ToolCall,
    Trajectory,
    Verdict,
    VerifierSpec,
    WorkspaceFile,
    WorkspaceSpec,
)
from clawgym.core.schema import record_schema, validate_data

__all__ = [
    "ClawgymError", "RecordError", "RecordVersionError", "TaskImportError", "JsonlAppender", "iter_records", "read_records",
    "read_records_lenient", "repair_torn_tail", "write_records", "CodeCheck", "ErrorInfo", "GeneratedContent",
    "ReferenceSolution", "Rubric", "RubricRule", "Session", "Task", "ToolCall", "Trajectory", "Verdict",
    "VerifierSpec", "WorkspaceFile", "WorkspaceSpec", "record_schema", "validate_data",
]
