"""review_repository: a git repository with a file of house rules (CONTRIBUTING.md or the like) and a few concrete problems planted
in it (a hard-coded secret, an overdue dated TODO, a public function without tests, a dependency pinned to a
yanked release, a large committed file) next to look-alikes that are fine; the agent writes a review listing
each finding with its file path."""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor, world
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _dev_vocab as vocab
from clawgym.synth.ops import operation
from clawgym.synth.ops._pyrepo import (
    module_source,
    package_name,
    repo_scaffold,
    test_source,
    varied_modules,
)
from clawgym.synth.ops.base import (
    DOCUMENT,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    exec_,
    read,
    write,
)

KINDS = ["secret", "stale_todo", "untested_function", "yanked_dependency", "large_file"]
SIZE_LIMITS_KB = [15, 20, 25, 30]  # all above the small fixture (< 10 KB) and below the big export (> 30 KB)
DEPS = {"requests": ("2.31.0", ["2.32.0", "2.32.1"]), "urllib3": ("2.0.7", ["2.0.0"]),
        "pyyaml": ("6.0.1", ["5.4"]), "jinja2": ("3.1.3", ["3.0.0a1"]), "openpyxl": ("3.1.2", ["3.1.0"]),
        "python-dateutil": ("2.9.0", ["2.8.1"]), "click": ("8.1.7", ["8.1.4"]), "pandas": ("2.2.1", ["1.5.0rc0"]),
        "numpy": ("1.26.4", ["1.25.1"]), "pydantic": ("2.6.4", ["2.6.0"]), "httpx": ("0.27.0", ["0.26.0"]),
        "rich": ("13.7.1", ["13.5.0"]), "sqlalchemy": ("2.0.29", ["2.0.0b4"]), "pillow": ("10.3.0", ["10.0.0"]),
        "reportlab": ("4.1.0", ["4.0.5"]), "markdown": ("3.6", ["3.4.2"])}
TODO_TEXTS = ["remove the legacy CSV export once the finance team has switched",
              "drop the Python 3.9 workaround", "replace the hand-rolled retry with the shared helper",
              "delete the temporary migration flag", "stop writing the old report format",
              "move the thresholds into the config file", "remove the copy of the 2024 rates table",
              "switch to the new holiday calendar", "delete the fallback for the old export layout",
              "merge the duplicated rounding helpers", "stop reading the spreadsheet from the shared drive",
              "replace the print calls with logging"]
RULES_FILES = ["CONTRIBUTING.md", "CONTRIBUTING.md", "docs/REVIEW_RULES.md", "HOUSE_RULES.md",
               "docs/contributing.md"]
SECRET_FILES = ["{pkg}/settings.py", "{pkg}/config.py", "config/production.yaml", "deploy/settings.ini",
                "deploy/prod.yaml", "config/live.ini"]
SECRET_VARS = ["API_KEY", "SMTP_PASSWORD", "DB_PASSWORD", "PAYMENT_TOKEN", "SFTP_PASSWORD", "SLACK_TOKEN",
               "S3_SECRET_KEY", "CRM_API_TOKEN", "PORTAL_PASSWORD"]
BIG_FOLDERS = ["data", "exports", "dumps", "backups", "raw"]
BIG_STEMS = ["full_export", "backup_{year}", "all_records", "history_{year}", "dump", "everything_{year}"]
REVIEW_FOLDERS = ["reviews", "review", "notes", "reports", "audit"]


def _token(rng, n=32) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


@dataclass
class _Repository:
    """The data stage of a review: the repository and the problems planted in it."""

    pkg: str
    project: str
    project_word: str
    repo: str  # its path in the workspace
    owner: str
    dev2: str
    dev3: str
    kinds: list[str]  # the kinds of problem planted, in KINDS order
    today: str
    rules_file: str
    limit_kb: int
    findings: list[dict]  # {kind, file, groups (words near the file's name in a Markdown review), line}
    commits: list[dict]
    file: WorkspaceFile  # the repository, generated from `commits`
    secret: str


@dataclass
class _Request:
    """The phrasing stage: the review's path, format and JSON field names, and the request."""

    out: str
    fmt: str
    f_file: str
    f_cat: str
    f_note: str
    instruction: str


@operation
class ReviewRepository(OperationGenerator):
    id = "review_repository"
    consumes: tuple[str, ...] = ()
    produces = (DOCUMENT,)
    standalone = True
    folder_scoped = True

    def plan(self, ctx: OpContext, source: Artifact | None = None) -> StepPlan:
        repo = self._repository(ctx)
        ask = self._request(ctx, repo)
        checks = self._checks(repo, ask)
        text, half, steps = self._solutions(repo, ask)
        expected = [{ask.f_file: f["file"], ask.f_cat: f["kind"]} for f in repo.findings]
        return StepPlan(
            operation=self.id,
            instruction=ask.instruction,
            files=[repo.file],
            checks=checks,
            steps=steps,
            partial=[write(ask.out, half)],
            outputs=[Artifact(ask.out, DOCUMENT, text, f"the review of {repo.repo} ({ask.out})")],
            summary=f"review {repo.repo} ({len(repo.findings)} findings)",
            fingerprint=hashlib.sha256(json.dumps([repo.kinds, expected, repo.secret]).encode()).hexdigest()[:16],
        )

    # ------------------------------------------------------------------------------------------ data
    def _repository(self, ctx: OpContext) -> _Repository:  # noqa: PLR0915 (one linear recipe: its rng draws, in order, fix the tasks a seed gives)
        """The repository: its code, tests, settings, requirements, data files and house rules over three commits,
        with the problems of 3-5 kinds planted in it (the findings) next to look-alikes that are fine."""
        rng = ctx.rng
        pkg = package_name(ctx.persona, rng)
        project = pkg.replace("_", rng.choice(["-", "-", "_"]))
        repo = vocab.repo_path(ctx, project, ["review", "inherited", "incoming"])
        owner, dev2, dev3 = flavor.people(rng, 3)
        kinds = sorted(rng.sample(KINDS, k=rng.randint(3, 5)), key=KINDS.index)
        today = f"2026-{rng.randint(3, 9):02d}-{rng.randint(10, 28):02d}"
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        project_word = rng.choice(voc["projects"])
        blurb = expand("[Helpers|Small utilities|Scripts|Shared code|Python helpers] [for|behind|used by] our "
                       "{p}", rng, p=project_word)
        rules_file = rng.choice(RULES_FILES)
        limit_kb = rng.choice(SIZE_LIMITS_KB)
        modules = varied_modules(rng, 2)
        files = repo_scaffold(pkg, project, owner, blurb, rng)
        tests: dict[str, str] = {}
        findings: list[dict] = []  # {kind, file, needle groups, line for the review}

        # --- code and tests (one public function left without tests if planted)
        untested = None
        if "untested_function" in kinds:
            untested = rng.choice([f for fs in modules.values() for f in fs if len(fs) > 1])
        mod_text: dict[str, str] = {}
        for m, fs in modules.items():
            text = module_source(m, fs)
            text += ('\n\ndef _round2(value):\n    """Internal: round to cents (private helpers need no tests)."""\n'
                     '    return round(value + 0.0, 2)\n')
            mod_text[f"{pkg}/{m}.py"] = text
            tested = [f for f in fs if f is not untested]
            tests[f"tests/test_{m}.py"] = test_source(pkg, m, tested)
        if untested is not None:
            path = f"{pkg}/{untested.module}.py"
            findings.append({"kind": "untested_function", "file": path, "groups": [[untested.name]],
                             "line": f"`{path}`: public function `{untested.name}` has no test in `tests/` - add one."})

        # --- TODOs: one overdue (if planted) and one not due yet
        mod_paths = sorted(mod_text)
        due_later = f"2026-{rng.randint(10, 12):02d}-{rng.randint(1, 28):02d}"
        todo_texts = rng.sample(TODO_TEXTS, 2)
        later_path = rng.choice(mod_paths)
        mod_text[later_path] = mod_text[later_path].replace('"""\n', f'"""\n\n# TODO({due_later}): {todo_texts[0]}\n', 1)
        if "stale_todo" in kinds:
            overdue = f"{int(today[:4]) - rng.randint(0, 1)}-{rng.randint(1, 2):02d}-{rng.randint(1, 28):02d}"
            if overdue >= today:
                overdue = "2025-11-30"
            path = rng.choice(mod_paths)
            mod_text[path] = mod_text[path].replace('"""\n', f'"""\n\n# TODO({overdue}): {todo_texts[1]}\n', 1)
            findings.append({"kind": "stale_todo", "file": path, "groups": [["todo"]],
                             "line": f"`{path}`: overdue TODO dated {overdue} ({todo_texts[1]}); it was due before "
                                     f"{today} - do it or re-date it."})
        files.update(mod_text)

        # --- settings: a real secret, or placeholders only; .env.example always has placeholders
        files[".env.example"] = "# copy to .env and fill in\nAPI_KEY=changeme\nSMTP_PASSWORD=\n"
        secret_path = rng.choice(SECRET_FILES).format(pkg=pkg)
        secret = rng.choice([f"sk_live_{_token(rng, 24)}", f"ghp_{_token(rng, 36)}", _token(rng, 20)])
        var = rng.choice(SECRET_VARS)
        value = secret if "secret" in kinds else None
        if secret_path.endswith(".py"):
            val = f'"{value}"' if value else f'os.environ.get("{var}", "")'
            files[secret_path] = (f'"""Runtime settings."""\n\nimport os\n\nDEBUG = False\nREPORT_DIR = "reports"\n'
                                  f"{var} = {val}\n")
        elif secret_path.endswith(".yaml"):
            files[secret_path] = (f"environment: production\nreport_dir: /srv/{project}/reports\n"
                                  f"{var.lower()}: {json.dumps(value) if value else '${' + var + '}'}\n")
        else:
            files[secret_path] = (f"[app]\nenvironment = production\nreport_dir = /srv/{project}/reports\n"
                                  + (f"{var.lower()} = {value}\n" if value else
                                     f"# {var.lower()} is read from the environment\n"))
        if value:
            findings.append({"kind": "secret", "file": secret_path,
                             "groups": [["secret", "password", "token", "key", "credential", "hard-coded", "hardcoded"]],
                             "line": f"`{secret_path}`: hard-coded secret `{var.lower() if not secret_path.endswith('.py') else var}` "
                                     "committed in plain text - move it to the environment and rotate the key."})

        # --- dependencies and the yank list
        names = rng.sample(sorted(DEPS), k=rng.randint(4, 6))
        bad_dep = rng.choice(names) if "yanked_dependency" in kinds else None
        pins = []
        for n in names:
            good, yanked = DEPS[n]
            pins.append(f"{n}=={yanked[0] if n == bad_dep else good}")
        files["requirements.txt"] = "\n".join(sorted(pins)) + "\n"
        listed = sorted(set(rng.sample(sorted(DEPS), k=4)) | ({bad_dep} if bad_dep else set()))
        files["docs/yanked-releases.md"] = (
            "# Yanked releases\n\nReleases withdrawn upstream that must not be pinned (from our package mirror):\n\n"
            + "\n".join(f"- {n} {', '.join(DEPS[n][1])}" for n in listed) + "\n")
        if bad_dep:
            pin = f"{bad_dep}=={DEPS[bad_dep][1][0]}"
            findings.append({"kind": "yanked_dependency", "file": "requirements.txt", "groups": [[bad_dep]],
                             "line": f"`requirements.txt`: `{pin}` is a yanked release (see docs/yanked-releases.md) "
                                     f"- pin {bad_dep}=={DEPS[bad_dep][0]} instead."})

        # --- data files: a small fixture that is fine, and a big export if planted
        site = rng.sample(flavor.CITIES, 3)
        small_rows = ["date,site,value"] + [f"2026-01-{(i % 28) + 1:02d},{site[i % 3]},{(i * 37) % 500 / 10:.1f}"
                                            for i in range(rng.randint(150, 300))]
        files[f"tests/fixtures/{rng.choice(['sample', 'mini', 'few_rows', 'example', 'tiny_export'])}.csv"] = \
            "\n".join(small_rows) + "\n"
        big_path = None
        if "large_file" in kinds:
            big_path = (f"{world.folder(ctx.persona, rng, BIG_FOLDERS, p_world=0.3)}/"
                        f"{rng.choice(BIG_STEMS).format(year=rng.choice([2024, 2025]))}.csv")
            if big_path in files or big_path.startswith(("tests/", f"{pkg}/", "docs/")):
                big_path = "exports/all_records.csv"
            n = rng.randint(1000, 1500)
            big = ["id,date,site,item,value"] + [
                f"{i},2025-{(i % 12) + 1:02d}-{(i % 28) + 1:02d},{site[i % 3]},{voc['items'][i % len(voc['items'])]},"
                f"{(i * 7919) % 100000 / 100:.2f}" for i in range(1, n)]
            files[big_path] = "\n".join(big) + "\n"
            kb = len(files[big_path].encode()) // 1024
            findings.append({"kind": "large_file", "file": big_path,
                             "groups": [["large", "size", "kb", "mb", "big", "lfs", "bytes", str(limit_kb)]],
                             "line": f"`{big_path}`: large file ({kb} KB, limit {limit_kb} KB) committed to git - "
                                     "move it to the shared drive or LFS."})

        files[rules_file] = (
            f"# {rng.choice(['Contributing to', 'House rules of', 'Review rules for'])} {project}\n\n"
            "House rules - every one of them is checked in review:\n\n"
            "1. No secrets in the repository (passwords, API keys, tokens). Configuration reads them from the "
            "environment; placeholder values in `*.example` files are fine.\n"
            "2. Every TODO carries a due date, `# TODO(YYYY-MM-DD): ...`, and must be resolved by then. A TODO whose "
            "date has passed is a finding.\n"
            f"3. Every public function (name not starting with `_`) in `{pkg}/` is called by at least one test in "
            "`tests/`.\n"
            "4. `requirements.txt` must not pin a release listed in `docs/yanked-releases.md`.\n"
            f"5. No file larger than {limit_kb} KB is committed; big data lives on the shared drive.\n")
        files.update(tests)

        # --- history: the problems arrive over a few commits by different people
        a1, a2, a3 = (f"{p} <{flavor.email_of(p)}>" for p in (owner, dev2, dev3))
        first = {k: v for k, v in files.items() if k.startswith(("README", "pyproject", ".gitignore", rules_file,
                                                                   f"{pkg}/__init__"))}
        code = {k: v for k, v in files.items() if k in mod_text or k.startswith("tests/")}
        rest = {k: v for k, v in files.items() if k not in first and k not in code}
        y = int(today[:4]) - 1
        commits = [
            {"message": rng.choice(["Initial commit", f"Start {project}", "Project skeleton", "First commit"]),
             "files": first, "author": a1, "date": vocab.commit_date(rng, y, (9, 10))},
            {"message": rng.choice(["Add helpers and tests", f"Import the {project_word} helpers", "Helpers + tests",
                                    "Move the helpers into the package"]),
             "files": code, "author": a2, "date": vocab.commit_date(rng, y, (11, 12))},
            {"message": rng.choice(["Deployment settings, requirements and data", "Deploy config and data files",
                                    "Settings for production, pinned requirements", "Add data and deploy settings"]),
             "files": rest, "author": a3, "date": vocab.commit_date(rng, y + 1, (1, 2))},
        ]
        ws_file = WorkspaceFile(path=repo, generate=GeneratedContent(kind="git", params={"commits": commits}))
        return _Repository(pkg, project, project_word, repo, owner, dev2, dev3, kinds, today, rules_file, limit_kb,
                           findings, commits, ws_file, secret)

    # ------------------------------------------------------------------------------------------ phrasing
    def _request(self, ctx: OpContext, data: _Repository) -> _Request:
        """Where the review goes, in which format with which field names, and the request (the findings are put
        in the order the review lists them)."""
        rng = ctx.rng
        repo, today, rules_file, findings, kinds = data.repo, data.today, data.rules_file, data.findings, data.kinds
        owner, dev2, dev3, project, project_word = data.owner, data.dev2, data.dev3, data.project, data.project_word
        pkg, limit_kb, commits = data.pkg, data.limit_kb, data.commits
        fmt = rng.choice(["md", "md", "json"])
        folder = world.folder(ctx.persona, rng, REVIEW_FOLDERS, p_world=0.3)
        stem = rng.choice(["review", f"{project}_review", "code_review", f"review_{today}", "findings",
                           f"{pkg}_audit", "merge_review"])
        out = ctx.path(f"{folder}/{stem}.{fmt}" if rng.random() < 0.6 else f"{stem}.{fmt}")
        f_file = rng.choice(["file", "file", "path"])
        f_cat = rng.choice(["category", "rule", "kind", "type"])
        f_note = rng.choice(["note", "detail", "fix", "comment"])
        rng.shuffle(findings)
        slots = dict(rel=rng.choice(["relative to the repository root", "relative to the repo root",
                                     "as seen from the repo's top folder", "from the root of the repository"]),
                     repo=repo, today=today, rules=rules_file, out=out, kinds=", ".join(KINDS), ff=f_file,
                     fc=f_cat, fn=f_note, who=rng.choice([dev2, dev3]).split()[0], p=project_word,
                     n=len(kinds) + rng.choice([-1, 0, 1, 2]))
        if fmt == "md":
            spec = one_of(rng, [
                "[Write the review to|Put the review in|Save the review as] `{out}` (Markdown): one bullet per "
                "finding that names the file path ({rel}) and says what is wrong and how to fix it.",
                "The review goes in `{out}` as Markdown, one bullet per finding: [the file path {rel}, what is "
                "wrong, how to fix it|file ({rel}), problem and fix].",
                "[I need|Give me] a Markdown file `{out}` with one bullet per finding; each bullet names the file "
                "path ({rel}) and [says what is wrong and how to fix it|explains the "
                "problem and the fix].",
            ], **slots)
        else:
            spec = one_of(rng, [
                "Write the review to `{out}` as a JSON list with one object per finding: `{ff}` (path {rel}), `{fc}` (one of {kinds}) and `{fn}` (what is wrong and the fix). [List only real "
                "findings.|No false alarms, please.|Only real violations.]",
                "[I need|Save] the findings [as|in] `{out}`: a JSON list of objects with `{ff}` ({rel}), `{fc}` (one "
                "of {kinds}) and `{fn}` (problem and fix). [Leave out anything that is fine.|"
                "Don't list things that follow the rules.|Only real findings count.]",
            ], **slots)
        opening = one_of(rng, [
            "Please review the repository `{repo}` against its {rules} before I merge it (today is {today}).",
            "Can you do a code review of `{repo}`? Check it against the house rules in its {rules} (today's date: "
            "{today}) and report every violation you find[ - but only real ones|, and nothing that is fine].",
            "I inherited `{repo}` and want to know what breaks our rules ({rules} in the repo; it is {today} "
            "today).",
            "[Before|Ahead of] [the release|the merge|handing it over], [could you|please] [audit `{repo}` against|check "
            "`{repo}` against|go through `{repo}` for violations of] `{rules}`? [Today is {today}.|It's {today}.]",
            "{who} [wants to merge|asked me to approve|is about to ship] `{repo}`[ for the {p}|]. [Check|Review] it "
            "against the rules in `{rules}` (date: {today})[ - I suspect there are around {n} problems|].",
            "[Review time|Code review, please]: `{repo}`, [checked against|judged by] its `{rules}`, as of {today}.",
        ], **slots)
        facts = [
            "[There are|The repo has] three commits, by {a1}, {a2} and {a3}",
            "placeholders in `.env.example` are [fine|allowed|not a finding]",
            "[the yanked releases are listed in|our mirror's yank list is] `docs/yanked-releases.md`",
            "[the size limit is {limit} KB|nothing above {limit} KB may be committed]",
            "{a3} added the deployment settings[ on {d3}|]",
            "[I only care about the rules in `{rules}`|style nits don't count, only the rules in `{rules}`]",
            "the package is `{pkg}/` and its tests are in `tests/`",
            "[private helpers (leading `_`) need no tests|a helper whose name starts with `_` needs no test]",
        ]
        fs = dict(slots, a1=owner, a2=dev2, a3=dev3, limit=limit_kb, d3=commits[2]["date"][:10], pkg=pkg)
        notes = [expand(f, rng, **fs) for f in rng.sample(facts, k=rng.choice([0, 1, 1, 2, 3]))]
        notes = " ".join(n[:1].upper() + n[1:] + "." for n in notes)
        parts = [opening, notes, spec] if rng.random() < 0.5 else [opening, spec, notes]
        instruction = ("\n" if rng.random() < 0.3 else " ").join(p for p in parts if p)
        return _Request(out, fmt, f_file, f_cat, f_note, instruction)

    # ------------------------------------------------------------------------------------------ checks
    @staticmethod
    def _checks(data: _Repository, ask: _Request) -> list[Check]:
        """One check per finding (its file named with words of its kind nearby, or its JSON object), and for a
        JSON review no finding that is not one."""
        findings, out, fmt, f_file, f_cat = data.findings, ask.out, ask.fmt, ask.f_file, ask.f_cat
        checks = []
        for f in sorted(findings, key=lambda x: KINDS.index(x["kind"])):
            name = {"secret": "secret_flagged", "stale_todo": "stale_todo_flagged",
                    "untested_function": "untested_function_flagged", "yanked_dependency": "yanked_dependency_flagged",
                    "large_file": "large_file_flagged"}[f["kind"]]
            if fmt == "md":
                checks.append(Check(name, "sys_text_findings", {"path": out, "findings": [[f["file"], f["groups"]]],
                                                                "window": 2}))
            else:
                checks.append(Check(name, "sys_findings", {"path": out, "fields": [f_file, f_cat],
                                                           "path_fields": [f_file],
                                                           "expected": [{f_file: f["file"], f_cat: f["kind"]}]}))
        expected = [{f_file: f["file"], f_cat: f["kind"]} for f in findings]
        if fmt == "json":
            checks.append(Check("no_false_findings", "sys_findings", {
                "path": out, "fields": [f_file, f_cat], "path_fields": [f_file], "expected": expected,
                "mode": "precision"}))
        return checks

    # ------------------------------------------------------------------------------------------ solutions
    @staticmethod
    def _solutions(data: _Repository, ask: _Request) -> tuple[str, str, list]:
        """The review (the reference writes it after reading the rules and the history), and a partial one: half
        the findings and a false one."""
        findings, out, fmt, f_file, f_cat, f_note = data.findings, ask.out, ask.fmt, ask.f_file, ask.f_cat, ask.f_note
        project, today, rules_file, repo = data.project, data.today, data.rules_file, data.repo
        if fmt == "json":
            text = json.dumps([{f_file: f["file"], f_cat: f["kind"], f_note: f["line"].split(": ", 1)[1]}
                               for f in findings], indent=2) + "\n"
            half = json.dumps([{f_file: f["file"], f_cat: f["kind"], f_note: f["line"].split(": ", 1)[1]}
                               for f in findings[: len(findings) // 2]] + [{f_file: ".env.example", f_cat: "secret",
                                                          f_note: "API_KEY in the example file"}], indent=2) + "\n"
        else:
            text = (f"# Review of {project} ({today})\n\nChecked against {rules_file}.\n\n## Findings\n\n"
                    + "\n".join(f"- {f['line']}" for f in findings) + "\n")
            half = (f"# Review of {project}\n\n## Findings\n\n" + "\n".join(f"- {f['line']}" for f in findings[: len(findings) // 2])
                    + "\n- `.env.example`: contains an API key placeholder.\n")
        steps = [read(f"{repo}/{rules_file}"),
                 exec_(f"cd {repo} && git log --stat --format='%h %an %s' | head -60 && grep -rn TODO --include=*.py . "
                       "; wc -c $(git ls-files) | sort -n | tail -5"),
                 write(out, text)]
        return text, half, steps


GENERATORS = [ReviewRepository()]
