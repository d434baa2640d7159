"""Sandboxes: one interface, three backends (bwrap, docker, local)."""

from __future__ import annotations

from clawgym.sandbox.base import (
    ExecResult,
    Mount,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
)

BACKENDS = ("bwrap", "docker", "local")


def get_backend(name: str, **kwargs) -> SandboxBackend:
    """A backend by name: 'bwrap', 'docker', 'local', or 'auto' (bwrap if it works, else docker)."""
    if name == "auto":
        from clawgym.sandbox.bwrap import BwrapBackend
        from clawgym.sandbox.docker import DockerBackend

        for cls in (BwrapBackend, DockerBackend):
            backend = cls(**kwargs)
            if backend.check()[0]:
                return backend
        raise SandboxUnavailable(
            "neither bwrap nor docker works here (see `clawgym sandbox check`); "
            "pass --sandbox local to run WITHOUT isolation"
        )
    if name == "bwrap":
        from clawgym.sandbox.bwrap import BwrapBackend

        return BwrapBackend(**kwargs)
    if name == "docker":
        from clawgym.sandbox.docker import DockerBackend

        return DockerBackend(**kwargs)
    if name == "local":
        from clawgym.sandbox.local import LocalBackend

        return LocalBackend(**kwargs)
    raise ValueError(f"unknown sandbox backend {name!r}; choose from auto, {', '.join(BACKENDS)}")


def check_backends() -> dict[str, tuple[bool, str]]:
    """Which backends work on this machine, and why not."""
    out = {}
    for name in BACKENDS:
        try:
            out[name] = get_backend(name).check()
        except Exception as exc:  # a check must never crash the report
            out[name] = (False, f"{exc.__class__.__name__}: {exc}")
    return out


__all__ = [
    "BACKENDS", "ExecResult", "Mount", "Sandbox", "SandboxBackend", "SandboxError", "SandboxLimits", "SandboxUnavailable",
    "check_backends", "get_backend",
]
