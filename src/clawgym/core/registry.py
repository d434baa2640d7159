"""One registry helper for every kind of plug-in: sandbox backends, executors, agent kinds, synthesis operations,
check-library extensions, RL advantages and losses.

A plug-in is found by name in three places, in this order:

1. registered in this process (``@registry.register("name")`` on a class or function, or ``registry.add``);
2. built in: a lazy ``"module:attribute"`` string (or a bare ``"module"`` whose import registers the name), so
   that asking for one built-in never imports the others (the Docker SDK, Ray, torch);
3. declared by another distribution in the registry's entry point group, found without importing anything until
   its name is asked for (pyproject.toml of the third party)::

       [project.entry-points."clawgym.agents"]
       my-agent = "my_package.agent:MyAgentKind"

Nothing in clawgym is edited for a third-party plug-in. A name registered again replaces the earlier one (a test,
or a plug-in overriding a built-in on purpose).
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Iterable
from importlib import metadata
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class UnknownPlugin(ValueError):
    """No plug-in of the kind is registered, built in or declared under the name asked for (a usage error)."""


def load_object(spec: str) -> Any:
    """The object a ``"module:attribute"`` string names (``"module"`` alone: the module)."""
    module, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


class Registry(Generic[T]):
    """Plug-ins of one kind by name (see the module docstring). `kind` names it in errors ("agent kind");
    `group` is its entry point group; `builtin` maps names to lazy ``"module:attribute"`` strings; `check`, if
    given, is called as ``check(name, obj)`` on everything registered or loaded and raises TypeError when the
    object is not of the kind."""

    def __init__(self, kind: str, group: str, builtin: dict[str, str] | None = None,
                 check: Callable[[str, Any], None] | None = None) -> None:
        self.kind = kind
        self.group = group
        self.builtin = dict(builtin or {})
        self._check = check
        self._registered: dict[str, T] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------------------------------ registering

    def add(self, name: str, obj: T) -> T:
        """Register `obj` under `name` (replacing what was there)."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"bad {self.kind} name {name!r}: letters, digits, '_', '-' and '.', not first")
        if self._check is not None:
            self._check(name, obj)
        with self._lock:
            self._registered[name] = obj
        return obj

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: register the decorated class or function under `name`."""

        def deco(obj: T) -> T:
            return self.add(name, obj)

        return deco

    def remove(self, name: str) -> None:
        """Forget a registered plug-in (tests; a built-in one comes back on next use)."""
        with self._lock:
            self._registered.pop(name, None)

    # ------------------------------------------------------------------------------------------ finding

    def _entry_points(self) -> dict[str, metadata.EntryPoint]:
        try:
            eps = metadata.entry_points(group=self.group)
        except Exception:  # noqa: BLE001 (a broken distribution on sys.path must not hide the built-in plug-ins)
            return {}
        return {ep.name: ep for ep in eps}

    def names(self) -> list[str]:
        """Every name that can be asked for, sorted; nothing is imported to list them."""
        with self._lock:
            known = set(self._registered) | set(self.builtin)
        return sorted(known | set(self._entry_points()))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def get(self, name: str) -> T:
        """The plug-in registered, built in or declared under `name`; UnknownPlugin naming the known ones."""
        with self._lock:
            if name in self._registered:
                return self._registered[name]
            spec = self.builtin.get(name)
        if spec is not None:
            obj = load_object(spec)
            with self._lock:  # a bare module registers the name when imported
                if name in self._registered:
                    return self._registered[name]
            if ":" not in spec:
                raise UnknownPlugin(f"the module {spec} registers no {self.kind} {name!r}")
            return self.add(name, obj)
        ep = self._entry_points().get(name)
        if ep is None:
            raise UnknownPlugin(f"unknown {self.kind} {name!r}; registered: {', '.join(self.names()) or 'none'}")
        obj = ep.load()
        with self._lock:
            if name in self._registered:  # the module registered it with the decorator as it was imported
                return self._registered[name]
        return self.add(name, obj)

    def items(self, names: Iterable[str] | None = None) -> list[tuple[str, T]]:
        """(name, plug-in) for `names` (default: every name), loading each."""
        return [(n, self.get(n)) for n in (self.names() if names is None else names)]
