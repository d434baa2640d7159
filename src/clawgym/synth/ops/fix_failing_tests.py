"""fix_failing_tests: a small Python package in a git repository whose test suite fails because of 1-3 bugs a
recent commit planted; the agent fixes the code (not the tests) until `python3 -m pytest` passes, and commits.

Also home of the small function library and repository builder that implement_feature and review_repository
reuse: every function has a correct body, tests, and bug mutations with the cases that expose them.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _dev_vocab as vocab
from clawgym.synth.ops.base import Artifact, Check, OpContext, StepPlan, edit, exec_, read

# the suite passes: `python3 -m pytest -q` exits 0. Only the exit status counts, so the grader skips what does not
# change it: the cache it would write into the repo, tracebacks, assertion rewriting, the tests after a failure.
PYTEST_ARGS = ["-q", "-x", "-p", "no:cacheprovider", "--tb=no", "--assert=plain"]


@dataclass
class Bug:
    good: str  # a snippet of the correct source
    bad: str  # what the bug turns it into (unique in the buggy module)
    cases: list[list[str]]  # [call, expected] expressions that all fail with the bug and pass without it
    story: str  # how a commit message would describe the change that planted it


@dataclass
class Func:
    name: str
    module: str
    code: str
    tests: list[str]
    bugs: list[Bug] = field(default_factory=list)
    kind: str = ""  # the library module it comes from (MODULE_IMPORTS key) when `module` is another file name


MODULE_IMPORTS = {"money": [], "dates": ["import datetime"], "text": ["import re", "import unicodedata"],
                  "stats": []}
MODULE_DOCS = {"money": "Money helpers: splitting bills, parsing amounts, changes in percent.",
               "dates": "Date helpers for rotas, deadlines and ages.",
               "text": "Text helpers for file names and privacy-safe exports.",
               "stats": "Small statistics used by the weekly reports."}

FUNCS: list[Func] = [
    Func("split_bill", "money", '''def split_bill(total, people):
    """Split `total` between `people` so the shares differ by at most one cent and add up to the total exactly.
    The first shares get the extra cents."""
    if people < 1:
        raise ValueError("people must be at least 1")
    cents = round(total * 100)
    base, extra = divmod(cents, people)
    return [(base + (1 if i < extra else 0)) / 100 for i in range(people)]
''', ['''def test_split_bill_even():
    assert split_bill(30, 3) == [10.0, 10.0, 10.0]
''', '''def test_split_bill_remainder_goes_to_first():
    assert split_bill(10, 3) == [3.34, 3.33, 3.33]
''', '''def test_split_bill_adds_up():
    shares = split_bill(0.29, 2)
    assert shares == [0.15, 0.14]
    assert round(sum(shares), 2) == 0.29
'''], [
        Bug("(1 if i < extra else 0)", "(1 if i <= extra else 0)",
            [["split_bill(10, 3)", "[3.34, 3.33, 3.33]"], ["split_bill(30, 3)", "[10.0, 10.0, 10.0]"]],
            "simplify the remainder handling in split_bill"),
        Bug("cents = round(total * 100)", "cents = int(total * 100)",
            [["split_bill(0.29, 2)", "[0.15, 0.14]"], ["split_bill(1.15, 1)", "[1.15]"]],
            "use integer cents in split_bill"),
    ]),
    Func("parse_amount", "money", '''def parse_amount(text):
    """'$1,234.50' -> 1234.5; '(12.00)' (accounting negative) -> -12.0; currency signs and spaces are ignored."""
    s = text.strip()
    for sign in ("$", "€", "£", " "):
        s = s.replace(sign, "")
    s = s.replace(",", "")
    negative = s.startswith("(") and s.endswith(")")
    if negative:
        s = s[1:-1]
    value = float(s)
    return -value if negative else value
''', ['''def test_parse_amount_plain():
    assert parse_amount("42.10") == 42.1
''', '''def test_parse_amount_thousands_and_currency():
    assert parse_amount("$1,234.50") == 1234.5
''', '''def test_parse_amount_accounting_negative():
    assert parse_amount("(12.00)") == -12.0
'''], [
        Bug('        s = s.replace(sign, "")\n    s = s.replace(",", "")\n', '        s = s.replace(sign, "")\n',
            [["parse_amount('$1,234.50')", "1234.5"], ["parse_amount('2,000')", "2000.0"]],
            "drop the separate comma handling in parse_amount"),
        Bug("    return -value if negative else value\n", "    return value\n",
            [["parse_amount('(12.00)')", "-12.0"], ["parse_amount('(3.5)')", "-3.5"]],
            "tidy up the return of parse_amount"),
    ]),
    Func("percent_change", "money", '''def percent_change(old, new):
    """Change from `old` to `new` in percent, rounded to one decimal; None when `old` is 0."""
    if old == 0:
        return None
    return round((new - old) / old * 100, 1)
''', ['''def test_percent_change_up():
    assert percent_change(80, 100) == 25.0
''', '''def test_percent_change_down():
    assert percent_change(200, 150) == -25.0
''', '''def test_percent_change_from_zero():
    assert percent_change(0, 10) is None
'''], [
        Bug("(new - old) / old * 100", "(new - old) / new * 100",
            [["percent_change(80, 100)", "25.0"], ["percent_change(50, 40)", "-20.0"]],
            "reformat percent_change"),
        Bug("    if old == 0:\n        return None\n", "    if new == 0:\n        return None\n",
            [["percent_change(0, 10)", "None"], ["percent_change(10, 0)", "-100.0"]],
            "guard percent_change against division by zero"),
    ]),
    Func("working_days", "dates", '''def working_days(start, end, holidays=()):
    """Number of Monday-Friday days from `start` to `end`, both included, that are not in `holidays`."""
    days = 0
    current = start
    while current <= end:
        if current.weekday() < 5 and current not in holidays:
            days += 1
        current += datetime.timedelta(days=1)
    return days
''', ['''def test_working_days_one_week():
    assert working_days(datetime.date(2026, 3, 2), datetime.date(2026, 3, 8)) == 5
''', '''def test_working_days_includes_both_ends():
    assert working_days(datetime.date(2026, 3, 2), datetime.date(2026, 3, 6)) == 5
''', '''def test_working_days_skips_holidays():
    holidays = {datetime.date(2026, 3, 4)}
    assert working_days(datetime.date(2026, 3, 2), datetime.date(2026, 3, 6), holidays) == 4
'''], [
        Bug("while current <= end:", "while current < end:",
            [["working_days(date(2026, 3, 2), date(2026, 3, 6))", "5"],
             ["working_days(date(2026, 3, 9), date(2026, 3, 9))", "1"]],
            "loop until the end date in working_days"),
        Bug("current.weekday() < 5 and", "current.weekday() < 6 and",
            [["working_days(date(2026, 3, 2), date(2026, 3, 8))", "5"],
             ["working_days(date(2026, 3, 7), date(2026, 3, 8))", "0"]],
            "make the weekday check in working_days clearer"),
    ]),
    Func("age_on", "dates", '''def age_on(birth, day):
    """Age in whole years on `day` of someone born on `birth`."""
    years = day.year - birth.year
    if (day.month, day.day) < (birth.month, birth.day):
        years -= 1
    return years
''', ['''def test_age_on_after_birthday():
    assert age_on(datetime.date(1990, 5, 17), datetime.date(2026, 6, 1)) == 36
''', '''def test_age_on_before_birthday():
    assert age_on(datetime.date(1990, 5, 17), datetime.date(2026, 5, 16)) == 35
''', '''def test_age_on_the_birthday():
    assert age_on(datetime.date(1990, 5, 17), datetime.date(2026, 5, 17)) == 36
'''], [
        Bug("if (day.month, day.day) < (birth.month, birth.day):", "if (day.month, day.day) <= (birth.month, birth.day):",
            [["age_on(date(1990, 5, 17), date(2026, 5, 17))", "36"], ["age_on(date(2000, 1, 1), date(2026, 1, 1))", "26"]],
            "compare birthdays as tuples in age_on"),
        Bug("if (day.month, day.day) < (birth.month, birth.day):", "if day.month < birth.month:",
            [["age_on(date(1990, 5, 17), date(2026, 5, 16))", "35"], ["age_on(date(1985, 8, 30), date(2026, 8, 2))", "40"]],
            "simplify the birthday check in age_on"),
    ]),
    Func("slugify", "text", '''def slugify(title):
    """'Café Menu - Spring 2026!' -> 'cafe-menu-spring-2026': ASCII, lower case, words joined by single hyphens."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    text = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")
    return text.lower()
''', ['''def test_slugify_basic():
    assert slugify("Quarterly Report") == "quarterly-report"
''', '''def test_slugify_accents_and_punctuation():
    assert slugify("Café Menu — Spring 2026!") == "cafe-menu-spring-2026"
''', '''def test_slugify_trims_hyphens():
    assert slugify("  --Draft v2--  ") == "draft-v2"
'''], [
        Bug('text = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")', 'text = re.sub(r"[^A-Za-z0-9]+", "-", text)',
            [["slugify('Hello, World!')", "'hello-world'"], ["slugify(' x ')", "'x'"]],
            "simplify slugify"),
        Bug("    return text.lower()\n", "    return text\n",
            [["slugify('Quarterly Report')", "'quarterly-report'"], ["slugify('ABC def')", "'abc-def'"]],
            "keep the original case in slugify"),
    ]),
    Func("mask_email", "text", '''def mask_email(address):
    """'amara.okafor@example.org' -> 'a***@example.org' (the domain in lower case)."""
    user, _, domain = address.strip().partition("@")
    if not user or not domain:
        raise ValueError(f"not an email address: {address!r}")
    return user[0] + "***@" + domain.lower()
''', ['''def test_mask_email():
    assert mask_email("amara.okafor@example.org") == "a***@example.org"
''', '''def test_mask_email_lowercases_domain():
    assert mask_email("Lars@Example.ORG") == "L***@example.org"
''', '''def test_mask_email_rejects_garbage():
    with pytest.raises(ValueError):
        mask_email("not-an-address")
'''], [
        Bug('return user[0] + "***@"', 'return user[:2] + "***@"',
            [["mask_email('amara.okafor@example.org')", "'a***@example.org'"], ["mask_email('zoe@x.io')", "'z***@x.io'"]],
            "show a little more of the user name in mask_email"),
        Bug("if not user or not domain:", "if not user:",
            [["raises(mask_email, 'not-an-address')", "'ValueError'"], ["raises(mask_email, 'bob')", "'ValueError'"]],
            "relax the address check in mask_email"),
    ]),
    Func("moving_average", "stats", '''def moving_average(values, window):
    """Averages of each run of `window` consecutive values, rounded to 2 decimals."""
    if window <= 0:
        raise ValueError("window must be positive")
    out = []
    for i in range(window - 1, len(values)):
        chunk = values[i - window + 1 : i + 1]
        out.append(round(sum(chunk) / window, 2))
    return out
''', ['''def test_moving_average():
    assert moving_average([1, 2, 3, 4, 5], 2) == [1.5, 2.5, 3.5, 4.5]
''', '''def test_moving_average_window_equals_length():
    assert moving_average([3, 6, 9], 3) == [6.0]
''', '''def test_moving_average_rejects_bad_window():
    with pytest.raises(ValueError):
        moving_average([1, 2], 0)
'''], [
        Bug("for i in range(window - 1, len(values)):", "for i in range(window, len(values)):",
            [["moving_average([1, 2, 3, 4, 5], 2)", "[1.5, 2.5, 3.5, 4.5]"], ["moving_average([3, 6, 9], 3)", "[6.0]"]],
            "fix the loop bounds in moving_average"),
        Bug("round(sum(chunk) / window, 2)", "round(sum(chunk) / len(values), 2)",
            [["moving_average([10, 20, 30], 2)", "[15.0, 25.0]"], ["moving_average([2, 4, 6, 8], 2)", "[3.0, 5.0, 7.0]"]],
            "normalise moving_average"),
    ]),
    Func("top_n", "stats", '''def top_n(counts, n):
    """The `n` (name, count) pairs with the highest counts, highest first; ties in alphabetical order."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
''', ['''def test_top_n():
    assert top_n({"a": 1, "b": 5, "c": 3}, 2) == [("b", 5), ("c", 3)]
''', '''def test_top_n_ties_alphabetical():
    assert top_n({"pear": 2, "apple": 2, "fig": 1}, 2) == [("apple", 2), ("pear", 2)]
'''], [
        Bug("key=lambda kv: (-kv[1], kv[0]))[:n]", "key=lambda kv: kv[1], reverse=True)[:n]",
            [["top_n({'pear': 2, 'apple': 2, 'fig': 1}, 2)", "[('apple', 2), ('pear', 2)]"],
             ["top_n({'b': 1, 'a': 1}, 1)", "[('a', 1)]"]],
            "sort top_n with reverse=True"),
    ]),
]
FUNC_BY_NAME = {f.name: f for f in FUNCS}

def package_name(persona, rng=None) -> str:
    """The package's name (see _dev_vocab.package_name: drawn when `rng` is given)."""
    return vocab.package_name(persona, rng)


def module_source(module: str, funcs: list[Func], replace: dict[str, str] | None = None) -> str:
    """The module text: docstring, imports, the functions (with `replace`: name -> replacement source)."""
    replace = replace or {}
    kind = (funcs[0].kind if funcs and funcs[0].kind else module)
    parts = [f'"""{MODULE_DOCS.get(kind, module.replace("_", " ").title() + " helpers.")}"""\n']
    if MODULE_IMPORTS.get(kind):
        parts.append("\n".join(MODULE_IMPORTS[kind]) + "\n")
    for f in funcs:
        parts.append("\n" + replace.get(f.name, f.code))
    return "\n".join(parts)


def test_source(pkg: str, module: str, funcs: list[Func], extra: str = "") -> str:
    names = ", ".join(f.name for f in funcs)
    head = ["import datetime", "", "import pytest", "", f"from {pkg}.{module} import {names}", ""]
    body = [t for f in funcs for t in f.tests]
    text = "\n".join(head) + "\n" + "\n\n".join(body)
    if extra:
        text += "\n\n" + extra
    return text


def repo_scaffold(pkg: str, project: str, owner: str, blurb: str, rng=None) -> dict[str, str]:
    """README, pyproject, .gitignore and the package's __init__; with `rng`, a drawn version and Python floor."""
    version = f"0.{rng.randint(1, 9)}.{rng.randint(0, 12)}" if rng is not None else "0.3.0"
    floor = rng.choice(["3.9", "3.10", "3.11"]) if rng is not None else "3.10"
    return {
        "README.md": f"# {project}\n\n{blurb}\n\nRun the tests with `python3 -m pytest -q`.\n",
        "pyproject.toml": (f'[project]\nname = "{project}"\nversion = "{version}"\nrequires-python = ">={floor}"\n'
                           f'authors = [{{name = "{owner}"}}]\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'),
        ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n.venv/\n",
        f"{pkg}/__init__.py": f'"""{project}: {blurb}"""\n\n__version__ = "{version}"\n',
    }


def renamed(f: Func, name: str, module: str) -> Func:
    """`f` under another function name, in a module file called `module` (code, tests, bug snippets, cases and
    stories renamed as whole words: the same behaviour, the same checks)."""
    m = {f.name: name}
    return Func(name, module, vocab.rename_words(f.code, m), [vocab.rename_words(t, m) for t in f.tests],
                [Bug(vocab.rename_words(b.good, m), vocab.rename_words(b.bad, m),
                     [[vocab.rename_words(c, m), e] for c, e in b.cases], vocab.rename_words(b.story, m))
                 for b in f.bugs], kind=f.kind or f.module)


def varied_modules(rng, n_modules: int) -> dict[str, list[Func]]:
    """Like :func:`pick_modules`, with each module under a drawn file name and each function under a drawn name."""
    out: dict[str, list[Func]] = {}
    for kind, funcs in pick_modules(rng, n_modules).items():
        module = rng.choice(vocab.MODULE_ALIASES[kind])
        out[module] = [renamed(f, rng.choice(vocab.FUNC_ALIASES.get(f.name, [f.name])), module) for f in funcs]
    return out


def git_commit_cmd(repo: str, name: str, message: str) -> str:
    """A commit that works without a git identity in the sandbox."""
    return (f"git -C {shlex.quote(repo)} -c user.name={shlex.quote(name)} -c "
            f"user.email={shlex.quote(flavor.email_of(name))} commit -qam {shlex.quote(message)}")


def pick_modules(rng, n_modules: int) -> dict[str, list[Func]]:
    mods = rng.sample(sorted(MODULE_IMPORTS), k=n_modules)
    return {m: [f for f in FUNCS if f.module == m] for m in mods}


class FixFailingTests:
    id = "fix_failing_tests"
    consumes: tuple[str, ...] = ()
    produces: tuple[str, ...] = ()
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None = None) -> StepPlan:
        rng = ctx.rng
        pkg = package_name(ctx.persona, rng)
        project = pkg.replace("_", rng.choice(["-", "-", "_"]))
        repo = vocab.repo_path(ctx, project)
        owner, colleague = flavor.people(rng, 2)
        modules = varied_modules(rng, rng.randint(2, 3))
        all_funcs = [f for fs in modules.values() for f in fs if f.bugs]
        n_bugs = min(len(all_funcs), rng.choice([1, 2, 2, 3]))
        buggy = rng.sample(all_funcs, k=n_bugs)
        bugs = {f.name: rng.choice(f.bugs) for f in buggy}
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        blurb = expand("[Helpers|Small utilities|Scripts|Shared code|Python helpers] [for|behind|used by] our "
                       "{p}", rng, p=rng.choice(voc["projects"]))
        files = repo_scaffold(pkg, project, owner, blurb, rng)
        good_files = dict(files)
        bad_files: dict[str, str] = {}
        tests: dict[str, str] = {}
        for m, fs in modules.items():
            good_files[f"{pkg}/{m}.py"] = module_source(m, fs)
            tests[f"tests/test_{m}.py"] = test_source(pkg, m, fs)
            repl = {f.name: f.code.replace(bugs[f.name].good, bugs[f.name].bad) for f in fs if f.name in bugs}
            if repl:
                bad_files[f"{pkg}/{m}.py"] = module_source(m, fs, repl)
        good_files.update(tests)
        story = "; ".join(bugs[f.name].story for f in buggy)
        year = rng.choice([2025, 2026])
        d1, d3 = vocab.commit_date(rng, year, (1, 3)), vocab.commit_date(rng, year, (5, 9))
        msg = expand("[Refactor|Cleanup|Tidy-up|Small fixes|Review comments|Simplify helpers]: {story}", rng,
                     story=story)
        commits = [
            {"message": expand("[Initial version of the helpers|First import of {pkg}|Add the {pkg} package|Start "
                               "{project}]", rng, pkg=pkg, project=project),
             "files": {k: v for k, v in good_files.items() if not k.startswith("tests/")},
             "author": f"{owner} <{flavor.email_of(owner)}>", "date": d1},
            {"message": rng.choice(["Add tests", "Tests for the helpers", "Cover the helpers with pytest"]),
             "files": dict(tests), "author": f"{owner} <{flavor.email_of(owner)}>", "date": d1[:11] + "17:45:00"},
            {"message": msg, "files": bad_files,
             "author": f"{colleague} <{flavor.email_of(colleague)}>", "date": d3},
        ]
        ws_file = WorkspaceFile(path=repo, generate=GeneratedContent(kind="git", params={"commits": commits}))
        cmd = rng.choice(vocab.PYTEST_COMMANDS)
        who = colleague.split()[0] if rng.random() < 0.6 else colleague
        slots = dict(nf=vocab.plural(len(buggy), "function", "functions").replace("1 function", "one function"),
                     nh=vocab.plural(len(buggy), "helper", "helpers").replace("1 helper", "one helper"),
                     repo=repo, cmd=cmd, who=who, date=d3[:10], msg=msg, pkg=pkg, n=len(buggy),
                     funcs=", ".join(f"`{f.name}`" for f in rng.sample(buggy, len(buggy))),
                     mods=", ".join(f"`{pkg}/{m}.py`" for m in modules), owner=owner.split()[0],
                     project=rng.choice(voc["projects"]))
        opening = one_of(rng, [
            "[Since|Ever since] {who}'s [last|latest|most recent] commit[ on {date}|] the [test suite|tests] in "
            "`{repo}/` [fail|are red|have been failing|no longer pass].",
            "`{cmd}` [is failing|fails|no longer passes|went red] in `{repo}`[ after {who} pushed \"{msg}\"| since "
            "{date}|].",
            "[Something broke|Things broke|We have a regression] in `{repo}`: [CI|the nightly run|my local run] "
            "[reports|shows] failing tests[ since {date}|][, right after {who}'s commit|].",
            "Could you [take a look at|look into|debug|sort out] `{repo}`? [Some|A few|Several] tests [fail|are "
            "failing][ after the \"{msg}\" commit| since {who}'s change on {date}|].",
            "[My|Our|The] `{repo}` [repo|repository|project] [has failing tests|won't pass its tests|is broken]"
            "[ and I need it for the {project}| and the {project} depends on it|].",
            "[Quick|Small|Urgent] [bug hunt|fix needed|repair job]: [tests fail|pytest fails] in `{repo}` "
            "([{who} touched it last|last change by {who}, {date}|it was green before {date}]).",
        ], **slots)
        reqs = [
            expand("[fix the code in `{pkg}/`, not the tests|the tests are right: change the package code, not "
                   "them|leave `tests/` alone and fix the code|don't edit the tests, they describe what we want]",
                   rng, pkg=pkg),
            expand("[make sure|check that] `{cmd}` [passes|is green|runs clean] inside the repo[ afterwards|]",
                   rng, cmd=cmd),
        ]
        last = expand("[commit the fix[ to git|]|commit your change[ on the current branch|]|record the fix in a "
                      "git commit|leave the work tree clean with the fix committed]", rng)
        extras = [
            "[keep the public function names as they are|don't rename any function]",
            "[add no new dependencies|don't add packages]",
            "[keep the fix small|change as little as you can]",
        ]
        reqs += [expand(e, rng) for e in rng.sample(extras, k=rng.randint(0, 2))]
        facts = [
            "[the affected code is probably in {mods}|the package files are {mods}]",
            "[{nf} seem to be affected|I think {nh} broke]",
            "[the failing parts are around {funcs}|I'd look at {funcs} first]",
            "[{owner} wrote the original helpers, and they worked|the first version by {owner} was fine]",
        ]
        notes = [expand(e, rng, **slots) for e in rng.sample(facts, k=rng.randint(0, 2))]
        instruction = opening + ("\n" if rng.random() < 0.3 else " ") + vocab.ask(rng, reqs, notes, last)
        all_cases = [c for f in buggy for c in bugs[f.name].cases]
        fixed = [Check(f"fixed_{f.name}", "sys_py_cases", {
            "cwd": repo, "setup": f"from {pkg}.{f.module} import {f.name}", "cases": bugs[f.name].cases}) for f in buggy]
        # the suite passing counts as far as the fixed functions behave right on the hidden cases (and the suite
        # is not even run when none does: an untouched, emptied or overwritten package)
        checks = [Check("test_suite_passes", "gated", parts=[
            Check("", "pytest_passes", {"cwd": repo, "args": PYTEST_ARGS}),
            Check("", "mean_of", parts=[Check("", c.fn, c.args) for c in fixed])])]
        checks += fixed
        setup = "; ".join(f"from {pkg}.{f.module} import {f.name}" for f in buggy)
        checks.append(Check("tests_untouched", "min_of", parts=[
            Check("t", "text_equals", {"path": f"{repo}/{p}", "expected": t}) for p, t in tests.items()] + [
            Check("c", "sys_py_cases", {"cwd": repo, "setup": setup, "cases": all_cases})]))
        checks.append(Check("fix_committed", "all_of", parts=[
            Check("n", "git_commits_since", {"repo": repo, "base_count": len(commits)}),
            Check("clean", "sys_git_clean", {"repo": repo})]))
        edits = [edit(f"{repo}/{pkg}/{f.module}.py", bugs[f.name].bad, bugs[f.name].good) for f in buggy]
        fix_msg = "Fix " + ", ".join(f.name for f in buggy)
        mod_paths = sorted({f"{repo}/{pkg}/{f.module}.py" for f in buggy})
        steps = [read(p) for p in mod_paths] + edits + [exec_(git_commit_cmd(repo, ctx.persona.name, fix_msg))]
        partial = edits[:1] if len(edits) > 1 else edits  # one bug fixed, nothing committed
        digest = hashlib.sha256(repr((pkg, sorted(modules), sorted((k, v.bad) for k, v in bugs.items()))).encode())
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=[ws_file],
            checks=checks,
            steps=steps,
            partial=partial,
            outputs=[],
            summary=f"fix {len(buggy)} bug{'s' if len(buggy) != 1 else ''} in {repo}",
            fingerprint=digest.hexdigest()[:16],
        )


GENERATORS = [FixFailingTests()]
