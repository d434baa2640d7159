"""The persona's world: folder and file names taken from the files a persona says they work with.

A persona lists globs such as ``rota/2024-*.xlsx``, ``inbox/*.eml`` or ``clients/*/ledger.xlsx``; their literal
parts are the names of that person's world (``rota``, ``inbox``, ``clients``; ``vaccine_stock``, ``cpd_hours``).
Generators draw workspace folders and file stems from here, mixed with their own operation-specific names, so
that a nurse's task lives in ``rota/`` and a farmer's in ``herd/`` instead of every task in ``data/``.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache

from clawgym.synth.personas import Persona

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@lru_cache(maxsize=1024)
def _names(files: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    folders: list[str] = []
    stems: list[str] = []
    for f in files:
        parts = f.split("/")
        for part in parts[:-1]:
            if "*" not in part and _SAFE.match(part) and part not in folders:
                folders.append(part)
        stem = parts[-1].rsplit(".", 1)[0] if "." in parts[-1] else parts[-1]
        if stem and "*" not in stem and _SAFE.match(stem) and stem not in stems:
            stems.append(stem)
    return tuple(folders), tuple(stems)


def _pick(options: list[str], u: float) -> str:
    """The option at uniform draw `u` (one random value whatever the length; "" for none)."""
    return options[min(int(u * len(options)), len(options) - 1)] if options else ""


def folders(persona: Persona) -> list[str]:
    """The literal folder names in the persona's file globs, in their order (maybe none)."""
    return list(_names(tuple(persona.files))[0])


def stems(persona: Persona) -> list[str]:
    """The literal file stems (names without extension) in the persona's file globs (maybe none)."""
    return list(_names(tuple(persona.files))[1])


def folder(persona: Persona, rng: random.Random, fallback: list[str] | tuple[str, ...], p_world: float = 0.5) -> str:
    """A folder name: with probability `p_world` one of the persona's own, else (or when they have none) one of
    `fallback`. Always draws the same number of random values, so a seed's later choices do not depend on
    whether the persona has folders."""
    own = folders(persona)
    use_own = rng.random() < p_world
    pick_own = _pick(own, rng.random())
    pick_fallback = _pick(list(fallback), rng.random())
    return pick_own if use_own and own else pick_fallback


def stem(persona: Persona, rng: random.Random, fallback: list[str] | tuple[str, ...], p_world: float = 0.3) -> str:
    """A file stem: with probability `p_world` one of the persona's own, else one of `fallback`; draws like
    :func:`folder`."""
    own = stems(persona)
    use_own = rng.random() < p_world
    pick_own = _pick(own, rng.random())
    pick_fallback = _pick(list(fallback), rng.random())
    return pick_own if use_own and own else pick_fallback
