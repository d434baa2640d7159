#!/usr/bin/env python3
"""Sandbox latency benchmark: start-up, per-exec cost and concurrency of the bwrap and Docker backends.

Prints ONE JSON object on stdout (progress goes to stderr). For each backend it measures, in the same run:

* ``start_to_first_exec_ms``: ``backend.start(small workspace)`` until the first ``exec("true")`` returns;
  ``stop_ms``: ``sandbox.stop()``; ``start_call_ms``: ``backend.start()`` alone (where the time goes).
* ``floor_ms``: the raw cost of the underlying tool with nothing of ours around it -- a bare
  ``bwrap --unshare-all ... true`` or ``docker run --rm IMAGE true`` (through the SDK).
* ``per_exec_ms``: ``exec("true")`` in one live sandbox, against the baseline (a fresh bwrap per call, or a
  ``docker exec`` = ``container.exec_run`` into a running container of the same image).
* ``concurrency``: many sandboxes started at once, each running three commands and checking their output.

Targets are reported (``targets`` / ``meets_targets``), never asserted: the exit code is 0 even when one is
missed, and non-zero only when the benchmark itself fails (an error, or a concurrency run with failures).

    python benchmarks/perf/sandbox.py                       # full run, both backends
    python benchmarks/perf/sandbox.py --quick               # smoke run (also: CLAWGYM_BENCH_QUICK=1)
    python benchmarks/perf/sandbox.py --backends bwrap --n 100 --out /tmp/sandbox.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from clawgym.core.records import WorkspaceFile, WorkspaceSpec
from clawgym.sandbox import SandboxLimits, SandboxUnavailable, get_backend

TARGETS = {
    "bwrap_start_p50_ms": 15,
    "docker_start_p50_ms": 400,
    "bwrap_exec_p50_ms": 5,
    "docker_exec_vs_docker_exec": "well under",
}
# "well under" a `docker exec`, made concrete: our p50 below a quarter of exec_run's p50
DOCKER_EXEC_RATIO = 0.25

BENCH_LABEL = "clawgym.bench"  # on the benchmark's own bare containers (floor, exec_run baseline)

DEFAULT_N = {"bwrap": 50, "docker": 30}
DEFAULT_CONCURRENCY = {"bwrap": 64, "docker": 16}
QUICK_N = {"bwrap": 8, "docker": 4}
QUICK_CONCURRENCY = {"bwrap": 8, "docker": 4}


def log(msg: str) -> None:
    print(f"[bench sandbox {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ stats


def _pct(sorted_vals: list[float], q: float) -> float:
    """Percentile with linear interpolation between closest ranks (numpy's default)."""
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = (len(sorted_vals) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def summarize(samples_s: list[float]) -> dict:
    """Seconds in, milliseconds out: n, p50, p99, mean, min, max."""
    if not samples_s:
        return {"n": 0}
    ms = sorted(s * 1000.0 for s in samples_s)
    return {
        "n": len(ms),
        "p50": round(_pct(ms, 0.50), 3),
        "p99": round(_pct(ms, 0.99), 3),
        "mean": round(statistics.fmean(ms), 3),
        "min": round(ms[0], 3),
        "max": round(ms[-1], 3),
    }


def _ratio(a: dict, b: dict) -> float | None:
    """p50 of a over p50 of b: steadier than either figure alone when the host is loaded."""
    return round(a["p50"] / b["p50"], 3) if a.get("p50") and b.get("p50") else None


# ------------------------------------------------------------------------------------ cleanup registry


class Live:
    """Everything this process started (sandboxes, containers), so it is all stopped even on error."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[int, tuple[str, Callable[[], None]]] = {}

    def add(self, obj: object, what: str, stop: Callable[[], None]) -> None:
        with self._lock:
            self._items[id(obj)] = (what, stop)

    def discard(self, obj: object) -> None:
        with self._lock:
            self._items.pop(id(obj), None)

    def stop_all(self) -> int:
        with self._lock:
            items = list(self._items.values())
            self._items.clear()
        for what, stop in items:
            try:
                stop()
            except Exception as exc:  # keep cleaning up the rest
                log(f"cleanup of {what} failed: {exc!r}")
        return len(items)


LIVE = Live()


def start_sandbox(backend, spec: WorkspaceSpec, limits: SandboxLimits):
    sb = backend.start(spec, limits=limits)
    LIVE.add(sb, f"{backend.name} sandbox", sb.stop)
    return sb


def stop_sandbox(sb) -> None:
    try:
        sb.stop()
    finally:
        LIVE.discard(sb)


# --------------------------------------------------------------------------------------------- workload


def small_workspace() -> WorkspaceSpec:
    return WorkspaceSpec(
        files=[
            WorkspaceFile(path="README.md", content="# notes\n\nA small workspace for the sandbox benchmark.\n"),
            WorkspaceFile(path="src/hello.py", content="print('hello')\n"),
            WorkspaceFile(path="data/items.csv", content="id,name\n1,apple\n2,pear\n"),
        ],
        directories=["out"],
    )


def check_ok(res, what: str, expect_stdout: str | None = None, contains: str | None = None) -> None:
    if res.exit_code != 0 or res.timed_out:
        raise RuntimeError(f"{what}: exit {res.exit_code} timed_out={res.timed_out} stderr={res.stderr[-200:]!r}")
    if expect_stdout is not None and res.stdout.strip() != expect_stdout:
        raise RuntimeError(f"{what}: stdout {res.stdout[-200:]!r} != {expect_stdout!r}")
    if contains is not None and contains not in res.stdout.split():
        raise RuntimeError(f"{what}: {contains!r} not in stdout {res.stdout[-200:]!r}")


# -------------------------------------------------------------------------------------------- measures


def start_figures(st: dict, floor_what: str) -> dict:
    """The start-up part of a backend's report, from measure_start's result."""
    return {
        "start_to_first_exec_ms": st["start_to_first_exec_ms"], "stop_ms": st["stop_ms"],
        "start_call_ms": st["start_call_ms"],
        "start_vs_floor_p50": _ratio(st["start_to_first_exec_ms"], st["floor_ms"]),
        "floor": {"what": floor_what, "ms": st["floor_ms"]},
    }


def measure_start(backend, spec, limits, n: int, warmup: int, floor_once: Callable[[], None]) -> dict:
    """start -> first exec("true"), then stop; interleaved with the raw floor so both see the same load."""
    start_to_exec, start_call, stop_t, floor_t = [], [], [], []
    for i in range(warmup + n):
        timed = i >= warmup
        t0 = time.perf_counter()
        sb = start_sandbox(backend, spec, limits)
        t1 = time.perf_counter()
        try:
            res = sb.exec("true")
            t2 = time.perf_counter()
            check_ok(res, "first exec")
        finally:
            t3 = time.perf_counter()
            stop_sandbox(sb)
            t4 = time.perf_counter()
        f0 = time.perf_counter()
        floor_once()
        f1 = time.perf_counter()
        if timed:
            start_to_exec.append(t2 - t0)
            start_call.append(t1 - t0)
            stop_t.append(t4 - t3)
            floor_t.append(f1 - f0)
    return {
        "start_to_first_exec_ms": summarize(start_to_exec),
        "start_call_ms": summarize(start_call),
        "stop_ms": summarize(stop_t),
        "floor_ms": summarize(floor_t),
    }


def measure_exec(backend, spec, limits, n: int, warmup: int) -> dict:
    sb = start_sandbox(backend, spec, limits)
    try:
        times = []
        for i in range(warmup + n):
            t0 = time.perf_counter()
            res = sb.exec("true")
            t1 = time.perf_counter()
            check_ok(res, "exec true")
            if i >= warmup:
                times.append(t1 - t0)
        return summarize(times)
    finally:
        stop_sandbox(sb)


def measure_concurrency(backend, spec, limits, count: int) -> dict:
    def one(i: int) -> float:
        t0 = time.perf_counter()
        sb = start_sandbox(backend, spec, limits)
        try:
            check_ok(sb.exec(f"echo {i}"), f"sandbox {i}: echo", expect_stdout=str(i))
            check_ok(sb.exec("python3 -c 'print(1+1)'"), f"sandbox {i}: python3", expect_stdout="2")
            check_ok(sb.exec("ls"), f"sandbox {i}: ls", contains="README.md")
        finally:
            stop_sandbox(sb)
        return time.perf_counter() - t0

    totals: list[float] = []
    errors: list[str] = []
    w0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(one, i) for i in range(count)]
        for fut in futures:
            try:
                totals.append(fut.result())
            except Exception as exc:
                errors.append(f"{exc.__class__.__name__}: {exc}"[:300])
    wall = time.perf_counter() - w0
    per = summarize(totals)
    return {
        "count": count,
        "failures": len(errors),
        "errors": errors[:5],
        "wall_ms": round(wall * 1000.0, 3),
        "per_sandbox_total_ms": {k: per.get(k) for k in ("n", "p50", "p99", "mean", "max")},
    }


# ---------------------------------------------------------------------------------------------- bwrap


def bench_bwrap(opts, limits: SandboxLimits) -> dict:
    from clawgym.sandbox.bwrap import _root_args

    backend = get_backend("bwrap")
    ok, reason = backend.check()
    if not ok:
        return {"available": False, "reason": reason}
    spec = small_workspace()
    floor_argv = [
        "bwrap", "--unshare-all", "--die-with-parent", *_root_args(backend.rootfs),
        "--proc", "/proc", "--dev", "/dev", "true",
    ]

    def floor_once() -> None:
        proc = subprocess.run(floor_argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
        if proc.returncode != 0:
            raise RuntimeError(f"bare bwrap failed: {proc.stderr.decode(errors='replace')[-300:]}")

    out: dict = {"available": True, "root": reason}
    n = opts.n_for["bwrap"]
    log(f"bwrap: start -> first exec, {n} runs (+{opts.warmup} warm-up), interleaved with bare bwrap")
    st = measure_start(backend, spec, limits, n, opts.warmup, floor_once)
    out.update(start_figures(st, "bwrap --unshare-all --die-with-parent <same ro root binds> --proc /proc "
                                 "--dev /dev true (subprocess.run)"))
    log(f"bwrap: exec('true') x{opts.exec_n} in one sandbox")
    ours = measure_exec(backend, spec, limits, opts.exec_n, warmup=10)
    out["per_exec_ms"] = {
        "ours": ours,
        "baseline": {"what": "a fresh bare bwrap per call (the floor above)", "ms": st["floor_ms"]},
        "ratio_p50": _ratio(ours, st["floor_ms"]),
    }
    conc = opts.conc_for["bwrap"]
    if conc > 0:
        log(f"bwrap: {conc} sandboxes at once, 3 execs each")
        out["concurrency"] = measure_concurrency(backend, spec, limits, conc)
    backend.close()
    return out


# --------------------------------------------------------------------------------------------- docker


def bench_docker(opts, limits: SandboxLimits) -> dict:
    try:
        backend = get_backend("docker")
        ok, reason = backend.check()
    except (SandboxUnavailable, ImportError) as exc:
        return {"available": False, "reason": str(exc)}
    if not ok:
        return {"available": False, "reason": reason}
    client = backend.client
    image = backend.image
    spec = small_workspace()

    bench_label = {BENCH_LABEL: str(os.getpid())}

    def sweep_bench_containers() -> None:
        # containers of this process that nothing else will remove: a `docker run --rm` interrupted between
        # create and remove, or a sandbox whose start() was interrupted before it could clean up
        from clawgym.sandbox.docker import OWNER_LABEL, _owner

        for label in (f"{BENCH_LABEL}={os.getpid()}", f"{OWNER_LABEL}={_owner()}"):
            # the low-level listing: `containers.list` inspects each one and races with removals in flight
            for c in client.api.containers(all=True, filters={"label": label}):
                try:
                    client.api.remove_container(c["Id"], force=True)
                except Exception:  # noqa: S110 (removed meanwhile by its --rm or its sandbox: nothing is left to do)
                    pass

    LIVE.add(sweep_bench_containers, "docker benchmark containers", sweep_bench_containers)

    def floor_once() -> None:
        client.containers.run(image, ["true"], remove=True, network_mode="none", labels=bench_label)

    out: dict = {"available": True, "engine": reason}
    n = opts.n_for["docker"]
    log(f"docker: start -> first exec, {n} runs (+{opts.warmup} warm-up), interleaved with `docker run --rm`")
    st = measure_start(backend, spec, limits, n, opts.warmup, floor_once)
    out.update(start_figures(st, "client.containers.run(image, ['true'], remove=True, network_mode='none') "
                                 "(= docker run --rm IMAGE true)"))
    log(f"docker: exec('true') x{opts.exec_n} in one sandbox")
    ours = measure_exec(backend, spec, limits, opts.exec_n, warmup=10)

    log(f"docker: container.exec_run(['true']) x{opts.exec_n} into a running container")
    container = client.containers.run(
        image, ["sleep", "infinity"], detach=True, network_mode="none", init=True, labels=bench_label,
    )
    LIVE.add(container, "docker baseline container", lambda: container.remove(force=True))
    try:
        times = []
        for i in range(10 + opts.exec_n):
            t0 = time.perf_counter()
            code, _ = container.exec_run(["true"])
            t1 = time.perf_counter()
            if code != 0:
                raise RuntimeError(f"exec_run true exited {code}")
            if i >= 10:
                times.append(t1 - t0)
        baseline = summarize(times)
    finally:
        try:
            container.remove(force=True)
        finally:
            LIVE.discard(container)
    out["per_exec_ms"] = {
        "ours": ours,
        "baseline": {"what": "container.exec_run(['true']) into a running container (= docker exec)",
                     "ms": baseline},
        "ratio_p50": _ratio(ours, baseline),
    }
    conc = opts.conc_for["docker"]
    if conc > 0:
        log(f"docker: {conc} sandboxes at once, 3 execs each")
        out["concurrency"] = measure_concurrency(backend, spec, limits, conc)
    sweep_bench_containers()
    LIVE.discard(sweep_bench_containers)
    backend.close()
    return out


# ------------------------------------------------------------------------------------------ environment


def _run_text(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return (proc.stdout or proc.stderr).strip() or None


def environment() -> dict:
    from clawgym.sandbox.cgroups import cgroup_mode
    from clawgym.sandbox.image import docker_tag, find_rootfs

    env: dict = {
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "bwrap_version": _run_text(["bwrap", "--version"]) if shutil.which("bwrap") else None,
        "cgroup_mode": cgroup_mode(),
        "cgroup_limits_active": cgroup_mode() is not None,
        "rootfs": str(find_rootfs()) if find_rootfs() else None,
        "image_tag": docker_tag(),
    }
    try:
        with open("/proc/meminfo") as fh:
            env["mem_total_mb"] = int(fh.readline().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import docker

        env["docker_sdk_version"] = docker.__version__
        client = docker.from_env(timeout=10)
        try:
            v = client.version()
            env["docker_version"] = v.get("Version")
            env["docker_api_version"] = v.get("ApiVersion")
            env["docker_storage_driver"] = client.info().get("Driver")
        finally:
            client.close()
    except Exception as exc:
        env["docker_version"] = None
        env["docker_error"] = f"{exc.__class__.__name__}: {exc}"[:200]
    commit = _run_text(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"])
    if commit:
        env["git_commit"] = commit
    return env


def meets_targets(results: dict) -> dict:
    def get(backend: str, *keys: str):
        cur = results.get(backend)
        for k in keys:
            if not isinstance(cur, dict) or k not in cur:
                return None
            cur = cur[k]
        return cur

    def le(value, limit):
        return None if value is None else bool(value <= limit)

    ours = get("docker", "per_exec_ms", "ours", "p50")
    base = get("docker", "per_exec_ms", "baseline", "ms", "p50")
    return {
        "bwrap_start_p50_ms": le(get("bwrap", "start_to_first_exec_ms", "p50"), TARGETS["bwrap_start_p50_ms"]),
        "docker_start_p50_ms": le(get("docker", "start_to_first_exec_ms", "p50"), TARGETS["docker_start_p50_ms"]),
        "bwrap_exec_p50_ms": le(get("bwrap", "per_exec_ms", "ours", "p50"), TARGETS["bwrap_exec_p50_ms"]),
        "docker_exec_vs_docker_exec": None if ours is None or not base else bool(ours < DOCKER_EXEC_RATIO * base),
    }


# ------------------------------------------------------------------------------------------------ main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="bwrap,docker", help="comma-separated: bwrap,docker")
    ap.add_argument("--n", type=int, default=None, help="start iterations per backend (default bwrap 50, docker 30)")
    ap.add_argument("--exec-n", type=int, default=None, help="exec('true') calls in one sandbox (default 200)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed warm-up iterations (default 3)")
    ap.add_argument("--concurrency-bwrap", type=int, default=None, help="sandboxes at once (default 64, 0 skips)")
    ap.add_argument("--concurrency-docker", type=int, default=None, help="sandboxes at once (default 16, 0 skips)")
    ap.add_argument("--quick", action="store_true", help="small N for smoke runs (also CLAWGYM_BENCH_QUICK=1)")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON to this file")
    opts = ap.parse_args(argv)
    quick = opts.quick or os.environ.get("CLAWGYM_BENCH_QUICK", "") not in ("", "0")
    opts.quick = quick
    base_n = QUICK_N if quick else DEFAULT_N
    base_c = QUICK_CONCURRENCY if quick else DEFAULT_CONCURRENCY
    opts.n_for = {b: opts.n if opts.n is not None else base_n[b] for b in base_n}
    opts.conc_for = {
        "bwrap": opts.concurrency_bwrap if opts.concurrency_bwrap is not None else base_c["bwrap"],
        "docker": opts.concurrency_docker if opts.concurrency_docker is not None else base_c["docker"],
    }
    opts.exec_n = opts.exec_n if opts.exec_n is not None else (20 if quick else 200)
    opts.warmup = opts.warmup if opts.warmup is not None else (1 if quick else 3)
    opts.backend_list = [b.strip() for b in opts.backends.split(",") if b.strip()]
    for b in opts.backend_list:
        if b not in ("bwrap", "docker"):
            ap.error(f"unknown backend {b!r} (choose from bwrap, docker)")
    if min(opts.n_for.values()) < 1 or opts.exec_n < 1:
        ap.error("--n and --exec-n must be at least 1")
    return opts


def _on_term(signum, frame):  # turn SIGTERM into the same clean unwind as Ctrl-C
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_term)
    # every sandbox's host directory goes under one private dir, removed at the end: nothing is left in /tmp
    # even when a start() is interrupted before it returns a sandbox we could stop
    private_tmp = tempfile.mkdtemp(prefix="clawgym-bench-", dir=os.environ.get("CLAWGYM_SANDBOX_TMP"))
    os.environ["CLAWGYM_SANDBOX_TMP"] = private_tmp
    try:
        return _main(opts)
    finally:
        shutil.rmtree(private_tmp, ignore_errors=True)


def _main(opts: argparse.Namespace) -> int:
    limits = SandboxLimits()
    report: dict = {
        "benchmark": "sandbox",
        "quick": opts.quick,
        "params": {
            "n": opts.n_for, "exec_n": opts.exec_n, "warmup": opts.warmup, "concurrency": opts.conc_for,
            "limits": limits.model_dump(),
        },
        "environment": environment(),
        "targets": TARGETS,
    }
    failed = False
    runners = {"bwrap": bench_bwrap, "docker": bench_docker}
    t_all = time.perf_counter()
    try:
        for name in opts.backend_list:
            t0 = time.perf_counter()
            try:
                report[name] = runners[name](opts, limits)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                failed = True
                log(f"{name}: benchmark failed: {exc!r}")
                report[name] = {
                    "available": True,
                    "error": f"{exc.__class__.__name__}: {exc}"[:1000],
                    "traceback": traceback.format_exc()[-3000:],
                }
            finally:
                left = LIVE.stop_all()
                if left:
                    log(f"{name}: stopped {left} sandbox(es)/container(s) left behind")
            conc = report[name].get("concurrency") if isinstance(report[name], dict) else None
            if conc and conc.get("failures"):
                failed = True
                log(f"{name}: {conc['failures']} concurrency failure(s): {conc['errors'][:2]}")
            log(f"{name}: done in {time.perf_counter() - t0:.1f}s")
    except KeyboardInterrupt:
        LIVE.stop_all()
        log("interrupted; everything stopped")
        return 130
    finally:
        LIVE.stop_all()
    report["environment"]["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["duration_s"] = round(time.perf_counter() - t_all, 2)
    report["meets_targets"] = meets_targets(report)
    report["ok"] = not failed
    text = json.dumps(report, indent=2)
    print(text, flush=True)
    if opts.out is not None:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = opts.out.with_name(f".{opts.out.name}.{os.getpid()}.tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, opts.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
