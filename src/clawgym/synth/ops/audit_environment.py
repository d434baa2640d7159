"""audit_environment: a snapshot of a machine (sshd_config, installed packages, df output, passwd, crontabs,
systemd units) and a policy with numbered rules; the agent lists every violation as JSON and writes a
findings report with recommended fixes. The exact violation set is computed from the generated snapshot."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _files_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops.base import (
    DOCUMENT,
    RECORDS,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    ls,
    read,
    write,
)

MIN_VERSIONS = {"openssl": "3.0.13", "sudo": "1.9.13", "curl": "7.88.1", "nginx": "1.22.1", "samba": "4.17.12",
                "openssh-server": "9.2", "rsync": "3.2.7", "git": "2.39.5", "bash": "5.2.15", "zlib1g": "1.2.13"}
OTHER_PACKAGES = {"python3": "3.11.2", "vim": "9.0.1378", "htop": "3.2.2", "tmux": "3.3a", "jq": "1.6",
                  "ca-certificates": "20230311", "systemd": "252.22", "docker-ce": "24.0.7", "smartmontools": "7.3"}
BANNED = ["telnetd", "rsh-server", "nis", "xinetd", "talkd", "ftp"]
SSH_KEYS = ["PermitRootLogin", "PasswordAuthentication", "X11Forwarding"]
MOUNTS = ["/home", "/var", "/srv/media", "/mnt/backup", "/var/lib/docker", "/srv/data"]

RULES = {
    "SSH-1": ("SSH hardening", "In `etc/ssh/sshd_config`, `PermitRootLogin`, `PasswordAuthentication` and "
              "`X11Forwarding` must each be set to `no` (the active, uncommented line counts). Item: the directive name."),
    "PKG-1": ("Patched packages", "These packages must be at least the listed upstream version (the part before the "
              "first `-` in `{pkg}`): {mins}. Item: the package name."),
    "PKG-2": ("Forbidden packages", "None of these may be installed: {banned}. Item: the package name."),
    "DISK-1": ("Disk headroom", "No filesystem in `{df}` may be {pct}% full or more (tmpfs excluded). Item: the mount "
               "point."),
    "ACC-1": ("Single superuser", "Only `root` may have UID 0 in `etc/passwd`. Item: the user name."),
    "ACC-2": ("Approved shell users", "Only these accounts may have a login shell (anything other than "
              "`/usr/sbin/nologin` or `/bin/false`): {approved}. Item: the user name."),
    "CRON-1": ("No per-minute jobs", "No job in `crontabs/` may run every minute (`* * * * *` or `*/1 * * * *`). "
               "Item: `<crontab file name>:<line number>`, e.g. `root:4`."),
    "CRON-2": ("No pipe-to-shell", "No cron job may pipe a download (`curl` or `wget`) into a shell (`sh` or `bash`). "
               "Item: `<crontab file name>:<line number>`."),
    "SVC-1": ("Services run unprivileged", "Every unit in `systemd/` must set `User=` to an account other than root. "
              "Item: the unit file name."),
    "SVC-2": ("Services restart", "Every unit in `systemd/` must set `Restart=`. Item: the unit file name."),
}
FIXES = {
    "SSH-1": ("set the directive to `no` in sshd_config and reload sshd", ["set", "change", "disable", "reload"]),
    "PKG-1": ("upgrade the package (`apt-get install --only-upgrade`)", ["upgrade", "update", "patch"]),
    "PKG-2": ("remove the package (`apt-get purge`)", ["remove", "purge", "uninstall"]),
    "DISK-1": ("free up space (rotate logs, prune old data) or grow the filesystem",
               ["free", "clean", "prune", "delete", "expand", "grow", "resize", "archive", "rotate", "move"]),
    "ACC-1": ("give the account a normal UID or delete it", ["uid", "delete", "remove", "lock", "disable"]),
    "ACC-2": ("set the shell to /usr/sbin/nologin or get the account approved",
              ["nologin", "lock", "disable", "remove", "delete", "approv"]),
    "CRON-1": ("run the job less often, e.g. `*/5 * * * *`", ["less often", "*/5", "*/10", "*/15", "reschedule",
                                                              "interval", "every 5", "schedule"]),
    "CRON-2": ("download the script once, review it and run a local copy", ["download", "local", "review", "verify",
                                                                            "checksum", "remove", "pin"]),
    "SVC-1": ("add `User=` with a dedicated service account", ["user="]),
    "SVC-2": ("add `Restart=on-failure`", ["restart="]),
}


HOSTS = {
    "health": ["clinic-srv", "surgery-nas", "ward-pc", "pharmacy-box"],
    "education": ["school-nas", "staffroom-pc", "lab-server", "library-box"],
    "food": ["till-server", "kitchen-pi", "office-nas", "pos-gw"],
    "software": ["build-01", "ci-runner", "staging-vm", "edge-gw"],
    "finance": ["ledger-srv", "office-nas", "backup-box", "vpn-gw"],
    "farm": ["barn-pi", "farm-nas", "dairy-gw", "shed-server"],
    "creative": ["studio-nas", "render-box", "edit-suite", "media-srv"],
    "legal": ["chambers-nas", "docs-srv", "office-box", "records-pc"],
    "general": ["homeserver", "family-nas", "media-box", "pi-hole"],
}
SERVER_WORDS = {
    "health": ["clinic server", "practice NAS"], "education": ["school server", "department NAS"],
    "food": ["restaurant back-office box", "till server"], "software": ["build box", "staging server"],
    "finance": ["office file server", "backup server"], "farm": ["farm office PC", "barn Raspberry Pi"],
    "creative": ["studio NAS", "render box"], "legal": ["chambers file server", "office server"],
    "general": ["home server", "family NAS"],
}


def _home(name: str, uid: int) -> str:
    if name == "root":
        return "/root"
    if name == "nobody":
        return "/nonexistent"
    return f"/home/{name}" if uid >= 1000 else f"/var/lib/{name}"


def _vtuple(v: str) -> tuple:
    out = []
    for part in v.split("-")[0].split("+")[0].replace("~", ".").split("."):
        num = "".join(c for c in part if c.isdigit())
        out.append(int(num) if num else 0)
    return tuple(out)


def _lower_version(rng, v: str) -> str:
    parts = v.split(".")
    i = rng.randrange(len(parts))
    n = int(parts[i])
    if n == 0:
        i, n = 0, int(parts[0])
    parts[i] = str(max(0, n - rng.randint(1, min(3, n) if n else 1)))
    return ".".join(parts)


def _higher_version(rng, v: str) -> str:
    parts = v.split(".")
    parts[-1] = str(int(parts[-1]) + rng.randint(0, 4))
    return ".".join(parts)


@dataclass
class _Machine:
    """The data stage: the machine's snapshot, the policy's rules and what breaks them."""

    host: str
    root: str  # the snapshot's folder
    dom: str
    rules: list[str]
    data: dict  # the snapshot (see `_snapshot`) and the file names
    ids: dict[str, str]  # rule -> its id in the policy
    violations: list[dict]  # {rule, item, detail, mention, rule_id}; the waived one left out
    waiver: dict | None  # the finding the persona has a waiver for
    files: list[WorkspaceFile]
    policy_path: str


@dataclass
class _Request:
    """The phrasing stage: the output paths, the findings' keys, the request."""

    out_json: str
    out_md: str
    k_rule: str
    k_item: str
    k_detail: str
    instruction: str


@operation
class AuditEnvironment(OperationGenerator):
    id = "audit_environment"
    consumes: tuple[str, ...] = ()
    produces = (DOCUMENT, RECORDS)
    standalone = True
    folder_scoped = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        box = self._machine(ctx)
        ask = self._request(ctx, box)
        checks = self._checks(box, ask)
        records, md_text, wrong = self._solutions(box, ask)
        root, policy_path, out_json, out_md = box.root, box.policy_path, ask.out_json, ask.out_md
        return StepPlan(
            operation=self.id,
            instruction=ask.instruction,
            files=box.files,
            checks=checks,
            steps=[read(policy_path), ls(root), write(out_json, json.dumps(records, indent=2) + "\n"),
                   write(out_md, md_text)],
            partial=[write(out_json, json.dumps(wrong, indent=2) + "\n")],
            outputs=[Artifact(out_md, DOCUMENT, md_text, f"the audit report ({out_md})"),
                     Artifact(out_json, RECORDS, records, f"the list of policy violations ({out_json})",
                              roles={"group": ask.k_rule, "name": ask.k_item})],
            summary=f"audit {root} against its policy",
            fingerprint=hashlib.sha256(json.dumps([box.rules, records, box.host]).encode()).hexdigest()[:16],
        )

    # -------------------------------------------------------------------------------------- data
    def _machine(self, ctx: OpContext) -> _Machine:
        """The machine: its host name and snapshot folder, the policy's rules (drawn until the snapshot breaks
        at least 3 items of 2 rules) and their ids, the file names, the waived finding, and the files."""
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        persona = ctx.persona
        dom = V.domain(persona)
        host = rng.choice(HOSTS.get(dom, HOSTS["general"]) + ["nas01", "homeserver", "office-box", "pi-gateway",
                                                                 "lab-01", f"{persona.name.split()[0].casefold()}-pc"])
        host = "".join(c for c in host if c.isalnum() or c in "-_") or "host01"
        root = ctx.path(rng.choice([f"snapshot_{host}", f"audit/{host}", f"{host}_snapshot", f"dumps/{host}",
                                    f"{host}_{rng.choice(['2025', '2026'])}", f"state_{host}"]))
        scheme = rng.choice(["orig", "orig", "R", "SEC", "POL"])
        while True:
            rules = sorted(rng.sample(list(RULES), k=rng.randint(4, 6)), key=list(RULES).index)
            data = self._snapshot(rng, voc, rules)
            violations = self._evaluate(rules, data)
            if len(violations) >= 3 and len({v["rule"] for v in violations}) >= 2:
                break
        ids = {r: (r if scheme == "orig" else f"R{i}" if scheme == "R" else f"{scheme}-{i:02d}")
               for i, r in enumerate(rules, start=1)}
        data["ids"] = ids
        data["policy_file"] = rng.choice(["policy.md", "policy.md", "baseline.md", "hardening_policy.md",
                                          "security_policy.md", "POLICY.md"])
        data["policy_title"] = rng.choice(["Server policy", "Security baseline", "Hardening rules", "House rules"])
        data["pkg_file"] = rng.choice(["packages.txt", "packages.txt", "dpkg_list.txt", "installed.txt"])
        data["df_file"] = rng.choice(["df.txt", "df.txt", "df_h.txt", "disk_usage.txt"])
        # the persona's exception: a written waiver for one finding (not to be reported), when enough remain
        waiver = None
        if len(violations) >= 4 and rng.random() < 0.3:
            cand = rng.choice(violations)
            rest = [v for v in violations if v is not cand]
            if len({v["rule"] for v in rest}) >= 2:
                waiver, violations = cand, rest
        for v in violations:
            v["rule_id"] = ids[v["rule"]]
        files = self._files(root, host, rules, data)
        policy_path = f"{root}/{data['policy_file']}"
        return _Machine(host, root, dom, rules, data, ids, violations, waiver, files, policy_path)

    # -------------------------------------------------------------------------------------- phrasing
    def _request(self, ctx: OpContext, box: _Machine) -> _Request:
        """Where the findings and the report go, the findings' keys, and the request (or its terse register)."""
        rng = ctx.rng
        persona = ctx.persona
        host, root, dom, rules, data, ids = box.host, box.root, box.dom, box.rules, box.data, box.ids
        waiver, files, policy_path = box.waiver, box.files, box.policy_path
        out_json = ctx.path(rng.choice(["audit/findings.json", f"audit_{host}.json", "reports/audit_findings.json",
                                        f"findings_{host}.json", "audit/violations.json"]))
        out_md = ctx.path(rng.choice(["audit/report.md", f"audit_{host}.md", "reports/audit_report.md",
                                      f"{host}_audit.md", "audit/summary.md"]))
        k_rule, k_item, k_detail = rng.choice([("rule", "item", "detail"), ("rule_id", "item", "detail"),
                                               ("rule", "subject", "evidence"), ("policy_rule", "target", "why"),
                                               ("rule", "object", "details")])
        what = rng.choice(SERVER_WORDS.get(dom, SERVER_WORDS["general"]) + ["home server", "NAS", "cupboard server"])
        fmt = V.one_phrase(rng, ["a JSON [list|array] of objects with the keys `{r}` (the rule id), `{i}` (in the "
                                 "format the policy gives for that rule) and `{d}`",
                                 "a JSON array, one object per violation with `{r}`, `{i}` (formatted as the "
                                 "policy says) and `{d}`",
                                 "a JSON list of {\"{r}\", \"{i}\", \"{d}\"} objects, `{i}` formatted per the "
                                 "policy"], r=k_rule, i=k_item, d=k_detail)
        head = one_of(rng, [
            "I took a snapshot of our {what} ({host}) into `{root}/`. Please audit it against the rules in "
            "`{policy}`.",
            "Can you check `{root}/` (a dump of {host}'s config) for policy violations? The rules are in "
            "`{policy}`.",
            "Audit time. `{policy}` is our policy and the rest of `{root}/` is the current state of {host}.",
            "[{who} asked me to|I promised {who} I'd|I need to] [check|audit] {host}, our {what}, against "
            "`{policy}`. [The snapshot is in|Everything I pulled off it is in|I dumped its config into] "
            "`{root}/`.",
            "[Before the [insurance|IT|security] review|Ahead of the [annual|quarterly] check], [could you|can "
            "you|please] [go over|review] the {what} snapshot in `{root}/` [against|with] `{policy}`?",
            "Is {host} [compliant|following our rules]? [Its config|A copy of its config] is in `{root}/` and "
            "the rules are [in|written down in] `{policy}`.",
            "[Security check|Compliance check|Hardening review] [for|of] {host} (our {what}): [snapshot|dump] in "
            "`{root}/`, [rules|policy] in `{policy}`.",
        ], what=what, host=host, root=root, policy=policy_path, who=flavor.person(rng).split()[0])
        items = [
            V.phrase("[write every violation to|list every violation in|put every violation in] `{j}` as {fmt}", rng,
                     j=out_json, fmt=fmt),
            V.phrase("[write|add] a [readable|short markdown|plain] report `{m}` that [lists|groups] the findings "
                     "by rule and [gives a recommended fix for each|says how to fix each one|recommends a fix for "
                     "each]", rng, m=out_md),
            V.one_phrase(rng, ["only report what the policy actually forbids",
                               "no false alarms[ please|]: things the policy doesn't cover are not violations",
                               "[anything|whatever] the policy doesn't mention is not a violation"]),
        ]
        if waiver is not None:
            items.append(V.phrase("{item} has a [written|signed] waiver [from {who}|until {until}] under {rid} - "
                                  "[don't report it|leave it out of the findings and the report|it is not a "
                                  "violation]", rng, item=f"`{waiver['item']}`", who=flavor.person(rng),
                                  until=V.date_text(rng, flavor.date_in(rng, 2027)), rid=ids[waiver["rule"]]))
        reqs = V.requirements_text(rng, items, rng.choice(["", "[What I need:|Deliverables:|Please:]"]))
        n_cron = len(data["crontabs"])
        n_units = len(data["units"])
        hint = one_of(rng, ["", "The policy has {k} rules.", "[In the snapshot:|It contains] sshd_config, passwd, "
                           "`{pkg}`, `{df}`, {nc} crontab{s1} and {nu} systemd units.", "[It's|The snapshot is] "
                           "[{nu} units, {nc} crontab{s1}|the usual: configs, packages, disks, users, cron jobs] "
                           "[and|plus] a policy with {k} rules."],
                     k=len(rules), pkg=data["pkg_file"], df=data["df_file"], nc=n_cron, nu=n_units,
                     s1="" if n_cron == 1 else "s")
        instruction = V.glue(head, V.story(persona, rng, "audit"), hint,
                             V.mention(persona, rng, rng.choice(files).path, 0.3), reqs, V.aside(persona, rng, f"`{root}/`"),
                             V.timing(rng))
        if rng.random() < 0.25:  # the terse register
            wv = V.phrase(" Waived: `{i}` under {rid} - not a finding.", rng, i=waiver["item"],
                          rid=ids[waiver["rule"]]) if waiver is not None else ""
            instruction = V.glue(expand(
                "[Audit|Check] `{root}/` ({host}) against `{policy}`. Findings -> `{j}` ({fmt}); report with a "
                "fix per finding -> `{m}`. [Policy rules only, no false alarms.|Nothing outside the policy counts.]"
                "{wv}", rng, root=root, host=host, policy=policy_path, j=out_json, fmt=fmt, m=out_md, wv=wv),
                V.timing(rng))
        return _Request(out_json, out_md, k_rule, k_item, k_detail, instruction)

    # -------------------------------------------------------------------------------------- checks
    @staticmethod
    def _checks(box: _Machine, ask: _Request) -> list[Check]:
        """Every violation found, no false alarm, and the report covering the findings with a fix for each
        (both counted as far as the findings are right)."""
        violations, ids = box.violations, box.ids
        out_json, out_md, k_rule, k_item = ask.out_json, ask.out_md, ask.k_rule, ask.k_item
        expected = [{k_rule: v["rule_id"], k_item: v["item"]} for v in violations]
        mentions = [v["mention"] for v in violations]
        violated = sorted({v["rule"] for v in violations}, key=list(RULES).index)
        # the report counts as far as the findings it reports are right: the policy itself (it names every rule,
        # fix and forbidden item) copied to the report's path is no report of this server
        fields = [k_rule, k_item]
        found = Check("", "sys_findings", {"path": out_json, "expected": expected, "fields": fields})
        checks = [
            Check("violations_found", "sys_findings", {"path": out_json, "expected": expected, "fields": fields}),
            Check("no_false_alarms", "sys_findings", {"path": out_json, "expected": expected, "mode": "precision",
                                                      "fields": fields}),
            Check("report_covers_findings", "gated", parts=[
                Check("", "sys_text_any", {"path": out_md, "groups": mentions}), found]),
            Check("fixes_recommended", "gated", parts=[Check("", "sys_text_findings", {
                "path": out_md, "window": 8, "findings": [[ids[r], [FIXES[r][1]]] for r in violated]}), found]),
        ]
        return checks

    # -------------------------------------------------------------------------------------- solutions
    def _solutions(self, box: _Machine, ask: _Request) -> tuple[list[dict], str, list[dict]]:
        """The findings, the report (per rule: its violations and the fix), and a partial list (half the
        findings plus a false alarm from a rule the policy does not have)."""
        host, rules, data, ids, violations, policy_path = (box.host, box.rules, box.data, box.ids, box.violations,
                                                           box.policy_path)
        k_rule, k_item, k_detail = ask.k_rule, ask.k_item, ask.k_detail
        violated = sorted({v["rule"] for v in violations}, key=list(RULES).index)
        records = [{k_rule: v["rule_id"], k_item: v["item"], k_detail: v["detail"]} for v in violations]
        md = [f"# Audit of {host}", "", f"Policy: `{policy_path}`. {len(violations)} violation"
              f"{'s' if len(violations) != 1 else ''} of {len(violated)} rule{'s' if len(violated) != 1 else ''}.", ""]
        for r in rules:
            vs = [v for v in violations if v["rule"] == r]
            md.append(f"## {ids[r]} - {RULES[r][0]}")
            md.append("")
            if not vs:
                md += ["No violations.", ""]
                continue
            for v in vs:
                md.append(f"- `{v['item']}`: {v['detail']}")
            md += ["", f"Recommended fix ({ids[r]}): {FIXES[r][0]}.", ""]
        md_text = "\n".join(md)
        # partial: half the findings plus a false alarm from a rule the policy does not have, no report
        extra = self._evaluate([r for r in RULES if r not in rules], data)
        fake = ({k_rule: extra[0]["rule"], k_item: extra[0]["item"], k_detail: extra[0]["detail"]} if extra
                else {k_rule: "SSH-9", k_item: "Port", k_detail: "22"})
        wrong = records[: max(1, len(records) // 2)] + [fake]
        return records, md_text, wrong

    # -------------------------------------------------------------------------------------- snapshot data

    def _snapshot(self, rng, voc, rules) -> dict:
        humans = [p.split()[0].casefold() for p in flavor.people(rng, 4)]
        humans = list(dict.fromkeys(humans))
        approved = ["root"] + humans[: max(1, len(humans) - 1)]
        d: dict = {"approved": approved, "pct": rng.choice([75, 80, 85, 90, 95])}
        d["ssh"] = {k: ("no" if rng.random() < 0.55 else rng.choice(["yes", "prohibit-password"] if k == "PermitRootLogin"
                                                                       else ["yes"])) for k in SSH_KEYS}
        mins = dict(rng.sample(sorted(MIN_VERSIONS.items()), k=rng.randint(3, 5)))
        d["mins"] = mins
        pkgs = {}
        for name, v in MIN_VERSIONS.items():
            r = rng.random()
            pkgs[name] = _lower_version(rng, v) if r < 0.35 else (v if r < 0.55 else _higher_version(rng, v))
        pkgs.update(OTHER_PACKAGES)
        for b in rng.sample(BANNED, k=rng.randint(0, 2)):
            pkgs[b] = rng.choice(["0.17-42", "0.17-18+b1", "2.3.2", "1.0.4"])
        d["packages"] = dict(sorted(pkgs.items()))
        mounts = [("/dev/sda1", "/", rng.randint(20, 70))]
        for i, m in enumerate(rng.sample(MOUNTS, k=rng.randint(2, 4))):
            use = rng.choice([rng.randint(10, 75), rng.randint(76, 99)])
            mounts.append((f"/dev/sd{'abcd'[i // 2]}{i % 2 + 2}", m, use))
        mounts.insert(1, ("tmpfs", "/run", rng.randint(1, 5)))
        mounts.append(("tmpfs", "/dev/shm", rng.choice([0, 1, 100 if rng.random() < 0.3 else 2])))
        d["mounts"] = mounts
        users = [("root", 0, "/bin/bash"), ("daemon", 1, "/usr/sbin/nologin"), ("bin", 2, "/usr/sbin/nologin"),
                 ("www-data", 33, "/usr/sbin/nologin"), ("backup", 34, "/usr/sbin/nologin"),
                 ("nobody", 65534, "/usr/sbin/nologin")]
        uid = 1000
        for h in humans:
            users.append((h, uid, rng.choice(["/bin/bash", "/bin/bash", "/usr/bin/zsh"])))
            uid += 1
        if rng.random() < 0.5:
            users.append((rng.choice(["toor", "admin2", "maint"]), 0, "/bin/bash"))
        if rng.random() < 0.6:
            users.append((rng.choice(["postgres", "media", "git"]), rng.randint(100, 130), "/bin/bash"))
        else:
            users.append((rng.choice(["postgres", "media", "git"]), rng.randint(100, 130), "/bin/false"))
        d["users"] = users
        scripts = [f"/usr/local/bin/{flavor.slug(p)}.sh" for p in voc["projects"]] + \
            ["/usr/local/bin/backup.sh", "/usr/local/bin/check_temp.sh", "/usr/local/bin/rotate_logs.sh"]
        crontabs: dict[str, list[str]] = {}
        for owner in ["root"] + humans[:1]:
            lines = ["# m h  dom mon dow   command"]
            if owner == "root":
                lines.insert(0, f"MAILTO={flavor.email_of(humans[0])}")
            for _ in range(rng.randint(2, 4)):
                sched = rng.choice(["*/15 * * * *", "0 3 * * *", "30 2 * * 0", "0 */6 * * *", "*/5 * * * *",
                                    "* * * * *", "*/1 * * * *", "@reboot", "45 23 * * 1-5"])
                cmd = rng.choice(scripts)
                if rng.random() < 0.3:
                    cmd += " >/dev/null 2>&1"
                lines.append(f"{sched} {cmd}")
                if rng.random() < 0.3:
                    lines.append(rng.choice(["", "# cleanup", "# * * * * * /usr/local/bin/old_job.sh  (disabled)"]))
            if rng.random() < 0.4:
                url = rng.choice(["https://get.example.net/agent.sh", "https://raw.example.com/tools/update.sh"])
                tool = rng.choice([f"curl -fsSL {url} | sh", f"wget -qO- {url} | bash"])
                lines.insert(rng.randint(2, len(lines)), f"{rng.choice(['0 4 * * *', '@daily', '*/30 * * * *'])} {tool}")
            crontabs[owner] = lines
        d["crontabs"] = crontabs
        units = {}
        projects = [flavor.slug(p).replace("_", "-") for p in voc["projects"]]
        for name in rng.sample(projects + ["photo-sync", "metrics-exporter", "home-assistant"], k=rng.randint(3, 4)):
            user = rng.choice([None, "root", "svc-" + name.split("-")[0], "www-data", "svc-" + name.split("-")[0]])
            restart = rng.choice([None, "on-failure", "always", "on-failure"])
            units[f"{name}.service"] = {"user": user, "restart": restart, "desc": name.replace("-", " ").title()}
        d["units"] = units
        return d

    def _evaluate(self, rules, d) -> list[dict]:  # noqa: C901 (one flat branch per audit rule)
        out: list[dict] = []

        def add(rule, item, detail, mention=None):
            out.append({"rule": rule, "item": item, "detail": detail, "mention": mention or [item]})

        for rule in rules:
            if rule == "SSH-1":
                for k, v in d["ssh"].items():
                    if v != "no":
                        add(rule, k, f"{k} is set to {v}")
            elif rule == "PKG-1":
                for name, minv in d["mins"].items():
                    have = d["packages"].get(name)
                    if have and _vtuple(have) < _vtuple(minv):
                        add(rule, name, f"{name} {have} is older than the required {minv}")
            elif rule == "PKG-2":
                for name in BANNED:
                    if name in d["packages"]:
                        add(rule, name, f"{name} is installed")
            elif rule == "DISK-1":
                for dev, mnt, use in d["mounts"]:
                    if dev != "tmpfs" and use >= d["pct"]:
                        add(rule, mnt, f"{mnt} is {use}% full")
            elif rule == "ACC-1":
                for name, uid, _ in d["users"]:
                    if uid == 0 and name != "root":
                        add(rule, name, f"{name} has UID 0")
            elif rule == "ACC-2":
                for name, _, shell in d["users"]:
                    if shell not in ("/usr/sbin/nologin", "/bin/false") and name not in d["approved"]:
                        add(rule, name, f"{name} has the login shell {shell} but is not approved")
            elif rule in ("CRON-1", "CRON-2"):
                for owner, lines in d["crontabs"].items():
                    for i, line in enumerate(lines, start=1):
                        if not line.strip() or line.startswith("#") or "=" in line.split()[0]:
                            continue
                        item = f"{owner}:{i}"
                        if rule == "CRON-1" and (line.startswith("* * * * * ") or line.startswith("*/1 * * * * ")):
                            add(rule, item, f"`{line}` runs every minute", [item, line.split()[5]])
                        if rule == "CRON-2" and any(t in line for t in ("curl", "wget")) and \
                                any(f"| {s}" in line for s in ("sh", "bash")):
                            url = next(w for w in line.split() if w.startswith("http"))
                            add(rule, item, f"`{line}` pipes a download into a shell", [item, url])
            elif rule == "SVC-1":
                for unit, u in d["units"].items():
                    if u["user"] in (None, "root"):
                        add(rule, unit, f"{unit} runs as root" + (" (no User=)" if u["user"] is None else ""))
            elif rule == "SVC-2":
                for unit, u in d["units"].items():
                    if u["restart"] is None:
                        add(rule, unit, f"{unit} has no Restart=")
        return out

    def _files(self, root, host, rules, d) -> list[WorkspaceFile]:
        files = []
        policy = [f"# {d['policy_title']} for {host}", "",
                  "Every rule below must hold. Report violations with the rule id and the item named in the rule.", ""]
        for r in rules:
            title, text = RULES[r]
            text = text.format(mins=", ".join(f"{k} >= {v}" for k, v in d["mins"].items()),
                               banned=", ".join(BANNED), pct=d["pct"], approved=", ".join(d["approved"]),
                               pkg=d["pkg_file"], df=d["df_file"])
            policy += [f"## {d['ids'][r]}: {title}", "", text, ""]
        files.append(WorkspaceFile(path=f"{root}/{d['policy_file']}", content="\n".join(policy)))
        ssh = ["# This is the sshd server system-wide configuration file.  See", "# sshd_config(5) for more information.",
               "", "Include /etc/ssh/sshd_config.d/*.conf", "", "#Port 22", "Port 22", "#PermitRootLogin prohibit-password",
               f"PermitRootLogin {d['ssh']['PermitRootLogin']}", "PubkeyAuthentication yes", "",
               "# To disable tunneled clear text passwords, change to no here!", "#PasswordAuthentication yes",
               f"PasswordAuthentication {d['ssh']['PasswordAuthentication']}", "KbdInteractiveAuthentication no", "",
               "UsePAM yes", f"X11Forwarding {d['ssh']['X11Forwarding']}", "PrintMotd no", "AcceptEnv LANG LC_*",
               "Subsystem sftp /usr/lib/openssh/sftp-server"]
        files.append(WorkspaceFile(path=f"{root}/etc/ssh/sshd_config", content="\n".join(ssh) + "\n"))
        pk = [f"{name}\t{v}" if "-" in v else f"{name}\t{v}-{1 + len(name) % 3}" + ("+deb12u1" if len(name) % 2 else "")
              for name, v in d["packages"].items()]
        files.append(WorkspaceFile(path=f"{root}/{d['pkg_file']}", content="\n".join(pk) + "\n"))
        df = ["Filesystem      Size  Used Avail Use% Mounted on"]
        for dev, mnt, use in d["mounts"]:
            size = 3.9 if dev == "tmpfs" else float(len(mnt) * 37 % 900 + 50)
            used = size * use / 100
            df.append(f"{dev:<15} {size:>4.0f}G {used:>4.0f}G {size - used:>4.0f}G {use:>3}% {mnt}")
        files.append(WorkspaceFile(path=f"{root}/{d['df_file']}", content="\n".join(df) + "\n"))
        pw = [f"{n}:x:{uid}:{uid}:{n.title()},,,:{_home(n, uid)}:{sh}"
              for n, uid, sh in d["users"]]
        files.append(WorkspaceFile(path=f"{root}/etc/passwd", content="\n".join(pw) + "\n"))
        for owner, lines in d["crontabs"].items():
            files.append(WorkspaceFile(path=f"{root}/crontabs/{owner}", content="\n".join(lines) + "\n"))
        for unit, u in d["units"].items():
            body = ["[Unit]", f"Description={u['desc']}", "After=network-online.target", "", "[Service]",
                    "Type=simple"]
            if u["user"]:
                body.append(f"User={u['user']}")
            body.append(f"ExecStart=/usr/local/bin/{unit.removesuffix('.service')}")
            if u["restart"]:
                body.append(f"Restart={u['restart']}")
            body += ["", "[Install]", "WantedBy=multi-user.target"]
            files.append(WorkspaceFile(path=f"{root}/systemd/{unit}", content="\n".join(body) + "\n"))
        return files


GENERATORS = [AuditEnvironment()]
