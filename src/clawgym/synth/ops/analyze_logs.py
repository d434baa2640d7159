"""analyze_logs: an application log (levels, multi-line stack traces), an nginx access log or a syslog-style
log becomes an error summary: counts per level or status, error count and rate, first and last error, the
top offenders (JSON) and a per-component / per-endpoint / per-service error breakdown (CSV)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.ops.base import RECORDS, TABLE, Artifact, Check, OpContext, StepPlan, read, to_csv, write

LEVEL_WEIGHTS = [("DEBUG", 10), ("INFO", 52), ("WARNING", 18), ("ERROR", 16), ("CRITICAL", 4)]
ERROR_LEVELS = ("ERROR", "CRITICAL")
EXCEPTIONS = [
    ("TimeoutError", "timed out after 30s", "socket.py", "create_connection"),
    ("ConnectionRefusedError", "[Errno 111] Connection refused", "connection.py", "connect"),
    ("psycopg2.OperationalError", "could not connect to server: Connection timed out", "pool.py", "getconn"),
    ("KeyError", "'customer_id'", "serializers.py", "to_record"),
    ("ValueError", "invalid literal for int() with base 10: 'N/A'", "parsers.py", "parse_row"),
    ("PermissionError", "[Errno 13] Permission denied: '/srv/export/latest.csv'", "export.py", "write_file"),
]
UAS = ["Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/122.0 Safari/537.36",
       "Mozilla/5.0 (iPhone; CPU iPhone OS 17_3 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
       "curl/8.5.0", "python-requests/2.31.0", "Mozilla/5.0 (X11; Linux x86_64; rv:123.0) Gecko/20100101 Firefox/123.0",
       "kube-probe/1.29", "Go-http-client/1.1"]
STATUS_WEIGHTS = [(200, 60), (201, 6), (204, 4), (301, 3), (304, 6), (400, 3), (401, 3), (403, 2), (404, 6),
                  (499, 1), (500, 5), (502, 3), (503, 3), (504, 2)]


def _weighted(rng, pairs):
    return rng.choices([p[0] for p in pairs], weights=[p[1] for p in pairs])[0]


def _times(rng, day: dt.date, n: int) -> list[dt.datetime]:
    t = dt.datetime.combine(day, dt.time(rng.randint(5, 9), rng.randint(0, 59), rng.randint(0, 59)))
    out = []
    for _ in range(n):
        t += dt.timedelta(seconds=rng.choice([1, 2, 3, 5, 8, 13, 21, 40, 75, 130, 300]), microseconds=rng.randint(0, 999) * 1000)
        out.append(t)
    return out


# ------------------------------------------------------------------------------------------ log makers
# Each returns (text, entries) where an entry is {"time": datetime, "level": str, "group": str}.


def _app_log(rng, day, voc, service):
    comps = rng.sample(["api", "worker", "scheduler", "mailer", "billing", "sync", "auth", "export"], k=rng.randint(4, 6))
    if "api" not in comps:
        comps[0] = "api"
    items = [flavor.slug(x).replace("_", "-") for x in voc["items"]]
    endpoints = [f"/api/{x}" for x in items[:4]] + ["/api/login", "/api/reports"]
    jobs = [f"{flavor.slug(p)}" for p in voc["projects"]] + ["nightly_export", "stock_sync", "reminders"]
    style = rng.choice(["pad", "brackets"])
    n = rng.randint(55, 120)
    times = _times(rng, day, n)
    lines: list[str] = []
    entries: list[dict] = []

    def emit(t, level, comp, msg, trace=None):
        ts = t.strftime("%Y-%m-%d %H:%M:%S") + f",{t.microsecond // 1000:03d}"
        if style == "pad":
            lines.append(f"{ts} {level:<8} [{comp}] {msg}")
        else:
            lines.append(f"{ts} [{level}] {comp}: {msg}")
        lines.extend(trace or [])
        entries.append({"time": t, "level": level, "group": comp})

    for i, t in enumerate(times):
        if i == 0:
            emit(t, "INFO", comps[0], f"{service} starting (pid {rng.randint(1000, 40000)}), {len(comps)} components")
            continue
        if i == len(times) - 1:
            emit(t, "INFO", rng.choice(comps), "heartbeat ok")
            continue
        level = _weighted(rng, LEVEL_WEIGHTS)
        comp = rng.choice(comps)
        ep = rng.choice(endpoints)
        method = rng.choice(["GET", "GET", "POST", "PUT"])
        job = rng.choice(jobs)
        trace = None
        if level == "DEBUG":
            msg = rng.choice([f"loaded {rng.randint(3, 900)} rows from {rng.choice(items)}",
                              f"token refreshed for user {rng.randint(100, 999)}", "cache miss, fetching upstream"])
        elif level == "INFO":
            msg = rng.choice([f"{method} {ep} 200 in {rng.randint(8, 400)}ms" if comp == "api" else f"job {job} finished in {rng.randint(1, 90)}s",
                              f"processed {rng.randint(1, 60)} queued items",
                              f"retry of {job} succeeded after earlier error",
                              f"config reloaded, {rng.randint(10, 40)} keys"])
        elif level == "WARNING":
            msg = rng.choice([f"slow request {ep} took {rng.randint(1500, 9000)}ms", f"queue depth {rng.randint(200, 900)} above soft limit",
                              "deprecated setting 'log_lvl' still in use", f"retrying {job} (attempt {rng.randint(2, 4)}/5)"])
        elif level == "ERROR":
            exc, text, file, func = rng.choice(EXCEPTIONS)
            msg = rng.choice([f"{method} {ep} failed: {exc}: {text}" if comp == "api" else f"job {job} failed: {exc}",
                              f"unhandled exception in {comp} handler"])
            if rng.random() < 0.5:
                trace = ["Traceback (most recent call last):",
                         f'  File "/srv/{service}/{comp}/handlers.py", line {rng.randint(20, 400)}, in handle',
                         f"    result = {func}(payload)",
                         f'  File "/usr/lib/python3/dist-packages/{service.replace("-", "_")}/{file}", line {rng.randint(20, 900)}, in {func}',
                         f"    raise {exc.split('.')[-1]}({text!r})",
                         f"{exc}: {text}"]
        else:
            msg = rng.choice(["database connection pool exhausted", f"disk almost full: /srv {rng.randint(95, 99)}% used",
                              "worker crashed, restarting"])
        emit(t, level, comp, msg, trace)
    return "\n".join(lines) + "\n", entries


def _syslog(rng, day, voc, service):
    host = rng.choice(["nas01", "pi-hole", "homeserver", "srv-01", "edge-gw", "media-box"])
    services = rng.sample(["backupd", "smbd", "sshd", "cron", "dockerd", "nginx", "rsyncd", "thermald", "zfs-zed"],
                          k=rng.randint(4, 6))
    pids = {s: rng.randint(300, 30000) for s in services}
    n = rng.randint(50, 110)
    times = _times(rng, day, n)
    lines, entries = [], []
    levels = [("DEBUG", 6), ("INFO", 50), ("NOTICE", 8), ("WARNING", 16), ("ERROR", 16), ("CRITICAL", 4)]
    for i, t in enumerate(times):
        svc = rng.choice(services)
        level = "INFO" if i in (0, len(times) - 1) else _weighted(rng, levels)
        msg = {
            "DEBUG": rng.choice(["poll cycle complete", f"read {rng.randint(1, 90)} bytes from socket"]),
            "INFO": rng.choice([f"session opened for user {rng.choice(['admin', 'backup', 'media'])}",
                                f"snapshot {day.isoformat()}_{rng.randint(0, 23):02d} created", "started",
                                f"job finished, {rng.randint(1, 300)} files synced",
                                "recovered from earlier error, continuing"]),
            "NOTICE": rng.choice(["configuration reloaded", "new client connected"]),
            "WARNING": rng.choice([f"disk /dev/sdb temperature {rng.randint(48, 58)}C", "retrying connection to upstream",
                                   f"pool tank is {rng.randint(80, 89)}% full"]),
            "ERROR": rng.choice([f"rsync to /mnt/usb failed (code {rng.choice([12, 23, 24, 30])})",
                                 f"authentication failure for {rng.choice(['root', 'pi', 'guest'])} from 203.0.113.{rng.randint(2, 250)}",
                                 "cannot open /var/lib/state.db: database is locked",
                                 f"container {flavor.slug(rng.choice(voc['projects']))} exited with code 137"]),
            "CRITICAL": rng.choice(["I/O error on /dev/sdb, device offline", "out of memory: killed process"]),
        }[level]
        lines.append(f"{t:%b} {t.day:>2} {t:%H:%M:%S} {host} {svc}[{pids[svc]}]: [{level}] {msg}")
        entries.append({"time": t.replace(microsecond=0), "level": level, "group": svc})
    return "\n".join(lines) + "\n", entries


def _nginx(rng, day, voc, service):
    items = [flavor.slug(x).replace("_", "-") for x in voc["items"]]
    endpoints = [f"/api/{x}" for x in items[:4]] + ["/", "/login", "/static/app.js", "/api/search", "/healthz"]
    n = rng.randint(70, 150)
    times = _times(rng, day, n)
    ips = [f"{rng.choice(['203.0.113', '198.51.100', '192.0.2', '10.0.4'])}.{rng.randint(2, 250)}" for _ in range(8)]
    lines, entries = [], []
    for i, t in enumerate(times):
        ep = rng.choice(endpoints)
        status = 200 if i in (0, len(times) - 1) else _weighted(rng, STATUS_WEIGHTS)
        method = "GET" if ep.startswith(("/static", "/healthz")) or rng.random() < 0.6 else rng.choice(["POST", "PUT", "DELETE"])
        path = ep
        if ep.startswith("/api/") and rng.random() < 0.35:
            path += rng.choice([f"?page={rng.randint(1, 9)}", f"?q={rng.choice(items)}", f"?limit={rng.choice([10, 50])}&page=2"])
        size = 0 if status in (204, 304) else rng.randint(120, 48000)
        ref = rng.choice(['"-"', '"-"', f'"https://{service}.example.org/"'])
        ts = t.strftime("%d/%b/%Y:%H:%M:%S +0000")
        lines.append(f'{rng.choice(ips)} - - [{ts}] "{method} {path} HTTP/1.1" {status} {size} {ref} "{rng.choice(UAS)}"')
        entries.append({"time": t.replace(microsecond=0), "level": str(status), "group": ep})
    return "\n".join(lines) + "\n", entries


def _fmt(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


class AnalyzeLogs:
    id = "analyze_logs"
    consumes: tuple[str, ...] = ()
    produces = (RECORDS, TABLE)
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        service = flavor.slug(rng.choice(voc["projects"])).replace("_", "-")
        day = flavor.date_in(rng, 2026)
        kind = rng.choice(["app", "nginx", "syslog"])
        maker = {"app": _app_log, "nginx": _nginx, "syslog": _syslog}[kind]

        def is_err(e):
            return int(e["level"]) >= 500 if kind == "nginx" else e["level"] in ERROR_LEVELS

        while True:  # a log without a single error would make an empty report
            text, entries = maker(rng, day, voc, service)
            if any(is_err(e) for e in entries):
                break
        if kind == "app":
            log = ctx.path(rng.choice([f"logs/{service}.log", "logs/app.log", f"{service}-{day.isoformat()}.log"]))
            group, unit, levels_key, total_key = "component", "entries", "by_level", "total_entries"
            err_def = "an error is any ERROR or CRITICAL entry (stack-trace lines belong to the entry above them)"
        elif kind == "nginx":
            log = ctx.path(rng.choice(["logs/access.log", "nginx/access.log", f"logs/{service}_access.log"]))
            group, unit, levels_key, total_key = "endpoint", "requests", "by_status", "total_requests"
            err_def = "an error is any response with a 5xx status; the endpoint is the path without its query string"
        else:
            log = ctx.path(rng.choice(["logs/syslog", "logs/messages.log", "var/log/syslog"]))
            group, unit, levels_key, total_key = "service", "entries", "by_level", "total_entries"
            err_def = (f"the log is from {day.year}; the level is the bracketed tag after the service name, and an "
                       "error is any ERROR or CRITICAL entry")
        errors = [e for e in entries if is_err(e)]
        by_level: dict[str, int] = {}
        for e in entries:
            by_level[e["level"]] = by_level.get(e["level"], 0) + 1
        per: dict[str, list] = {}
        for e in errors:
            per.setdefault(e["group"], []).append(e["time"])
        breakdown = sorted(per.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        top_n = min(len(breakdown), rng.choice([3, 3, 5]))
        top = [g for g, _ in breakdown[:top_n]]
        total = len(entries)
        rate = round(100.0 * len(errors) / total, 1)
        first, last = _fmt(errors[0]["time"]), _fmt(errors[-1]["time"])
        summary = {total_key: total, levels_key: dict(sorted(by_level.items())), "error_count": len(errors),
                   "error_rate": rate, "first_error": first, "last_error": last, f"top_{group}s": top}
        header = [group, "errors", "first_error", "last_error"]
        rows = [[g, str(len(ts)), _fmt(min(ts)), _fmt(max(ts))] for g, ts in breakdown]

        base = {"app": "errors", "nginx": "http_errors", "syslog": "syslog_errors"}[kind]
        out_json = ctx.path(rng.choice([f"reports/{base}_summary.json", "reports/log_summary.json", f"{base}_summary.json"]))
        out_csv = ctx.path(rng.choice([f"reports/{base}_by_{group}.csv", f"reports/{group}_errors.csv", f"{base}_by_{group}.csv"]))
        what = {"app": "application log", "nginx": "nginx access log", "syslog": "syslog"}[kind]
        lv = "status code (keys are the codes as strings)" if kind == "nginx" else "level"
        spec = (f"`{out_json}` must be a JSON object with: `{total_key}` (number of {unit}), `{levels_key}` (count per "
                f"{lv}), `error_count`, `error_rate` (errors as a percentage of all {unit}, one decimal, e.g. 12.5), "
                f"`first_error` and `last_error` (timestamps as YYYY-MM-DD HH:MM:SS), and `top_{group}s` (the {top_n} "
                f"{group}s with the most errors, most first, ties alphabetical). `{out_csv}` must have the columns "
                f"{', '.join(header)} with one row per {group} that had at least one error, sorted by errors "
                f"(descending), then by {group}.")
        instruction = rng.choice([
            f"Something went wrong with {service} on {day.strftime('%B %d')}. Please go through the {what} `{log}` "
            f"and summarise the errors ({err_def}). {spec}",
            f"Can you analyse `{log}` (our {what})? I need an error summary and a per-{group} breakdown; {err_def}. "
            f"{spec}",
            f"I have to write up the {service} incident. From the {what} at `{log}`, count the errors ({err_def}) "
            f"and write two files. {spec}",
        ])
        checks = [
            Check("totals_by_level", "sys_json_matches", {"path": out_json, "expected": {
                total_key: total, levels_key: summary[levels_key]}}),
            Check("error_window", "sys_json_matches", {"path": out_json, "tol": 0.06, "expected": {
                "error_count": len(errors), "error_rate": rate, "first_error": first, "last_error": last}}),
            Check(f"top_{group}s", "sys_json_matches", {"path": out_json, "expected": {f"top_{group}s": top}}),
            Check(f"errors_by_{group}", "sys_table_rows", {"path": out_csv, "header": header, "rows": rows}),
            Check("breakdown_sorted", "sys_table_rows", {"path": out_csv, "header": header[:2],
                                                          "rows": [r[:2] for r in rows], "ordered": True}),
        ]
        # partial: counts right, but errors spotted by grepping for "error" (traces, INFO lines) and half a table
        wrong = dict(summary)
        wrong["error_count"] = len(errors) + sum(1 for line in text.splitlines() if "rror" in line) // 2 + 1
        wrong["first_error"], wrong["last_error"] = _fmt(entries[0]["time"]), _fmt(entries[-1]["time"])
        half = rows[: max(1, len(rows) // 2)][::-1]
        records = [{group: r[0], "errors": int(r[1]), "first_error": r[2], "last_error": r[3]} for r in rows]
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=[WorkspaceFile(path=log, content=text)],
            checks=checks,
            steps=[read(log), write(out_json, json.dumps(summary, indent=2) + "\n"), write(out_csv, to_csv(header, rows))],
            partial=[write(out_json, json.dumps(wrong, indent=2) + "\n"), write(out_csv, to_csv(header, half))],
            outputs=[
                Artifact(out_csv, TABLE, {"header": header, "rows": rows}, f"the per-{group} error breakdown ({out_csv})",
                         roles={"group": group, "value": "errors", "date": "last_error", "name": group}),
                Artifact(out_csv, RECORDS, records, f"the per-{group} error breakdown ({out_csv})",
                         roles={"group": group, "value": "errors", "date": "last_error", "name": group}),
            ],
            summary=f"summarise errors in {log}",
            fingerprint=hashlib.sha256(text.encode()).hexdigest()[:16],
        )


GENERATORS = [AnalyzeLogs()]
