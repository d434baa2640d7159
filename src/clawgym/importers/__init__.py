"""Importers of outside task formats into :class:`clawgym.core.records.Task` records.

Each importer reads a whole set and never raises on a bad task: what imports goes to
:attr:`ImportResult.tasks`, every task that cannot be imported becomes one
:class:`~clawgym.core.errors.TaskImportError` (file + reason) in :attr:`ImportResult.failures`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clawgym.core.errors import TaskImportError
from clawgym.core.records import Task


@dataclass
class ImportResult:
    """The tasks that imported and the ones that did not, each failure naming its file and reason."""

    tasks: list[Task] = field(default_factory=list)
    failures: list[TaskImportError] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict, repr=False, compare=False)  # task id -> where it came from

    def add(self, task: Task, where: str, origin: str) -> None:
        """Keep `task` (read from `origin`), or record a failure against `where` when its id came before."""
        if task.id in self.origins:
            first = self.origins[task.id]
            self.failures.append(TaskImportError(where, f"task id {task.id!r} already imported from {first}"))
            return
        self.origins[task.id] = origin
        self.tasks.append(task)


# Imported after ImportResult exists: the submodules import it from this package.
from clawgym.importers.clawgym_folder import import_clawgym  # noqa: E402
from clawgym.importers.clawgym_hub import import_clawgym_hub  # noqa: E402
from clawgym.importers.pinchbench import import_pinchbench  # noqa: E402

__all__ = ["ImportResult", "import_clawgym", "import_clawgym_hub", "import_pinchbench"]
