"""Sandbox backends by name: the built-in ones, those registered with :func:`register_backend`, and those
other distributions declare in the entry point group ``clawgym.sandbox_backends``.

A third-party backend needs no change to clawgym. Either decorate its class (the module must then be
imported before the name is asked for)::

    from clawgym.sandbox import SandboxBackend, register_backend

    @register_backend("k8s")
    class KubernetesBackend(SandboxBackend):
        ...

or declare it in the distribution's metadata, which is found without importing anything first (pyproject.toml)::

    [project.entry-points."clawgym.sandbox_backends"]
    k8s = "clawgym_k8s.backend:KubernetesBackend"

An entry point names a :class:`~clawgym.sandbox.base.SandboxBackend` subclass (or any callable that takes the
backend's keyword arguments and returns one); it is loaded only when its name is asked for, or when all
backends are listed (`clawgym sandbox check`, "auto"). What a backend must implement is documented in
:mod:`clawgym.sandbox.base` and docs/sandbox-protocol.md.

"auto" tries the backends that declare an `auto_priority` (lowest first) and that isolate (`isolated`), and
takes the first whose `check()` passes: bwrap (10), then docker (20). The unisolated local backend is never
chosen automatically.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from importlib import metadata
from typing import Any, TypeVar

from clawgym.sandbox.base import SandboxBackend, SandboxUnavailable

ENTRY_POINT_GROUP = "clawgym.sandbox_backends"
AUTO = "auto"
# The built-in backends: name -> the module whose @register_backend registers it (imported on first use, so
# that asking for bwrap never imports the Docker SDK).
BUILTIN: dict[str, str] = {
    "bwrap": "clawgym.sandbox.bwrap",
    "docker": "clawgym.sandbox.docker",
    "local": "clawgym.sandbox.local",
}

BackendFactory = Callable[..., SandboxBackend]
_B = TypeVar("_B", bound=type)

_registered: dict[str, BackendFactory] = {}
_lock = threading.Lock()


class UnknownBackend(SandboxUnavailable, ValueError):
    """No backend is registered under the name asked for (a usage error: also a ValueError)."""


def register_backend(name: str) -> Callable[[_B], _B]:
    """Class decorator: register a :class:`SandboxBackend` subclass under `name` (which also becomes its
    `name`). Registering a name again replaces the earlier backend (a test, or a plugin overriding one)."""
    if not name or name == AUTO or not name.replace("-", "_").isidentifier():
        raise ValueError(f"bad sandbox backend name {name!r}: a word of letters, digits, - and _ (not 'auto')")

    def deco(cls: _B) -> _B:
        if not (isinstance(cls, type) and issubclass(cls, SandboxBackend)):
            raise TypeError(f"@register_backend({name!r}) decorates a SandboxBackend subclass, not {cls!r}")
        cls.name = name
        with _lock:
            _registered[name] = cls
        return cls

    return deco


def unregister_backend(name: str) -> None:
    """Forget a registered backend (tests; a built-in one comes back on next use)."""
    with _lock:
        _registered.pop(name, None)


def _entry_points() -> dict[str, metadata.EntryPoint]:
    try:
        eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception:  # noqa: BLE001 - a broken distribution on the path must not break the builtin backends
        return {}
    out: dict[str, metadata.EntryPoint] = {}
    for ep in eps:
        out.setdefault(ep.name, ep)  # the first on sys.path wins, as for imports
    return out


def _load(name: str) -> BackendFactory | None:
    """The factory registered under `name`, importing the built-in module or loading the entry point that
    provides it; None when nothing does. (Imports run outside the lock: a module being imported by another
    thread registers itself through it.)"""
    with _lock:
        if name in _registered:
            return _registered[name]
    if name in BUILTIN:
        importlib.import_module(BUILTIN[name])
        with _lock:
            if name in _registered:
                return _registered[name]
    ep = _entry_points().get(name)
    if ep is None:
        return None
    obj = ep.load()  # may itself run @register_backend(name)
    with _lock:
        if name not in _registered:
            if not callable(obj):
                raise SandboxUnavailable(f"entry point {ENTRY_POINT_GROUP}:{name} = {ep.value} is not callable")
            _registered[name] = obj
        return _registered[name]


def backend_names() -> list[str]:
    """Every backend name that can be asked for (built-in, registered, declared by an entry point), sorted:
    built-in ones first, in their order."""
    with _lock:
        names = dict.fromkeys([*BUILTIN, *sorted(_registered), *sorted(_entry_points())])
    return list(names)


def backend_class(name: str) -> BackendFactory:
    """The class (or factory) registered under `name`; UnknownBackend when there is none."""
    factory = _load(name)
    if factory is None:
        raise UnknownBackend(
            f"unknown sandbox backend {name!r}; registered: {', '.join([AUTO, *backend_names()])} "
            f"(third-party backends register with @register_backend or the {ENTRY_POINT_GROUP!r} entry point group)"
        )
    return factory


def is_isolated(name: str) -> bool:
    """Whether the backend `name` isolates commands from the host (its class attribute `isolated`)."""
    return bool(getattr(backend_class(name), "isolated", True))


def _auto_candidates() -> list[tuple[int, str]]:
    out = []
    for name in backend_names():
        try:
            factory = backend_class(name)
        except Exception:  # noqa: BLE001 - a plugin that does not load is simply not a candidate
            continue
        prio = getattr(factory, "auto_priority", None)
        if prio is not None and getattr(factory, "isolated", True):
            out.append((prio, name))
    return sorted(out)


def get_backend(name: str, **kwargs: Any) -> SandboxBackend:
    """A backend instance by registered name, or 'auto': the first isolated backend (by `auto_priority`) whose
    check passes. `kwargs` go to the backend's constructor (with 'auto', to each one tried)."""
    if name == AUTO:
        tried = []
        for _, cand in _auto_candidates():
            backend = get_backend(cand, **kwargs)
            ok, why = backend.check()
            if ok:
                return backend
            tried.append(f"{cand}: {why}")
        raise SandboxUnavailable(
            "no isolated sandbox backend works here (" + ("; ".join(tried) or "none registered") + "; see "
            "`clawgym sandbox check`); pass --sandbox local to run WITHOUT isolation"
        )
    backend = backend_class(name)(**kwargs)
    if not isinstance(backend, SandboxBackend):
        raise SandboxUnavailable(f"sandbox backend {name!r} made a {type(backend).__name__}, not a SandboxBackend")
    if backend.name != name:  # a factory, or a class registered under a second name: it is what it was asked as
        backend.name = name
    return backend


def check_backends() -> dict[str, tuple[bool, str]]:
    """Which backends work on this machine, and why not: every registered one (a plugin that fails to load
    is reported as not working, with the reason)."""
    out = {}
    for name in backend_names():
        try:
            out[name] = get_backend(name).check()
        except Exception as exc:  # noqa: BLE001 - a check must never crash the report
            out[name] = (False, f"{exc.__class__.__name__}: {exc}")
    return out
