"""fix_failing_tests: a small Python package in a git repository whose test suite fails because of 1-3 bugs a
recent commit planted; the agent fixes the code (not the tests) until `python3 -m pytest` passes, and commits.

The function library and repository builder it shares with implement_feature and review_repository are in
:mod:`clawgym.synth.ops._pyrepo`.
"""

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
class _Repo:
    """The data stage: the repository, its good history and the commit that planted the bugs."""

    pkg: str
    project: str
    repo: str  # its path in the workspace
    owner: str  # who wrote the helpers
    colleague: str  # who broke them
    voc: dict
    modules: dict  # module name -> its functions
    buggy: list  # the functions with a bug
    bugs: dict  # function name -> its bug
    tests: dict[str, str]  # path in the repo -> test module
    d3: str  # the breaking commit's date
    msg: str  # ... and message
    commits: list[dict]
    ws_file: WorkspaceFile


@operation
class FixFailingTests(OperationGenerator):
    id = "fix_failing_tests"
    consumes: tuple[str, ...] = ()
    produces: tuple[str, ...] = ()
    standalone = True
    folder_scoped = True

    def plan(self, ctx: OpContext, source: Artifact | None = None) -> StepPlan:
        r = self._repo(ctx)
        instruction = self._request(ctx, r)
        repo, pkg, buggy, bugs = r.repo, r.pkg, r.buggy, r.bugs
        edits = [edit(f"{repo}/{pkg}/{f.module}.py", bugs[f.name].bad, bugs[f.name].good) for f in buggy]
        fix_msg = "Fix " + ", ".join(f.name for f in buggy)
        mod_paths = sorted({f"{repo}/{pkg}/{f.module}.py" for f in buggy})
        steps = [read(p) for p in mod_paths] + edits + [exec_(git_commit_cmd(repo, ctx.persona.name, fix_msg))]
        partial = edits[:1] if len(edits) > 1 else edits  # one bug fixed, nothing committed
        digest = hashlib.sha256(repr((pkg, sorted(r.modules), sorted((k, v.bad) for k, v in bugs.items()))).encode())
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=[r.ws_file],
            checks=self._checks(r),
            steps=steps,
            partial=partial,
            outputs=[],
            summary=f"fix {len(buggy)} bug{'s' if len(buggy) != 1 else ''} in {repo}",
            fingerprint=digest.hexdigest()[:16],
        )

    # ----------------------------------------------------------------------------------------- data
    @staticmethod
    def _repo(ctx: OpContext) -> _Repo:
        """The package and its 2-3 modules, 1-3 of their functions with a bug, and the git history: the owner's
        helpers and tests, then the colleague's commit that planted the bugs."""
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
        return _Repo(pkg, project, repo, owner, colleague, voc, modules, buggy, bugs, tests, d3, msg, commits,
                     ws_file)

    # ----------------------------------------------------------------------------------------- phrasing
    @staticmethod
    def _request(ctx: OpContext, r: _Repo) -> str:
        """The request: what broke and since when, fix the code (not the tests) until the suite passes, 0-2
        extra wishes and 0-2 facts that point at the bugs, and commit."""
        rng = ctx.rng
        buggy, colleague, pkg, d3 = r.buggy, r.colleague, r.pkg, r.d3
        cmd = rng.choice(vocab.PYTEST_COMMANDS)
        who = colleague.split()[0] if rng.random() < 0.6 else colleague
        slots = dict(nf=vocab.plural(len(buggy), "function", "functions").replace("1 function", "one function"),
                     nh=vocab.plural(len(buggy), "helper", "helpers").replace("1 helper", "one helper"),
                     repo=r.repo, cmd=cmd, who=who, date=d3[:10], msg=r.msg, pkg=pkg, n=len(buggy),
                     funcs=", ".join(f"`{f.name}`" for f in rng.sample(buggy, len(buggy))),
                     mods=", ".join(f"`{pkg}/{m}.py`" for m in r.modules), owner=r.owner.split()[0],
                     project=rng.choice(r.voc["projects"]))
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
        return opening + ("\n" if rng.random() < 0.3 else " ") + vocab.ask(rng, reqs, notes, last)

    # ----------------------------------------------------------------------------------------- checks
    @staticmethod
    def _checks(r: _Repo) -> list[Check]:
        """The suite passing (counting as far as the fixed functions behave right on hidden cases), each fix on
        its own, the tests untouched, the fix committed on a clean tree."""
        repo, pkg, buggy, bugs = r.repo, r.pkg, r.buggy, r.bugs
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
            Check("t", "text_equals", {"path": f"{repo}/{p}", "expected": t}) for p, t in r.tests.items()] + [
            Check("c", "sys_py_cases", {"cwd": repo, "setup": setup, "cases": all_cases})]))
        checks.append(Check("fix_committed", "all_of", parts=[
            Check("n", "git_commits_since", {"repo": repo, "base_count": len(r.commits)}),
            Check("clean", "sys_git_clean", {"repo": repo})]))
        return checks


GENERATORS = [FixFailingTests()]
