"""Atomic-operation generators, one module per operation; each module lists its generators in GENERATORS.

The registry discovers modules automatically, so adding an operation is adding a module.
"""

from __future__ import annotations

import importlib
import pkgutil

from clawgym.synth.ops.base import OperationGenerator


def registry() -> dict[str, OperationGenerator]:
    """Operation id -> generator, for every module in this package."""
    out: dict[str, OperationGenerator] = {}
    for mod in pkgutil.iter_modules(__path__):
        if mod.name.startswith("_") or mod.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{mod.name}")
        for gen in getattr(module, "GENERATORS", []):
            if gen.id in out:
                raise ValueError(f"operation {gen.id!r} has two generators ({module.__name__})")
            out[gen.id] = gen
    return out
