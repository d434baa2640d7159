"""Sandboxes: one protocol (:mod:`clawgym.sandbox.base`, docs/sandbox-protocol.md), backends found by name
(:mod:`clawgym.sandbox.registry`): the built-in bwrap, docker and local (no isolation), and any a third party
registers."""

from __future__ import annotations

from clawgym.sandbox.base import (
    DirEntry,
    ExecResult,
    FileStat,
    Mount,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxLimits,
    SandboxPathError,
    SandboxUnavailable,
)
from clawgym.sandbox.registry import (
    BUILTIN,
    ENTRY_POINT_GROUP,
    UnknownBackend,
    backend_names,
    check_backends,
    get_backend,
    is_isolated,
    register_backend,
)

BACKENDS = tuple(BUILTIN)  # the built-in backends; backend_names() lists every registered one

__all__ = [
    "BACKENDS", "ENTRY_POINT_GROUP", "DirEntry", "ExecResult", "FileStat", "Mount", "Sandbox", "SandboxBackend",
    "SandboxError", "SandboxLimits", "SandboxPathError", "SandboxUnavailable", "UnknownBackend", "backend_names",
    "check_backends", "get_backend", "is_isolated", "register_backend",
]
