"""edit_config: a service's configuration file (YAML, JSON, INI or .env) changed to a change request: values
bumped, keys renamed to a new schema, a section added, deprecated keys removed, with every other setting
and comment left as it was."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import yaml

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor, world
from clawgym.synth.grammar import one_of, requirements
from clawgym.synth.ops import operation, programs
from clawgym.synth.ops.base import (
    CONFIG,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    python,
    read,
    write,
)

FORMATS = ("yaml", "json", "ini", "env")
FILE_NAMES = {
    "yaml": ["config.yaml", "settings.yml", "app.yaml", "service.yaml", "{service}.yaml", "production.yml",
             "values.yaml", "deploy.yaml"],
    "json": ["config.json", "settings.json", "service.json", "appsettings.json", "{service}.json",
             "config.production.json", "runtime.json"],
    "ini": ["config.ini", "service.ini", "settings.cfg", "app.conf", "{service}.conf", "{service}.ini",
            "setup.cfg"],
    "env": [".env", "app.env", "service.env", "production.env", "{service}.env", ".env.production"],
}
CONFIG_FOLDERS = ["{service}", "{service}", "config", "deploy", "etc/{service}", "{service}/config", "ops",
                  "infra/{service}", "settings"]
# services per domain (besides the domain's projects and the persona's own folder names)
SERVICES = {
    "health": ["rota-sync", "vaccine-tracker", "patient-portal", "lab-results", "ward-board", "referral-inbox"],
    "education": ["gradebook", "homework-portal", "timetable-sync", "parent-mailer", "library-loans"],
    "food": ["order-desk", "menu-board", "stock-watch", "booking-api", "delivery-sync"],
    "software": ["billing-api", "auth-gateway", "ingest-worker", "status-page", "webhook-relay", "search-indexer"],
    "finance": ["ledger-sync", "invoice-runner", "payroll-export", "fx-rates", "expense-portal"],
    "farm": ["herd-tracker", "weather-station", "irrigation-ctl", "milk-log", "market-orders"],
    "creative": ["portfolio-site", "print-queue", "asset-store", "booking-calendar", "render-farm"],
    "legal": ["case-tracker", "docket-sync", "client-portal", "billing-hours", "filing-bot"],
    "general": ["home-server", "photo-backup", "family-calendar", "budget-app", "media-server"],
}
# one domain section a service of that domain may have: keys with values, a note, renamed keys
DOMAIN_SECTIONS = {
    "health": ("appointments", "booking rules", lambda rng: {
        "slot_min": rng.choice([10, 15, 20]), "reminder_hours": rng.choice([24, 48]),
        "max_per_day": rng.choice([24, 30, 36]), "clinic_code": rng.choice(["GP-N12", "PED-04", "ONC-7"])}),
    "education": ("grading", "how marks are rounded", lambda rng: {
        "pass_mark": rng.choice([40, 50, 60]), "decimals": rng.choice([1, 2]), "term_weeks": rng.choice([12, 13, 14]),
        "scale": rng.choice(["percent", "letters"])}),
    "food": ("orders", "kitchen tickets", lambda rng: {
        "cutoff": rng.choice(["14:00", "15:30", "16:00"]), "min_order": rng.choice([20, 25, 40]),
        "prep_min": rng.choice([20, 30, 45]), "max_covers": rng.choice([60, 80, 120])}),
    "software": ("workers", "queue consumers", lambda rng: {
        "concurrency": rng.choice([4, 8, 16]), "retries": rng.choice([3, 5]), "visibility_s": rng.choice([30, 60, 120]),
        "queue": rng.choice(["default", "ingest", "mail"])}),
    "finance": ("ledger", "posting rules", lambda rng: {
        "currency": rng.choice(["EUR", "GBP", "USD"]), "close_day": rng.choice([3, 5, 7]),
        "round_to": rng.choice([2, 3]), "max_batch": rng.choice([500, 1000, 2000])}),
    "farm": ("sensors", "field sensors", lambda rng: {
        "poll_min": rng.choice([5, 10, 15]), "moisture_alert": rng.choice([20, 25, 30]),
        "stations": rng.choice([3, 4, 6]), "units": rng.choice(["metric", "imperial"])}),
    "creative": ("exports", "image exports", lambda rng: {
        "max_px": rng.choice([2048, 3000, 4096]), "jpeg_quality": rng.choice([82, 85, 90]),
        "watermark": rng.choice(["on", "off"]), "thumbs": rng.choice([3, 4, 6])}),
    "legal": ("retention", "document retention", lambda rng: {
        "keep_years": rng.choice([6, 7, 10]), "purge_batch": rng.choice([50, 100, 200]),
        "review_days": rng.choice([30, 60, 90]), "hold_tag": rng.choice(["legal-hold", "litigation"])}),
    "general": ("sync", "what gets synced", lambda rng: {
        "every_min": rng.choice([15, 30, 60]), "max_files": rng.choice([500, 1000, 5000]),
        "keep_versions": rng.choice([3, 5, 10]), "target": rng.choice(["nas", "cloud", "usb"])}),
}
ENV_PREFIX = {"app": "APP", "server": "SERVER", "database": "DB", "cache": "CACHE", "storage": "STORAGE",
              "mail": "MAIL", "logging": "LOG", "scheduler": "JOBS", "metrics": "METRICS", "backup": "BACKUP",
              "alerts": "ALERTS", "rate_limit": "RATELIMIT", "tls": "TLS"}
RENAMES = {"max_conn": "max_connections", "timeout": "timeout_seconds", "log_lvl": "log_level",
           "pool_timeout": "pool_timeout_s", "ttl": "ttl_seconds", "keep_days": "retention_days",
           "rotate_mb": "max_size_mb", "sync_interval": "sync_interval_min", "size_mb": "max_memory_mb",
           "smtp_host": "smtp_server", "keep": "backup_count", "user": "username", "addr": "bind_address",
           "slot_min": "slot_minutes", "pass_mark": "pass_mark_pct", "prep_min": "prep_minutes",
           "visibility_s": "visibility_timeout_s", "round_to": "round_decimals", "poll_min": "poll_interval_min",
           "max_px": "max_pixels", "keep_years": "retention_years", "every_min": "interval_min"}
DEPRECATED = [("legacy_mode", False), ("use_old_parser", True), ("compat_v1", True), ("debug_toolbar", False),
              ("ssl_v3", False), ("xml_export", True), ("enable_flash_upload", False), ("sendfile_hack", True),
              ("old_csv_layout", True), ("fax_gateway", False), ("ie11_support", False), ("v1_api", True),
              ("poll_ftp", False), ("use_sqlite_fallback", True)]
DEP_NOTES = ["deprecated since 2.0", "remove after migration", "no longer read by the service", "old option, ignored",
             "kept for the old importer", "TODO: delete", None]


def _sections(rng, service: str, owner: str, domain: str = "general") -> dict[str, dict]:
    pool = {
        "server": {"addr": "0.0.0.0", "port": rng.choice([8000, 8080, 8443, 5000, 3000, 9000]),
                   "workers": rng.choice([2, 3, 4, 6]), "timeout": rng.choice([15, 30, 45, 60]),
                   "log_lvl": rng.choice(["info", "warning"]), "max_body_mb": rng.choice([5, 10, 20])},
        "database": {"host": rng.choice(["db.internal", "127.0.0.1", "postgres", f"{service}-db"]),
                     "port": rng.choice([5432, 3306, 5433]), "name": f"{service}_prod", "user": service,
                     "max_conn": rng.choice([10, 20, 25, 40]), "pool_timeout": rng.choice([5, 10, 30])},
        "cache": {"backend": rng.choice(["redis", "memcached"]), "host": "cache.internal",
                  "ttl": rng.choice([60, 300, 600, 900]), "size_mb": rng.choice([64, 128, 256, 512])},
        "storage": {"path": f"/srv/{service}/data", "quota_gb": rng.choice([20, 50, 100, 250]),
                    "keep_days": rng.choice([7, 14, 30, 90])},
        "mail": {"smtp_host": f"smtp.{service}.example.org", "smtp_port": rng.choice([25, 465, 587]),
                 "sender": f"noreply@{service}.example.org", "reply_to": flavor.email_of(owner)},
        "logging": {"file": f"/var/log/{service}/{service}.log", "rotate_mb": rng.choice([10, 50, 100]),
                    "keep": rng.choice([5, 7, 10])},
        "scheduler": {"enabled": rng.choice([True, False]), "sync_interval": rng.choice([5, 10, 15, 30]),
                      "nightly_at": rng.choice(["02:30", "03:00", "01:15"])},
    }
    names = ["server", "database"] + rng.sample(["cache", "storage", "mail", "logging", "scheduler"], k=rng.randint(2, 3))
    out = {"app": {"name": service, "version": f"{rng.randint(1, 4)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}",
                   "environment": rng.choice(["production", "staging"])}}
    for n in names:
        out[n] = dict(pool[n])
    sec, _note, make = DOMAIN_SECTIONS[domain]
    values = make(rng)
    if rng.random() < 0.6:
        out[sec] = values
    return out


def _new_section(rng, service: str, owner: str, existing: set[str]) -> tuple[str, dict]:
    pool = {
        "metrics": {"enabled": True, "port": rng.choice([9100, 9102, 9187, 9464]), "path": "/metrics"},
        "backup": {"enabled": True, "schedule": rng.choice(["0 3 * * *", "30 2 * * *", "0 4 * * 0"]),
                   "retention_days": rng.choice([7, 14, 30]), "target": f"/mnt/backup/{service}"},
        "alerts": {"email": flavor.email_of(owner), "threshold_pct": rng.choice([80, 85, 90]),
                   "quiet_hours": rng.choice(["22:00-07:00", "23:00-06:30"])},
        "rate_limit": {"enabled": True, "requests_per_minute": rng.choice([60, 120, 300]),
                       "burst": rng.choice([10, 20, 50])},
        "tls": {"enabled": True, "cert_file": f"/etc/ssl/{service}.pem", "key_file": f"/etc/ssl/private/{service}.key"},
    }
    name = rng.choice([n for n in pool if n not in existing])
    return name, pool[name]


# ------------------------------------------------------------------------------------------ rendering


def _yaml_scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    s = str(v)
    try:
        plain_ok = yaml.safe_load(s) == s and not any(c in s for c in "#:{}[],&*!|>'\"%@`") and s.strip() == s
    except yaml.YAMLError:
        plain_ok = False
    return s if plain_ok and s else json.dumps(s)


def _flat(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _env_value(v) -> str:
    s = _flat(v)
    return f'"{s}"' if any(c in s for c in " #*'\"") else s


def render(fmt: str, cfg: dict[str, dict], header: list[str], sec_notes: dict[str, str],
           key_notes: dict[tuple[str, str], str]) -> str:
    if fmt == "json":
        return json.dumps(cfg, indent=2) + "\n"
    lines: list[str] = [f"# {h}" if h else "#" for h in header]
    if fmt == "yaml":
        for sec, kv in cfg.items():
            lines.append("")
            if sec in sec_notes:
                lines.append(f"# {sec_notes[sec]}")
            lines.append(f"{sec}:")
            for k, v in kv.items():
                if (sec, k) in key_notes:
                    lines.append(f"  # {key_notes[(sec, k)]}")
                lines.append(f"  {k}: {_yaml_scalar(v)}")
    elif fmt == "ini":
        for sec, kv in cfg.items():
            lines.append("")
            if sec in sec_notes:
                lines.append(f"; {sec_notes[sec]}")
            lines.append(f"[{sec}]")
            for k, v in kv.items():
                if (sec, k) in key_notes:
                    lines.append(f"# {key_notes[(sec, k)]}")
                lines.append(f"{k} = {_flat(v)}")
    else:  # env
        for sec, kv in cfg.items():
            lines.append("")
            if sec in sec_notes:
                lines.append(f"# --- {sec_notes[sec]}")
            for k, v in kv.items():
                if (sec, k) in key_notes:
                    lines.append(f"# {key_notes[(sec, k)]}")
                lines.append(f"{env_key(sec, k)}={_env_value(v)}")
    return "\n".join(lines).lstrip("\n") + "\n"


def env_key(sec: str, key: str) -> str:
    return f"{ENV_PREFIX.get(sec, sec.upper())}_{key.upper()}"


def as_parsed(fmt: str, cfg: dict[str, dict]) -> dict:
    """What the checker's parser gives back for this config (the expected structure)."""
    if fmt in ("yaml", "json"):
        return {s: dict(kv) for s, kv in cfg.items()}
    if fmt == "ini":
        return {s: {k: _flat(v) for k, v in kv.items()} for s, kv in cfg.items()}
    return {env_key(s, k): _flat(v) for s, kv in cfg.items() for k, v in kv.items()}


def _sub(fmt: str, cfg: dict[str, dict], items: list[tuple[str, str]]) -> dict:
    """The expected structure restricted to (section, key) items, keyed the way the format is parsed."""
    out: dict = {}
    for s, k in items:
        v = cfg[s][k]
        if fmt == "env":
            out[env_key(s, k)] = _flat(v)
        else:
            out.setdefault(s, {})[k] = _flat(v) if fmt == "ini" else v
    return out


def _absent(fmt: str, items: list[tuple[str, str]]) -> list[str]:
    return [f"/{env_key(s, k)}" if fmt == "env" else f"/{s}/{k}" for s, k in items]


def _name(fmt: str, s: str, k: str) -> str:
    return env_key(s, k) if fmt == "env" else f"{s}.{k}"


# ------------------------------------------------------------------------------------------ program
# The reference solution by computing: PATH and EDITS (one line per bullet of the request, keys and values
# copied as the request writes them) on top of a fixed body per format, programs/edit_config_<fmt>.py. Text
# formats are edited line by line so comments and key order stay; JSON (no comments) is loaded and dumped with
# the original indentation.


class _EditLines(list):
    """EDITS as the program writes them, one edit a line (what :func:`programs.render` puts for its marker)."""

    def __repr__(self) -> str:
        return "[\n" + "".join(f"    {e!r},\n" for e in self) + "]"


def program(fmt: str, path: str, edits: list[tuple]) -> str:
    """The python3 script applying `edits` (('set', key, value), ('rename', key, new_key), ('drop', key, ...),
    ('add', section, {key: value}) or for .env ('add', 'KEY=value', ...)) to the config at `path`."""
    return programs.render(f"edit_config_{fmt}", path=path, edits=_EditLines(edits))


@dataclass
class _Config:
    """The data stage, the config as it is: the service, its settings with deprecated keys, the comments."""

    service: str
    owner: str
    project_word: str
    fmt: str
    cfg: dict[str, dict]
    header: list[str]  # the file's opening comment lines
    sec_notes: dict[str, str]
    key_notes: dict[tuple[str, str], str]
    dep_items: list[tuple[str, str]]  # the deprecated keys (to remove)


@dataclass
class _Change:
    """The data stage, the change: the edits, the config they give, the file before and after."""

    renames: list[tuple[str, str]]  # the keys to rename (to RENAMES[key])
    new_vals: dict[tuple[str, str], object]  # the values to change
    taken: set[tuple[str, str]]  # the keys some edit touches
    add_name: str  # the section to add
    add_kv: dict
    add_note: str
    new: dict[str, dict]  # the config as it should become
    new_sec_notes: dict[str, str]
    path: str
    before: str  # the file as it is
    after: str  # the file as it should become


@dataclass
class _Request:
    """The phrasing stage: the request's bullets (each with its line of the program's EDITS) and the request."""

    changes: list[tuple[str, tuple]]  # (bullet, edit), in the request's order
    instruction: str


@operation
class EditConfig(OperationGenerator):
    id = "edit_config"
    consumes: tuple[str, ...] = ()
    produces = (CONFIG,)
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        conf = self._config(ctx)
        change = self._change(ctx, conf)
        ask = self._request(ctx, conf, change, self._bullets(ctx, conf, change))
        fmt, path, changes = conf.fmt, change.path, ask.changes
        # partial: bumps and the new section done, renames and removals forgotten
        half: dict[str, dict] = {}
        for s, kv in conf.cfg.items():
            half[s] = {k: change.new_vals.get((s, k), v) for k, v in kv.items()}
        half[change.add_name] = dict(change.add_kv)
        partial_text = render(fmt, half, conf.header, change.new_sec_notes, conf.key_notes)
        return StepPlan(
            operation=self.id,
            instruction=ask.instruction,
            files=[WorkspaceFile(path=path, content=change.before)],
            checks=self._checks(conf, change),
            steps=[read(path), write(path, change.after)],
            program=[read(path), python(program(fmt, path, [e for _, e in changes]))],
            partial=[write(path, partial_text)],
            outputs=[Artifact(path, CONFIG, as_parsed(fmt, change.new), f"the updated {conf.service} config ({path})",
                              roles={"format": fmt})],
            summary=f"update {path} ({len(changes)} changes)",
            fingerprint=hashlib.sha256(change.after.encode()).hexdigest()[:16],
        )

    # ----------------------------------------------------------------------------------------- data
    @staticmethod
    def _config(ctx: OpContext) -> _Config:
        """The service (one of the domain's, or named after a project) and its config in one of the formats:
        the sections, 1-2 deprecated keys scattered over them, comments on sections and keys, a header."""
        rng = ctx.rng
        dk = flavor.persona_domain(ctx.persona)
        voc = flavor.DOMAINS[dk]
        project_word = rng.choice(voc["projects"])
        named = rng.choice(SERVICES[dk])
        service = named if rng.random() < 0.6 else \
            (flavor.slug(project_word).replace("_", "-")[:18].strip("-") or "app")
        owner = flavor.person(rng)
        fmt = rng.choice(FORMATS)
        cfg = _sections(rng, service.replace("-", "_") if fmt == "env" else service, owner, dk)
        # deprecated keys scattered over the sections
        dep_items: list[tuple[str, str]] = []
        key_notes: dict[tuple[str, str], str] = {}
        for name, val in rng.sample(DEPRECATED, k=rng.randint(1, 2)):
            sec = rng.choice([s for s in cfg if s != "app"])
            cfg[sec][name] = val
            dep_items.append((sec, name))
            note = rng.choice(DEP_NOTES)
            if note:
                key_notes[(sec, name)] = note
        sec_notes = {s: n for s, n in {
            "app": "application identity", "server": "HTTP listener", "database": "primary database",
            "cache": "shared cache", "storage": "where uploads live", "mail": "outgoing mail",
            "logging": "log files and rotation", "scheduler": "background jobs",
            DOMAIN_SECTIONS[dk][0]: DOMAIN_SECTIONS[dk][1]}.items() if s in cfg and rng.random() < 0.7}
        header = [f"{service} configuration", f"owner: {owner}", rng.choice([
            "edit with care: the service reads this on restart", "managed by hand, not by ansible (yet)",
            f"last reviewed {flavor.date_in(rng, 2025).isoformat()}"])]
        return _Config(service, owner, project_word, fmt, cfg, header, sec_notes, key_notes, dep_items)

    @staticmethod
    def _change(ctx: OpContext, conf: _Config) -> _Change:
        """The edits (1-2 keys to rename, 1-2 numbers and maybe the version to bump, a section to add, the
        deprecated keys to drop), the config they give, where the file lives, and the file before and after."""
        rng = ctx.rng
        service, owner, fmt, cfg, dep_items = conf.service, conf.owner, conf.fmt, conf.cfg, conf.dep_items
        taken = set(dep_items)
        # renames: keys whose name has a newer spelling
        cand = [(s, k) for s, kv in cfg.items() for k in kv if k in RENAMES and (s, k) not in taken]
        renames = rng.sample(cand, k=min(len(cand), rng.randint(1, 2)))
        taken |= set(renames)
        # bumps: numeric settings and the version
        nums = [(s, k) for s, kv in cfg.items() for k, v in kv.items()
                if isinstance(v, int) and not isinstance(v, bool) and (s, k) not in taken and k != "port"]
        bumps = rng.sample(nums, k=min(len(nums), rng.randint(1, 2)))
        new_vals: dict[tuple[str, str], object] = {}
        for s, k in bumps:
            old = cfg[s][k]
            new_vals[(s, k)] = rng.choice([old * 2, old + max(1, old // 2), old * 3])
        if rng.random() < 0.6:
            major, minor, _patch = (int(x) for x in cfg["app"]["version"].split("."))
            new_vals[("app", "version")] = rng.choice([f"{major}.{minor + 1}.0", f"{major + 1}.0.0"])
        taken |= set(new_vals)
        add_name, add_kv = _new_section(rng, service, owner, set(cfg))

        # the new config
        new: dict[str, dict] = {}
        for s, kv in cfg.items():
            new[s] = {}
            for k, v in kv.items():
                if (s, k) in dep_items:
                    continue
                if (s, k) in renames:
                    new[s][RENAMES[k]] = v
                elif (s, k) in new_vals:
                    new[s][k] = new_vals[(s, k)]
                else:
                    new[s][k] = v
        new[add_name] = dict(add_kv)
        new_key_notes = {sk: n for sk, n in conf.key_notes.items() if sk not in dep_items}
        add_note = {"metrics": "Prometheus scrape endpoint", "backup": "nightly backups", "alerts": "who gets paged",
                    "rate_limit": "per-client request limits", "tls": "certificates"}[add_name]
        new_sec_notes = dict(conf.sec_notes)
        if fmt != "json":
            new_sec_notes[add_name] = add_note

        folder = world.folder(ctx.persona, rng, [f.format(service=service) for f in CONFIG_FOLDERS], p_world=0.25)
        path = ctx.path(f"{folder}/{rng.choice(FILE_NAMES[fmt]).format(service=service)}")
        before = render(fmt, cfg, conf.header, conf.sec_notes, conf.key_notes)
        after = render(fmt, new, conf.header, new_sec_notes, new_key_notes)
        return _Change(renames, new_vals, taken, add_name, add_kv, add_note, new, new_sec_notes, path, before, after)

    # ----------------------------------------------------------------------------------------- phrasing
    @staticmethod
    def _bullets(ctx: OpContext, conf: _Config, change: _Change) -> list[tuple[str, tuple]]:
        """One bullet of the request per edit (values to change, keys to rename, the section to add, the
        deprecated keys to drop), each with its line of the program's EDITS, written as the request writes it."""
        rng = ctx.rng
        fmt, cfg, add_name, add_kv, dep_items = conf.fmt, conf.cfg, change.add_name, change.add_kv, conf.dep_items
        changes: list[tuple[str, tuple]] = []
        for (s, k), v in change.new_vals.items():
            old = cfg[s][k]
            slots = dict(key=_name(fmt, s, k), old=_flat(old), new=_flat(v))
            changes.append((one_of(rng, [
                "[raise|bump|change|increase|set] `{key}` from {old} to {new}",
                "`{key}`: {old} -> {new}",
                "`{key}` [should be|must become|goes up to|needs to be] {new} ([it's|currently] {old}[ now|])",
                "[set|change] `{key}` to {new}[ (was {old})|]",
            ], **slots), ("set", _name(fmt, s, k), _flat(v))))
        for s, k in change.renames:
            slots = dict(old=_name(fmt, s, k), new=_name(fmt, s, RENAMES[k]))
            changes.append((one_of(rng, [
                "rename `{old}` to `{new}` [(same value)|and keep its value|- the value stays]",
                "the new schema calls `{old}` `{new}`: rename it, keeping its value",
                "[use the new name|switch to the new name] `{new}` for `{old}`[ - don't change the value|]",
                "`{old}` [is now spelled|becomes|is called] `{new}` [(value unchanged)|from this release on]",
                "[move|change] the key `{old}` to `{new}`, [same value|value as it is]",
            ], **slots), ("rename", _name(fmt, s, k), _name(fmt, s, RENAMES[k]))))
        if fmt == "env":
            pairs = [f"{env_key(add_name, k)}={_flat(v)}" for k, v in add_kv.items()]
            adds = ", ".join(f"`{p}`" for p in pairs)
            changes.append((one_of(rng, [
                "add the {what} settings {adds}",
                "[new|additional] [variables|settings] for {what}: {adds}",
                "[append|add] {adds}[ (for {what})|]",
            ], what=add_name.replace("_", " "), adds=adds), ("add", *pairs)))
        else:
            lit = {"yaml": _yaml_scalar, "json": json.dumps, "ini": _flat}[fmt]
            adds = ", ".join(f"`{k}` = `{lit(v)}`" for k, v in add_kv.items())
            changes.append((one_of(rng, [
                "add a new `{sec}` section with {adds}",
                "[create|add] [a|the] `{sec}` section: {adds}",
                "we need [the|one more] `{sec}` [section|block] [too|now|for {note}]: {adds}",
            ], sec=add_name, adds=adds, note=change.add_note.lower()),
                ("add", add_name, {k: lit(v) for k, v in add_kv.items()})))
        dep_names = ", ".join(f"`{_name(fmt, s, k)}`" for s, k in dep_items)
        one = len(dep_items) == 1
        changes.append((one_of(rng, [
            "remove the deprecated {kw} {names}",
            "drop {names} - the new version no longer supports {it}",
            "[delete|get rid of] {names}[; nothing reads {it} any more| ({subj} {is} deprecated)|]",
            "{names} {has} to go[ (deprecated)|]",
        ], kw="key" if one else "keys", names=dep_names, it="it" if one else "them", subj="it" if one else "they",
            **{"is": "is" if one else "are"}, has="has" if one else "have"),
            ("drop", *(_name(fmt, s, k) for s, k in dep_items))))
        return changes

    @staticmethod
    def _request(ctx: OpContext, conf: _Config, change: _Change, changes: list[tuple[str, tuple]]) -> _Request:
        """The request: an opening (a deploy, a ticket, the owner's sign-off), the bullets in a shuffled order as
        a list or a sentence, and what must stay as it is."""
        rng = ctx.rng
        fmt, service = conf.fmt, conf.service
        kind = {"yaml": "YAML", "json": "JSON", "ini": "INI", "env": ".env"}[fmt]
        things = rng.choice(["other keys and values", "the remaining settings", "every other key and value"]
                            if fmt == "json" else
                            ["other keys, values and comments", "the remaining settings and the comments",
                             "every other key, value and comment", "the rest (keys, values, comments)"])
        keep = one_of(rng, [
            "Leave everything else ({things}) exactly as it is, and keep the file valid {kind}.",
            "Don't touch anything else: {things} stay as they are, and the file must still parse as {kind}.",
            "[Everything else|All {things}] [must stay|should stay|stay] as they are[ - byte for byte if "
            "you can|], and the result [has to be|must still be] valid {kind}.",
            "[Please keep|Keep] the {things} [untouched|as they are]; [the file must stay valid {kind}|it has to "
            "remain parseable {kind}].",
        ], things=things, kind=kind)
        ticket = f"{rng.choice(['CHG', 'OPS', 'INFRA', 'REQ', 'TKT'])}-{rng.randint(100, 9999)}"
        slots = dict(service=service, kind=kind, path=change.path, ticket=ticket, owner=conf.owner.split()[0],
                     version=change.new_vals.get(("app", "version"), conf.cfg["app"]["version"]), p=conf.project_word,
                     day=rng.choice(["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]),
                     n=len(changes))
        opening = one_of(rng, [
            "We're upgrading {service}. Please edit its {kind} config `{path}` in place:",
            "Update the {service} settings in `{path}` ({kind}) as follows:",
            "The config file `{path}` needs these changes before the next deploy:",
            "[Change request|Ticket] {ticket}[ from {owner}|]: [apply these edits|make these {n} changes] to "
            "`{path}`[ ({service}, {kind})|]:",
            "[Before|Ahead of] {day}'s [deploy|release|maintenance window][ of {service}|], `{path}` [needs|has to "
            "get] [the following|these] [changes|edits]:",
            "{owner} [asked for|signed off on] [a few|some|{n}] config changes for {service}[ ({p})|]; the file is "
            "`{path}` ({kind}).",
            "[Could you|Can you|Please] [edit|update|patch] `{path}` [for me|in place]? [It's the {kind} config of "
            "{service}.|{service} reads it on start.|]",
        ], **slots)
        rng.shuffle(changes)
        style = rng.choice(["-", "-", "*", "1.", "1)", "sentence"])
        items = [c for c, _ in changes]
        if style == "sentence":
            body = requirements(rng, [i[:1].lower() + i[1:] for i in items], style="sentence", fixed_order=True,
                                lead=rng.choice(["", "", "In short:"]))
        else:
            lead = rng.choice(["", "", "", "Changes:", "What to change:", "The edits:"])
            marks = [f"{n}{style[1]}" for n in range(1, len(items) + 1)] if style[0] == "1" else [style] * len(items)
            body = (lead + "\n" if lead else "") + "\n".join(f"{m} {i}" for m, i in zip(marks, items, strict=True))
        instruction = opening + ("\n" if style != "sentence" or rng.random() < 0.5 else " ") + body + \
            ("\n" if style != "sentence" or rng.random() < 0.5 else " ") + keep
        return _Request(changes, instruction)

    # ----------------------------------------------------------------------------------------- checks
    @staticmethod
    def _checks(conf: _Config, change: _Change) -> list[Check]:
        """Each kind of edit on its own (values, renames, the new section, the removals, the last two counting
        only in a config that still has its settings), and everything else kept, comments included."""
        fmt, path, cfg, new, renames, dep_items = conf.fmt, change.path, conf.cfg, change.new, change.renames, \
            conf.dep_items
        preserved = [(s, k) for s, kv in cfg.items() for k in kv if (s, k) not in change.taken]
        comments = [] if fmt == "json" else [h for h in conf.header if h] + [conf.sec_notes[s] for s in conf.sec_notes] + \
            [n for sk, n in conf.key_notes.items() if sk not in dep_items]
        renamed_new = {(s, RENAMES[k]) for s, k in renames}
        exp_renamed = _sub(fmt, new, sorted(renamed_new))
        exp_bumped = _sub(fmt, new, sorted(change.new_vals))
        exp_added = _sub(fmt, new, [(change.add_name, k) for k in change.add_kv])
        args = {"path": path, "fmt": fmt}
        kept_parts = [Check("changed", "sys_changed", {"path": path, "original": change.before}),
                      Check("preserved", "sys_config_matches", {**args, "expected": _sub(fmt, cfg, preserved)})]
        if comments:
            kept_parts.append(Check("comments", "text_has", {"path": path, "needles": comments}))
        # keys that must be gone count only in the config with its settings in it: an empty file has none of them
        return [
            Check("values_updated", "sys_config_matches", {**args, "expected": exp_bumped}),
            Check("keys_renamed", "gated", parts=[
                Check("", "sys_config_matches", {**args, "expected": exp_renamed, "absent": _absent(fmt, renames)}),
                Check("", "sys_config_matches", {**args, "expected": exp_renamed})]),
            Check("section_added", "sys_config_matches", {**args, "expected": exp_added}),
            Check("deprecated_removed", "gated", parts=[
                Check("", "sys_config_matches", {**args, "absent": _absent(fmt, dep_items)}),
                Check("", "sys_config_matches", {**args, "expected": _sub(fmt, cfg, preserved)})]),
            Check("other_settings_kept", "min_of", parts=kept_parts),
        ]


GENERATORS = [EditConfig()]
