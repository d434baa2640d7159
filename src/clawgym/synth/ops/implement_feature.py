"""implement_feature: a git repository where one function is a documented stub (`raise NotImplementedError`,
TODO) and the tests already define the wanted behaviour; the agent implements it so the whole suite passes and
commits. The checker also tries inputs the tests do not contain, so special-casing the tests fails."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _dev_vocab as vocab
from clawgym.synth.ops import operation
from clawgym.synth.ops._pyrepo import (
    PYTEST_ARGS,
    git_commit_cmd,
    module_source,
    package_name,
    repo_scaffold,
    test_source,
    varied_modules,
)
from clawgym.synth.ops.base import Artifact, Check, OpContext, OperationGenerator, StepPlan, edit, exec_, read


@dataclass
class Feature:
    name: str
    module: str
    head: str  # module docstring, imports and constants
    signature: str  # def line + docstring (the stub keeps these)
    body: str  # the reference implementation's body
    naive: str  # a plausible first attempt that misses edge cases
    tests: str  # the test module body (after the imports)
    hidden: list[list[str]]  # [call, expected] cases the tests do not contain
    ask: str  # what the feature is, in a request


FEATURES: list[Feature] = [
    Feature(
        "parse_duration", "durations",
        '"""Durations as people type them in the rota sheet."""\n\nimport re\n',
        '''def parse_duration(text):
    """Turn a duration like '1h30m', '45m', '2h', '90s' or '1h 5m 10s' into a number of seconds (int).

    Units are h, m and s (case-insensitive), each at most once and in that order; spaces between the parts are
    allowed. A bare number means minutes. Anything else (empty text, unknown units, negative numbers) raises
    ValueError.
    """
''',
        '''    s = text.strip().lower().replace(" ", "")
    if not s:
        raise ValueError("empty duration")
    if s.isdigit():
        return int(s) * 60
    m = re.fullmatch(r"(?:(\\d+)h)?(?:(\\d+)m)?(?:(\\d+)s)?", s)
    if not m or not any(m.groups()):
        raise ValueError(f"bad duration: {text!r}")
    hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return hours * 3600 + minutes * 60 + seconds
''',
        '''    m = re.fullmatch(r"(?:(\\d+)h)?(?:(\\d+)m)?(?:(\\d+)s)?", text.strip())
    hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return hours * 3600 + minutes * 60 + seconds
''',
        '''def test_hours_and_minutes():
    assert parse_duration("1h30m") == 5400


def test_single_units():
    assert parse_duration("45m") == 2700
    assert parse_duration("2h") == 7200
    assert parse_duration("90s") == 90


def test_spaces_and_case():
    assert parse_duration("1H 5m 10S") == 3910


def test_bare_number_is_minutes():
    assert parse_duration("15") == 900


@pytest.mark.parametrize("bad", ["", "abc", "5x", "-3m", "1m2h"])
def test_rejects_garbage(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)
''',
        [["parse_duration('2h15m')", "8100"], ["parse_duration('0h1s')", "1"], ["parse_duration('3m 20s')", "200"],
         ["parse_duration('120')", "7200"], ["raises(parse_duration, '1d')", "'ValueError'"],
         ["raises(parse_duration, '  ')", "'ValueError'"]],
        "parse durations like `1h30m` into seconds",
    ),
    Feature(
        "format_money", "money_format",
        '"""Money formatting for invoices and reports."""\n\nSYMBOLS = {"EUR": "€", "USD": "$", "GBP": "£"}\n',
        '''def format_money(amount, currency="EUR"):
    """Format an amount for humans: 1234.5 -> '€1,234.50'.

    EUR, USD and GBP use their symbol (see SYMBOLS) in front of the number; any other currency code goes after
    it: '1,234.50 CHF'. Codes are case-insensitive. Always two decimals and comma thousands separators; a
    negative amount gets a minus sign in front of everything: '-€12.00'.
    """
''',
        '''    sign = "-" if amount < 0 else ""
    number = f"{abs(amount):,.2f}"
    code = currency.upper()
    if code in SYMBOLS:
        return f"{sign}{SYMBOLS[code]}{number}"
    return f"{sign}{number} {code}"
''',
        '''    return f"{SYMBOLS.get(currency, '')}{amount:.2f}"
''',
        '''def test_euro_default():
    assert format_money(1234.5) == "€1,234.50"


def test_dollars():
    assert format_money(9.99, "USD") == "$9.99"


def test_negative():
    assert format_money(-12, "GBP") == "-£12.00"


def test_other_currency_goes_after():
    assert format_money(1500000, "CHF") == "1,500,000.00 CHF"


def test_code_case_insensitive():
    assert format_money(3, "usd") == "$3.00"
''',
        [["format_money(0.5, 'GBP')", "'£0.50'"], ["format_money(2500)", "'€2,500.00'"],
         ["format_money(-1999.999, 'USD')", "'-$2,000.00'"], ["format_money(42, 'SEK')", "'42.00 SEK'"],
         ["format_money(7.25, 'eur')", "'€7.25'"]],
        "format money amounts with currency symbols",
    ),
    Feature(
        "chunk", "batching",
        '"""Batching helpers for uploads and mail merges."""\n',
        '''def chunk(items, size):
    """Split a sequence into lists of `size` items, in order; the last list may be shorter.

    Always returns a list of lists (also for tuples or strings). An empty sequence gives []. A size below 1
    raises ValueError.
    """
''',
        '''    if size < 1:
        raise ValueError("size must be at least 1")
    items = list(items)
    return [items[i : i + size] for i in range(0, len(items), size)]
''',
        '''    return [items[i : i + size] for i in range(0, len(items), size)]
''',
        '''def test_chunk_even_and_rest():
    assert chunk([1, 2, 3, 4, 5, 6, 7], 3) == [[1, 2, 3], [4, 5, 6], [7]]


def test_chunk_empty():
    assert chunk([], 2) == []


def test_chunk_tuple_gives_lists():
    assert chunk(("a", "b"), 5) == [["a", "b"]]


@pytest.mark.parametrize("size", [0, -1])
def test_chunk_bad_size(size):
    with pytest.raises(ValueError):
        chunk([1, 2, 3], size)
''',
        [["chunk(list(range(6)), 2)", "[[0, 1], [2, 3], [4, 5]]"], ["chunk([1], 1)", "[[1]]"],
         ["chunk('abcde', 2)", "[['a', 'b'], ['c', 'd'], ['e']]"], ["raises(chunk, [1, 2], -2)", "'ValueError'"]],
        "split lists into batches",
    ),
    Feature(
        "normalize_phone", "phones",
        '"""Phone number clean-up for the contact list."""\n',
        '''def normalize_phone(number, default_country="44"):
    """Normalise a phone number to '+' followed by digits only.

    '+1 (555) 010-2345' -> '+15550102345'. A leading '00' means '+': '0044 20 7946 0958' -> '+442079460958'.
    A national number (a single leading 0) gets `default_country` instead of the 0: '020 7946 0958' ->
    '+442079460958'. Anything else is taken to include its country code already. Fewer than 7 digits raises
    ValueError.
    """
''',
        '''    raw = number.strip()
    digits = "".join(c for c in raw if c.isdigit())
    if len(digits) < 7:
        raise ValueError(f"not a phone number: {number!r}")
    if raw.startswith("+"):
        return "+" + digits
    if digits.startswith("00"):
        return "+" + digits[2:]
    if digits.startswith("0"):
        return "+" + default_country + digits[1:]
    return "+" + digits
''',
        '''    return "+" + "".join(c for c in number if c.isdigit())
''',
        '''def test_international():
    assert normalize_phone("+1 (555) 010-2345") == "+15550102345"


def test_double_zero_prefix():
    assert normalize_phone("0044 20 7946 0958") == "+442079460958"


def test_national_number_gets_default_country():
    assert normalize_phone("020 7946 0958") == "+442079460958"
    assert normalize_phone("030 1234567", default_country="49") == "+49301234567"


def test_too_short():
    with pytest.raises(ValueError):
        normalize_phone("12-34")
''',
        [["normalize_phone('+44 7700 900123')", "'+447700900123'"],
         ["normalize_phone('0033 1 42 68 53 00')", "'+33142685300'"],
         ["normalize_phone('0161 496 0000')", "'+441614960000'"],
         ["normalize_phone('0612345678', '31')", "'+31612345678'"], ["raises(normalize_phone, '555')", "'ValueError'"]],
        "normalise phone numbers",
    ),
    Feature(
        "next_business_day", "calendar",
        '"""Calendar helpers for deadlines."""\n\nimport datetime\n',
        '''def next_business_day(day, holidays=()):
    """The first Monday-Friday date strictly after `day` (a datetime.date) that is not in `holidays`."""
''',
        '''    current = day + datetime.timedelta(days=1)
    while current.weekday() >= 5 or current in holidays:
        current += datetime.timedelta(days=1)
    return current
''',
        '''    current = day + datetime.timedelta(days=1)
    if current.weekday() == 5:
        current += datetime.timedelta(days=2)
    elif current.weekday() == 6:
        current += datetime.timedelta(days=1)
    return current
''',
        '''def test_midweek():
    assert next_business_day(datetime.date(2026, 3, 4)) == datetime.date(2026, 3, 5)


def test_friday_to_monday():
    assert next_business_day(datetime.date(2026, 3, 6)) == datetime.date(2026, 3, 9)


def test_saturday_to_monday():
    assert next_business_day(datetime.date(2026, 3, 7)) == datetime.date(2026, 3, 9)


def test_skips_holidays():
    holidays = {datetime.date(2026, 3, 9)}
    assert next_business_day(datetime.date(2026, 3, 6), holidays) == datetime.date(2026, 3, 10)
''',
        [["next_business_day(date(2026, 3, 5))", "date(2026, 3, 6)"],
         ["next_business_day(date(2026, 3, 8))", "date(2026, 3, 9)"],
         ["next_business_day(date(2026, 4, 2), {date(2026, 4, 3), date(2026, 4, 6)})", "date(2026, 4, 7)"],
         ["next_business_day(date(2026, 12, 24), {date(2026, 12, 25)})", "date(2026, 12, 28)"]],
        "find the next business day",
    ),
    Feature(
        "summarize_by", "summaries",
        '"""Summaries of exported records."""\n',
        '''def summarize_by(records, key, value):
    """Total of `value` per `key` over a list of dicts: {key: total}, totals as floats rounded to 2 decimals,
    keys in order of first appearance. Records whose value is missing, None or an empty string are skipped
    entirely; numbers written as strings ('12.50') count as numbers.
    """
''',
        '''    totals = {}
    for rec in records:
        raw = rec.get(value)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            continue
        totals[rec[key]] = totals.get(rec[key], 0.0) + float(raw)
    return {k: round(v, 2) for k, v in totals.items()}
''',
        '''    totals = {}
    for rec in records:
        totals[rec[key]] = totals.get(rec[key], 0) + rec[value]
    return {k: round(v, 2) for k, v in totals.items()}
''',
        '''def test_numbers():
    rows = [{"cat": "a", "amt": 1.5}, {"cat": "b", "amt": 2}, {"cat": "a", "amt": 3}]
    assert summarize_by(rows, "cat", "amt") == {"a": 4.5, "b": 2.0}


def test_strings_are_numbers():
    assert summarize_by([{"k": "x", "v": "12.50"}, {"k": "x", "v": "0.25"}], "k", "v") == {"x": 12.75}


def test_blank_values_skipped():
    rows = [{"k": "x", "v": ""}, {"k": "y", "v": None}, {"k": "z"}, {"k": "x", "v": 1}]
    assert summarize_by(rows, "k", "v") == {"x": 1.0}


def test_rounding_and_order():
    rows = [{"k": "b", "v": 0.1}, {"k": "a", "v": 1}, {"k": "b", "v": 0.2}]
    result = summarize_by(rows, "k", "v")
    assert result == {"b": 0.3, "a": 1.0}
    assert list(result) == ["b", "a"]
''',
        [["summarize_by([{'c': 'x', 'v': 1}, {'c': 'y', 'v': 2}, {'c': 'x', 'v': 3}], 'c', 'v')",
          "{'x': 4.0, 'y': 2.0}"],
         ["summarize_by([{'c': 'a', 'v': '1.10'}, {'c': 'a', 'v': '2.20'}], 'c', 'v')", "{'a': 3.3}"],
         ["summarize_by([{'c': 'a', 'v': ''}, {'c': 'b', 'v': 5}], 'c', 'v')", "{'b': 5.0}"],
         ["list(summarize_by([{'k': 'z', 'n': '1'}, {'k': 'a', 'n': 1}], 'k', 'n'))", "['z', 'a']"]],
        "total exported records per key",
    ),
]

STUB_LINE = '    # TODO: implement (see the docstring and the tests)\n    raise NotImplementedError("{name}")\n'


def renamed_feature(f: Feature, name: str, module: str) -> Feature:
    """`f` as function `name` in module file `module` (whole-word renames: the same behaviour and cases)."""
    m = {f.name: name}
    r = vocab.rename_words
    return Feature(name, module, f.head, r(f.signature, m), r(f.body, m), r(f.naive, m), r(f.tests, m),
                   [[r(c, m), e] for c, e in f.hidden], r(f.ask, m))


def feature_module(f: Feature, body: str | None = None) -> str:
    return f.head + "\n\n" + f.signature + (body if body is not None else STUB_LINE.format(name=f.name))


def feature_tests(pkg: str, f: Feature) -> str:
    imports = ["import datetime", "", "import pytest", "", f"from {pkg}.{f.module} import {f.name}", "", ""]
    return "\n".join(imports) + "\n" + f.tests


@dataclass
class _Repo:
    """The data stage: the repository, the feature left as a stub and its history."""

    pkg: str
    repo: str  # its path in the workspace
    owner: str
    feat: Feature  # the feature, renamed
    modules: dict  # the other modules -> their functions
    project_word: str
    tests: dict[str, str]  # path in the repo -> test module
    mod_path: str  # the stub's module, in the repo
    test_path: str  # its tests
    d2: str  # the stub commit's date
    stub_msg: str  # ... and message
    commits: list[dict]
    ws_file: WorkspaceFile


@operation
class ImplementFeature(OperationGenerator):
    id = "implement_feature"
    consumes: tuple[str, ...] = ()
    produces: tuple[str, ...] = ()
    standalone = True
    folder_scoped = True

    def plan(self, ctx: OpContext, source: Artifact | None = None) -> StepPlan:
        r = self._repo(ctx)
        instruction = self._request(ctx, r)
        repo, feat = r.repo, r.feat
        stub = STUB_LINE.format(name=feat.name)
        target = f"{repo}/{r.mod_path}"
        steps = [read(target), read(f"{repo}/{r.test_path}"), edit(target, stub, feat.body),
                 exec_(git_commit_cmd(repo, ctx.persona.name, f"Implement {feat.name}"))]
        partial = [edit(target, stub, feat.naive)]  # a first attempt that misses edge cases, not committed
        digest = hashlib.sha256(repr((r.pkg, feat.name, sorted(r.modules), repo)).encode()).hexdigest()[:16]
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=[r.ws_file],
            checks=self._checks(r),
            steps=steps,
            partial=partial,
            outputs=[],
            summary=f"implement {feat.name} in {repo}",
            fingerprint=digest,
        )

    # ----------------------------------------------------------------------------------------- data
    @staticmethod
    def _repo(ctx: OpContext) -> _Repo:
        """The package, one of FEATURES under another name as a stub with its tests, 1-2 other modules, and the
        git history: the helpers first, then the stub and its tests."""
        rng = ctx.rng
        pkg = package_name(ctx.persona, rng)
        project = pkg.replace("_", rng.choice(["-", "-", "_"]))
        repo = vocab.repo_path(ctx, project)
        owner = flavor.person(rng)
        base = rng.choice(FEATURES)
        feat = renamed_feature(base, rng.choice(vocab.FUNC_ALIASES.get(base.name, [base.name])),
                               rng.choice(vocab.FEATURE_MODULE_ALIASES.get(base.module, [base.module])))
        modules = varied_modules(rng, rng.randint(1, 2))
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        project_word = rng.choice(voc["projects"])
        blurb = expand("[Helpers|Small utilities|Scripts|Shared code|Python helpers] [for|behind|used by] our "
                       "{p}", rng, p=project_word)
        files = repo_scaffold(pkg, project, owner, blurb, rng)
        tests: dict[str, str] = {}
        for m, fs in modules.items():
            files[f"{pkg}/{m}.py"] = module_source(m, fs)
            tests[f"tests/test_{m}.py"] = test_source(pkg, m, fs)
        mod_path = f"{pkg}/{feat.module}.py"
        test_path = f"tests/test_{feat.module}.py"
        tests[test_path] = feature_tests(pkg, feat)
        author = f"{owner} <{flavor.email_of(owner)}>"
        year = rng.choice([2025, 2026])
        d1, d2 = vocab.commit_date(rng, year, (1, 4)), vocab.commit_date(rng, year, (5, 9))
        stub_msg = expand("[Add {name} stub and its tests (to be implemented)|Stub out {name}; tests first|"
                          "WIP: tests for {name}, implementation pending|Spec {name} as tests]", rng, name=feat.name)
        commits = [
            {"message": expand("[Initial helpers and tests|First import of {pkg}|Start {project}|Add the helpers "
                               "we use for the {p}]", rng, pkg=pkg, project=project, p=project_word),
             "files": {**files, **{k: v for k, v in tests.items() if k != test_path}},
             "author": author, "date": d1},
            {"message": stub_msg,
             "files": {mod_path: feature_module(feat), test_path: tests[test_path]},
             "author": author, "date": d2},
        ]
        ws_file = WorkspaceFile(path=repo, generate=GeneratedContent(kind="git", params={"commits": commits}))
        return _Repo(pkg, repo, owner, feat, modules, project_word, tests, mod_path, test_path, d2, stub_msg,
                     commits, ws_file)

    # ----------------------------------------------------------------------------------------- phrasing
    @staticmethod
    def _request(ctx: OpContext, r: _Repo) -> str:
        """The request: where the stub is and what it is for, implement it as documented, leave the tests, make
        the suite pass, 0-2 extra wishes and 0-3 facts (the docstring's first sentence, the signature, ...), and
        commit."""
        rng = ctx.rng
        feat, pkg = r.feat, r.pkg
        cmd = rng.choice(vocab.PYTEST_COMMANDS)
        para = " ".join(x.strip() for x in feat.signature.split('"""')[1].split("\n\n")[0].split("\n"))
        doc_line = para.split(". ")[0].rstrip(".") + "."
        sig = feat.signature.split("\n", 1)[0].removeprefix("def ").rstrip(":")
        slots = dict(doc=doc_line, sig=sig, mods=", ".join(f"`{pkg}/{m}.py`" for m in r.modules) or "nothing else",
                     repo=r.repo, name=feat.name, mod=r.mod_path, test=r.test_path, ask=feat.ask, cmd=cmd,
                     owner=r.owner.split()[0], date=r.d2[:10], p=r.project_word, msg=r.stub_msg, pkg=pkg)
        opening = one_of(rng, [
            "In the `{repo}` repository, `{name}` in `{mod}` is still a stub[ ({owner} left a TODO)|].",
            "I need to {ask} [in|for] `{repo}`[ for the {p}|]: `{name}` (in `{mod}`) [has only a stub|is not written "
            "yet|raises NotImplementedError].",
            "Could you finish the TODO in `{repo}/{mod}`? `{name}` has a docstring and tests but no code[ yet|].",
            "[{owner} wrote the tests|The tests are written] for `{name}` in `{repo}`[ on {date}|], but the "
            "function itself is [empty|a stub|missing its body].",
            "[New feature|Feature request|Small feature] for `{repo}`: {ask}. The [stub|skeleton] is `{name}` in "
            "`{mod}`.",
            "[The {p} needs|For the {p} I need|We need] `{name}` [working|implemented|done] in `{repo}` "
            "(`{mod}`); right now it only raises NotImplementedError.",
        ], **slots)
        reqs = [
            expand("[implement it as its docstring describes|write the body so it does what the docstring says|"
                   "make it behave as documented in the docstring and in `{test}`|implement it so it works for any "
                   "input the docstring allows, not just the test cases]", rng, **slots),
            expand("[don't change the tests in `{test}`|leave `{test}` as it is|keep the tests unchanged (they are "
                   "the spec)|don't touch the tests]", rng, **slots),
            expand("[make sure|check that] `{cmd}` [passes|is green|runs clean] in the repo", rng, **slots),
        ]
        last = expand("[commit your work|commit it[ to git|]|commit the implementation|leave it committed, with a "
                      "clean work tree]", rng)
        extras = ["[keep the function's name and signature|don't change the signature]",
                  "[use only the standard library|add no new dependencies]",
                  "[keep the other modules as they are|don't touch the other helpers]"]
        reqs += [expand(e, rng) for e in rng.sample(extras, k=rng.randint(0, 2))]
        facts = ["[the stub came in with \"{msg}\"|the commit that added it says \"{msg}\"]",
                 "[its docstring starts|the docstring says]: \"{doc}\"",
                 "[the repo also has|next to it are] {mods}",
                 "the signature is `{sig}`",
                 "[the tests in `{test}` define the behaviour|`{test}` is the spec]",
                 "[{owner} is waiting for it|it's for the {p}|the {p} is blocked on this]"]
        notes = [expand(e, rng, **slots) for e in rng.sample(facts, k=rng.choice([0, 1, 1, 2, 3]))]
        return opening + ("\n" if rng.random() < 0.3 else " ") + vocab.ask(rng, reqs, notes, last)

    # ----------------------------------------------------------------------------------------- checks
    @staticmethod
    def _checks(r: _Repo) -> list[Check]:
        """The suite passing (counting as far as the feature behaves right on hidden cases), the hidden cases, the
        tests untouched, the work committed on a clean tree."""
        repo, feat = r.repo, r.feat
        setup = f"from {r.pkg}.{feat.module} import {feat.name}"
        return [
            # the suite passing counts as far as the feature behaves right on the hidden cases (and the suite is
            # not even run when it does not at all: the stub left, emptied or overwritten)
            Check("test_suite_passes", "gated", parts=[
                Check("", "pytest_passes", {"cwd": repo, "args": PYTEST_ARGS}),
                Check("", "sys_py_cases", {"cwd": repo, "setup": setup, "cases": feat.hidden})]),
            Check("feature_behaviour", "sys_py_cases", {"cwd": repo, "setup": setup, "cases": feat.hidden}),
            Check("tests_untouched", "min_of", parts=[
                Check("t", "text_equals", {"path": f"{repo}/{p}", "expected": t}) for p, t in r.tests.items()] + [
                Check("c", "sys_py_cases", {"cwd": repo, "setup": setup, "cases": feat.hidden})]),
            Check("feature_committed", "all_of", parts=[
                Check("n", "git_commits_since", {"repo": repo, "base_count": len(r.commits)}),
                Check("clean", "sys_git_clean", {"repo": repo})]),
        ]


GENERATORS = [ImplementFeature()]
