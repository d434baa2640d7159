"""edit_config: a service's configuration file (YAML, JSON, INI or .env) changed to a change request: values
bumped, keys renamed to a new schema, a section added, deprecated keys removed, with every other setting
and comment left as it was."""

from __future__ import annotations

import hashlib
import json

import yaml

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.ops.base import CONFIG, Artifact, Check, OpContext, StepPlan, python, read, write

FORMATS = ("yaml", "json", "ini", "env")
FILE_NAMES = {
    "yaml": ["config.yaml", "settings.yml", "app.yaml", "service.yaml"],
    "json": ["config.json", "settings.json", "service.json", "appsettings.json"],
    "ini": ["config.ini", "service.ini", "settings.cfg", "app.conf"],
    "env": [".env", "app.env", "service.env", "production.env"],
}
ENV_PREFIX = {"app": "APP", "server": "SERVER", "database": "DB", "cache": "CACHE", "storage": "STORAGE",
              "mail": "MAIL", "logging": "LOG", "scheduler": "JOBS", "metrics": "METRICS", "backup": "BACKUP",
              "alerts": "ALERTS", "rate_limit": "RATELIMIT", "tls": "TLS"}
RENAMES = {"max_conn": "max_connections", "timeout": "timeout_seconds", "log_lvl": "log_level",
           "pool_timeout": "pool_timeout_s", "ttl": "ttl_seconds", "keep_days": "retention_days",
           "rotate_mb": "max_size_mb", "sync_interval": "sync_interval_min", "size_mb": "max_memory_mb",
           "smtp_host": "smtp_server", "keep": "backup_count", "user": "username", "addr": "bind_address"}
DEPRECATED = [("legacy_mode", False), ("use_old_parser", True), ("compat_v1", True), ("debug_toolbar", False),
              ("ssl_v3", False), ("xml_export", True), ("enable_flash_upload", False), ("sendfile_hack", True)]
DEP_NOTES = ["deprecated since 2.0", "remove after migration", "no longer read by the service", "old option, ignored",
             None]


def _sections(rng, service: str, owner: str) -> dict[str, dict]:
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
# copied as the request writes them) on top of a fixed body per format. Text formats are edited line by line
# so comments and key order stay; JSON (no comments) is loaded and dumped with the original indentation.

_LINE_HEAD = """L = open(PATH).read().splitlines()
"""
_LINE_LOOP = """for e in EDITS:
    if e[0] == 'set':
        i = find(e[1])
        L[i] = {set_}
    elif e[0] == 'rename':
        i = find(e[1])
        L[i] = L[i].replace({rename}, 1)
    elif e[0] == 'drop':
        for key in e[1:]:
            i = find(key)
            del L[i]
            if L[i - 1].lstrip().startswith('#'):
                del L[i - 1]
    elif e[0] == 'add':
        {add}
open(PATH, 'w').write('\\n'.join(L) + '\\n')
print('applied', len(EDITS), 'changes to', PATH)
"""
_KEY_RENAME = "e[1].split('.')[1], e[2].split('.')[1]"
_SECTIONED = _LINE_HEAD + """def find(key):
    s, k = key.split('.')
    i = L.index({head}) + 1
    while L[i].split('{sep}')[0].strip() != k:
        assert not {stop}, key
        i += 1
    return i
"""
BODIES = {
    "yaml": _SECTIONED.format(head="s + ':'", sep=":", stop="L[i][:1].isalnum()") + _LINE_LOOP.format(
        set_="L[i].split(':')[0] + ': ' + e[2]", rename=_KEY_RENAME,
        add="L += ['', e[1] + ':'] + ['  %s: %s' % kv for kv in e[2].items()]"),
    "ini": _SECTIONED.format(head="'[' + s + ']'", sep="=", stop="L[i].startswith('[')") + _LINE_LOOP.format(
        set_="L[i].split('=')[0] + '= ' + e[2]", rename=_KEY_RENAME,
        add="L += ['', '[' + e[1] + ']'] + ['%s = %s' % kv for kv in e[2].items()]"),
    "env": _LINE_HEAD + """def find(key):
    return [x.split('=')[0].strip() for x in L].index(key)
def q(v):
    return '"' + v + '"' if any(c in v for c in ' #*') else v
""" + _LINE_LOOP.format(
        set_="e[1] + '=' + q(e[2])", rename="e[1], e[2]",
        add="L += [''] + [x.split('=')[0] + '=' + q(x.split('=', 1)[1]) for x in e[1:]]"),
    "json": """import json
def val(x):
    try:
        return json.loads(x)
    except ValueError:
        return x
C = json.load(open(PATH))
for e in EDITS:
    s, _, k = e[1].partition('.')
    if e[0] == 'set':
        C[s][k] = val(e[2])
    elif e[0] == 'rename':
        n = e[2].split('.')[1]
        C[s] = {n if a == k else a: b for a, b in C[s].items()}
    elif e[0] == 'drop':
        for key in e[1:]:
            s, k = key.split('.')
            del C[s][k]
    elif e[0] == 'add':
        C[e[1]] = {a: val(b) for a, b in e[2].items()}
open(PATH, 'w').write(json.dumps(C, indent=2) + '\\n')
print('applied', len(EDITS), 'changes to', PATH)
""",
}


def program(fmt: str, path: str, edits: list[tuple]) -> str:
    """The python3 script applying `edits` (('set', key, value), ('rename', key, new_key), ('drop', key, ...),
    ('add', section, {key: value}) or for .env ('add', 'KEY=value', ...)) to the config at `path`."""
    lines = "".join(f"    {e!r},\n" for e in edits)
    return f"PATH = {path!r}\nEDITS = [\n{lines}]\n" + BODIES[fmt]


class EditConfig:
    id = "edit_config"
    consumes: tuple[str, ...] = ()
    produces = (CONFIG,)
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        service = flavor.slug(rng.choice(voc["projects"])).replace("_", "-")[:18].strip("-") or "app"
        owner = flavor.person(rng)
        fmt = rng.choice(FORMATS)
        cfg = _sections(rng, service.replace("-", "_") if fmt == "env" else service, owner)
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
            "logging": "log files and rotation", "scheduler": "background jobs"}.items() if s in cfg and rng.random() < 0.7}
        header = [f"{service} configuration", f"owner: {owner}", rng.choice([
            "edit with care: the service reads this on restart", "managed by hand, not by ansible (yet)",
            f"last reviewed {flavor.date_in(rng, 2025).isoformat()}"])]

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
        new_key_notes = {sk: n for sk, n in key_notes.items() if sk not in dep_items}
        add_note = {"metrics": "Prometheus scrape endpoint", "backup": "nightly backups", "alerts": "who gets paged",
                    "rate_limit": "per-client request limits", "tls": "certificates"}[add_name]
        new_sec_notes = dict(sec_notes)
        if fmt != "json":
            new_sec_notes[add_name] = add_note

        path = ctx.path(f"{service}/{rng.choice(FILE_NAMES[fmt])}")
        before = render(fmt, cfg, header, sec_notes, key_notes)
        after = render(fmt, new, header, new_sec_notes, new_key_notes)

        # the change request, each bullet with its line in the program's EDITS
        changes: list[tuple[str, tuple]] = []
        for (s, k), v in new_vals.items():
            old = cfg[s][k]
            verb = rng.choice(["raise", "bump", "change"])
            changes.append((f"{verb} `{_name(fmt, s, k)}` from {_flat(old)} to {_flat(v)}",
                            ("set", _name(fmt, s, k), _flat(v))))
        for s, k in renames:
            changes.append((rng.choice([
                f"rename `{_name(fmt, s, k)}` to `{_name(fmt, s, RENAMES[k])}` (same value)",
                f"the new schema calls `{_name(fmt, s, k)}` `{_name(fmt, s, RENAMES[k])}`: rename it, keeping its value",
            ]), ("rename", _name(fmt, s, k), _name(fmt, s, RENAMES[k]))))
        if fmt == "env":
            pairs = [f"{env_key(add_name, k)}={_flat(v)}" for k, v in add_kv.items()]
            adds = ", ".join(f"`{p}`" for p in pairs)
            changes.append((f"add the {add_name.replace('_', ' ')} settings {adds}", ("add", *pairs)))
        else:
            lit = {"yaml": _yaml_scalar, "json": json.dumps, "ini": _flat}[fmt]
            adds = ", ".join(f"`{k}` = `{lit(v)}`" for k, v in add_kv.items())
            changes.append((f"add a new `{add_name}` section with {adds}",
                            ("add", add_name, {k: lit(v) for k, v in add_kv.items()})))
        dep_names = ", ".join(f"`{_name(fmt, s, k)}`" for s, k in dep_items)
        changes.append((rng.choice([f"remove the deprecated {'key' if len(dep_items) == 1 else 'keys'} {dep_names}",
                                    f"drop {dep_names} - the new version no longer supports "
                                    f"{'it' if len(dep_items) == 1 else 'them'}"]),
                        ("drop", *(_name(fmt, s, k) for s, k in dep_items))))
        rng.shuffle(changes)
        kind = {"yaml": "YAML", "json": "JSON", "ini": "INI", "env": ".env"}[fmt]
        bullets = "\n".join(f"- {c}" for c, _ in changes)
        things = "other keys and values" if fmt == "json" else "other keys, values and comments"
        keep = rng.choice([
            f"Leave everything else ({things}) exactly as it is, and keep the file valid {kind}.",
            f"Don't touch anything else: {things} stay as they are, and the file must still parse as {kind}.",
        ])
        instruction = rng.choice([
            f"We're upgrading {service}. Please edit its {kind} config `{path}` in place:\n{bullets}\n{keep}",
            f"Update the {service} settings in `{path}` ({kind}) as follows:\n{bullets}\n{keep}",
            f"The config file `{path}` needs these changes before the next deploy:\n{bullets}\n{keep}",
        ])

        # checks
        preserved = [(s, k) for s, kv in cfg.items() for k in kv if (s, k) not in taken]
        comments = [] if fmt == "json" else [h for h in header if h] + [sec_notes[s] for s in sec_notes] + \
            [n for sk, n in key_notes.items() if sk not in dep_items]
        renamed_new = {(s, RENAMES[k]) for s, k in renames}
        exp_renamed = _sub(fmt, new, sorted(renamed_new))
        exp_bumped = _sub(fmt, new, sorted(new_vals))
        exp_added = _sub(fmt, new, [(add_name, k) for k in add_kv])
        args = {"path": path, "fmt": fmt}
        kept_parts = [Check("changed", "sys_changed", {"path": path, "original": before}),
                      Check("preserved", "sys_config_matches", {**args, "expected": _sub(fmt, cfg, preserved)})]
        if comments:
            kept_parts.append(Check("comments", "text_has", {"path": path, "needles": comments}))
        # keys that must be gone count only in the config with its settings in it: an empty file has none of them
        checks = [
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
        # partial: bumps and the new section done, renames and removals forgotten
        half: dict[str, dict] = {}
        for s, kv in cfg.items():
            half[s] = {k: new_vals.get((s, k), v) for k, v in kv.items()}
        half[add_name] = dict(add_kv)
        partial_text = render(fmt, half, header, new_sec_notes, key_notes)
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=[WorkspaceFile(path=path, content=before)],
            checks=checks,
            steps=[read(path), write(path, after)],
            program=[read(path), python(program(fmt, path, [e for _, e in changes]))],
            partial=[write(path, partial_text)],
            outputs=[Artifact(path, CONFIG, as_parsed(fmt, new), f"the updated {service} config ({path})",
                              roles={"format": fmt})],
            summary=f"update {path} ({len(changes)} changes)",
            fingerprint=hashlib.sha256(after.encode()).hexdigest()[:16],
        )


GENERATORS = [EditConfig()]
