"""A small Python package in a git repository, as the `software_development` operations build it: a library of
functions, each with a correct body, tests, and bug mutations with the cases that expose them; the module,
test and scaffold sources; a commit that works without a git identity."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from clawgym.synth import flavor
from clawgym.synth.ops import _dev_vocab as vocab

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
