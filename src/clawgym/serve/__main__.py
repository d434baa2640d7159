"""`python -m clawgym.serve --model M --port P`: what :class:`ServerProcess` starts."""

import argparse
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: see clawgym.serve.server.quiet_openmp

from clawgym.core.precision import SERVER_PRECISIONS  # noqa: E402
from clawgym.serve.server import ServerError, exit_with_parent, parse_lora_specs, serve  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m clawgym.serve")
    p.add_argument("--model", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-batch", type=int, default=16)
    p.add_argument("--served-name", default=None)
    p.add_argument("--precision", choices=list(SERVER_PRECISIONS), default="fp32")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: OMP_NUM_THREADS, else all cores but one; see default_threads).")
    p.add_argument("--token-log", default=None, help="Append each request's prompt and generated ids here (JSONL).")
    p.add_argument("--parent-pid", type=int, default=None,
                   help="Exit when this process (the one that started the server) is gone.")
    p.add_argument("--max-body-mb", type=float, default=16.0,
                   help="Largest request body accepted, in MiB; larger ones are answered 413.")
    p.add_argument("--lora", action="append", default=[], metavar="NAME=PATH",
                   help="Serve the LoRA adapter at PATH as model NAME from the start (repeatable).")
    a = p.parse_args()
    if a.max_body_mb <= 0:
        p.error("--max-body-mb must be positive")
    try:
        loras = parse_lora_specs(a.lora)
    except ValueError as exc:
        p.error(str(exc))
    if a.parent_pid:
        exit_with_parent(a.parent_pid)
    try:
        serve(a.model, a.host, a.port, a.max_batch, a.served_name, token_log=a.token_log, precision=a.precision,
              threads=a.threads, max_body_bytes=int(a.max_body_mb * 1024 * 1024), loras=loras)
    except ServerError as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
