"""Running the viewer: in the foreground for `clawgym view`, or in a thread on a free port (tests, notebooks)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

from clawgym.core.errors import ClawgymError
from clawgym.rollout.summary import Price
from clawgym.view.app import create_app


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class ViewServer:
    """The viewer served by uvicorn in a background thread; `url` once started; `stop()` ends it."""

    def __init__(self, paths: list[str], *, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                 prices: dict[str, Price] | None = None, export_dir: Path | None = None, poll_s: float = 0.5):
        import uvicorn

        self.host = host
        self.port = port or free_port(host)
        self.app: Any = create_app(paths, token=token, host=host, prices=prices, export_dir=export_dir,
                                   poll_s=poll_s)
        config = uvicorn.Config(self.app, host=host, port=self.port, log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="clawgym-view", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> ViewServer:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise ClawgymError(f"the viewer did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.server.force_exit = True
        self.thread.join(timeout=10)
        self.app.catalog.close()

    def __enter__(self) -> ViewServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_view(paths: list[str], *, host: str = "127.0.0.1", port: int = 8200, token: str | None = None,
               prices: dict[str, Price] | None = None, export_dir: Path | None = None) -> None:
    """Serve the viewer in the foreground until Ctrl-C."""
    import uvicorn

    app: Any = create_app(paths, token=token, host=host, prices=prices, export_dir=export_dir)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    finally:
        app.catalog.close()
