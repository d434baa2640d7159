"""Atomic operations of persona-driven synthesis, found by name in :data:`OPERATIONS`.

An operation is a subclass of :class:`~clawgym.synth.ops.base.OperationGenerator` that declares its facts as class
attributes (what it consumes and produces, whether it starts a chain, whether it treats a folder as a whole) and
plans one step of a task. Adding one is one module plus a taxonomy line:

- built in: a module of this package named after the operation, its class decorated with :func:`operation`
  (modules whose name starts with ``_`` hold what several operations share);
- another distribution: its class in the entry point group ``clawgym.synth_operations``, under its id::

      [project.entry-points."clawgym.synth_operations"]
      water_log = "my_package.water:WaterLog"

and, either way, a taxonomy (``--taxonomy``) whose ``operations`` and subcategories name the id. The taxonomy line
holds what is read without importing synthesis (:mod:`clawgym.skills` reads its ``skill_patterns``).
"""

from __future__ import annotations

import pkgutil
from typing import Any, TypeVar

from clawgym.core.registry import Registry, UnknownPlugin
from clawgym.synth.ops.base import OperationGenerator

G = TypeVar("G", bound=type[OperationGenerator])


def _check(name: str, obj: Any) -> None:
    if not (isinstance(obj, type) and issubclass(obj, OperationGenerator)):
        raise TypeError(f"synthesis operation {name!r} must be a subclass of "
                        f"clawgym.synth.ops.base.OperationGenerator, not {obj!r}")
    if getattr(obj, "id", None) != name:
        raise TypeError(f"synthesis operation {name!r}: its class {obj.__name__} has id {getattr(obj, 'id', None)!r}")


OPERATIONS: Registry[type[OperationGenerator]] = Registry(
    "synthesis operation", "clawgym.synth_operations",
    builtin={m.name: f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__)
             if not m.ispkg and not m.name.startswith("_") and m.name != "base"},
    check=_check,
)
"""Operation classes by id: the modules of this package (each registers its class as it is imported), then those
other distributions declare."""


def operation(cls: G) -> G:
    """Class decorator of a built-in operation: register it in :data:`OPERATIONS` under its id."""
    OPERATIONS.add(cls.id, cls)
    return cls


def registry() -> dict[str, OperationGenerator]:
    """Operation id -> generator, for every operation :data:`OPERATIONS` knows, in the order of their ids."""
    return {name: cls() for name, cls in OPERATIONS.items()}


def folder_scoped(operation_id: str) -> bool:
    """Whether the operation declares that its steps treat a folder as a whole (one no registry knows does not)."""
    try:
        return OPERATIONS.get(operation_id).folder_scoped
    except UnknownPlugin:
        return False
