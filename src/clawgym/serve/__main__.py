"""`python -m clawgym.serve --model M --port P`: what :class:`ServerProcess` starts."""

import argparse
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: see clawgym.serve.server.quiet_openmp

from clawgym.serve.server import exit_with_parent, serve  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m clawgym.serve")
    p.add_argument("--model", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-batch", type=int, default=16)
    p.add_argument("--served-name", default=None)
    p.add_argument("--precision", choices=["fp32", "bf16", "auto"], default="fp32")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: OMP_NUM_THREADS, else all cores but one; see default_threads).")
    p.add_argument("--token-log", default=None, help="Append each request's prompt and generated ids here (JSONL).")
    p.add_argument("--parent-pid", type=int, default=None,
                   help="Exit when this process (the one that started the server) is gone.")
    a = p.parse_args()
    if a.parent_pid:
        exit_with_parent(a.parent_pid)
    serve(a.model, a.host, a.port, a.max_batch, a.served_name, token_log=a.token_log, precision=a.precision,
          threads=a.threads)


if __name__ == "__main__":
    main()
