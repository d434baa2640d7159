"""`clawgym view`: the browser view of runs, pools, eval reports and RL training -- trajectories, steps as state,
action and observation, verdicts, curation, training batches, live while a rollout or gateway writes.

`create_app` (app.py) is the ASGI app; `ViewServer` / `serve_view` (server.py) run it; `Catalog` (sources.py)
sorts the given paths into runs, pools and RL outputs; `RunLog` (runlog.py) indexes a trajectories.jsonl
incrementally; `PoolView` (poolview.py) queries a pool; the page itself is plain HTML/CSS/JS in `static/`.
"""

from clawgym.view.app import create_app
from clawgym.view.server import ViewServer, free_port, serve_view
from clawgym.view.sources import Catalog, ViewSourceError

__all__ = ["Catalog", "ViewServer", "ViewSourceError", "create_app", "free_port", "serve_view"]
