#!/usr/bin/env python3
"""`clawgym view` on a big pool: server time and time to first render of the trajectory list and of one
trajectory (issue #21: 1,000,000 steps, p50 and p95, goal p95 <= 300 ms for both pages).

Prints ONE JSON object on stdout (progress goes to stderr); ``--save`` also writes it to
``benchmarks/perf/results_view.json``.

* ``build``: a real pool of ``--steps`` steps (default 1,000,000) written with the pool's own API
  (``Pool.append_steps`` in batches of whole groups, then ``expect_group``, ``end_trajectory`` and ``curate``
  events), so its index is the one the viewer reads. Shaped like ``clawgym train rl`` output: 10 policy
  versions, groups ``v{V}.{task}`` of 8 samples, trajectory ids ``v{V}.r1.{task}#{k}``; 2 to 30 steps per
  trajectory (mean about 10) and a few 60-step ones; each step resends the conversation so far (system prompt,
  request, every earlier tool call and result: its messages grow with its index), OpenClaw's five tool
  schemas, prompt ids that grow the same way (300 + about 120 per earlier step), 20-160 response ids with a
  logprob each, usage, timings and a token check. Statuses (completed, agent_error, timeout, infra_error,
  still running), rewards in quarters, a curation on about 1% of trajectories (quality, tags, notes, a
  trainable flag) and on a few steps. The pool is cached under ``--work`` (default ``runs/perf-view``) and
  reused when it was built complete with the same size and generator; ``--rebuild`` forces a new one.
* ``server``: ``clawgym view POOL`` started as the CLI starts it (a subprocess on a free port of 127.0.0.1);
  each API request timed from the client over one keep-alive connection (request sent to body read), first
  the cold request after start, then ``--reps`` (default 30) timed requests after 2 warm-ups. The list page
  is what the page asks for: ``/api/pool/p0`` (stats, policy versions, group counts) and
  ``/api/pool/p0/trajectories?...``; its server time is the two answered one after the other. Measured for
  the first page, a filtered and sorted page (``status=completed&min_reward=0.5&sort=reward&order=desc``),
  a policy-version filter sorted by steps (the link from the RL page), and a deep page (offset near the end,
  sorted by id). ``list_page_live``: the first page and the policy filter again while the pool is being
  written (a curation event committed through the pool's API before each request, a tag added then removed,
  so the pool ends as it was), which empties the viewer's caches every time: what a page costs while a gateway
  records steps. The trajectory page is ``/api/pool/p0/trajectory?id=`` of a 60-step trajectory (and, for
  reference, of a typical 10-step one).
* ``browser``: Debian's Chromium (headless, driven by its chromedriver, as tests/test_view.py does), a fresh
  navigation each time (about:blank first); ``render_ms`` is the page's own ``performance.mark
  ("clawgym:rendered")``, set when the page's main content (the trajectory table, the steps) is in the DOM,
  measured from the navigation's start; ``fcp_ms`` (first contentful paint: the "loading..." placeholder) and
  ``dom_content_loaded_ms`` beside it.

Verdicts: ``goals.list_page`` and ``goals.trajectory_page``: every measured variant's server p95 (live ones
included) and render p95 <= 300 ms. ``server.cold`` (the first request after the viewer started, when it opens
the pool and counts the steps of each policy version once) is reported, not judged.

    python benchmarks/perf/view.py                         # 1,000,000 steps (about 9 GB under runs/perf-view)
    python benchmarks/perf/view.py --quick                 # 20,000 steps, 10 requests, 5 navigations
    python benchmarks/perf/view.py --save                  # -> benchmarks/perf/results_view.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import http.client
import json
import math
import os
import platform
import random
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
import traceback
import urllib.parse
from pathlib import Path

from clawgym.pool import Pool, StepRecord

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS = HERE / "results_view.json"
GENERATOR = 1  # bump when the generated pool changes: a cached pool of another generator is rebuilt
GOAL_MS = 300.0
DEFAULT_STEPS, QUICK_STEPS = 1_000_000, 20_000
SAMPLES = 8
VERSIONS = 10
LONG = 60
MODEL = "smollm2-135m"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WORDS = ("the report lists every invoice of march with its amount and due date for the client so sum group by "
         "vendor then write totals csv file column header row value missing check again done").split()


def log(msg: str) -> None:
    print(f"[bench view {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _pct(sorted_vals: list[float], q: float) -> float:
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = (len(sorted_vals) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def summarize(ms: list[float]) -> dict:
    """Milliseconds: n, p50, p95, mean, min, max (percentiles by linear interpolation)."""
    if not ms:
        return {"n": 0}
    s = sorted(ms)
    return {"n": len(s), "p50": round(_pct(s, 0.5), 2), "p95": round(_pct(s, 0.95), 2),
            "mean": round(statistics.fmean(s), 2), "min": round(s[0], 2), "max": round(s[-1], 2)}


# --------------------------------------------------------------------------------------------- the pool


def _tools() -> list[dict]:
    from clawgym.agent.llm import TOOL_SCHEMAS

    return TOOL_SCHEMAS


class Scripts:
    """A few validated conversations of LONG steps; every trajectory of the pool is a prefix of one of them with
    its ids changed (model_copy), so building costs serialisation and writing, not validation."""

    def __init__(self, rng: random.Random, n: int = 16):
        self.scripts = [self._script(rng, s) for s in range(n)]

    @staticmethod
    def _text(rng: random.Random, n: int) -> str:
        out, size = [], 0
        while size < n:
            w = rng.choice(WORDS)
            out.append(w)
            size += len(w) + 1
        return " ".join(out)

    def _script(self, rng: random.Random, s: int) -> list[StepRecord]:
        tools = _tools()
        history: list[dict] = [{"role": "system", "content": self._text(rng, 700)},
                               {"role": "user", "content": self._text(rng, 350)}]
        prompt = [rng.randrange(49152) for _ in range(300)]
        steps = []
        for i in range(LONG):
            name = ("read", "exec", "write", "edit", "ls")[(s + i) % 5]
            args = {"read": {"path": "data/invoices.csv"}, "exec": {"command": "python3 summarize.py --by vendor"},
                    "write": {"path": "out/totals.csv", "content": self._text(rng, 160)},
                    "edit": {"path": "out/totals.csv", "oldText": "total", "newText": "sum"},
                    "ls": {"path": "data"}}[name]
            call = {"id": f"call_{s}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            n_resp = rng.randrange(20, 160)
            resp_ids = [rng.randrange(49152) for _ in range(n_resp)]
            logprobs = [float(f"{-rng.expovariate(2.0):.7g}") for _ in range(n_resp)]
            thought = self._text(rng, rng.randrange(0, 200))
            steps.append(StepRecord.model_validate({
                "trajectory_id": "tmpl", "group_id": "tmpl", "step_index": i, "task_id": "tmpl", "model": MODEL,
                "policy_version": "0",
                "request": {"messages": list(history), "tools": tools,
                            "params": {"temperature": 1.0, "max_tokens": 1024, "seed": 1009 + i}},
                "response": {"content": thought or None, "reasoning": None, "finish_reason": "tool_calls",
                             "tool_calls": [call]},
                "prompt_ids": list(prompt), "response_ids": resp_ids, "logprobs": logprobs,
                "token_source": "upstream",
                "token_check": {"prompt_tokens_reported": len(prompt), "prompt_ids": len(prompt),
                                "completion_tokens_reported": n_resp, "response_ids": n_resp, "match": True},
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": n_resp,
                          "total_tokens": len(prompt) + n_resp},
                "timings": {"started_at": "2026-11-22T00:00:00.000000Z", "latency_s": round(0.2 + n_resp / 30, 4),
                            "ttft_s": round(0.05 + len(prompt) / 20000, 4)},
            }))
            result = self._text(rng, rng.randrange(100, 450))
            history += [{"role": "assistant", "content": thought or None, "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": call["id"], "content": result}]
            prompt = prompt + resp_ids + [rng.randrange(49152) for _ in range(len(result) // 6 + 8)]
        return steps


def plan(n_steps: int, seed: int) -> list[list[int]]:
    """Groups of SAMPLES trajectory lengths adding up to exactly n_steps (the last trajectory cut to fit)."""
    rng = random.Random(seed)
    groups: list[list[int]] = []
    total = 0
    while total < n_steps:
        g: list[int] = []
        for _ in range(SAMPLES):
            if total >= n_steps:
                break
            n = LONG if rng.random() < 1 / 400 else min(30, 2 + int(rng.expovariate(1 / 8)))
            n = min(n, n_steps - total)
            g.append(n)
            total += n
        groups.append(g)
    return groups


def ids(g: int, k: int, n_groups: int) -> tuple[str, str, str, str]:
    """(policy version, task, group, trajectory) of sample k of group g, as `clawgym train rl` names them."""
    v = g * VERSIONS // n_groups
    first = -(-v * n_groups // VERSIONS)  # first group of version v
    task = f"synth-{g - first:05d}"
    return str(v), task, f"v{v}.{task}", f"v{v}.r1.{task}#{k}"


def _outcome(rng: random.Random) -> tuple[str, float | None]:
    x = rng.random()
    if x < 0.85:
        return "completed", rng.randrange(5) / 4
    if x < 0.93:
        return "agent_error", rng.randrange(3) / 4
    if x < 0.98:
        return "timeout", 0.0
    return "infra_error", None


def build_pool(root: Path, n_steps: int, seed: int, batch_steps: int = 2000) -> dict:
    rng = random.Random(seed)
    t0 = time.perf_counter()
    scripts = Scripts(random.Random(seed + 1))
    t_scripts = time.perf_counter() - t0
    groups = plan(n_steps, seed)
    n_groups = len(groups)
    # the newest groups are still being rolled out: half of their samples (and the last, cut trajectory) run
    running_from = n_groups - 1 - max(1, n_groups // 200)
    base = _dt.datetime(2026, 11, 22, tzinfo=_dt.timezone.utc).timestamp()
    long_ids: list[str] = []
    typical: str | None = None
    t_steps = t_events = 0.0
    n_events = 0
    stamp = 0
    with Pool(root) as pool:
        pending: list[tuple[int, list[int]]] = []
        batch: list[StepRecord] = []

        def flush() -> None:
            nonlocal t_steps, t_events, n_events
            t1 = time.perf_counter()
            pool.append_steps(batch)
            t2 = time.perf_counter()
            for g, lens in pending:
                v, task, gid, _ = ids(g, 0, n_groups)
                pool.expect_group(gid, SAMPLES)
                n_events += 1
                for k, n in enumerate(lens):
                    tid = ids(g, k, n_groups)[3]
                    if (g >= running_from and k >= SAMPLES // 2) or (g == n_groups - 1 and k == len(lens) - 1):
                        continue
                    status, reward = _outcome(rng)
                    verdict = None if reward is None else {
                        "status": "scored", "score": reward, "passed": reward >= 1.0,
                        "checks": {"output_exists": 1.0, "totals_match": reward}}
                    pool.end_trajectory(tid, group_id=gid, task_id=task, status=status, reward=reward,
                                        verdict=verdict)
                    n_events += 1
                    x = rng.random()
                    if x < 0.01:
                        pool.curate(trajectory_id=tid, quality=rng.choice(("bad", "good", "suspect")),
                                    add_tags=["review"], note="loops on ls" if x < 0.002 else None, by="bench")
                        n_events += 1
                    elif x < 0.011:
                        pool.curate(trajectory_id=tid, trainable=False, by="bench")
                        n_events += 1
                    elif x < 0.0115:
                        pool.curate(step_id=f"{tid}/{n - 1}", quality="bad", add_tags=["bad-call"], by="bench")
                        n_events += 1
            t_steps += t2 - t1
            t_events += time.perf_counter() - t2
            batch.clear()
            pending.clear()

        done = 0
        last_log = time.perf_counter()
        for g, lens in enumerate(groups):
            v, task, gid, _ = ids(g, 0, n_groups)
            for k, n in enumerate(lens):
                tid = ids(g, k, n_groups)[3]
                if n == LONG:
                    long_ids.append(tid)
                elif typical is None and n == 10:
                    typical = tid
                script = scripts.scripts[(g * 5 + k) % len(scripts.scripts)]
                for i in range(n):
                    stamp += 1
                    created = _dt.datetime.fromtimestamp(base + stamp * 0.25, _dt.timezone.utc)
                    upd = {"step_id": f"{tid}/{i}", "trajectory_id": tid, "group_id": gid, "step_index": i,
                           "task_id": task, "policy_version": v,
                           "created_at": created.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
                    batch.append(script[i].model_copy(update=upd))
            pending.append((g, lens))
            done += len(lens) and sum(lens)
            if len(batch) >= batch_steps:
                flush()
                if time.perf_counter() - last_log > 30:
                    last_log = time.perf_counter()
                    el = last_log - t0
                    log(f"build: {done:,} / {n_steps:,} steps, {done / el:,.0f} steps/s, "
                        f"eta {(n_steps - done) / max(done / el, 1e-9) / 60:.1f} min")
        if batch or pending:
            flush()
        stats = pool.stats()
    wall = time.perf_counter() - t0
    assert stats["steps"] == n_steps, (stats["steps"], n_steps)
    return {"method": f"Pool.append_steps in batches of whole groups (>= {batch_steps} steps per call), then "
                      "expect_group + end_trajectory per trajectory + curate on ~1.2% (one event per call)",
            "steps": stats["steps"], "trajectories": stats["trajectories"], "ended": stats["ended"],
            "groups": stats["groups"], "events": stats["events"], "bytes": stats["bytes"],
            "segments": stats["segments"], "wall_s": round(wall, 1), "scripts_s": round(t_scripts, 2),
            "append_steps_s": round(t_steps, 1), "events_s": round(t_events, 1),
            "steps_per_s": round(n_steps / wall), "long_trajectories": long_ids[:5], "typical_trajectory": typical}


def ensure_pool(work: Path, n_steps: int, seed: int, rebuild: bool) -> tuple[Path, dict, bool]:
    """The cached pool of this size and generator, or a new one. Returns (root, build info, reused)."""
    root = work / f"pool-{n_steps}"
    manifest = work / f"pool-{n_steps}.json"
    if not rebuild and manifest.exists() and (root / "pool.json").exists():
        try:
            info = json.loads(manifest.read_text())
            if info.get("generator") == GENERATOR and info.get("seed") == seed and info.get("complete"):
                with Pool(root, create=False) as pool:
                    steps = pool.stats()["steps"]
                if steps == n_steps:
                    log(f"reusing {root} ({steps:,} steps, built in {info['build']['wall_s']} s)")
                    return root, info["build"], True
                log(f"{root}: {steps:,} steps, expected {n_steps:,}: rebuilding")
        except (OSError, ValueError, KeyError) as exc:
            log(f"{manifest}: unusable ({exc}): rebuilding")
    shutil.rmtree(root, ignore_errors=True)
    manifest.unlink(missing_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    log(f"building {root}: {n_steps:,} steps")
    build = build_pool(root, n_steps, seed)
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text(json.dumps({"generator": GENERATOR, "seed": seed, "complete": True, "build": build}, indent=1))
    os.replace(tmp, manifest)
    log(f"built in {build['wall_s']} s ({build['steps_per_s']:,} steps/s)")
    return root, build, False


# --------------------------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Viewer:
    """`clawgym view POOL` in a subprocess, as the CLI runs it."""

    def __init__(self, pool: Path, work: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = work / "view.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed in stop)
        cmd = [sys.executable, "-m", "clawgym", "view", str(pool), "--port", str(self.port),
               "--export-dir", str(work / "exports")]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.conn: http.client.HTTPConnection | None = None

    def wait(self, timeout: float = 600) -> float:
        t0 = time.perf_counter()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"clawgym view exited {self.proc.returncode}: "
                                   f"{self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return time.perf_counter() - t0
            except OSError:
                if time.perf_counter() - t0 > timeout:
                    raise RuntimeError("clawgym view did not start") from None
                time.sleep(0.05)

    def get(self, path: str) -> tuple[float, dict]:
        """(milliseconds from sending the request to having read the body, parsed body)."""
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
            try:
                t0 = time.perf_counter()
                self.conn.request("GET", path)
                r = self.conn.getresponse()
                body = r.read()
                ms = (time.perf_counter() - t0) * 1000
                break
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        data = json.loads(body)
        if r.status != 200:
            raise RuntimeError(f"GET {path}: {r.status} {data}")
        return ms, data

    def stop(self) -> None:
        if self.conn is not None:
            self.conn.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


def list_variants(total: int) -> dict[str, str]:
    deep = max(0, total - 50)
    return {
        "first_page": "",
        "filtered_sorted": "status=completed&min_reward=0.5&sort=reward&order=desc",
        "policy_filter_sorted": "policy=7&sort=steps&order=desc",
        "deep_page": f"offset={deep}",
    }


def bench_server(v: Viewer, pool_root: Path, traj_ids: dict[str, str], total: int, reps: int) -> dict:
    out: dict = {"cold": {}}
    # the first requests after start: the pool is opened (and caught up) and the caches are empty
    out["cold"]["sources_ms"] = round(v.get("/api/sources")[0], 2)
    out["cold"]["overview_ms"] = round(v.get("/api/pool/p0")[0], 2)
    out["cold"]["list_first_page_ms"] = round(v.get("/api/pool/p0/trajectories")[0], 2)
    for name, tid in traj_ids.items():
        out["cold"][f"trajectory_{name}_ms"] = round(v.get("/api/pool/p0/trajectory?id=" + urllib.parse.quote(tid))[0], 2)
    out["list_page"] = {}
    for name, query in list_variants(total).items():
        path = "/api/pool/p0/trajectories" + (f"?{query}" if query else "")
        ov, li, page = [], [], []
        for i in range(reps + 2):
            a, _ = v.get("/api/pool/p0")
            b, data = v.get(path)
            if i >= 2:
                ov.append(a)
                li.append(b)
                page.append(a + b)
        out["list_page"][name] = {"query": query, "total": data["total"], "items": len(data["items"]),
                                  "page_ms": summarize(page), "overview_ms": summarize(ov), "list_ms": summarize(li)}
        log(f"server list {name}: p50 {out['list_page'][name]['page_ms']['p50']} ms, "
            f"p95 {out['list_page'][name]['page_ms']['p95']} ms ({data['total']:,} matching)")
    # the pool being written meanwhile (as by a gateway or a curation): a curation event committed before each
    # request (a tag added, then removed, on one trajectory: the pool ends as it was), so the viewer's caches
    # (counts, policy versions, kept until the index changes) are rebuilt for every page
    out["list_page_live"] = {}
    target = next(iter(traj_ids.values()))
    with Pool(pool_root, create=False) as writer:
        for name in ("first_page", "policy_filter_sorted"):
            query = list_variants(total)[name]
            path = "/api/pool/p0/trajectories" + (f"?{query}" if query else "")
            ov, li, page = [], [], []
            for i in range(reps + 2):
                tag = {"add_tags": ["bench-live"]} if i % 2 == 0 else {"remove_tags": ["bench-live"]}
                writer.curate(trajectory_id=target, by="bench-view", **tag)
                a, _ = v.get("/api/pool/p0")
                b, data = v.get(path)
                if i >= 2:
                    ov.append(a)
                    li.append(b)
                    page.append(a + b)
            if (reps + 2) % 2:
                writer.curate(trajectory_id=target, remove_tags=["bench-live"], by="bench-view")
            out["list_page_live"][name] = {"query": query, "total": data["total"], "page_ms": summarize(page),
                                           "overview_ms": summarize(ov), "list_ms": summarize(li)}
            log(f"server list {name}, index changing: p50 {summarize(page)['p50']} ms, "
                f"p95 {summarize(page)['p95']} ms")
    out["trajectory_page"] = {}
    for name, tid in traj_ids.items():
        path = "/api/pool/p0/trajectory?id=" + urllib.parse.quote(tid)
        samples = []
        for i in range(reps + 2):
            ms, data = v.get(path)
            if i >= 2:
                samples.append(ms)
        out["trajectory_page"][name] = {"id": tid, "steps": len(data["turns"]), "page_ms": summarize(samples)}
        log(f"server trajectory {name} ({len(data['turns'])} steps): p50 {summarize(samples)['p50']} ms, "
            f"p95 {summarize(samples)['p95']} ms")
    return out


# --------------------------------------------------------------------------------------------- the browser


def start_browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(120)
    return driver


_TIMING_JS = """
const r = performance.getEntriesByName('clawgym:rendered');
const fcp = performance.getEntriesByName('first-contentful-paint');
const nav = performance.getEntriesByType('navigation')[0];
return {loaded: document.body.getAttribute('data-loaded'), error: document.getElementById('error').textContent,
        render: r.length ? r[0].startTime : null, fcp: fcp.length ? fcp[0].startTime : null,
        dcl: nav ? nav.domContentLoadedEventEnd : null, rows: document.querySelectorAll('#traj-table tr.traj-row').length,
        turns: document.querySelectorAll('#turns .turn').length};
"""


def browser_page(driver, url: str, reps: int, timeout: float = 120) -> dict:
    render, fcp, dcl = [], [], []
    last: dict = {}
    for i in range(reps + 1):
        driver.get("about:blank")
        driver.get(url)
        t0 = time.monotonic()
        while True:
            last = driver.execute_script(_TIMING_JS)
            if last["loaded"] == "error":
                raise RuntimeError(f"{url}: the page shows an error: {last['error']}")
            if last["loaded"] and last["render"] is not None:
                break
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"{url}: not rendered after {timeout} s")
            time.sleep(0.02)
        if i == 0:
            continue  # warm-up (Chromium's own first-navigation costs)
        render.append(last["render"])
        if last["fcp"] is not None:
            fcp.append(last["fcp"])
        if last["dcl"] is not None:
            dcl.append(last["dcl"])
    return {"render_ms": summarize(render), "fcp_ms": summarize(fcp), "dom_content_loaded_ms": summarize(dcl),
            "rows": last["rows"], "turns": last["turns"]}


def bench_browser(v: Viewer, traj_ids: dict[str, str], total: int, reps: int) -> dict:
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        return {"available": False, "reason": "chromium and chromedriver not installed"}
    try:
        driver = start_browser()
    except Exception as exc:  # noqa: BLE001 (reported, not fatal)
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"[:500]}
    out: dict = {"available": True, "chromium": driver.capabilities.get("browserVersion"), "list_page": {},
                 "trajectory_page": {}}
    try:
        for name, query in list_variants(total).items():
            url = f"{v.url}/#/pool/p0" + (f"?{query}" if query else "")
            out["list_page"][name] = r = browser_page(driver, url, reps)
            log(f"browser list {name}: render p50 {r['render_ms']['p50']} ms, p95 {r['render_ms']['p95']} ms")
        for name, tid in traj_ids.items():
            url = f"{v.url}/#/pool/p0/t/{urllib.parse.quote(tid, safe='')}"
            out["trajectory_page"][name] = r = browser_page(driver, url, reps)
            log(f"browser trajectory {name}: render p50 {r['render_ms']['p50']} ms, p95 {r['render_ms']['p95']} ms")
    finally:
        driver.quit()
    return out


# --------------------------------------------------------------------------------------------- main


def environment() -> dict:
    env: dict = {
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version, "niceness": os.nice(0),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        env["git_commit"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                           capture_output=True, text=True, timeout=10).stdout.strip() or None
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src/clawgym/view",
                                "benchmarks/perf/view.py"], capture_output=True, text=True, timeout=10).stdout
        env["view_code_modified_since_commit"] = bool(dirty.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return env


def goals(server: dict, browser: dict) -> dict:
    def page(kind: str) -> dict:
        measured = [*server[kind].values(), *server.get(f"{kind}_live", {}).values()]
        worst_server = max(v["page_ms"]["p95"] for v in measured)
        verdict: dict = {"server_p95_ms_worst": worst_server, "server_ok": worst_server <= GOAL_MS}
        if browser.get("available"):
            worst_render = max(v["render_ms"]["p95"] for v in browser[kind].values())
            verdict.update(render_p95_ms_worst=worst_render, render_ok=worst_render <= GOAL_MS)
        if browser.get("available"):
            verdict["met"] = verdict["server_ok"] and verdict["render_ok"]
        else:  # the render was not measured: only a miss is known
            verdict["met"] = False if not verdict["server_ok"] else None
        return verdict

    return {"goal_p95_ms": GOAL_MS, "list_page": page("list_page"), "trajectory_page": page("trajectory_page")}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=None, help="steps in the pool (default 1,000,000)")
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK_STEPS:,} steps, 10 requests and 5 navigations each (also CLAWGYM_BENCH_QUICK=1)")
    ap.add_argument("--work", type=Path, default=REPO / "runs" / "perf-view",
                    help="where the pool is built and cached (default runs/perf-view)")
    ap.add_argument("--rebuild", action="store_true", help="build the pool again even when a cached one fits")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=None, help="timed requests per server measurement (default 30)")
    ap.add_argument("--browser-reps", type=int, default=None, help="navigations per page in Chromium (default 30)")
    ap.add_argument("--no-browser", action="store_true", help="skip the Chromium measurements")
    ap.add_argument("--build-only", action="store_true", help="build (or check) the pool and stop")
    ap.add_argument("--note", default=None, help="free text stored in the JSON (e.g. what else ran on the host)")
    ap.add_argument("--save", action="store_true", help=f"also write the JSON to {RESULTS.relative_to(REPO)}")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON to this file")
    opts = ap.parse_args(argv)
    opts.quick = opts.quick or os.environ.get("CLAWGYM_BENCH_QUICK", "") not in ("", "0")
    opts.steps = opts.steps or (QUICK_STEPS if opts.quick else DEFAULT_STEPS)
    opts.reps = opts.reps or (10 if opts.quick else 30)
    opts.browser_reps = opts.browser_reps or (5 if opts.quick else 30)
    if opts.steps < 100:
        ap.error("--steps must be at least 100")
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    report: dict = {"benchmark": "view", "quick": opts.quick, "params": {"steps": opts.steps, "seed": opts.seed, "reps": opts.reps,
                                                    "browser_reps": 0 if opts.no_browser else opts.browser_reps,
                                                    "samples_per_group": SAMPLES, "policy_versions": VERSIONS,
                                                    "work": str(opts.work)},
                    "environment": environment(), "note": opts.note}
    ok = True
    t_all = time.perf_counter()
    viewer = None
    try:
        root, build, reused = ensure_pool(opts.work, opts.steps, opts.seed, opts.rebuild)
        report["build"] = {**build, "reused_cached_pool": reused}
        report["pool"] = str(root)
        if not opts.build_only:
            traj_ids = {"long": build["long_trajectories"][0] if build["long_trajectories"] else None,
                        "typical": build["typical_trajectory"]}
            traj_ids = {k: t for k, t in traj_ids.items() if t}
            viewer = Viewer(root, opts.work)
            report["server_start_s"] = round(viewer.wait(), 2)
            log(f"clawgym view on {viewer.url} (started in {report['server_start_s']} s)")
            report["server"] = bench_server(viewer, root, traj_ids, build["trajectories"], opts.reps)
            report["browser"] = {"available": False, "reason": "--no-browser"} if opts.no_browser else \
                bench_browser(viewer, traj_ids, build["trajectories"], opts.browser_reps)
            report["goals"] = goals(report["server"], report["browser"])
    except KeyboardInterrupt:
        ok = False
        report["error"] = "interrupted"
    except Exception as exc:
        ok = False
        log(f"failed: {exc!r}")
        report["error"] = f"{exc.__class__.__name__}: {exc}"[:1000]
        report["traceback"] = traceback.format_exc()[-3000:]
    finally:
        if viewer is not None:
            viewer.stop()
    report["environment"]["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["duration_s"] = round(time.perf_counter() - t_all, 1)
    report["ok"] = ok
    text = json.dumps(report, indent=2)
    print(text, flush=True)
    for path in ([RESULTS] if opts.save else []) + ([opts.out] if opts.out else []):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
