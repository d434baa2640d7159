"""`clawgym view`: serve the browser view of runs, pools, eval reports and RL outputs (see clawgym.view)."""

from __future__ import annotations

from pathlib import Path

import typer

from clawgym.cli.common import err, fail
from clawgym.core.errors import ClawgymError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def view_cmd(
    paths: list[Path] = typer.Argument(..., metavar="RUN_DIR|POOL...", help="Run directories, pools, eval runs, "
                                       "train rl outputs, or a directory holding several."),
    host: str = typer.Option("127.0.0.1", help="Address to bind; anything but loopback requires a token."),
    port: int = typer.Option(8200, min=1, max=65535),
    token: str | None = typer.Option(None, envvar="CLAWGYM_VIEW_TOKEN", help="Token the browser must present "
                                     "(generated and printed when binding beyond loopback without one)."),
    prices: Path | None = typer.Option(None, "--prices", help="JSON {MODEL: {input: USD, output: USD}} per million "
                                       "tokens: shows each run's cost."),
    export_dir: Path = typer.Option(Path("exports"), "--export-dir", help="Where exports made from the page are "
                                    "written."),
) -> None:
    """Open runs and pools in the browser: trajectories, steps, verdicts, curation, batches, live updates."""
    from clawgym.gateway.app import new_token
    from clawgym.rollout.summary import load_prices
    from clawgym.view import serve_view
    from clawgym.view.sources import Catalog

    try:
        price_table = load_prices(prices) if prices is not None else None
        probe = Catalog()
        for p in paths:
            probe.add(p)
        probe.close()
    except ClawgymError as exc:
        fail(str(exc))
    if host not in LOOPBACK and not token:
        token = new_token()
    shown = host if ":" not in host else f"[{host}]"
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    err.print(f"clawgym view: open {url}  (Ctrl-C to stop)", highlight=False, soft_wrap=True)
    serve_view([str(p) for p in paths], host=host, port=port, token=token, prices=price_table,
               export_dir=export_dir)
