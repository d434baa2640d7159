"""analyze_logs: an application log (levels, multi-line stack traces), an nginx access log or a syslog-style
log becomes an error summary: counts per level or status, error count and rate, first and last error, the
top offenders (JSON) and a per-component / per-endpoint / per-service error breakdown (CSV)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of, requirements
from clawgym.synth.ops import _files_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops.base import (
    RECORDS,
    TABLE,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    read,
    to_csv,
    write,
)

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


SERVICES = {
    "health": ["pharmacy-sync", "appointment-api", "lab-results-feed", "rota-app", "patient-portal"],
    "education": ["gradebook-sync", "parent-portal", "homework-api", "timetable-app", "library-catalogue"],
    "food": ["pos-bridge", "online-orders", "booking-widget", "stock-sync", "kitchen-display"],
    "software": ["billing-api", "search-svc", "auth-gateway", "ingest-worker", "notifications"],
    "finance": ["ledger-sync", "invoice-api", "bank-feed", "payroll-export", "expense-app"],
    "farm": ["herd-tracker", "weather-station", "irrigation-ctl", "milk-robot-bridge", "feed-planner"],
    "creative": ["print-shop", "gallery-site", "upload-api", "render-queue", "booking-page"],
    "legal": ["case-portal", "docket-sync", "billing-export", "intake-form", "doc-review"],
    "general": ["home-api", "photo-sync", "family-site", "backup-runner", "budget-app"],
}
DEVICES = {
    "health": ["fridge-1", "fridge-2", "freezer-a", "infusion-pump-3", "door-sensor", "ups-main"],
    "education": ["projector-12", "printer-staff", "door-hall", "boiler", "wifi-ap-3", "clock-gw"],
    "food": ["walk-in-cooler", "freezer-2", "oven-combi", "dishwasher", "hood-fan", "till-1"],
    "software": ["edge-gw", "ups-rack", "switch-core", "nas-01", "pdu-a", "sensor-hub"],
    "finance": ["printer-3f", "ups-main", "door-vault", "nas-backup", "router-1", "hvac-2"],
    "farm": ["barn-temp", "water-trough", "milking-robot", "silo-level", "gate-north", "pump-well"],
    "creative": ["kiln-1", "printer-a3", "nas-studio", "dehumidifier", "light-rig", "ups-desk"],
    "legal": ["scanner-1", "printer-2f", "door-records", "nas-01", "router-main", "shredder-bin"],
    "general": ["thermostat", "router", "nas", "garage-door", "printer", "solar-inverter"],
}


def _jsonl_log(rng, day, voc, service):
    """The app log as JSON lines (one object per entry; a stack trace in an "exc" field)."""
    text, entries = _app_log(rng, day, voc, service)
    out = []
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line[:4].isdigit() and line[4:5] == "-":
            blocks.append([line])
        else:
            blocks[-1].append(line)
    keys = rng.choice([("ts", "level", "logger", "msg"), ("time", "severity", "component", "message"),
                       ("timestamp", "lvl", "module", "text")])
    for block, e in zip(blocks, entries, strict=False):
        head = block[0]
        msg = head.split("] ", 1)[1] if "] " in head else head
        if ": " in msg and head.find("[") > 0 and head[24:25] == "[":
            msg = msg.split(": ", 1)[1]
        obj = {keys[0]: e["time"].strftime("%Y-%m-%dT%H:%M:%S.") + f"{e['time'].microsecond // 1000:03d}Z",
               keys[1]: e["level"], keys[2]: e["group"], keys[3]: msg}
        if len(block) > 1:
            obj["exc"] = "\n".join(block[1:])
        out.append(json.dumps(obj))
    return "\n".join(out) + "\n", entries


def _logfmt(rng, day, voc, service, dom="general"):
    """A device gateway's logfmt log: ts=... level=... device=... msg="..."."""
    devices = rng.sample(DEVICES.get(dom, DEVICES["general"]), k=rng.randint(4, 6))
    n = rng.randint(50, 110)
    times = _times(rng, day, n)
    lines, entries = [], []
    levels = [("debug", 8), ("info", 52), ("warn", 18), ("error", 17), ("fatal", 5)]
    for i, t in enumerate(times):
        dev = rng.choice(devices)
        level = "info" if i in (0, len(times) - 1) else _weighted(rng, levels)
        msg = {
            "debug": rng.choice(["poll ok", f"rssi=-{rng.randint(40, 90)}dBm", "keepalive"]),
            "info": rng.choice([f"reading {rng.randint(2, 40)}.{rng.randint(0, 9)}", "online", "reconnected",
                                f"battery {rng.randint(40, 100)}%", "recovered after earlier error"]),
            "warn": rng.choice([f"reading out of range ({rng.randint(9, 14)}.{rng.randint(0, 9)})", "slow response",
                                f"battery {rng.randint(5, 19)}%", "retrying upload"]),
            "error": rng.choice(["no response after 3 retries", "checksum mismatch", "upload failed: HTTP 503",
                                 f"sensor fault code E{rng.randint(10, 99)}"]),
            "fatal": rng.choice(["device offline", "firmware crash, rebooting"]),
        }[level]
        ts = t.strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(f'ts={ts} level={level} device={dev} gw={service} msg="{msg}"')
        entries.append({"time": t.replace(microsecond=0), "level": level, "group": dev})
    return "\n".join(lines) + "\n", entries


def _fmt(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def _is_error(kind: str, e: dict) -> bool:
    """Whether a log entry of this kind of log is an error (a 5xx status, level error/fatal, ERROR/CRITICAL)."""
    if kind == "nginx":
        return int(e["level"]) >= 500
    if kind == "logfmt":
        return e["level"] in ("error", "fatal")
    return e["level"] in ERROR_LEVELS


@dataclass
class _Log:
    """The data stage: the log itself."""

    service: str
    day: dt.date
    kind: str  # app, nginx, syslog, jsonl or logfmt
    text: str
    entries: list[dict]  # {time, level, group}; the excluded source's left out
    excluded: str | None  # the source whose lines do not count


@dataclass
class _Format:
    """The log's path, what its groups and counts are called, and the request's definition of an error."""

    log: str
    group: str
    unit: str
    levels_key: str
    total_key: str
    err_def: str


@dataclass
class _Results:
    """The expected results: the JSON summary and its key names, the breakdown table, the output paths."""

    total: int
    n_errors: int
    rate: float
    top_n: int
    count_key: str
    rate_key: str
    first_key: str
    last_key: str
    errs_col: str
    tsfmt: str  # how the request spells the timestamp format
    first: str
    last: str
    top_key: str
    summary: dict
    header: list[str]
    rows: list[list[str]]
    out_json: str
    out_csv: str


@operation
class AnalyzeLogs(OperationGenerator):
    id = "analyze_logs"
    consumes: tuple[str, ...] = ()
    produces = (RECORDS, TABLE)
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        lg = self._log(ctx)
        fm = self._format(ctx, lg)
        res = self._results(ctx, lg, fm)
        instruction = self._request(ctx, lg, fm, res)
        checks = self._checks(fm, res)
        text, entries, log, group = lg.text, lg.entries, fm.log, fm.group
        summary, header, rows, out_json, out_csv = res.summary, res.header, res.rows, res.out_json, res.out_csv
        count_key, first_key, last_key, errs_col = res.count_key, res.first_key, res.last_key, res.errs_col
        # partial: counts right, but errors spotted by grepping for "error" (traces, INFO lines) and half a table
        wrong = dict(summary)
        wrong[count_key] = res.n_errors + sum(1 for line in text.splitlines() if "rror" in line) // 2 + 1
        wrong[first_key], wrong[last_key] = _fmt(entries[0]["time"]), _fmt(entries[-1]["time"])
        half = rows[: max(1, len(rows) // 2)][::-1]
        records = [{group: r[0], errs_col: int(r[1]), first_key: r[2], last_key: r[3]} for r in rows]
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=[WorkspaceFile(path=log, content=text)],
            checks=checks,
            steps=[read(log), write(out_json, json.dumps(summary, indent=2) + "\n"), write(out_csv, to_csv(header, rows))],
            partial=[write(out_json, json.dumps(wrong, indent=2) + "\n"), write(out_csv, to_csv(header, half))],
            outputs=[
                Artifact(out_csv, TABLE, {"header": header, "rows": rows}, f"the per-{group} error breakdown ({out_csv})",
                         roles={"group": group, "value": errs_col, "date": last_key, "name": group}),
                Artifact(out_csv, RECORDS, records, f"the per-{group} error breakdown ({out_csv})",
                         roles={"group": group, "value": errs_col, "date": last_key, "name": group}),
            ],
            summary=f"summarise errors in {log}",
            fingerprint=hashlib.sha256(text.encode()).hexdigest()[:16],
        )

    # ------------------------------------------------------------------------------------------ data
    def _log(self, ctx: OpContext) -> _Log:
        """The log: its service, day and kind, its text and entries (drawn again until it has an error), and the
        one source whose lines do not count, if the persona has such an exception."""
        rng = ctx.rng
        persona = ctx.persona
        voc = flavor.vocab(persona.domain, persona.occupation)
        dom = V.domain(persona)
        service = rng.choice([flavor.slug(rng.choice(voc["projects"])).replace("_", "-"),
                              rng.choice(SERVICES.get(dom, SERVICES["general"]))])
        day = flavor.date_in(rng, rng.choice([2025, 2026, 2026]))
        kind = rng.choice(["app", "nginx", "syslog", "jsonl", "logfmt"])
        if kind == "logfmt":
            def maker(r, d, v, s):
                return _logfmt(r, d, v, s, dom)
        else:
            maker = {"app": _app_log, "nginx": _nginx, "syslog": _syslog, "jsonl": _jsonl_log}[kind]

        while True:  # a log without a single error would make an empty report
            text, entries = maker(rng, day, voc, service)
            if any(_is_error(kind, e) for e in entries):
                break
        # the persona's exception: one source whose lines do not count at all (a test instance, a known-noisy
        # probe); only when others have errors too
        err_groups = sorted({e["group"] for e in entries if _is_error(kind, e)})
        excluded = None
        if len(err_groups) >= 2 and rng.random() < 0.3:
            excluded = rng.choice(err_groups)
            entries = [e for e in entries if e["group"] != excluded]
        return _Log(service, day, kind, text, entries, excluded)

    def _format(self, ctx: OpContext, lg: _Log) -> _Format:
        """Where the log lies, what its groups are called (component, endpoint, service, device), the keys of
        the summary's counts, and how the request defines an error in this format."""
        rng = ctx.rng
        service, day, kind, text = lg.service, lg.day, lg.kind, lg.text
        ext = {"jsonl": "jsonl", "logfmt": "log"}.get(kind, "log")
        ldir = rng.choice(["logs", "logs", "log", "var/log", "incident", f"{service}_logs", "support"])
        if kind in ("app", "jsonl"):
            log = ctx.path(rng.choice([f"{ldir}/{service}.{ext}", f"{ldir}/app.{ext}",
                                       f"{service}-{day.isoformat()}.{ext}", f"{ldir}/{service}-{day:%Y%m%d}.{ext}"]))
            group, unit, levels_key, total_key = "component", "entries", "by_level", "total_entries"
            if kind == "jsonl":
                jkeys = list(json.loads(text.split("\n", 1)[0]))
                group = jkeys[2]
                err_def = V.phrase("[one JSON object per line|each line is one JSON object]; [an error is any entry whose|errors are the entries whose|count an entry as an error when its] `{lk}` "
                                   "is ERROR or CRITICAL, and the {g} is the `{g}` field", rng, lk=jkeys[1], g=group)
            else:
                err_def = V.phrase("[an error is any ERROR or CRITICAL entry|errors = entries at ERROR or CRITICAL|ERROR and CRITICAL entries are the errors] (stack-trace lines belong to the entry "
                                   "[above|before] them[ and are not entries themselves|])", rng)
        elif kind == "nginx":
            log = ctx.path(rng.choice([f"{ldir}/access.log", "nginx/access.log", f"{ldir}/{service}_access.log",
                                       f"{ldir}/access-{day:%Y%m%d}.log"]))
            group, unit, levels_key, total_key = "endpoint", "requests", "by_status", "total_requests"
            err_def = V.phrase("[an error is any response with a 5xx status|errors are the 5xx responses|a 5xx status counts as an error]; the endpoint is the path without its "
                               "query string", rng)
        elif kind == "syslog":
            log = ctx.path(rng.choice([f"{ldir}/syslog", f"{ldir}/messages.log", "var/log/syslog",
                                       f"{ldir}/{service}.syslog"]))
            group, unit, levels_key, total_key = "service", "entries", "by_level", "total_entries"
            err_def = V.phrase("the log is from {y}; the level is the bracketed tag after the service name, and "
                               "[an error is any ERROR or CRITICAL entry|the errors are the ERROR and CRITICAL entries|count as errors the "
                               "ERROR and CRITICAL entries]", rng, y=day.year)
        else:
            log = ctx.path(rng.choice([f"{ldir}/{service}.log", f"{ldir}/gateway.log", f"{ldir}/devices.log",
                                       f"{service}-{day:%Y%m%d}.log"]))
            group, unit, levels_key, total_key = "device", "entries", "by_level", "total_entries"
            err_def = V.phrase("the format is logfmt (key=value); [an error is any line with|errors are the lines with|count as an error any line with] level=error or "
                               "level=fatal, and the device is the device= field", rng)
            if rng.random() < 0.5:
                group = "sensor"
        return _Format(log, group, unit, levels_key, total_key, err_def)

    def _results(self, ctx: OpContext, lg: _Log, fm: _Format) -> _Results:
        """The expected results: the JSON summary (with its key names) and the per-group breakdown table, and
        where the two go."""
        rng = ctx.rng
        entries, kind, service, day = lg.entries, lg.kind, lg.service, lg.day
        group, levels_key, total_key = fm.group, fm.levels_key, fm.total_key
        errors = [e for e in entries if _is_error(kind, e)]
        by_level: dict[str, int] = {}
        for e in entries:
            by_level[e["level"]] = by_level.get(e["level"], 0) + 1
        per: dict[str, list] = {}
        for e in errors:
            per.setdefault(e["group"], []).append(e["time"])
        breakdown = sorted(per.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        top_n = min(len(breakdown), rng.choice([2, 3, 3, 4, 5]))
        top = [g for g, _ in breakdown[:top_n]]
        total = len(entries)
        rate = round(100.0 * len(errors) / total, 1)
        count_key = rng.choice(["error_count", "error_count", "errors_total", "n_errors"])
        rate_key = rng.choice(["error_rate", "error_rate", "error_pct", "error_percent"])
        first_key, last_key = rng.choice([("first_error", "last_error"), ("first_error_at", "last_error_at"),
                                          ("earliest_error", "latest_error")])
        errs_col = rng.choice(["errors", "errors", "error_count", "count"])
        tsfmt = rng.choice(["YYYY-MM-DD HH:MM:SS", "YYYY-MM-DD HH:MM:SS", "YYYY-MM-DDTHH:MM:SS"])
        first, last = _fmt(errors[0]["time"]), _fmt(errors[-1]["time"])
        top_key = f"top_{group}s"
        summary = {total_key: total, levels_key: dict(sorted(by_level.items())), count_key: len(errors),
                   rate_key: rate, first_key: first, last_key: last, top_key: top}
        header = [group, errs_col, first_key, last_key]
        rows = [[g, str(len(ts)), _fmt(min(ts)), _fmt(max(ts))] for g, ts in breakdown]

        base = {"app": "errors", "jsonl": "errors", "nginx": "http_errors", "syslog": "syslog_errors",
                "logfmt": "device_errors"}[kind]
        rdir = rng.choice(["reports", "reports", "analysis", "incident_notes", ""])
        pre = f"{rdir}/" if rdir else ""
        out_json = ctx.path(rng.choice([f"{pre}{base}_summary.json", f"{pre}log_summary.json",
                                        f"{pre}{service}_{day:%Y%m%d}_summary.json", f"{pre}error_stats.json"]))
        out_csv = ctx.path(rng.choice([f"{pre}{base}_by_{group}.csv", f"{pre}{group}_errors.csv",
                                       f"{pre}errors_per_{group}.csv", f"{pre}{service}_{group}_breakdown.csv"]))
        return _Results(total, len(errors), rate, top_n, count_key, rate_key, first_key, last_key, errs_col, tsfmt,
                        first, last, top_key, summary, header, rows, out_json, out_csv)

    # ------------------------------------------------------------------------------------------ phrasing
    def _request(self, ctx: OpContext, lg: _Log, fm: _Format, res: _Results) -> str:
        """The request: the incident, the excluded source, the JSON summary's keys (as prose or a skeleton) and
        the breakdown table's layout."""
        rng = ctx.rng
        persona = ctx.persona
        kind, excluded, service, day, text, entries = lg.kind, lg.excluded, lg.service, lg.day, lg.text, lg.entries
        log, group, unit, levels_key, total_key, err_def = (fm.log, fm.group, fm.unit, fm.levels_key, fm.total_key,
                                                            fm.err_def)
        count_key, rate_key, first_key, last_key, tsfmt = (res.count_key, res.rate_key, res.first_key, res.last_key,
                                                           res.tsfmt)
        top_key, top_n, header, out_json, out_csv, errs_col = (res.top_key, res.top_n, res.header, res.out_json,
                                                               res.out_csv, res.errs_col)
        what = {"app": "application log", "jsonl": "JSON-lines application log", "nginx": "nginx access log",
                "syslog": "syslog", "logfmt": "device gateway log"}[kind]
        lv = "status code, keys are the codes as strings" if kind == "nginx" else "level, spelled as in the log"
        if excluded is not None:
            why = V.one_phrase(rng, [
                "that's [the|our] [test|staging] [instance|box|setup]",
                "[it's|that one is] a known-noisy [probe|monitor|check] [we're replacing|I already reported]",
                "{who} [was testing|was poking at] it that day",
            ], who=flavor.person(rng).split()[0])
            excl_sent = one_of(rng, [
                "[Ignore|Leave out|Skip] every {u} {fr} {g} `{x}` ({why}): [it doesn't count anywhere|none of it "
                "counts], not even in the totals.",
                "One thing: {u}s {fr} {g} `{x}` [don't count at all|are out of scope] - {why} - so leave them out "
                "of [every number|all the counts], totals included.",
            ], u="request" if kind == "nginx" else "line", fr="to" if kind == "nginx" else "from",
                g=group, x=excluded, why=why)
        else:
            excl_sent = ""
        spec_items = [
            V.one_phrase(rng, ["`{tk}` (number of {unit})", "`{tk}`: how many {unit} [the log has|there are|in "
                               "total]", "`{tk}` = the total count of {unit}"], tk=total_key, unit=unit),
            V.one_phrase(rng, ["`{lk}` (count per {lv})", "`{lk}`: an object mapping each {lv0} to its count{lvx}",
                               "`{lk}` = {{lv0}: count}{lvx}"], lk=levels_key, lv=lv, lv0=lv.split(",")[0],
                         lvx="" if "," not in lv else " (" + lv.split(", ", 1)[1] + ")"),
            V.one_phrase(rng, ["`{ck}` (the number of errors)", "`{ck}`: how many errors", "`{ck}` = error total"],
                         ck=count_key),
            V.one_phrase(rng, ["`{rk}` (errors as a percentage of all {unit}, one decimal, e.g. {ex})",
                               "`{rk}`: errors / all {unit} x 100, rounded to one decimal (like {ex})",
                               "`{rk}` = error share in percent with one decimal place (e.g. {ex})"], rk=rate_key,
                         unit=unit, ex=rng.choice(["12.5", "7.3", "20.0", "4.8", "9.1", "15.6"])),
            V.one_phrase(rng, ["`{fk}` and `{lk2}` (timestamps as {fmt})",
                               "`{fk}` / `{lk2}`: when the first and the last error happened, as {fmt}",
                               "the [earliest|first] and [latest|last] error times in `{fk}` and `{lk2}` ({fmt})"],
                         fk=first_key, lk2=last_key, fmt=tsfmt),
            V.one_phrase(rng, ["`{tk}` (the {n} {g}s with the most errors, most first, ties alphabetical)",
                               "`{tk}`: a list of the top {n} {g}s by error count (ties in alphabetical order)",
                               "`{tk}` = the {n} worst {g}s, most errors first, alphabetical on ties"],
                         tk=top_key, n=top_n, g=group),
        ]
        lead = expand("`{p}` [must be|should be|is to be] a JSON object with[:| these keys:]", rng, p=out_json)
        json_spec = requirements(rng, spec_items, lead=lead, fixed_order=rng.random() < 0.5,
                                 style=rng.choice(["sentence", "sentence", "bullets", "numbered"]))
        if rng.random() < 0.3:  # the shape as a skeleton instead of prose
            lk0 = "500" if kind == "nginx" else {"logfmt": "error"}.get(kind, "ERROR")
            skel = (f'{{"{total_key}": <int>, "{levels_key}": {{"{lk0}": <int>, ...}}, "{count_key}": <int>, '
                    f'"{rate_key}": <percent, 1 decimal>, "{first_key}": "<{tsfmt}>", "{last_key}": "<{tsfmt}>", '
                    f'"{top_key}": [<top {top_n} {group}s, most errors first, ties alphabetical>]}}')
            json_spec = one_of(rng, [
                "`{p}` should look like this:\n{skel}\n[({lv_note})|where the {lk} keys are each {lv0} as it "
                "appears in the log]",
                "[Shape of|Format for] `{p}`: {skel} - {lk} counts [every|each] {lv0}{lv_x}.",
            ], p=out_json, skel=skel, lk=levels_key, lv0=lv.split(",")[0], lv_note=f"{levels_key}: count per {lv}",
                lv_x="" if "," not in lv else " (" + lv.split(", ", 1)[1] + ")")
        csv_spec = one_of(rng, [
            "`{csv}` must have the columns {cols} with one row per {g} that had at least one error, sorted by {e} "
            "(descending), then by {g}.",
            "[For|In] `{csv}`: columns {cols}, a row for [each|every] {g} with at least one error, [ordered|sorted] "
            "by {e} [from most to fewest|high to low|descending] and then by {g} name.",
            "[Also|Then] write `{csv}` ({cols}) - one row per {g} [that had|with] errors, [most errors first|sorted "
            "by {e} descending], ties by {g}.",
        ], csv=out_csv, cols=", ".join(header), g=group, e=errs_col)
        head = one_of(rng, [
            "Something went wrong with {service} on {date}. [Please|Could you] go through the {what} `{log}` and "
            "summarise the errors ({err_def}).",
            "Can you analyse `{log}` (our {what})? I need an error summary and a per-{g} breakdown; {err_def}.",
            "I have to write up the {service} incident [from|of] {date}. From the {what} at `{log}`, count the "
            "errors ({err_def}) and write two files.",
            "[{service} has been [flaky|acting up|throwing errors] since {date}|{service} [fell over|fell over "
            "twice|threw errors] on {date}][ and {who} [noticed|complained]|]. `{log}` is the {what}; {err_def}. "
            "[Can you|Could you] [summarise|break down] [what failed|the errors]?",
            "[Quick|Small] [log job|analysis job]: `{log}` ({what} of {service}, {date}). {ed_cap}.",
            "[Users|People|{who}] [reported|noticed] [failures|errors|problems] [with|in] {service} on {date}. "
            "[Here's|I saved] the {what}: `{log}` ({err_def}).",
            "[For the post-mortem|For my incident notes|For the weekly report] I [need|want] [stats|numbers] from "
            "`{log}`, the {what} of {service} ({date}). {ed_cap}.",
        ], service=service, date=V.day_text(rng, day), what=what, log=log, err_def=err_def, g=group,
            who=flavor.person(rng).split()[0], ed_cap=err_def[:1].upper() + err_def[1:])
        hint = one_of(rng, ["", "", "", "[I think|My guess is] it started [after|around] the [deploy|update|"
                           "power cut|router swap|config change] [that morning|at lunchtime|the night before].",
                           "[Don't bother|No need] [fixing anything|to fix anything] yet, I just need the numbers."])
        tail = [json_spec, csv_spec]
        if rng.random() < 0.3:
            tail.reverse()
        counts = one_of(rng, ["", "", "[The log has|It's] {n} lines[ long|].", "[It covers|The log covers] "
                             "{t0} to {t1}.", "{g}s [in it|involved]: {gs}."],
                       n=len(text.splitlines()), t0=entries[0]["time"].strftime("%H:%M"),
                       t1=entries[-1]["time"].strftime("%H:%M"), g=group.capitalize(),
                       gs=V.listing(sorted({e["group"] for e in entries})[:6]))
        instruction = V.glue(head, V.story(persona, rng, "logs", 0.5), counts, excl_sent, hint, *tail, V.timing(rng))
        return instruction

    # ------------------------------------------------------------------------------------------ checks
    @staticmethod
    def _checks(fm: _Format, res: _Results) -> list[Check]:
        """Totals and counts per level, the error window, the top groups, the breakdown and its order."""
        group, levels_key, total_key = fm.group, fm.levels_key, fm.total_key
        out_json, out_csv, header, rows, summary = res.out_json, res.out_csv, res.header, res.rows, res.summary
        count_key, rate_key, first_key, last_key = res.count_key, res.rate_key, res.first_key, res.last_key
        total, rate, first, last, top_key = res.total, res.rate, res.first, res.last, res.top_key
        top = summary[top_key]
        return [
            Check("totals_by_level", "sys_json_matches", {"path": out_json, "expected": {
                total_key: total, levels_key: summary[levels_key]}}),
            Check("error_window", "sys_json_matches", {"path": out_json, "tol": 0.06, "expected": {
                count_key: res.n_errors, rate_key: rate, first_key: first, last_key: last}}),
            Check(f"top_{group}s", "sys_json_matches", {"path": out_json, "expected": {top_key: top}}),
            Check(f"errors_by_{group}", "sys_table_rows", {"path": out_csv, "header": header, "rows": rows}),
            Check("breakdown_sorted", "sys_table_rows", {"path": out_csv, "header": header[:2],
                                                          "rows": [r[:2] for r in rows], "ordered": True}),
        ]


GENERATORS = [AnalyzeLogs()]
