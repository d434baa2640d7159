"""`clawgym sandbox build|check`: the sandbox image, and which backends work here."""

from __future__ import annotations

import typer

from clawgym.cli.common import err, out

sandbox_app = typer.Typer(no_args_is_help=True, help="Build the sandbox image and check the backends.")


@sandbox_app.command("build")
def sandbox_build(
    force: bool = typer.Option(False, help="Rebuild even if the image exists."),
    docker: bool = typer.Option(True, help="Also import the root filesystem into Docker (when an engine runs)."),
    mirror: str | None = typer.Option(None, help="Debian mirror for debootstrap."),
) -> None:
    """Build the sandbox root filesystem (debootstrap) and import it as a Docker image."""
    from clawgym.sandbox.image import build_rootfs, import_docker_image

    rootfs = build_rootfs(mirror=mirror, force=force, log=lambda m: err.print(m, highlight=False))
    if docker:
        from clawgym.sandbox.base import SandboxUnavailable
        from clawgym.sandbox.docker import DockerBackend

        try:
            client = DockerBackend().client
        except SandboxUnavailable as exc:
            err.print(f"[yellow]skipping the Docker image:[/] {exc}", highlight=False)
            return
        import_docker_image(client, rootfs, force=force, log=lambda m: err.print(m, highlight=False))


@sandbox_app.command("check")
def sandbox_check() -> None:
    """Report which sandbox backends work here (every registered one, third-party ones included), and why not."""
    from rich.table import Table

    from clawgym.sandbox import check_backends, is_isolated
    from clawgym.sandbox.cgroups import cgroup_mode
    from clawgym.sandbox.image import find_rootfs

    table = Table(title="sandbox backends")
    for col in ("backend", "works", "isolated", "details"):
        table.add_column(col)
    results = check_backends()
    isolated_ok = False
    for name, (ok, why) in results.items():
        try:
            isolated = is_isolated(name)
        except Exception:  # noqa: BLE001 - a plugin that does not load is reported by its check
            isolated = False
        isolated_ok = isolated_ok or (ok and isolated)
        table.add_row(name, "[green]yes[/]" if ok else "[red]no[/]", "yes" if isolated else "NO", why)
    out.print(table)
    out.print(f"image root filesystem: {find_rootfs() or 'not built (clawgym sandbox build)'}", highlight=False)
    out.print(f"cgroup limits: {cgroup_mode() or 'unavailable (rlimits only)'}", highlight=False)
    if not isolated_ok:
        raise typer.Exit(1)
