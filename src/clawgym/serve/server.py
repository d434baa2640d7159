"""Run the embedded OpenAI-compatible server in this process (`clawgym serve`), or start one as a child
process for the duration of a command (:class:`ServerProcess`), as the CLI does when `--model` names a local
model and no `--base-url` is given."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from clawgym.core.errors import ClawgymError
from clawgym.httpguard import DEFAULT_MAX_BODY_BYTES
from clawgym.serve.models import resolve_model_dir


class ServerError(ClawgymError):
    pass


def quiet_openmp() -> None:
    """Make OpenMP threads sleep instead of spin while they wait, unless the user chose otherwise.

    Must run before torch is first imported. On a machine whose cores are shared (sandboxes, the gateway, other
    jobs), spinning threads starve each other: measured here, 0.54 tokens/s with spinning threads against 7.2
    with passive ones, on the same loaded 2 cores. See :func:`default_threads` for what passive waiting costs
    when the cores are idle, and why the server then uses fewer threads."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def default_threads() -> int:
    """The server's torch threads unless told otherwise: ``OMP_NUM_THREADS`` when set, else every core this
    process may run on but one (at least one).

    The spare core is for what shares the machine with the server -- its own HTTP loop, the agents, the
    sandboxes. Decoding a batch is a stream of small operations, so a second thread barely helps it, while
    every operation has to wake the threads that sleep passively (:func:`quiet_openmp`). Measured on 2 cores
    (a VM; bf16; 13 requests of ~850 prompt tokens, 150 new tokens each, over HTTP): 2 passive threads 73 s,
    1 thread 52 s, 2 spinning threads 32 s alone but 308 s beside one busy process (1 thread: 46 s there)."""
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def parse_lora_specs(specs: list[str] | None) -> dict[str, str]:
    """`NAME=PATH` strings (`--lora`, like vLLM's `--lora-modules`) as {name: path}; ValueError on a bad one."""
    out: dict[str, str] = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise ValueError(f"--lora {spec!r}: expected NAME=PATH")
        if name in out:
            raise ValueError(f"--lora: the name {name!r} is given twice")
        out[name] = path
    return out


def serve(model: str, host: str = "127.0.0.1", port: int = 8000, max_batch: int = 16,
          served_name: str | None = None, log_level: str = "warning", token_log: Path | None = None,
          precision: str = "fp32", threads: int | None = None, max_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES,
          loras: dict[str, str] | None = None) -> None:
    """Serve `model` until interrupted. `max_body_bytes`: larger request bodies are answered 413 (None: no
    limit). `loras`: {name: adapter dir} loaded before the server answers (vLLM's `--lora-modules`); one that
    cannot be loaded is a ServerError."""
    quiet_openmp()
    import uvicorn

    from clawgym.serve.app import create_app
    from clawgym.serve.engine import BatchEngine, EngineError
    from clawgym.serve.lora import AdapterError

    model_dir = resolve_model_dir(model)
    name = served_name or model
    try:
        engine = BatchEngine(model_dir, max_batch=max_batch, precision=precision,
                             threads=threads or default_threads())
    except EngineError as exc:  # e.g. --precision q4 on a CPU or a model it does not fit
        raise ServerError(str(exc)) from None
    try:
        for lora_name, lora_path in (loras or {}).items():
            if lora_name == name:
                raise ServerError(f"--lora {lora_name}: that is the base model's name")
            try:
                engine.load_adapter(lora_name, lora_path)
            except AdapterError as exc:
                raise ServerError(f"--lora {lora_name}={lora_path}: {exc}") from None
        app = create_app(engine, name, token_log=token_log, max_body_bytes=max_body_bytes)
        uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
    finally:
        engine.close()


def exit_with_parent(parent_pid: int, interval: float = 1.0) -> None:
    """Stop this server when `parent_pid` is no longer its parent (killed with SIGKILL, crashed): a server started
    for one command must not outlive it and keep two cores busy. A thread checks the parent pid each second,
    sends this process SIGTERM (uvicorn shuts down cleanly) and exits hard if that did not end it in 10 s."""
    import threading

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
        os._exit(1)

    if os.getppid() != parent_pid:
        raise SystemExit(f"parent process {parent_pid} is already gone")
    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class ServerProcess:
    """`clawgym serve` as a child process on 127.0.0.1; a context manager that waits for it and stops it."""

    def __init__(self, model: str, port: int | None = None, max_batch: int = 16, log_path: Path | None = None,
                 startup_timeout: float = 600.0, token_log: Path | None = None, precision: str = "fp32",
                 threads: int | None = None, max_body_mb: float | None = None, loras: dict[str, str] | None = None):
        """`max_body_mb`: the server's request body limit (default its own, 16 MiB); `loras`: {name: adapter dir}
        served from the start."""
        self.max_body_mb = max_body_mb
        self.loras = dict(loras or {})
        self.token_log = token_log
        self.threads = threads
        self.precision = precision
        self.model = model
        self.port = port or free_port()
        self.max_batch = max_batch
        self.log_path = log_path
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ServerProcess:
        # Prepare the model here first, so a conversion error is reported as such, not as a dead server.
        resolve_model_dir(self.model)
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        cmd = [sys.executable, "-m", "clawgym.serve", "--model", self.model, "--port", str(self.port),
               "--max-batch", str(self.max_batch), "--precision", self.precision,
               "--parent-pid", str(os.getpid())] + (
                   ["--token-log", str(self.token_log)] if self.token_log else []) + (
                   ["--threads", str(self.threads)] if self.threads else []) + (
                   ["--max-body-mb", str(self.max_body_mb)] if self.max_body_mb is not None else [])
        for lora_name, lora_path in self.loras.items():
            cmd += ["--lora", f"{lora_name}={lora_path}"]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={"OMP_WAIT_POLICY": "PASSIVE", **os.environ, "TOKENIZERS_PARALLELISM": "false"})
        if log is not subprocess.DEVNULL:
            log.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                where = f"; see {self.log_path}" if self.log_path else ""
                raise ServerError(f"the model server for {self.model} exited with code {self.proc.returncode}{where}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        raise ServerError(f"the model server for {self.model} did not answer within {self.startup_timeout:.0f} s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
