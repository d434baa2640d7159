"""What an atomic-operation generator is, and the pieces it hands to the composer.

A generator turns (persona, subcategory, seeded RNG, optionally the output of the previous step) into a
:class:`StepPlan`: the workspace files it needs, an instruction fragment, named checks with partial credit,
the reference solution as the agent's own tool calls, a deliberately partial solution (validation proves
partial credit is real), and the artifacts it produces for the next step to consume.

Everything is computed in Python at synthesis time from the data the generator itself made, so the
reference outputs are right by construction and the checks know the exact expected values.
"""

from __future__ import annotations

import csv
import io
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from clawgym.core.records import ToolCall, WorkspaceFile
from clawgym.core.taxonomy import Subcategory
from clawgym.synth.personas import Persona

# Kinds of artifacts that flow from one step to the next.
TABLE = "table"  # data: {"header": [...], "rows": [[...], ...]}
DOCUMENT = "document"  # data: str (markdown / plain text)
RECORDS = "records"  # data: list[dict]
EVENTS = "events"  # data: list[dict] with summary, start, end (ISO), location
MESSAGES = "messages"  # data: list[dict] with from, to, subject, date, body
CONFIG = "config"  # data: dict

ARTIFACT_KINDS = (TABLE, DOCUMENT, RECORDS, EVENTS, MESSAGES, CONFIG)


@dataclass
class Artifact:
    """A file a step's reference solution produces, which the next step may take as its input."""

    path: str
    kind: str
    data: Any
    description: str  # how the persona would refer to it: "the cleaned expense sheet"
    roles: dict[str, str] = field(default_factory=dict)  # e.g. tables: {"group": "category", "value": "amount",
    # "date": "date", "name": "payee"} so a consumer knows which column plays which part


@dataclass
class Check:
    """A named check: a checklib function called as fn(ws, **args), or all_of/min_of over `parts`."""

    name: str
    fn: str
    args: dict[str, Any] = field(default_factory=dict)
    parts: list[Check] = field(default_factory=list)

    def expr(self) -> str:
        if self.parts:  # each part as a function: a combinator evaluates only the parts that can change its value
            return f"{self.fn}(" + ", ".join(f"lambda: {p.expr()}" for p in self.parts) + ")"
        return f"{self.fn}(ws, **{self.args!r})"


@dataclass
class StepPlan:
    operation: str
    instruction: str  # one request fragment, in the persona's voice, naming exact paths and formats
    checks: list[Check]
    steps: list[ToolCall]  # reference solution of this step
    partial: list[ToolCall]  # a partial/wrong solution of this step: its checks score strictly in (0, 1)
    # the same step solved by computing: a fixed script whose only step-specific parts are constants copied
    # verbatim from the request (paths, dates, names). Empty if the generator has none. Tasks synthesized with
    # solution="program" use it as the reference, so teacher trajectories show a small model a pattern it can
    # reproduce instead of arithmetic, date counting and sorting it cannot do in its head.
    program: list[ToolCall] = field(default_factory=list)
    files: list[WorkspaceFile] = field(default_factory=list)
    outputs: list[Artifact] = field(default_factory=list)
    summary: str = ""  # short label of what the step does, for the task's metadata
    fingerprint: str = ""  # stable digest of the step's data, for near-duplicate detection


@dataclass
class OpContext:
    persona: Persona
    subcategory: Subcategory
    rng: random.Random
    step: int  # 0-based position in the chain
    dir: str  # a folder (relative, no trailing slash) this step may use for its own files, e.g. "s1"
    used_paths: set[str] = field(default_factory=set)

    def path(self, name: str) -> str:
        """A workspace path under the step's folder, unique within the task."""
        p = f"{self.dir}/{name}" if self.dir else name
        base, dot, ext = p.rpartition(".")
        n = 2
        while p in self.used_paths:
            p = f"{base}_{n}.{ext}" if dot else f"{p}_{n}"
            n += 1
        self.used_paths.add(p)
        return p


class OperationGenerator(ABC):
    """An atomic operation: the facts other parts of clawgym read about it, as class attributes, and
    :meth:`plan`, one step of a task. A built-in one is a module of :mod:`clawgym.synth.ops` whose class is
    decorated with :func:`clawgym.synth.ops.operation`; another distribution declares its class in the entry point
    group ``clawgym.synth_operations``. Either way its id is also an operation of the taxonomy in use, whose line
    holds the facts read without synthesis (name, description, file kinds, the skill patterns)."""

    id: str  # the taxonomy operation id
    consumes: tuple[str, ...] = ()  # artifact kinds it can take as input; () = only standalone
    produces: tuple[str, ...] = ()  # artifact kinds it outputs; () = ends a chain
    standalone: bool = True  # can start a chain (makes its own input data)
    folder_scoped: bool = False
    """Its steps address a folder as a whole (its every file, a repository, a script's DIR), so no distractor
    file (:mod:`clawgym.synth.distractors`) may go in or under the folders they name."""

    @abstractmethod
    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        """One step: its workspace files, request fragment, checks, reference and partial solutions."""


def to_csv(header: list[str], rows: list[list]) -> str:
    """CSV text with "\n" line ends, as the generators write their tables."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def write(path: str, content: str) -> ToolCall:
    return ToolCall(name="write", arguments={"path": path, "content": content})


def exec_(command: str) -> ToolCall:
    return ToolCall(name="exec", arguments={"command": command})


def python(script: str) -> ToolCall:
    """`exec` of a python3 script given inline (a quoted here-document: the shell expands nothing in it)."""
    if not script.endswith("\n"):
        script += "\n"
    return exec_(f"python3 - <<'PY'\n{script}PY")


def read(path: str) -> ToolCall:
    return ToolCall(name="read", arguments={"path": path})


def edit(path: str, old: str, new: str) -> ToolCall:
    return ToolCall(name="edit", arguments={"path": path, "oldText": old, "newText": new})


def ls(path: str = ".") -> ToolCall:
    return ToolCall(name="ls", arguments={"path": path})
